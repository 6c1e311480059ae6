//! Compaction (`cleanup.policy=compact`): the log cleaner keeps each key's last record, drops
//! records without a key's newest value, keeps tombstones until their delete horizon, and keeps
//! a producer's last batch as an empty header. Both servers look for dirty logs every second
//! (kafka-local.sh's and the container's `log.cleaner.backoff.ms`, kafkasim's
//! `ClusterBuilder::log_cleaner_backoff`); every topic here has `min.cleanable.dirty.ratio` 0.01
//! and `segment.ms` 1 s, and a record stamped 2 s after the first rolls the segment, so the
//! cleaner may clean everything before it.

use std::time::Duration;

use fidelity::runner::Ctx;

use crate::configs::create_with;
use crate::support::*;

/// The longest a scenario waits for the cleaner.
const CLEANER_WAIT: Duration = Duration::from_secs(20);

/// The configs every scenario's topic starts with, plus `extra`.
fn compacted<'a>(extra: &[(&'a str, Option<&'a str>)]) -> Vec<(&'a str, Option<&'a str>)> {
    let mut configs = vec![
        ("cleanup.policy", Some("compact")),
        ("segment.ms", Some("1000")),
        ("min.cleanable.dirty.ratio", Some("0.01")),
    ];
    configs.extend_from_slice(extra);
    configs
}

/// One batch of `(key, value)` records (a `None` value is a tombstone), timestamps from `ts`
/// after [`ts_base`].
fn keyed(records: &[(&str, Option<&str>)], ts: i64, producer: Option<(i64, i16, i32)>) -> R<bytes::Bytes> {
    let inputs: Vec<kafkasim::client::RecordInput<'_>> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| (Some(k.as_bytes()), v.map(str::as_bytes), ts_base() + ts + i as i64))
        .collect();
    kafkasim::client::record_batch(&inputs, producer).map_err(|e| e.to_string())
}

/// A fetch from `offset` rendered batch by batch: base offset, last offset, record count,
/// whether the delete horizon flag is set, and each record as `offset:key=value@timestamp`
/// (the timestamp from [`ts_base`], `null` for a tombstone).
async fn batches(c: &mut Conn, topic: &str, offset: i64) -> R<Vec<String>> {
    use kafkasim::kafka_protocol::records::RecordBatchDecoder;
    let f = send(c, kafkasim::requests::fetch(topic, 0, offset, Duration::ZERO), FETCH_V).await?;
    let p = &f.responses[0].partitions[0];
    let mut bytes = p.records.clone().unwrap_or_default();
    let mut out = vec![format!("{} hw={} log_start={}", code(p.error_code), p.high_watermark, p.log_start_offset)];
    while bytes.len() >= 61 {
        let length = i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let end = 12 + usize::try_from(length).map_err(|_| "negative batch length")?;
        if end > bytes.len() {
            break;
        }
        let mut one = bytes.split_to(end);
        let base = i64::from_be_bytes(one[0..8].try_into().expect("8 bytes"));
        let last = base + i64::from(i32::from_be_bytes(one[23..27].try_into().expect("4 bytes")));
        let count = i32::from_be_bytes(one[57..61].try_into().expect("4 bytes"));
        let horizon = i16::from_be_bytes(one[21..23].try_into().expect("2 bytes")) & (1 << 6) != 0;
        let set = RecordBatchDecoder::decode(&mut one).map_err(|e| e.to_string())?;
        let records: Vec<String> = set
            .records
            .iter()
            .map(|r| {
                let text = |b: &Option<bytes::Bytes>| {
                    b.as_ref().map_or("null".to_string(), |b| String::from_utf8_lossy(b).to_string())
                };
                format!("{}:{}={}@{}", r.offset, text(&r.key), text(&r.value), r.timestamp - ts_base())
            })
            .collect();
        out.push(format!("batch {base}..={last} count={count} delete_horizon={horizon} [{}]", records.join(" ")));
    }
    Ok(out)
}

/// Fetches from 0 until `cleaned` holds for the rendering (or [`CLEANER_WAIT`] passes), then
/// waits two more looks of the cleaner and returns the rendering it settles on.
async fn settled(c: &mut Conn, topic: &str, cleaned: impl Fn(&[String]) -> bool) -> R<Vec<String>> {
    let deadline = tokio::time::Instant::now() + CLEANER_WAIT;
    while !cleaned(&batches(c, topic, 0).await?) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    batches(c, topic, 0).await
}

fn note_all(ctx: &Ctx, label: &str, lines: &[String]) {
    for (i, line) in lines.iter().enumerate() {
        ctx.note(format!("{label} {i}"), line.clone());
    }
}

/// Two batches, the second replacing both keys of the first (one with a value, one with a
/// tombstone) and adding a tombstone of its own, then a later batch that rolls the segment. The
/// cleaner drops the first batch whole (no record of it is any key's last) and rewrites the
/// second with a delete horizon (its tombstones stay for `delete.retention.ms`, a day); offsets
/// and timestamps do not move.
pub async fn compaction_keeps_each_keys_last_record_and_tombstones(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let t = ctx.name("t");
    create_with(&mut c, &t, &compacted(&[])).await?;
    produce(&mut c, &t, 0, keyed(&[("k1", Some("a")), ("k2", Some("b"))], 3_600_000, None)?, 1).await?;
    produce(&mut c, &t, 0, keyed(&[("k1", Some("c")), ("k3", None), ("k2", None)], 3_600_010, None)?, 1).await?;
    note_all(ctx, "before", &batches(&mut c, &t, 0).await?);
    produce(&mut c, &t, 0, keyed(&[("k4", Some("d"))], 3_602_000, None)?, 1).await?;
    let after = settled(&mut c, &t, |b| b.get(1).is_some_and(|l| !l.starts_with("batch 0..="))).await?;
    note_all(ctx, "after", &after);
    note_all(ctx, "from 1", &batches(&mut c, &t, 1).await?);
    Ok(())
}

/// As above with `delete.retention.ms` 0: the first cleaning sets the tombstones' horizon to
/// its own time; the next one (after another roll makes the log dirty again) drops them, and
/// rewrites their batch with the record left, keeping its last offset.
pub async fn compaction_drops_tombstones_past_delete_retention_ms(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let t = ctx.name("t");
    create_with(&mut c, &t, &compacted(&[("delete.retention.ms", Some("0"))])).await?;
    produce(&mut c, &t, 0, keyed(&[("k1", Some("a")), ("k2", Some("b"))], 3_600_000, None)?, 1).await?;
    produce(&mut c, &t, 0, keyed(&[("k1", Some("c")), ("k3", None), ("k2", None)], 3_600_010, None)?, 1).await?;
    produce(&mut c, &t, 0, keyed(&[("k4", Some("d"))], 3_602_000, None)?, 1).await?;
    let first = settled(&mut c, &t, |b| b.get(1).is_some_and(|l| !l.starts_with("batch 0..="))).await?;
    note_all(ctx, "first cleaning", &first);
    produce(&mut c, &t, 0, keyed(&[("k5", Some("e"))], 3_604_000, None)?, 1).await?;
    let second = settled(&mut c, &t, |b| b.iter().all(|l| !l.contains("=null"))).await?;
    note_all(ctx, "second cleaning", &second);
    Ok(())
}

/// An idempotent producer's only batch, whose record a later record replaces: the cleaner keeps
/// the batch as an empty header (its producer's last sequence), not the record. A record
/// without a key is refused by a compacted topic.
pub async fn compaction_keeps_a_producers_last_batch_as_an_empty_header(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let t = ctx.name("t");
    create_with(&mut c, &t, &compacted(&[])).await?;
    let (init, pid, epoch) = init_producer_id(&mut c).await?;
    ctx.note("init producer id", init);
    produce(&mut c, &t, 0, keyed(&[("k1", Some("a"))], 3_600_000, Some((pid, epoch, 0)))?, -1).await?;
    produce(&mut c, &t, 0, keyed(&[("k1", Some("b"))], 3_600_010, None)?, 1).await?;
    produce(&mut c, &t, 0, keyed(&[("k2", Some("c"))], 3_602_000, None)?, 1).await?;
    let after = settled(&mut c, &t, |b| b.get(1).is_some_and(|l| l.contains("count=0"))).await?;
    note_all(ctx, "after", &after);
    let keyless = batch(&["no key"], 3_602_010, None)?;
    let q = kafkasim::requests::produce(&t, 0, keyless, 1);
    let r = send(&mut c, q, PRODUCE_V).await?;
    let p = &r.responses[0].partition_responses[0];
    ctx.note(
        "produce without a key",
        format!("{} record_errors={:?} message={:?}", code(p.error_code), p.record_errors, p.error_message),
    );
    // The producer's sequence survived the cleaning: its next batch is in order.
    let next = produce(&mut c, &t, 0, keyed(&[("k1", Some("d"))], 3_602_020, Some((pid, epoch, 1)))?, -1).await?;
    ctx.note("idempotent producer's next batch", format!("{next:?}"));
    Ok(())
}
