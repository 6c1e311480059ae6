//! What the models share: the oracles' names, the spec they judge by, violations, and the
//! [`Model`] trait.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use crate::models::event::{Event, TopicPartition, ranges};
use crate::models::facts::Facts;
use crate::models::settings::{ConsumerSettings, ProgressBound};

/// The most offsets one model walks for one partition at one commit or at the end (Q1, Q5). A
/// longer range — a committed offset far beyond any record the history or the log knows — is a
/// violation in itself, reported without walking it.
pub const OFFSETS_WALKED_MAX: i64 = 10_000_000;

/// Q1's oracle name.
pub const Q1: &str = "q1-no-loss-at-commit";
/// Q2's oracle name.
pub const Q2: &str = "q2-monotonic-commits";
/// Q3's oracle name.
pub const Q3: &str = "q3-no-duplicates";
/// Q4's oracle name.
pub const Q4: &str = "q4-commit-first";
/// Q5's oracle name.
pub const Q5: &str = "q5-loss-explained";
/// Q6's oracle name.
pub const Q6: &str = "q6-order-within-hold";
/// Q7's oracle name.
pub const Q7: &str = "q7-error-ends-consumer";
/// Q8's oracle name.
pub const Q8: &str = "q8-shutdown-drains";
/// Q9's oracle name.
pub const Q9: &str = "q9-progress-after-heal";
/// Q10's oracle name.
pub const Q10: &str = "q10-exactly-once";

/// The delivery semantics a group's consumers promise (Kafka's *Message Delivery Semantics*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    /// Process, then commit: no record is lost, a record may be processed more than once.
    AtLeastOnce,
    /// Commit, then process: no record is processed twice, a record may be lost (only for a
    /// stated [`Cause`]).
    AtMostOnce,
    /// Consume, transform, produce in one transaction with the input's offsets (KIP-98's
    /// `sendOffsetsToTransaction`): every input record below the committed offset has exactly
    /// one committed output (Q10).
    ExactlyOnce,
}

/// A cause of loss a test allows; each explains a lost record only with its evidence (Q5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// At-most-once: a member crashed between committing past a record and processing it.
    /// Evidence: the member's acknowledged commit past the record — or, when it died before the
    /// answer came, the coordinator's stored commit from it no later than the crash — then its
    /// [`What::Crash`](crate::models::What::Crash) (in a simulation, `node.crash` of the node named as the member).
    Crash,
    /// Retention deleted records before the group read them. Evidence: the record is below the
    /// partition's log start ([`Facts::partitions`]).
    Retention,
    /// `auto.offset.reset=latest` on a group without committed offsets: it starts at the end of
    /// the log. Evidence: the record is below the first offset the group began, processed or
    /// failed in that partition.
    ResetLatest,
    /// At-most-once: a record whose processing failed is lost (its commit went first). Evidence:
    /// its [`What::Error`](crate::models::What::Error).
    ProcessingErrors,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cause::Crash => "a crash between commit and processing (at-most-once)",
            Cause::Retention => "retention deleted it before the group read it",
            Cause::ResetLatest => "auto.offset.reset=latest: the group started after it",
            Cause::ProcessingErrors => "its processing failed (at-most-once)",
        })
    }
}

/// What a group's consumers promise, and what the test allows to go wrong.
#[derive(Clone, Debug)]
pub struct Spec {
    group: String,
    semantics: Semantics,
    causes: BTreeSet<Cause>,
    bound: ProgressBound,
    pipeline: Option<(String, String)>,
}

impl Spec {
    /// `group`'s consumers process, then commit. No cause of loss allowed; the progress bound
    /// from librdkafka's default settings.
    pub fn at_least_once(group: &str) -> Spec {
        Spec::new(group, Semantics::AtLeastOnce)
    }

    /// `group`'s consumers commit, then process.
    pub fn at_most_once(group: &str) -> Spec {
        Spec::new(group, Semantics::AtMostOnce)
    }

    /// `group` with `semantics`.
    pub fn new(group: &str, semantics: Semantics) -> Spec {
        Spec {
            group: group.to_string(),
            semantics,
            causes: BTreeSet::new(),
            bound: ConsumerSettings::default().progress_bound(),
            pipeline: None,
        }
    }

    /// `group`'s consumers read `input`, and write one record to `output` per input record in
    /// the transaction that commits the input's offset (Q10). Each output record names its
    /// input in a [`SOURCE_HEADER`](crate::models::SOURCE_HEADER) header
    /// ([`source_header`](crate::models::source_header)).
    pub fn exactly_once(group: &str, input: &str, output: &str) -> Spec {
        let mut spec = Spec::new(group, Semantics::ExactlyOnce);
        spec.pipeline = Some((input.to_string(), output.to_string()));
        spec
    }

    /// The input and output topics of an [`Spec::exactly_once`] group.
    pub fn pipeline(&self) -> Option<(&str, &str)> {
        self.pipeline.as_ref().map(|(i, o)| (i.as_str(), o.as_str()))
    }

    /// Allows a cause of loss (with its evidence; see [`Cause`]).
    pub fn allow(mut self, cause: Cause) -> Spec {
        self.causes.insert(cause);
        self
    }

    /// The consumers' settings: Q9's bound becomes [`ConsumerSettings::progress_bound`].
    pub fn settings(mut self, settings: &ConsumerSettings) -> Spec {
        self.bound = settings.progress_bound();
        self
    }

    /// Q9's bound, as given (for instance the settings' bound plus a named slack part).
    pub fn progress_bound(mut self, bound: ProgressBound) -> Spec {
        self.bound = bound;
        self
    }

    /// The group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The semantics.
    pub fn semantics(&self) -> Semantics {
        self.semantics
    }

    /// Whether a cause of loss is allowed.
    pub fn allows(&self, cause: Cause) -> bool {
        self.causes.contains(&cause)
    }

    /// Q9's bound.
    pub fn bound(&self) -> &ProgressBound {
        &self.bound
    }
}

/// A model's finding: the rule broken, where, and by whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The model's oracle name ([`Q1`] … [`Q10`]).
    pub model: &'static str,
    /// The group.
    pub group: String,
    /// The member, when one is to blame (its client id).
    pub member: Option<String>,
    /// The partition, when the rule is about one.
    pub partition: Option<TopicPartition>,
    /// The offsets concerned.
    pub offsets: Vec<i64>,
    /// What happened, with the events' positions and times.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(model: &'static str, group: &str, message: impl Into<String>) -> Violation {
        Violation {
            model,
            group: group.to_string(),
            member: None,
            partition: None,
            offsets: Vec::new(),
            message: message.into(),
        }
    }

    pub(crate) fn member(mut self, member: &str) -> Violation {
        self.member = Some(member.to_string());
        self
    }

    pub(crate) fn partition(mut self, tp: &TopicPartition) -> Violation {
        self.partition = Some(tp.clone());
        self
    }

    pub(crate) fn offsets(mut self, offsets: impl IntoIterator<Item = i64>) -> Violation {
        self.offsets = offsets.into_iter().collect();
        self
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: group {}", self.model, self.group)?;
        if let Some(tp) = &self.partition {
            write!(f, ", {tp}")?;
        }
        if !self.offsets.is_empty() {
            write!(f, " offsets {}", ranges(&self.offsets))?;
        }
        if let Some(m) = &self.member {
            write!(f, ", member {m}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A lost record explained by an allowed cause (Q5): not a violation, reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explained {
    /// The group.
    pub group: String,
    /// The partition.
    pub partition: TopicPartition,
    /// The lost offsets.
    pub offsets: Vec<i64>,
    /// The cause.
    pub cause: Cause,
    /// The evidence found.
    pub evidence: String,
}

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "group {}, {} offsets {} lost: {} ({})",
            self.group,
            self.partition,
            ranges(&self.offsets),
            self.cause,
            self.evidence
        )
    }
}

/// One model over one group's events (see the module docs).
///
/// Events arrive in history order, only the group's; [`Model::finish`] comes once, after the
/// last. A model built for one semantics passes everything under the other (Q1 and Q7 judge
/// at-least-once groups; Q3 and Q4 at-most-once groups).
pub trait Model: Send {
    /// The oracle's name ([`Q1`] … [`Q10`]).
    fn name(&self) -> &'static str;

    /// Sees one event of the group; returns the rules it breaks.
    fn on_event(&mut self, event: &Event) -> Vec<Violation>;

    /// At the end: the broker's facts, and when the history ends (on the cluster's clock).
    fn finish(&mut self, facts: &Facts, end: Duration) -> Vec<Violation>;

    /// Losses explained by an allowed cause, once finished (Q5 only).
    fn explained(&self) -> Vec<Explained> {
        Vec::new()
    }
}
