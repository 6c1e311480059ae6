//! What the checker checks: a sequential [`Model`] and a history of [`Op`]s with their [`Return`]s.

use std::fmt::{self, Debug};
use std::hash::Hash;
use std::time::Duration;

/// A sequential specification of an object: the checker asks it whether an operation could take
/// effect in a state, and what state that leaves.
///
/// Models must be pure: `step` depends only on its arguments. States are cloned and hashed
/// often by the search: keep them small, or share their large parts (`Arc`).
pub trait Model {
    /// The object's state (for a partitioned model: one partition's state).
    type State: Clone + Eq + Hash + Debug;
    /// What a client asked for.
    type Input: Debug;
    /// What a client was answered.
    type Output: Debug;

    /// The state before any operation (of each partition).
    fn init(&self) -> Self::State;

    /// The state after `input` took effect in `state` answering `output`, or `None` if it could
    /// not have (the output is not what the model would answer, or the input is not allowed in
    /// this state). `output` is `None` for an indeterminate operation: the step must then take
    /// effect as the model would, answering whatever it answers.
    fn step(&self, state: &Self::State, input: &Self::Input, output: Option<&Self::Output>) -> Option<Self::State>;

    /// Which independent object the operation touches (a key), for compositional checking; `None`
    /// (the default) puts every operation in one partition. Operations of different partitions
    /// must never constrain each other's outputs.
    fn partition<'a>(&self, _input: &'a Self::Input) -> Option<&'a str> {
        None
    }

    /// Whether the operation, answering `output` (`None`: indeterminate), leaves the state as it
    /// was in every state it can take effect in: a read, a compare-and-set that answered "not
    /// written". The search prunes with it: an indeterminate read-only operation is dropped
    /// before the search (it can neither constrain nor explain anything), and a determinate one
    /// that can take effect is linearized at once and never branched on (moving it to the front
    /// of any completion changes no state another operation sees). Answering `true` wrongly
    /// makes the checker wrong; the default, `false`, is always safe.
    fn is_read_only(&self, _input: &Self::Input, _output: Option<&Self::Output>) -> bool {
        false
    }
}

/// How an operation ended, as its client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Return<O> {
    /// It returned at `at` (fake time) with `output`.
    Ok {
        /// When the client got the answer.
        at: Duration,
        /// The answer.
        output: O,
    },
    /// It definitely took no effect (Jepsen's `:fail`): left out of the search.
    Failed,
    /// Indeterminate (Jepsen's `:info`: a timeout, a lost connection): it may take effect at
    /// any instant after its call, or never.
    Unknown,
}

/// One operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op<I, O> {
    /// The client (Jepsen's process) that ran it; named in explanations.
    pub client: String,
    /// When it was called (fake time).
    pub call: Duration,
    /// What was asked.
    pub input: I,
    /// How it ended.
    pub ret: Return<O>,
}

impl<I, O> Op<I, O> {
    /// An operation that returned `output` at `ret`.
    pub fn ok(client: impl Into<String>, call: Duration, ret: Duration, input: I, output: O) -> Op<I, O> {
        Op { client: client.into(), call, input, ret: Return::Ok { at: ret, output } }
    }

    /// An indeterminate operation (timed out, connection lost).
    pub fn unknown(client: impl Into<String>, call: Duration, input: I) -> Op<I, O> {
        Op { client: client.into(), call, input, ret: Return::Unknown }
    }

    /// An operation that definitely took no effect.
    pub fn failed(client: impl Into<String>, call: Duration, input: I) -> Op<I, O> {
        Op { client: client.into(), call, input, ret: Return::Failed }
    }
}

impl<I: Debug, O: Debug> fmt::Display for Op<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ret {
            Return::Ok { at, output } => {
                write!(f, "{} {:?} -> {:?} [{:?}, {:?}]", self.client, self.input, output, self.call, at)
            }
            Return::Failed => write!(f, "{} {:?} -> failed [{:?}, …]", self.client, self.input, self.call),
            Return::Unknown => write!(f, "{} {:?} -> unknown [{:?}, ∞)", self.client, self.input, self.call),
        }
    }
}
