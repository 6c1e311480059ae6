//! The log's time and size configs. Retention: `retention.ms` and `retention.bytes` delete whole
//! segments at the broker's retention checks (both servers check every second here:
//! kafka-local.sh's and the container's `log.retention.check.interval.ms`, kafkasim's
//! `ClusterBuilder::retention_check`), and the log start offset moves to the first offset kept.
//! `message.timestamp.type=LogAppendTime`: the broker's clock stamps each batch.

use std::time::Duration;

use fidelity::runner::Ctx;

use crate::configs::create_with;
use crate::support::*;

/// The longest a scenario waits for a retention check to delete something.
const RETENTION_WAIT: Duration = Duration::from_secs(20);

/// Polls the earliest offset until it is no longer `from` (or [`RETENTION_WAIT`] passes), then
/// waits two more checks and returns it: the log start offset retention settles on.
async fn settled_earliest(c: &mut Conn, topic: &str, from: i64) -> R<i64> {
    let deadline = tokio::time::Instant::now() + RETENTION_WAIT;
    while list_offsets(c, topic, 0, -2).await?.1 == from && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(list_offsets(c, topic, 0, -2).await?.1)
}

/// Two records an hour old, then one from now: with `segment.ms` one minute the second batch
/// starts a new segment (its timestamp is an hour past the first's), so the old one can go on
/// its own; `retention.ms` 30 min deletes it and keeps the new one.
pub async fn retention_ms_deletes_segments_older_than_it(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let t = ctx.name("t");
    create_with(&mut c, &t, &[("retention.ms", Some("1800000")), ("segment.ms", Some("60000"))]).await?;
    // ts_base() is an hour before the suite started; 3,600,000 after it is about now.
    produce(&mut c, &t, 0, batch(&["old-a", "old-b"], 0, None)?, 1).await?;
    produce(&mut c, &t, 0, batch(&["new"], 3_600_000, None)?, 1).await?;
    ctx.note("earliest after the checks", settled_earliest(&mut c, &t, 0).await?.to_string());
    ctx.note("latest", format!("{:?}", list_offsets(&mut c, &t, 0, -1).await?));
    let below = fetch(&mut c, &t, 0, 0, 0).await?;
    ctx.note("fetch from 0", format!("{} log_start={}", below.code, below.log_start));
    ctx.note("fetch from 2", fetch(&mut c, &t, 0, 2, 0).await?.render());
    Ok(())
}

/// Seven 400 KiB records in 1 MiB segments (two per segment): `retention.bytes` 1.5 MB deletes the
/// oldest segment (the rest, ~2 MB, stays above it) and keeps the next (deleting it would go
/// below).
pub async fn retention_bytes_deletes_the_oldest_segments_above_it(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let t = ctx.name("t");
    create_with(&mut c, &t, &[("retention.bytes", Some("1500000")), ("segment.bytes", Some("1048576"))]).await?;
    let value = "x".repeat(400 * 1024);
    for i in 0..7 {
        produce(&mut c, &t, 0, batch(&[value.as_str()], 3_600_000 + i, None)?, 1).await?;
    }
    ctx.note("earliest after the checks", settled_earliest(&mut c, &t, 0).await?.to_string());
    ctx.note("latest", format!("{:?}", list_offsets(&mut c, &t, 0, -1).await?));
    Ok(())
}

/// `message.timestamp.type=LogAppendTime`: the broker stamps each batch with its own clock. The
/// produce response carries that time, a fetched batch has the timestamp-type attribute and that
/// time as every record's timestamp, and ListOffsets by time and by max timestamp find it (the
/// records were sent with timestamps an hour old).
pub async fn log_append_time_replaces_the_producers_timestamps(ctx: &Ctx) -> R {
    use kafkasim::kafka_protocol::records::{RecordBatchDecoder, TimestampType};
    let mut c = connect(ctx, "c").await?;
    let t = ctx.name("t");
    create_with(&mut c, &t, &[("message.timestamp.type", Some("LogAppendTime"))]).await?;
    let q = kafkasim::requests::produce(&t, 0, batch(&["a", "b"], 0, None)?, 1);
    let r = send(&mut c, q, PRODUCE_V).await?;
    let p = &r.responses[0].partition_responses[0];
    let stamped = p.log_append_time_ms;
    // An hour after ts_base() is when the suite started: the stamp is later than that.
    ctx.note(
        "produce",
        format!("{} log append time after the suite started: {}", code(p.error_code), stamped - ts_base() >= 3_600_000),
    );
    let f = send(&mut c, kafkasim::requests::fetch(&t, 0, 0, Duration::ZERO), FETCH_V).await?;
    let mut bytes = f.responses[0].partitions[0].records.clone().unwrap_or_default();
    let sets = RecordBatchDecoder::decode_all(&mut bytes).map_err(|e| e.to_string())?;
    let records: Vec<_> = sets.iter().flat_map(|s| s.records.iter()).collect();
    let log_append = records.iter().all(|r| r.timestamp_type == TimestampType::LogAppend);
    ctx.note("fetched", format!("{} records, all LogAppendTime: {log_append}", records.len()));
    let by_time = list_offsets(&mut c, &t, 0, 1).await?;
    ctx.note(
        "offset for a time just after the sent timestamps",
        format!("{} offset={} at the stamp: {}", by_time.0, by_time.1, by_time.2 + ts_base() == stamped),
    );
    let max = list_offsets(&mut c, &t, 0, -3).await?;
    ctx.note("max timestamp", format!("{} offset={} at the stamp: {}", max.0, max.1, max.2 + ts_base() == stamped));
    Ok(())
}
