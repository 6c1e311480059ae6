//! The wire: size-prefixed frames, request and response headers, and every message body through
//! the `kafka-protocol` crate, in both directions.
//!
//! Semantics (Kafka's protocol guide, <https://kafka.apache.org/protocol>):
//! - a frame is a big-endian `int32` size followed by that many bytes; a request frame holds a
//!   request header (its version follows from the API key and version) and the body;
//! - the versions served are [`SUPPORTED`], answered in ApiVersions; an ApiVersions request at a
//!   version above the range is answered at version 0 with `UNSUPPORTED_VERSION` and the list of
//!   versions (KIP-511), so the client can retry lower; any other request at a version outside
//!   the range, an API key the broker does not serve, or bytes that do not decode close the
//!   connection, as Apache Kafka's `SocketServer` does for an `InvalidRequestException`;
//! - frames are bounded by [`REQUEST_BYTES_MAX`] (Kafka's `socket.request.max.bytes`, 100 MiB):
//!   a larger size prefix closes the connection before any allocation.
//!
//! Decoding never panics on peer input: lengths are checked before `kafka-protocol` peeks at
//! them, and the decoder runs under `catch_unwind` as a last line of defence (a caught panic
//! still fails a simulation run, which counts recovered panics).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::Error;

/// The largest request frame accepted, in bytes (Apache Kafka's `socket.request.max.bytes`).
pub const REQUEST_BYTES_MAX: usize = 100 * 1024 * 1024;
/// The largest response frame a [`crate::Client`] accepts, in bytes.
pub const RESPONSE_BYTES_MAX: usize = 256 * 1024 * 1024;

/// The API keys served and their version ranges `(key, min, max)`, as ApiVersions advertises
/// them. Each range is within what `kafka-protocol` 0.18 encodes; upper ends stop before
/// features the fake does not model (topic ids in Fetch/OffsetCommit, KIP-848 fields in
/// OffsetFetch, InitProducerId v5+, and transaction version 2 of KIP-890 part 2: Produce v12,
/// EndTxn v5, AddPartitionsToTxn v4+ which only brokers send, AddOffsetsToTxn and
/// TxnOffsetCommit v4+ with `TRANSACTION_ABORTABLE`).
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
];

/// The served version range of `key`, if it is served.
pub fn supported(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED.iter().find(|(k, _, _)| *k == key).map(|(_, lo, hi)| (*lo, *hi))
}

/// A decoded request: its header and body.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    /// The API key.
    pub api_key: ApiKey,
    /// The request header (version, correlation id, client id).
    pub header: RequestHeader,
    /// The body.
    pub body: RequestBody,
}

/// What a request frame turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// A request the broker serves, at a version it serves.
    Request(Box<DecodedRequest>),
    /// ApiVersions at a version above the range: answer v0 with `UNSUPPORTED_VERSION` (KIP-511).
    ApiVersionsTooNew {
        /// The request's correlation id.
        correlation_id: i32,
    },
}

macro_rules! request_bodies {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// The body of a request the broker serves.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(missing_docs)]
        pub enum RequestBody { $($variant($ty)),* }

        /// The body of a response the broker sends.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(missing_docs)]
        pub enum ResponseBody { $($variant(<$ty as kafka_protocol::protocol::Request>::Response)),* }

        fn decode_body(key: ApiKey, buf: &mut Bytes, version: i16) -> Result<RequestBody, Error> {
            match key {
                $(ApiKey::$variant => <$ty>::decode(buf, version).map(RequestBody::$variant)
                    .map_err(|e| Error::Malformed { what: stringify!($ty), reason: e.to_string() }),)*
                other => Err(Error::UnsupportedVersion { api_key: other as i16, version }),
            }
        }

        impl RequestBody {
            /// Encodes the body at `version` (the client's side).
            ///
            /// # Errors
            /// [`Error::Encode`] when a field is set that `version` does not have.
            pub fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), Error> {
                match self {
                    $(RequestBody::$variant(m) => m.encode(buf, version)
                        .map_err(|e| Error::Encode { what: stringify!($ty), reason: e.to_string() }),)*
                }
            }

            /// The API key of the body.
            pub fn api_key(&self) -> ApiKey {
                match self { $(RequestBody::$variant(_) => ApiKey::$variant,)* }
            }
        }

        impl ResponseBody {
            /// Encodes the body at `version`.
            ///
            /// # Errors
            /// [`Error::Encode`] when a field is set that `version` does not have.
            pub fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), Error> {
                match self {
                    $(ResponseBody::$variant(m) => m.encode(buf, version)
                        .map_err(|e| Error::Encode { what: stringify!($ty), reason: e.to_string() }),)*
                }
            }

            /// The API key of the body.
            pub fn api_key(&self) -> ApiKey {
                match self { $(ResponseBody::$variant(_) => ApiKey::$variant,)* }
            }
        }
    };
}

request_bodies!(
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    Metadata(MetadataRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    ApiVersions(ApiVersionsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    InitProducerId(InitProducerIdRequest),
    DescribeConfigs(DescribeConfigsRequest),
    AlterConfigs(AlterConfigsRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
);

/// Decodes one request frame (without its size prefix).
///
/// # Errors
/// [`Error::UnknownApiKey`], [`Error::UnsupportedVersion`] (a key the broker does not serve, or
/// a version outside [`SUPPORTED`] other than a too-new ApiVersions), [`Error::Malformed`]
/// (truncated or invalid bytes, trailing bytes after the body).
pub fn decode_request(frame: Bytes) -> Result<Decoded, Error> {
    // `kafka-protocol` peeks at the first four bytes without a length check.
    if frame.len() < 8 {
        return Err(Error::Malformed { what: "request header", reason: format!("{} bytes", frame.len()) });
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api_key = ApiKey::try_from(raw_key).map_err(|()| Error::UnknownApiKey(raw_key))?;
    let Some((lo, hi)) = supported(api_key) else {
        return Err(Error::UnsupportedVersion { api_key: raw_key, version });
    };
    if api_key == ApiKey::ApiVersions && version > hi {
        return Ok(Decoded::ApiVersionsTooNew { correlation_id });
    }
    if version < lo || version > hi {
        return Err(Error::UnsupportedVersion { api_key: raw_key, version });
    }
    guarded("request", move || {
        let mut buf = frame;
        let header_version = api_key.request_header_version(version);
        let header = RequestHeader::decode(&mut buf, header_version)
            .map_err(|e| Error::Malformed { what: "request header", reason: e.to_string() })?;
        let body = decode_body(api_key, &mut buf, version)?;
        if buf.has_remaining() {
            return Err(Error::Malformed { what: "request", reason: format!("{} trailing bytes", buf.remaining()) });
        }
        Ok(Decoded::Request(Box::new(DecodedRequest { api_key, header, body })))
    })
}

/// Runs a decoder on peer bytes, turning a panic inside it into [`Error::Malformed`].
fn guarded<T>(what: &'static str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "decoder panicked".to_string());
            Err(Error::Malformed { what, reason: format!("decoder panicked: {reason}") })
        }
    }
}

/// Encodes a response frame: size prefix, response header (its version follows from the API key
/// and version; ApiVersions always uses header v0) and body.
///
/// # Errors
/// [`Error::Encode`] when the body sets a field `version` does not have.
pub fn encode_response(correlation_id: i32, version: i16, body: &ResponseBody) -> Result<Bytes, Error> {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    let header_version = body.api_key().response_header_version(version);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, header_version)
        .map_err(|e| Error::Encode { what: "response header", reason: e.to_string() })?;
    body.encode(&mut buf, version)?;
    let size =
        i32::try_from(buf.len() - 4).map_err(|_| Error::Encode { what: "response", reason: "too large".into() })?;
    buf[0..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// The ApiVersions response listing [`SUPPORTED`] with `error_code`.
pub fn api_versions_response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = SUPPORTED
        .iter()
        .map(|(k, lo, hi)| {
            api_versions_response::ApiVersion::default()
                .with_api_key(*k as i16)
                .with_min_version(*lo)
                .with_max_version(*hi)
        })
        .collect();
    ApiVersionsResponse::default().with_error_code(error_code).with_api_keys(api_keys)
}

/// Whether an ApiVersions v3+ request names its client's software as Apache Kafka requires
/// (`ApiVersionsRequest.isValid`): name and version each match
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`. Kafka answers `INVALID_REQUEST` otherwise.
pub fn client_software_valid(request: &ApiVersionsRequest) -> bool {
    fn valid(x: &str) -> bool {
        let b = x.as_bytes();
        let edge = |c: &u8| c.is_ascii_alphanumeric();
        let inner = |c: &u8| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.';
        match b {
            [] => false,
            [only] => edge(only),
            [first, middle @ .., last] => edge(first) && edge(last) && middle.iter().all(inner),
        }
    }
    valid(&request.client_software_name) && valid(&request.client_software_version)
}

/// Reads one frame's bytes (after its size prefix). `Ok(None)` at a clean EOF before a frame.
///
/// The body is read as it arrives (never allocated up front from the prefix), so a prefix
/// claiming a large frame costs nothing until its bytes come.
///
/// # Errors
/// [`Error::NegativeFrame`], [`Error::FrameTooLarge`] above `max`, [`Error::Io`] (EOF mid-frame
/// is `UnexpectedEof`).
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R, max: usize) -> Result<Option<Bytes>, Error> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = reader.read(&mut size[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(Error::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        got += n;
    }
    let size = i32::from_be_bytes(size);
    let size = usize::try_from(size).map_err(|_| Error::NegativeFrame(size))?;
    if size > max {
        return Err(Error::FrameTooLarge { size, max });
    }
    let mut body = Vec::with_capacity(size.min(64 * 1024));
    let read = reader.take(size as u64).read_to_end(&mut body).await?;
    if read < size {
        return Err(Error::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(Some(Bytes::from(body)))
}

/// Writes a whole frame (already size-prefixed) and flushes.
///
/// # Errors
/// [`Error::Io`] from the transport.
pub async fn write_frame<W: AsyncWrite + Unpin>(writer: &mut W, frame: &[u8]) -> Result<(), Error> {
    writer.write_all(frame).await?;
    writer.flush().await?;
    Ok(())
}
