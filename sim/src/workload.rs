//! A workload: typed operations over a user model, started by harness events.
//!
//! An [`Operation`] is a name, a weight and an async body given an [`OpCtx`]: a unique id, an
//! idempotency key, seeded choices, the workload's own host to dial services from, and the
//! model. [`Workload::run`] draws a schedule — which operation starts when, from which client —
//! and starts each as a driver event (so the history records it and the seed orders it). Each
//! ends with an [`OpOutcome`]: ok, failed, or *indeterminate* (Jepsen's `:info`): a timeout or a
//! lost connection means the effect may or may not have happened, and is never counted as a
//! failure.
//!
//! Swarm dimensions: `workload.<op>` (a flag, p = 0.85: some runs leave an operation out;
//! at least one stays), `workload.clients` (1–4 client hosts).
//!
//! `SIM_MAX_OPS=N` ([`crate::Simulation::max_operations`]) caps every [`Workload::run`] at
//! `min(budget.ops, N)` operations: the whole schedule is still drawn, and only the `N` that
//! start first start, at the same times from the same clients with the same ids and choices as
//! in the uncapped run (the others' events fire and do nothing). The run's
//! [`crate::Outcome::operations`] counts the operations started.
//!
//! Edge cases, by design: an operation of weight 0 is never drawn (it can still be run by name
//! with [`Workload::run_one`]); a workload with no operation of weight above 0 runs nothing and
//! returns no records; operations still running at the drain deadline are stopped (their tasks
//! aborted) and recorded as indeterminate.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::driver::Event;
use crate::net::Host;
use crate::run::Ctx;
use crate::seed::Source;

pub use crate::outcome::OpOutcome;

/// An outcome as the `op.end` history event's detail: `ok <v>`, `failed <why>` or
/// `indeterminate <why>`.
fn label(outcome: &OpOutcome) -> String {
    match outcome {
        OpOutcome::Ok(v) => format!("ok {v}"),
        OpOutcome::Failed(v) => format!("failed {v}"),
        OpOutcome::Indeterminate(v) => format!("indeterminate {v}"),
    }
}

/// One operation's record, as [`Workload::run`] and [`Workload::run_one`] return it: what oracles
/// judge (an operation with its invocation and completion times, as in a Jepsen history).
#[derive(Clone, Debug)]
pub struct OpRecord {
    /// Unique within the run, from 1, in start order; the history identity is `<name>#<id>`.
    pub id: u64,
    /// The operation's name ([`Operation::new`]).
    pub name: String,
    /// Its idempotency key (`op-<id>`, or the key of the operation it retries).
    pub key: String,
    /// The client host it ran from (`client-<n>`).
    pub client: String,
    /// When it started: fake time since the run started (the `op.start` event's time).
    pub started: Duration,
    /// When it ended: fake time since the run started (the `op.end` event's time).
    pub ended: Duration,
    /// How it ended.
    pub outcome: OpOutcome,
    /// The effect kinds its operation declared ([`Operation::declares_effect`]).
    pub effects: Vec<String>,
}

/// What an operation's body gets: its identity (`id`, `key`), seeded choices, the client host
/// to dial from, the workload's model and the run.
///
/// ```
/// use sim::workload::{OpCtx, OpOutcome, Operation};
///
/// // A model the operations share: here, how many writes were sent.
/// #[derive(Default)]
/// struct Model {
///     sent: u64,
/// }
///
/// let put = Operation::new("put", 3, |mut op: OpCtx<Model>| async move {
///     let value = op.source().below(100); // seeded: the same value on every replay
///     op.model().sent += 1;
///     // What it sends, in the history and the trace: `op.request put#<id> PUT /kv/a value=…`.
///     op.request(format!("PUT /kv/a value={value} idempotency-key={}", op.idempotency_key()));
///     // A real body dials a service from the client host: `op.host().dial("kv:80").await`.
///     OpOutcome::Ok(format!("stored {value}"))
/// });
/// # let _ = put;
/// ```
pub struct OpCtx<M> {
    id: u64,
    name: String,
    key: String,
    source: Source,
    host: Host,
    model: Arc<Mutex<M>>,
    ctx: Ctx,
}

impl<M> OpCtx<M> {
    /// The operation's unique id within the run (1, 2, … in start order); its history identity
    /// is `<name>#<id>`.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Records what the operation sends — a request, a message — in the history and the trace,
    /// as `op.request <name>#<id> <what>`, between the operation's `op.start` and `op.end`. A
    /// failure naming the operation prints these lines with it ([`crate::trace::Focus`]); call
    /// it once per request (a retry is another request). Being in the history, it counts in the
    /// history hash like every event: the same requests replay the same hash.
    pub fn request(&self, what: impl AsRef<str>) {
        self.ctx.record("op.request", &format!("{}#{}", self.name, self.id), what.as_ref());
    }

    /// Its idempotency key (`op-<id>`, or the key of the operation it retries, see
    /// [`Workload::run_one`]): send it with the request so a retry is recognised, and record the
    /// service's effects under it ([`crate::check::effect`]).
    pub fn idempotency_key(&self) -> &str {
        &self.key
    }

    /// Seeded choices for this operation (stream `workload/op/<id>`): the values it sends, which
    /// key it touches. Draw from here, never from `rand::thread_rng`, so a seed replays.
    pub fn source(&mut self) -> &mut Source {
        &mut self.source
    }

    /// The client host it runs from (`client-0` … `client-3`, drawn by `workload.clients`): dial
    /// services from it (`op.host().dial("kv:80")`, or a hyper client over
    /// [`crate::net::adapters::Connector`]`::new(op.host().clone())`).
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The workload's model, locked (one per [`Workload`], shared by its operations). Do not
    /// hold the guard across an `.await`: take what you need and drop it.
    pub fn model(&self) -> MutexGuard<'_, M> {
        self.model.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run: its history ([`Ctx::record`]), per-run extensions such as the effects ledger
    /// ([`Ctx::extension`]), the network.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}

type OpBody<M> = Arc<dyn Fn(OpCtx<M>) -> Pin<Box<dyn Future<Output = OpOutcome> + Send>> + Send + Sync>;

/// An operation: a name, a weight, a body, and the effects it takes.
pub struct Operation<M> {
    name: String,
    weight: u64,
    body: OpBody<M>,
    effects: Vec<String>,
}

impl<M> Clone for Operation<M> {
    fn clone(&self) -> Self {
        Operation {
            name: self.name.clone(),
            weight: self.weight,
            body: Arc::clone(&self.body),
            effects: self.effects.clone(),
        }
    }
}

impl<M: Send + 'static> Operation<M> {
    /// An operation named `name`, chosen with probability proportional to `weight` (0: never
    /// drawn by [`Workload::run`]).
    pub fn new<F, Fut>(name: &str, weight: u64, body: F) -> Operation<M>
    where
        F: Fn(OpCtx<M>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = OpOutcome> + Send + 'static,
    {
        Operation { name: name.to_string(), weight, body: Arc::new(move |op| Box::pin(body(op))), effects: Vec::new() }
    }

    /// Declares that this operation, when acknowledged ([`OpOutcome::Ok`]), took exactly one
    /// effect of `kind` under its idempotency key (services record it with
    /// [`crate::check::effect`]): what [`crate::check::idempotency`] checks for `kind`.
    pub fn declares_effect(mut self, kind: &str) -> Operation<M> {
        self.effects.push(kind.to_string());
        self
    }
}

/// How much a workload does.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Operations started.
    pub ops: u64,
    /// They start at seeded times in this window of fake time (from when `run` is called).
    pub window: Duration,
    /// How long the workload waits for started operations after the window; those still
    /// running then are stopped and recorded indeterminate.
    pub drain: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { ops: 50, window: Duration::from_secs(20), drain: Duration::from_secs(30) }
    }
}

/// A workload over a model `M`.
pub struct Workload<M> {
    model: Arc<Mutex<M>>,
    /// Shared: each running operation holds the workload.
    ops: Arc<Vec<Operation<M>>>,
    next_id: Arc<Mutex<u64>>,
}

impl<M> Clone for Workload<M> {
    fn clone(&self) -> Self {
        Workload { model: Arc::clone(&self.model), ops: Arc::clone(&self.ops), next_id: Arc::clone(&self.next_id) }
    }
}

impl<M: Send + 'static> Workload<M> {
    /// A workload over `model` with no operations yet.
    pub fn new(model: M) -> Workload<M> {
        Workload { model: Arc::new(Mutex::new(model)), ops: Arc::new(Vec::new()), next_id: Arc::new(Mutex::new(0)) }
    }

    /// Adds an operation.
    pub fn op(mut self, op: Operation<M>) -> Workload<M> {
        Arc::make_mut(&mut self.ops).push(op);
        self
    }

    /// The model.
    pub fn model(&self) -> MutexGuard<'_, M> {
        self.model.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn next_id(&self) -> u64 {
        let mut id = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
        *id += 1;
        *id
    }

    fn declare_effects(&self, ctx: &Ctx) {
        let kinds = self.ops.iter().flat_map(|o| o.effects.iter().cloned());
        ctx.extension::<DeclaredEffects>().declare(kinds);
    }

    /// Runs one operation now, by name whatever its weight, from `client` (optionally retrying
    /// under an existing key), and records it. `None` if there is no operation of that name.
    pub async fn run_one(&self, ctx: &Ctx, name: &str, client: &str, key: Option<String>) -> Option<OpRecord> {
        self.declare_effects(ctx);
        let op = self.ops.iter().find(|o| o.name == name)?.clone();
        Some(run_op(self, ctx, op, client.to_string(), key, &Running::default(), 0).await)
    }

    /// Draws the schedule and runs it: `budget.ops` operations (at most `SIM_MAX_OPS`) at seeded
    /// times in `budget.window`, each a driver event, from `workload.clients` client hosts; waits for them
    /// (at most `budget.drain` after the window) and returns their records in start order.
    /// Operations still running at the drain deadline are stopped (their tasks aborted) and
    /// recorded [`OpOutcome::Indeterminate`]. Operations of weight 0 are never drawn; with none of
    /// weight above 0, nothing runs and no record is returned.
    pub async fn run(&self, ctx: &Ctx, budget: Budget) -> Vec<OpRecord> {
        self.declare_effects(ctx);
        let Some(enabled) = self.enabled(ctx) else {
            return Vec::new();
        };
        let running = Running::default();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let scheduled = self.schedule(ctx, &budget, &enabled, &running, tx);
        let mut records = collect(ctx, &budget, rx, scheduled, &running).await;
        records.sort_by_key(|r| r.id);
        records
    }

    /// The operations this run draws from: those of weight above 0 that the swarm enables
    /// (`workload.<name>`, p = 0.85; the first if it enables none). `None` (recorded) if no
    /// operation has a weight above 0.
    fn enabled(&self, ctx: &Ctx) -> Option<Vec<Operation<M>>> {
        let swarm = ctx.swarm();
        let drawable: Vec<&Operation<M>> = self.ops.iter().filter(|o| o.weight > 0).collect();
        let Some(first) = drawable.first().copied() else {
            ctx.record("workload.empty", "workload", "no operation of weight above 0: nothing to run");
            return None;
        };
        let mut enabled: Vec<&Operation<M>> =
            drawable.iter().copied().filter(|o| swarm.flag(&format!("workload.{}", o.name), 0.85)).collect();
        if enabled.is_empty() {
            enabled = vec![first];
        }
        Some(enabled.into_iter().cloned().collect())
    }

    /// Draws the plan (`budget.ops` operations at seeded times in `budget.window`, from
    /// `workload.clients` client hosts) and schedules each as a driver event; each operation's
    /// record is sent on `tx` when it ends.
    fn schedule(
        &self,
        ctx: &Ctx,
        budget: &Budget,
        enabled: &[Operation<M>],
        running: &Running,
        tx: tokio::sync::mpsc::UnboundedSender<OpRecord>,
    ) -> Vec<crate::driver::EventId> {
        let clients = ctx.swarm().int("workload.clients", 1..=4);
        let weights: Vec<u64> = enabled.iter().map(|o| o.weight).collect();
        let mut plan = ctx.source("workload/plan");
        let start = ctx.elapsed();
        // The whole plan is drawn, capped or not, so the operations that start are the same.
        let drawn: Vec<(Operation<M>, Duration)> = (0..budget.ops)
            .map(|_| {
                let index = plan.weighted(&weights).expect("every weight is above 0");
                (enabled[index].clone(), start + plan.duration(Duration::ZERO..=budget.window))
            })
            .collect();
        // Under `SIM_MAX_OPS` the earliest ones start: the same operations with the same ids
        // (ids go in start order) and so the same choices as the first ones of the uncapped run.
        let mut by_time: Vec<u64> = (0..budget.ops).collect();
        by_time.sort_by_key(|&n| (drawn[n as usize].1, n));
        let starts = ctx.driver().start_operations(budget.ops);
        let started: std::collections::BTreeSet<u64> = by_time.into_iter().take(starts as usize).collect();
        let mut scheduled = Vec::new();
        for (n, (op, at)) in (0..budget.ops).zip(drawn) {
            let client = format!("client-{}", n % clients);
            let event = Event::new("op.schedule", format!("{}@{client}", op.name)).unrecorded();
            if !started.contains(&n) {
                // Drawn, not started: its event still fires, doing nothing, so the driver's draws
                // and order for every other event stay as without the cap.
                scheduled.push(ctx.driver().at(at, event));
                continue;
            }
            let (workload, ctx2, tx, running) = (self.clone(), ctx.clone(), tx.clone(), running.clone());
            let event = ctx.driver().at(
                at,
                event.action(move || {
                    let ops = running.clone();
                    let task = tokio::spawn(async move {
                        let record = run_op(&workload, &ctx2, op, client, None, &ops, n).await;
                        let _ = tx.send(record);
                    });
                    running.lock().tasks.insert(n, task.abort_handle());
                }),
            );
            scheduled.push(event);
        }
        scheduled
    }
}

/// Waits for the scheduled operations' records, at most `budget.drain` after the window; at the
/// deadline, cancels what has not started and stops what still runs (recorded
/// [`OpOutcome::Indeterminate`]).
async fn collect(
    ctx: &Ctx,
    budget: &Budget,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<OpRecord>,
    scheduled: Vec<crate::driver::EventId>,
    running: &Running,
) -> Vec<OpRecord> {
    let mut records = Vec::new();
    let deadline = tokio::time::Instant::now() + budget.window + budget.drain;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(record)) => records.push(record),
            Ok(None) => break,
            Err(_) => {
                // Whatever finished at this very instant is in the channel; the rest is stopped.
                while let Ok(record) = rx.try_recv() {
                    records.push(record);
                }
                for event in scheduled {
                    ctx.driver().cancel(event);
                }
                stop_running(ctx, running, &mut records);
                break;
            }
        }
    }
    records
}

/// Stops the operations still running at the drain deadline and records each as indeterminate.
fn stop_running(ctx: &Ctx, running: &Running, records: &mut Vec<OpRecord>) {
    let stopped = running.stop_all();
    ctx.record(
        "workload.drain",
        "workload",
        format!("{} operation(s) still running at the drain deadline: stopped", stopped.len()),
    );
    for op in stopped {
        let outcome = OpOutcome::Indeterminate("still running at the drain deadline: stopped".into());
        ctx.record("op.end", &format!("{}#{}", op.name, op.id), label(&outcome));
        records.push(OpRecord {
            id: op.id,
            name: op.name,
            key: op.key,
            client: op.client,
            started: op.started,
            ended: ctx.elapsed(),
            outcome,
            effects: op.effects,
        });
    }
}

/// The operations a [`Workload::run`] started and that have not ended, and their tasks.
#[derive(Clone, Default)]
struct Running {
    inner: Arc<Mutex<RunningInner>>,
}

#[derive(Default)]
struct RunningInner {
    /// By plan index: the operation's task.
    tasks: BTreeMap<u64, tokio::task::AbortHandle>,
    /// By plan index: the operation, once it started.
    started: BTreeMap<u64, Started>,
}

/// An operation that started and has not ended.
struct Started {
    id: u64,
    name: String,
    key: String,
    client: String,
    started: Duration,
    effects: Vec<String>,
}

impl Running {
    fn lock(&self) -> MutexGuard<'_, RunningInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Aborts every operation's task; returns those that had started and not ended.
    fn stop_all(&self) -> Vec<Started> {
        let mut inner = self.lock();
        for task in std::mem::take(&mut inner.tasks).into_values() {
            task.abort();
        }
        std::mem::take(&mut inner.started).into_values().collect()
    }
}

async fn run_op<M: Send + 'static>(
    workload: &Workload<M>,
    ctx: &Ctx,
    op: Operation<M>,
    client: String,
    key: Option<String>,
    running: &Running,
    index: u64,
) -> OpRecord {
    let id = workload.next_id();
    let key = key.unwrap_or_else(|| format!("op-{id}"));
    let identity = format!("{}#{id}", op.name);
    ctx.record("op.start", &identity, format!("key={key} client={client}"));
    let started = ctx.elapsed();
    running.lock().started.insert(
        index,
        Started {
            id,
            name: op.name.clone(),
            key: key.clone(),
            client: client.clone(),
            started,
            effects: op.effects.clone(),
        },
    );
    let op_ctx = OpCtx {
        id,
        name: op.name.clone(),
        key: key.clone(),
        source: ctx.source(&format!("workload/op/{id}")),
        host: ctx.net().host(&client),
        model: Arc::clone(&workload.model),
        ctx: ctx.clone(),
    };
    let outcome = (op.body)(op_ctx).await;
    {
        let mut running = running.lock();
        running.started.remove(&index);
        running.tasks.remove(&index);
    }
    ctx.record("op.end", &identity, label(&outcome));
    OpRecord { id, name: op.name.clone(), key, client, started, ended: ctx.elapsed(), outcome, effects: op.effects }
}

/// Counts outcomes by operation name and kind, for summaries.
pub fn tally(records: &[OpRecord]) -> BTreeMap<String, (u64, u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for r in records {
        let entry = out.entry(r.name.clone()).or_default();
        match r.outcome {
            OpOutcome::Ok(_) => entry.0 += 1,
            OpOutcome::Failed(_) => entry.1 += 1,
            OpOutcome::Indeterminate(_) => entry.2 += 1,
        }
    }
    out
}

/// The effect kinds the run's workloads declared ([`Operation::declares_effect`]), whether
/// or not the swarm left the declaring operations in.
#[derive(Default, Debug)]
pub(crate) struct DeclaredEffects {
    kinds: Mutex<std::collections::BTreeSet<String>>,
}

impl DeclaredEffects {
    pub(crate) fn declare(&self, kinds: impl IntoIterator<Item = String>) {
        self.kinds.lock().unwrap_or_else(|p| p.into_inner()).extend(kinds);
    }

    pub(crate) fn contains(&self, kind: &str) -> bool {
        self.kinds.lock().unwrap_or_else(|p| p.into_inner()).contains(kind)
    }
}
