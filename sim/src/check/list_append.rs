//! A Jepsen-style list-append checker for logs: appends, reads at offsets, live subscribers.
//!
//! The model is a set of append-only logs, one per *key*, each holding one *value* per *offset*
//! (offsets may be sparse). This is Jepsen's list-append workload (`jepsen.tests.cycle.append`)
//! and the queue workload Jepsen uses for Kafka and Redpanda (`jepsen.tests.kafka`), as analysed
//! by Elle (Kingsbury & Alvaro, "Elle: Inferring Isolation Anomalies from Experimental
//! Observations", VLDB 2020): every value is appended once, so what a read holds names the
//! append that wrote it, and a final read of every log is the version order the other
//! observations are judged against. In Kafka's terms ("Design: the log" in the Apache Kafka
//! documentation) a key is a topic-partition, an append is a produce answered with the offset
//! the leader assigned, a read is a fetch of the records at offsets, and a subscriber is a
//! consumer following its position.
//!
//! A [`History`] holds:
//! - operations ([`Op`]), each with a start time, an end time and an [`Outcome`]: acknowledged,
//!   definitely failed, or unknown (indeterminate: a timeout or a lost response, Jepsen's
//!   `:info`). An acknowledged append may carry the offset it was given; an acknowledged read
//!   carries the records it saw, by offset. Reads may miss records (the gaps show by offset);
//!   what they hold must match;
//! - subscriber events ([`SubscriberEvent`]): a live subscriber (re)subscribing from an offset,
//!   and each record delivered to it;
//! - one final read per key ([`FinalLog`]): the log as it ended, from its log start offset.
//!
//! [`check`] judges it by these rules; each [`Violation`] names its [`Rule`], the key, the value
//! and the offsets:
//!
//! | rule | name | violated when | Jepsen/Elle |
//! |---|---|---|---|
//! | 1 | `acknowledged-lost` | an acknowledged append is missing from the final read | lost write |
//! | 2 | `value-at-two-offsets` | the final log holds a value at two offsets, an append acknowledged at one offset sits at another, or observations the final log cannot judge (below its start) hold a value at two offsets | duplicate |
//! | 3 | `read-disagrees` | a read holds, at an offset, another value than the final log (or the final log holds nothing there); below the log start, a value the final log holds elsewhere, or another value than an earlier observation there | inconsistent offsets |
//! | 4 | `real-time-order` | an append acknowledged before another was sent (its end before the other's start) sits at a later offset | real-time order (strict serializability of appends) |
//! | 5 | `phantom-value` | a read, delivery or the final log holds a value nobody appended, or one appended to another key | garbage read |
//! | 6 | `failed-appeared` | a definitely failed append appears anywhere | G1a (aborted read) |
//! | 7 | `subscriber-order` | a subscriber is delivered an offset at or below one it already got (across reconnects too) | nonmonotonic poll |
//! | 7 | `subscriber-disagrees` | a delivered record is not in the final log at the same offset (below the log start: as rule 3) | inconsistent offsets |
//!
//! Records of the final log a subscriber never got are not violations: they are reported as
//! [`Gap`]s with their offsets (Jepsen's poll skip and unseen), marked when a reconnect lies
//! inside them and when they are the log's tail. Unknown appends may or may not appear; both are
//! counted in the [`Report`]. Offsets below a final log's start (dropped by retention) cannot be
//! judged against it: what reads and deliveries hold there is judged against where the final
//! log holds the value and against the other observations there (acknowledged offsets included),
//! and counted when it contradicts nothing, never guessed at.
//!
//! Preconditions, reported as violations of their own rule: every appended value is unique
//! across the history ([`Rule::UniqueValues`]: the checker's inference needs it, as Elle's does;
//! a client that retries must record one operation, not two), and every key with operations or
//! deliveries has a final read ([`Rule::FinalRead`]).
//!
//! Three ways in:
//! - [`check`] / [`analyze`] over a [`History`] built by hand or by a [`Recorder`];
//! - a [`Recorder`] for clients to record into: in a simulation ([`Recorder::of`]) it also
//!   records each operation as a history event; outside one ([`Recorder::wall`]) it keeps wall
//!   time, for real clients with their own threads;
//! - the [`ListAppend`] check, fed by history events (`ctx.record`) inside a simulation, with
//!   the event kinds listed at [`ListAppend`].
//!
//! ```
//! use std::time::Duration;
//! use sim::check::list_append::{self, History, Outcome, Record, Rule};
//!
//! let ms = Duration::from_millis;
//! let mut h = History::new();
//! h.append("p1", "orders-0", "a", ms(0), ms(5), Outcome::Ok(Some(0)));
//! h.append("p2", "orders-0", "b", ms(1), ms(9), Outcome::Unknown("connection reset".into()));
//! h.read("c1", "orders-0", ms(10), ms(12), Outcome::Ok(vec![Record::new(1, "b")]));
//! h.final_log("orders-0", 0, [(0, "a"), (1, "b")]);
//! let report = list_append::check(&h).expect("a correct history");
//! assert_eq!(report.unknown_in_log, 1);
//!
//! h.read("c1", "orders-0", ms(13), ms(14), Outcome::Ok(vec![Record::new(0, "b")]));
//! let violations = list_append::check(&h).unwrap_err();
//! assert_eq!(violations[0].rule, Rule::ReadDisagrees);
//! assert_eq!(violations[0].offsets, vec![0]);
//! ```
//!
//! Cost: one pass over the history with hash lookups, plus a sort of each key's appends for the
//! real-time rule — O(n log n). `cargo bench -p sim --bench list_append` measures it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{Check, Verdict};
use crate::Ctx;
use crate::history::Entry;

/// A map for lookups only (never iterated where order could show): a fast, fixed hash, so the
/// checker costs the same in and out of a simulation.
type Lookup<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// The Fx hash (rustc's): a multiply and a rotate per word; fine for keys no adversary picks.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(SEED);
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

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

/// How an operation ended (Jepsen's `:ok`, `:fail`, `:info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<T> {
    /// Acknowledged: it took effect, with what it returned.
    Ok(T),
    /// Definitely failed: it did not take effect (the server said no before applying it).
    Failed(String),
    /// Unknown: it may or may not have taken effect (a timeout, a lost response, `acks=0`).
    Unknown(String),
}

impl<T> Outcome<T> {
    /// Whether it was acknowledged.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok(_))
    }

    /// Whether it definitely failed.
    pub fn is_failed(&self) -> bool {
        matches!(self, Outcome::Failed(_))
    }

    /// Whether its effect is unknown.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Outcome::Unknown(_))
    }

    fn word(&self) -> &'static str {
        match self {
            Outcome::Ok(_) => "acknowledged",
            Outcome::Failed(_) => "failed",
            Outcome::Unknown(_) => "unknown",
        }
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
        outcome: Outcome<Option<Offset>>,
    },
    /// Read the log; acknowledged with the records seen, by offset (any subset of the log).
    Read {
        /// The outcome.
        outcome: Outcome<Vec<Record>>,
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
    /// When its outcome was known (for an unknown outcome: when it was given up on).
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
        outcome: Outcome<Option<Offset>>,
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
        outcome: Outcome<Vec<Record>>,
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

    /// Rebuilds a history from recorded history events (the kinds listed at [`ListAppend`];
    /// other kinds are skipped). Operations still open at the end are unknown, ended at the last
    /// event's time.
    ///
    /// # Errors
    /// The [`Rule::Event`] violation naming the first event that does not parse.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Result<History, Box<Violation>> {
        let mut feed = Feed::default();
        let mut last = Duration::ZERO;
        for entry in entries {
            last = entry.at();
            feed.apply(entry)?;
        }
        Ok(feed.history(last))
    }
}

// ---- rules, violations, reports ---------------------------------------------------------------

/// A rule of the checker (see the module docs for the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// Rule 1: no acknowledged append missing from the final read.
    AcknowledgedLost,
    /// Rule 2: no value at two offsets (in the final log, or acknowledged at one and sitting at
    /// another).
    ValueAtTwoOffsets,
    /// Rule 3: every read agrees with the final log at the offsets it holds.
    ReadDisagrees,
    /// Rule 4: an append acknowledged before another was sent sits at an earlier offset.
    RealTimeOrder,
    /// Rule 5: no read, delivery or final log holds a value nobody appended, or one appended to
    /// another key.
    PhantomValue,
    /// Rule 6: a definitely failed append never appears.
    FailedAppeared,
    /// Rule 7: a live subscriber sees increasing offsets, across reconnects.
    SubscriberOrder,
    /// Rule 7: every delivered record is in the final log at the same offset.
    SubscriberDisagrees,
    /// Precondition: each value is appended once across the history.
    UniqueValues,
    /// Precondition: every key with operations or deliveries has one well-formed final read.
    FinalRead,
    /// Precondition: every `list.*` history event parses (the [`ListAppend`] check).
    Event,
}

impl Rule {
    /// Every rule, in order.
    pub const ALL: [Rule; 11] = [
        Rule::AcknowledgedLost,
        Rule::ValueAtTwoOffsets,
        Rule::ReadDisagrees,
        Rule::RealTimeOrder,
        Rule::PhantomValue,
        Rule::FailedAppeared,
        Rule::SubscriberOrder,
        Rule::SubscriberDisagrees,
        Rule::UniqueValues,
        Rule::FinalRead,
        Rule::Event,
    ];

    /// The rule's number in the issue's list (1–7), `None` for a precondition.
    pub fn number(self) -> Option<u8> {
        match self {
            Rule::AcknowledgedLost => Some(1),
            Rule::ValueAtTwoOffsets => Some(2),
            Rule::ReadDisagrees => Some(3),
            Rule::RealTimeOrder => Some(4),
            Rule::PhantomValue => Some(5),
            Rule::FailedAppeared => Some(6),
            Rule::SubscriberOrder | Rule::SubscriberDisagrees => Some(7),
            Rule::UniqueValues | Rule::FinalRead | Rule::Event => None,
        }
    }

    /// Its name, as violations show it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::AcknowledgedLost => "acknowledged-lost",
            Rule::ValueAtTwoOffsets => "value-at-two-offsets",
            Rule::ReadDisagrees => "read-disagrees",
            Rule::RealTimeOrder => "real-time-order",
            Rule::PhantomValue => "phantom-value",
            Rule::FailedAppeared => "failed-appeared",
            Rule::SubscriberOrder => "subscriber-order",
            Rule::SubscriberDisagrees => "subscriber-disagrees",
            Rule::UniqueValues => "unique-values",
            Rule::FinalRead => "final-read",
            Rule::Event => "event",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.number() {
            Some(n) => write!(f, "rule {n} {}", self.name()),
            None => write!(f, "precondition {}", self.name()),
        }
    }
}

/// A broken rule: which, on which key, for which value, at which offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// The log.
    pub key: String,
    /// The value concerned (the first, when several are).
    pub value: Option<String>,
    /// The offsets concerned, ascending unless the detail says otherwise.
    pub offsets: Vec<Offset>,
    /// The operations concerned.
    pub ops: Vec<OpId>,
    /// What was seen, in words.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.rule)?;
        if !self.key.is_empty() {
            write!(f, ": key {}", self.key)?;
        }
        if let Some(v) = &self.value {
            write!(f, " value {v}")?;
        }
        if !self.offsets.is_empty() {
            const SHOWN: usize = 20;
            let list: Vec<String> = self.offsets.iter().take(SHOWN).map(u64::to_string).collect();
            let more = self.offsets.len().saturating_sub(SHOWN);
            let more = if more > 0 { format!(", … {more} more") } else { String::new() };
            write!(f, " offsets [{}{more}]", list.join(", "))?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Records of the final log a subscriber never got: offsets `first ..= last` of the final log
/// (`records` of them; offsets in between that hold nothing are not counted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gap {
    /// The subscriber.
    pub subscriber: String,
    /// The log.
    pub key: String,
    /// The first offset missed.
    pub first: Offset,
    /// The last offset missed.
    pub last: Offset,
    /// How many records of the final log it missed there.
    pub records: u64,
    /// A reconnect (a subscribe after the first) lies between the deliveries around it.
    pub across_reconnect: bool,
    /// Nothing was delivered after it: the log's tail, not yet delivered.
    pub tail: bool,
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "subscriber {} on {} missed {} record(s) at offsets {}..={}",
            self.subscriber, self.key, self.records, self.first, self.last
        )?;
        match (self.tail, self.across_reconnect) {
            (true, _) => write!(f, " (the tail: nothing delivered after it)"),
            (false, true) => write!(f, " (across a reconnect)"),
            (false, false) => Ok(()),
        }
    }
}

/// Acknowledged, failed and unknown counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Acknowledged.
    pub ok: u64,
    /// Definitely failed.
    pub failed: u64,
    /// Unknown.
    pub unknown: u64,
}

impl Tally {
    fn add<T>(&mut self, outcome: &Outcome<T>) {
        match outcome {
            Outcome::Ok(_) => self.ok += 1,
            Outcome::Failed(_) => self.failed += 1,
            Outcome::Unknown(_) => self.unknown += 1,
        }
    }
}

/// What the checker saw and concluded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Keys seen.
    pub keys: usize,
    /// Appends by outcome.
    pub appends: Tally,
    /// Unknown appends found in the final log.
    pub unknown_in_log: u64,
    /// Unknown appends absent from the final log.
    pub unknown_absent: u64,
    /// Reads by outcome.
    pub reads: Tally,
    /// Records held by acknowledged reads.
    pub records_read: u64,
    /// Records delivered to subscribers.
    pub deliveries: u64,
    /// Records in the final logs.
    pub final_records: u64,
    /// Acknowledgements, read records and deliveries below their final log's start (dropped by
    /// retention): not judged.
    pub below_log_start: u64,
    /// Acknowledged appends without an offset, absent from a final log that starts above 0: they
    /// may have been dropped by retention; not judged.
    pub unverifiable: u64,
    /// What subscribers did not get, with offsets.
    pub gaps: Vec<Gap>,
    /// The violations, by rule then key (at most [`Report::VIOLATIONS_PER_RULE_MAX`] per rule).
    pub violations: Vec<Violation>,
    /// Violations beyond the per-rule bound, counted only.
    pub suppressed: u64,
}

impl Report {
    /// Violations kept per rule; more are counted in [`Report::suppressed`].
    pub const VIOLATIONS_PER_RULE_MAX: usize = 100;

    /// Whether no rule was broken.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }

    /// One line: counts and the verdict.
    pub fn summary(&self) -> String {
        format!(
            "{} key(s); appends {} acknowledged / {} failed / {} unknown ({} in the log, {} absent); reads {} \
             acknowledged ({} records) / {} failed / {} unknown; {} deliveries; {} final records; {} gap(s); {} below \
             log start; {} unverifiable; {} violation(s){}",
            self.keys,
            self.appends.ok,
            self.appends.failed,
            self.appends.unknown,
            self.unknown_in_log,
            self.unknown_absent,
            self.reads.ok,
            self.records_read,
            self.reads.failed,
            self.reads.unknown,
            self.deliveries,
            self.final_records,
            self.gaps.len(),
            self.below_log_start,
            self.unverifiable,
            self.violations.len(),
            if self.suppressed > 0 { format!(" (+{} suppressed)", self.suppressed) } else { String::new() }
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.summary())?;
        for v in &self.violations {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

/// Checks a history (see the module docs): its [`Report`] when no rule is broken, else the
/// violations (at most [`Report::VIOLATIONS_PER_RULE_MAX`] per rule).
///
/// # Errors
/// The violations, by rule then key.
pub fn check(history: &History) -> Result<Report, Vec<Violation>> {
    let report = analyze(history);
    if report.is_valid() { Ok(report) } else { Err(report.violations) }
}

/// Checks a history and returns the whole [`Report`], violations included.
pub fn analyze(history: &History) -> Report {
    Analysis::new(history).run()
}

// ---- the analysis -----------------------------------------------------------------------------

/// What the rules shared by the batch analysis and the per-event check say about a value seen
/// on `key` whose append (if any) went to `writer_key`: `None` when it is no phantom.
fn phantom(key: &str, writer_key: Option<&str>) -> Option<String> {
    match writer_key {
        None => Some("nobody appended it".to_string()),
        Some(w) if w != key => Some(format!("it was appended to key {w}")),
        Some(_) => None,
    }
}

/// A subscriber's position on one key, for rule 7's order: the highest offset delivered, and
/// whether the subscriber is going over offsets it already had (reported once per episode).
#[derive(Clone, Debug, Default)]
struct Cursor {
    max: Option<Offset>,
    behind: bool,
}

impl Cursor {
    /// Takes a delivery at `offset`: the highest offset already delivered when `offset` is not
    /// above it and this starts an episode of going back.
    fn deliver(&mut self, offset: Offset) -> Option<Offset> {
        match self.max {
            Some(max) if offset <= max => {
                let first = !self.behind;
                self.behind = true;
                first.then_some(max)
            }
            _ => {
                self.max = Some(offset);
                self.behind = false;
                None
            }
        }
    }
}

/// Violations, at most [`Report::VIOLATIONS_PER_RULE_MAX`] per rule.
#[derive(Default)]
struct Sink {
    list: Vec<Violation>,
    per_rule: BTreeMap<Rule, usize>,
    suppressed: u64,
}

impl Sink {
    fn push(&mut self, v: Violation) {
        let n = self.per_rule.entry(v.rule).or_default();
        if *n < Report::VIOLATIONS_PER_RULE_MAX {
            *n += 1;
            self.list.push(v);
        } else {
            self.suppressed += 1;
        }
    }
}

/// A key's final log, indexed.
struct FinalView<'h> {
    log_start: Offset,
    /// Offset → value.
    at: Lookup<Offset, &'h str>,
    /// Value → its first offset.
    first: Lookup<&'h str, Offset>,
    /// The records, by offset.
    sorted: Vec<&'h Record>,
}

impl<'h> FinalView<'h> {
    fn offset_of(&self, value: &str) -> Option<Offset> {
        self.first.get(value).copied()
    }

    fn describe(&self, offset: Offset) -> String {
        match self.at.get(&offset) {
            Some(v) => format!("the final log holds {v} there"),
            None => "the final log holds nothing there".to_string(),
        }
    }
}

/// Where a value was seen, for rules 5 and 6.
#[derive(Default)]
struct Sightings {
    offsets: BTreeSet<Offset>,
    by: Vec<String>,
    ops: Vec<OpId>,
}

impl Sightings {
    const BY_MAX: usize = 5;

    fn add(&mut self, offset: Offset, by: impl FnOnce() -> String, op: Option<OpId>) {
        self.offsets.insert(offset);
        if self.by.len() < Self::BY_MAX {
            self.by.push(by());
        }
        if let Some(op) = op
            && !self.ops.contains(&op)
            && self.ops.len() < Self::BY_MAX
        {
            self.ops.push(op);
        }
    }
}

/// Who saw a value below a key's final log start.
#[derive(Clone, Copy)]
enum Witness<'h> {
    /// An append acknowledged at that offset.
    Ack(&'h Op),
    /// A read that held it there.
    Read(&'h Op),
    /// A subscriber it was delivered to there.
    Deliver(&'h str),
}

impl Witness<'_> {
    fn describe(self, value: &str) -> String {
        match self {
            Witness::Ack(op) => format!("{} by {} was acknowledged with {value}", op.id, op.process),
            Witness::Read(op) => format!("{} by {} saw {value}", op.id, op.process),
            Witness::Deliver(subscriber) => format!("subscriber {subscriber} got {value}"),
        }
    }

    fn op(self) -> Option<OpId> {
        match self {
            Witness::Ack(op) | Witness::Read(op) => Some(op.id),
            Witness::Deliver(_) => None,
        }
    }
}

/// Observations of values the final log does not hold — below its log start (dropped by
/// retention) or acknowledged at an offset — judged against each other: the final log cannot
/// judge them, but one value at two offsets, or two values at one offset, are wrong anywhere.
#[derive(Default)]
struct Unjudged<'h> {
    /// Offset → the first value seen there, and by whom.
    at: Lookup<Offset, (&'h str, Witness<'h>)>,
    /// Value → the first offset it was seen at, and by whom.
    of: Lookup<&'h str, (Offset, Witness<'h>)>,
}

impl<'h> Unjudged<'h> {
    /// Takes `value` seen at `offset` by `witness`; returns the other offset the value was seen
    /// at, and the other value seen at this offset, with their witnesses.
    fn observe(&mut self, offset: Offset, value: &'h str, witness: Witness<'h>) -> Conflicts<'h> {
        let elsewhere = *self.of.entry(value).or_insert((offset, witness));
        let other = *self.at.entry(offset).or_insert((value, witness));
        Conflicts {
            elsewhere: (elsewhere.0 != offset).then_some(elsewhere),
            other: (other.0 != value).then_some(other),
        }
    }
}

/// What an unjudged observation contradicts: the value seen at another offset, another value
/// seen at this offset (each with its witness).
struct Conflicts<'h> {
    elsewhere: Option<(Offset, Witness<'h>)>,
    other: Option<(&'h str, Witness<'h>)>,
}

struct Analysis<'h> {
    history: &'h History,
    report: Report,
    sink: Sink,
    /// Value → the (first) append of it.
    writers: Lookup<&'h str, &'h Op>,
    /// (key, value) → where a phantom value was seen.
    phantoms: BTreeMap<(&'h str, &'h str), Sightings>,
    /// value → where a failed append's value was seen.
    failed_seen: BTreeMap<&'h str, Sightings>,
    /// The current key's observations the final log cannot judge.
    unjudged: Unjudged<'h>,
}

fn append_parts(op: &Op) -> Option<(&str, &Outcome<Option<Offset>>)> {
    match &op.action {
        Action::Append { value, outcome } => Some((value.as_str(), outcome)),
        Action::Read { .. } => None,
    }
}

impl<'h> Analysis<'h> {
    fn new(history: &'h History) -> Analysis<'h> {
        Analysis {
            history,
            report: Report::default(),
            sink: Sink::default(),
            writers: Lookup::default(),
            phantoms: BTreeMap::new(),
            failed_seen: BTreeMap::new(),
            unjudged: Unjudged::default(),
        }
    }

    fn run(mut self) -> Report {
        let h = self.history;
        // Index the appends by value (precondition: each value once).
        let mut twice: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
        for op in &h.ops {
            if let Some((value, _)) = append_parts(op) {
                match self.writers.get(value) {
                    None => {
                        self.writers.insert(value, op);
                    }
                    Some(first) => twice.entry(value).or_insert_with(|| vec![first]).push(op),
                }
            }
        }
        for (value, ops) in twice {
            let list: Vec<String> = ops.iter().map(|o| format!("{} by {} on {}", o.id, o.process, o.key)).collect();
            self.sink.push(Violation {
                rule: Rule::UniqueValues,
                key: ops[0].key.clone(),
                value: Some(value.to_string()),
                offsets: Vec::new(),
                ops: ops.iter().map(|o| o.id).collect(),
                detail: format!(
                    "appended {} times ({}): the checker needs each value appended once; record a client's retry as \
                     one operation",
                    ops.len(),
                    list.join(", ")
                ),
            });
        }

        // Group by key, and subscriber events by (subscriber, key) in time order.
        let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
        for op in &h.ops {
            by_key.entry(op.key.as_str()).or_default().push(op);
        }
        let mut subs: BTreeMap<(&str, &str), Vec<&SubscriberEvent>> = BTreeMap::new();
        for e in &h.subscriptions {
            subs.entry((e.key.as_str(), e.subscriber.as_str())).or_default().push(e);
        }
        for events in subs.values_mut() {
            events.sort_by_key(|e| e.at);
        }
        let mut keys: BTreeSet<&str> = by_key.keys().copied().collect();
        keys.extend(subs.keys().map(|(k, _)| *k));
        keys.extend(h.finals.keys().map(String::as_str));
        self.report.keys = keys.len();

        for key in keys {
            let finals = h.finals.get(key).map(|log| self.final_view(key, log));
            if finals.is_none() {
                self.sink.push(Violation {
                    rule: Rule::FinalRead,
                    key: key.to_string(),
                    value: None,
                    offsets: Vec::new(),
                    ops: Vec::new(),
                    detail: "no final read of this key: rules 1-4 and 7 cannot judge it".to_string(),
                });
            }
            let ops = by_key.get(key).map(Vec::as_slice).unwrap_or_default();
            self.unjudged = Unjudged::default();
            self.appends(key, ops, finals.as_ref());
            self.reads(key, ops, finals.as_ref());
            if let Some(f) = &finals {
                self.real_time(key, ops, f);
            }
            for (&(_, subscriber), events) in subs.range((key, "")..).take_while(|((k, _), _)| *k == key) {
                self.subscriber(key, subscriber, events, finals.as_ref());
            }
        }

        for ((key, value), seen) in std::mem::take(&mut self.phantoms) {
            let why = phantom(key, self.writers.get(value).map(|op| op.key.as_str())).unwrap_or_default();
            self.sink.push(Violation {
                rule: Rule::PhantomValue,
                key: key.to_string(),
                value: Some(value.to_string()),
                offsets: seen.offsets.into_iter().collect(),
                ops: seen.ops,
                detail: format!("seen by {}, but {why}", seen.by.join(", ")),
            });
        }
        for (value, seen) in std::mem::take(&mut self.failed_seen) {
            let writer = self.writers.get(value).copied().expect("a failed append's value is indexed");
            self.sink.push(Violation {
                rule: Rule::FailedAppeared,
                key: writer.key.clone(),
                value: Some(value.to_string()),
                offsets: seen.offsets.into_iter().collect(),
                ops: std::iter::once(writer.id).chain(seen.ops).collect(),
                detail: format!(
                    "{} by {} definitely failed ({}), yet it was seen by {}",
                    writer.id,
                    writer.process,
                    match append_parts(writer) {
                        Some((_, Outcome::Failed(why))) => why.as_str(),
                        _ => "",
                    },
                    seen.by.join(", ")
                ),
            });
        }

        let mut violations = self.sink.list;
        violations.sort_by(|a, b| (a.rule, &a.key, &a.offsets).cmp(&(b.rule, &b.key, &b.offsets)));
        self.report.violations = violations;
        self.report.suppressed = self.sink.suppressed;
        self.report
    }

    /// A value seen on `key` at `offset`: rules 5 and 6.
    fn sighting(&mut self, key: &'h str, record: &'h Record, by: impl FnOnce() -> String, op: Option<OpId>) {
        let value = record.value.as_str();
        let writer = self.writers.get(value).copied();
        if phantom(key, writer.map(|w| w.key.as_str())).is_some() {
            self.phantoms.entry((key, value)).or_default().add(record.offset, by, op);
        } else if writer.and_then(append_parts).is_some_and(|(_, outcome)| outcome.is_failed()) {
            self.failed_seen.entry(value).or_default().add(record.offset, by, op);
        }
    }

    fn final_view(&mut self, key: &'h str, log: &'h FinalLog) -> FinalView<'h> {
        let mut sorted: Vec<&Record> = log.records.iter().collect();
        sorted.sort_by_key(|r| r.offset);
        let mut view =
            FinalView { log_start: log.log_start, at: Lookup::default(), first: Lookup::default(), sorted: Vec::new() };
        let mut dups: BTreeMap<&str, Vec<Offset>> = BTreeMap::new();
        for r in sorted {
            if r.offset < log.log_start {
                self.sink.push(Violation {
                    rule: Rule::FinalRead,
                    key: key.to_string(),
                    value: Some(r.value.clone()),
                    offsets: vec![r.offset, log.log_start],
                    ops: Vec::new(),
                    detail: "the final read holds a record below its own log start".to_string(),
                });
                continue;
            }
            if let Some(other) = view.at.get(&r.offset) {
                if *other != r.value {
                    self.sink.push(Violation {
                        rule: Rule::FinalRead,
                        key: key.to_string(),
                        value: Some(r.value.clone()),
                        offsets: vec![r.offset],
                        ops: Vec::new(),
                        detail: format!("the final read holds two values at one offset: {other} and {}", r.value),
                    });
                }
                continue;
            }
            view.at.insert(r.offset, r.value.as_str());
            view.sorted.push(r);
            self.report.final_records += 1;
            match view.first.get(r.value.as_str()) {
                None => {
                    view.first.insert(r.value.as_str(), r.offset);
                }
                Some(&first) => dups.entry(r.value.as_str()).or_insert_with(|| vec![first]).push(r.offset),
            }
            self.sighting(key, r, || "the final log".to_string(), None);
        }
        for (value, offsets) in dups {
            let ops = self.writers.get(value).map(|w| vec![w.id]).unwrap_or_default();
            self.sink.push(Violation {
                rule: Rule::ValueAtTwoOffsets,
                key: key.to_string(),
                value: Some(value.to_string()),
                detail: format!("the final log holds it {} times", offsets.len()),
                offsets,
                ops,
            });
        }
        view
    }

    /// Rules 1 and 2 (acknowledged offsets), and the unknown counts.
    fn appends(&mut self, key: &str, ops: &[&'h Op], finals: Option<&FinalView<'h>>) {
        for &op in ops {
            let Some((value, outcome)) = append_parts(op) else { continue };
            self.report.appends.add(outcome);
            let Some(f) = finals else { continue };
            let found = f.offset_of(value);
            if let (Outcome::Ok(Some(acked)), None) = (outcome, found) {
                // Unjudged by the final log; reads and deliveries below its start are judged
                // against it (values are unique, so acknowledgements never conflict).
                self.unjudged.observe(*acked, value, Witness::Ack(op));
            }
            match (outcome, found) {
                (Outcome::Ok(Some(acked)), Some(at)) if *acked != at => self.sink.push(Violation {
                    rule: Rule::ValueAtTwoOffsets,
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    offsets: vec![*acked, at],
                    ops: vec![op.id],
                    detail: format!(
                        "{} by {} was acknowledged at offset {acked}, but the final log holds it at {at} ({})",
                        op.id,
                        op.process,
                        f.describe(*acked)
                    ),
                }),
                (Outcome::Ok(_), Some(_)) => {}
                (Outcome::Ok(Some(acked)), None) if *acked < f.log_start => self.report.below_log_start += 1,
                (Outcome::Ok(None), None) if f.log_start > 0 => self.report.unverifiable += 1,
                (Outcome::Ok(acked), None) => self.sink.push(Violation {
                    rule: Rule::AcknowledgedLost,
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    offsets: acked.iter().copied().collect(),
                    ops: vec![op.id],
                    detail: format!(
                        "{} by {} was acknowledged at {:?}{}, but the final log does not hold it{}",
                        op.id,
                        op.process,
                        op.end,
                        acked.map(|o| format!(" with offset {o}")).unwrap_or_default(),
                        acked.map(|o| format!(" ({})", f.describe(o))).unwrap_or_default()
                    ),
                }),
                (Outcome::Unknown(_), Some(_)) => self.report.unknown_in_log += 1,
                (Outcome::Unknown(_), None) => self.report.unknown_absent += 1,
                (Outcome::Failed(_), _) => {}
            }
        }
    }

    /// Rule 3, and rules 5 and 6 for what reads hold.
    fn reads(&mut self, key: &'h str, ops: &[&'h Op], finals: Option<&FinalView<'h>>) {
        for &op in ops {
            let Action::Read { outcome } = &op.action else { continue };
            self.report.reads.add(outcome);
            let Outcome::Ok(records) = outcome else { continue };
            self.report.records_read += records.len() as u64;
            let mut wrong: Vec<(Offset, &str, String)> = Vec::new();
            for r in records {
                self.sighting(key, r, || format!("{} (read by {})", op.id, op.process), Some(op.id));
                let Some(f) = finals else { continue };
                if r.offset < f.log_start {
                    match self.below_log_start(key, r, Witness::Read(op), f) {
                        Some(why) => wrong.push((r.offset, r.value.as_str(), why)),
                        None => self.report.below_log_start += 1,
                    }
                } else if f.at.get(&r.offset).copied() != Some(r.value.as_str()) {
                    wrong.push((r.offset, r.value.as_str(), f.describe(r.offset)));
                }
            }
            if let Some((_, first, _)) = wrong.first() {
                let shown: Vec<String> =
                    wrong.iter().take(5).map(|(o, v, f)| format!("at {o} it saw {v}, {f}")).collect();
                self.sink.push(Violation {
                    rule: Rule::ReadDisagrees,
                    key: key.to_string(),
                    value: Some(first.to_string()),
                    offsets: wrong.iter().map(|(o, _, _)| *o).collect(),
                    ops: vec![op.id],
                    detail: format!(
                        "{} by {} disagrees with the final log at {} offset(s): {}{}",
                        op.id,
                        op.process,
                        wrong.len(),
                        shown.join("; "),
                        if wrong.len() > 5 { "; …" } else { "" }
                    ),
                });
            }
        }
    }

    /// A record read or delivered below the final log's start, which cannot say what was there:
    /// judged against where the final log holds its value (rules 3 and 7: the returned words)
    /// and against the other observations the final log cannot judge (rule 2 for a value at two
    /// offsets, pushed here; rules 3 and 7 for two values at one offset, returned). `None`: it
    /// contradicts nothing (counted as below the log start).
    fn below_log_start(&mut self, key: &str, r: &'h Record, witness: Witness<'h>, f: &FinalView<'h>) -> Option<String> {
        let value = r.value.as_str();
        if let Some(at) = f.offset_of(value) {
            return Some(format!("below the log start {}, but the final log holds {value} at {at}", f.log_start));
        }
        let conflicts = self.unjudged.observe(r.offset, value, witness);
        if let Some((at, first)) = conflicts.elsewhere {
            let mut seen = [(at, first), (r.offset, witness)];
            seen.sort_by_key(|(offset, _)| *offset);
            let shown: Vec<String> = seen.iter().map(|(o, w)| format!("{} at {o}", w.describe(value))).collect();
            self.sink.push(Violation {
                rule: Rule::ValueAtTwoOffsets,
                key: key.to_string(),
                value: Some(value.to_string()),
                offsets: seen.iter().map(|(o, _)| *o).collect(),
                ops: seen.iter().filter_map(|(_, w)| w.op()).collect(),
                detail: format!(
                    "seen at two offsets, which the final log does not hold (below the log start {}): {}",
                    f.log_start,
                    shown.join(", ")
                ),
            });
        }
        conflicts
            .other
            .map(|(other, first)| format!("below the log start {}, where {}", f.log_start, first.describe(other)))
    }

    /// Rule 4: sweep appends by start time, holding the acknowledged append that ended before
    /// with the highest offset. An unknown append found in the final log takes part as the later
    /// one only (its end is unknown, so nothing is known to follow it).
    fn real_time(&mut self, key: &str, ops: &[&'h Op], f: &FinalView<'h>) {
        struct Placed<'o> {
            op: &'o Op,
            value: &'o str,
            offset: Offset,
        }
        let mut acked: Vec<Placed<'h>> = Vec::new();
        let mut later: Vec<Placed<'h>> = Vec::new();
        for &op in ops {
            let Some((value, outcome)) = append_parts(op) else { continue };
            let offset = match (outcome, f.offset_of(value)) {
                (Outcome::Failed(_), _) | (Outcome::Unknown(_), None) | (Outcome::Ok(None), None) => continue,
                (_, Some(at)) => at,
                (Outcome::Ok(Some(acked)), None) => *acked,
            };
            if outcome.is_ok() {
                acked.push(Placed { op, value, offset });
            }
            later.push(Placed { op, value, offset });
        }
        acked.sort_by_key(|p| p.op.end);
        later.sort_by_key(|p| p.op.start);
        let mut next = 0;
        let mut highest: Option<&Placed<'h>> = None;
        for b in &later {
            while next < acked.len() && acked[next].op.end < b.op.start {
                if highest.is_none_or(|h| acked[next].offset > h.offset) {
                    highest = Some(&acked[next]);
                }
                next += 1;
            }
            if let Some(a) = highest
                && a.offset > b.offset
            {
                self.sink.push(Violation {
                    rule: Rule::RealTimeOrder,
                    key: key.to_string(),
                    value: Some(b.value.to_string()),
                    offsets: vec![a.offset, b.offset],
                    ops: vec![a.op.id, b.op.id],
                    detail: format!(
                        "{} ({} by {}) was acknowledged at {:?}, before {} ({} by {}, {}) was sent at {:?}, yet {} sits \
                         at offset {} and {} at offset {}",
                        a.op.id,
                        a.value,
                        a.op.process,
                        a.op.end,
                        b.op.id,
                        b.value,
                        b.op.process,
                        append_parts(b.op).map_or("", |(_, o)| o.word()),
                        b.op.start,
                        a.value,
                        a.offset,
                        b.value,
                        b.offset
                    ),
                });
            }
        }
    }

    /// Rule 7 for one subscriber on one key, rules 5 and 6 for what it got, and its gaps.
    fn subscriber(
        &mut self,
        key: &'h str,
        subscriber: &'h str,
        events: &[&'h SubscriberEvent],
        finals: Option<&FinalView<'h>>,
    ) {
        let mut cursor = Cursor::default();
        let mut subscribes: Vec<usize> = Vec::new();
        let mut start: Option<Offset> = None;
        let mut delivered: BTreeMap<Offset, usize> = BTreeMap::new();
        let mut wrong: Vec<(Offset, &str, String)> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            match &e.action {
                SubscriberAction::Subscribe { from } => {
                    if subscribes.is_empty() {
                        start = *from;
                    }
                    subscribes.push(i);
                }
                SubscriberAction::Deliver(r) => {
                    self.report.deliveries += 1;
                    start.get_or_insert(r.offset);
                    delivered.entry(r.offset).or_insert(i);
                    self.sighting(key, r, || format!("subscriber {subscriber}"), None);
                    if let Some(max) = cursor.deliver(r.offset) {
                        let reconnected = subscribes
                            .last()
                            .is_some_and(|&s| delivered.get(&max).is_some_and(|&at| s > at) && subscribes.len() > 1);
                        self.sink.push(Violation {
                            rule: Rule::SubscriberOrder,
                            key: key.to_string(),
                            value: Some(r.value.clone()),
                            offsets: vec![max, r.offset],
                            ops: Vec::new(),
                            detail: format!(
                                "subscriber {subscriber} got offset {} at {:?} after it had got offset {max}{}",
                                r.offset,
                                e.at,
                                if reconnected { " (it reconnected in between)" } else { "" }
                            ),
                        });
                    }
                    if let Some(f) = finals {
                        if r.offset < f.log_start {
                            match self.below_log_start(key, r, Witness::Deliver(subscriber), f) {
                                Some(why) => wrong.push((r.offset, r.value.as_str(), why)),
                                None => self.report.below_log_start += 1,
                            }
                        } else if f.at.get(&r.offset).copied() != Some(r.value.as_str()) {
                            wrong.push((r.offset, r.value.as_str(), f.describe(r.offset)));
                        }
                    }
                }
            }
        }
        if let Some((_, first, _)) = wrong.first() {
            let shown: Vec<String> = wrong.iter().take(5).map(|(o, v, f)| format!("at {o} it got {v}, {f}")).collect();
            self.sink.push(Violation {
                rule: Rule::SubscriberDisagrees,
                key: key.to_string(),
                value: Some(first.to_string()),
                offsets: wrong.iter().map(|(o, _, _)| *o).collect(),
                ops: Vec::new(),
                detail: format!(
                    "subscriber {subscriber} got {} record(s) the final log does not hold at the same offset: {}{}",
                    wrong.len(),
                    shown.join("; "),
                    if wrong.len() > 5 { "; …" } else { "" }
                ),
            });
        }
        // Without a final read there is nothing to miss; without a start (subscribed from where
        // the server put it, and nothing delivered) nothing was expected.
        let (Some(f), Some(start)) = (finals, start) else { return };
        let reconnects = subscribes.get(1..).unwrap_or_default();
        let reconnect_between = |after: Option<usize>, before: Option<usize>| {
            reconnects.iter().any(|&s| after.is_none_or(|a| s > a) && before.is_none_or(|b| s < b))
        };
        // An open gap: (first, last, records, the delivery before it); closed by the delivery
        // after it, or by the end of the log (its tail).
        let close = |(first, last, records, after): (Offset, Offset, u64, Option<usize>), before: Option<usize>| Gap {
            subscriber: subscriber.to_string(),
            key: key.to_string(),
            first,
            last,
            records,
            across_reconnect: reconnect_between(after, before),
            tail: before.is_none(),
        };
        let mut open: Option<(Offset, Offset, u64, Option<usize>)> = None;
        let mut last_delivered: Option<usize> = None;
        let mut gaps = Vec::new();
        for r in f.sorted.iter().filter(|r| r.offset >= start) {
            if let Some(&at) = delivered.get(&r.offset) {
                gaps.extend(open.take().map(|gap| close(gap, Some(at))));
                last_delivered = Some(at);
            } else {
                let gap = open.get_or_insert((r.offset, r.offset, 0, last_delivered));
                gap.1 = r.offset;
                gap.2 += 1;
            }
        }
        gaps.extend(open.map(|gap| close(gap, None)));
        self.report.gaps.extend(gaps);
    }
}

// ---- history events ---------------------------------------------------------------------------

/// Kind of the event recording that an operation was sent.
pub const KIND_INVOKE: &str = "list.invoke";
/// Kind of the event recording that an operation was acknowledged.
pub const KIND_OK: &str = "list.ok";
/// Kind of the event recording that an operation definitely failed.
pub const KIND_FAIL: &str = "list.fail";
/// Kind of the event recording that an operation's outcome is unknown.
pub const KIND_INFO: &str = "list.info";
/// Kind of the event recording that a subscriber (re)subscribed.
pub const KIND_SUBSCRIBE: &str = "list.subscribe";
/// Kind of the event recording that a subscriber was delivered a record.
pub const KIND_DELIVER: &str = "list.deliver";
/// Kind of the event recording a key's final read.
pub const KIND_FINAL: &str = "list.final";

/// Whether a byte is kept as is in an event field (everything else is `%XX`).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/' | b'@' | b'+' | b'#')
}

/// Percent-encodes a field value so that it holds no space, `=`, `,` or `:`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reverses [`escape`]; `None` when `s` is not a valid escaped field.
pub fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn encode_records(records: &[Record]) -> String {
    let parts: Vec<String> = records.iter().map(|r| format!("{}:{}", r.offset, escape(&r.value))).collect();
    parts.join(",")
}

fn decode_records(s: &str) -> Option<Vec<Record>> {
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',')
        .map(|part| {
            let (offset, value) = part.split_once(':')?;
            Some(Record::new(offset.parse().ok()?, unescape(value)?))
        })
        .collect()
}

fn encode_offset(offset: Option<Offset>) -> String {
    offset.map_or_else(|| "unknown".to_string(), |o| o.to_string())
}

fn decode_offset(s: &str) -> Option<Option<Offset>> {
    if s == "unknown" { Some(None) } else { s.parse().ok().map(Some) }
}

/// An event's `name=value` fields.
struct Fields<'e>(Vec<(&'e str, &'e str)>);

impl<'e> Fields<'e> {
    fn parse(detail: &'e str) -> Option<Fields<'e>> {
        detail.split(' ').filter(|t| !t.is_empty()).map(|t| t.split_once('=')).collect::<Option<Vec<_>>>().map(Fields)
    }

    fn raw(&self, name: &str) -> Option<&'e str> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    fn text(&self, name: &str) -> Option<String> {
        unescape(self.raw(name)?)
    }
}

/// The history event of an operation being sent: (kind, detail); the identity is the op's.
fn invoke_detail(process: &str, key: &str, value: Option<&str>) -> String {
    match value {
        Some(v) => format!("f=append process={} key={} value={}", escape(process), escape(key), escape(v)),
        None => format!("f=read process={} key={}", escape(process), escape(key)),
    }
}

/// An operation sent and not yet ended.
#[derive(Clone, Debug)]
struct Open {
    id: OpId,
    process: String,
    key: String,
    start: Duration,
    /// `Some`: an append of this value; `None`: a read.
    value: Option<String>,
}

impl Open {
    fn close(self, end: Duration, action: Action) -> Op {
        Op { id: self.id, process: self.process, key: self.key, start: self.start, end, action }
    }

    /// Ends it failed or unknown: outcomes that carry no result.
    fn close_without_result(self, end: Duration, failed: bool, why: String) -> Op {
        fn outcome<T>(failed: bool, why: String) -> Outcome<T> {
            if failed { Outcome::Failed(why) } else { Outcome::Unknown(why) }
        }
        let action = match &self.value {
            Some(value) => Action::Append { value: value.clone(), outcome: outcome(failed, why) },
            None => Action::Read { outcome: outcome(failed, why) },
        };
        self.close(end, action)
    }
}

/// What one event added that the per-event rules look at.
enum Fed {
    Nothing,
    /// An append of `value` to `key` was sent.
    Appending {
        key: String,
        value: String,
    },
    /// A read was acknowledged (it is in `Feed::done`).
    Read(OpId),
    /// A final read was recorded for this key.
    Final(String),
    /// A delivery.
    Delivered {
        subscriber: String,
        key: String,
        record: Record,
    },
    /// A (re)subscribe.
    Subscribed,
}

/// Builds a [`History`] from history events (the [`ListAppend`] kinds).
#[derive(Default)]
struct Feed {
    history: History,
    open: BTreeMap<String, Open>,
    done: BTreeMap<OpId, Op>,
    next: u64,
}

impl Feed {
    /// Operations open at once, at most.
    const OPEN_MAX: usize = 1_000_000;

    fn apply(&mut self, entry: &Entry) -> Result<Fed, Box<Violation>> {
        let kind = entry.kind.as_str();
        if !kind.starts_with("list.") {
            return Ok(Fed::Nothing);
        }
        let bad = |why: &str| {
            Box::new(Violation {
                rule: Rule::Event,
                key: String::new(),
                value: None,
                offsets: Vec::new(),
                ops: Vec::new(),
                detail: format!("{why}: event {entry}"),
            })
        };
        let fields = Fields::parse(&entry.detail).ok_or_else(|| bad("fields are not name=value"))?;
        let at = entry.at();
        match kind {
            KIND_INVOKE => {
                let process = fields.text("process").ok_or_else(|| bad("no process"))?;
                let key = fields.text("key").ok_or_else(|| bad("no key"))?;
                let value = match fields.raw("f") {
                    Some("append") => Some(fields.text("value").ok_or_else(|| bad("an append without a value"))?),
                    Some("read") => None,
                    _ => return Err(bad("f is neither append nor read")),
                };
                if self.open.contains_key(&entry.identity) {
                    return Err(bad("an operation with this identity is already open"));
                }
                if self.open.len() >= Self::OPEN_MAX {
                    return Err(bad("more than Feed::OPEN_MAX operations open at once"));
                }
                self.next += 1;
                let open = Open { id: OpId(self.next), process, key: key.clone(), start: at, value: value.clone() };
                self.open.insert(entry.identity.clone(), open);
                Ok(value.map_or(Fed::Nothing, |value| Fed::Appending { key, value }))
            }
            KIND_OK | KIND_FAIL | KIND_INFO => {
                let open =
                    self.open.remove(&entry.identity).ok_or_else(|| bad("no open operation has this identity"))?;
                let why = fields.text("reason").unwrap_or_default();
                let mut seen = Fed::Nothing;
                let op = match (kind, &open.value) {
                    (KIND_OK, Some(value)) => {
                        let offset = fields.raw("offset").and_then(decode_offset).ok_or_else(|| bad("no offset"))?;
                        let action = Action::Append { value: value.clone(), outcome: Outcome::Ok(offset) };
                        open.close(at, action)
                    }
                    (KIND_OK, None) => {
                        let records =
                            fields.raw("records").and_then(decode_records).ok_or_else(|| bad("no records"))?;
                        seen = Fed::Read(open.id);
                        open.close(at, Action::Read { outcome: Outcome::Ok(records) })
                    }
                    _ => open.close_without_result(at, kind == KIND_FAIL, why),
                };
                self.done.insert(op.id, op);
                Ok(seen)
            }
            KIND_SUBSCRIBE => {
                let key = fields.text("key").ok_or_else(|| bad("no key"))?;
                let from = fields.raw("from").and_then(decode_offset).ok_or_else(|| bad("no from"))?;
                self.history.subscribe(&entry.identity, &key, from, at);
                Ok(Fed::Subscribed)
            }
            KIND_DELIVER => {
                let key = fields.text("key").ok_or_else(|| bad("no key"))?;
                let offset = fields.raw("offset").and_then(|o| o.parse().ok()).ok_or_else(|| bad("no offset"))?;
                let value = fields.text("value").ok_or_else(|| bad("no value"))?;
                self.history.deliver(&entry.identity, &key, offset, &value, at);
                Ok(Fed::Delivered { subscriber: entry.identity.clone(), key, record: Record::new(offset, value) })
            }
            KIND_FINAL => {
                let log_start =
                    fields.raw("log_start").and_then(|o| o.parse().ok()).ok_or_else(|| bad("no log_start"))?;
                let records = fields.raw("records").and_then(decode_records).ok_or_else(|| bad("no records"))?;
                self.history.set_final(&entry.identity, FinalLog { log_start, records });
                Ok(Fed::Final(entry.identity.clone()))
            }
            _ => Err(bad("unknown list.* kind")),
        }
    }

    /// The history so far; open operations become unknown, ended at `now`.
    fn history(self, now: Duration) -> History {
        let mut h = self.history;
        let mut ops: Vec<Op> = self.done.into_values().collect();
        ops.extend(self.open.into_values().map(|o| o.close_without_result(now, false, "never completed".into())));
        ops.sort_by_key(|op| op.id);
        h.ops = ops;
        h
    }
}

// ---- the check --------------------------------------------------------------------------------

/// The list-append checker as a [`Check`] (oracle `list-append`), fed by history events.
///
/// Per event it judges what needs no final read — rule 5 (a value seen that no append sent so
/// far wrote, or one appended to another key) and rule 7's order — so a violation stops the run
/// where it happened; when the run's body returns it judges the whole history with [`analyze`]
/// and records the summary (`list-append.report`) and each gap (`list-append.gap`, at most
/// [`ListAppend::GAPS_RECORDED_MAX`]).
///
/// The events it reads (a [`Recorder`] from [`Recorder::of`] records them; any code may). The
/// detail is space-separated `name=value` fields whose values are [`escape`]d; records are
/// `offset:value` joined by `,`; an unknown offset is `unknown`:
///
/// | kind | identity | detail |
/// |---|---|---|
/// | `list.invoke` | the operation (unique among open ones) | `f=append process=P key=K value=V` or `f=read process=P key=K` |
/// | `list.ok` | the operation | an append: `offset=N` (or `unknown`); a read: `records=3:a,4:b` |
/// | `list.fail` | the operation | `reason=R` (definitely failed) |
/// | `list.info` | the operation | `reason=R` (unknown outcome) |
/// | `list.subscribe` | the subscriber | `key=K from=N` (or `unknown`) |
/// | `list.deliver` | the subscriber | `key=K offset=N value=V` |
/// | `list.final` | the key | `log_start=N records=…` |
///
/// Times are the events' times: an operation starts at its `list.invoke` and ends at its
/// completion; one never completed is unknown. Record `list.invoke` before sending, so that
/// nothing can observe a value before its append is known. Every key needs a `list.final`
/// before the body returns ([`Rule::FinalRead`]). Another `list.*` kind, or one that does not
/// parse, is a [`Rule::Event`] violation.
#[derive(Default)]
pub struct ListAppend {
    feed: Feed,
    /// Value → the key it was appended to, for rule 5 per event.
    writers: Lookup<String, String>,
    cursors: BTreeMap<(String, String), Cursor>,
}

impl ListAppend {
    /// Gaps recorded in the history at the end of a run, at most.
    pub const GAPS_RECORDED_MAX: usize = 100;

    /// A checker with nothing seen yet.
    pub fn new() -> ListAppend {
        ListAppend::default()
    }

    fn seen(writers: &Lookup<String, String>, key: &str, records: &[Record], by: impl FnOnce() -> String) -> Verdict {
        for r in records {
            if let Some(why) = phantom(key, writers.get(&r.value).map(String::as_str)) {
                let v = Violation {
                    rule: Rule::PhantomValue,
                    key: key.to_string(),
                    value: Some(r.value.clone()),
                    offsets: vec![r.offset],
                    ops: Vec::new(),
                    detail: format!("seen by {}, but {why} (so far)", by()),
                };
                return Verdict::Violation(v.to_string());
            }
        }
        Verdict::Pass
    }
}

impl Check for ListAppend {
    fn name(&self) -> &str {
        "list-append"
    }

    fn on_event(&mut self, event: &Entry) -> Verdict {
        match self.feed.apply(event) {
            Err(v) => Verdict::Violation(v.to_string()),
            Ok(Fed::Nothing | Fed::Subscribed) => Verdict::Pass,
            Ok(Fed::Appending { key, value }) => {
                self.writers.entry(value).or_insert(key);
                Verdict::Pass
            }
            Ok(Fed::Read(id)) => match self.feed.done.get(&id) {
                Some(op @ Op { action: Action::Read { outcome: Outcome::Ok(records) }, .. }) => {
                    Self::seen(&self.writers, &op.key, records, || format!("{id} (read by {})", op.process))
                }
                _ => Verdict::Pass,
            },
            Ok(Fed::Final(key)) => match self.feed.history.finals.get(&key) {
                Some(log) => Self::seen(&self.writers, &key, &log.records, || "the final log".to_string()),
                None => Verdict::Pass,
            },
            Ok(Fed::Delivered { subscriber, key, record }) => {
                let by = || format!("subscriber {subscriber}");
                if let Verdict::Violation(v) = Self::seen(&self.writers, &key, std::slice::from_ref(&record), by) {
                    return Verdict::Violation(v);
                }
                let cursor = self.cursors.entry((subscriber.clone(), key.clone())).or_default();
                match cursor.deliver(record.offset) {
                    None => Verdict::Pass,
                    Some(max) => Verdict::Violation(
                        Violation {
                            rule: Rule::SubscriberOrder,
                            key,
                            value: Some(record.value),
                            offsets: vec![max, record.offset],
                            ops: Vec::new(),
                            detail: format!(
                                "subscriber {subscriber} got offset {} after it had got offset {max}",
                                record.offset
                            ),
                        }
                        .to_string(),
                    ),
                }
            }
        }
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        // Called once, when the body returned: the events seen so far are the whole history.
        let report = analyze(&std::mem::take(&mut self.feed).history(ctx.elapsed()));
        ctx.record("list-append.report", "list-append", report.summary());
        for gap in report.gaps.iter().take(Self::GAPS_RECORDED_MAX) {
            ctx.record("list-append.gap", &gap.subscriber, gap.to_string());
        }
        if report.is_valid() {
            return Verdict::Pass;
        }
        const SHOWN: usize = 10;
        let shown: Vec<String> = report.violations.iter().take(SHOWN).map(Violation::to_string).collect();
        let more = report.violations.len().saturating_sub(SHOWN) as u64 + report.suppressed;
        Verdict::Violation(format!(
            "{}{}",
            shown.join("; "),
            if more > 0 { format!(" (and {more} more)") } else { String::new() }
        ))
    }
}

// ---- the recorder -----------------------------------------------------------------------------

/// Where a [`Recorder`]'s times come from.
#[derive(Clone, Debug)]
enum Clock {
    /// The run's fake time; operations are also recorded as history events.
    Sim(Ctx),
    /// Wall time since the recorder was made.
    Wall(std::time::Instant),
}

/// A recorder's state, shared by its clones (one per run in a simulation).
#[derive(Default, Debug)]
struct RecorderLog(Mutex<RecorderState>);

#[derive(Default, Debug)]
struct RecorderState {
    next: u64,
    open: BTreeMap<u64, Open>,
    done: BTreeMap<u64, Op>,
    history: History,
}

/// Records operations as clients run them, into a [`History`] (and, in a simulation, into the
/// run's history as the events [`ListAppend`] reads). Cheap to clone; clones share the record.
///
/// ```
/// use sim::check::list_append::{Recorder, Record};
///
/// let recorder = Recorder::wall();
/// let append = recorder.append("producer-1", "orders-0", "v1");
/// // … send it …
/// append.ok(Some(0));
/// let read = recorder.read("consumer-1", "orders-0");
/// read.ok(vec![Record::new(0, "v1")]);
/// recorder.final_log("orders-0", 0, vec![Record::new(0, "v1")]);
/// assert!(recorder.check().is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct Recorder {
    log: Arc<RecorderLog>,
    clock: Clock,
}

/// An operation sent and not yet ended: end it with [`Pending::ok`], [`Pending::failed`] or
/// [`Pending::unknown`]; dropped without an outcome, it is recorded unknown.
#[must_use = "end the operation with ok, failed or unknown"]
#[derive(Debug)]
pub struct Pending<T: Completion> {
    recorder: Recorder,
    id: u64,
    done: bool,
    kind: PhantomData<fn(T)>,
}

/// A pending append: [`Pending::ok`] takes the offset it was given, if known.
pub type PendingAppend = Pending<Option<Offset>>;
/// A pending read: [`Pending::ok`] takes the records it saw.
pub type PendingRead = Pending<Vec<Record>>;

mod sealed {
    pub trait Sealed {}
    impl Sealed for Option<super::Offset> {}
    impl Sealed for Vec<super::Record> {}
}

/// What an acknowledged operation returns: an append's offset or a read's records.
pub trait Completion: sealed::Sealed + Sized {
    #[doc(hidden)]
    fn action(outcome: Outcome<Self>, value: Option<String>) -> Action;
    #[doc(hidden)]
    fn ok_detail(&self) -> String;
}

impl Completion for Option<Offset> {
    fn action(outcome: Outcome<Self>, value: Option<String>) -> Action {
        Action::Append { value: value.expect("a pending append is made with its value"), outcome }
    }

    fn ok_detail(&self) -> String {
        format!("offset={}", encode_offset(*self))
    }
}

impl Completion for Vec<Record> {
    fn action(outcome: Outcome<Self>, _value: Option<String>) -> Action {
        Action::Read { outcome }
    }

    fn ok_detail(&self) -> String {
        format!("records={}", encode_records(self))
    }
}

impl Recorder {
    /// The run's recorder: one record and one id space per run, whoever asks. Its times are the
    /// run's fake time, and every operation is also recorded as the history events
    /// [`ListAppend`] reads.
    pub fn of(ctx: &Ctx) -> Recorder {
        Recorder { log: ctx.extension::<RecorderLog>(), clock: Clock::Sim(ctx.clone()) }
    }

    /// A recorder on wall time (since now), for clients outside a simulation (rdkafka's threads).
    pub fn wall() -> Recorder {
        Recorder { log: Arc::default(), clock: Clock::Wall(std::time::Instant::now()) }
    }

    fn now(&self) -> Duration {
        match &self.clock {
            Clock::Sim(ctx) => ctx.elapsed(),
            Clock::Wall(start) => start.elapsed(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RecorderState> {
        self.log.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an event in the run's history (in a simulation), never under the state's lock:
    /// checks run inside `ctx.record` and may use the recorder.
    fn event(&self, kind: &str, identity: &str, detail: impl FnOnce() -> String) {
        if let Clock::Sim(ctx) = &self.clock {
            ctx.record(kind, identity, detail());
        }
    }

    fn invoke<T: Completion>(&self, process: &str, key: &str, value: Option<&str>) -> Pending<T> {
        let start = self.now();
        let id = {
            let mut st = self.lock();
            assert!(
                st.open.len() + st.done.len() < History::OPS_MAX,
                "a list-append recorder holds at most History::OPS_MAX operations"
            );
            st.next += 1;
            let id = st.next;
            let open = Open {
                id: OpId(id),
                process: process.to_string(),
                key: key.to_string(),
                start,
                value: value.map(str::to_string),
            };
            st.open.insert(id, open);
            id
        };
        self.event(KIND_INVOKE, &OpId(id).to_string(), || invoke_detail(process, key, value));
        Pending { recorder: self.clone(), id, done: false, kind: PhantomData }
    }

    /// Records an append of `value` to `key` by `process`, sent now.
    pub fn append(&self, process: &str, key: &str, value: &str) -> PendingAppend {
        self.invoke(process, key, Some(value))
    }

    /// Records a read of `key` by `process`, sent now.
    pub fn read(&self, process: &str, key: &str) -> PendingRead {
        self.invoke(process, key, None)
    }

    fn complete<T: Completion>(&self, id: u64, outcome: Outcome<T>) {
        let end = self.now();
        let (kind, detail) = match &outcome {
            Outcome::Ok(result) => (KIND_OK, result.ok_detail()),
            Outcome::Failed(why) => (KIND_FAIL, format!("reason={}", escape(why))),
            Outcome::Unknown(why) => (KIND_INFO, format!("reason={}", escape(why))),
        };
        {
            let mut st = self.lock();
            let open = st.open.remove(&id).expect("a pending operation is open until it completes, once");
            let action = T::action(outcome, open.value.clone());
            st.done.insert(id, open.close(end, action));
        }
        self.event(kind, &OpId(id).to_string(), || detail);
    }

    /// Records that `subscriber` (re)subscribed to `key` from `from`, now.
    pub fn subscribe(&self, subscriber: &str, key: &str, from: Option<Offset>) {
        let at = self.now();
        self.lock().history.subscribe(subscriber, key, from, at);
        self.event(KIND_SUBSCRIBE, subscriber, || format!("key={} from={}", escape(key), encode_offset(from)));
    }

    /// Records that `subscriber` was delivered `value` at `offset` of `key`, now.
    pub fn deliver(&self, subscriber: &str, key: &str, offset: Offset, value: &str) {
        let at = self.now();
        self.lock().history.deliver(subscriber, key, offset, value, at);
        self.event(KIND_DELIVER, subscriber, || format!("key={} offset={offset} value={}", escape(key), escape(value)));
    }

    /// Records the final read of `key`: its log start and its records.
    pub fn final_log(&self, key: &str, log_start: Offset, records: Vec<Record>) {
        let detail = matches!(self.clock, Clock::Sim(_))
            .then(|| format!("log_start={log_start} records={}", encode_records(&records)));
        self.lock().history.set_final(key, FinalLog { log_start, records });
        if let Some(detail) = detail {
            self.event(KIND_FINAL, key, || detail);
        }
    }

    /// The history so far; operations still open are unknown, ended now.
    pub fn history(&self) -> History {
        let now = self.now();
        let st = self.lock();
        let mut h = st.history.clone();
        let mut ops: Vec<Op> = st.done.values().cloned().collect();
        ops.extend(
            st.open
                .values()
                .map(|o| o.clone().close_without_result(now, false, "still open when the history was taken".into())),
        );
        ops.sort_by_key(|op| op.id);
        h.ops = ops;
        h
    }

    /// Checks the history so far ([`check`]).
    ///
    /// # Errors
    /// The violations.
    pub fn check(&self) -> Result<Report, Vec<Violation>> {
        check(&self.history())
    }
}

impl<T: Completion> Pending<T> {
    /// The operation's id.
    pub fn id(&self) -> OpId {
        OpId(self.id)
    }

    fn end(mut self, outcome: Outcome<T>) {
        self.done = true;
        self.recorder.complete(self.id, outcome);
    }

    /// It was acknowledged, returning `result` (an append's offset if known; a read's records).
    pub fn ok(self, result: T) {
        self.end(Outcome::Ok(result));
    }

    /// It definitely failed (the server refused it before applying it).
    pub fn failed(self, reason: impl Into<String>) {
        self.end(Outcome::Failed(reason.into()));
    }

    /// Its outcome is unknown (a timeout, a lost response, `acks=0`).
    pub fn unknown(self, reason: impl Into<String>) {
        self.end(Outcome::Unknown(reason.into()));
    }

    /// Ends it with `outcome`.
    pub fn outcome(self, outcome: Outcome<T>) {
        self.end(outcome);
    }
}

impl<T: Completion> Drop for Pending<T> {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.recorder.complete::<T>(self.id, Outcome::Unknown("dropped without an outcome".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_fields_round_trip_and_hold_no_separator() {
        for s in ["plain-value_1", "a b=c,d:e%f", "ünïcödé", ""] {
            let e = escape(s);
            assert!(!e.contains([' ', '=', ',', ':']), "{e}");
            assert_eq!(unescape(&e).as_deref(), Some(s));
        }
        assert_eq!(unescape("%ZZ"), None);
        assert_eq!(unescape("%4"), None);
    }

    #[test]
    fn records_round_trip() {
        let records = vec![Record::new(3, "a,b"), Record::new(9, "c:d")];
        assert_eq!(decode_records(&encode_records(&records)), Some(records));
        assert_eq!(decode_records(""), Some(Vec::new()));
        assert_eq!(decode_records("x"), None);
    }

    #[test]
    fn a_cursor_reports_one_violation_per_episode_of_going_back() {
        let mut c = Cursor::default();
        assert_eq!(c.deliver(1), None);
        assert_eq!(c.deliver(2), None);
        assert_eq!(c.deliver(1), Some(2));
        assert_eq!(c.deliver(2), None, "the same episode");
        assert_eq!(c.deliver(3), None);
        assert_eq!(c.deliver(3), Some(3), "a new episode");
    }
}
