//! A batch: records of one partition sent together as one v2 record batch, encoded with
//! `kafka-protocol` (keys, values, headers, create timestamps, and the idempotent stamp).

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::client::{RecordHeaders, encode_batch};
use crate::rdkafka::message::{Headers, Message, Timestamp};
use crate::rdkafka::producer::delivery::Pending;
use crate::rdkafka::producer::idempotence::Stamp;
use crate::rdkafka::util::now_millis;

/// A partition's batch.
#[derive(Debug)]
pub struct Batch {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its records, in send order.
    pub records: Vec<Pending>,
    /// The idempotent stamp, once given.
    pub stamp: Option<Stamp>,
    /// Sends so far.
    pub attempts: u32,
    /// Not before then (a retry's backoff).
    pub not_before: Option<Instant>,
}

impl Batch {
    /// The earliest deadline of its records.
    pub fn deadline(&self) -> Option<Instant> {
        self.records.iter().filter_map(|r| r.deadline).min()
    }

    /// The v2 record batch.
    ///
    /// # Errors
    /// The encoder's message, when a record cannot be encoded.
    pub fn encode(&self) -> Result<Bytes, String> {
        let records = self.records.iter().map(|p| {
            let m = &p.message;
            let headers: RecordHeaders = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| (StrBytes::from_string(h.key.to_string()), h.value.map(Bytes::copy_from_slice)))
                        .collect()
                })
                .unwrap_or_default();
            (m.key(), m.payload(), m.timestamp().to_millis().unwrap_or_else(now_millis), headers)
        });
        encode_batch(records, self.stamp).map_err(|e| e.to_string())
    }
}

/// The timestamp a record is reported with: its create time, or the broker's append time when
/// the topic uses it (`log_append_time_ms` ≥ 0 in the response).
pub fn reported_timestamp(message: &crate::rdkafka::message::OwnedMessage, log_append_time_ms: i64) -> Timestamp {
    if log_append_time_ms >= 0 { Timestamp::LogAppendTime(log_append_time_ms) } else { message.timestamp() }
}
