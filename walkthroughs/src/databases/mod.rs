//! Databases: a kube-rs operator for a `Database` custom resource ([`crd`]), run against kubesim's
//! fake API server on the simulated network, with a small database service ([`dbservice`]).
//!
//! - [`operator`] (two replicas, leader election over a Lease, [`election`]): for each Database it
//!   creates a credentials Secret with a generated password, sets that password on the database
//!   service, rotates it when `spec.rotation` is raised, and cleans up behind a finalizer;
//! - [`dbservice`] (`db`): accepts a login only with the database's current password.
//!
//! Users (hosts `client-N`) create and delete Databases, ask for rotations (some then delete the
//! Secret at once, to have it re-made), delete Secrets by hand, and log in with the Secret's
//! password. The swarm draws operator crashes, restarts and rollouts, partitions, and API-server
//! faults (429s, 5xx, slow answers, watch 410s and cuts, restarts).
//!
//! Oracles: a rotation is never lost (the Secret's password was made for the current rotation and
//! the database accepts it) once the operator converged (`rotation-kept`, `converges`); leader
//! overlap bounded (`leader-overlap`, from kubesim's Lease timeline); the finalizer honoured;
//! one reconcile at a time per Database; no panic in reconcile; and the node lifecycle oracles.
//!
//! Planted bugs: [`Variant::StaleSecretRecreated`] (humus #1250's class: a Secret deleted while a
//! rotation is in flight is re-created from the stale copy, with the old password) and
//! [`Variant::LeaseMergePatch`] (the Lease taken with a merge patch without resourceVersion: two
//! replicas both lead).

pub mod crd;
pub mod dbservice;
pub mod election;
pub mod operator;
mod users;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::prelude::*;

/// Where the operator and the users find the API server.
pub const API_URL: &str = "http://kube-apiserver:6443";
/// The oracle that a rotation, once completed, is never lost.
pub const ROTATION_KEPT: Oracle = Oracle::new("rotation-kept");
/// The oracle that every Database converges once faults heal.
pub const CONVERGES: Oracle = Oracle::new("converges");

/// Which databases system runs: the correct one, or one with a planted bug.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Re-creates a Secret deleted mid-rotation with the new password; takes the Lease with an
    /// update carrying its resourceVersion.
    Correct,
    /// Re-creates a Secret deleted mid-rotation from the copy it read (the planted bug).
    StaleSecretRecreated,
    /// Takes and renews the Lease with a merge patch without resourceVersion (the planted bug).
    LeaseMergePatch,
}

impl Variant {
    /// Every variant, correct first.
    pub const ALL: [Variant; 3] = [Variant::Correct, Variant::StaleSecretRecreated, Variant::LeaseMergePatch];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Correct => "correct",
            Variant::StaleSecretRecreated => "planted: Secret re-created from a stale read",
            Variant::LeaseMergePatch => "planted: Lease merge-patched without resourceVersion",
        }
    }

    /// The oracle that must catch it (none for the correct variant).
    pub fn oracle(self) -> Option<Oracle> {
        match self {
            Variant::Correct => None,
            Variant::StaleSecretRecreated => Some(ROTATION_KEPT),
            Variant::LeaseMergePatch => Some(kubesim::models::LEADER_OVERLAP),
        }
    }

    /// The simulation's name for this variant.
    pub fn simulation(self) -> &'static str {
        match self {
            Variant::Correct => "databases",
            Variant::StaleSecretRecreated => "databases_stale_secret_recreated",
            Variant::LeaseMergePatch => "databases_lease_merge_patch",
        }
    }
}

/// Every password the operator made: what the rotation oracle judges the Secret by.
#[derive(Default, Debug)]
pub struct Passwords {
    inner: Mutex<PasswordLog>,
    /// Every cleanup the operator's finalizer ran (the finalizer model reads it).
    pub cleanups: kubesim::models::CleanupLedger,
}

#[derive(Default, Debug)]
struct PasswordLog {
    /// password → (database, the rotation it was made for, by whom).
    made: BTreeMap<String, (String, u64, String)>,
}

impl Passwords {
    /// Records a password made for `rotation` of `db` by operator replica `by`.
    pub fn made(&self, db: &str, rotation: u64, password: &str, by: &str) {
        let mut log = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        log.made.insert(password.to_string(), (db.to_string(), rotation, by.to_string()));
    }

    /// What `password` was made for: (database, rotation, replica).
    pub fn of(&self, password: &str) -> Option<(String, u64, String)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).made.get(password).cloned()
    }
}

/// The lease settings every replica uses.
pub fn lease_settings() -> election::LeaseSettings {
    election::LeaseSettings::default()
}

/// One run of the databases system with `variant`.
///
/// # Errors
/// The first oracle that fired.
pub async fn run(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    let api = kubesim::server::ApiServer::new();
    api.serve_sim(&ctx).map_err(|e| Failure::liveness(users::SETUP, format!("kubesim: {e}")))?;
    users::install(&ctx).await?;
    let passwords = Arc::new(Passwords::default());
    let disk = Arc::new(dbservice::Users::default());
    let system = System::new(&ctx);
    let d = Arc::clone(&disk);
    system.add(ServiceSpec::new("db", move |node| dbservice::main(node, Arc::clone(&d))).grace(Duration::from_secs(5)));
    let (p1, p2) = (Arc::clone(&passwords), Arc::clone(&passwords));
    system.add(
        ServiceSpec::new("operator", move |node| operator::main(node, variant, Arc::clone(&p1)))
            .version("v2", move |node| operator::main(node, variant, Arc::clone(&p2)))
            .replicas(2..=2)
            .grace(Duration::from_secs(10)),
    );
    system.start().await?;

    let window = Duration::from_secs(40);
    let start = ctx.elapsed();
    system.schedule_lifecycle(start + Duration::from_secs(1)..start + window);
    let mut hosts = system.replicas("operator");
    hosts.extend(system.replicas("db"));
    hosts.push("kube-apiserver".to_string());
    Nemesis::new(&hosts, start + Duration::from_secs(1)..start + window).longest(Duration::from_secs(3)).schedule(&ctx);

    let faults = api_faults(&ctx, &api, start + Duration::from_secs(1)..start + window);

    let workload = users::workload();
    let ops = ctx.swarm().int("workload.ops", 20..=60);
    let records = workload.run(&ctx, Budget { ops, window, drain: Duration::from_secs(30) }).await;
    ctx.record("workload.done", "users", format!("{:?}", sim::workload::tally(&records)));

    system.heal().await?;
    users::converges(&ctx, faults).await?;
    system.stop().await?;
    users::rotation_kept(&api, &passwords, &disk)?;
    oracles(&api, &passwords)
}

/// API-server faults drawn from the seed (dimension `kube.faults`, 0–4 of them), each at a drawn
/// time for a drawn length inside `window`: 429s, 503s and 504s on a drawn verb, slow answers,
/// stale lists, watch 410s, cut and silent watch streams, delayed watch delivery to one operator
/// replica, and a restart. Returns whether a silent watch cut was drawn (the convergence bound
/// then waits for the watcher's timeout) and when the last fault ends (a fault may outlast the
/// window and the heal: convergence is judged only after it, as kubesim's convergence model says).
fn api_faults(ctx: &Ctx, api: &kubesim::server::ApiServer, window: std::ops::Range<Duration>) -> users::ApiFaults {
    use kubesim::fault::{ApiVerb, Fault, Restart};
    let count = ctx.swarm().int("kube.faults", 0..=4);
    let mut source = ctx.source("databases/api-faults");
    let mut silent = false;
    let mut end = Duration::ZERO;
    let verbs = [
        ApiVerb::Get,
        ApiVerb::List,
        ApiVerb::Watch,
        ApiVerb::Create,
        ApiVerb::Update,
        ApiVerb::Patch,
        ApiVerb::Delete,
    ];
    for _ in 0..count {
        let at = source.duration(window.start..=window.end);
        let lasting = source.duration(Duration::from_millis(200)..=Duration::from_secs(5));
        let verb = verbs[source.below(verbs.len() as u64) as usize];
        let fault = match source.below(9) {
            0 => Fault::throttle(1).verb(verb),
            1 => Fault::error(503).verb(verb),
            2 => Fault::error(504).verb(verb),
            3 => Fault::slow(Duration::from_millis(source.range(100..=2000))).verb(verb),
            4 => Fault::stale_reads(source.range(1..=20)).verb(ApiVerb::List),
            5 => Fault::watch_gone(),
            6 => {
                let quiet = source.bool(0.5);
                silent |= quiet;
                Fault::watch_cut(quiet)
            }
            7 => Fault::delay_watch(Duration::from_millis(source.range(100..=3000)))
                .user_agent(&format!("operator-{}", source.below(2))),
            _ => {
                let down = Duration::from_millis(source.range(100..=3000));
                sim::fault::at(ctx.driver(), api, at, Restart { down }).forever();
                end = end.max(at + down);
                continue;
            }
        };
        sim::fault::at(ctx.driver(), api, at, fault).lasting(lasting);
        end = end.max(at + lasting);
    }
    users::ApiFaults { silent_watch: silent, end }
}

/// The controller models over what the API server recorded: leader overlap bounded, no writes
/// after a lease expired, finalizers honoured (cleanup before the finalizer goes).
fn oracles(api: &kubesim::server::ApiServer, passwords: &Passwords) -> Result<(), Failure> {
    let lease = lease_settings();
    let settings = kubesim::models::LeaseSettings {
        lease_duration: lease.duration,
        renew_deadline: lease.renew_deadline,
        retry_period: lease.retry,
        slack: Duration::from_secs(1),
    };
    let timeline = api.lease_timeline(crd::NAMESPACE, operator::LEASE);
    let writes = api.writes();
    let mut found = kubesim::models::leader_overlap(&timeline, &settings);
    found.extend(kubesim::models::writes_after_expiry(
        &timeline,
        &writes,
        (crd::NAMESPACE, operator::LEASE),
        &settings,
    ));
    let cleanups = passwords.cleanups.calls();
    found.extend(
        kubesim::models::FinalizerRule::new(crd::FINALIZER).repeatable_cleanup().check(&writes, Some(&cleanups)),
    );
    kubesim::models::first_failure(&found).map_or(Ok(()), Err)
}
