//! The history: operations on keyed logs, subscriber events and final reads.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::outcome::OpOutcome;

/// A position in a log (Kafka offsets are non-negative `i64`s).
pub type Offset = u64;

/// An operation's id within a history, shown as `op#<n>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op#{}", self.0)
    }
}

/// A value at an offset.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    /// Where it sits.
    pub offset: Offset,
    /// What it holds.
    pub value: String,
}

impl Record {
    /// A record of `value` at `offset`.
    pub fn new(offset: Offset, value: impl Into<String>) -> Record {
        Record { offset, value: value.into() }
    }
}

/// What an operation did, with its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Appended `value`; acknowledged with the offset it was given when the server said
    /// (`None`: acknowledged without an offset, as a Kafka `DUPLICATE_SEQUENCE_NUMBER`).
    Append {
        /// The value appended (unique across the history).
        value: String,
        /// The outcome.
        outcome: OpOutcome<Option<Offset>>,
    },
    /// Read the log; acknowledged with the records seen, by offset (any subset of the log).
    Read {
        /// The outcome.
        outcome: OpOutcome<Vec<Record>>,
    },
}

/// One operation on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// Its id (for messages).
    pub id: OpId,
    /// Who ran it (a client, a producer).
    pub process: String,
    /// The log it touched (Kafka: `topic-partition`).
    pub key: String,
    /// When it was sent.
    pub start: Duration,
    /// When its outcome was known (for an indeterminate outcome: when it was given up on).
    pub end: Duration,
    /// What it did and how it ended.
    pub action: Action,
}

/// Something that happened to a live subscriber.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubscriberAction {
    /// It (re)subscribed, from this offset (`None`: from wherever the server put it).
    Subscribe {
        /// The offset it asked to start from.
        from: Option<Offset>,
    },
    /// It was delivered a record.
    Deliver(Record),
}

/// A subscriber event, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriberEvent {
    /// The subscriber (a consumer).
    pub subscriber: String,
    /// The log.
    pub key: String,
    /// When.
    pub at: Duration,
    /// What.
    pub action: SubscriberAction,
}

/// A key's final read: the log from its start offset, as it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalLog {
    /// The first offset still in the log (Kafka's log start offset): observations below it
    /// cannot be judged.
    pub log_start: Offset,
    /// The records, in any order, each at or above `log_start`.
    pub records: Vec<Record>,
}

/// A recorded history: operations, subscriber events and final reads (see the module docs).
///
/// Built by hand, by a [`Recorder`](super::Recorder), or from history events
/// ([`History::from_entries`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    ops: Vec<Op>,
    subscriptions: Vec<SubscriberEvent>,
    finals: BTreeMap<String, FinalLog>,
}

impl History {
    /// Operations one history holds at most.
    pub const OPS_MAX: usize = 10_000_000;
    /// Subscriber events one history holds at most.
    pub const SUBSCRIBER_EVENTS_MAX: usize = 10_000_000;

    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    fn next_id(&self) -> OpId {
        OpId(self.ops.last().map_or(1, |op| op.id.0 + 1))
    }

    /// Adds an operation as given (ids are for messages; the checker does not need them unique).
    ///
    /// # Panics
    /// Beyond [`History::OPS_MAX`] operations.
    pub fn push(&mut self, op: Op) {
        assert!(self.ops.len() < Self::OPS_MAX, "a list-append history holds at most History::OPS_MAX operations");
        self.ops.push(op);
    }

    /// Adds an append of `value` to `key` by `process`, sent at `start`, ended at `end`; returns
    /// its id.
    pub fn append(
        &mut self,
        process: &str,
        key: &str,
        value: &str,
        start: Duration,
        end: Duration,
        outcome: OpOutcome<Option<Offset>>,
    ) -> OpId {
        self.push_action(process, key, start, end, Action::Append { value: value.to_string(), outcome })
    }

    /// Adds a read of `key` by `process`; returns its id.
    pub fn read(
        &mut self,
        process: &str,
        key: &str,
        start: Duration,
        end: Duration,
        outcome: OpOutcome<Vec<Record>>,
    ) -> OpId {
        self.push_action(process, key, start, end, Action::Read { outcome })
    }

    fn push_action(&mut self, process: &str, key: &str, start: Duration, end: Duration, action: Action) -> OpId {
        let id = self.next_id();
        self.push(Op { id, process: process.to_string(), key: key.to_string(), start, end, action });
        id
    }

    fn push_subscriber(&mut self, subscriber: &str, key: &str, at: Duration, action: SubscriberAction) {
        assert!(
            self.subscriptions.len() < Self::SUBSCRIBER_EVENTS_MAX,
            "a list-append history holds at most History::SUBSCRIBER_EVENTS_MAX subscriber events"
        );
        self.subscriptions.push(SubscriberEvent {
            subscriber: subscriber.to_string(),
            key: key.to_string(),
            at,
            action,
        });
    }

    /// Adds that `subscriber` (re)subscribed to `key` at `at`, from offset `from`.
    pub fn subscribe(&mut self, subscriber: &str, key: &str, from: Option<Offset>, at: Duration) {
        self.push_subscriber(subscriber, key, at, SubscriberAction::Subscribe { from });
    }

    /// Adds that `subscriber` was delivered `value` at `offset` of `key` at `at`.
    pub fn deliver(&mut self, subscriber: &str, key: &str, offset: Offset, value: &str, at: Duration) {
        self.push_subscriber(subscriber, key, at, SubscriberAction::Deliver(Record::new(offset, value)));
    }

    /// Sets the final read of `key`: its log start offset and its records `(offset, value)`.
    pub fn final_log<V: Into<String>>(
        &mut self,
        key: &str,
        log_start: Offset,
        records: impl IntoIterator<Item = (Offset, V)>,
    ) {
        let records = records.into_iter().map(|(offset, value)| Record::new(offset, value)).collect();
        self.finals.insert(key.to_string(), FinalLog { log_start, records });
    }

    /// Sets the final read of `key`.
    pub fn set_final(&mut self, key: &str, log: FinalLog) {
        self.finals.insert(key.to_string(), log);
    }

    /// The operations, in the order added.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The operations, to edit (to build a deliberately wrong history from a recorded one).
    pub fn ops_mut(&mut self) -> &mut Vec<Op> {
        &mut self.ops
    }

    /// The subscriber events, in the order added.
    pub fn subscriptions(&self) -> &[SubscriberEvent] {
        &self.subscriptions
    }

    /// The final reads, by key.
    pub fn finals(&self) -> &BTreeMap<String, FinalLog> {
        &self.finals
    }

    /// The final reads, to edit.
    pub fn finals_mut(&mut self) -> &mut BTreeMap<String, FinalLog> {
        &mut self.finals
    }
}

/// An operation sent and not yet ended (by the [`Recorder`](super::Recorder) or while a history
/// is rebuilt from events).
#[derive(Clone, Debug)]
pub(super) struct Open {
    pub(super) id: OpId,
    pub(super) process: String,
    pub(super) key: String,
    pub(super) start: Duration,
    /// `Some`: an append of this value; `None`: a read.
    pub(super) value: Option<String>,
}

impl Open {
    pub(super) fn close(self, end: Duration, action: Action) -> Op {
        Op { id: self.id, process: self.process, key: self.key, start: self.start, end, action }
    }

    /// Ends it failed or unknown: outcomes that carry no result.
    pub(super) fn close_without_result(self, end: Duration, failed: bool, why: String) -> Op {
        fn outcome<T>(failed: bool, why: String) -> OpOutcome<T> {
            if failed { OpOutcome::Failed(why) } else { OpOutcome::Indeterminate(why) }
        }
        let action = match &self.value {
            Some(value) => Action::Append { value: value.clone(), outcome: outcome(failed, why) },
            None => Action::Read { outcome: outcome(failed, why) },
        };
        self.close(end, action)
    }
}
