//! Retention on the simulation's clock: `retention.ms` and `retention.bytes` set by
//! IncrementalAlterConfigs take effect at the broker's retention checks (first at 30 s, then every
//! 5 min, Kafka's `log.initial.task.delay.ms` and `log.retention.check.interval.ms`), not before;
//! a fetch below the new log start offset answers OFFSET_OUT_OF_RANGE.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafkasim::client::record_batch;
use kafkasim::requests::{fetch, list_offsets, produce};
use kafkasim::{Client, Cluster};
use sim::net::TcpStream;
use sim::{Ctx, Failure, Simulation};
use support::{expect, fail};

const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;

type C = Client<TcpStream>;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn setup(ctx: &Ctx, configs: &[(&str, &str)]) -> Result<(Cluster, C), Failure> {
    let cluster = Cluster::builder().build();
    cluster.serve_sim(ctx).map_err(fail)?;
    cluster.create_topic("t", 1).map_err(|e| fail(format!("{e:?}")))?;
    let stream = ctx.net().host("app").dial("kafka-0:9092").await.map_err(fail)?;
    let mut c = Client::new(stream, "app");
    support::alter_topic(&mut c, "t", configs).await?;
    Ok((cluster, c))
}

async fn send(c: &mut C, values: &[&str], ts: i64) -> Result<i16, Failure> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()), ts)).collect();
    let r = c.send(produce("t", 0, record_batch(&records, None).map_err(fail)?, 1), 9).await.map_err(fail)?;
    Ok(r.responses[0].partition_responses[0].error_code)
}

/// (error code, log start offset) of a fetch from `offset`.
async fn fetch_from(c: &mut C, offset: i64) -> Result<(i16, i64), Failure> {
    let r = c.send(fetch("t", 0, offset, Duration::ZERO), 12).await.map_err(fail)?;
    let p = &r.responses[0].partitions[0];
    Ok((p.error_code, p.log_start_offset))
}

async fn earliest(c: &mut C) -> Result<i64, Failure> {
    let r = c.send(list_offsets("t", 0, -2), 7).await.map_err(fail)?;
    Ok(r.topics[0].partitions[0].offset)
}

async fn by_time(ctx: Ctx) -> Result<(), Failure> {
    let (cluster, mut c) = setup(&ctx, &[("retention.ms", "60000")]).await?;
    expect("produce", send(&mut c, &["a", "b"], now_ms()).await?, NONE)?;
    let start = |cluster: &Cluster| cluster.partition("t", 0).map(|v| v.log_start);
    // The check at 30 s finds the records 30 s old; the next, at 330 s, finds them expired.
    tokio::time::sleep(Duration::from_secs(320)).await;
    expect("kept until the check after they expire", start(&cluster), Some(0))?;
    expect("readable at 320 s", fetch_from(&mut c, 0).await?, (NONE, 0))?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    expect("deleted by the check at 330 s", start(&cluster), Some(2))?;
    expect("a fetch below the log start", fetch_from(&mut c, 0).await?, (OFFSET_OUT_OF_RANGE, -1))?;
    expect("earliest", earliest(&mut c).await?, 2)?;
    expect("offsets go on", send(&mut c, &["c"], now_ms()).await?, NONE)?;
    expect("high watermark", cluster.partition("t", 0).map(|v| v.high_watermark), Some(3))?;
    Ok(())
}

#[test]
fn retention_ms_deletes_expired_records_at_the_next_retention_check_on_the_simulation_clock() {
    let report = Simulation::new("retention_ms").seeds(0..4).run(by_time);
    assert!(report.passed(), "{report}");
}

async fn by_size(ctx: Ctx) -> Result<(), Failure> {
    // segment.bytes at its minimum (1 MiB) and 400 KiB batches: two per segment.
    let (cluster, mut c) = setup(&ctx, &[("retention.bytes", "1500000"), ("segment.bytes", "1048576")]).await?;
    let value = "x".repeat(400 * 1024);
    for _ in 0..5 {
        expect("produce", send(&mut c, &[value.as_str()], now_ms()).await?, NONE)?;
    }
    tokio::time::sleep(Duration::from_secs(31)).await;
    // Five batches in three segments (2, 2, 1): deleting the first leaves 3 batches (~1.2 MB),
    // under 1.5 MB, so it stays; nothing is deleted.
    expect("within retention.bytes", cluster.partition("t", 0).map(|v| v.log_start), Some(0))?;
    for _ in 0..2 {
        expect("produce", send(&mut c, &[value.as_str()], now_ms()).await?, NONE)?;
    }
    // Seven batches (~2.9 MB) in four segments: deleting the first leaves ~2.05 MB, the second
    // ~1.2 MB (below 1.5 MB): only the first goes, at the check at 330 s.
    tokio::time::sleep(Duration::from_secs(290)).await;
    expect("not before the check", cluster.partition("t", 0).map(|v| v.log_start), Some(0))?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    expect("the oldest segment deleted", cluster.partition("t", 0).map(|v| v.log_start), Some(2))?;
    expect("earliest", earliest(&mut c).await?, 2)?;
    Ok(())
}

#[test]
fn retention_bytes_deletes_the_oldest_segments_while_the_rest_stays_above_it() {
    let report = Simulation::new("retention_bytes").seeds(0..4).run(by_size);
    assert!(report.passed(), "{report}");
}
