//! Oracles: checks that judge a run.
//!
//! A [`Check`] sees every history event as it is recorded (per-event safety) and the whole run at
//! the end (final checks). It answers with a [`Verdict`]: a violation fails the run with class
//! *correctness* and the check's name as the oracle; an *excused* violation (a dependency broke its
//! own guarantee, or a stated precondition was broken) is recorded and reported without failing
//! the sweep. Install checks with [`Ctx::add_check`]; final checks run when the body returns `Ok`.
//! Checks may record events themselves: they are delivered to every check right after the
//! dispatch that recorded them (see [`Check`]).
//!
//! Built-in oracles:
//! - [`idempotency`]: every idempotency key took effect at most once, and exactly once if an
//!   operation declaring that effect ([`crate::workload::Operation::declares_effect`]) was acknowledged
//!   with that key; indeterminate outcomes must be resolved by a retry with the same key (effects
//!   are recorded with [`effect`]);
//! - [`failed_took_no_effect`] (run by [`idempotency`] too): Jepsen's rule that an operation
//!   reported as failed took no effect — an effect under its key that no acknowledged or
//!   indeterminate operation explains fails the run (oracle `failed-took-no-effect`);
//! - [`OneResponse`]: every request ends with exactly one response or transport error (requests
//!   are recorded with the run's [`RequestLog`]);
//! - the node lifecycle oracles live with the nodes ([`crate::node`]): the exit cause matches the
//!   lifecycle event sent, SIGTERM drains in-flight requests, and no task outlives its node;
//! - a recovered panic fails the run unless allowed ([`crate::Simulation::allow_recovered_panics`]);
//! - [`liveness`]: after healing, an operation succeeds within a bound computed from the system's
//!   settings ([`LivenessBound`]);
//! - [`list_append`]: a Jepsen-style list-append checker for logs (appends, reads at offsets,
//!   live subscribers) over a recorded history, as a function and as a check
//!   ([`list_append::ListAppend`]);
//! - [`linearizable`]: a linearizability checker (Wing & Gong / Lowe's search, as in Porcupine
//!   and Knossos) for registers, compare-and-set registers and key-value maps, per key, or any
//!   sequential [`linearizable::Model`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::history::Entry;
use crate::report::{Class, Failure};
use crate::run::Ctx;
use crate::workload::{OpOutcome, OpRecord};

pub mod linearizable;
pub mod list_append;

pub use crate::checks::Verdict;

/// An oracle over a run (see the module docs).
///
/// A check may record events itself ([`Ctx::record`]), from [`Check::on_event`] and from
/// [`Check::finish`]: such an event is queued and, once the current dispatch is over, delivered to
/// every check's `on_event` (the recording check's too) in the order recorded. A check may also
/// install other checks ([`Ctx::add_check`]); they see the events recorded after that dispatch.
pub trait Check: Send {
    /// The oracle's name, as failures report it.
    fn name(&self) -> &str;

    /// Called for every history event, as it is recorded (an event recorded by a check: right
    /// after the dispatch that recorded it), of the kinds it [`wants`](Check::wants).
    fn on_event(&mut self, _event: &Entry) -> Verdict {
        Verdict::Pass
    }

    /// Whether [`Check::on_event`] is to see events of this kind (by default, every kind). A
    /// check that reads a few kinds says which: the run then makes no copy of an event no check
    /// wants. Asked when the event is recorded, outside any dispatch: an event recorded from
    /// inside a check's callback goes to every check, wanted or not.
    fn wants(&self, _kind: &str) -> bool {
        true
    }

    /// Called once when the run's body returned `Ok`, in the order the checks were installed.
    /// Events it records are delivered to every check's `on_event` before the next check's
    /// `finish`, and a violation they draw fails the run.
    fn finish(&mut self, _ctx: &Ctx) -> Verdict {
        Verdict::Pass
    }
}

/// The registry ([`crate::checks`]) sees a check through this.
impl<T: Check> crate::checks::Observer<Ctx> for T {
    fn name(&self) -> &str {
        Check::name(self)
    }
    fn on_event(&mut self, event: &Entry) -> Verdict {
        Check::on_event(self, event)
    }
    fn wants(&self, kind: &str) -> bool {
        Check::wants(self, kind)
    }
    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        Check::finish(self, ctx)
    }
}

impl Ctx {
    /// Installs an oracle for the rest of the run (see [`crate::check`]).
    pub fn add_check(&self, check: impl Check + 'static) {
        self.shared.checks.add(Box::new(check));
    }
}

/// The run's ledger of effects: what services did, by idempotency key. Services write it with
/// [`effect`]; read it with [`Ctx::extension`] (one ledger per run):
///
/// ```
/// use sim::check::{self, Effects};
///
/// fn charge(ctx: &sim::Ctx, idempotency_key: &str) {
///     // In the service, once the effect is taken:
///     check::effect(ctx, "charge", idempotency_key, "card 42: 10 EUR");
/// }
///
/// fn charged_once(ctx: &sim::Ctx, idempotency_key: &str) -> bool {
///     // In an oracle: (detail, fake time) of each effect of that kind under the key.
///     ctx.extension::<Effects>().of_kind(idempotency_key, "charge").len() == 1
/// }
/// # let _ = (charge, charged_once);
/// ```
#[derive(Default, Debug)]
pub struct Effects {
    by_key: Mutex<BTreeMap<String, Vec<EffectEntry>>>,
}

#[derive(Clone, Debug)]
struct EffectEntry {
    kind: String,
    detail: String,
    at: Duration,
}

impl Effects {
    /// The effects recorded for a key: (`"<kind> <detail>"`, when).
    pub fn of(&self, key: &str) -> Vec<(String, Duration)> {
        self.by_key
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map(|list| list.iter().map(|e| (format!("{} {}", e.kind, e.detail), e.at)).collect())
            .unwrap_or_default()
    }

    /// The effects of one kind recorded for a key: (detail, when).
    pub fn of_kind(&self, key: &str, kind: &str) -> Vec<(String, Duration)> {
        self.by_key
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map(|list| list.iter().filter(|e| e.kind == kind).map(|e| (e.detail.clone(), e.at)).collect())
            .unwrap_or_default()
    }

    /// Every key with its effects (`"<kind> <detail>"`, when).
    pub fn all(&self) -> BTreeMap<String, Vec<(String, Duration)>> {
        let by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        by_key
            .iter()
            .map(|(key, list)| (key.clone(), list.iter().map(|e| (format!("{} {}", e.kind, e.detail), e.at)).collect()))
            .collect()
    }
}

/// Records that a service took an effect (charged a card, wrote an order) under an idempotency key:
/// in the history (`effect.<kind>`) and in the run's [`Effects`] ledger.
pub fn effect(ctx: &Ctx, kind: &str, key: &str, detail: impl AsRef<str>) {
    ctx.record(&format!("effect.{kind}"), key, detail.as_ref());
    let effects = ctx.extension::<Effects>();
    effects.by_key.lock().unwrap_or_else(|p| p.into_inner()).entry(key.to_string()).or_default().push(EffectEntry {
        kind: kind.to_string(),
        detail: detail.as_ref().to_string(),
        at: ctx.elapsed(),
    });
}

/// The idempotency oracle for effects of `kind` ([`effect`]):
/// - **at most once**: no key took effect of `kind` more than once;
/// - **exactly once when acknowledged**: an operation that declared `kind`
///   ([`crate::workload::Operation::declares_effect`]) and ended [`OpOutcome::Ok`] took exactly one effect
///   of `kind` under its key. Keys whose every operation was indeterminate may have taken effect
///   once or not at all; operations that do not declare `kind` (reads) are not expected to take
///   it;
/// - **failed means no effect** (Jepsen's rule for `:fail`), checked last by
///   [`failed_took_no_effect`]: an effect under a key whose operations include one reported
///   [`OpOutcome::Failed`] must be explained by an acknowledged or indeterminate operation.
///
/// The link between operations and effects is that declaration, never the text of an outcome.
///
/// # Errors
/// A correctness failure of oracle `idempotency` naming the key, its effects and its operations;
/// also when no operation of the run's workloads declares `kind` (the oracle could not tell which
/// acknowledged operations must have taken it). A failed operation that took effect is a
/// correctness failure of oracle `failed-took-no-effect` ([`failed_took_no_effect`]).
pub fn idempotency(ctx: &Ctx, records: &[OpRecord], kind: &str) -> Result<(), Failure> {
    declared(ctx, records, kind, "idempotency")?;
    let effects = ctx.extension::<Effects>();
    let by_key = by_key(records);
    for key in effects.all().keys() {
        let taken = effects.of_kind(key, kind);
        if taken.len() > 1 {
            let list: Vec<String> = taken.iter().map(|(detail, at)| format!("{kind} {detail} at {at:?}")).collect();
            return Err(Failure::correctness(
                crate::oracle::Oracle::IDEMPOTENCY,
                format!(
                    "key {key} took effect {} times: {} (operations: {})",
                    taken.len(),
                    list.join(", "),
                    describe_ops(&by_key, key)
                ),
            ));
        }
    }
    for r in records {
        if r.outcome.is_ok() && r.effects.iter().any(|k| k == kind) && effects.of_kind(&r.key, kind).is_empty() {
            return Err(Failure::correctness(
                crate::oracle::Oracle::IDEMPOTENCY,
                format!(
                    "key {} was acknowledged but took no {kind} effect (operations: {})",
                    r.key,
                    describe_ops(&by_key, &r.key)
                ),
            ));
        }
    }
    failed_took_no_effect(ctx, records, kind)
}

/// Jepsen's rule "an operation reported as failed took no effect", for effects of `kind`
/// ([`effect`]) and the operations that declare it ([`crate::workload::Operation::declares_effect`]).
///
/// For each effect of `kind` recorded under a key that has an operation reported
/// [`OpOutcome::Failed`], some other operation of that key must explain it: one that was
/// acknowledged ([`OpOutcome::Ok`]) and was running when the effect was recorded (started at or
/// before it, ended at or after it), or one that was indeterminate and had started by then (its
/// effect may land any time later, Jepsen's `:info`). An effect no such operation explains, at a
/// time a failed operation of the key had started, was taken by a failed operation: a
/// correctness failure. (A non-idempotent retry whose first attempt was reported failed, after
/// the service had in fact applied it, is the case this catches.) Where a failed and an
/// acknowledged operation of the key both cover the effect's instant, the effect is credited to
/// the acknowledged one: the rule stays quiet rather than guess.
///
/// Run by [`idempotency`] after its own rules; callable on its own.
///
/// # Errors
/// A correctness failure of oracle `failed-took-no-effect` naming the failed operation, its key,
/// the effect and when it was recorded, and the key's operations; also (oracle
/// `failed-took-no-effect`) when no operation declares `kind`.
pub fn failed_took_no_effect(ctx: &Ctx, records: &[OpRecord], kind: &str) -> Result<(), Failure> {
    const ORACLE: &str = "failed-took-no-effect";
    declared(ctx, records, kind, ORACLE)?;
    let effects = ctx.extension::<Effects>();
    let by_key = by_key(records);
    for (key, ops) in &by_key {
        let declaring: Vec<&&OpRecord> = ops.iter().filter(|r| r.effects.iter().any(|k| k == kind)).collect();
        if !declaring.iter().any(|r| matches!(r.outcome, OpOutcome::Failed(_))) {
            continue;
        }
        for (detail, at) in effects.of_kind(key, kind) {
            let explained = declaring.iter().any(|r| match r.outcome {
                OpOutcome::Ok(_) => r.started <= at && at <= r.ended,
                OpOutcome::Indeterminate(_) => r.started <= at,
                OpOutcome::Failed(_) => false,
            });
            if explained {
                continue;
            }
            let culprit = declaring.iter().find(|r| matches!(r.outcome, OpOutcome::Failed(_)) && r.started <= at);
            if let Some(r) = culprit {
                let OpOutcome::Failed(why) = &r.outcome else { unreachable!("found as failed") };
                return Err(Failure::correctness(
                    ORACLE,
                    format!(
                        "operation {}#{} (key {key}, client {}) was reported failed ({why:?}) but took effect: \
                         {kind} {detail} at {at:?}, which no acknowledged or indeterminate operation of the key \
                         explains (operations: {})",
                        r.name,
                        r.id,
                        r.client,
                        describe_ops(&by_key, key)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Fails (as `oracle`) when no operation of the run declares the effect kind.
fn declared(ctx: &Ctx, records: &[OpRecord], kind: &str, oracle: &str) -> Result<(), Failure> {
    let declared = ctx.extension::<crate::workload::DeclaredEffects>().contains(kind)
        || records.iter().any(|r| r.effects.iter().any(|k| k == kind));
    if declared {
        return Ok(());
    }
    Err(Failure::correctness(
        oracle,
        format!(
            "no operation declares the effect kind {kind:?}: declare it with Operation::declares_effect({kind:?}) on the \
             operations whose acknowledgement means one such effect"
        ),
    ))
}

fn by_key(records: &[OpRecord]) -> BTreeMap<&str, Vec<&OpRecord>> {
    let mut by_key: BTreeMap<&str, Vec<&OpRecord>> = BTreeMap::new();
    for r in records {
        by_key.entry(r.key.as_str()).or_default().push(r);
    }
    by_key
}

fn describe_ops(by_key: &BTreeMap<&str, Vec<&OpRecord>>, key: &str) -> String {
    by_key
        .get(key)
        .map(|v| {
            v.iter()
                .map(|r| format!("{}#{} {:?} [{:?}, {:?}]", r.name, r.id, r.outcome, r.started, r.ended))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

#[derive(Default, Debug)]
struct RequestState {
    next: u64,
    open: BTreeMap<u64, (String, Duration)>,
    ended: BTreeMap<u64, u32>,
}

/// The run's one request log's state (a run extension, so every handle shares it).
#[derive(Default, Debug)]
struct RequestLogState(Mutex<RequestState>);

/// The run's log of requests and how each ended, for [`OneResponse`]: call [`RequestLog::start`]
/// before sending and [`RequestLog::end`] with the response or the transport error (a dropped
/// guard records the request as abandoned by its client).
///
/// There is one log per run, with one id space (`req#1`, `req#2`, …): every handle comes from
/// [`RequestLog::of`], so requests recorded anywhere in the run are the ones [`OneResponse`]
/// checks. There is no other constructor:
///
/// ```compile_fail,E0599
/// let separate = sim::check::RequestLog::default();
/// ```
#[derive(Clone, Debug)]
pub struct RequestLog {
    state: Arc<RequestLogState>,
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
        RequestLog { state: ctx.extension::<RequestLogState>() }
    }

    /// Records a request being sent.
    pub fn start(&self, ctx: &Ctx, what: &str) -> Pending {
        let mut st = self.state.0.lock().unwrap_or_else(|p| p.into_inner());
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
        let mut st = self.state.0.lock().unwrap_or_else(|p| p.into_inner());
        st.open.remove(&id);
        *st.ended.entry(id).or_default() += 1;
        drop(st);
        ctx.record("http.end", &format!("req#{id}"), how);
    }

    /// Requests with no end yet: (id, what, sent at).
    pub fn open(&self) -> Vec<(u64, String, Duration)> {
        self.state
            .0
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

    fn wants(&self, kind: &str) -> bool {
        kind == "http.end"
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

/// The parts a liveness bound is made of, each named after the setting it comes from. Displays as
/// `3.2s = client timeout 1s + retry backoff cap 2.2s`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

    /// The parts, in order: (what, how long).
    pub fn parts(&self) -> &[(String, Duration)] {
        &self.parts
    }

    fn describe(&self) -> String {
        if self.parts.is_empty() {
            return "nothing".to_string();
        }
        self.parts.iter().map(|(w, d)| format!("{w} {d:?}")).collect::<Vec<_>>().join(" + ")
    }
}

impl std::fmt::Display for LivenessBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} = {}", self.total(), self.describe())
    }
}

/// Liveness: after the system was healed, `attempt` must succeed within `bound` (tried again
/// 100 ms after each failure, until the bound). Fake time. An attempt still running when the
/// bound runs out is cut off (dropped).
///
/// # Errors
/// A liveness failure of oracle `progress` with the bound's parts and the last attempt's outcome
/// (or that it was still running when the bound ran out).
pub async fn liveness<F, Fut>(ctx: &Ctx, bound: &LivenessBound, mut attempt: F) -> Result<(), Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = OpOutcome>,
{
    let total = bound.total();
    let deadline = tokio::time::Instant::now() + total;
    ctx.record("liveness.start", "system", format!("bound {total:?} = {}", bound.describe()));
    let mut last = "none (the bound is zero)".to_string();
    let mut attempts = 0u64;
    while tokio::time::Instant::now() < deadline {
        let started = ctx.elapsed();
        attempts += 1;
        match tokio::time::timeout_at(deadline, attempt()).await {
            Ok(outcome) if outcome.is_ok() => {
                ctx.record("liveness.ok", "system", format!("{outcome:?}"));
                return Ok(());
            }
            Ok(outcome) => last = format!("{outcome:?}"),
            Err(_) => {
                last = format!(
                    "still running when the bound ran out (started at {started:?}, cut off after {:?})",
                    ctx.elapsed().saturating_sub(started)
                );
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Failure::new(
        Class::Liveness,
        format!(
            "no progress within {total:?} ({}) after healing; {attempts} attempt(s), the last: {last}",
            bound.describe()
        ),
    )
    .oracle(crate::oracle::Oracle::PROGRESS))
}

#[cfg(test)]
mod run_state_tests {
    use std::sync::{Arc, Mutex, Weak};

    use super::{Check, Verdict};
    use crate::history::Entry;
    use crate::run::{Ctx, Shared, Simulation};

    /// A check that holds its run's `Ctx`, as a user's oracle may.
    struct HoldsCtx(#[allow(dead_code)] Ctx);

    impl Check for HoldsCtx {
        fn name(&self) -> &str {
            "holds-ctx"
        }
        fn on_event(&mut self, _event: &Entry) -> Verdict {
            Verdict::Pass
        }
    }

    /// An extension that holds its run's `Ctx`, as a walkthrough's client registry does.
    #[derive(Default)]
    struct CtxSlot(Mutex<Option<Ctx>>);

    /// A run whose check and extension hold its `Ctx` (a cycle through the run's shared state)
    /// must still free that state once judged: a sweep of many seeds would otherwise keep every
    /// run's history, network and nodes (it grew by ~0.7 MB a seed in orderstatus).
    #[test]
    fn a_run_whose_check_and_extension_hold_its_ctx_is_freed_after_it_is_judged() {
        static RUNS: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());
        let report = Simulation::new("run_state_is_freed").seeds(0..4u64).confirm(0).progress(false).jobs(2).run(
            |ctx: Ctx| async move {
                RUNS.lock().unwrap().push(Arc::downgrade(&ctx.shared));
                ctx.add_check(HoldsCtx(ctx.clone()));
                *ctx.extension::<CtxSlot>().0.lock().unwrap() = Some(ctx.clone());
                ctx.record("op", "client", "write 1");
                Ok(())
            },
        );
        report.assert_passed();
        let runs = RUNS.lock().unwrap();
        assert_eq!(runs.len(), 4);
        for (i, run) in runs.iter().enumerate() {
            assert!(
                run.upgrade().is_none(),
                "run {i}: its shared state outlived the run ({} strong)",
                run.strong_count()
            );
        }
    }
}
