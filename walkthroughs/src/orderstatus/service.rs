// The order-status service, written against rdkafka's API through the alias `kafka`. This file
// is `include!`d by a module that declares the alias — `use kafkasim::rdkafka as kafka;` in the
// walkthroughs crate (`orderstatus::service`), `use rdkafka as kafka;` in
// `tests/orderstatus_rdkafka.rs` — and brings the client-independent types of
// `orderstatus::model` into scope (`Status`, `OrderEvent`, `Advance`, `Served`, `Store`,
// `Observer`, `CommitAnswer`, `ProjectorConfig`), and defines
// `fn commit_async(&impl Consumer<ProjectorContext>, &TopicPartitionList) -> KafkaResult<()>`
// (called with the `StreamConsumer` and, in the revoke callback, the `BaseConsumer`):
// `Consumer::commit` with `CommitMode::Async` (rdkafka's returns the result; kafkasim::rdkafka's
// returns a future, ready at once for an async commit); `async fn commit_sync(..)`, the same with
// `CommitMode::Sync` (rdkafka's blocks, kafkasim::rdkafka's resolves with the answer); and
// `async fn close(Arc<Projector>)`: closes the consumer (rdkafka: drop, which blocks until
// closed). No inner attributes here: the includer owns the module.
//
// Two parts:
// - the API ([`api`]): `POST /orders/{id}/{status}` produces an order event keyed by the order
//   id (FutureProducer, acks=all, idempotence on) and answers once it is delivered;
//   `GET /orders/{id}` serves the order's status from the store;
// - the projector ([`projector`]): a consumer-group member (enable.auto.commit=false) that
//   hands each record to its partition's worker task; the worker does the slow part, applies
//   the event to the store, then commits the next offset with `CommitMode::Async`
//   (at-least-once: process, then commit). Rebalance callbacks track which partitions this
//   member owns, in which epoch; the commit callback reports each commit's answer.
//
// Workers apply a record only while its partition is owned in the epoch they received it in
// (under the ownership lock the rebalance callbacks take), then wait for the slow part before
// committing. The planted bug (humus #757) is `ProjectorConfig::fence == false`: that commit is
// not fenced, so a worker that processed a record before a rebalance and finishes after it
// commits a partition this member no longer owns — the commit goes out with the member's new
// generation, is accepted, and moves the new owner's committed offset backward. With `fence` the
// worker commits only if its partition is still owned in the same epoch (the revoke callback
// commits what was processed). Workers and the drain commit nothing once the assignment is lost
// (`assignment_lost()`, true before the revoke callback runs): a commit after the loss goes out as
// a non-member (generation -1), which Kafka accepts for an empty group.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use kafka::client::ClientContext;
use kafka::config::ClientConfig;
use kafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use kafka::error::{KafkaError, KafkaResult};
use kafka::message::{Message, OwnedMessage};
use kafka::producer::{FutureProducer, FutureRecord};
use kafka::{Offset, TopicPartitionList};

/// The API's state: its producer, the topic, the store it serves from, the observer.
#[derive(Clone)]
pub struct Api {
    producer: FutureProducer,
    topic: String,
    store: Arc<dyn Store>,
    observer: Arc<dyn Observer>,
}

/// The API's producer: idempotent, acks=all, giving up on a record after `message_timeout`.
///
/// # Errors
/// When the client cannot be created.
pub fn api_producer(bootstrap: &str, client_id: &str, message_timeout: Duration) -> KafkaResult<FutureProducer> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "2")
        .set("message.timeout.ms", message_timeout.as_millis().to_string())
        .create()
}

/// The API's router: `POST /orders/{id}/{status}` (body [`Advance`]) produces the order event
/// and answers 200 once delivered (503 when the delivery failed, 400 for an unknown status);
/// `GET /orders/{id}` answers [`Served`] from the store (404 for an unknown order).
pub fn api(producer: FutureProducer, topic: &str, store: Arc<dyn Store>, observer: Arc<dyn Observer>) -> Router {
    let state = Api { producer, topic: topic.to_string(), store, observer };
    Router::new().route("/orders/{id}/{status}", post(advance)).route("/orders/{id}", get(status)).with_state(state)
}

async fn advance(
    State(api): State<Api>,
    Path((id, status)): Path<(String, String)>,
    Json(body): Json<Advance>,
) -> (StatusCode, String) {
    let Some(status) = Status::parse(&status) else {
        return (StatusCode::BAD_REQUEST, format!("unknown status {status:?}"));
    };
    let event = OrderEvent { order: id.clone(), status, request: body.request };
    let value = serde_json::to_string(&event).expect("an order event serializes");
    let done = api.observer.producing(&id, &value);
    let record = FutureRecord::to(&api.topic).key(&id).payload(&value);
    match api.producer.send(record, Duration::from_secs(1)).await {
        Ok(delivery) => {
            if let Some(done) = done {
                done(Ok((delivery.partition, delivery.offset)));
            }
            (
                StatusCode::OK,
                format!("{id} {}: partition {} offset {}", status.name(), delivery.partition, delivery.offset),
            )
        }
        Err((e, _)) => {
            if let Some(done) = done {
                done(Err(e.to_string()));
            }
            (StatusCode::SERVICE_UNAVAILABLE, format!("{id} {}: {e}", status.name()))
        }
    }
}

async fn status(State(api): State<Api>, Path(id): Path<String>) -> Result<Json<Served>, StatusCode> {
    match api.store.get(&id) {
        Some(status) => Ok(Json(Served { order: id, status })),
        None => Err(StatusCode::NOT_FOUND),
    }
}

/// Which partitions this member owns, and since which assignment (the epoch).
#[derive(Default)]
struct Ownership {
    /// Bumped at every assignment.
    epoch: u64,
    /// (topic, partition) → the epoch it was assigned in.
    owned: BTreeMap<(String, i32), u64>,
    /// Set once the member is stopping: workers drop what they have not begun.
    stopping: bool,
    /// Per owned partition: the next offset after the last record processed in this hold.
    processed: BTreeMap<(String, i32), i64>,
    /// Per owned partition: the highest commit accepted in this hold.
    accepted: BTreeMap<(String, i32), i64>,
}

impl Ownership {
    /// The owned partitions whose processed records are not covered by an accepted commit.
    fn uncommitted(&self) -> Vec<((String, i32), i64)> {
        self.processed
            .iter()
            .filter(|(tp, next)| self.owned.contains_key(*tp) && self.accepted.get(*tp).is_none_or(|c| c < *next))
            .map(|(tp, next)| (tp.clone(), *next))
            .collect()
    }

    /// Forgets a partition's hold (revoked, or assigned anew).
    fn forget(&mut self, tp: &(String, i32)) {
        self.processed.remove(tp);
        self.accepted.remove(tp);
    }
}

/// What the rebalance and commit callbacks share with the workers.
struct Shared {
    member: String,
    fence: bool,
    observer: Arc<dyn Observer>,
    state: Mutex<Ownership>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ownership> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The projector's consumer context: rebalance and commit callbacks.
pub struct ProjectorContext {
    shared: Arc<Shared>,
}

impl ClientContext for ProjectorContext {}

impl ConsumerContext for ProjectorContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            let lost = consumer.assignment_lost();
            let mut state = self.shared.lock();
            if !lost {
                // Commit on revocation (the KafkaConsumer javadoc's advice): what was processed in
                // this hold and not yet accepted (a commit in flight, or refused, as by a
                // coordinator moving). Queued before the rejoin, it carries the generation the
                // partitions were held in; a lost assignment is not committed (another member
                // may own it already).
                let revoked: Vec<(String, i32)> =
                    partitions.elements().iter().map(|p| (p.topic().to_string(), p.partition())).collect();
                let owed: Vec<((String, i32), i64)> =
                    state.uncommitted().into_iter().filter(|(tp, _)| revoked.contains(tp)).collect();
                if !owed.is_empty() {
                    let mut offsets = TopicPartitionList::new();
                    for ((topic, partition), next) in &owed {
                        self.shared.observer.committing(&self.shared.member, topic, *partition, *next);
                        let _ = offsets.add_partition_offset(topic, *partition, Offset::Offset(*next));
                    }
                    match commit_async(consumer, &offsets) {
                        Ok(()) => {}
                        Err(e) => {
                            for ((topic, partition), next) in &owed {
                                let answer = commit_answer(&e);
                                self.shared.observer.committed(&self.shared.member, topic, *partition, *next, answer);
                            }
                        }
                    }
                }
            }
            for p in partitions.elements() {
                let tp = (p.topic().to_string(), p.partition());
                state.owned.remove(&tp);
                state.forget(&tp);
                self.shared.observer.revoked(&self.shared.member, p.topic(), p.partition(), lost);
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(partitions) = rebalance {
            let mut state = self.shared.lock();
            state.epoch += 1;
            let epoch = state.epoch;
            for p in partitions.elements() {
                let tp = (p.topic().to_string(), p.partition());
                state.forget(&tp);
                state.owned.insert(tp, epoch);
                self.shared.observer.assigned(&self.shared.member, p.topic(), p.partition());
            }
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        let mut state = self.shared.lock();
        for p in offsets.elements() {
            let Offset::Offset(offset) = p.offset() else { continue };
            let answer = match (&result, p.error()) {
                (Err(e), _) => commit_answer(e),
                (Ok(()), Err(e)) => commit_answer(&e),
                (Ok(()), Ok(())) => CommitAnswer::Accepted,
            };
            if answer == CommitAnswer::Accepted {
                let accepted = state.accepted.entry((p.topic().to_string(), p.partition())).or_insert(offset);
                *accepted = (*accepted).max(offset);
            }
            self.shared.observer.committed(&self.shared.member, p.topic(), p.partition(), offset, answer);
        }
    }
}

/// A commit error as the models read it: a broker's refusal (a Kafka error code) or a local
/// error (it may have been stored).
fn commit_answer(e: &KafkaError) -> CommitAnswer {
    match e.rdkafka_error_code().map(|c| c as i32) {
        Some(code) if code > 0 => CommitAnswer::Refused(code),
        _ => CommitAnswer::Unknown(e.to_string()),
    }
}

/// The projector's consumer.
type Projector = StreamConsumer<ProjectorContext>;

fn projector_consumer(config: &ProjectorConfig, shared: &Arc<Shared>) -> KafkaResult<Projector> {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.bootstrap)
        .set("group.id", &config.group)
        .set("client.id", &config.client_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", config.session_timeout.as_millis().to_string())
        .set("heartbeat.interval.ms", config.heartbeat_interval.as_millis().to_string())
        .set("max.poll.interval.ms", config.max_poll_interval.as_millis().to_string());
    for (k, v) in &config.extra {
        client.set(k, v);
    }
    client.create_with_context(ProjectorContext { shared: Arc::clone(shared) })
}

/// A record handed to its partition's worker, with the epoch its partition was owned in.
struct Work {
    message: OwnedMessage,
    epoch: u64,
}

/// One partition's worker: handles its records one at a time, in offset order.
async fn worker(
    consumer: Arc<Projector>,
    shared: Arc<Shared>,
    store: Arc<dyn Store>,
    config: Arc<ProjectorConfig>,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<Work>,
) {
    let still_owned = |state: &Ownership, m: &OwnedMessage, epoch: u64| {
        state.owned.get(&(m.topic().to_string(), m.partition())) == Some(&epoch)
    };
    while let Some(Work { message, epoch }) = queue.recv().await {
        {
            let state = shared.lock();
            if state.stopping || (shared.fence && !still_owned(&state, &message, epoch)) {
                continue;
            }
        }
        let (topic, partition, offset) = (message.topic(), message.partition(), message.offset());
        {
            let mut state = shared.lock();
            if !still_owned(&state, &message, epoch) {
                // Revoked (or re-assigned since) while queued: the new owner redoes it.
                continue;
            }
            shared.observer.begin(&shared.member, topic, partition, offset);
            let payload = message.payload().unwrap_or_default();
            if let Ok(event) = serde_json::from_slice::<OrderEvent>(payload) {
                store.apply(&event.order, event.status);
            }
            shared.observer.processed(&shared.member, topic, partition, offset, payload);
            state.processed.insert((topic.to_string(), partition), offset + 1);
        }
        // The slow part after the effect (a payment provider's confirmation, a warehouse's
        // acknowledgement) before the record counts as done: the partition may be revoked
        // meanwhile, and the revoke callback commits what was processed.
        tokio::time::sleep(config.processing_of(message.offset())).await;
        let state = shared.lock();
        // A lost assignment (the session expired) shows before the revoke callback runs: the
        // partition may be another member's already.
        if shared.fence && (!still_owned(&state, &message, epoch) || consumer.assignment_lost()) {
            // The planted bug skips this check: its commit goes out after the rebalance, with the
            // member's new generation, and moves the new owner's committed offset back.
            continue;
        }
        let mut next = TopicPartitionList::new();
        if next.add_partition_offset(topic, partition, Offset::Offset(offset + 1)).is_err() {
            continue;
        }
        shared.observer.committing(&shared.member, topic, partition, offset + 1);
        match commit_async(consumer.as_ref(), &next) {
            Ok(()) => {}
            Err(e) => shared.observer.committed(&shared.member, topic, partition, offset + 1, commit_answer(&e)),
        }
    }
}

/// Runs one projector replica until `shutdown` resolves: subscribes, hands records to their
/// partitions' workers, and on shutdown stops taking records, lets the workers finish what they
/// began, waits (up to `drain_timeout`) for its commits' answers, commits again what it processed
/// and is not yet committed (until accepted), and closes the consumer (which leaves the group),
/// giving the close up `shutdown_timeout` after the stop.
///
/// # Errors
/// When the consumer cannot be created or subscribe.
pub async fn projector(
    config: ProjectorConfig,
    store: Arc<dyn Store>,
    observer: Arc<dyn Observer>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), KafkaError> {
    let shared = Arc::new(Shared {
        member: config.client_id.clone(),
        fence: config.fence,
        observer: Arc::clone(&observer),
        state: Mutex::new(Ownership::default()),
    });
    let consumer = Arc::new(projector_consumer(&config, &shared)?);
    consumer.subscribe(&[config.topic.as_str()])?;
    let config = Arc::new(config);
    let mut workers = tokio::task::JoinSet::new();
    let mut queues: BTreeMap<(String, i32), tokio::sync::mpsc::UnboundedSender<Work>> = BTreeMap::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            received = consumer.recv() => {
                let message = match received {
                    Ok(m) => m.detach(),
                    // Errors surface from recv (a broker down, max.poll exceeded): keep polling.
                    Err(_) => continue,
                };
                let tp = (message.topic().to_string(), message.partition());
                let Some(epoch) = shared.lock().owned.get(&tp).copied() else { continue };
                let queue = queues.entry(tp).or_insert_with(|| {
                    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                    let worker = worker(Arc::clone(&consumer), Arc::clone(&shared), Arc::clone(&store), Arc::clone(&config), rx);
                    workers.spawn(worker);
                    tx
                });
                let _ = queue.send(Work { message, epoch });
            }
        }
    }
    observer.stopping(&config.client_id);
    let stopped = tokio::time::Instant::now();
    shared.lock().stopping = true;
    queues.clear();
    // Drain: the workers finish what they began; then what was processed and not yet accepted
    // (a commit in flight, or refused, as by a coordinator moving) is committed synchronously,
    // again until accepted or fenced. The consumer is not polled meanwhile: a rebalance waits for
    // this member's revoke (a Java consumer's commitSync in onPartitionsRevoked holds it the
    // same way), so its partitions stay its own while it commits them — up to the rebalance
    // timeout, after which the coordinator fences it (UNKNOWN_MEMBER_ID).
    // The drain's commit in flight: when the drain gives up waiting for its answer, the commit
    // may still be stored (the client sends it before it leaves), and the history says so.
    let in_flight = std::sync::Mutex::new(Vec::new());
    let drained = async {
        while workers.join_next().await.is_some() {}
        loop {
            let uncommitted = shared.lock().uncommitted();
            // A lost assignment is not committed: the group may be another's by now, or empty —
            // and Kafka accepts an empty group's commit from a non-member (generation -1), which
            // would move the next owner's committed offset backward.
            if uncommitted.is_empty() || consumer.assignment_lost() {
                break;
            }
            let mut offsets = TopicPartitionList::new();
            for ((topic, partition), next) in &uncommitted {
                shared.observer.committing(&shared.member, topic, *partition, *next);
                let _ = offsets.add_partition_offset(topic, *partition, Offset::Offset(*next));
            }
            in_flight.lock().unwrap_or_else(|p| p.into_inner()).clone_from(&uncommitted);
            let result = commit_sync(consumer.as_ref(), &offsets).await;
            in_flight.lock().unwrap_or_else(|p| p.into_inner()).clear();
            let answer = result.as_ref().map_or_else(commit_answer, |()| CommitAnswer::Accepted);
            {
                let mut state = shared.lock();
                for (tp, next) in &uncommitted {
                    match answer {
                        CommitAnswer::Accepted => {
                            let accepted = state.accepted.entry(tp.clone()).or_insert(*next);
                            *accepted = (*accepted).max(*next);
                        }
                        // Fenced (the session expired, or a newer generation): nothing more to commit.
                        CommitAnswer::Refused(22 | 25) => {
                            state.processed.remove(tp);
                        }
                        _ => {}
                    }
                    shared.observer.committed(&shared.member, &tp.0, tp.1, *next, answer.clone());
                }
            }
            if result.is_err() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    if tokio::time::timeout(config.drain_timeout, drained).await.is_err() {
        let unanswered = std::mem::take(&mut *in_flight.lock().unwrap_or_else(|p| p.into_inner()));
        for ((topic, partition), next) in unanswered {
            let answer = CommitAnswer::Unknown("the drain timed out waiting for the answer".into());
            shared.observer.committed(&shared.member, &topic, partition, next, answer);
        }
    }
    workers.abort_all();
    while workers.join_next().await.is_some() {}
    // Closing the consumer leaves the group — unless the close cannot end within the shutdown
    // budget (a LeaveGroup behind a JoinGroup held by the coordinator): then the member is left
    // to expire rather than the replica killed at the end of its grace.
    let _ = tokio::time::timeout_at(stopped + config.shutdown_timeout, close(consumer)).await;
    observer.left(&config.client_id);
    Ok(())
}
