//! A batch: records of one partition sent together as one v2 record batch, encoded with
//! `kafka-protocol` (keys, values, headers, create timestamps, and the idempotent stamp).

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use tokio::time::Instant;

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
        let (producer_id, producer_epoch, base_sequence) = self.stamp.unwrap_or((-1, -1, -1));
        let records: Vec<Record> = self
            .records
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let m = &p.message;
                let headers: IndexMap<StrBytes, Option<Bytes>> = m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (StrBytes::from_string(h.key.to_string()), h.value.map(Bytes::copy_from_slice)))
                            .collect()
                    })
                    .unwrap_or_default();
                Record {
                    transactional: false,
                    control: false,
                    delete_horizon: false,
                    partition_leader_epoch: 0,
                    producer_id,
                    producer_epoch,
                    timestamp_type: TimestampType::Creation,
                    offset: i as i64,
                    // kafka-protocol keeps records in one batch while offset - sequence is constant.
                    sequence: base_sequence.wrapping_add(i as i32),
                    timestamp: m.timestamp().to_millis().unwrap_or_else(now_millis),
                    key: m.key().map(Bytes::copy_from_slice),
                    value: m.payload().map(Bytes::copy_from_slice),
                    headers,
                }
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions { version: 2, compression: Compression::None },
        )
        .map_err(|e| e.to_string())?;
        Ok(buf.freeze())
    }
}

/// The timestamp a record is reported with: its create time, or the broker's append time when
/// the topic uses it (`log_append_time_ms` ≥ 0 in the response).
pub fn reported_timestamp(message: &crate::rdkafka::message::OwnedMessage, log_append_time_ms: i64) -> Timestamp {
    if log_append_time_ms >= 0 { Timestamp::LogAppendTime(log_append_time_ms) } else { message.timestamp() }
}
