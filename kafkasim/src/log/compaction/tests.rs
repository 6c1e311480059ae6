//! Compaction's unit tests: which records and batches a cleaning keeps, tombstones' delete
//! horizon, transactions, compressed batches, and when a cleaning is due.

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions};

use super::super::*;
use super::CleanerConfig;

/// `(key, value)` records as one batch at `ts` (a `None` value is a tombstone), compressed with
/// `compression`, of `producer` `(id, epoch, base sequence)` if given, transactional if `txn`.
fn keyed(
    records: &[(&str, Option<&str>)],
    ts: i64,
    compression: Compression,
    producer: Option<(i64, i16, i32)>,
    txn: bool,
) -> IncomingBatch {
    let (id, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = (0..)
        .zip(records)
        .map(|(i, (k, v))| Record {
            transactional: txn,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: id,
            producer_epoch: epoch,
            timestamp_type: kafka_protocol::records::TimestampType::Creation,
            offset: i64::from(i),
            // kafka-protocol keeps records in one batch while `offset - sequence` is constant.
            sequence: seq.wrapping_add(i),
            timestamp: ts + i64::from(i),
            key: Some(Bytes::copy_from_slice(k.as_bytes())),
            value: v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression })
        .expect("encodes");
    validate_batch(&buf.freeze(), usize::MAX).expect("valid")
}

fn plain(records: &[(&str, Option<&str>)], ts: i64) -> IncomingBatch {
    keyed(records, ts, Compression::None, None, false)
}

/// Every segment holds one batch.
const ONE_PER_SEGMENT: LogLimits =
    LogLimits { segment_bytes: 1, segment_ms: i64::MAX, partition_bytes_max: usize::MAX };

/// Cleans whenever anything is dirty; tombstones kept `delete_retention_ms`.
fn eager(delete_retention_ms: i64) -> CleanerConfig {
    CleanerConfig { min_cleanable_ratio: 0.0, delete_retention_ms, ..CleanerConfig::DEFAULT }
}

/// Every record the log holds: `offset:key=value@timestamp` (`null` for a tombstone), and each
/// batch's `base..=last/count` with `h` when its delete horizon is set.
fn render(log: &PartitionLog) -> (Vec<String>, Vec<String>) {
    let mut records = Vec::new();
    let mut batches = Vec::new();
    for b in log.batches() {
        let mut buf = b.bytes.clone();
        let set = RecordBatchDecoder::decode(&mut buf).expect("a rewritten batch decodes and its CRC holds");
        let horizon = set.records.first().is_some_and(|r| r.delete_horizon);
        let count = i32::from_be_bytes(b.bytes[57..61].try_into().expect("4 bytes"));
        batches.push(format!("{}..={}/{count}{}", b.base_offset, b.last_offset, if horizon { " h" } else { "" }));
        for r in &set.records {
            let text = |x: &Option<Bytes>| x.as_ref().map_or("null".into(), |x| String::from_utf8_lossy(x).to_string());
            records.push(format!("{}:{}={}@{}", r.offset, text(&r.key), text(&r.value), r.timestamp));
        }
    }
    (records, batches)
}

#[test]
fn a_cleaning_keeps_each_keys_last_record_and_moves_no_offset() {
    let mut log = PartitionLog::default();
    log.append(&plain(&[("k1", Some("a")), ("k2", Some("b"))], 100), 0, &ONE_PER_SEGMENT, 0);
    log.append(&plain(&[("k1", Some("c")), ("k3", Some("d"))], 200), 0, &ONE_PER_SEGMENT, 0);
    log.append(&plain(&[("k3", Some("e"))], 300), 0, &ONE_PER_SEGMENT, 0);
    let cleaned = log.clean(&eager(0), 1_000).expect("due: the ratio is above 0");
    assert_eq!((cleaned.from, cleaned.to, cleaned.records_removed), (0, 4, 1), "k1@0 replaced by k1@2");
    let (records, batches) = render(&log);
    assert_eq!(
        records,
        ["1:k2=b@101", "2:k1=c@200", "3:k3=d@201", "4:k3=e@300"],
        "the active segment is never cleaned"
    );
    assert_eq!(
        batches,
        ["0..=1/1", "2..=3/2", "4..=4/1"],
        "the last offset stays, the first timestamp is the first kept"
    );
    assert_eq!((log.log_start(), log.high_watermark()), (0, 5));
    assert!(log.clean(&eager(0), 1_000).is_none(), "nothing dirty below the active segment");
    assert_eq!(log.segment_count(), 2, "the two cleaned segments fit in segment.bytes: merged into one");
    assert_eq!(log.read(0, 5, usize::MAX, true).len(), 2, "a fetch reads one segment: not the active one");
}

#[test]
fn tombstones_stay_until_their_horizon_and_go_at_the_next_cleaning() {
    let mut log = PartitionLog::default();
    log.append(&plain(&[("k1", Some("a")), ("k2", Some("b"))], 100), 0, &ONE_PER_SEGMENT, 0);
    log.append(&plain(&[("k1", None), ("k2", Some("c"))], 200), 0, &ONE_PER_SEGMENT, 0);
    log.append(&plain(&[("k9", Some("x"))], 300), 0, &ONE_PER_SEGMENT, 0);
    log.clean(&eager(5_000), 1_000).expect("due");
    let (records, batches) = render(&log);
    assert_eq!(records, ["2:k1=null@200", "3:k2=c@201", "4:k9=x@300"]);
    assert_eq!(batches, ["2..=3/2 h", "4..=4/1"], "the first batch went whole; the tombstone's batch has a horizon");
    log.append(&plain(&[("k8", Some("y"))], 400), 0, &ONE_PER_SEGMENT, 2_000);
    log.clean(&eager(5_000), 5_999).expect("due: k9's segment is dirty");
    assert!(render(&log).0.contains(&"2:k1=null@200".to_string()), "before the horizon (1 s + 5 s)");
    log.append(&plain(&[("k7", Some("z"))], 500), 0, &ONE_PER_SEGMENT, 6_000);
    log.clean(&eager(5_000), 6_000).expect("due");
    let (records, batches) = render(&log);
    assert_eq!(records, ["3:k2=c@201", "4:k9=x@300", "5:k8=y@400", "6:k7=z@500"]);
    assert_eq!(batches[0], "2..=3/1 h", "the horizon stays on the rewritten batch");
}

#[test]
fn aborted_records_go_a_producers_last_batch_stays_empty_and_markers_wait_for_a_horizon() {
    let mut log = PartitionLog::default();
    let (pid, epoch) = (7, 0);
    log.append(
        &keyed(&[("k1", Some("aborted"))], 100, Compression::None, Some((pid, epoch, 0)), true),
        0,
        &ONE_PER_SEGMENT,
        0,
    );
    log.append_marker(&marker_batch((pid, epoch), Marker::Abort, 0, 150), 0, Marker::Abort, &ONE_PER_SEGMENT, 0);
    log.append(&keyed(&[("k2", Some("idem"))], 200, Compression::None, Some((8, 0, 0)), false), 0, &ONE_PER_SEGMENT, 0);
    log.append(&plain(&[("k2", Some("later"))], 300), 0, &ONE_PER_SEGMENT, 0);
    log.append(&plain(&[("k3", Some("active"))], 400), 0, &ONE_PER_SEGMENT, 0);
    assert_eq!(log.aborted_between(0, 5).len(), 1);
    log.clean(&eager(1_000), 1_000).expect("due");
    let (records, batches) = render(&log);
    assert_eq!(records[0], "1:\0\0\0\0=\0\0\0\0\0\0@150", "the abort marker stays: its transaction had a batch");
    assert_eq!(
        batches,
        ["0..=0/0", "1..=1/1", "2..=2/0", "3..=3/1", "4..=4/1"],
        "producers 7 and 8 keep empty headers"
    );
    assert_eq!(log.aborted_between(0, 5).len(), 1, "the empty aborted batch is still listed");
    log.append(&plain(&[("k4", Some("more"))], 500), 0, &ONE_PER_SEGMENT, 0);
    log.clean(&eager(1_000), 1_500).expect("due");
    let (_, batches) = render(&log);
    assert_eq!(
        batches[..3],
        ["0..=0/0", "1..=1/1", "2..=2/0"],
        "the marker stays while its transaction's empty batch does"
    );
}

#[test]
fn a_compressed_batch_is_rewritten_with_its_codec() {
    let mut log = PartitionLog::default();
    let gz = keyed(&[("k1", Some("a")), ("k2", Some("b")), ("k1", Some("c"))], 100, Compression::Gzip, None, false);
    log.append(&gz, 0, &ONE_PER_SEGMENT, 0);
    log.append(&plain(&[("k9", Some("x"))], 300), 0, &ONE_PER_SEGMENT, 0);
    log.clean(&eager(0), 1_000).expect("due");
    let b = log.batches().next().expect("kept");
    assert_eq!(b.bytes[22] & 0x07, 1, "still gzip");
    assert_eq!(render(&log).0[..2], ["1:k2=b@101".to_string(), "2:k1=c@102".to_string()]);
}

#[test]
fn a_cleaning_is_due_above_the_dirty_ratio_or_past_the_maximum_lag() {
    let mut log = PartitionLog::default();
    for ts in [100, 200, 300] {
        log.append(&plain(&[("k", Some("v"))], ts), 0, &ONE_PER_SEGMENT, 0);
    }
    let half = CleanerConfig { min_cleanable_ratio: 0.5, ..CleanerConfig::DEFAULT };
    assert!(log.clean_due(&half, 1_000), "2 dirty segments of 2: ratio 1");
    log.clean(&half, 1_000).expect("due");
    log.append(&plain(&[("k", Some("w"))], 400), 0, &ONE_PER_SEGMENT, 0);
    assert!(!log.clean_due(&half, 1_000), "one dirty segment of the same size as the clean one: ratio 0.5, not above");
    let lagged = CleanerConfig { max_lag_ms: 10_000, ..half };
    assert_eq!(log.clean_due_ms(&lagged, 1_000), Some(10_301), "the dirty segment's first batch (300) + the lag + 1");
    assert!(log.clean_due(&lagged, 10_301));
    let min_lag = CleanerConfig { min_cleanable_ratio: 0.0, min_lag_ms: 5_000, ..CleanerConfig::DEFAULT };
    assert!(!log.clean_due(&min_lag, 1_000), "the dirty segment is newer than the minimum lag");
    assert_eq!(log.clean_due_ms(&min_lag, 1_000), Some(5_301));
}
