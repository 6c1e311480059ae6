//! Oracles: checks that judge a run.
//!
//! A [`Check`] sees every history event as it is recorded (per-event safety) and the whole run at
//! the end (final checks). It answers with a [`Verdict`]: a violation fails the run with class
//! *correctness* and the check's name as the oracle; an *excused* violation (a dependency broke its
//! own guarantee, or a stated precondition was broken) is recorded and reported without failing
//! the sweep. Install checks with [`Ctx::add_check`]; final checks run when the body returns `Ok`.
//!
//! Built-in oracles:
//! - [`idempotency`]: every idempotency key took effect at most once, and exactly once if an
//!   operation with that key was acknowledged; indeterminate outcomes must be resolved by a
//!   retry with the same key (effects are recorded with [`effect`]);
//! - [`OneResponse`]: every request ends with exactly one response or transport error (requests
//!   are recorded with [`RequestLog`]);
//! - the node lifecycle oracles live with the nodes ([`crate::node`]): the exit cause matches the
//!   lifecycle event sent, SIGTERM drains in-flight requests, and no task outlives its node;
//! - a recovered panic fails the run unless allowed ([`crate::Simulation::allow_recovered_panics`]);
//! - [`liveness`]: after healing, an operation succeeds within a bound computed from the system's
//!   settings ([`LivenessBound`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Ctx;
use crate::history::Entry;
use crate::report::{Class, Failure};
use crate::workload::{OpOutcome, OpRecord};

/// A check's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing wrong.
    Pass,
    /// The guarantee was violated: fails the run.
    Violation(String),
    /// A violation excused by a broken precondition or a dependency's own fault: reported, does
    /// not fail the sweep.
    Excused(String),
}

/// An oracle over a run (see the module docs).
pub trait Check: Send {
    /// The oracle's name, as failures report it.
    fn name(&self) -> &str;

    /// Called for every history event, as it is recorded. Must not record events itself.
    fn on_event(&mut self, _event: &Entry) -> Verdict {
        Verdict::Pass
    }

    /// Called once when the run's body returned `Ok`.
    fn finish(&mut self, _ctx: &Ctx) -> Verdict {
        Verdict::Pass
    }
}

/// The checks of one run and where their verdicts go.
#[derive(Default)]
pub(crate) struct Checks {
    list: Mutex<Vec<Box<dyn Check>>>,
    excused: Mutex<Vec<Failure>>,
}

thread_local! {
    static DISPATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Checks {
    pub(crate) fn add(&self, check: Box<dyn Check>) {
        self.list.lock().unwrap_or_else(|p| p.into_inner()).push(check);
    }

    /// Runs every check on one event; returns the first violation.
    pub(crate) fn on_event(&self, event: &Entry) -> Option<Failure> {
        if DISPATCHING.with(|d| d.replace(true)) {
            return None;
        }
        let mut violation = None;
        {
            let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
            for check in list.iter_mut() {
                match check.on_event(event) {
                    Verdict::Pass => {}
                    Verdict::Violation(m) => {
                        violation.get_or_insert(Failure::correctness(check.name(), m));
                    }
                    Verdict::Excused(m) => {
                        self.excused.lock().unwrap_or_else(|p| p.into_inner()).push(Failure::excused(check.name(), m))
                    }
                }
            }
        }
        DISPATCHING.with(|d| d.set(false));
        violation
    }

    /// Runs every final check; returns the first violation.
    pub(crate) fn finish(&self, ctx: &Ctx) -> Option<Failure> {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let mut violation = None;
        for check in list.iter_mut() {
            match check.finish(ctx) {
                Verdict::Pass => {}
                Verdict::Violation(m) => {
                    violation.get_or_insert(Failure::correctness(check.name(), m));
                }
                Verdict::Excused(m) => {
                    self.excused.lock().unwrap_or_else(|p| p.into_inner()).push(Failure::excused(check.name(), m))
                }
            }
        }
        violation
    }

    /// The first excused violation, if any.
    pub(crate) fn excused(&self) -> Option<Failure> {
        self.excused.lock().unwrap_or_else(|p| p.into_inner()).first().cloned()
    }
}

/// The run's ledger of effects: what services did, by idempotency key.
#[derive(Default, Debug)]
pub struct Effects {
    by_key: Mutex<BTreeMap<String, Vec<(String, Duration)>>>,
}

impl Effects {
    /// The effects recorded for a key: (what, when).
    pub fn of(&self, key: &str) -> Vec<(String, Duration)> {
        self.by_key.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned().unwrap_or_default()
    }

    /// Every key with its effects.
    pub fn all(&self) -> BTreeMap<String, Vec<(String, Duration)>> {
        self.by_key.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Records that a service took an effect (charged a card, wrote an order) under an idempotency key:
/// in the history (`effect.<kind>`) and in the run's [`Effects`] ledger.
pub fn effect(ctx: &Ctx, kind: &str, key: &str, detail: impl AsRef<str>) {
    ctx.record(&format!("effect.{kind}"), key, detail.as_ref());
    let effects = ctx.extension::<Effects>();
    effects
        .by_key
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key.to_string())
        .or_default()
        .push((format!("{kind} {}", detail.as_ref()), ctx.elapsed()));
}

/// The idempotency oracle over the operations whose keys took effects of `kind`: a key took
/// effect at most once; a key an acknowledged operation used took effect exactly once. Keys
/// whose every operation was indeterminate may have taken effect once or not at all.
///
/// # Errors
/// A correctness failure of oracle `idempotency` naming the key, its effects and its operations.
pub fn idempotency(ctx: &Ctx, records: &[OpRecord], kind: &str) -> Result<(), Failure> {
    let effects = ctx.extension::<Effects>();
    let prefix = format!("{kind} ");
    let mut by_key: BTreeMap<&str, Vec<&OpRecord>> = BTreeMap::new();
    for r in records {
        by_key.entry(r.key.as_str()).or_default().push(r);
    }
    for (key, list) in effects.all() {
        let count = list.iter().filter(|(what, _)| what.starts_with(&prefix)).count();
        if count > 1 {
            let ops: Vec<String> = by_key
                .get(key.as_str())
                .map(|v| v.iter().map(|r| format!("#{} {:?}", r.id, r.outcome)).collect())
                .unwrap_or_default();
            return Err(Failure::correctness(
                "idempotency",
                format!("key {key} took effect {count} times: {list:?} (operations: {})", ops.join(", ")),
            ));
        }
    }
    for (key, ops) in &by_key {
        let acknowledged = ops.iter().any(|r| r.outcome.is_ok());
        let count = effects.of(key).iter().filter(|(what, _)| what.starts_with(&prefix)).count();
        let relevant = ops.iter().any(|r| matches!(&r.outcome, OpOutcome::Ok(v) if v.starts_with(kind)));
        if acknowledged && relevant && count == 0 {
            return Err(Failure::correctness(
                "idempotency",
                format!("key {key} was acknowledged but took no {kind} effect"),
            ));
        }
    }
    Ok(())
}

#[derive(Default, Debug)]
struct RequestState {
    next: u64,
    open: BTreeMap<u64, (String, Duration)>,
    ended: BTreeMap<u64, u32>,
}

/// A log of requests and how each ended, for [`OneResponse`]: call [`RequestLog::start`] before
/// sending and [`RequestLog::end`] with the response or the transport error (a dropped guard
/// records the request as abandoned by its client).
#[derive(Clone, Default, Debug)]
pub struct RequestLog {
    state: Arc<Mutex<RequestState>>,
}

/// One open request of a [`RequestLog`].
#[derive(Debug)]
#[must_use = "end the request with RequestLog::end"]
pub struct Pending {
    log: RequestLog,
    id: u64,
    ctx: Ctx,
    done: bool,
}

impl RequestLog {
    /// The run's request log.
    pub fn of(ctx: &Ctx) -> RequestLog {
        (*ctx.extension::<RequestLog>()).clone()
    }

    /// Records a request being sent.
    pub fn start(&self, ctx: &Ctx, what: &str) -> Pending {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.next += 1;
        let id = st.next;
        st.open.insert(id, (what.to_string(), ctx.elapsed()));
        drop(st);
        ctx.record("http.request", &format!("req#{id}"), what);
        Pending { log: self.clone(), id, ctx: ctx.clone(), done: false }
    }

    /// Records how a request ended: `Ok(status)` or `Err(transport error)`.
    pub fn end(&self, mut pending: Pending, result: Result<u16, String>) {
        pending.done = true;
        self.finish(
            &pending.ctx,
            pending.id,
            &match result {
                Ok(status) => format!("response {status}"),
                Err(e) => format!("transport error: {e}"),
            },
        );
    }

    fn finish(&self, ctx: &Ctx, id: u64, how: &str) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.open.remove(&id);
        *st.ended.entry(id).or_default() += 1;
        drop(st);
        ctx.record("http.end", &format!("req#{id}"), how);
    }

    /// Requests with no end yet: (id, what, sent at).
    pub fn open(&self) -> Vec<(u64, String, Duration)> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open
            .iter()
            .map(|(id, (w, t))| (*id, w.clone(), *t))
            .collect()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            self.log.finish(&self.ctx, self.id, "abandoned by the client");
        }
    }
}

/// The oracle "exactly one response or transport error per request", over the run's
/// [`RequestLog`]: a request ending twice fails at once; one still open when the run ends fails
/// the final check.
#[derive(Debug, Default)]
pub struct OneResponse {
    ends: BTreeMap<String, u32>,
}

impl Check for OneResponse {
    fn name(&self) -> &str {
        "one-response"
    }

    fn on_event(&mut self, event: &Entry) -> Verdict {
        if event.kind == "http.end" {
            let n = self.ends.entry(event.identity.clone()).or_default();
            *n += 1;
            if *n > 1 {
                return Verdict::Violation(format!("{} ended {} times (last: {})", event.identity, n, event.detail));
            }
        }
        Verdict::Pass
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        let open = RequestLog::of(ctx).open();
        match open.first() {
            None => Verdict::Pass,
            Some((id, what, at)) => Verdict::Violation(format!(
                "req#{id} ({what}, sent at {at:?}) never got a response or a transport error"
            )),
        }
    }
}

/// The parts a liveness bound is made of, each named after the setting it comes from.
#[derive(Clone, Debug, Default)]
pub struct LivenessBound {
    parts: Vec<(String, Duration)>,
}

impl LivenessBound {
    /// An empty bound.
    pub fn new() -> LivenessBound {
        LivenessBound::default()
    }

    /// Adds a setting's worth of time ("client timeout", "retry backoff cap", "readiness").
    pub fn plus(mut self, what: &str, d: Duration) -> LivenessBound {
        self.parts.push((what.to_string(), d));
        self
    }

    /// The bound: the sum of the parts.
    pub fn total(&self) -> Duration {
        self.parts.iter().map(|(_, d)| *d).sum()
    }

    fn describe(&self) -> String {
        self.parts.iter().map(|(w, d)| format!("{w} {d:?}")).collect::<Vec<_>>().join(" + ")
    }
}

/// Liveness: after the system was healed, `attempt` must succeed within `bound` (tried again
/// after each failure, until the bound). Fake time.
///
/// # Errors
/// A liveness failure of oracle `progress` with the bound's parts and the last attempt's outcome.
pub async fn liveness<F, Fut>(ctx: &Ctx, bound: &LivenessBound, mut attempt: F) -> Result<(), Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = OpOutcome>,
{
    let total = bound.total();
    let deadline = tokio::time::Instant::now() + total;
    ctx.record("liveness.start", "system", format!("bound {total:?} = {}", bound.describe()));
    let mut last = OpOutcome::Indeterminate("no attempt".to_string());
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout_at(deadline, attempt()).await {
            Ok(outcome) if outcome.is_ok() => {
                ctx.record("liveness.ok", "system", format!("{outcome:?}"));
                return Ok(());
            }
            Ok(outcome) => last = outcome,
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Failure::new(
        Class::Liveness,
        format!("no progress within {total:?} ({}) after healing; last attempt: {last:?}", bound.describe()),
    )
    .oracle("progress"))
}
