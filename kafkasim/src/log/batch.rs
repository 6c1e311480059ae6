//! Record batches as the broker takes them: validating a produced v2 batch, stamping it with the
//! log append time, and encoding EndTxn markers.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{BatchDecodeInfo, RecordBatchDecoder};

/// The most records one batch may declare (librdkafka's `batch.num.messages` maximum): a bound
/// checked before the records are decoded, so a forged count cannot make the decoder reserve
/// gigabytes.
pub const RECORDS_PER_BATCH_MAX: i32 = 1_000_000;

/// Byte offsets inside a v2 record batch header.
pub(super) const BASE_OFFSET: std::ops::Range<usize> = 0..8;
pub(super) const LEADER_EPOCH: std::ops::Range<usize> = 12..16;
pub(super) const LAST_OFFSET_DELTA: std::ops::Range<usize> = 23..27;
pub(super) const MAX_TIMESTAMP: std::ops::Range<usize> = 35..43;
pub(super) const CRC: std::ops::Range<usize> = 17..21;
pub(super) const ATTRIBUTES: std::ops::Range<usize> = 21..23;
const TIMESTAMP_TYPE_LOG_APPEND: i16 = 1 << 3;

pub(super) fn is_log_append_time(batch: &[u8]) -> bool {
    i16::from_be_bytes(batch[ATTRIBUTES].try_into().expect("2 bytes")) & TIMESTAMP_TYPE_LOG_APPEND != 0
}

/// A v2 batch header is 61 bytes.
pub const BATCH_HEADER_BYTES: usize = 61;

/// Why a produced batch was refused, as the produce response's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchError {
    /// `CORRUPT_MESSAGE` (2): the bytes do not parse or the CRC does not match.
    Corrupt,
    /// `INVALID_RECORD` (87): not exactly one v2 batch, or its counts are inconsistent.
    InvalidRecord,
    /// `MESSAGE_TOO_LARGE` (10): the batch is above `message.max.bytes`.
    TooLarge,
}

impl BatchError {
    /// The Kafka error code.
    pub fn code(self) -> i16 {
        match self {
            BatchError::Corrupt => 2,
            BatchError::InvalidRecord => 87,
            BatchError::TooLarge => 10,
        }
    }
}

/// A produced batch, validated and ready to append.
#[derive(Debug, Clone)]
pub struct IncomingBatch {
    /// The header fields (producer id, epoch, base sequence, record count, …).
    pub info: BatchDecodeInfo,
    /// The batch's bytes as sent.
    pub bytes: Bytes,
    /// The largest record timestamp (the header's max timestamp), milliseconds since the epoch.
    pub max_timestamp: i64,
    /// The indexes in the batch of the records without a key (a compacted topic refuses them).
    pub keyless: Vec<i32>,
}

impl IncomingBatch {
    /// The batch as a topic with `message.timestamp.type=LogAppendTime` stores it: the
    /// timestamp-type attribute (bit 3) set and the max timestamp replaced by `now_ms`, the CRC
    /// recomputed (Kafka's `DefaultRecordBatch.setMaxTimestamp`; the first timestamp and the
    /// records stay as sent, and clients read every record's timestamp as the max timestamp).
    pub fn with_log_append_time(&self, now_ms: i64) -> IncomingBatch {
        let mut bytes = BytesMut::from(&self.bytes[..]);
        let attributes = i16::from_be_bytes(bytes[ATTRIBUTES].try_into().expect("2 bytes")) | TIMESTAMP_TYPE_LOG_APPEND;
        bytes[ATTRIBUTES].copy_from_slice(&attributes.to_be_bytes());
        bytes[MAX_TIMESTAMP].copy_from_slice(&now_ms.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[ATTRIBUTES.start..]);
        bytes[CRC].copy_from_slice(&crc.to_be_bytes());
        IncomingBatch {
            info: self.info.clone(),
            bytes: bytes.freeze(),
            max_timestamp: now_ms,
            keyless: self.keyless.clone(),
        }
    }

    /// Whether the batch's timestamps are log append times (attribute bit 3).
    pub fn is_log_append_time(&self) -> bool {
        is_log_append_time(&self.bytes)
    }

    /// The sequence number of the batch's last record (sequences wrap at `i32::MAX` to 0).
    pub fn last_sequence(&self) -> i32 {
        let last = i64::from(self.info.base_sequence) + i64::from(self.info.record_count) - 1;
        (last % (i64::from(i32::MAX) + 1)) as i32
    }
}

/// Validates a produce request's `records` for one partition: exactly one v2 batch, a good CRC,
/// a record count within [`RECORDS_PER_BATCH_MAX`] that matches the last offset delta, records
/// that decode (after decompression), and at most `bytes_max` bytes.
///
/// # Errors
/// The [`BatchError`] Kafka would answer with.
pub fn validate_batch(records: &Bytes, bytes_max: usize) -> Result<IncomingBatch, BatchError> {
    if records.len() > bytes_max {
        return Err(BatchError::TooLarge);
    }
    if records.len() < BATCH_HEADER_BYTES || records[16] != 2 {
        return Err(BatchError::InvalidRecord);
    }
    let mut buf = records.clone();
    let infos = RecordBatchDecoder::decode_batch_info(&mut buf).map_err(|_| BatchError::Corrupt)?;
    let [info] = infos.as_slice() else {
        return Err(BatchError::InvalidRecord);
    };
    if !buf.is_empty() {
        return Err(BatchError::InvalidRecord);
    }
    let last_delta = i32::from_be_bytes(records[LAST_OFFSET_DELTA].try_into().expect("4 bytes"));
    if info.record_count < 1 || info.record_count > RECORDS_PER_BATCH_MAX || last_delta != info.record_count - 1 {
        return Err(BatchError::InvalidRecord);
    }
    // Decoding the records proves the batch is well-formed; the count was bounded above.
    let mut all = records.clone();
    let set = RecordBatchDecoder::decode(&mut all).map_err(|_| BatchError::Corrupt)?;
    if set.records.len() != info.record_count as usize {
        return Err(BatchError::InvalidRecord);
    }
    let max_timestamp = i64::from_be_bytes(records[MAX_TIMESTAMP].try_into().expect("8 bytes"));
    let keyless = (0..).zip(&set.records).filter(|(_, r)| r.key.is_none()).map(|(i, _)| i).collect();
    Ok(IncomingBatch { info: info.clone(), bytes: records.clone(), max_timestamp, keyless })
}

/// A transaction marker's kind (the control record's key type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// type 0.
    Abort,
    /// type 1.
    Commit,
}

/// Encodes an EndTxn marker as Kafka writes it: one control record in a transactional v2 batch
/// of `producer`, base sequence -1; key = version 0 and the marker type (i16 each), value =
/// version 0 and the coordinator epoch (i16, i32) (`EndTransactionMarker`).
pub fn marker_batch(producer: (i64, i16), marker: Marker, coordinator_epoch: i32, timestamp_ms: i64) -> IncomingBatch {
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let kind: i16 = match marker {
        Marker::Abort => 0,
        Marker::Commit => 1,
    };
    let mut key = BytesMut::new();
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = BytesMut::new();
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        partition_leader_epoch: 0,
        producer_id: producer.0,
        producer_epoch: producer.1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: timestamp_ms,
        key: Some(key.freeze()),
        value: Some(value.freeze()),
        headers: Default::default(),
        delete_horizon: false,
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .expect("a control record encodes");
    validate_batch(&buf.freeze(), usize::MAX).expect("a control batch is a valid batch")
}
