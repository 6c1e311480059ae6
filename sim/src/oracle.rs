//! Oracle identities: which oracle judged a failure, as a typed value instead of a string.
//!
//! Every [`crate::Failure`] of class correctness or liveness names the oracle that found it
//! ([`crate::Failure::oracle`]). The harness's own oracles are constants here; a crate's or a
//! test's own oracle is a constant of its own, made with [`Oracle::new`], so a match on a failure
//! reads `f.is(&Oracle::IDEMPOTENCY)` and a misspelt name is a compile error, not a silent miss.
//!
//! ```
//! use sim::{Failure, Oracle};
//!
//! const STALE_READ: Oracle = Oracle::new("stale-read");
//! let f = Failure::correctness(STALE_READ, "read 3 after 4 was acknowledged");
//! assert!(f.is(&STALE_READ));
//! assert_eq!(f.to_string(), "correctness [stale-read]: read 3 after 4 was acknowledged");
//! ```
//!
//! The text of an oracle is what reports, JSON summaries and histories print (`[stale-read]`).

use std::borrow::Cow;
use std::fmt;

/// An oracle's identity: its name (`idempotency`, `goaway-first`), compared by name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Oracle(Cow<'static, str>);

impl Oracle {
    /// A panic in the run (class panic).
    pub const PANIC: Oracle = Oracle::new("panic");
    /// A panic that a task or the service recovered from, not allowed by the simulation.
    pub const RECOVERED_PANIC: Oracle = Oracle::new("recovered-panic");
    /// The run reached its fake-time horizon without finishing (class deadlock).
    pub const HORIZON: Oracle = Oracle::new("horizon");
    /// The run used up its wall-clock budget (class inconclusive).
    pub const WATCHDOG: Oracle = Oracle::new("watchdog");
    /// The harness's own consistency checks (replay, determinism of the sweep).
    pub const SELF_CHECK: Oracle = Oracle::new("self-check");
    /// A liveness bound passed without progress ([`crate::check::liveness`]).
    pub const PROGRESS: Oracle = Oracle::new("progress");
    /// An acknowledged operation did not take exactly one effect ([`crate::check::idempotency`]).
    pub const IDEMPOTENCY: Oracle = Oracle::new("idempotency");
    /// A failed operation took effect anyway.
    pub const FAILED_TOOK_NO_EFFECT: Oracle = Oracle::new("failed-took-no-effect");
    /// A history is not linearizable ([`crate::check::linearizable`]).
    pub const LINEARIZABLE: Oracle = Oracle::new("linearizable");
    /// A list-append history violates its model ([`crate::check::list_append`]).
    pub const LIST_APPEND: Oracle = Oracle::new("list-append");
    /// A request got no response, or more than one.
    pub const ONE_RESPONSE: Oracle = Oracle::new("one-response");
    /// A lifecycle event named a node, service or version that does not exist.
    pub const LIFECYCLE: Oracle = Oracle::new("lifecycle");
    /// A node's incarnation ended for another cause than the one expected.
    pub const EXIT_CAUSE: Oracle = Oracle::new("exit-cause");
    /// A node started, restarted or rolled out was not ready in time.
    pub const READINESS: Oracle = Oracle::new("readiness");
    /// A node stopped with requests in flight that it did not drain.
    pub const DRAIN: Oracle = Oracle::new("drain");
    /// A task of an ended incarnation was polled after the end.
    pub const ZOMBIE: Oracle = Oracle::new("zombie");
    /// An ended incarnation left something behind (sockets, tasks).
    pub const LEAK: Oracle = Oracle::new("leak");

    /// An oracle named `name` (lowercase words joined by `-`, by convention).
    pub const fn new(name: &'static str) -> Oracle {
        Oracle(Cow::Borrowed(name))
    }

    /// An oracle whose name is made at run time.
    pub fn named(name: impl Into<String>) -> Oracle {
        Oracle(Cow::Owned(name.into()))
    }

    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Oracle {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Oracle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Oracle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Oracle({:?})", &*self.0)
    }
}

impl From<&str> for Oracle {
    fn from(name: &str) -> Oracle {
        Oracle::named(name)
    }
}

impl From<String> for Oracle {
    fn from(name: String) -> Oracle {
        Oracle::named(name)
    }
}

impl From<&Oracle> for Oracle {
    fn from(oracle: &Oracle) -> Oracle {
        oracle.clone()
    }
}

impl PartialEq<str> for Oracle {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Oracle {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}
