//! Retention: `retention.ms` and `retention.bytes` delete whole segments at the broker's
//! retention checks (both servers check every second here: kafka-local.sh's and the container's
//! `log.retention.check.interval.ms`, kafkasim's `ClusterBuilder::retention_check`), and the log
//! start offset moves to the first offset kept.

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
