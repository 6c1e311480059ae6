//! The shopping cart: three axum services on the simulated network, a workload of shoppers, faults,
//! and the oracles that judge each run.
//!
//! - [`identity`] issues signed tokens from a key set it rotates;
//! - [`catalog`] knows prices;
//! - [`cart`] (1–3 replicas behind the name `cart`) keeps carts and checks out with an
//!   idempotency key, verifying tokens against identity's key set over HTTP.
//!
//! Shoppers (hosts `client-N`, user = host) add and remove items, read their cart, check out
//! (retrying an unanswered checkout with the same key, at most 3 times), and rotate keys. The
//! swarm draws crashes, restarts, rollouts and partitions of the nodes, lost responses and resets
//! on the network, and a slow store.
//!
//! Oracles: idempotency (each key charged at most once, acknowledged keys exactly once);
//! charges match (an acknowledged order's total is what its key was charged); one response or
//! transport error per request; the node lifecycle oracles (exit cause, drain on SIGTERM, no task
//! outliving its node); and liveness after healing.

pub mod cart;
pub mod catalog;
pub mod identity;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use sim::check::{self, LivenessBound, OneResponse, RequestLog};
use sim::prelude::*;

/// Which cart runs: the correct one, or one with a planted bug.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Checkout is idempotent atomically; SIGTERM drains.
    Correct,
    /// Checkout's idempotency check and insert are separate store calls (the planted bug).
    NonAtomicIdempotency,
    /// On SIGTERM the cart returns without draining in-flight requests (the planted bug).
    NoDrain,
}

impl Variant {
    /// Every variant, correct first.
    pub const ALL: [Variant; 3] = [Variant::Correct, Variant::NonAtomicIdempotency, Variant::NoDrain];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Correct => "correct",
            Variant::NonAtomicIdempotency => "planted: non-atomic idempotency",
            Variant::NoDrain => "planted: no drain on SIGTERM",
        }
    }

    /// The oracle that must catch it (none for the correct variant).
    pub fn oracle(self) -> Option<Oracle> {
        match self {
            Variant::Correct => None,
            Variant::NonAtomicIdempotency => Some(Oracle::IDEMPOTENCY),
            Variant::NoDrain => Some(Oracle::DRAIN),
        }
    }

    /// The simulation's name for this variant.
    pub fn simulation(self) -> &'static str {
        match self {
            Variant::Correct => "shoppingcart",
            Variant::NonAtomicIdempotency => "shoppingcart_non_atomic_idempotency",
            Variant::NoDrain => "shoppingcart_no_drain",
        }
    }
}

/// What crashes did across the runs of this process: for the main job's measurement that a crashed
/// node leaves no task running.
#[derive(Debug, Default)]
pub struct CrashStats {
    /// Incarnations crashed (or killed after their grace).
    pub crashes: AtomicU64,
    /// Their tasks aborted at the crash.
    pub aborted_tasks: AtomicU64,
    /// Polls of tasks of an ended incarnation after it ended (must stay 0).
    pub zombie_polls: AtomicU64,
    /// Network operations refused because they came from an ended incarnation.
    pub stale_operations: AtomicU64,
}

/// This process's [`CrashStats`].
pub static CRASH_STATS: CrashStats = CrashStats {
    crashes: AtomicU64::new(0),
    aborted_tasks: AtomicU64::new(0),
    zombie_polls: AtomicU64::new(0),
    stale_operations: AtomicU64::new(0),
};

fn count_crashes(ctx: &Ctx, system: &System) {
    let exits = system.exits();
    let crashed: Vec<_> = exits
        .iter()
        .filter(|e| matches!(e.cause, sim::node::ExitCause::Crash(_) | sim::node::ExitCause::Killed))
        .collect();
    CRASH_STATS.crashes.fetch_add(crashed.len() as u64, Ordering::Relaxed);
    CRASH_STATS.aborted_tasks.fetch_add(crashed.iter().map(|e| e.aborted_tasks as u64).sum(), Ordering::Relaxed);
    CRASH_STATS.zombie_polls.fetch_add(system.zombie_polls().values().sum(), Ordering::Relaxed);
    CRASH_STATS.stale_operations.fetch_add(ctx.net().stale_operations(), Ordering::Relaxed);
}

/// The client's timeout per request.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
/// The first retry backoff of a checkout (doubling).
pub const RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Checkout attempts per operation.
pub const CHECKOUT_ATTEMPTS: u32 = 3;

/// The shoppers' model: their tokens, and the orders the cart acknowledged (key → total).
#[derive(Default)]
pub struct Model {
    tokens: BTreeMap<String, String>,
    acknowledged: BTreeMap<String, u64>,
}

/// One client's pooled HTTP client per client host.
#[derive(Default)]
struct Clients {
    map: Mutex<BTreeMap<String, hyper_util::client::legacy::Client<sim::net::adapters::Connector, Full<Bytes>>>>,
}

/// A reply: a status and body, or a transport error / timeout (the effect is unknown).
enum Reply {
    Status(u16, Bytes),
    Transport(String),
}

async fn request(
    op: &OpCtx<Model>,
    method: http::Method,
    url: &str,
    body: Option<serde_json::Value>,
    headers: &[(&str, String)],
) -> Reply {
    let ctx = op.ctx().clone();
    let client = {
        let clients = ctx.extension::<Clients>();
        let mut map = clients.map.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(op.host().name().to_string())
            .or_insert_with(|| {
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .timer(hyper_util::rt::TokioTimer::new())
                    .pool_timer(hyper_util::rt::TokioTimer::new())
                    .build(sim::net::adapters::Connector::new(op.host().clone()))
            })
            .clone()
    };
    let mut builder = http::Request::builder().method(method.clone()).uri(url);
    for (k, v) in headers {
        builder = builder.header(*k, v);
    }
    let payload = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    if !payload.is_empty() {
        builder = builder.header("content-type", "application/json");
    }
    let Ok(req) = builder.body(Full::new(payload)) else { return Reply::Transport("bad request".into()) };
    let log = RequestLog::of(&ctx);
    let pending = log.start(&ctx, &format!("{method} {url}"));
    let sent = async {
        let response = client.request(req).await.map_err(|e| format!("{e:?}"))?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| format!("{e}"))?.to_bytes();
        Ok::<(u16, Bytes), String>((status, body))
    };
    match tokio::time::timeout(CLIENT_TIMEOUT, sent).await {
        Ok(Ok((status, body))) => {
            log.end(pending, Ok(status));
            Reply::Status(status, body)
        }
        Ok(Err(e)) => {
            log.end(pending, Err(e.clone()));
            Reply::Transport(e)
        }
        Err(_) => {
            log.end(pending, Err("client timeout".into()));
            Reply::Transport("client timeout".into())
        }
    }
}

fn user(op: &OpCtx<Model>) -> String {
    op.host().name().to_string()
}

/// The client's token, fetched from identity when it has none.
async fn token(op: &OpCtx<Model>) -> Result<String, OpOutcome> {
    let user = user(op);
    if let Some(t) = op.model().tokens.get(&user).cloned() {
        return Ok(t);
    }
    match request(op, http::Method::POST, &format!("http://identity:8080/token/{user}"), None, &[]).await {
        Reply::Status(200, body) => {
            let t = String::from_utf8_lossy(&body).into_owned();
            op.model().tokens.insert(user, t.clone());
            Ok(t)
        }
        Reply::Status(status, _) => Err(OpOutcome::Failed(format!("token: {status}"))),
        Reply::Transport(e) => Err(OpOutcome::Indeterminate(format!("token: {e}"))),
    }
}

/// Sends an authorized request; a 401 drops the cached token (the key rotated away).
async fn authorized(
    op: &OpCtx<Model>,
    method: http::Method,
    url: &str,
    body: Option<serde_json::Value>,
    extra: &[(&str, String)],
) -> Result<Reply, OpOutcome> {
    let t = token(op).await?;
    let mut headers = vec![("authorization", format!("Bearer {t}"))];
    headers.extend(extra.iter().cloned());
    let reply = request(op, method, url, body, &headers).await;
    if let Reply::Status(401, _) = reply {
        op.model().tokens.remove(&user(op));
    }
    Ok(reply)
}

fn outcome(what: &str, reply: Reply) -> OpOutcome {
    match reply {
        Reply::Status(200, _) => OpOutcome::Ok(what.to_string()),
        Reply::Status(status, _) => OpOutcome::Failed(format!("{what}: {status}")),
        Reply::Transport(e) => OpOutcome::Indeterminate(format!("{what}: {e}")),
    }
}

async fn add(mut op: OpCtx<Model>) -> OpOutcome {
    let item = op.source().range(1..=5);
    let qty = op.source().range(1..=3);
    let url = format!("http://cart:8080/cart/{}/items", user(&op));
    match authorized(&op, http::Method::POST, &url, Some(serde_json::json!({"item": item, "qty": qty})), &[]).await {
        Ok(reply) => outcome("add", reply),
        Err(o) => o,
    }
}

async fn remove(mut op: OpCtx<Model>) -> OpOutcome {
    let item = op.source().range(1..=5);
    let url = format!("http://cart:8080/cart/{}/items/{item}", user(&op));
    match authorized(&op, http::Method::DELETE, &url, None, &[]).await {
        Ok(reply) => outcome("remove", reply),
        Err(o) => o,
    }
}

async fn get_cart(op: OpCtx<Model>) -> OpOutcome {
    let url = format!("http://cart:8080/cart/{}", user(&op));
    match authorized(&op, http::Method::GET, &url, None, &[]).await {
        Ok(reply) => outcome("get", reply),
        Err(o) => o,
    }
}

async fn rotate(op: OpCtx<Model>) -> OpOutcome {
    outcome("rotate", request(&op, http::Method::POST, "http://identity:8080/rotate", None, &[]).await)
}

/// Checks out with the operation's idempotency key, retrying an unanswered attempt with the same
/// key (at most [`CHECKOUT_ATTEMPTS`], backoff doubling from [`RETRY_BACKOFF`]). Once an attempt
/// went unanswered it may have charged, or may still be in flight and charge later: a later
/// attempt's refusal says nothing about it. A 401/403 comes before the key is looked at (identity
/// rotated the token's key away, or a replica with a fresher key set answered; a failed token
/// fetch), and a 409 says only that at that attempt's moment the key had no order and the cart was
/// empty (the unanswered attempt may still be waiting on the store, and items added meanwhile are
/// what it charges). The checkout is then indeterminate, not failed.
async fn checkout(op: OpCtx<Model>) -> OpOutcome {
    let url = format!("http://cart:8080/cart/{}/checkout", user(&op));
    let key = op.idempotency_key().to_string();
    let mut last = OpOutcome::Indeterminate("no attempt".into());
    let mut unanswered = false;
    let settle = |o: OpOutcome, unanswered: bool| match o {
        OpOutcome::Failed(why) if unanswered => OpOutcome::Indeterminate(format!("{why} after an unanswered attempt")),
        o => o,
    };
    for attempt in 0..CHECKOUT_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_BACKOFF * 2u32.pow(attempt - 1)).await;
        }
        let reply = match authorized(&op, http::Method::POST, &url, None, &[("idempotency-key", key.clone())]).await {
            Ok(reply) => reply,
            Err(o) => {
                last = settle(o, unanswered);
                continue;
            }
        };
        match reply {
            Reply::Status(200, body) => {
                let Ok(order) = serde_json::from_slice::<cart::Order>(&body) else {
                    return OpOutcome::Failed("checkout: unreadable order".into());
                };
                op.model().acknowledged.insert(key.clone(), order.total);
                return OpOutcome::Ok(format!("charge {}", order.total));
            }
            Reply::Status(status, _) if status >= 500 => {
                unanswered = true;
                last = OpOutcome::Indeterminate(format!("checkout: {status}"));
            }
            Reply::Status(status, _) => return settle(OpOutcome::Failed(format!("checkout: {status}")), unanswered),
            Reply::Transport(e) => {
                unanswered = true;
                last = OpOutcome::Indeterminate(format!("checkout: {e}"));
            }
        }
    }
    last
}

fn workload() -> Workload<Model> {
    Workload::new(Model::default())
        .op(Operation::new("add", 5, add))
        .op(Operation::new("remove", 1, remove))
        .op(Operation::new("get", 2, get_cart))
        .op(Operation::new("checkout", 3, checkout).declares_effect("charge"))
        .op(Operation::new("rotate", 1, rotate))
}

/// The charges-match oracle: every acknowledged order's total is what its key was charged.
fn charges_match(ctx: &Ctx, model: &Model) -> Result<(), Failure> {
    let effects = ctx.extension::<check::Effects>();
    for (key, total) in &model.acknowledged {
        let charges: Vec<String> = effects.of(key).into_iter().map(|(what, _)| what).collect();
        if !charges.iter().any(|c| *c == format!("charge {total}")) {
            return Err(Failure::correctness(
                "charges-match",
                format!("order {key} was acknowledged at {total} but charged {charges:?}"),
            ));
        }
    }
    Ok(())
}

/// One run of the shopping cart with `variant`.
///
/// # Errors
/// The first oracle that fired.
pub async fn run(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    ctx.add_check(OneResponse::default());
    let keys = Arc::new(identity::KeyStore::default());
    let slow = ctx.swarm().ratio("cart.store_slow", 0.0..=0.2);
    let store = Arc::new(cart::MemoryStore::new(ctx.source("cart/store"), slow));
    let system = System::new(&ctx);
    system.add(ServiceSpec::new("identity", move |node| identity::main(node, Arc::clone(&keys))));
    system.add(ServiceSpec::new("catalog", catalog::main));
    let (v1, v2) = (Arc::clone(&store), Arc::clone(&store));
    system.add(
        ServiceSpec::new("cart", move |node| cart::main(node, Arc::clone(&v1), variant))
            .version("v2", move |node| cart::main(node, Arc::clone(&v2), variant))
            .replicas(1..=3)
            .grace(Duration::from_secs(10)),
    );
    system.start().await?;

    let window = Duration::from_secs(20);
    let start = ctx.elapsed();
    system.schedule_lifecycle(start + Duration::from_secs(1)..start + window);
    let mut hosts = system.replicas("cart");
    hosts.extend(system.replicas("identity"));
    hosts.extend(system.replicas("catalog"));
    Nemesis::new(&hosts, start + Duration::from_secs(1)..start + window).longest(Duration::from_secs(3)).schedule(&ctx);

    let shoppers = workload();
    let ops = ctx.swarm().int("workload.ops", 20..=80);
    let records = shoppers.run(&ctx, Budget { ops, window, drain: Duration::from_secs(30) }).await;
    let tally = sim::workload::tally(&records);
    ctx.record("workload.done", "shoppers", format!("{tally:?}"));

    system.heal().await?;
    let bound = LivenessBound::new()
        .plus("client timeout", CLIENT_TIMEOUT)
        .plus("checkout retries", RETRY_BACKOFF * (2u32.pow(CHECKOUT_ATTEMPTS) - 1))
        .plus("key refresh", CLIENT_TIMEOUT)
        .plus("restart and readiness", Duration::from_secs(5));
    let probe = shoppers.clone();
    let ctx2 = ctx.clone();
    check::liveness(&ctx, &bound, move || {
        let (probe, ctx2) = (probe.clone(), ctx2.clone());
        async move {
            probe
                .run_one(&ctx2, "get", "client-0", None)
                .await
                .map_or(OpOutcome::Failed("no get".into()), |r| r.outcome)
        }
    })
    .await?;

    let stopped = system.stop().await;
    count_crashes(&ctx, &system);
    stopped?;
    check::idempotency(&ctx, &records, "charge")?;
    charges_match(&ctx, &shoppers.model())?;
    Ok(())
}
