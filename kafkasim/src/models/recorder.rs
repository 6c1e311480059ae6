//! Recording what consumers do: a thread-safe [`Recorder`], and the [`ConsumerHistory`] it
//! keeps.
//!
//! - [`Recorder::new`]: for real-time tests (rdkafka on loopback). Any thread may record —
//!   rdkafka's rebalance and commit callbacks, worker threads; events are numbered in the order
//!   they are recorded and stamped with the cluster's clock ([`Cluster::elapsed`]), the clock
//!   of the broker's introspection.
//! - [`Recorder::sim`]: inside a simulation. Each event is also a history entry
//!   (`kafka.consumer.<what>`), so the run's checks ([`crate::models::install`]) judge it as it
//!   happens, the trace shows it, and it replays with the seed.
//!
//! Record from the consumer, at the moment it happens: an assignment when the rebalance
//! callback gets it; a revocation after the commits made for it; `begin` when a record is
//! handed to processing, `process` when its effect is done, `error` when it failed; a commit
//! with the broker's answer once it came (rdkafka's `commit_callback` reports automatic
//! commits); `stop` when the consumer is told to stop; `leave` once it closed. A harness that
//! kills a consumer records its `crash` (in a simulation, `node.crash` counts).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::Ctx;

use crate::Cluster;
use crate::models::event::{Answer, Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::history::ConsumerHistory;
use crate::models::judge::{Report, judge};
use crate::models::model::Spec;

/// Records consumer events (see the module docs). Cheap to clone; clones share the history.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

struct Inner {
    cluster: Cluster,
    ctx: Option<Ctx>,
    history: Mutex<ConsumerHistory>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder").field("sim", &self.inner.ctx.is_some()).finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder for consumers of `cluster` outside a simulation (loopback, real time).
    pub fn new(cluster: &Cluster) -> Recorder {
        Recorder { inner: Arc::new(Inner { cluster: cluster.clone(), ctx: None, history: Mutex::default() }) }
    }

    /// A recorder for consumers of `cluster` inside the simulation `ctx`: every event is also
    /// recorded in the run's history.
    pub fn sim(ctx: &Ctx, cluster: &Cluster) -> Recorder {
        Recorder {
            inner: Arc::new(Inner { cluster: cluster.clone(), ctx: Some(ctx.clone()), history: Mutex::default() }),
        }
    }

    /// A handle recording as `member` (its `client.id`) of `group`.
    pub fn member(&self, group: &str, member: &str) -> MemberRecorder {
        MemberRecorder { recorder: self.clone(), group: group.to_string(), member: member.to_string() }
    }

    /// Records an event now.
    pub fn record(&self, group: &str, member: &str, what: What) {
        let mut history = self.inner.history.lock().unwrap_or_else(|p| p.into_inner());
        let at = self.inner.cluster.elapsed();
        let mut event = Event { seq: 0, at, group: group.to_string(), member: member.to_string(), what };
        event.seq = match &self.inner.ctx {
            // The history index; recorded under the lock, so the in-memory order is the same.
            Some(ctx) => ctx.record(&event.kind(), &event.member, event.detail()),
            None => history.events.len() as u64 + history.dropped,
        };
        history.push_event(event);
    }

    /// Records that a fault affecting `group` healed now, with every partition's high
    /// watermark at this moment (the records waiting; Q9).
    pub fn heal(&self, group: &str) {
        let high_watermarks = self.high_watermarks(group);
        self.record(group, "harness", What::Heal { high_watermarks });
    }

    /// Every partition's high watermark now.
    fn high_watermarks(&self, group: &str) -> std::collections::BTreeMap<TopicPartition, i64> {
        let facts = Facts::of(&self.inner.cluster, group);
        facts.partitions.iter().map(|(tp, p)| (tp.clone(), p.high_watermark)).collect()
    }

    /// Waits until `group` has caught up after its last [`Recorder::heal`]: on every partition
    /// with records at the heal, the group's committed offset (the broker's) reached the high
    /// watermark the heal recorded — what waited has been processed and committed — or `bound`
    /// has passed since the heal. Returns whether it caught up.
    ///
    /// Call it between the heal and stopping the consumers, with Q9's bound
    /// ([`Spec::bound`]`.total()`): Q9 cannot judge a history that ends before heal + bound
    /// while records still wait (it fails with "run until heal + bound to judge"), and a harness
    /// that stops as soon as its own checks pass may end there. With no heal recorded, `bound`
    /// counts from now. Polls the broker's introspection every [`Self::SETTLE_POLL`] of the
    /// cluster's clock (the run's fake time in a simulation).
    pub async fn settle(&self, group: &str, bound: Duration) -> bool {
        let heal = {
            let history = self.inner.history.lock().unwrap_or_else(|p| p.into_inner());
            history.events.iter().rev().find_map(|e| match &e.what {
                What::Heal { high_watermarks } if e.group == group => Some((e.at, high_watermarks.clone())),
                _ => None,
            })
        };
        let now = self.inner.cluster.elapsed();
        let (at, high_watermarks) = match heal {
            Some(heal) => heal,
            None => (now, self.high_watermarks(group)),
        };
        let deadline = at + bound;
        loop {
            let caught_up = high_watermarks.iter().filter(|(_, hw)| **hw > 0).all(|(tp, hw)| {
                self.inner.cluster.committed(group, &tp.topic, tp.partition).is_some_and(|(offset, _)| offset >= *hw)
            });
            let now = self.inner.cluster.elapsed();
            if caught_up || now >= deadline {
                return caught_up;
            }
            tokio::time::sleep(Self::SETTLE_POLL.min(deadline - now)).await;
        }
    }

    /// How often [`Recorder::settle`] looks at the broker's committed offsets.
    pub const SETTLE_POLL: Duration = Duration::from_millis(20);

    /// The history so far, ending now.
    pub fn history(&self) -> ConsumerHistory {
        let history = self.inner.history.lock().unwrap_or_else(|p| p.into_inner()).clone();
        history.ends_at(self.inner.cluster.elapsed())
    }

    /// The broker's facts about `group` now.
    pub fn facts(&self, group: &str) -> Facts {
        Facts::of(&self.inner.cluster, group)
    }

    /// Runs every model over the history so far and the broker's facts now ([`judge`]).
    pub fn judge(&self, spec: &Spec) -> Report {
        judge(&self.history(), &self.facts(spec.group()), spec)
    }
}

/// Records as one member of one group ([`Recorder::member`]). Cheap to clone.
#[derive(Clone, Debug)]
pub struct MemberRecorder {
    recorder: Recorder,
    group: String,
    member: String,
}

impl MemberRecorder {
    fn record(&self, what: What) {
        self.recorder.record(&self.group, &self.member, what);
    }

    /// The member's name (its client id).
    pub fn name(&self) -> &str {
        &self.member
    }

    /// The partition was assigned.
    pub fn assign(&self, topic: &str, partition: i32) {
        self.record(What::Assign(TopicPartition::new(topic, partition)));
    }

    /// The partition was revoked (record it after the commits made for it).
    pub fn revoke(&self, topic: &str, partition: i32) {
        self.record(What::Revoke { tp: TopicPartition::new(topic, partition), lost: false });
    }

    /// The partition was lost without a chance to commit (KIP-429).
    pub fn lost(&self, topic: &str, partition: i32) {
        self.record(What::Revoke { tp: TopicPartition::new(topic, partition), lost: true });
    }

    /// Processing of the record at `offset` began.
    pub fn begin(&self, topic: &str, partition: i32, offset: i64) {
        self.record(What::Begin { tp: TopicPartition::new(topic, partition), offset });
    }

    /// The record at `offset` was processed: its effect is done. `value` is kept (lossy
    /// UTF-8) for reports.
    pub fn process(&self, topic: &str, partition: i32, offset: i64, value: impl AsRef<[u8]>) {
        let value = Some(String::from_utf8_lossy(value.as_ref()).into_owned());
        self.record(What::Process { tp: TopicPartition::new(topic, partition), offset, value });
    }

    /// Processing of the record at `offset` failed.
    pub fn error(&self, topic: &str, partition: i32, offset: i64, error: impl fmt::Display) {
        self.record(What::Error { tp: TopicPartition::new(topic, partition), offset, error: error.to_string() });
    }

    /// The member committed `offset` (the next record to read) and the broker answered.
    pub fn commit(&self, topic: &str, partition: i32, offset: i64, answer: Answer) {
        self.record(What::Commit { tp: TopicPartition::new(topic, partition), offset, answer });
    }

    /// The member was told to stop.
    pub fn stop(&self) {
        self.record(What::Stop);
    }

    /// The member left the group (closed).
    pub fn leave(&self) {
        self.record(What::Leave);
    }

    /// The member's process died.
    pub fn crash(&self) {
        self.record(What::Crash);
    }
}
