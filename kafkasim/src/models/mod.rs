//! Kafka queue models Q1–Q9: oracles over what consumers did and what the broker saw.
//!
//! Consumers record what they do ([`Recorder`]: partitions assigned and revoked, records begun,
//! processed or failed, commits and their answers, stop requests, leaving, crashes, heals) as
//! [`Event`]s; the broker's introspection gives the rest ([`Facts`]: generations and their
//! assignments, every commit attempt and its error code, log starts and high watermarks, how
//! members left). A test declares what its consumers promise in a [`Spec`]: the delivery
//! [`Semantics`] and the [`Cause`]s of loss it allows. Each model is a [`Model`]: it sees the
//! group's events in history order and the facts at the end, and names what it finds as a
//! [`Violation`] (model, group, partition, offsets, member).
//!
//! The same models run two ways:
//! - **inside a simulation**, as [`sim::check::Check`]s ([`install`], [`ModelCheck`]): the
//!   per-event rules fail the run at the event that breaks them, the final rules when the body
//!   returns; the oracle is the model's name;
//! - **over a recorded history** ([`judge`]): a [`ConsumerHistory`] (from a [`Recorder`] on
//!   loopback with rdkafka, from a simulation, or built by hand) and [`Facts`] give a [`Report`].
//!
//! | model | oracle | rule | when |
//! |---|---|---|---|
//! | Q1 [`NoLossAtCommit`] | `q1-no-loss-at-commit` | at-least-once: every record below an offset a member commits was processed (by some member of the group) before the commit | each commit; the end |
//! | Q2 [`MonotonicCommits`] | `q2-monotonic-commits` | offsets the coordinator stores only grow per group and partition, and none is stored from a member that does not hold the partition | each commit; the end (broker) |
//! | Q3 [`NoDuplicates`] | `q3-no-duplicates` | at-most-once: no record is processed twice in the group | each process |
//! | Q4 [`CommitFirst`] | `q4-commit-first` | at-most-once: a commit past a record was acknowledged before its processing began | each begin/process |
//! | Q5 [`LossExplained`] | `q5-loss-explained` | every record below the final committed offset that nobody processed is explained by a stated [`Cause`] and its evidence | the end |
//! | Q6 [`OrderWithinHold`] | `q6-order-within-hold` | within one member's hold of a partition (assignment to revocation; for a member that assigns partitions itself, its start to its leaving or crash), records are processed in increasing offset order | each process |
//! | Q7 [`ErrorEndsConsumer`] | `q7-error-ends-consumer` | at-least-once: after a processing error, the member neither commits past the failed record nor processes later records of its partition, until it processes it or its hold ends | each event |
//! | Q8 [`ShutdownDrains`] | `q8-shutdown-drains` | a member told to stop finishes what it began, commits what it processed, leaves with LeaveGroup (the coordinator saw it), and does nothing after | leave; the end |
//! | Q9 [`ProgressAfterHeal`] | `q9-progress-after-heal` | after a heal, when records were waiting, the group processes one within the [`ProgressBound`] computed from the consumers' [`ConsumerSettings`] | each event; the end |
//!
//! Sources of the semantics: Apache Kafka's documentation, *Message Delivery Semantics*
//! (at-most-once: read, save the position, then process; at-least-once: read, process, then
//! save the position) and the `KafkaConsumer` javadoc (committed offsets are the next record to
//! read; rebalance listeners commit on revocation; `close()` leaves the group); KIP-62
//! (`max.poll.interval.ms`, the rebalance timeout), KIP-345 (static members do not send
//! LeaveGroup on close), KIP-429 (cooperative rebalancing: partitions revoked or *lost*), KIP-134
//! (the initial rebalance delay). The classic coordinator fences commits by generation
//! (`ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`) but never checks that the committing member holds
//! the partition: Q2 does.
//!
//! Assumptions: offsets are dense (no compaction, no transaction markers), as kafkasim serves
//! them; members are named by their `client.id`, unique among the group's live consumers.
//! The guide is `docs/src/kafka-models.md`.
//!
//! Over a hand-built history — a consumer that commits before processing under at-least-once:
//!
//! ```
//! use std::time::Duration;
//! use kafkasim::models::{Answer, ConsumerHistory, Facts, Q1, Spec, TopicPartition, What, judge};
//!
//! let tp = TopicPartition::new("orders", 0);
//! let ms = Duration::from_millis;
//! let mut history = ConsumerHistory::new();
//! history.push(ms(1), "billing", "c1", What::Assign(tp.clone()));
//! history.push(ms(2), "billing", "c1", What::Commit { tp: tp.clone(), offset: 1, answer: Answer::Accepted });
//! history.push(ms(3), "billing", "c1", What::Process { tp: tp.clone(), offset: 0, value: None });
//! let report = judge(&history, &Facts::default(), &Spec::at_least_once("billing"));
//! assert!(report.fired(Q1));
//! assert_eq!(report.of(Q1)[0].offsets, vec![0]);
//! ```
//!
//! Inside a simulation, as the run's checks:
//!
//! ```no_run
//! use kafkasim::Cluster;
//! use kafkasim::models::{self, ConsumerSettings, Recorder, Spec};
//! use sim::Simulation;
//!
//! Simulation::new("billing").run(|ctx| async move {
//!     let cluster = Cluster::builder().build();
//!     cluster.serve_sim(&ctx)?;
//!     let spec = Spec::at_least_once("billing").settings(&ConsumerSettings::default());
//!     models::install(&ctx, &cluster, &spec);
//!     let me = Recorder::sim(&ctx, &cluster).member("billing", "worker-0");
//!     // … the consumer records as it goes: me.assign(..), me.process(..), me.commit(..) …
//!     # let _ = me;
//!     Ok(())
//! });
//! ```

mod commit_first;
mod drain;
mod duplicates;
mod error_ends;
pub mod event;
pub mod facts;
mod holds;
mod loss;
mod loss_at_commit;
mod monotonic;
mod order;
mod progress;
pub mod recorder;
pub mod settings;

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use sim::Ctx;
use sim::check::{Check, Verdict};
use sim::history::Entry;

pub use commit_first::CommitFirst;
pub use drain::ShutdownDrains;
pub use duplicates::NoDuplicates;
pub use error_ends::ErrorEndsConsumer;
pub use event::{Answer, Event, EventError, TopicPartition, What};
pub use facts::{Departure, DepartureCause, Facts};
pub use loss::LossExplained;
pub use loss_at_commit::NoLossAtCommit;
pub use monotonic::MonotonicCommits;
pub use order::OrderWithinHold;
pub use progress::ProgressAfterHeal;
pub use recorder::{ConsumerHistory, MemberRecorder, Recorder};
pub use settings::{ConsumerSettings, ProgressBound, SettingsError};

use crate::Cluster;
use event::ranges;

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

/// The delivery semantics a group's consumers promise (Kafka's *Message Delivery Semantics*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    /// Process, then commit: no record is lost, a record may be processed more than once.
    AtLeastOnce,
    /// Commit, then process: no record is processed twice, a record may be lost (only for a
    /// stated [`Cause`]).
    AtMostOnce,
}

/// A cause of loss a test allows; each explains a lost record only with its evidence (Q5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// At-most-once: a member crashed between committing past a record and processing it.
    /// Evidence: the member's acknowledged commit past the record — or, when it died before the
    /// answer came, the coordinator's stored commit from it no later than the crash — then its
    /// [`What::Crash`] (in a simulation, `node.crash` of the node named as the member).
    Crash,
    /// Retention deleted records before the group read them. Evidence: the record is below the
    /// partition's log start ([`Facts::partitions`]).
    Retention,
    /// `auto.offset.reset=latest` on a group without committed offsets: it starts at the end of
    /// the log. Evidence: the record is below the first offset the group began, processed or
    /// failed in that partition.
    ResetLatest,
    /// At-most-once: a record whose processing failed is lost (its commit went first). Evidence:
    /// its [`What::Error`].
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
        }
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
    /// The model's oracle name ([`Q1`] … [`Q9`]).
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
    /// The oracle's name ([`Q1`] … [`Q9`]).
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

/// The nine models for `spec`, Q1 to Q9.
pub fn models(spec: &Spec) -> Vec<Box<dyn Model>> {
    vec![
        Box::new(NoLossAtCommit::new(spec)),
        Box::new(MonotonicCommits::new(spec)),
        Box::new(NoDuplicates::new(spec)),
        Box::new(CommitFirst::new(spec)),
        Box::new(LossExplained::new(spec)),
        Box::new(OrderWithinHold::new(spec)),
        Box::new(ErrorEndsConsumer::new(spec)),
        Box::new(ShutdownDrains::new(spec)),
        Box::new(ProgressAfterHeal::new(spec)),
    ]
}

/// What the models found over a history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation, model by model (Q1 first), each model's in the order found.
    pub violations: Vec<Violation>,
    /// Losses explained by an allowed cause.
    pub explained: Vec<Explained>,
}

impl Report {
    /// Whether `model` ([`Q1`] … [`Q9`]) found a violation.
    pub fn fired(&self, model: &str) -> bool {
        self.violations.iter().any(|v| v.model == model)
    }

    /// `model`'s violations.
    pub fn of(&self, model: &str) -> Vec<&Violation> {
        self.violations.iter().filter(|v| v.model == model).collect()
    }

    /// The models that found a violation, in order, once each.
    pub fn models_fired(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for v in &self.violations {
            if !out.contains(&v.model) {
                out.push(v.model);
            }
        }
        out
    }

    /// Whether no model found a violation.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.violations.is_empty() {
            writeln!(f, "no violation")?;
        }
        for v in &self.violations {
            writeln!(f, "{v}")?;
        }
        for e in &self.explained {
            writeln!(f, "explained: {e}")?;
        }
        Ok(())
    }
}

/// Runs every model of [`models`] over `history` (its events of `spec`'s group) and `facts`.
///
/// A history that dropped events (more than [`ConsumerHistory::EVENTS_MAX`]) cannot be judged:
/// the report then holds one violation of oracle `kafka-history` saying so.
pub fn judge(history: &ConsumerHistory, facts: &Facts, spec: &Spec) -> Report {
    let mut report = Report::default();
    if history.dropped() > 0 {
        report.violations.push(Violation::new(
            "kafka-history",
            spec.group(),
            format!(
                "the history dropped {} events beyond ConsumerHistory::EVENTS_MAX ({}): too long to judge",
                history.dropped(),
                ConsumerHistory::EVENTS_MAX
            ),
        ));
        return report;
    }
    for mut model in models(spec) {
        for event in history.events().iter().filter(|e| e.group == spec.group()) {
            report.violations.extend(model.on_event(event));
        }
        report.violations.extend(model.finish(facts, history.end()));
        report.explained.extend(model.explained());
    }
    report
}

/// Installs the nine models as checks of the run, for `spec`'s group on `cluster`.
pub fn install(ctx: &Ctx, cluster: &Cluster, spec: &Spec) {
    for model in models(spec) {
        ctx.add_check(ModelCheck::boxed(ctx, cluster, spec, model));
    }
}

/// A [`Model`] as a [`sim::check::Check`] (see the module docs).
///
/// It reads the group's consumer events from the history (`kafka.consumer.*`, recorded by a
/// [`Recorder::sim`]), and `node.crash` of a node as [`What::Crash`] of the member named like the
/// node. At the end it takes [`Facts::of`] the cluster. An unreadable `kafka.consumer.*` entry
/// is a violation. Explained losses are recorded as `kafka.model.explained` entries.
pub struct ModelCheck {
    model: Box<dyn Model>,
    group: String,
    cluster: Cluster,
    /// Run time minus cluster time: histories stamp run time, the models use the cluster's.
    offset: Duration,
}

impl fmt::Debug for ModelCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelCheck").field("model", &self.model.name()).field("group", &self.group).finish()
    }
}

impl ModelCheck {
    /// `model` for `spec`'s group on `cluster`, as a check of the run `ctx`.
    pub fn new(ctx: &Ctx, cluster: &Cluster, spec: &Spec, model: impl Model + 'static) -> ModelCheck {
        ModelCheck::boxed(ctx, cluster, spec, Box::new(model))
    }

    fn boxed(ctx: &Ctx, cluster: &Cluster, spec: &Spec, model: Box<dyn Model>) -> ModelCheck {
        ModelCheck {
            model,
            group: spec.group().to_string(),
            cluster: cluster.clone(),
            offset: ctx.elapsed().saturating_sub(cluster.elapsed()),
        }
    }

    fn verdict(violations: Vec<Violation>) -> Verdict {
        match violations.split_first() {
            None => Verdict::Pass,
            Some((first, [])) => Verdict::Violation(first.to_string()),
            Some((first, rest)) => Verdict::Violation(format!("{first} (and {} more)", rest.len())),
        }
    }
}

impl Check for ModelCheck {
    fn name(&self) -> &str {
        self.model.name()
    }

    fn on_event(&mut self, entry: &Entry) -> Verdict {
        let at = entry.at().saturating_sub(self.offset);
        let event = if entry.kind == "node.crash" {
            Event { seq: entry.index, at, group: self.group.clone(), member: entry.identity.clone(), what: What::Crash }
        } else {
            match Event::from_history(&entry.kind, &entry.identity, &entry.detail, entry.index, at) {
                Ok(Some(event)) if event.group == self.group => event,
                Ok(_) => return Verdict::Pass,
                Err(e) => return Verdict::Violation(e.to_string()),
            }
        };
        ModelCheck::verdict(self.model.on_event(&event))
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        let facts = Facts::of(&self.cluster, &self.group);
        let end = ctx.elapsed().saturating_sub(self.offset);
        let violations = self.model.finish(&facts, end);
        for e in self.model.explained() {
            ctx.record("kafka.model.explained", &self.group, e.to_string());
        }
        ModelCheck::verdict(violations)
    }
}
