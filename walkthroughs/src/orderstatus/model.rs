//! What the order-status service is made of that does not depend on the Kafka client: order
//! statuses and events, the projection's store (a trait: a database that outlives the
//! consumers), the observer hooks a harness records through, and the consumer's settings.
//!
//! The service source ([`super::service`], `service.rs`) is compiled twice — once on
//! `kafkasim::rdkafka`, once on real rdkafka in `tests/orderstatus_rdkafka.rs` — and uses these
//! types by name from the module that includes it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// An order's status. Statuses only move forward: placed → paid → shipped → delivered, or
/// placed/paid → cancelled; [`Status::rank`] orders them so that a projection keeps the highest.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Placed by a customer.
    Placed,
    /// Paid.
    Paid,
    /// Handed to the carrier.
    Shipped,
    /// Delivered (final).
    Delivered,
    /// Cancelled before shipping (final).
    Cancelled,
}

impl Status {
    /// Every status, in rank order.
    pub const ALL: [Status; 5] = [Status::Placed, Status::Paid, Status::Shipped, Status::Delivered, Status::Cancelled];

    /// Its position in the order statuses move in (cancelled and delivered are both final; no
    /// order reaches both).
    pub fn rank(self) -> u8 {
        match self {
            Status::Placed => 1,
            Status::Paid => 2,
            Status::Shipped => 3,
            Status::Delivered => 4,
            Status::Cancelled => 5,
        }
    }

    /// Its name in URLs and events.
    pub fn name(self) -> &'static str {
        match self {
            Status::Placed => "placed",
            Status::Paid => "paid",
            Status::Shipped => "shipped",
            Status::Delivered => "delivered",
            Status::Cancelled => "cancelled",
        }
    }

    /// The status named `name`.
    pub fn parse(name: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether no status follows it.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Delivered | Status::Cancelled)
    }
}

/// One order event: the record value on the orders topic (JSON), keyed by the order id.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OrderEvent {
    /// The order.
    pub order: String,
    /// The status it moved to.
    pub status: Status,
    /// The request that made it (unique per attempt: the list-append checker needs unique values).
    pub request: String,
}

/// The body of `POST /orders/{id}/{status}`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Advance {
    /// The caller's request id (unique per attempt).
    pub request: String,
}

/// The body `GET /orders/{id}` answers.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Served {
    /// The order.
    pub order: String,
    /// Its status in the store.
    pub status: Status,
}

/// The projection's store: order → status. A database shared by every consumer replica and the
/// API; it outlives consumer crashes. Writes are conditional (a status only moves up its rank),
/// so a record applied twice (at-least-once) or late changes nothing.
pub trait Store: Send + Sync + 'static {
    /// Sets `order`'s status to `status` unless it already has one of equal or higher rank;
    /// whether it changed.
    fn apply(&self, order: &str, status: Status) -> bool;
    /// `order`'s status, if it has one.
    fn get(&self, order: &str) -> Option<Status>;
}

/// An in-memory [`Store`] (the simulation's database; the integration test's too).
#[derive(Default, Debug)]
pub struct MemoryStore {
    orders: Mutex<BTreeMap<String, Status>>,
}

impl Store for MemoryStore {
    fn apply(&self, order: &str, status: Status) -> bool {
        let mut orders = self.orders.lock().unwrap_or_else(|p| p.into_inner());
        match orders.get(order) {
            Some(current) if current.rank() >= status.rank() => false,
            _ => {
                orders.insert(order.to_string(), status);
                true
            }
        }
    }

    fn get(&self, order: &str) -> Option<Status> {
        self.orders.lock().unwrap_or_else(|p| p.into_inner()).get(order).copied()
    }
}

/// A commit's answer as the commit callback reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitAnswer {
    /// Stored.
    Accepted,
    /// Refused by the coordinator with this Kafka error code: not stored.
    Refused(i32),
    /// A local error (timeout, transport): it may have been stored.
    Unknown(String),
}

/// Called with a produce's outcome: (partition, offset), or the delivery error.
pub type Delivered = Box<dyn FnOnce(Result<(i32, i64), String>) + Send>;

/// Hooks the service calls as it works; every method does nothing by default. The simulation
/// records them into kafkasim's `MemberRecorder` (Q1–Q9) and the list-append recorder.
pub trait Observer: Send + Sync + 'static {
    /// The API is about to produce `value` keyed by `key`; the returned closure is called with
    /// the delivery's outcome ((partition, offset) or the error).
    fn producing(&self, key: &str, value: &str) -> Option<Delivered> {
        let _ = (key, value);
        None
    }
    /// `member` was assigned the partition.
    fn assigned(&self, member: &str, topic: &str, partition: i32) {
        let _ = (member, topic, partition);
    }
    /// `member`'s partition was revoked (`lost`: without a chance to commit).
    fn revoked(&self, member: &str, topic: &str, partition: i32, lost: bool) {
        let _ = (member, topic, partition, lost);
    }
    /// `member` began applying the record at `offset`.
    fn begin(&self, member: &str, topic: &str, partition: i32, offset: i64) {
        let _ = (member, topic, partition, offset);
    }
    /// `member` applied the record at `offset` to the store.
    fn processed(&self, member: &str, topic: &str, partition: i32, offset: i64, value: &[u8]) {
        let _ = (member, topic, partition, offset, value);
    }
    /// `member` asked to commit `offset` (the next to read).
    fn committing(&self, member: &str, topic: &str, partition: i32, offset: i64) {
        let _ = (member, topic, partition, offset);
    }
    /// The commit callback answered `member`'s commit of `offset`.
    fn committed(&self, member: &str, topic: &str, partition: i32, offset: i64, answer: CommitAnswer) {
        let _ = (member, topic, partition, offset, answer);
    }
    /// `member` was told to stop.
    fn stopping(&self, member: &str) {
        let _ = member;
    }
    /// `member` closed its consumer.
    fn left(&self, member: &str) {
        let _ = member;
    }
}

/// An observer that observes nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// How a projector replica consumes.
#[derive(Clone, Debug)]
pub struct ProjectorConfig {
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// `group.id`.
    pub group: String,
    /// The orders topic.
    pub topic: String,
    /// `client.id`: the member's name in the models.
    pub client_id: String,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`.
    pub max_poll_interval: Duration,
    /// The slow part of handling one record (the shortest; records vary up to 4× by offset).
    pub processing: Duration,
    /// Fence late commits: a record whose partition was revoked (or re-assigned in a later
    /// rebalance) after it was applied and before its slow part ended is not committed by the
    /// worker (the revoke callback committed it). `false` is the planted bug (humus #757).
    pub fence: bool,
    /// How long a stopping replica waits for its last commits' answers.
    pub drain_timeout: Duration,
    /// How long after the stop the replica may take in all, drain and close: a close still
    /// waiting then is given up (its LeaveGroup queued behind a JoinGroup the coordinator holds
    /// until a member that has not rejoined expires), so the replica returns within its grace.
    pub shutdown_timeout: Duration,
    /// More client properties.
    pub extra: Vec<(String, String)>,
}

impl ProjectorConfig {
    /// The slow part of handling the record at `offset`: `processing` × 1–4, by offset (no
    /// randomness, so that it replays).
    pub fn processing_of(&self, offset: i64) -> Duration {
        let factor = 1 + (offset.unsigned_abs().wrapping_mul(2_654_435_761) >> 7) % 4;
        self.processing * factor as u32
    }
}
