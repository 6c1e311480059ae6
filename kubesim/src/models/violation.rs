//! What a model found: a [`Violation`], and its oracle.

use std::fmt;
use std::time::Duration;

use sim::{Failure, Oracle};

/// A broken rule: which model, when (fake time of the event that broke it), and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The model's oracle (`kube-leader-overlap`, …).
    pub oracle: Oracle,
    /// The fake time of the event that broke the rule.
    pub at: Duration,
    /// What happened, naming the objects, actors and bound involved.
    pub message: String,
}

impl Violation {
    /// A violation of `oracle` at `at`.
    pub fn new(oracle: &Oracle, at: Duration, message: impl Into<String>) -> Violation {
        Violation { oracle: oracle.clone(), at, message: message.into() }
    }

    /// As a correctness failure of the run (its oracle is the model's).
    pub fn to_failure(&self) -> Failure {
        Failure::correctness(&self.oracle, self.to_string())
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {:?}: {}", self.at, self.message)
    }
}

/// The first of `violations` as a failure, naming how many more there were.
pub fn first_failure(violations: &[Violation]) -> Option<Failure> {
    let (first, rest) = violations.split_first()?;
    let mut failure = first.to_failure();
    if !rest.is_empty() {
        failure = Failure::correctness(&first.oracle, format!("{first} (and {} more)", rest.len()));
    }
    Some(failure)
}
