//! What the checker concludes: rules, violations, gaps, counts.

use std::fmt;

use super::model::{Offset, OpId};
use crate::outcome::OpOutcome;

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
    /// Precondition: every `list.*` history event parses (the [`ListAppend`](super::ListAppend) check).
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

    /// The rule's number in the list (1–7), `None` for a precondition.
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
    pub(super) fn add<T>(&mut self, outcome: &OpOutcome<T>) {
        match outcome {
            OpOutcome::Ok(_) => self.ok += 1,
            OpOutcome::Failed(_) => self.failed += 1,
            OpOutcome::Indeterminate(_) => self.unknown += 1,
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
