//! Scenarios through rdkafka (librdkafka): what an application sees.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fidelity::runner::Ctx;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::support::*;

/// How long a client may take to deliver, read or rebalance before the scenario gives up.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

fn config(ctx: &Ctx) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &ctx.address).set("broker.address.family", "v4").set("log_level", "3");
    c
}

fn consumer_config(ctx: &Ctx, group: &str, reset: &str) -> ClientConfig {
    let mut c = config(ctx);
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", reset)
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.wait.max.ms", "100");
    c
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

async fn created(ctx: &Ctx, base: &str, partitions: i32) -> R<String> {
    let t = ctx.name(base);
    let mut c = connect(ctx, "setup").await?;
    create_ready_topic(&mut c, &t, partitions).await?;
    Ok(t)
}

/// Sends `values` to partition 0 and returns each delivery as `partition:offset` (or the error).
async fn deliver(producer: &FutureProducer, topic: &str, values: &[String], timestamp: Option<i64>) -> Vec<String> {
    let mut out = Vec::new();
    for v in values {
        let mut record = FutureRecord::to(topic).partition(0).key(v.as_str()).payload(v.as_str());
        if let Some(ts) = timestamp {
            record = record.timestamp(ts);
        }
        out.push(match producer.send(record, Duration::from_secs(30)).await {
            Ok(d) => format!("{}:{}", d.partition, d.offset),
            Err((e, _)) => format!("error {:?}", e.rdkafka_error_code()),
        });
    }
    out
}

/// Polls until `n` records arrived or the timeout; each as `offset:value`.
fn read<C: ConsumerContext>(consumer: &BaseConsumer<C>, n: usize, timeout: Duration) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => out.push(format!(
                "{}:{}",
                m.offset(),
                m.payload().map(|p| String::from_utf8_lossy(p).to_string()).unwrap_or_default()
            )),
            Some(Err(e)) => out.push(format!("error {:?}", e.rdkafka_error_code())),
            None => {}
        }
    }
    out
}

fn assign_from(consumer: &BaseConsumer, topic: &str, offset: Offset) -> R {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, offset).map_err(err)?;
    consumer.assign(&tpl).map_err(err)
}

async fn produce_and_consume(ctx: &Ctx, acks: &str) -> R {
    let t = created(ctx, "t", 1).await?;
    let producer: FutureProducer = config(ctx).set("acks", acks).set("linger.ms", "0").create().map_err(err)?;
    let values: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    ctx.note(format!("deliveries with acks={acks}"), deliver(&producer, &t, &values, None).await.join(" "));
    let consumer: BaseConsumer = config(ctx).set("group.id", ctx.name("reader")).create().map_err(err)?;
    assign_from(&consumer, &t, Offset::Beginning)?;
    ctx.note("read from the beginning", read(&consumer, 10, CLIENT_TIMEOUT).join(" "));
    Ok(())
}

pub async fn rdkafka_produce_acks_0_then_consume(ctx: &Ctx) -> R {
    produce_and_consume(ctx, "0").await
}

pub async fn rdkafka_produce_acks_1_then_consume(ctx: &Ctx) -> R {
    produce_and_consume(ctx, "1").await
}

pub async fn rdkafka_produce_acks_all_then_consume(ctx: &Ctx) -> R {
    produce_and_consume(ctx, "all").await
}

pub async fn rdkafka_idempotent_producer_delivers_in_order_once(ctx: &Ctx) -> R {
    let t = created(ctx, "t", 1).await?;
    let producer: FutureProducer = config(ctx)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("max.in.flight.requests.per.connection", "5")
        .create()
        .map_err(err)?;
    let values: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    let sends = values
        .iter()
        .map(|v| producer.send(FutureRecord::to(&t).partition(0).key(v).payload(v), Duration::from_secs(30)));
    let offsets: Vec<String> = futures::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| match r {
            Ok(d) => d.offset.to_string(),
            Err((e, _)) => format!("error {:?}", e.rdkafka_error_code()),
        })
        .collect();
    ctx.note("delivered offsets", offsets.join(" "));
    let consumer: BaseConsumer = config(ctx).set("group.id", ctx.name("reader")).create().map_err(err)?;
    assign_from(&consumer, &t, Offset::Beginning)?;
    let read = read(&consumer, 50, CLIENT_TIMEOUT);
    let in_order = read.iter().enumerate().all(|(i, r)| *r == format!("{i}:v{i}"));
    ctx.note("read back", format!("{} records, in order once: {in_order}", read.len()));
    Ok(())
}

pub async fn rdkafka_auto_offset_reset_earliest_latest_and_error(ctx: &Ctx) -> R {
    let t = created(ctx, "t", 1).await?;
    let producer: FutureProducer = config(ctx).create().map_err(err)?;
    let five: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    deliver(&producer, &t, &five, None).await;
    let earliest: BaseConsumer = consumer_config(ctx, &ctx.name("earliest"), "earliest").create().map_err(err)?;
    assign_from(&earliest, &t, Offset::Stored)?;
    ctx.note("no committed offset, earliest", read(&earliest, 5, CLIENT_TIMEOUT).join(" "));
    let latest: BaseConsumer = consumer_config(ctx, &ctx.name("latest"), "latest").create().map_err(err)?;
    assign_from(&latest, &t, Offset::Stored)?;
    // Let the reset to the end happen before the next record exists.
    ctx.note("no committed offset, latest: before a new record", read(&latest, 1, Duration::from_secs(3)).join(" "));
    deliver(&producer, &t, &["v5".to_string()], None).await;
    ctx.note("no committed offset, latest: after a new record", read(&latest, 1, CLIENT_TIMEOUT).join(" "));
    let error: BaseConsumer = consumer_config(ctx, &ctx.name("error"), "error").create().map_err(err)?;
    assign_from(&error, &t, Offset::Offset(100))?;
    ctx.note("offset 100 of 6, reset error", read(&error, 1, CLIENT_TIMEOUT).join(" "));
    Ok(())
}

pub async fn rdkafka_out_of_range_committed_offset_is_reset(ctx: &Ctx) -> R {
    let t = created(ctx, "t", 1).await?;
    let producer: FutureProducer = config(ctx).create().map_err(err)?;
    let five: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    deliver(&producer, &t, &five, None).await;
    let mut c = connect(ctx, "committer").await?;
    for (group, reset) in [("earliest", "earliest"), ("latest", "latest")] {
        let g = ctx.name(group);
        coordinator_ready(&mut c, &g).await?;
        ctx.note(
            format!("commit offset 100 for {group}"),
            commit(&mut c, commit_request(&g, -1, "", None, &t, 0, 100, None)).await?,
        );
        let consumer: BaseConsumer = consumer_config(ctx, &g, reset).create().map_err(err)?;
        assign_from(&consumer, &t, Offset::Stored)?;
        let first = read(&consumer, 1, Duration::from_secs(3));
        ctx.note(format!("committed 100 of 5, reset {reset}"), first.join(" "));
    }
    Ok(())
}

pub async fn rdkafka_group_commit_and_resume(ctx: &Ctx) -> R {
    let t = created(ctx, "t", 1).await?;
    let g = ctx.name("g");
    let producer: FutureProducer = config(ctx).create().map_err(err)?;
    let five: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    deliver(&producer, &t, &five, None).await;
    {
        let consumer: BaseConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
        consumer.subscribe(&[&t]).map_err(err)?;
        ctx.note("first consumer reads", read(&consumer, 5, CLIENT_TIMEOUT).join(" "));
        consumer.commit_consumer_state(CommitMode::Sync).map_err(err)?;
        let committed = consumer.committed(Duration::from_secs(10)).map_err(err)?;
        let offsets: Vec<String> =
            committed.elements().iter().map(|e| format!("{}:{:?}", e.partition(), e.offset())).collect();
        ctx.note("committed", offsets.join(" "));
    }
    let more: Vec<String> = (5..8).map(|i| format!("v{i}")).collect();
    deliver(&producer, &t, &more, None).await;
    let consumer: BaseConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
    consumer.subscribe(&[&t]).map_err(err)?;
    ctx.note("second consumer resumes", read(&consumer, 3, CLIENT_TIMEOUT).join(" "));
    Ok(())
}

pub async fn rdkafka_commit_metadata_round_trips(ctx: &Ctx) -> R {
    let t = created(ctx, "t", 2).await?;
    let g = ctx.name("g");
    let consumer: BaseConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&t, 0, Offset::Offset(4)).map_err(err)?;
    tpl.add_partition_offset(&t, 1, Offset::Offset(7)).map_err(err)?;
    if let Some(mut e) = tpl.find_partition(&t, 0) {
        e.set_metadata("checkpoint-4");
    }
    consumer.commit(&tpl, CommitMode::Sync).map_err(err)?;
    let mut query = TopicPartitionList::new();
    query.add_partition(&t, 0);
    query.add_partition(&t, 1);
    let committed = consumer.committed_offsets(query, Duration::from_secs(10)).map_err(err)?;
    for e in committed.elements() {
        ctx.note(
            format!("committed partition {}", e.partition()),
            format!("{:?} metadata={:?}", e.offset(), e.metadata()),
        );
    }
    Ok(())
}

/// The rebalance callbacks a consumer saw, in order.
type Events = Arc<Mutex<Vec<String>>>;

/// Records the rebalance callbacks a consumer sees.
#[derive(Default)]
struct Rebalances {
    events: Events,
}

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // Cooperative rounds that move nothing come and go with timing: only movements count.
        if let Rebalance::Assign(tpl) | Rebalance::Revoke(tpl) = rebalance
            && tpl.count() == 0
        {
            return;
        }
        let event = match rebalance {
            Rebalance::Assign(tpl) => format!("assign {}", tpl.count()),
            Rebalance::Revoke(tpl) => format!("revoke {}", tpl.count()),
            Rebalance::Error(e) => format!("error {e}"),
        };
        self.events.lock().expect("events lock").push(event);
    }
}

fn assigned(c: &BaseConsumer<Rebalances>) -> Vec<i32> {
    let mut ps: Vec<i32> =
        c.assignment().map(|a| a.elements().iter().map(|e| e.partition()).collect()).unwrap_or_default();
    ps.sort();
    ps
}

pub async fn rdkafka_cooperative_sticky_incremental_rebalance(ctx: &Ctx) -> R {
    let t = created(ctx, "t", 4).await?;
    let g = ctx.name("g");
    let make = |name: &str| -> R<(BaseConsumer<Rebalances>, Events)> {
        let events = Arc::new(Mutex::new(Vec::new()));
        let c: BaseConsumer<Rebalances> = consumer_config(ctx, &g, "earliest")
            .set("client.id", name)
            .set("partition.assignment.strategy", "cooperative-sticky")
            .create_with_context(Rebalances { events: Arc::clone(&events) })
            .map_err(err)?;
        c.subscribe(&[&t]).map_err(err)?;
        Ok((c, events))
    };
    let (a, a_events) = make("a")?;
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while assigned(&a).len() < 4 && Instant::now() < deadline {
        a.poll(Duration::from_millis(100));
    }
    let before = assigned(&a);
    ctx.note("a alone", format!("{before:?}"));
    let (b, b_events) = make("b")?;
    while (assigned(&a).len() != 2 || assigned(&b).len() != 2) && Instant::now() < deadline {
        a.poll(Duration::from_millis(50));
        b.poll(Duration::from_millis(50));
    }
    let (after_a, after_b) = (assigned(&a), assigned(&b));
    ctx.note("a and b", format!("a has {}, b has {}", after_a.len(), after_b.len()));
    ctx.note("a kept a subset of what it had", format!("{}", after_a.iter().all(|p| before.contains(p))));
    let mut union: Vec<i32> = after_a.iter().chain(&after_b).copied().collect();
    union.sort();
    ctx.note("together", format!("{union:?}"));
    ctx.note("a's callbacks", a_events.lock().expect("events lock").join(", "));
    ctx.note("b's callbacks", b_events.lock().expect("events lock").join(", "));
    Ok(())
}

pub async fn rdkafka_watermarks_and_offsets_for_times(ctx: &Ctx) -> R {
    let t = created(ctx, "t", 1).await?;
    let producer: FutureProducer = config(ctx).create().map_err(err)?;
    for (i, ts) in [1_000_000, 2_000_000, 3_000_000].into_iter().enumerate() {
        deliver(&producer, &t, &[format!("v{i}")], Some(ts_base() + ts)).await;
    }
    let consumer: BaseConsumer = config(ctx).set("group.id", ctx.name("g")).create().map_err(err)?;
    let (low, high) = consumer.fetch_watermarks(&t, 0, Duration::from_secs(10)).map_err(err)?;
    ctx.note("watermarks", format!("low={low} high={high}"));
    for ts in [500_000, 1_500_000, 3_000_000, 4_000_000] {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&t, 0, Offset::Offset(ts_base() + ts)).map_err(err)?;
        let found = consumer.offsets_for_times(tpl, Duration::from_secs(10)).map_err(err)?;
        let offsets: Vec<String> = found.elements().iter().map(|e| format!("{:?}", e.offset())).collect();
        ctx.note(format!("offset for time {ts}"), offsets.join(" "));
    }
    Ok(())
}

pub async fn rdkafka_admin_creates_and_deletes_topics(ctx: &Ctx) -> R {
    let admin: AdminClient<DefaultClientContext> = config(ctx).create().map_err(err)?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let t = ctx.name("t");
    let render = |results: Vec<Result<String, (String, rdkafka::types::RDKafkaErrorCode)>>| -> String {
        results
            .into_iter()
            .map(|r| match r {
                Ok(_) => "ok".to_string(),
                Err((_, code)) => format!("{code:?}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let r = admin.create_topics(&[NewTopic::new(&t, 3, TopicReplication::Fixed(1))], &opts).await.map_err(err)?;
    ctx.note("create 3 partitions", render(r));
    let r = admin.create_topics(&[NewTopic::new(&t, 3, TopicReplication::Fixed(1))], &opts).await.map_err(err)?;
    ctx.note("create again", render(r));
    let rf3 = ctx.name("rf3");
    let r = admin.create_topics(&[NewTopic::new(&rf3, 1, TopicReplication::Fixed(3))], &opts).await.map_err(err)?;
    ctx.note("replication factor 3", render(r));
    let r = admin.delete_topics(&[&t], &opts).await.map_err(err)?;
    ctx.note("delete", render(r));
    let r = admin.delete_topics(&[&t], &opts).await.map_err(err)?;
    ctx.note("delete again", render(r));
    Ok(())
}
