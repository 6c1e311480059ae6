//! The observers the harnesses plug into the service: [`MemberObserver`] records one projector
//! incarnation into kafkasim's [`MemberRecorder`] (the Q1–Q9 models), [`AppendObserver`] records
//! the API's produces for the list-append checker.
//!
//! The models want a revocation recorded after the commits made for it (Q2 judges a commit
//! answered while the member does not hold the partition). The service commits with
//! `CommitMode::Async` and learns the answers from the commit callback, which may come after the
//! revoke callback; so a revocation with commits still unanswered is recorded once they are
//! answered — or before the member's next assignment of the partition, or when it leaves.
//! A stop that comes while such revocations wait is recorded after them (they happened before
//! it: Q8 owes only what the member held at its stop), and revocations after the stop wait for
//! it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kafkasim::models::{Answer, MemberRecorder};
use sim::check::list_append;

use super::model::{CommitAnswer, Delivered, Observer};

/// Per partition: commits asked for and not answered, and a revocation waiting for them.
#[derive(Default, Debug)]
struct Partition {
    pending: usize,
    /// `Some(lost)`: revoked, not recorded yet.
    revoked: Option<bool>,
    /// The revocation came before a stop that waits for it.
    before_stop: bool,
}

/// What the observer holds back.
#[derive(Default, Debug)]
struct Held {
    partitions: BTreeMap<(String, i32), Partition>,
    /// A stop not recorded yet: revocations from before it wait for commit answers.
    stop: bool,
}

/// Records one projector incarnation into a [`MemberRecorder`] (see the module docs).
#[derive(Debug)]
pub struct MemberObserver {
    rec: MemberRecorder,
    held: Mutex<Held>,
}

impl MemberObserver {
    /// An observer recording through `rec`.
    pub fn new(rec: MemberRecorder) -> MemberObserver {
        MemberObserver { rec, held: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the revocations that may be recorded: all of them with `all` (a leave or an
    /// assignment), else those no commit waits for; a held stop once the revocations from before
    /// it are recorded.
    fn flush(&self, held: &mut Held, all: bool) {
        let ready = |before_stop: bool, held: &mut Held| {
            for ((topic, partition), p) in held.partitions.iter_mut() {
                if p.before_stop == before_stop && (all || p.pending == 0) {
                    if let Some(lost) = p.revoked.take() {
                        self.record_revoke(topic, *partition, lost);
                    }
                    p.before_stop = false;
                }
            }
        };
        ready(true, held);
        if held.stop && held.partitions.values().all(|p| !p.before_stop) {
            held.stop = false;
            self.rec.stop();
        }
        if !held.stop {
            ready(false, held);
        }
    }

    fn record_revoke(&self, topic: &str, partition: i32, lost: bool) {
        if lost {
            self.rec.lost(topic, partition);
        } else {
            self.rec.revoke(topic, partition);
        }
    }
}

fn answer(a: &CommitAnswer) -> Answer {
    match a {
        CommitAnswer::Accepted => Answer::Accepted,
        CommitAnswer::Refused(code) => Answer::Refused(i16::try_from(*code).unwrap_or(i16::MAX)),
        CommitAnswer::Unknown(_) => Answer::Unknown,
    }
}

impl Observer for MemberObserver {
    fn assigned(&self, _member: &str, topic: &str, partition: i32) {
        let mut held = self.lock();
        let p = held.partitions.entry((topic.to_string(), partition)).or_default();
        p.before_stop = false;
        if let Some(lost) = p.revoked.take() {
            self.record_revoke(topic, partition, lost);
        }
        let held = &mut *held;
        self.flush(held, false);
        self.rec.assign(topic, partition);
    }

    fn revoked(&self, _member: &str, topic: &str, partition: i32, lost: bool) {
        let mut held = self.lock();
        let stop = held.stop;
        let p = held.partitions.entry((topic.to_string(), partition)).or_default();
        if p.pending == 0 && !stop {
            self.record_revoke(topic, partition, lost);
        } else {
            p.revoked = Some(lost);
        }
    }

    fn begin(&self, _member: &str, topic: &str, partition: i32, offset: i64) {
        self.rec.begin(topic, partition, offset);
    }

    fn processed(&self, _member: &str, topic: &str, partition: i32, offset: i64, value: &[u8]) {
        self.rec.process(topic, partition, offset, value);
    }

    fn committing(&self, _member: &str, topic: &str, partition: i32, _offset: i64) {
        self.lock().partitions.entry((topic.to_string(), partition)).or_default().pending += 1;
    }

    fn committed(&self, _member: &str, topic: &str, partition: i32, offset: i64, a: CommitAnswer) {
        let mut held = self.lock();
        self.rec.commit(topic, partition, offset, answer(&a));
        let p = held.partitions.entry((topic.to_string(), partition)).or_default();
        p.pending = p.pending.saturating_sub(1);
        let held = &mut *held;
        self.flush(held, false);
    }

    fn stopping(&self, _member: &str) {
        let mut held = self.lock();
        let mut waiting = false;
        for p in held.partitions.values_mut().filter(|p| p.revoked.is_some()) {
            p.before_stop = true;
            waiting = true;
        }
        if waiting {
            held.stop = true;
        } else {
            self.rec.stop();
        }
    }

    fn left(&self, _member: &str) {
        let mut held = self.lock();
        let held = &mut *held;
        self.flush(held, true);
        self.rec.leave();
    }
}

/// Records the API's produces as list-append appends: the key is the record's topic-partition,
/// which the harness computes from the order id the way the producer's default partitioner does
/// (librdkafka's `consistent_random`: CRC-32 of the key modulo the partition count).
#[derive(Clone, Debug)]
pub struct AppendObserver {
    recorder: list_append::Recorder,
    process: String,
    topic: String,
    partitions: i32,
}

impl AppendObserver {
    /// Records as `process` into `recorder`, for `topic` with `partitions` partitions.
    pub fn new(recorder: list_append::Recorder, process: &str, topic: &str, partitions: i32) -> AppendObserver {
        AppendObserver { recorder, process: process.to_string(), topic: topic.to_string(), partitions }
    }

    /// The partition the producer puts `key` on.
    pub fn partition_of(&self, key: &str) -> i32 {
        (kafkasim::rdkafka::producer::partitioner::crc32(key.as_bytes()) % self.partitions as u32) as i32
    }
}

impl Observer for AppendObserver {
    fn producing(&self, key: &str, value: &str) -> Option<Delivered> {
        let partition = self.partition_of(key);
        let pending = self.recorder.append(&self.process, &kafkasim::history::key(&self.topic, partition), value);
        Some(Box::new(move |outcome| match outcome {
            Ok((p, offset)) if p == partition => pending.ok(u64::try_from(offset).ok()),
            Ok((p, offset)) => pending.unknown(format!("delivered to partition {p} at {offset}, not {partition}")),
            // A delivery error may still have been appended (a lost response, a timeout).
            Err(e) => pending.unknown(e),
        }))
    }
}
