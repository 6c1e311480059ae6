//! The checker's answers: [`Validity`], its [`Counterexample`] and [`Inconclusive`] explanations,
//! the [`Limits`] that bound a search, and [`MalformedHistory`].

use std::fmt;
use std::time::Duration;

use crate::report::{Class, Failure};

/// Bounds on one partition's search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Model steps tried per partition. Default 100,000,000.
    pub steps_max: u64,
    /// Bytes the cache of (linearized set, state) pairs may hold per partition, estimated as
    /// the set's words plus the state's inline size. Default 1 GiB.
    pub cache_bytes_max: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { steps_max: 100_000_000, cache_bytes_max: 1 << 30 }
    }
}

/// The checker's answer (Jepsen's `:valid?`: true, false or unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    /// Every partition is linearizable.
    Linearizable,
    /// A partition is not linearizable: why.
    NotLinearizable(Counterexample),
    /// A search reached a [`Limits`] bound before it could decide (and no partition was found
    /// not linearizable): inconclusive.
    Unknown(Inconclusive),
}

impl Validity {
    /// Whether the history was shown linearizable.
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Validity::Linearizable)
    }

    /// As an oracle's result: not linearizable is a correctness failure of oracle
    /// `linearizable`; unknown is an inconclusive failure of the same oracle.
    ///
    /// # Errors
    /// The [`Failure`] described above, with the explanation as its message.
    pub fn into_result(self) -> Result<(), Failure> {
        match self {
            Validity::Linearizable => Ok(()),
            Validity::NotLinearizable(c) => {
                Err(Failure::correctness(crate::oracle::Oracle::LINEARIZABLE, c.to_string()))
            }
            Validity::Unknown(u) => {
                Err(Failure::new(Class::Inconclusive, u.to_string()).oracle(crate::oracle::Oracle::LINEARIZABLE))
            }
        }
    }
}

/// Why a partition is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    /// The partition (key), if the model partitions.
    pub partition: Option<String>,
    /// The longest prefix the search linearized, as indices into the checked history, in the
    /// order it linearized them.
    pub prefix: Vec<usize>,
    /// The model state after that prefix (`Debug`).
    pub state: String,
    /// The operation (index into the checked history) whose return the search reached after that
    /// prefix: it must have taken effect by then, and could not in any order the search tried.
    pub blocked: usize,
    /// The explanation as text: the partition, the blocked operation, and the prefix.
    pub explanation: String,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.explanation)
    }
}

/// Which bound stopped a search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconclusive {
    /// The partition (key), if the model partitions.
    pub partition: Option<String>,
    /// The bound reached: `"steps_max"` or `"cache_bytes_max"`.
    pub limit: &'static str,
    /// Model steps tried in that partition.
    pub steps: u64,
    /// Operations in that partition, and how many of them the search had linearized at most.
    pub ops: usize,
    /// The deepest prefix the search reached.
    pub deepest: usize,
}

impl fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "linearizability unknown{}: the search reached Limits::{} after {} model steps ({} operations, at most {} \
             linearized at once); raise the limit or check a shorter history",
            partition_label(&self.partition),
            self.limit,
            self.steps,
            self.ops,
            self.deepest
        )
    }
}

/// ` for key "k"` when the model partitions, else nothing: for explanations.
pub(super) fn partition_label(p: &Option<String>) -> String {
    match p {
        Some(key) => format!(" for key {key:?}"),
        None => String::new(),
    }
}

/// A history that cannot be checked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MalformedHistory {
    /// An operation returned before it was called.
    #[error("operation #{index} ({client}) returned at {ret:?}, before its call at {call:?}")]
    ReturnBeforeCall {
        /// Index into the history.
        index: usize,
        /// Its client.
        client: String,
        /// Its call.
        call: Duration,
        /// Its return.
        ret: Duration,
    },
    /// A partition has more operations than the checker indexes (2^31).
    #[error("a partition has {ops} operations, more than the checker indexes (2^31)")]
    TooManyOperations {
        /// Operations in the partition.
        ops: usize,
    },
}
