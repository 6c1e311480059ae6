//! The producer's background task, librdkafka's broker threads folded into one tokio task:
//! it owns the queues, the metadata cache, the connections and the idempotence state, and
//! reports deliveries. Spawned with `tokio::spawn` from the task that creates the producer —
//! inside a simulation node it belongs to the node and dies with it.
//!
//! Per partition, messages queue in send order; a batch is made when `batch.num.messages`
//! wait, when the oldest has waited `linger.ms`, or at once while a flush waits. Each broker
//! gets one ProduceRequest at a time (carrying a batch for each partition it leads that has
//! one), and each partition has one batch in flight at a time, so a retried batch goes before any
//! later one and delivery reports come in send order per partition. A retriable failure
//! (connection lost, request timed out, `NOT_LEADER_OR_FOLLOWER`, `UNKNOWN_TOPIC_OR_PARTITION`,
//! `LEADER_NOT_AVAILABLE`, `NOT_ENOUGH_REPLICAS*`, `REQUEST_TIMED_OUT`, ...) is retried after
//! `retry.backoff.ms`, doubled each time up to `retry.backoff.max.ms`, while `retries` and
//! `message.timeout.ms` allow; a message past its timeout fails `MessageTimedOut`
//! (librdkafka `CONFIGURATION.md`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, MetadataResponse, ProduceRequest, ProduceResponse, ProducerId,
    TopicName, produce_request,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::Client;
use crate::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use crate::rdkafka::message::Message;
use crate::rdkafka::net::{Dialer, Stream};
use crate::rdkafka::producer::batch::{Batch, reported_timestamp};
use crate::rdkafka::producer::delivery::{Delivery, Pending};
use crate::rdkafka::producer::idempotence::{INIT_PRODUCER_ID_VERSION, Idempotence, PidState};
use crate::rdkafka::producer::metadata::{self, Metadata, Refresh, TopicState};
use crate::rdkafka::producer::partitioner::Random;
use crate::rdkafka::producer::settings::ProducerSettings;
use crate::requests::string;

/// The Produce version sent (kafkasim serves 3–11, Apache Kafka 4.x 3–12).
pub const PRODUCE_VERSION: i16 = 9;

/// What the producer handles tell the task.
#[derive(Debug)]
pub enum Command {
    /// Deliver this message.
    Send(Pending),
    /// Answer once nothing is queued or in flight (linger is skipped meanwhile).
    Flush(oneshot::Sender<()>),
}

/// What the handles and the task share.
#[derive(Debug, Default)]
pub struct Shared {
    /// Messages sent to the producer and not yet reported (rdkafka's `in_flight_count`).
    pub pending: AtomicUsize,
    /// The fatal error, once the producer had one (idempotence broken).
    pub fatal: Mutex<Option<(Code, String)>>,
}

type Partition = (String, i32);
type Conn = Client<Stream>;

enum Done {
    Metadata(Result<MetadataResponse, String>),
    Pid(Result<InitProducerIdResponse, String>),
    Produce { broker: i32, conn: Option<Conn>, batches: Vec<Batch>, result: Result<Option<ProduceResponse>, Code> },
}

struct Sender {
    s: ProducerSettings,
    dialer: Dialer,
    rx: mpsc::UnboundedReceiver<Command>,
    shared: Arc<Shared>,
    metadata: Metadata,
    refresh: Refresh,
    idem: Option<Idempotence>,
    pid_busy: bool,
    pid_retry_at: Option<Instant>,
    unassigned: VecDeque<Pending>,
    queues: BTreeMap<Partition, VecDeque<Pending>>,
    retry: BTreeMap<Partition, Batch>,
    busy_partitions: BTreeSet<Partition>,
    idle: BTreeMap<i32, Conn>,
    busy_brokers: BTreeSet<i32>,
    tasks: JoinSet<Done>,
    flushes: Vec<oneshot::Sender<()>>,
    random: Random,
    closed: bool,
    fatal: bool,
}

/// Spawns the task.
pub fn spawn(s: ProducerSettings, dialer: Dialer, rx: mpsc::UnboundedReceiver<Command>, shared: Arc<Shared>) {
    let label = format!("kafkasim/rdkafka/{}/partitioner", s.client_id);
    let idem = s.idempotence.then(Idempotence::default);
    let sender = Sender {
        random: Random::current(&label),
        s,
        dialer,
        rx,
        shared,
        metadata: Metadata::default(),
        refresh: Refresh::default(),
        idem,
        pid_busy: false,
        pid_retry_at: None,
        unassigned: VecDeque::new(),
        queues: BTreeMap::new(),
        retry: BTreeMap::new(),
        busy_partitions: BTreeSet::new(),
        idle: BTreeMap::new(),
        busy_brokers: BTreeSet::new(),
        tasks: JoinSet::new(),
        flushes: Vec::new(),
        closed: false,
        fatal: false,
    };
    // On a sim node through its NodeCtx: the sender dies with a crashed incarnation.
    crate::rdkafka::task::spawn_task(sender.run());
}

fn retriable(code: i16) -> bool {
    // Kafka's RetriableException subclasses a producer meets.
    matches!(code, 3 | 5 | 6 | 7 | 13 | 19 | 20 | 56 | 74 | 75)
}

fn leader_error(code: i16) -> bool {
    matches!(code, 3 | 5 | 6 | 74 | 75)
}

impl Sender {
    async fn run(mut self) {
        loop {
            let now = Instant::now();
            self.expire(now);
            self.assign(now);
            self.start_metadata(now);
            self.start_pid(now);
            self.start_produces(now);
            self.answer_flushes();
            if self.closed && self.idle_everywhere() {
                return;
            }
            let wake = self.next_wake(now);
            tokio::select! {
                biased;
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => match done {
                    Ok(done) => self.done(done),
                    Err(e) => panic!("a kafkasim::rdkafka request task failed: {e}"),
                },
                cmd = self.rx.recv(), if !self.closed => match cmd {
                    Some(Command::Send(p)) => self.enqueue(p),
                    Some(Command::Flush(tx)) => self.flushes.push(tx),
                    None => self.closed = true,
                },
                () = sleep_until(wake) => {}
            }
        }
    }

    fn idle_everywhere(&self) -> bool {
        self.shared.pending.load(Ordering::SeqCst) == 0 && self.tasks.is_empty()
    }

    fn enqueue(&mut self, p: Pending) {
        if self.fatal {
            self.finish(p, Err(KafkaError::MessageProduction(Code::Fatal)));
            return;
        }
        if p.message.partition() >= 0 {
            let tp = (p.message.topic().to_string(), p.message.partition());
            if let Some(TopicState::Known(leaders)) = self.metadata.topic(&tp.0) {
                if tp.1 as usize >= leaders.len() {
                    self.finish(p, Err(KafkaError::MessageProduction(Code::UnknownPartition)));
                    return;
                }
                self.queues.entry(tp).or_default().push_back(p);
                return;
            }
        }
        self.unassigned.push_back(p);
    }

    fn finish(&mut self, p: Pending, result: Result<Delivery, KafkaError>) {
        self.shared.pending.fetch_sub(1, Ordering::SeqCst);
        p.report(result);
    }

    /// Gives unassigned messages a partition once their topic's metadata is known.
    fn assign(&mut self, now: Instant) {
        let mut waiting = VecDeque::new();
        while let Some(p) = self.unassigned.pop_front() {
            let topic = p.message.topic().to_string();
            if self.metadata.want(&topic, now) {
                self.refresh.due = true;
                waiting.push_back(p);
                continue;
            }
            match self.metadata.topic(&topic).cloned() {
                Some(TopicState::Known(leaders)) => {
                    let n = u32::try_from(leaders.len()).unwrap_or(0);
                    let explicit = p.message.partition();
                    if n == 0 || (explicit >= 0 && explicit as u32 >= n) {
                        self.finish(p, Err(KafkaError::MessageProduction(Code::UnknownPartition)));
                        continue;
                    }
                    let partition = if explicit >= 0 {
                        explicit
                    } else {
                        self.s.partitioner.partition(p.message.key(), n, &mut self.random)
                    };
                    let mut p = p;
                    p.message = p.message.set_partition(partition);
                    self.queues.entry((topic, partition)).or_default().push_back(p);
                }
                Some(TopicState::Failed { code, since }) => {
                    // librdkafka's rd_kafka_topic_set_notexists: an invalid topic fails at once,
                    // a missing one after topic.metadata.propagation.max.ms.
                    if code == 17 || now >= since + self.s.metadata_propagation_max {
                        self.finish(p, Err(KafkaError::MessageProduction(Code::from(code))));
                    } else {
                        waiting.push_back(p);
                    }
                }
                None => waiting.push_back(p),
            }
        }
        self.unassigned = waiting;
    }

    fn expire(&mut self, now: Instant) {
        let expired = |p: &Pending| p.deadline.is_some_and(|d| d <= now);
        let mut out = Vec::new();
        let mut keep = VecDeque::new();
        for p in std::mem::take(&mut self.unassigned) {
            if expired(&p) { out.push(p) } else { keep.push_back(p) }
        }
        self.unassigned = keep;
        let tps: Vec<Partition> = self.retry.keys().cloned().collect();
        for tp in tps {
            if self.retry[&tp].deadline().is_some_and(|d| d <= now) {
                let batch = self.retry.remove(&tp).expect("listed");
                if batch.stamp.is_some()
                    && let Some(idem) = &mut self.idem
                {
                    // Its sequences may or may not be in the log: start a new epoch.
                    idem.bump();
                }
                out.extend(batch.records);
            }
        }
        for q in self.queues.values_mut() {
            while q.front().is_some_and(expired) {
                out.push(q.pop_front().expect("front exists"));
            }
        }
        for p in out {
            self.finish(p, Err(KafkaError::MessageProduction(Code::MessageTimedOut)));
        }
    }

    fn next_bootstrap(&mut self) -> String {
        self.refresh.next_address(&self.metadata, &self.s.bootstrap)
    }

    fn start_metadata(&mut self, now: Instant) {
        let Some((request, addr)) =
            self.refresh.start(&self.metadata, &self.s.bootstrap, self.s.auto_create_topics, now)
        else {
            return;
        };
        let (dialer, id, timeout) = (self.dialer.clone(), self.s.client_id.clone(), self.s.socket_timeout);
        self.tasks.spawn(async move { Done::Metadata(metadata::fetch(dialer, addr, id, timeout, request).await) });
    }

    fn start_pid(&mut self, now: Instant) {
        let Some(idem) = &self.idem else { return };
        if self.pid_busy || self.pid_retry_at.is_some_and(|t| t > now) {
            return;
        }
        let request = match idem.pid {
            PidState::Assigned(..) => return,
            PidState::Needed => InitProducerIdRequest::default(),
            // Bump only once nothing is in flight (librdkafka drains first).
            PidState::BumpNeeded(..) if !self.busy_partitions.is_empty() => return,
            PidState::BumpNeeded(id, epoch) => {
                InitProducerIdRequest::default().with_producer_id(ProducerId(id)).with_producer_epoch(epoch)
            }
        };
        let request = request.with_transactional_id(None).with_transaction_timeout_ms(60_000);
        self.pid_busy = true;
        let (dialer, addr, id, timeout) =
            (self.dialer.clone(), self.next_bootstrap(), self.s.client_id.clone(), self.s.socket_timeout);
        self.tasks.spawn(async move {
            let result = tokio::time::timeout(timeout, async {
                let stream = dialer.dial(&addr).await.map_err(|e| e.to_string())?;
                Client::new(stream, &id).send(request, INIT_PRODUCER_ID_VERSION).await.map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|_| Err("InitProducerId timed out".into()));
            Done::Pid(result)
        });
    }

    /// Batches ready for `broker`, taken out of the queues.
    fn ready_batches(&mut self, broker: i32, now: Instant) -> Vec<Batch> {
        let flushing = !self.flushes.is_empty() || self.closed;
        let mut tps: BTreeSet<Partition> =
            self.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| k.clone()).collect();
        tps.extend(self.retry.keys().cloned());
        let mut batches = Vec::new();
        for tp in tps {
            if self.busy_partitions.contains(&tp) || self.metadata.leader(&tp.0, tp.1).map(|l| l.0) != Some(broker) {
                continue;
            }
            let mut batch = if let Some(b) = self.retry.get(&tp) {
                if b.not_before.is_some_and(|t| t > now) {
                    continue;
                }
                self.retry.remove(&tp).expect("present")
            } else {
                let q = self.queues.get_mut(&tp).expect("listed");
                let lingered = q.front().is_some_and(|p| p.enqueued + self.s.linger <= now);
                if !(flushing || lingered || q.len() >= self.s.batch_messages_max) {
                    continue;
                }
                let n = q.len().min(self.s.batch_messages_max);
                Batch {
                    topic: tp.0.clone(),
                    partition: tp.1,
                    records: q.drain(..n).collect(),
                    stamp: None,
                    attempts: 0,
                    not_before: None,
                }
            };
            if let Some(idem) = &mut self.idem {
                match idem.stamp(&tp.0, tp.1, batch.records.len(), batch.stamp) {
                    Some(stamp) => batch.stamp = Some(stamp),
                    None => {
                        self.retry.insert(tp, batch);
                        continue;
                    }
                }
            }
            self.busy_partitions.insert(tp);
            batches.push(batch);
        }
        batches
    }

    fn start_produces(&mut self, now: Instant) {
        let mut leaders: BTreeSet<i32> = BTreeSet::new();
        for tp in self.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| k).chain(self.retry.keys()) {
            match self.metadata.leader(&tp.0, tp.1) {
                Some((leader, _)) => {
                    leaders.insert(leader);
                }
                None => self.refresh.due = true,
            }
        }
        for broker in leaders {
            if self.busy_brokers.contains(&broker) {
                continue;
            }
            let batches = self.ready_batches(broker, now);
            if batches.is_empty() {
                continue;
            }
            self.send(broker, batches, now);
        }
    }

    fn send(&mut self, broker: i32, mut batches: Vec<Batch>, now: Instant) {
        let mut topics: BTreeMap<String, Vec<produce_request::PartitionProduceData>> = BTreeMap::new();
        let mut bad = Vec::new();
        for (i, b) in batches.iter_mut().enumerate() {
            b.attempts += 1;
            match b.encode() {
                Ok(bytes) => topics.entry(b.topic.clone()).or_default().push(
                    produce_request::PartitionProduceData::default().with_index(b.partition).with_records(Some(bytes)),
                ),
                Err(_) => bad.push(i),
            }
        }
        for i in bad.into_iter().rev() {
            let b = batches.remove(i);
            self.busy_partitions.remove(&(b.topic.clone(), b.partition));
            self.fail_batch(b, KafkaError::MessageProduction(Code::BadMessage));
        }
        let request = ProduceRequest::default()
            .with_acks(self.s.acks)
            .with_timeout_ms(i32::try_from(self.s.request_timeout.as_millis()).unwrap_or(i32::MAX))
            .with_topic_data(
                topics
                    .into_iter()
                    .map(|(t, parts)| {
                        produce_request::TopicProduceData::default()
                            .with_name(TopicName(string(&t)))
                            .with_partition_data(parts)
                    })
                    .collect(),
            );
        self.busy_brokers.insert(broker);
        let conn = self.idle.remove(&broker);
        let addr = self.metadata.address(broker).unwrap_or_default().to_string();
        let deadline = batches.iter().filter_map(Batch::deadline).min();
        let wait =
            deadline.map_or(self.s.socket_timeout, |d| self.s.socket_timeout.min(d.saturating_duration_since(now)));
        let (dialer, id, acks) = (self.dialer.clone(), self.s.client_id.clone(), self.s.acks);
        self.tasks.spawn(async move {
            let attempt = async {
                let mut conn = match conn {
                    Some(c) => c,
                    None => Client::new(dialer.dial(&addr).await.map_err(|_| Code::BrokerTransportFailure)?, &id),
                };
                let response = if acks == 0 {
                    conn.send_only(request, PRODUCE_VERSION).await.map(|()| None)
                } else {
                    conn.send(request, PRODUCE_VERSION).await.map(Some)
                };
                response.map(|r| (conn, r)).map_err(|_| Code::BrokerTransportFailure)
            };
            let (conn, result) = match tokio::time::timeout(wait.max(Duration::from_millis(1)), attempt).await {
                Ok(Ok((conn, r))) => (Some(conn), Ok(r)),
                Ok(Err(code)) => (None, Err(code)),
                Err(_) => (None, Err(Code::OperationTimedOut)),
            };
            Done::Produce { broker, conn, batches, result }
        });
    }

    fn done(&mut self, done: Done) {
        let now = Instant::now();
        match done {
            Done::Metadata(result) => {
                self.refresh.busy = false;
                match result {
                    Ok(resp) => {
                        self.metadata.update(&resp, now);
                        self.refresh.next_refresh = self.s.metadata_refresh.map(|d| now + d);
                        // Keep asking while a topic waits for its leaders or its creation.
                        let waiting = self.metadata.topics().iter().any(|t| match self.metadata.topic(t) {
                            Some(TopicState::Known(l)) => l.contains(&-1),
                            Some(TopicState::Failed { .. }) => true,
                            None => false,
                        });
                        if waiting {
                            self.refresh.next_refresh = Some(now + self.s.retry_backoff);
                        }
                    }
                    Err(_) => {
                        self.refresh.next_refresh = Some(now + self.s.retry_backoff);
                        self.refresh.retry_at = self.refresh.next_refresh;
                    }
                }
            }
            Done::Pid(result) => {
                self.pid_busy = false;
                let idem = self.idem.as_mut().expect("only an idempotent producer asks for an id");
                match result {
                    Ok(r) if r.error_code == 0 => {
                        idem.set(r.producer_id.0, r.producer_epoch);
                        self.pid_retry_at = None;
                    }
                    Ok(r) if r.error_code == 47 || r.error_code == 59 => {
                        // The id is gone or fenced (KIP-360): start over with a new one.
                        idem.pid = PidState::Needed;
                        self.pid_retry_at = Some(now + self.s.retry_backoff);
                    }
                    _ => self.pid_retry_at = Some(now + self.s.retry_backoff),
                }
            }
            Done::Produce { broker, conn, batches, result } => {
                self.busy_brokers.remove(&broker);
                if let Some(c) = conn {
                    self.idle.insert(broker, c);
                }
                for b in batches {
                    self.busy_partitions.remove(&(b.topic.clone(), b.partition));
                    match &result {
                        Err(code) => {
                            self.refresh.due = true;
                            self.retry_or_fail(b, *code, now);
                        }
                        Ok(None) => self.succeed(b, -1, -1),
                        Ok(Some(resp)) => {
                            let part = resp
                                .responses
                                .iter()
                                .filter(|t| t.name.0.as_str() == b.topic)
                                .flat_map(|t| t.partition_responses.iter())
                                .find(|p| p.index == b.partition);
                            match part {
                                None => self.retry_or_fail(b, Code::BadMessage, now),
                                Some(p) => self.answered(b, p.error_code, p.base_offset, p.log_append_time_ms, now),
                            }
                        }
                    }
                }
            }
        }
    }

    fn answered(&mut self, b: Batch, code: i16, base: i64, append_time: i64, now: Instant) {
        match code {
            // A duplicate is a success: the broker already has it (KIP-98; librdkafka treats
            // DUPLICATE_SEQUENCE_NUMBER as persisted).
            0 | 46 => self.succeed(b, base, append_time),
            45 if self.idem.is_some() => {
                let why = format!(
                    "ProduceRequest for {} [{}] with {} message(s) failed due to sequence desynchronization with broker",
                    b.topic,
                    b.partition,
                    b.records.len()
                );
                self.fail_batch(b, KafkaError::MessageProduction(Code::OutOfOrderSequenceNumber));
                self.set_fatal(Code::OutOfOrderSequenceNumber, why);
            }
            c if retriable(c) => {
                if leader_error(c) {
                    self.refresh.due = true;
                }
                self.retry_or_fail(b, Code::from(c), now);
            }
            c => self.fail_batch(b, KafkaError::MessageProduction(Code::from(c))),
        }
    }

    fn set_fatal(&mut self, code: Code, why: String) {
        self.fatal = true;
        *self.shared.fatal.lock().unwrap_or_else(|p| p.into_inner()) = Some((code, why));
        // librdkafka purges the queues (not what is in flight) with ERR__PURGE_QUEUE.
        let mut purged: Vec<Pending> = self.unassigned.drain(..).collect();
        for q in self.queues.values_mut() {
            purged.extend(q.drain(..));
        }
        for (_, b) in std::mem::take(&mut self.retry) {
            purged.extend(b.records);
        }
        for p in purged {
            self.finish(p, Err(KafkaError::MessageProduction(Code::PurgeQueue)));
        }
    }

    fn succeed(&mut self, b: Batch, base: i64, append_time: i64) {
        for (i, p) in b.records.into_iter().enumerate() {
            let delivery = Delivery {
                partition: b.partition,
                // acks=0: librdkafka leaves the offset at RD_KAFKA_OFFSET_INVALID (-1001).
                offset: if base >= 0 { base + i as i64 } else { -1001 },
                timestamp: reported_timestamp(&p.message, append_time),
            };
            self.finish(p, Ok(delivery));
        }
    }

    fn fail_batch(&mut self, b: Batch, error: KafkaError) {
        for p in b.records {
            self.finish(p, Err(error.clone()));
        }
    }

    fn retry_or_fail(&mut self, mut b: Batch, code: Code, now: Instant) {
        if b.deadline().is_some_and(|d| d <= now) {
            if b.stamp.is_some()
                && let Some(idem) = &mut self.idem
            {
                idem.bump();
            }
            return self.fail_batch(b, KafkaError::MessageProduction(Code::MessageTimedOut));
        }
        if b.attempts > self.s.retries {
            return self.fail_batch(b, KafkaError::MessageProduction(code));
        }
        let exp = b.attempts.saturating_sub(1).min(16);
        let backoff =
            self.s.retry_backoff.saturating_mul(1 << exp).min(self.s.retry_backoff_max.max(self.s.retry_backoff));
        b.not_before = Some(now + backoff);
        self.retry.insert((b.topic.clone(), b.partition), b);
    }

    fn answer_flushes(&mut self) {
        if self.shared.pending.load(Ordering::SeqCst) == 0 {
            for tx in self.flushes.drain(..) {
                let _ = tx.send(());
            }
        }
        self.flushes.retain(|tx| !tx.is_closed());
    }

    /// When the loop must look again without a command or a completion: the next linger expiry,
    /// retry backoff, message deadline or metadata refresh.
    fn next_wake(&self, now: Instant) -> Option<Instant> {
        let mut times: Vec<Instant> = Vec::new();
        for q in self.queues.values() {
            if let Some(p) = q.front() {
                times.push(p.enqueued + self.s.linger);
                times.extend(p.deadline);
            }
        }
        for b in self.retry.values() {
            times.extend(b.not_before);
            times.extend(b.deadline());
        }
        times.extend(self.unassigned.iter().filter_map(|p| p.deadline));
        if !self.unassigned.is_empty() {
            times.push(now + self.s.retry_backoff);
        }
        if !self.queues.values().all(VecDeque::is_empty) || !self.retry.is_empty() || !self.unassigned.is_empty() {
            times.extend(self.refresh.next_refresh);
        }
        times.extend(self.pid_retry_at);
        // What is due now and still waits is blocked on a request in flight, whose completion wakes
        // the loop.
        times.into_iter().filter(|t| *t > now).min()
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
