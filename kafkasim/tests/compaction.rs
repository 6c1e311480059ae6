//! Compaction on the simulation's clock: a `cleanup.policy=compact` topic is cleaned when the
//! log cleaner next looks (when the cluster starts, then every `log.cleaner.backoff.ms`, 15 s),
//! not before; the cleaned log keeps each key's last record at its offset; a record without a
//! key is refused.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafkasim::client::{decode_records, record_batch};
use kafkasim::requests::{fetch, produce};
use kafkasim::{Client, Cluster};
use sim::net::TcpStream;
use sim::{Ctx, Failure, Simulation};
use support::{alter_topic, expect, fail};

const NONE: i16 = 0;
const INVALID_RECORD: i16 = 87;

type C = Client<TcpStream>;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn send(c: &mut C, records: &[(Option<&str>, &str)]) -> Result<i16, Failure> {
    let ts = now_ms();
    let records: Vec<_> = records.iter().map(|(k, v)| (k.map(str::as_bytes), Some(v.as_bytes()), ts)).collect();
    let r = c.send(produce("t", 0, record_batch(&records, None).map_err(fail)?, 1), 9).await.map_err(fail)?;
    Ok(r.responses[0].partition_responses[0].error_code)
}

/// `offset:value` of every record a consumer reads from offset 0 to the high watermark.
async fn read_all(c: &mut C) -> Result<Vec<String>, Failure> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = c.send(fetch("t", 0, offset, Duration::ZERO), 12).await.map_err(fail)?;
        let p = &r.responses[0].partitions[0];
        let records = decode_records(&p.records.clone().unwrap_or_default()).map_err(fail)?;
        let Some(last) = records.last().map(|r| r.0) else { return Ok(out) };
        for (o, _, v) in records.into_iter().filter(|r| r.0 >= offset) {
            out.push(format!("{o}:{}", String::from_utf8_lossy(&v.unwrap_or_default())));
        }
        offset = last + 1;
        if offset >= p.high_watermark {
            return Ok(out);
        }
    }
}

async fn compacted(ctx: Ctx) -> Result<(), Failure> {
    let cluster = Cluster::builder().build();
    cluster.serve_sim(&ctx).map_err(fail)?;
    cluster.create_topic("t", 1).map_err(|e| fail(format!("{e:?}")))?;
    let stream = ctx.net().host("app").dial("kafka-0:9092").await.map_err(fail)?;
    let mut c = Client::new(stream, "app");
    let configs = [("cleanup.policy", "compact"), ("segment.ms", "1000"), ("min.cleanable.dirty.ratio", "0.01")];
    alter_topic(&mut c, "t", &configs).await?;
    expect("produce", send(&mut c, &[(Some("k1"), "a"), (Some("k2"), "b")]).await?, NONE)?;
    expect("produce", send(&mut c, &[(Some("k1"), "c")]).await?, NONE)?;
    expect("a record without a key", send(&mut c, &[(None, "no key")]).await?, INVALID_RECORD)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Two seconds after the first batch: this one starts a new segment, the rest may be cleaned.
    expect("produce", send(&mut c, &[(Some("k3"), "d")]).await?, NONE)?;
    let everything = ["0:a", "1:b", "2:c", "3:d"].map(String::from).to_vec();
    tokio::time::sleep(Duration::from_secs(12)).await;
    expect("at 14 s, before the cleaner's look at 15 s", read_all(&mut c).await?, everything)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let compacted = ["1:b", "2:c", "3:d"].map(String::from).to_vec();
    expect("after it: k1's first value is gone, offsets stay", read_all(&mut c).await?, compacted)?;
    let view = cluster.partition("t", 0).ok_or_else(|| fail("no partition"))?;
    expect("log start and high watermark", (view.log_start, view.high_watermark), (0, 4))?;
    Ok(())
}

#[test]
fn a_compacted_topic_is_cleaned_at_the_log_cleaners_next_look_on_the_simulation_clock() {
    let report = Simulation::new("compaction").seeds(0..4).run(compacted);
    assert!(report.passed(), "{report}");
}
