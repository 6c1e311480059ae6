//! The consumer's wire helpers: one request/response exchange on a (reused) connection, the
//! decoding of a fetch response's record batches into messages, and the one-shot offset
//! lookups behind `fetch_watermarks` and `offsets_for_times` (metadata from a bootstrap broker,
//! then ListOffsets to each partition's leader).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use kafka_protocol::records::{RecordBatchDecoder, TimestampType};
use tokio::time::Instant;

use crate::client::Client;
use crate::rdkafka::consumer::positions::Tp;
use crate::rdkafka::consumer::settings::ConsumerSettings;
use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode as Code};
use crate::rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};
use crate::rdkafka::net::{Dialer, Stream};
use crate::rdkafka::producer::metadata::{METADATA_VERSION, Metadata, TopicState};

/// The ListOffsets version sent (kafkasim 1–7, Apache Kafka 4.x 1–9).
pub const LIST_OFFSETS_VERSION: i16 = 5;

type Conn = Client<Stream>;

/// Sends `request` on `conn` (or a new connection to `addr`) within `timeout`; the connection
/// back when it is still good.
pub(crate) async fn exchange<R: kafka_protocol::protocol::Request>(
    conn: Option<Conn>,
    dialer: Dialer,
    addr: String,
    id: String,
    timeout: Duration,
    request: R,
    version: i16,
) -> (Option<Conn>, Option<R::Response>) {
    let attempt = async {
        let mut conn = match conn {
            Some(c) => c,
            None => Client::new(dialer.dial(&addr).await.ok()?, &id),
        };
        let response = conn.send(request, version).await.ok()?;
        Some((conn, response))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Some((conn, r))) => (Some(conn), Some(r)),
        _ => (None, None),
    }
}

/// The messages of a fetch response's `records` at `from` or after (control records and
/// records of a batch before `from` skipped; a partial batch at the end ignored), and the next
/// offset to fetch.
///
/// A complete batch that does not decode (its CRC does not match, a field is out of range) is
/// an `Err(BadMessage)` in its place, and decoding goes on with the next batch, as librdkafka's
/// msgset reader does with `check.crcs` ("MessageSet at offset .. failed CRC32C check", then
/// the next MessageSet): the next offset moves only past records that decoded, so a bad batch
/// at the end is fetched again (and reported again).
pub(crate) fn decode(
    topic: &str,
    partition: i32,
    records: &Bytes,
    from: i64,
) -> (Vec<Result<OwnedMessage, KafkaError>>, i64) {
    let mut buf = records.clone();
    let mut out = Vec::new();
    let mut next = from;
    // A batch: base offset (8), length (4), then `length` bytes.
    while buf.remaining() >= 12 {
        let len = i32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
        let Ok(total) = usize::try_from(len).map(|l| l + 12) else { break };
        if buf.remaining() < total {
            break;
        }
        let mut batch = buf.split_to(total);
        let Ok(set) = RecordBatchDecoder::decode(&mut batch) else {
            out.push(Err(KafkaError::MessageConsumption(Code::BadMessage)));
            continue;
        };
        for r in set.records {
            next = next.max(r.offset + 1);
            if r.control || r.offset < from {
                continue;
            }
            let headers = (!r.headers.is_empty()).then(|| {
                r.headers.iter().fold(OwnedHeaders::new_with_capacity(r.headers.len()), |h, (k, v)| {
                    h.insert(Header { key: k.as_str(), value: v.as_deref() })
                })
            });
            let timestamp = match r.timestamp_type {
                _ if r.timestamp < 0 => Timestamp::NotAvailable,
                TimestampType::Creation => Timestamp::CreateTime(r.timestamp),
                TimestampType::LogAppend => Timestamp::LogAppendTime(r.timestamp),
            };
            out.push(Ok(OwnedMessage::new(
                r.value.map(|v| v.to_vec()),
                r.key.map(|k| k.to_vec()),
                topic.to_string(),
                timestamp,
                partition,
                r.offset,
                headers,
            )));
        }
    }
    (out, next)
}

/// Looks up offsets by timestamp (-2 earliest, -1 latest, or ms) outside the fetcher, for
/// `fetch_watermarks` and `offsets_for_times`: metadata from a bootstrap broker, then one
/// ListOffsets per query to the partition's leader.
///
/// # Errors
/// `MetadataFetch(BrokerTransportFailure)` when no bootstrap broker answers the metadata.
pub(crate) async fn list_offsets_once(
    s: Arc<ConsumerSettings>,
    dialer: Dialer,
    queries: Vec<(Tp, i64)>,
) -> KafkaResult<Vec<(Tp, KafkaResult<i64>)>> {
    let topics: BTreeSet<String> = queries.iter().map(|((t, _), _)| t.clone()).collect();
    let mut metadata = Metadata::default();
    let mut answered = false;
    for addr in &s.bootstrap {
        let (_, resp) = exchange(
            None,
            dialer.clone(),
            addr.clone(),
            s.client_id.clone(),
            s.socket_timeout,
            Metadata::request(&topics, false),
            METADATA_VERSION,
        )
        .await;
        if let Some(resp) = resp {
            metadata.update(&resp, Instant::now());
            answered = true;
            break;
        }
    }
    if !answered {
        return Err(KafkaError::MetadataFetch(Code::BrokerTransportFailure));
    }
    let mut conns: BTreeMap<String, Conn> = BTreeMap::new();
    let mut out = Vec::with_capacity(queries.len());
    for (tp, timestamp) in queries {
        // librdkafka's leader lookup: a topic or partition the cluster does not have is the
        // local UNKNOWN_PARTITION (as rd_kafka_query_watermark_offsets answers it).
        match metadata.topic(&tp.0) {
            Some(TopicState::Failed { code: 3, .. }) => {
                out.push((tp, Err(KafkaError::MetadataFetch(Code::UnknownPartition))));
                continue;
            }
            Some(TopicState::Failed { code, .. }) => {
                out.push((tp, Err(KafkaError::MetadataFetch(Code::from(*code)))));
                continue;
            }
            Some(TopicState::Known(leaders)) if usize::try_from(tp.1).map_or(true, |i| i >= leaders.len()) => {
                out.push((tp, Err(KafkaError::MetadataFetch(Code::UnknownPartition))));
                continue;
            }
            _ => {}
        }
        let Some((_, addr)) = metadata.leader(&tp.0, tp.1) else {
            out.push((tp, Err(KafkaError::MetadataFetch(Code::LeaderNotAvailable))));
            continue;
        };
        let addr = addr.to_string();
        let request = crate::requests::list_offsets(&tp.0, tp.1, timestamp);
        let conn = conns.remove(&addr);
        let (conn, resp) = exchange(
            conn,
            dialer.clone(),
            addr.clone(),
            s.client_id.clone(),
            s.socket_timeout,
            request,
            LIST_OFFSETS_VERSION,
        )
        .await;
        if let Some(c) = conn {
            conns.insert(addr, c);
        }
        let part = resp
            .as_ref()
            .and_then(|r| r.topics.iter().flat_map(|t| t.partitions.iter()).find(|p| p.partition_index == tp.1));
        let result = match part {
            None => Err(KafkaError::MetadataFetch(Code::BrokerTransportFailure)),
            Some(p) if p.error_code != 0 => Err(KafkaError::MetadataFetch(Code::from(p.error_code))),
            Some(p) => Ok(p.offset),
        };
        out.push((tp, result));
    }
    Ok(out)
}
