//! What ended a node's incarnation: exit causes and crash modes.

use std::time::Duration;

use crate::net::Ending;

/// Why a node's incarnation ended, as recorded at the instant it ended.
///
/// Its `Debug` text is what the history records (`node.exit`, `node.unready`): stable history
/// labels, so keep variant names and shapes as they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitCause {
    /// Its entry point returned `Ok` with no lifecycle event sent.
    Returned,
    /// Its entry point returned an error with no lifecycle event sent.
    Error(String),
    /// It returned after SIGTERM (`Ok(())`, or the error it returned).
    Signal(Result<(), String>),
    /// It was crashed, ending as [`Ending::Reset`] or [`Ending::Vanish`] (recorded as
    /// `Crash(Reset)`, `Crash(Vanish)`).
    Crash(Ending),
    /// It was still running when its grace after SIGTERM ran out (the service's, or the one
    /// [`Lifecycle::SigkillAfter`](crate::node::Lifecycle::SigkillAfter) gave), and was killed:
    /// its connections are reset.
    Killed,
}

/// How a crash ends the node's sockets: as the seed draws it, or as given.
///
/// How an incarnation ends is the network's [`Ending`] (one type for every end: a crash, a kill,
/// an exit); a crash is one of its two abrupt ends, [`Ending::Reset`] (every connection is reset,
/// the peer sees RST: a killed process) or [`Ending::Vanish`] (silence: a dead machine; peers
/// learn of it only from their own timeouts). This only adds "the seed picks". A crash given
/// [`Ending::Exit`] (a process that closed its sockets as it exited: not a crash) fails with
/// oracle `lifecycle`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// The seed picks `Reset` or `Vanish`, at even odds, from the stream
    /// `node/crash/<node>/<incarnation>`.
    Seeded,
    /// This ending: [`Ending::Reset`] or [`Ending::Vanish`].
    Fixed(Ending),
}

/// One ended incarnation.
#[derive(Clone, Debug)]
pub struct ExitRecord {
    /// The node (`cart-1`).
    pub node: String,
    /// Its incarnation.
    pub incarnation: u64,
    /// Its version.
    pub version: String,
    /// Why it ended.
    pub cause: ExitCause,
    /// When (fake time since the run started).
    pub at: Duration,
    /// Tasks of the incarnation aborted when it ended (tracked tasks still running).
    pub aborted_tasks: usize,
}
