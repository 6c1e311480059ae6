//! The log's unit tests: segments, retention, the partition cap, log append time.

use super::*;

/// A batch of `n` records of `value_bytes` each, all at `ts`.
fn batch(n: usize, value_bytes: usize, ts: i64) -> IncomingBatch {
    let value = "x".repeat(value_bytes);
    let records: Vec<_> = (0..n).map(|_| (None, Some(value.as_bytes()), ts)).collect();
    let bytes = crate::client::record_batch(&records, None).expect("encodes");
    validate_batch(&bytes, usize::MAX).expect("valid")
}

fn limits(segment_bytes: usize, segment_ms: i64) -> LogLimits {
    LogLimits { segment_bytes, segment_ms, ..LogLimits::DEFAULT }
}

#[test]
fn a_segment_rolls_before_it_would_pass_segment_bytes_and_after_segment_ms() {
    let mut log = PartitionLog::default();
    let b = batch(1, 400, 1_000);
    let size = b.bytes.len();
    let by_size = limits(2 * size, i64::MAX);
    for _ in 0..5 {
        log.append(&b, 0, &by_size, 0);
    }
    assert_eq!(log.segment_count(), 3, "two batches fit in a segment of {} bytes", 2 * size);

    let mut log = PartitionLog::default();
    let by_time = limits(usize::MAX, 100);
    log.append(&batch(1, 10, 1_000), 0, &by_time, 0);
    log.append(&batch(1, 10, 1_100), 0, &by_time, 0);
    assert_eq!(log.segment_count(), 1, "100 ms after the first batch's timestamp is not past segment.ms");
    log.append(&batch(1, 10, 1_101), 0, &by_time, 0);
    assert_eq!(log.segment_count(), 2, "101 ms after it is");
}

#[test]
fn retention_ms_deletes_whole_old_segments_oldest_first_and_the_active_one_too() {
    let mut log = PartitionLog::default();
    let one_per_segment = limits(1, i64::MAX);
    for ts in [1_000, 5_000, 2_000] {
        log.append(&batch(2, 10, ts), 0, &one_per_segment, ts);
    }
    assert_eq!(
        log.retention_due_ms(Some(1_000), None),
        Some(2_001),
        "the oldest segment's timestamp + retention.ms + 1"
    );
    assert_eq!(log.delete_expired(Some(1_000), None, 2_000), 0, "nothing is more than 1 s old at 2 s");
    // At 4.5 s the first segment (1 s) and the third (2 s) are old, but the second (5 s) is
    // not: deletion stops at the first segment kept.
    assert_eq!(log.delete_expired(Some(1_000), None, 4_500), 2);
    assert_eq!((log.log_start(), log.high_watermark(), log.segment_count()), (2, 6, 2));
    assert_eq!(log.delete_expired(Some(1_000), None, 10_000), 4, "the active segment goes too");
    assert_eq!((log.log_start(), log.high_watermark(), log.size_bytes()), (6, 6, 0));
    assert_eq!(log.segment_count(), 1, "an empty active segment at the log end offset");
    assert!(log.read(6, 6, usize::MAX, true).is_empty());
    assert_eq!(log.retention_due_ms(Some(1_000), None), None, "an empty log has nothing to expire");
    assert_eq!(log.append(&batch(1, 10, 10_000), 0, &one_per_segment, 10_000), 6, "offsets go on");
}

#[test]
fn retention_bytes_deletes_segments_while_the_rest_stays_at_or_above_the_limit() {
    let mut log = PartitionLog::default();
    let b = batch(1, 100, 1_000);
    let size = b.bytes.len() as u64;
    for _ in 0..4 {
        log.append(&b, 0, &limits(1, i64::MAX), 0);
    }
    assert_eq!(log.retention_due_ms(None, Some(3 * size)), Some(i64::MIN), "one segment over: due now");
    assert_eq!(log.delete_expired(None, Some(3 * size - 1), 0), 1, "deleting a second would go below");
    assert_eq!((log.log_start(), log.size_bytes() as u64), (1, 3 * size));
    assert_eq!(log.retention_due_ms(None, Some(3 * size - 1)), None);
    assert_eq!(log.delete_expired(None, Some(0), 0), 3, "retention.bytes 0 empties the log");
    assert_eq!(log.log_start(), 4);
}

#[test]
fn log_append_time_stamps_the_batch_and_keeps_its_crc_valid() {
    let sent = batch(3, 10, 1_000);
    assert!(!sent.is_log_append_time());
    let stamped = sent.with_log_append_time(9_999);
    assert!(stamped.is_log_append_time());
    let again = validate_batch(&stamped.bytes, usize::MAX).expect("the CRC was recomputed");
    assert_eq!(again.max_timestamp, 9_999);
    let mut buf = stamped.bytes.clone();
    let set = RecordBatchDecoder::decode(&mut buf).expect("decodes");
    assert!(set.records.iter().all(|r| r.timestamp_type == kafka_protocol::records::TimestampType::LogAppend));
    let mut log = PartitionLog::default();
    log.append(&batch(1, 10, 1_000), 0, &LogLimits::DEFAULT, 0);
    log.append(&stamped, 0, &LogLimits::DEFAULT, 0);
    assert_eq!(log.offset_for_timestamp(5_000), Some((1, 9_999)), "every record has the stamp");
    assert_eq!(log.max_timestamp(), Some((1, 9_999)));
}

#[test]
fn the_partition_cap_drops_batches_and_keeps_segments_consistent() {
    let mut log = PartitionLog::default();
    let b = batch(1, 100, 1_000);
    let size = b.bytes.len();
    let capped = LogLimits { segment_bytes: 2 * size, segment_ms: i64::MAX, partition_bytes_max: 3 * size };
    for _ in 0..6 {
        log.append(&b, 0, &capped, 0);
    }
    assert_eq!((log.log_start(), log.size_bytes()), (3, 3 * size));
    assert_eq!(log.delete_expired(None, Some(0), 0), 3, "retention after the cap deletes what is left");
    assert_eq!(log.log_start(), 6);
}
