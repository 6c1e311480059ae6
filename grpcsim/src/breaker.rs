//! A checker for a client-side circuit breaker you implement.
//!
//! Implement [`Breaker`] for your breaker, declare what it promises in a [`BreakerSpec`], and use
//! [`Checked`] in its place. Every state change is recorded (`grpc.breaker`) and judged against
//! the classic three-state model (Nygard, *Release It!*; the same edges as resilience4j and
//! gRPC's outlier detection):
//!
//! | edge | legal when |
//! |---|---|
//! | Closed → Open | the last `failure_threshold` outcomes (since the breaker closed) were all failures |
//! | Open → HalfOpen | at least `cooldown` passed since it opened |
//! | HalfOpen → Closed | the last outcome was a success (a call that did not fail) |
//! | HalfOpen → Open | the last outcome was a failure |
//! | Open → Closed, Closed → HalfOpen | never |
//!
//! And while Open, `allow` refuses every call. The checker judges the edges a breaker takes, not
//! the ones it could have taken: a breaker that opens later than its threshold is not reported.
//! Feed it [`Outcome::call_status`] / [`Outcome::stream_end_status`] from the status the client saw:
//! tonic reports an expired deadline as CANCELLED "Timeout expired", which they read as a
//! deadline (a failure), not as a caller's cancel.
//!
//! What counts as a failure is the model's, not your breaker's ([`Outcome::is_failure`]): a call
//! that ended UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, UNKNOWN or RESOURCE_EXHAUSTED, or a stream
//! that ended with such a status. A stream the server ended with OK — what a server that drains
//! for a rollout does after its GOAWAY — is not a failure, nor a success: it leaves the count of
//! consecutive failures as it was. Any status the application chose (NOT_FOUND,
//! INVALID_ARGUMENT…) is a success: the service answered. A breaker that counts those opens while a healthy replica
//! exists, and refuses requests it could serve: [`Checked`] reports the edge as illegal.

use std::time::Duration;

use sim::report::Failure;
use sim::run::Ctx;

/// The oracle of the breaker's own checks: its state changes follow its rules.
pub const BREAKER: sim::Oracle = sim::Oracle::new("breaker");

/// A breaker's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go out; outcomes are counted.
    Closed,
    /// Calls are refused until the cooldown passes.
    Open,
    /// Trial calls go out; the next outcome decides.
    HalfOpen,
}

/// What a call or stream that went out ended with, as fed to a breaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The status code.
    pub code: tonic::Code,
    /// Whether it was a stream ending (rather than a unary call's answer).
    pub stream_end: bool,
}

impl Outcome {
    /// A unary call's outcome.
    pub fn call(code: tonic::Code) -> Outcome {
        Outcome { code, stream_end: false }
    }

    /// A stream's end.
    pub fn stream_end(code: tonic::Code) -> Outcome {
        Outcome { code, stream_end: true }
    }

    /// A unary call's outcome from the status the client saw. tonic reports an expired deadline
    /// (`grpc-timeout` or `Endpoint::timeout`) as CANCELLED "Timeout expired" (see the fault →
    /// status table); this reads it as DEADLINE_EXCEEDED, a failure, unlike a caller's cancel.
    pub fn call_status(status: &tonic::Status) -> Outcome {
        Outcome::call(deadline_aware(status))
    }

    /// A stream's end from the status the client saw (`None`: the stream ended with OK).
    pub fn stream_end_status(status: Option<&tonic::Status>) -> Outcome {
        Outcome::stream_end(status.map_or(tonic::Code::Ok, deadline_aware))
    }

    /// The model's classification (see the module docs).
    pub fn is_failure(&self) -> bool {
        use tonic::Code;
        matches!(
            self.code,
            Code::Unavailable | Code::DeadlineExceeded | Code::Internal | Code::Unknown | Code::ResourceExhausted
        )
    }
}

fn deadline_aware(status: &tonic::Status) -> tonic::Code {
    if status.code() == tonic::Code::Cancelled && status.message() == "Timeout expired" {
        tonic::Code::DeadlineExceeded
    } else {
        status.code()
    }
}

/// A client-side circuit breaker (yours).
pub trait Breaker: Send {
    /// Whether a call may go out at `now` (fake time since the run started); may move Open →
    /// HalfOpen.
    fn allow(&mut self, now: Duration) -> bool;

    /// Feeds the outcome of a call or stream that went out.
    fn record(&mut self, outcome: &Outcome, now: Duration);

    /// The current state.
    fn state(&self) -> BreakerState;
}

/// What a breaker promises: the numbers its edges depend on.
#[derive(Clone, Copy, Debug)]
pub struct BreakerSpec {
    /// Consecutive failures that open it.
    pub failure_threshold: u32,
    /// How long it stays open before a trial.
    pub cooldown: Duration,
}

/// A breaker whose every state change is recorded and judged (see the module docs); an illegal
/// edge fails the run (oracle `breaker`).
pub struct Checked<B> {
    inner: B,
    spec: BreakerSpec,
    ctx: Ctx,
    name: String,
    /// Consecutive model failures since the breaker last closed or was last fed a success.
    failures: u32,
    /// Outcomes fed since then, for the report.
    recent: Vec<String>,
    opened_at: Option<Duration>,
    last_failure: Option<bool>,
}

impl<B> std::fmt::Debug for Checked<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked").field("name", &self.name).field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl<B: Breaker> Checked<B> {
    /// Checks `inner`, named `name` in the history, against `spec`.
    pub fn new(ctx: &Ctx, name: &str, spec: BreakerSpec, inner: B) -> Checked<B> {
        Checked {
            inner,
            spec,
            ctx: ctx.clone(),
            name: name.to_string(),
            failures: 0,
            recent: Vec::new(),
            opened_at: None,
            last_failure: None,
        }
    }

    /// The checked breaker.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn judge(&mut self, from: BreakerState, to: BreakerState, now: Duration) {
        if from == to {
            return;
        }
        use BreakerState::{Closed, HalfOpen, Open};
        let illegal = match (from, to) {
            (Closed, Open) if self.failures < self.spec.failure_threshold => Some(format!(
                "opened after {} consecutive failures by the model, below its threshold of {} (last outcomes: {})",
                self.failures,
                self.spec.failure_threshold,
                self.recent.join(", ")
            )),
            (Open, HalfOpen) => match self.opened_at {
                Some(at) if now.saturating_sub(at) < self.spec.cooldown => Some(format!(
                    "half-opened {:?} after opening, before its cooldown of {:?}",
                    now.saturating_sub(at),
                    self.spec.cooldown
                )),
                _ => None,
            },
            (HalfOpen, Closed) if self.last_failure != Some(false) => {
                Some("closed from half-open without a success".to_string())
            }
            (HalfOpen, Open) if self.last_failure != Some(true) => {
                Some("reopened from half-open without a failure".to_string())
            }
            (Open, Closed) | (Closed, HalfOpen) => Some(format!("{from:?} -> {to:?} is not an edge of the model")),
            _ => None,
        };
        if to == Open {
            self.opened_at = Some(now);
        }
        if to == Closed {
            self.failures = 0;
            self.recent.clear();
        }
        let legal = if illegal.is_some() { "illegal" } else { "legal" };
        self.ctx.record("grpc.breaker", &self.name, format!("{from:?} -> {to:?} ({legal})"));
        if let Some(why) = illegal {
            self.ctx.fail(Failure::correctness(BREAKER, format!("breaker {}: {from:?} -> {to:?}: {why}", self.name)));
        }
    }
}

impl<B: Breaker> Breaker for Checked<B> {
    fn allow(&mut self, now: Duration) -> bool {
        let from = self.inner.state();
        let allowed = self.inner.allow(now);
        let to = self.inner.state();
        self.judge(from, to, now);
        if allowed && to == BreakerState::Open {
            self.ctx.record("grpc.breaker", &self.name, "let a call through while Open (illegal)");
            self.ctx.fail(Failure::correctness(
                BREAKER,
                format!("breaker {}: let a call through while Open: calls are refused until the cooldown", self.name),
            ));
        }
        allowed
    }

    fn record(&mut self, outcome: &Outcome, now: Duration) {
        // A clean stream end is neither a failure nor a success: it leaves the count alone.
        if outcome.is_failure() {
            self.failures += 1;
            self.last_failure = Some(true);
        } else if outcome.stream_end {
            self.last_failure = None;
        } else {
            self.failures = 0;
            self.last_failure = Some(false);
        }
        self.recent.push(format!("{}{:?}", if outcome.stream_end { "stream end " } else { "" }, outcome.code));
        if self.recent.len() > 8 {
            self.recent.remove(0);
        }
        let from = self.inner.state();
        self.inner.record(outcome, now);
        let to = self.inner.state();
        self.judge(from, to, now);
    }

    fn state(&self) -> BreakerState {
        self.inner.state()
    }
}
