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

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::net::Host;
use crate::seed::Source;
use crate::{Ctx, Event};

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpOutcome {
    /// It took effect, with what it returned.
    Ok(String),
    /// It definitely did not take effect (the service said no).
    Failed(String),
    /// It may or may not have taken effect (a timeout, a lost connection).
    Indeterminate(String),
}

impl OpOutcome {
    /// Whether it took effect.
    pub fn is_ok(&self) -> bool {
        matches!(self, OpOutcome::Ok(_))
    }

    /// Whether its effect is unknown.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, OpOutcome::Indeterminate(_))
    }

    fn label(&self) -> String {
        match self {
            OpOutcome::Ok(v) => format!("ok {v}"),
            OpOutcome::Failed(v) => format!("failed {v}"),
            OpOutcome::Indeterminate(v) => format!("indeterminate {v}"),
        }
    }
}

/// One operation's record: for oracles.
#[derive(Clone, Debug)]
pub struct OpRecord {
    /// Unique within the run, in start order.
    pub id: u64,
    /// The operation's name.
    pub name: String,
    /// Its idempotency key (`op-<id>`, or the key of the operation it retries).
    pub key: String,
    /// The client host it ran from.
    pub client: String,
    /// When it started (fake time).
    pub started: Duration,
    /// When it ended (fake time).
    pub ended: Duration,
    /// How it ended.
    pub outcome: OpOutcome,
}

/// What an operation's body gets.
pub struct OpCtx<M> {
    id: u64,
    key: String,
    source: Source,
    host: Host,
    model: Arc<Mutex<M>>,
    ctx: Ctx,
}

impl<M> OpCtx<M> {
    /// The operation's unique id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its idempotency key: send it with the request so a retry is recognised.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Seeded choices for this operation (stream `workload/op/<id>`).
    pub fn source(&mut self) -> &mut Source {
        &mut self.source
    }

    /// The client host it runs from.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The user's model.
    pub fn model(&self) -> MutexGuard<'_, M> {
        self.model.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}

type OpBody<M> = Arc<dyn Fn(OpCtx<M>) -> Pin<Box<dyn Future<Output = OpOutcome> + Send>> + Send + Sync>;

/// An operation: a name, a weight, and a body.
pub struct Operation<M> {
    name: String,
    weight: u64,
    body: OpBody<M>,
}

impl<M> Clone for Operation<M> {
    fn clone(&self) -> Self {
        Operation { name: self.name.clone(), weight: self.weight, body: Arc::clone(&self.body) }
    }
}

impl<M: Send + 'static> Operation<M> {
    /// An operation named `name`, chosen with probability proportional to `weight`.
    pub fn new<F, Fut>(name: &str, weight: u64, body: F) -> Operation<M>
    where
        F: Fn(OpCtx<M>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = OpOutcome> + Send + 'static,
    {
        Operation { name: name.to_string(), weight, body: Arc::new(move |op| Box::pin(body(op))) }
    }
}

/// How much a workload does.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Operations started.
    pub ops: u64,
    /// They start at seeded times in this window of fake time (from when `run` is called).
    pub window: Duration,
    /// How long the workload waits for started operations after the window before calling the
    /// rest indeterminate.
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
    ops: Vec<Operation<M>>,
    next_id: Arc<Mutex<u64>>,
}

impl<M> Clone for Workload<M> {
    fn clone(&self) -> Self {
        Workload { model: Arc::clone(&self.model), ops: self.ops.clone(), next_id: Arc::clone(&self.next_id) }
    }
}

impl<M: Send + 'static> Workload<M> {
    /// A workload over `model` with no operations yet.
    pub fn new(model: M) -> Workload<M> {
        Workload { model: Arc::new(Mutex::new(model)), ops: Vec::new(), next_id: Arc::new(Mutex::new(0)) }
    }

    /// Adds an operation.
    pub fn op(mut self, op: Operation<M>) -> Workload<M> {
        self.ops.push(op);
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

    /// Runs one operation now, from `client` (optionally retrying under an existing key), and
    /// records it.
    pub async fn run_one(&self, ctx: &Ctx, name: &str, client: &str, key: Option<String>) -> Option<OpRecord> {
        let op = self.ops.iter().find(|o| o.name == name)?.clone();
        Some(run_op(self, ctx, op, client.to_string(), key).await)
    }

    /// Draws the schedule and runs it: `budget.ops` operations at seeded times in
    /// `budget.window`, each a driver event, from `workload.clients` client hosts; waits for them
    /// (at most `budget.drain` after the window) and returns their records in start order.
    pub async fn run(&self, ctx: &Ctx, budget: Budget) -> Vec<OpRecord> {
        let swarm = ctx.swarm();
        let mut enabled: Vec<&Operation<M>> =
            self.ops.iter().filter(|o| swarm.flag(&format!("workload.{}", o.name), 0.85) && o.weight > 0).collect();
        if enabled.is_empty() {
            enabled = self.ops.iter().take(1).collect();
        }
        let clients = swarm.int("workload.clients", 1..=4);
        let weights: Vec<u64> = enabled.iter().map(|o| o.weight.max(1)).collect();
        let mut plan = ctx.source("workload/plan");
        let start = ctx.elapsed();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for n in 0..budget.ops {
            let index = plan.weighted(&weights).unwrap_or(0);
            let op = enabled[index].clone();
            let at = start + plan.duration(Duration::ZERO..=budget.window);
            let client = format!("client-{}", n % clients);
            let (workload, ctx2, tx) = (self.clone(), ctx.clone(), tx.clone());
            ctx.driver().at(
                at,
                Event::new("op.schedule", format!("{}@{client}", op.name)).unrecorded().action(move || {
                    tokio::spawn(async move {
                        let record = run_op(&workload, &ctx2, op, client, None).await;
                        let _ = tx.send(record);
                    });
                }),
            );
        }
        drop(tx);
        let mut records = Vec::new();
        let deadline = tokio::time::Instant::now() + budget.window + budget.drain;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(record)) => records.push(record),
                Ok(None) => break,
                Err(_) => {
                    ctx.record("workload.drain", "workload", "operations still running at the drain deadline");
                    break;
                }
            }
        }
        records.sort_by_key(|r| r.id);
        records
    }
}

async fn run_op<M: Send + 'static>(
    workload: &Workload<M>,
    ctx: &Ctx,
    op: Operation<M>,
    client: String,
    key: Option<String>,
) -> OpRecord {
    let id = workload.next_id();
    let key = key.unwrap_or_else(|| format!("op-{id}"));
    let identity = format!("{}#{id}", op.name);
    ctx.record("op.start", &identity, format!("key={key} client={client}"));
    let started = ctx.elapsed();
    let op_ctx = OpCtx {
        id,
        key: key.clone(),
        source: ctx.source(&format!("workload/op/{id}")),
        host: ctx.net().host(&client),
        model: Arc::clone(&workload.model),
        ctx: ctx.clone(),
    };
    let outcome = (op.body)(op_ctx).await;
    ctx.record("op.end", &identity, outcome.label());
    OpRecord { id, name: op.name.clone(), key, client, started, ended: ctx.elapsed(), outcome }
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
