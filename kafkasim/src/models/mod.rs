//! Kafka queue models Q1–Q10: oracles over what consumers did and what the broker saw.
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
//! | Q10 [`ExactlyOnce`] | `q10-exactly-once` | for a consume-transform-produce group ([`Spec::exactly_once`]): every input record below the group's committed offset has exactly one output record a `read_committed` consumer reads (named by its [`SOURCE_HEADER`]), and none above it | the end (broker) |
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
//! Assumptions: offsets are dense for Q1–Q9 (no compaction, no transaction markers); Q10 reads
//! transactional logs through the broker; members are named by their `client.id`, unique among the group's live consumers.
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

mod check;
mod commit_first;
mod drain;
mod duplicates;
mod error_ends;
pub mod event;
mod exactly_once;
pub mod facts;
mod history;
mod holds;
mod judge;
mod loss;
mod loss_at_commit;
mod model;
mod monotonic;
mod order;
mod progress;
pub mod recorder;
pub mod settings;

pub use check::{ModelCheck, install};
pub use commit_first::CommitFirst;
pub use drain::ShutdownDrains;
pub use duplicates::NoDuplicates;
pub use error_ends::ErrorEndsConsumer;
pub use event::{Answer, Event, EventError, TopicPartition, What};
pub use exactly_once::ExactlyOnce;
pub use facts::{CommittedRecord, Departure, DepartureCause, Facts, SOURCE_HEADER, source_header};
pub use history::ConsumerHistory;
pub use judge::{Report, judge, models};
pub use loss::LossExplained;
pub use loss_at_commit::NoLossAtCommit;
pub use model::{
    Cause, Explained, Model, OFFSETS_WALKED_MAX, Q1, Q2, Q3, Q4, Q5, Q6, Q7, Q8, Q9, Q10, Semantics, Spec, Violation,
};
pub use monotonic::MonotonicCommits;
pub use order::OrderWithinHold;
pub use progress::ProgressAfterHeal;
pub use recorder::{MemberRecorder, Recorder};
pub use settings::{ConsumerSettings, ProgressBound, SettingsError};
