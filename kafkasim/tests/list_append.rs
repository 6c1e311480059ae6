//! The list-append history checker on Kafka partitions inside a simulation: producers (idempotent,
//! retrying a batch whose response was lost; and fire-and-forget `acks=0`), a reader fetching at
//! seeded offsets and a live subscriber per partition, all through the protocol-level client over
//! the simulated network, with faults — produce applied then dropped, produce refused
//! (`NOT_ENOUGH_REPLICAS`), a partition's leader going down — so that acknowledged, failed and
//! unknown outcomes all occur. The correct run passes the `list-append` oracle and replays
//! exactly across processes; each planted client or broker bug is caught with its rule named.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use kafkasim::history::{self, Recording, produce_partition, produce_request};
use kafkasim::kafka_protocol::ResponseError as E;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::StrBytes;
use kafkasim::{Client, Cluster, Control, Fault, FaultAction};
use sim::check::list_append::{self, Action, History, ListAppend, Record, Recorder, Report, Rule};
use sim::net::TcpStream;
use sim::{Class, Ctx, Failure, OpOutcome, Simulation};

const TOPIC: &str = "log";
const PARTITIONS: i32 = 2;
const PRODUCERS: usize = 3;
const BATCHES_PER_PRODUCER: usize = 25;
/// Attempts of one batch before the producer gives up on it (its outcome then stays unknown).
const ATTEMPTS_MAX: usize = 4;
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How long subscribers may take to catch up once the producers are done.
const CATCH_UP: Duration = Duration::from_secs(10);

/// The bugs a run can plant.
#[derive(Clone, Copy, Debug, Default)]
struct Bugs {
    /// Producers are not idempotent but still retry a batch whose response was lost: rule 2.
    retry_without_idempotence: bool,
    /// Producers take a lost response for a refusal (and do not retry): rule 6.
    lost_response_is_failure: bool,
    /// The reader numbers the records it got from the fetch offset, not by their own offsets
    /// (a fetch from mid-batch starts at the batch's base): rule 3.
    reader_numbers_from_fetch_offset: bool,
    /// A subscriber that reconnects starts over from offset 0: rule 7.
    subscriber_forgets_position: bool,
    /// The broker loses the tail of every partition, as an unclean leader election does: rule 1.
    log_truncated: bool,
}

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("kafka", e.to_string())
}

/// The partition's leader: stands in for a client's metadata refresh.
fn leader(cluster: &Cluster, partition: i32) -> i32 {
    cluster.partition(TOPIC, partition).map_or(-1, |p| p.leader)
}

async fn dial(ctx: &Ctx, from: &str, broker: i32) -> Option<Client<TcpStream>> {
    let stream = ctx.net().host(from).dial(&format!("kafka-{broker}:9092")).await.ok()?;
    Some(Client::new(stream, from))
}

/// A new idempotent producer id from any live broker.
async fn init_producer(ctx: &Ctx, cluster: &Cluster, from: &str) -> Result<(i64, i16), Failure> {
    for broker in cluster.broker_ids() {
        let Some(mut client) = dial(ctx, from, broker).await else { continue };
        let request = InitProducerIdRequest::default().with_transactional_id(None);
        if let Ok(r) = client.send(request, 4).await
            && r.error_code == 0
        {
            return Ok((r.producer_id.0, r.producer_epoch));
        }
    }
    Err(fail("no broker answered InitProducerId"))
}

/// One producer process: batches of 1–3 unique values to seeded partitions.
async fn producer(ctx: Ctx, cluster: Cluster, recorder: Recorder, index: usize, bugs: Bugs) -> Result<(), Failure> {
    let name = format!("producer-{index}");
    let recording = Recording::new(&recorder, &name);
    let mut source = ctx.source(&format!("producer/{index}"));
    let idempotent = !bugs.retry_without_idempotence;
    let mut pid = if idempotent { Some(init_producer(&ctx, &cluster, &name).await?) } else { None };
    let mut sequences: BTreeMap<i32, i32> = BTreeMap::new();
    let mut clients: BTreeMap<i32, Client<TcpStream>> = BTreeMap::new();
    for n in 0..BATCHES_PER_PRODUCER {
        tokio::time::sleep(source.duration(Duration::from_millis(50)..=Duration::from_millis(250))).await;
        let partition = source.below(PARTITIONS as u64) as i32;
        let values: Vec<String> = (0..source.range(1..=3)).map(|i| format!("{name}-{n}-{i}")).collect();
        // The last producer sends some batches fire-and-forget.
        if index == PRODUCERS - 1 && source.ratio(1, 4) {
            let target = leader(&cluster, partition);
            let Some(mut client) = dial(&ctx, &name, target).await else {
                recording.appends(TOPIC, partition, &values).failed("no connection: never sent");
                continue;
            };
            let _ = recording.produce(&mut client, TOPIC, partition, &values, 0, None).await;
            continue;
        }
        let sequence = *sequences.get(&partition).unwrap_or(&0);
        let producer_fields = pid.map(|(id, epoch)| (id, epoch, sequence));
        let request = produce_request(TOPIC, partition, &values, -1, producer_fields).map_err(fail)?;
        let appends = recording.appends(TOPIC, partition, &values);
        let mut last: Option<String> = None;
        let mut answered = None;
        for _attempt in 0..ATTEMPTS_MAX {
            let target = leader(&cluster, partition);
            if let std::collections::btree_map::Entry::Vacant(slot) = clients.entry(target)
                && let Some(client) = dial(&ctx, &name, target).await
            {
                slot.insert(client);
            }
            let Some(client) = clients.get_mut(&target) else {
                last = Some(format!("cannot reach broker {target}"));
                tokio::time::sleep(RETRY_BACKOFF).await;
                continue;
            };
            match client.send(request.clone(), history::PRODUCE_VERSION).await {
                Ok(response) => {
                    let p =
                        produce_partition(&response, TOPIC, partition).cloned().ok_or_else(|| fail("no partition"))?;
                    if p.error_code == E::NotLeaderOrFollower.code() {
                        last = Some("NOT_LEADER_OR_FOLLOWER".into());
                        answered = Some(p);
                        tokio::time::sleep(RETRY_BACKOFF).await;
                        continue;
                    }
                    answered = Some(p);
                    last = None;
                    break;
                }
                Err(e) => {
                    clients.remove(&target);
                    last = Some(e.to_string());
                    answered = None;
                    if bugs.lost_response_is_failure {
                        break;
                    }
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
            }
        }
        match (answered, last) {
            (Some(p), None) => {
                if p.error_code == 0 || p.error_code == E::DuplicateSequenceNumber.code() {
                    sequences.insert(partition, sequence + values.len() as i32);
                }
                appends.finish(&p);
            }
            (Some(p), Some(_)) => appends.finish(&p), // refused on every attempt: not appended
            (None, Some(why)) if bugs.lost_response_is_failure => {
                appends.failed(&why);
                if idempotent {
                    pid = Some(init_producer(&ctx, &cluster, &name).await?);
                    sequences.clear();
                }
            }
            (None, why) => {
                appends.unknown(why.as_deref().unwrap_or("no attempt"));
                // The sequence is unknown now: start over under a new producer id, as the Java
                // producer bumps its epoch.
                if idempotent {
                    pid = Some(init_producer(&ctx, &cluster, &name).await?);
                    sequences.clear();
                }
            }
        }
    }
    Ok(())
}

/// A reader fetching seeded partitions from seeded offsets inside the log.
async fn reader(ctx: Ctx, cluster: Cluster, recorder: Recorder, bugs: Bugs) -> Result<(), Failure> {
    let recording = Recording::new(&recorder, "reader");
    let mut source = ctx.source("reader");
    for _ in 0..25 {
        tokio::time::sleep(source.duration(Duration::from_millis(100)..=Duration::from_millis(200))).await;
        let partition = source.below(PARTITIONS as u64) as i32;
        let Some(view) = cluster.partition(TOPIC, partition) else { continue };
        let offset = view.log_start + source.below((view.high_watermark - view.log_start) as u64 + 1) as i64;
        let Some(mut client) = dial(&ctx, "reader", view.leader).await else { continue };
        if bugs.reader_numbers_from_fetch_offset {
            let read = recorder.read("reader", &history::key(TOPIC, partition));
            let request = history::fetch_request(TOPIC, partition, offset, Duration::ZERO);
            match client.send(request, history::FETCH_VERSION).await.map(|r| history::fetched(&r, TOPIC, partition)) {
                Ok(Ok(f)) if f.error_code == 0 => read.ok(f
                    .records
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| Record::new(offset as u64 + i as u64, r.value))
                    .collect()),
                Ok(_) => read.failed("error"),
                Err(e) => read.unknown(e.to_string()),
            }
        } else {
            let _ = recording.fetch(&mut client, TOPIC, partition, offset, Duration::ZERO).await;
        }
    }
    Ok(())
}

/// A live subscriber of one partition: follows its position, reconnecting to the current leader
/// after an error, until it has everything once the producers are done.
async fn subscriber(
    ctx: Ctx,
    cluster: Cluster,
    recorder: Recorder,
    partition: i32,
    done: tokio::sync::watch::Receiver<bool>,
    bugs: Bugs,
) -> Result<(), Failure> {
    let name = format!("consumer-{partition}");
    let key = history::key(TOPIC, partition);
    let mut position: i64 = 0;
    let mut client: Option<Client<TcpStream>> = None;
    let mut catch_up_until = None;
    loop {
        if *done.borrow() {
            let until = *catch_up_until.get_or_insert_with(|| tokio::time::Instant::now() + CATCH_UP);
            let hw = cluster.partition(TOPIC, partition).map_or(0, |p| p.high_watermark);
            if position >= hw || tokio::time::Instant::now() >= until {
                return Ok(());
            }
        }
        let c = match client.as_mut() {
            Some(c) => c,
            None => {
                let Some(c) = dial(&ctx, &name, leader(&cluster, partition)).await else {
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    continue;
                };
                recorder.subscribe(&name, &key, u64::try_from(position).ok());
                client.insert(c)
            }
        };
        let request = history::fetch_request(TOPIC, partition, position, Duration::from_millis(200));
        let fetched =
            c.send(request, history::FETCH_VERSION).await.and_then(|r| history::fetched(&r, TOPIC, partition));
        match fetched {
            Ok(f) if f.error_code == 0 => {
                let from = position;
                for r in f.records.into_iter().filter(|r| r.offset as i64 >= from) {
                    recorder.deliver(&name, &key, r.offset, &r.value);
                    position = r.offset as i64 + 1;
                }
            }
            _ => {
                client = None;
                if bugs.subscriber_forgets_position {
                    position = 0;
                }
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

/// The broker loses every partition's tail: the topic is recreated holding only the first half
/// of each log (an unclean leader election makes an out-of-date replica the leader).
async fn truncate(ctx: &Ctx, cluster: &Cluster) -> Result<(), Failure> {
    let mut halves = Vec::new();
    for p in 0..PARTITIONS {
        let log = history::final_log(cluster, TOPIC, p).await.map_err(fail)?;
        halves.push(log.records[..log.records.len() / 2].to_vec());
    }
    let any = cluster.broker_ids().into_iter().find(|&b| cluster.is_up(b)).ok_or_else(|| fail("no broker up"))?;
    let mut admin = dial(ctx, "unclean-election", any).await.ok_or_else(|| fail("no admin connection"))?;
    let delete = DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s(TOPIC))]).with_timeout_ms(1_000);
    admin.send(delete, 4).await.map_err(fail)?;
    cluster.create_topic(TOPIC, PARTITIONS).map_err(|e| fail(format!("{e:?}")))?;
    for (p, records) in halves.into_iter().enumerate() {
        let p = p as i32;
        if records.is_empty() {
            continue;
        }
        let mut c = dial(ctx, "unclean-election", leader(cluster, p)).await.ok_or_else(|| fail("no leader"))?;
        let values: Vec<&str> = records.iter().map(|r| r.value.as_str()).collect();
        c.send(produce_request(TOPIC, p, &values, -1, None).map_err(fail)?, history::PRODUCE_VERSION)
            .await
            .map_err(fail)?;
    }
    Ok(())
}

/// Reports of the correct runs, for the assertions about what occurred across seeds.
static REPORTS: Mutex<Vec<Report>> = Mutex::new(Vec::new());

async fn scenario(ctx: Ctx, bugs: Bugs) -> Result<History, Failure> {
    ctx.add_check(ListAppend::new());
    let cluster = Cluster::builder().brokers(3).build();
    cluster.serve_sim(&ctx)?;
    cluster.create_topic(TOPIC, PARTITIONS).map_err(|e| fail(format!("{e:?}")))?;
    cluster
        .at(
            &ctx,
            Duration::from_millis(1_000),
            Fault::new(ApiKey::Produce, FaultAction::ApplyThenDrop).topic(TOPIC).partition(0),
        )
        .until(Duration::from_millis(1_600));
    cluster
        .at(
            &ctx,
            Duration::from_millis(500),
            Fault::new(ApiKey::Produce, FaultAction::Error(E::NotEnoughReplicas)).topic(TOPIC).partition(1),
        )
        .until(Duration::from_millis(900));
    cluster.at(&ctx, Duration::from_millis(2_500), Control::BrokerDown(leader(&cluster, 1))).forever();

    let recorder = Recorder::of(&ctx);
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    let mut producers = tokio::task::JoinSet::new();
    for i in 0..PRODUCERS {
        producers.spawn(producer(ctx.clone(), cluster.clone(), recorder.clone(), i, bugs));
    }
    producers.spawn(reader(ctx.clone(), cluster.clone(), recorder.clone(), bugs));
    let mut subscribers = tokio::task::JoinSet::new();
    for p in 0..PARTITIONS {
        subscribers.spawn(subscriber(ctx.clone(), cluster.clone(), recorder.clone(), p, done_rx.clone(), bugs));
    }
    while let Some(r) = producers.join_next().await {
        r.map_err(fail)??;
    }
    let _ = done_tx.send(true);
    while let Some(r) = subscribers.join_next().await {
        r.map_err(fail)??;
    }
    if bugs.log_truncated {
        truncate(&ctx, &cluster).await?;
    }
    history::record_final_logs(&recorder, &cluster, TOPIC).await.map_err(fail)?;
    let h = recorder.history();
    ctx.record("scenario.report", "list-append", list_append::analyze(&h).summary());
    Ok(h)
}

/// Runs the scenario with `bugs` planted and asserts that every seed failed with class
/// correctness, oracle `list-append`, and `rule` first (the check reports violations by rule).
fn caught_in_every_seed(name: &str, bugs: Bugs, rule: Rule) {
    let report =
        Simulation::new(name).seeds(0..4).confirm(0).run(move |ctx| async move { scenario(ctx, bugs).await.map(drop) });
    assert!(!report.outcomes.is_empty());
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed is caught: {report}");
    for outcome in &report.outcomes {
        let failure = outcome.failure.as_ref().unwrap_or_else(|| panic!("seed {} was not caught", outcome.seed));
        assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Correctness, Some("list-append")), "{failure}");
        assert!(failure.message.starts_with(&format!("{rule}: key {TOPIC}-")), "seed {}: {failure}", outcome.seed);
    }
}

#[test]
fn a_correct_run_with_lost_responses_refusals_and_a_leader_down_passes_and_replays_exactly() {
    let report =
        Simulation::new("kafkasim_list_append").seeds(0..6).repeat(2).repeat_processes(2).run(|ctx| async move {
            let h = scenario(ctx, Bugs::default()).await?;
            let report = list_append::check(&h).map_err(|v| fail(format!("{v:?}")))?;
            REPORTS.lock().unwrap_or_else(|p| p.into_inner()).push(report);
            Ok(())
        });
    report.assert_passed();
    let reports = REPORTS.lock().unwrap_or_else(|p| p.into_inner());
    let total = |f: fn(&Report) -> u64| reports.iter().map(f).sum::<u64>();
    // Every kind of outcome and observation occurred, and was judged.
    assert!(total(|r| r.appends.ok) > 100, "{}", reports[0].summary());
    assert!(total(|r| r.appends.failed) > 0, "NOT_ENOUGH_REPLICAS refusals: {}", reports[0].summary());
    assert!(total(|r| r.unknown_in_log) > 0, "lost responses of applied batches: {}", reports[0].summary());
    assert!(total(|r| r.appends.unknown) > total(|r| r.unknown_in_log), "acks=0 / unknown absent");
    assert!(total(|r| r.records_read) > 0 && total(|r| r.deliveries) > 100);
    assert!(reports.iter().all(|r| r.final_records > 0 && r.keys == PARTITIONS as usize));
}

#[test]
fn a_producer_retrying_without_idempotence_duplicates_records_caught_by_rule_2() {
    caught_in_every_seed(
        "kafkasim_list_append_dup",
        Bugs { retry_without_idempotence: true, ..Bugs::default() },
        Rule::ValueAtTwoOffsets,
    );
}

#[test]
fn a_producer_taking_a_lost_response_for_a_refusal_caught_by_rule_6() {
    caught_in_every_seed(
        "kafkasim_list_append_g1a",
        Bugs { lost_response_is_failure: true, ..Bugs::default() },
        Rule::FailedAppeared,
    );
}

#[test]
fn a_reader_numbering_records_from_the_fetch_offset_caught_by_rule_3() {
    caught_in_every_seed(
        "kafkasim_list_append_numbering",
        Bugs { reader_numbers_from_fetch_offset: true, ..Bugs::default() },
        Rule::ReadDisagrees,
    );
}

#[test]
fn a_subscriber_forgetting_its_position_on_reconnect_caught_by_rule_7() {
    caught_in_every_seed(
        "kafkasim_list_append_rewind",
        Bugs { subscriber_forgets_position: true, ..Bugs::default() },
        Rule::SubscriberOrder,
    );
}

#[test]
fn a_broker_losing_the_tail_of_its_logs_caught_by_rule_1() {
    caught_in_every_seed(
        "kafkasim_list_append_unclean",
        Bugs { log_truncated: true, ..Bugs::default() },
        Rule::AcknowledgedLost,
    );
}

/// Swaps two appends of a recorded history, one acknowledged before the other was sent, in the
/// final log and in their acknowledgements: only the real-time order gives it away.
fn swap_real_time_ordered(h: &mut History) -> Option<(String, String)> {
    let acked: Vec<(usize, String, String, u64)> = h
        .ops()
        .iter()
        .enumerate()
        .filter_map(|(i, op)| match &op.action {
            Action::Append { value, outcome: OpOutcome::Ok(Some(o)) } => Some((i, op.key.clone(), value.clone(), *o)),
            _ => None,
        })
        .collect();
    let (a, b) = acked.iter().find_map(|a| {
        acked.iter().find(|b| a.1 == b.1 && h.ops()[a.0].end < h.ops()[b.0].start).map(|b| (a.clone(), b.clone()))
    })?;
    for (index, offset) in [(a.0, b.3), (b.0, a.3)] {
        if let Action::Append { outcome, .. } = &mut h.ops_mut()[index].action {
            *outcome = OpOutcome::Ok(Some(offset));
        }
    }
    let log = h.finals_mut().get_mut(&a.1)?;
    for r in &mut log.records {
        if r.value == a.2 {
            r.value = b.2.clone();
        } else if r.value == b.2 {
            r.value = a.2.clone();
        }
    }
    Some((a.2, b.2))
}

#[test]
fn a_recorded_kafka_history_with_two_appends_swapped_against_real_time_caught_by_rule_4() {
    Simulation::new("kafkasim_list_append_swapped")
        .seeds(0..4)
        .run(|ctx| async move {
            let mut h = scenario(ctx, Bugs::default()).await?;
            let (a, b) = swap_real_time_ordered(&mut h).ok_or_else(|| fail("no two real-time ordered appends"))?;
            let violations = list_append::check(&h).err().ok_or_else(|| fail("the swap went unnoticed"))?;
            let named = violations.iter().any(|v| {
                v.rule == Rule::RealTimeOrder && v.value.as_deref() == Some(b.as_str()) && v.offsets.len() == 2
            });
            if !named
                || violations.iter().any(|v| v.rule == Rule::ValueAtTwoOffsets || v.rule == Rule::AcknowledgedLost)
            {
                return Err(fail(format!("swapping {a} and {b}: {violations:#?}")));
            }
            Ok(())
        })
        .assert_passed();
}
