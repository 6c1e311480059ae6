//! A linearizability checker for histories of operations on objects with a sequential model:
//! registers, compare-and-set registers, key-value maps (shipped), or the user's own [`Model`].
//!
//! A history is linearizable (Herlihy & Wing, 1990) if every operation can be given one instant
//! between its call and its return at which it took effect, such that the operations in that
//! order are a legal run of the sequential model and produce the outputs the clients saw.
//! `docs/src/linearizability.md` describes the history, the models, the search and its answers;
//! each item here documents its own shape.
//!
//! # What the checker assumes (Jepsen's and Porcupine's semantics)
//! - **Intervals are closed**: an operation returning at `t` and one called at `t` are
//!   concurrent (fake time has many equal instants; ordering them would invent precedence).
//! - **Indeterminate operations** ([`Return::Unknown`], Jepsen's `:info`) may take effect at any
//!   instant after their call, or never; the model's step is given no output. One the model says
//!   cannot change the state ([`Model::is_read_only`]) is dropped before the search.
//! - **Failed operations** ([`Return::Failed`], Jepsen's `:fail`) definitely took no effect and
//!   are left out ([`crate::check::failed_took_no_effect`] checks that they really took none).
//! - **Locality** (Herlihy & Wing, theorem 1): a model that says which object an operation
//!   touches ([`Model::partition`]) is checked one partition at a time, each from its own
//!   initial state; the first partition found not linearizable is reported.
//!
//! The search is Wing & Gong's with Lowe's memoisation (as in Porcupine and Knossos' `wgl`), plus
//! a pruning of read-only operations. The problem is NP-complete: [`Limits`] bound each
//! partition's search, and a search that reaches one answers [`Validity::Unknown`], never a pass.
//! A non-linearizable partition is explained by the longest prefix the search could linearize,
//! the state after it and the operation it could not place ([`Counterexample`]).
//!
//! Layout (each uses only those below it): `search` ([`check`], [`check_with`], [`verify`]) over
//! `verdict` (the answers), `cache` (the search's memory) and `model` ([`Model`], [`Op`],
//! [`Return`]); `models` (the shipped [`Register`] and [`KvMap`]) over `model`.

mod cache;
mod model;
mod models;
mod search;
mod verdict;

pub use model::{Model, Op, Return};
pub use models::{KvCommand, KvMap, KvOp, KvOut, Register, RegisterOp, RegisterOut};
pub use search::{check, check_with, verify};
pub use verdict::{Counterexample, Inconclusive, Limits, MalformedHistory, Validity};
