//! The wallet: three tonic services on the simulated network, users calling the wallet, faults,
//! and the oracles that judge each run.
//!
//! - [`ledger`] (two replicas behind the ClusterIP name `ledger`): transfers with an idempotency
//!   key, balances, and a server-streaming `Watch` of balance changes, over one shared store;
//! - [`keyset`]: the key transfers are signed with;
//! - [`service`] (the wallet): forwards transfers to the ledger through a circuit breaker
//!   ([`breaker`]) and answers balances from its view, kept by one `Watch` it reopens when it ends.
//!
//! Users (hosts `client-N`) transfer between four accounts (retrying an unanswered transfer with
//! the same key) and read balances. The swarm draws rollouts, crashes, graceful restarts and
//! partitions of the nodes, and resets, clogs and silences on the network.
//!
//! Oracles: exactly one transfer effect per acknowledged idempotency key, at most one per key
//! (`idempotency`); the wallet's view converges to the ledger's after healing (`view-converges`);
//! GOAWAY before a replica ends its `Watch` streams (`goaway-first`); the breaker changes state
//! only on the model's edges (`breaker`); every gRPC call ends with one status (`one-status`);
//! and the node lifecycle oracles.

pub mod breaker;
pub mod keyset;
pub mod ledger;
pub mod service;

use std::sync::Arc;
use std::time::Duration;

use grpcsim::calls::{CallLog, Logged, OneStatus};
use grpcsim::checks::GoawayFirst;
use sim::check::{self, LivenessBound};
use sim::prelude::*;
use tonic::Code;

/// The generated messages, clients and servers of `proto/wallet.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("wallet");
}

use pb::wallet_client::WalletClient;

/// The ledger's port.
pub const LEDGER_PORT: u16 = 50051;
/// The keyset's port.
pub const KEYSET_PORT: u16 = 50052;
/// The wallet's port.
pub const WALLET_PORT: u16 = 50050;
/// The accounts.
pub const ACCOUNTS: [&str; 4] = ["alice", "bob", "carol", "dave"];
/// The user's deadline per wallet call.
pub const USER_DEADLINE: Duration = Duration::from_secs(3);
/// Transfer attempts per user operation.
pub const USER_ATTEMPTS: u32 = 3;
/// The first backoff between them (doubling).
pub const USER_BACKOFF: Duration = Duration::from_millis(200);
/// The oracle that the wallet's view of the ledger converges once faults heal.
pub const VIEW_CONVERGES: Oracle = Oracle::new("view-converges");
/// The `Watch` method, the ledger's long-lived stream.
pub const WATCH: &str = "/wallet.Ledger/Watch";

/// Which wallet system runs: the correct one, or one with a planted bug.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The ledger ends its watches after its GOAWAY; the breaker counts real failures.
    Correct,
    /// On SIGTERM the ledger cancels its `Watch` streams before the GOAWAY (the planted bug).
    CancelBeforeGoaway,
    /// The wallet's breaker counts watch ends caused by a rollout as failures (the planted bug).
    BreakerCountsRolloutEnds,
}

impl Variant {
    /// Every variant, correct first.
    pub const ALL: [Variant; 3] = [Variant::Correct, Variant::CancelBeforeGoaway, Variant::BreakerCountsRolloutEnds];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Correct => "correct",
            Variant::CancelBeforeGoaway => "planted: streams cancelled before GOAWAY",
            Variant::BreakerCountsRolloutEnds => "planted: breaker counts rollout ends",
        }
    }

    /// The oracle that must catch it (none for the correct variant).
    pub fn oracle(self) -> Option<Oracle> {
        match self {
            Variant::Correct => None,
            Variant::CancelBeforeGoaway => Some(grpcsim::GOAWAY_FIRST),
            Variant::BreakerCountsRolloutEnds => Some(grpcsim::BREAKER),
        }
    }

    /// The simulation's name for this variant.
    pub fn simulation(self) -> &'static str {
        match self {
            Variant::Correct => "wallet",
            Variant::CancelBeforeGoaway => "wallet_cancel_before_goaway",
            Variant::BreakerCountsRolloutEnds => "wallet_breaker_counts_rollout_ends",
        }
    }
}

/// The users' model: the transfers the wallet acknowledged (key → amount).
#[derive(Default)]
pub struct Model {
    acknowledged: std::collections::BTreeMap<String, u64>,
}

/// One wallet client per user host.
#[derive(Default)]
struct Clients {
    map: std::sync::Mutex<std::collections::BTreeMap<String, WalletClient<Logged<tonic::transport::Channel>>>>,
}

fn client(op: &OpCtx<Model>) -> WalletClient<Logged<tonic::transport::Channel>> {
    let ctx = op.ctx().clone();
    let clients = ctx.extension::<Clients>();
    let mut map = clients.map.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(op.host().name().to_string())
        .or_insert_with(|| {
            let channel = grpcsim::client::endpoint(&format!("wallet:{WALLET_PORT}"))
                .expect("a valid target")
                .connect_timeout(Duration::from_secs(1))
                .connect_with_connector_lazy(sim::net::adapters::Connector::new(op.host().clone()));
            WalletClient::new(tower::Layer::layer(&CallLog::layer(&ctx), channel))
        })
        .clone()
}

fn two_accounts(op: &mut OpCtx<Model>) -> (String, String) {
    let from = op.source().below(ACCOUNTS.len() as u64) as usize;
    let to = (from + 1 + op.source().below(ACCOUNTS.len() as u64 - 1) as usize) % ACCOUNTS.len();
    (ACCOUNTS[from].to_string(), ACCOUNTS[to].to_string())
}

async fn transfer(mut op: OpCtx<Model>) -> OpOutcome {
    let (from, to) = two_accounts(&mut op);
    let amount = op.source().range(1..=50);
    let key = op.idempotency_key().to_string();
    let request = pb::TransferRequest { key: key.clone(), from, to, amount, ..Default::default() };
    let mut last = OpOutcome::Indeterminate("no attempt".into());
    for attempt in 0..USER_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(USER_BACKOFF * 2u32.pow(attempt - 1)).await;
        }
        let mut wallet = client(&op);
        match tokio::time::timeout(USER_DEADLINE, wallet.transfer(request.clone())).await {
            Ok(Ok(_)) => {
                op.model().acknowledged.insert(key.clone(), amount);
                return OpOutcome::Ok(format!("transfer {amount}"));
            }
            Ok(Err(s)) if matches!(s.code(), Code::FailedPrecondition | Code::NotFound | Code::InvalidArgument) => {
                return OpOutcome::Failed(format!("transfer: {:?}: {}", s.code(), s.message()));
            }
            Ok(Err(s)) => last = OpOutcome::Indeterminate(format!("transfer: {:?}: {}", s.code(), s.message())),
            Err(_) => last = OpOutcome::Indeterminate("transfer: no answer within the deadline".into()),
        }
    }
    last
}

async fn balance(mut op: OpCtx<Model>) -> OpOutcome {
    let account = ACCOUNTS[op.source().below(ACCOUNTS.len() as u64) as usize].to_string();
    let mut wallet = client(&op);
    match tokio::time::timeout(USER_DEADLINE, wallet.balance(pb::BalanceRequest { account: account.clone() })).await {
        Ok(Ok(r)) => OpOutcome::Ok(format!("balance {account} {}", r.into_inner().balance)),
        Ok(Err(s)) => OpOutcome::Failed(format!("balance: {:?}: {}", s.code(), s.message())),
        Err(_) => OpOutcome::Failed("balance: no answer within the deadline".into()),
    }
}

fn workload() -> Workload<Model> {
    Workload::new(Model::default())
        .op(Operation::new("transfer", 5, transfer).declares_effect("transfer"))
        .op(Operation::new("balance", 3, balance))
}

/// The amounts-match oracle: every acknowledged transfer took effect with its amount.
fn amounts_match(ctx: &Ctx, model: &Model) -> Result<(), Failure> {
    let effects = ctx.extension::<check::Effects>();
    for (key, amount) in &model.acknowledged {
        let applied: Vec<String> = effects.of(key).into_iter().map(|(what, _)| what).collect();
        if !applied.iter().any(|a| *a == format!("transfer {amount}")) {
            return Err(Failure::correctness(
                "idempotency",
                format!("transfer {key} was acknowledged for {amount} but applied as {applied:?}"),
            ));
        }
    }
    Ok(())
}

/// One run of the wallet with `variant`.
///
/// # Errors
/// The first oracle that fired.
pub async fn run(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    ctx.add_check(OneStatus::default());
    ctx.add_check(GoawayFirst::long_lived([WATCH]));
    let accounts: Vec<String> = ACCOUNTS.iter().map(|a| a.to_string()).collect();
    let store = Arc::new(ledger::LedgerStore::new(&accounts));
    let views = Arc::new(service::Views::default());
    let system = System::new(&ctx);
    system.add(ServiceSpec::new("keyset", keyset::main).grace(Duration::from_secs(5)));
    let (v1, v2) = (Arc::clone(&store), Arc::clone(&store));
    system.add(
        ServiceSpec::new("ledger", move |node| ledger::main(node, Arc::clone(&v1), variant))
            .version("v2", move |node| ledger::main(node, Arc::clone(&v2), variant))
            .replicas(2..=2)
            .grace(Duration::from_secs(10)),
    );
    let views2 = Arc::clone(&views);
    system.add(
        ServiceSpec::new("wallet", move |node| service::main(node, accounts.clone(), Arc::clone(&views2), variant))
            .grace(Duration::from_secs(10)),
    );
    system.start().await?;

    let window = Duration::from_secs(20);
    let start = ctx.elapsed();
    system.schedule_lifecycle(start + Duration::from_secs(1)..start + window);
    // Rollouts of the ledger are what this walkthrough is about: the swarm may add one more.
    if ctx.swarm().flag("wallet.ledger_rollout", 0.5) {
        let at = ctx.source("wallet/ledger_rollout").duration(Duration::from_secs(2)..=window);
        system.at(
            start + at,
            sim::node::Lifecycle::Rollout { service: "ledger".into(), version: sim::node::Version::named("v2") },
        );
    }
    let mut hosts = system.replicas("ledger");
    hosts.extend(system.replicas("keyset"));
    hosts.extend(system.replicas("wallet"));
    Nemesis::new(&hosts, start + Duration::from_secs(1)..start + window).longest(Duration::from_secs(3)).schedule(&ctx);

    let users = workload();
    let ops = ctx.swarm().int("workload.ops", 20..=80);
    let records = users.run(&ctx, Budget { ops, window, drain: Duration::from_secs(30) }).await;
    ctx.record("workload.done", "users", format!("{:?}", sim::workload::tally(&records)));

    system.heal().await?;
    // The wallet's view converges to the ledger's: its watch reopens within keepalive + backoff.
    let bound = LivenessBound::new()
        .plus("keepalive interval + timeout", service::KEEPALIVE * 2)
        .plus("watch backoff cap", service::WATCH_BACKOFF_MAX)
        .plus("breaker cooldown", breaker::COOLDOWN)
        .plus("restart and readiness", Duration::from_secs(5));
    let (store2, views2) = (Arc::clone(&store), Arc::clone(&views));
    check::liveness(&ctx, &bound, move || {
        let (store, views) = (Arc::clone(&store2), Arc::clone(&views2));
        async move {
            let (balances, version) = store.snapshot();
            match views.current() {
                Some(v) if v.balances == balances && v.version == version => OpOutcome::Ok("converged".into()),
                Some(v) => OpOutcome::Failed(format!(
                    "the wallet's view is at version {} ({:?}, live: {}), the ledger at {version} ({balances:?})",
                    v.version, v.balances, v.live
                )),
                None => OpOutcome::Failed("no wallet view".into()),
            }
        }
    })
    .await
    .map_err(|f| Failure { oracle: Some(VIEW_CONVERGES), ..f })?;

    system.stop().await?;
    check::idempotency(&ctx, &records, "transfer")?;
    amounts_match(&ctx, &users.model())?;
    Ok(())
}
