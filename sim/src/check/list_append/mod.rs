//! A Jepsen-style list-append checker for logs: appends, reads at offsets, live subscribers.
//!
//! The model is a set of append-only logs, one per *key*, each holding one *value* per *offset*.
//! It is Jepsen's list-append and Kafka queue workload as Elle analyses it (Kingsbury & Alvaro,
//! VLDB 2020): every value is appended once, so what a read holds names the append that wrote it,
//! and a final read of every log is the version order the other observations are judged against.
//! In Kafka's terms a key is a topic-partition, an append a produce answered with the offset the
//! leader assigned, a read a fetch of the records at offsets, a subscriber a consumer.
//! The model, the rules (1–7 and the preconditions, each a [`Rule`]) and the ways in are
//! described in `docs/src/list-append.md`; each item here documents its own shape.
//!
//! A [`History`] holds operations ([`Op`], each ending in an [`OpOutcome`](crate::OpOutcome)), subscriber events
//! ([`SubscriberEvent`]) and one final read per key ([`FinalLog`]). Three ways in:
//! - [`check`] / [`analyze`] over a [`History`] built by hand or by a [`Recorder`];
//! - a [`Recorder`] for clients to record into, in a simulation ([`Recorder::of`]) or outside
//!   one ([`Recorder::wall`]);
//! - the [`ListAppend`] check, fed by history events (`ctx.record`, the kinds listed there).
//!
//! ```
//! use std::time::Duration;
//! use sim::OpOutcome;
//! use sim::check::list_append::{self, History, Record, Rule};
//!
//! let ms = Duration::from_millis;
//! let mut h = History::new();
//! h.append("p1", "orders-0", "a", ms(0), ms(5), OpOutcome::Ok(Some(0)));
//! h.append("p2", "orders-0", "b", ms(1), ms(9), OpOutcome::Indeterminate("connection reset".into()));
//! h.read("c1", "orders-0", ms(10), ms(12), OpOutcome::Ok(vec![Record::new(1, "b")]));
//! h.final_log("orders-0", 0, [(0, "a"), (1, "b")]);
//! let report = list_append::check(&h).expect("a correct history");
//! assert_eq!(report.unknown_in_log, 1);
//!
//! h.read("c1", "orders-0", ms(13), ms(14), OpOutcome::Ok(vec![Record::new(0, "b")]));
//! let violations = list_append::check(&h).unwrap_err();
//! assert_eq!(violations[0].rule, Rule::ReadDisagrees);
//! assert_eq!(violations[0].offsets, vec![0]);
//! ```
//!
//! Cost: one pass over the history with hash lookups, plus a sort of each key's appends for the
//! real-time rule — O(n log n). `cargo bench -p sim --bench list_append` measures it.
//!
//! Layout (each uses only those below it): `checker` (the [`ListAppend`] check) and `recorder`
//! ([`Recorder`]) over `codec` (history events) and `analysis` ([`check`], [`analyze`]), over
//! `report` ([`Report`], [`Violation`], [`Rule`]), over `model` ([`History`] and its parts); `lookup` (a fast map) is a leaf.

mod analysis;
mod checker;
mod codec;
mod lookup;
mod model;
mod recorder;
mod report;

pub use analysis::{analyze, check};
pub use checker::ListAppend;
pub use codec::{
    KIND_DELIVER, KIND_FAIL, KIND_FINAL, KIND_INFO, KIND_INVOKE, KIND_OK, KIND_SUBSCRIBE, escape, unescape,
};
pub use model::{Action, FinalLog, History, Offset, Op, OpId, Record, SubscriberAction, SubscriberEvent};
pub use recorder::{Completion, Pending, PendingAppend, PendingRead, Recorder};
pub use report::{Gap, Report, Rule, Tally, Violation};
