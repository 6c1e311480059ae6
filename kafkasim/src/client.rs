//! A small protocol-level client: send any request `kafka-protocol` defines, get its response.
//!
//! For tests and for driving the broker inside a simulation until a full in-simulation client
//! exists: it frames, numbers (correlation ids) and decodes, nothing more — no retries, no
//! metadata cache, no batching. One request at a time per client.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::codec::{self, RESPONSE_BYTES_MAX};
use crate::error::Error;

/// A connection speaking the Kafka protocol to a broker.
///
/// ```no_run
/// # async fn f(host: sim::net::Host) -> Result<(), kafkasim::Error> {
/// use kafkasim::Client;
/// use kafkasim::kafka_protocol::messages::MetadataRequest;
///
/// let mut client = Client::new(host.dial("kafka-0:9092").await?, "my-app");
/// let metadata = client.send(MetadataRequest::default().with_topics(None), 12).await?;
/// println!("{} brokers", metadata.brokers.len());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Client<S> {
    stream: S,
    client_id: String,
    next_correlation: i32,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    /// A client over `stream` (any byte stream: a sim `TcpStream`, a tokio one, a pipe) that
    /// sends `client_id` in every request header.
    pub fn new(stream: S, client_id: &str) -> Client<S> {
        Client { stream, client_id: client_id.to_string(), next_correlation: 1 }
    }

    /// Encodes a request frame at `version` with the next correlation id; returns it and the id.
    ///
    /// # Errors
    /// [`Error::Encode`] when the request sets a field `version` lacks.
    pub fn encode<R: Request>(&mut self, request: &R, version: i16) -> Result<(Bytes, i32), Error> {
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, R::header_version(version))
            .map_err(|e| Error::Encode { what: "request header", reason: e.to_string() })?;
        request
            .encode(&mut buf, version)
            .map_err(|e| Error::Encode { what: std::any::type_name::<R>(), reason: e.to_string() })?;
        let size =
            i32::try_from(buf.len() - 4).map_err(|_| Error::Encode { what: "request", reason: "too large".into() })?;
        buf[0..4].copy_from_slice(&size.to_be_bytes());
        Ok((buf.freeze(), correlation))
    }

    /// Sends `request` at `version` and waits for its response.
    ///
    /// # Errors
    /// [`Error::Io`] / [`Error::Closed`] from the transport, [`Error::Encode`],
    /// [`Error::Malformed`] when the response does not decode, [`Error::CorrelationMismatch`].
    /// Error codes inside the response are the caller's to read.
    pub async fn send<R: Request>(&mut self, request: R, version: i16) -> Result<R::Response, Error> {
        let (frame, correlation) = self.encode(&request, version)?;
        codec::write_frame(&mut self.stream, &frame).await?;
        self.receive::<R>(correlation, version).await
    }

    /// Sends `request` without waiting for a response (a produce with `acks=0`).
    ///
    /// # Errors
    /// As [`Client::send`], for the sending half.
    pub async fn send_only<R: Request>(&mut self, request: R, version: i16) -> Result<(), Error> {
        let (frame, _) = self.encode(&request, version)?;
        codec::write_frame(&mut self.stream, &frame).await
    }

    /// Writes raw bytes (malformed frames, for tests).
    ///
    /// # Errors
    /// [`Error::Io`].
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), Error> {
        codec::write_frame(&mut self.stream, bytes).await
    }

    /// Reads the response to request `correlation` of type `R` at `version`.
    async fn receive<R: Request>(&mut self, correlation: i32, version: i16) -> Result<R::Response, Error> {
        let frame = codec::read_frame(&mut self.stream, RESPONSE_BYTES_MAX).await?.ok_or(Error::Closed)?;
        let mut buf = frame;
        let key = ApiKey::try_from(R::KEY).map_err(|()| Error::UnknownApiKey(R::KEY))?;
        let header = ResponseHeader::decode(&mut buf, key.response_header_version(version))
            .map_err(|e| Error::Malformed { what: "response header", reason: e.to_string() })?;
        if header.correlation_id != correlation {
            return Err(Error::CorrelationMismatch { expected: correlation, got: header.correlation_id });
        }
        R::Response::decode(&mut buf, version)
            .map_err(|e| Error::Malformed { what: std::any::type_name::<R::Response>(), reason: e.to_string() })
    }

    /// The underlying stream.
    pub fn into_inner(self) -> S {
        self.stream
    }
}

/// A record to encode: `(key, value, timestamp in milliseconds since the epoch)`.
pub type RecordInput<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, i64);

/// A fetched record: `(offset, key, value)`.
pub type FetchedRecord = (i64, Option<Bytes>, Option<Bytes>);

/// Encodes records as one v2 record batch (the producer's side), with `kafka-protocol`'s encoder:
/// `(key, value, timestamp ms)` each; `producer` is `(producer id, epoch, base sequence)` for an
/// idempotent producer, or `None`.
///
/// # Errors
/// [`Error::Encode`].
pub fn record_batch(records: &[RecordInput<'_>], producer: Option<(i64, i16, i32)>) -> Result<Bytes, Error> {
    let with_headers = records.iter().map(|&(key, value, ts)| (key, value, ts, RecordHeaders::default()));
    encode_batch(with_headers, producer)
}

/// A record's headers, as `kafka-protocol` keeps them (one value per key).
pub type RecordHeaders = indexmap::IndexMap<StrBytes, Option<Bytes>>;

/// [`record_batch`] for records with headers: `(key, value, timestamp ms, headers)` each.
///
/// # Errors
/// [`Error::Encode`].
pub fn encode_batch<'a>(
    records: impl IntoIterator<Item = (Option<&'a [u8]>, Option<&'a [u8]>, i64, RecordHeaders)>,
    producer: Option<(i64, i16, i32)>,
) -> Result<Bytes, Error> {
    encode(records, producer, false)
}

/// [`record_batch`] as a transactional producer sends it (the batch's transactional flag set,
/// KIP-98): `producer` is `(producer id, epoch, base sequence)` of a transactional id's
/// producer, and the partition must be in its open transaction (AddPartitionsToTxn).
///
/// # Errors
/// [`Error::Encode`].
pub fn transactional_record_batch(records: &[RecordInput<'_>], producer: (i64, i16, i32)) -> Result<Bytes, Error> {
    let with_headers = records.iter().map(|&(key, value, ts)| (key, value, ts, RecordHeaders::default()));
    encode(with_headers, Some(producer), true)
}

/// [`encode_batch`] as a transactional producer sends it: records with headers, the batch's
/// transactional flag set (see [`transactional_record_batch`]).
///
/// # Errors
/// [`Error::Encode`].
pub fn transactional_encode_batch<'a>(
    records: impl IntoIterator<Item = (Option<&'a [u8]>, Option<&'a [u8]>, i64, RecordHeaders)>,
    producer: (i64, i16, i32),
) -> Result<Bytes, Error> {
    encode(records, Some(producer), true)
}

fn encode<'a>(
    records: impl IntoIterator<Item = (Option<&'a [u8]>, Option<&'a [u8]>, i64, RecordHeaders)>,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> Result<Bytes, Error> {
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let (producer_id, producer_epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value, ts, headers))| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol groups records into one batch while `offset - sequence` is constant;
            // a non-idempotent batch still carries base sequence -1.
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp: ts,
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers,
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .map_err(|e| Error::Encode { what: "record batch", reason: e.to_string() })?;
    Ok(buf.freeze())
}

/// Decodes the records of a fetch response's `records` bytes: `(offset, key, value)` of each,
/// across all batches.
///
/// # Errors
/// [`Error::Malformed`].
pub fn decode_records(records: &Bytes) -> Result<Vec<FetchedRecord>, Error> {
    let mut buf = records.clone();
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut buf)
        .map_err(|e| Error::Malformed { what: "record batch", reason: e.to_string() })?;
    Ok(sets.into_iter().flat_map(|s| s.records).map(|r| (r.offset, r.key, r.value)).collect())
}
