//! librdkafka #3584 (present in librdkafka 2.2.0 = rdkafka 0.34.0, fixed in 2.3.0 = rdkafka
//! 0.35.0 by librdkafka PR #4438).
//!
//! An idempotent producer (KIP-98) promises that what it is acknowledged for is in the log once,
//! in the order it was sent, across lost connections and retries: the broker deduplicates a
//! retried batch by its sequence number and refuses a batch that skips one with
//! `OUT_OF_ORDER_SEQUENCE_NUMBER`. librdkafka keeps, per partition, the sequence it expects the
//! next acknowledgement at (`next_ack_seq`) and judges an `OUT_OF_ORDER_SEQUENCE_NUMBER` by it:
//! a refused batch after the expected one only means an earlier batch failed (bump the epoch and
//! resend), but a refused batch *at* the expected sequence (or before it) means producer and
//! broker disagree, and the producer raises a fatal error — it stops, and every later send fails.
//!
//! In librdkafka 2.2.0 a request that failed with a *possibly persisted* error (a lost
//! connection, a timeout: the producer cannot know whether the broker appended it) moved
//! `next_ack_seq` past its batch, as if it had been appended. When it had not been, and its retry
//! was then refused with a retriable error that says "not appended" (`NOT_ENOUGH_REPLICAS`) while
//! the batch behind it reached the broker, the broker answered that batch
//! `OUT_OF_ORDER_SEQUENCE_NUMBER` (it never got the one before), and librdkafka, finding the
//! refused batch at (or before) the sequence it expected next, went fatal: "failed due to
//! sequence desynchronization" (one batch in flight when the connection dropped) or "with
//! rewound sequence number" (several). librdkafka 2.3.0 treats a possibly persisted batch as not
//! persisted (`next_ack_seq` stays at it) and expects `DUPLICATE_SEQUENCE_NUMBER` or success on
//! the retry; the same refusal is then "skipped sequence numbers": epoch bump, resend, no fatal
//! error (CHANGELOG 2.3.0, "Idempotent producer fixes"; librdkafka test 0144).
//!
//! The scenario, written as a user would have written it before the bug was known: a real
//! rdkafka `FutureProducer` with `enable.idempotence=true` sends a numbered sequence to one
//! partition of kafkasim served on loopback, while the broker has trouble in rounds — its
//! connections drop under produce requests (as a broker restart or a network flap does: the
//! requests are not handled, the producer cannot know that), then for a while it is slow
//! (requests held before being handled) and refuses writes with `NOT_ENOUGH_REPLICAS` (the ISR
//! shrank below `min.insync.replicas`), then it recovers. The swarm draws the producer's batching
//! (`linger.ms`, `batch.num.messages`), the pace and the count of sends; the seed draws the
//! rounds. Oracles:
//! - `no-fatal-error`: the idempotent producer never raises a fatal error (every fault here is
//!   one Kafka tells clients to retry);
//! - `every-send-acknowledged`: every send is acknowledged within `message.timeout.ms`;
//! - `exactly-once-in-order`: the partition's log holds each message exactly once, in the order
//!   it was sent.
//!
//! librdkafka runs its own threads against real sockets in real time, so the scenario runs on
//! a thread of its own (the run's thread only draws the plan and judges): a seed fixes the plan,
//! not the interleaving, and a failing seed replays statistically ("replays k of n").

use std::time::Duration;

use kafkasim::kafka_protocol::ResponseError;
use kafkasim::kafka_protocol::messages::ApiKey;
use kafkasim::{Broker, Cluster, Fault, FaultAction};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use sim::{Ctx, Failure, Oracle, Simulation};

/// The idempotent producer raised a fatal error.
const NO_FATAL_ERROR: Oracle = Oracle::new("no-fatal-error");
/// A send failed or was never answered.
const EVERY_SEND_ACKNOWLEDGED: Oracle = Oracle::new("every-send-acknowledged");
/// The log lost, duplicated or reordered a message.
const EXACTLY_ONCE_IN_ORDER: Oracle = Oracle::new("exactly-once-in-order");

const TOPIC: &str = "ledger";
/// The producer's `message.timeout.ms`: far beyond the faults, so every send can be acknowledged.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the deliveries may take after the last send before the run gives up.
const DELIVERY_DEADLINE: Duration = Duration::from_secs(45);

fn main() {
    let simulation = Simulation::new("librdkafka-3584").watchdog(Duration::from_secs(180));
    regression::main(simulation, scenario);
}

/// One round of broker trouble, in real time from the previous round's end.
#[derive(Clone, Debug)]
struct Round {
    /// Quiet time before the round.
    after: Duration,
    /// Produce requests close their connection instead of being handled.
    drop_for: Duration,
    /// Then produce requests are refused `NOT_ENOUGH_REPLICAS` (and held `delay` each).
    refuse_for: Duration,
    /// How long each produce request is held before it is handled, while refusing and a little
    /// beyond (`slow_beyond`).
    delay: Duration,
    slow_beyond: Duration,
}

/// What the run's thread drew: the producer's configuration, its sends, the broker's rounds.
#[derive(Clone, Debug)]
struct Plan {
    messages: u64,
    gap: Duration,
    linger_ms: u64,
    batch_messages: u64,
    rounds: Vec<Round>,
}

impl Plan {
    fn draw(ctx: &Ctx) -> Plan {
        let messages = ctx.swarm().int("messages", 150..=400);
        let gap = ctx.swarm().duration("send_gap", Duration::from_millis(1)..=Duration::from_millis(3));
        let linger_ms = ctx.swarm().int("linger_ms", 0..=5);
        let batch_messages = ctx.swarm().int("batch_num_messages", 1..=8);
        let count = ctx.swarm().int("rounds", 1..=4);
        let mut faults = ctx.source("faults");
        let ms = |s: &mut sim::Source, lo: u64, hi: u64| Duration::from_millis(s.range(lo..=hi));
        let rounds = (0..count)
            .map(|_| Round {
                after: ms(&mut faults, 50, 400),
                drop_for: ms(&mut faults, 10, 200),
                refuse_for: ms(&mut faults, 50, 600),
                delay: ms(&mut faults, 2, 30),
                slow_beyond: ms(&mut faults, 0, 200),
            })
            .collect();
        Plan { messages, gap, linger_ms, batch_messages, rounds }
    }
}

/// What the real-world side saw.
#[derive(Debug, Default)]
struct Observed {
    /// `fatal_error()` of the producer's client at the end.
    fatal: Option<(String, String)>,
    /// Acknowledged sends.
    acknowledged: u64,
    /// The first failed send: its number and error.
    first_failed: Option<(u64, String)>,
    /// Sends neither acknowledged nor failed by the deadline.
    unanswered: u64,
    /// The partition's final log, values in offset order.
    log: Vec<String>,
    /// The highest producer epoch among the log's batches: above 0 when the producer bumped its
    /// epoch to recover from skipped sequences (what librdkafka 2.3.0 does here).
    epoch: i16,
}

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let plan = Plan::draw(&ctx);
    ctx.record("plan", "harness", format!("{plan:?}"));
    // librdkafka's threads and the loopback broker run in real time, away from the run's thread
    // (whose clock and randomness are the simulation's).
    let worker = plan.clone();
    let observed = std::thread::Builder::new()
        .name("librdkafka-3584".to_string())
        .spawn(move || real_world(&worker))
        .map_err(|e| Failure::correctness("harness", format!("cannot start the scenario's thread: {e}")))?
        .join()
        .map_err(|_| Failure::correctness("harness", "the scenario's thread panicked"))?
        .map_err(|e| Failure::correctness("harness", e))?;

    if let Some((code, reason)) = &observed.fatal {
        ctx.record("producer", "rdkafka", format!("fatal error {code}"));
        return Err(Failure::correctness(
            NO_FATAL_ERROR,
            format!(
                "the idempotent producer raised a fatal error after {} of {} sends were acknowledged: {code}: {reason}",
                observed.acknowledged, plan.messages
            ),
        ));
    }
    ctx.record("producer", "rdkafka", "no fatal error");
    if let Some((n, e)) = &observed.first_failed {
        return Err(Failure::correctness(
            EVERY_SEND_ACKNOWLEDGED,
            format!("send {n} failed: {e} ({} of {} acknowledged)", observed.acknowledged, plan.messages),
        ));
    }
    if observed.unanswered > 0 {
        return Err(Failure::liveness(
            EVERY_SEND_ACKNOWLEDGED,
            format!(
                "{} of {} sends unanswered {DELIVERY_DEADLINE:?} after the last",
                observed.unanswered, plan.messages
            ),
        ));
    }
    let expected: Vec<String> = (0..plan.messages).map(value).collect();
    if observed.log != expected {
        ctx.record("log", "harness", "differs from the sends");
        return Err(Failure::correctness(EXACTLY_ONCE_IN_ORDER, describe_log(&observed.log, &expected)));
    }
    ctx.record("log", "harness", format!("each message once, in order (producer epoch {})", observed.epoch));
    Ok(())
}

fn value(i: u64) -> String {
    format!("m-{i:05}")
}

/// The first place the log departs from the sends.
fn describe_log(log: &[String], expected: &[String]) -> String {
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for v in log {
        *seen.entry(v.as_str()).or_default() += 1;
    }
    if let Some((v, n)) = seen.iter().find(|(_, n)| **n > 1) {
        return format!("{v} is in the log {n} times ({} records for {} sends)", log.len(), expected.len());
    }
    if let Some(v) = expected.iter().find(|v| !seen.contains_key(v.as_str())) {
        return format!(
            "{v} was acknowledged but is not in the log ({} records for {} sends)",
            log.len(),
            expected.len()
        );
    }
    let at = log.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
    format!("the log is out of order at offset {at}: {} where {} was sent", log[at], expected[at])
}

/// The scenario in real time: the loopback broker, the producer, the broker's rounds of trouble.
fn real_world(plan: &Plan) -> Result<Observed, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let broker = Broker::start_local().map_err(|e| format!("loopback broker: {e}"))?;
    broker.cluster().create_topic(TOPIC, 1).map_err(|e| format!("create topic: {e:?}"))?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .set("enable.idempotence", "true")
        .set("linger.ms", plan.linger_ms.to_string())
        .set("batch.num.messages", plan.batch_messages.to_string())
        .set("retry.backoff.ms", "20")
        .set("reconnect.backoff.ms", "10")
        .set("reconnect.backoff.max.ms", "200")
        .set("message.timeout.ms", MESSAGE_TIMEOUT.as_millis().to_string())
        .create()
        .map_err(|e| format!("producer: {e}"))?;

    let observed = runtime.block_on(async {
        // Warm up: the producer id, metadata and a connection, before the trouble starts.
        let first = producer
            .send_result(FutureRecord::<(), String>::to(TOPIC).partition(0).payload(&value(0)))
            .map_err(|(e, _)| format!("enqueue: {e}"))?;
        let first = tokio::time::timeout(DELIVERY_DEADLINE, first).await;
        if !matches!(first, Ok(Ok(Ok(_)))) {
            return Err(format!("the warm-up send was not acknowledged: {first:?}"));
        }

        let trouble = tokio::spawn(trouble(broker.cluster().clone(), plan.rounds.clone()));
        let mut deliveries = Vec::new();
        for i in 1..plan.messages {
            let v = value(i);
            match producer.send_result(FutureRecord::<(), String>::to(TOPIC).partition(0).payload(&v)) {
                Ok(d) => deliveries.push((i, Ok(d))),
                // Enqueueing fails once the producer is fatal (or its queue is full).
                Err((e, _)) => deliveries.push((i, Err(e.to_string()))),
            }
            tokio::time::sleep(plan.gap).await;
        }
        let mut observed = Observed { acknowledged: 1, ..Observed::default() };
        let deadline = tokio::time::Instant::now() + DELIVERY_DEADLINE;
        for (i, d) in deliveries {
            let d = match d {
                Ok(d) => d,
                Err(e) => {
                    observed.first_failed.get_or_insert((i, format!("could not be enqueued: {e}")));
                    continue;
                }
            };
            match tokio::time::timeout_at(deadline, d).await {
                Ok(Ok(Ok(_))) => observed.acknowledged += 1,
                Ok(Ok(Err((e, _)))) => {
                    observed.first_failed.get_or_insert((i, e.to_string()));
                }
                Ok(Err(_)) => {
                    observed.first_failed.get_or_insert((i, "delivery canceled".to_string()));
                }
                Err(_) => observed.unanswered += 1,
            }
        }
        let _ = trouble.await;
        observed.fatal = producer.client().fatal_error().map(|(code, reason)| (format!("{code:?}"), reason));
        let log =
            kafkasim::history::final_log(broker.cluster(), TOPIC, 0).await.map_err(|e| format!("final read: {e}"))?;
        observed.log = log.records.into_iter().map(|r| r.value).collect();
        observed.epoch = broker
            .cluster()
            .partition(TOPIC, 0)
            .map_or(0, |p| p.batches.iter().map(|b| b.producer_epoch).max().unwrap_or(0));
        Ok::<_, String>(observed)
    })?;
    drop(producer);
    drop(broker);
    Ok(observed)
}

/// The broker's rounds of trouble on the topic's produce requests: connections dropped, then
/// slow and refusing `NOT_ENOUGH_REPLICAS`, then slow a little longer, then healthy.
async fn trouble(cluster: Cluster, rounds: Vec<Round>) {
    let produce = |action| Fault::new(ApiKey::Produce, action).topic(TOPIC);
    for round in rounds {
        tokio::time::sleep(round.after).await;
        let dropping = cluster.install(produce(FaultAction::DropConnection));
        tokio::time::sleep(round.drop_for).await;
        // Installed before the drop is removed, so no request slips through between them; the
        // delay first, so a request is held and then refused (faults apply in install order).
        let slow = cluster.install(produce(FaultAction::Delay(round.delay)));
        let refusing = cluster.install(produce(FaultAction::Error(ResponseError::NotEnoughReplicas)));
        drop(dropping);
        tokio::time::sleep(round.refuse_for).await;
        drop(refusing);
        tokio::time::sleep(round.slow_beyond).await;
        drop(slow);
    }
}
