//! The users' side: installing the CRD and the Lease, the workload's operations, and the
//! end-of-run oracles over what the API server and the database hold.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use sim::check::{self, LivenessBound};
use sim::prelude::*;

use super::crd::{Database, DatabaseSpec, NAMESPACE, secret_name};
use super::dbservice::{DB_TIMEOUT, DbClient, Users};
use super::operator::{ERROR_REQUEUE, LEASE, RESYNC};
use super::{API_URL, CONVERGES, Passwords, ROTATION_KEPT, lease_settings};

/// The oracle of the set-up step (installing the CRD and the Lease).
pub const SETUP: Oracle = Oracle::new("setup");
/// The Databases users work with.
pub const NAMES: [&str; 3] = ["db-a", "db-b", "db-c"];
/// A user's timeout per API call.
pub const USER_TIMEOUT: Duration = Duration::from_secs(5);

/// The users' model (nothing: the oracles read the API server and the database).
#[derive(Default)]
pub struct Model;

fn client(host: &sim::net::Host) -> kube::Client {
    kubesim::client::client(host, API_URL)
}

/// Installs the `Database` CRD and an empty Lease (as a chart would), from host `admin`.
///
/// # Errors
/// A setup failure if either is refused.
pub async fn install(ctx: &Ctx) -> Result<(), Failure> {
    let client = client(&ctx.net().host("admin"));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Database::crd())
        .await
        .map_err(|e| Failure::liveness(SETUP, format!("creating the Database CRD: {e}")))?;
    let leases: Api<Lease> = Api::namespaced(client, NAMESPACE);
    let mut lease = Lease::default();
    lease.metadata.name = Some(LEASE.to_string());
    leases
        .create(&PostParams::default(), &lease)
        .await
        .map_err(|e| Failure::liveness(SETUP, format!("creating the Lease: {e}")))?;
    Ok(())
}

fn pick(op: &mut OpCtx<Model>) -> String {
    NAMES[op.source().below(NAMES.len() as u64) as usize].to_string()
}

fn outcome<T>(what: &str, r: Result<Result<T, kube::Error>, tokio::time::error::Elapsed>) -> Result<T, OpOutcome> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(s))) if s.code < 500 && s.code != 429 => {
            Err(OpOutcome::Failed(format!("{what}: {} {}", s.code, s.reason)))
        }
        Ok(Err(e)) => Err(OpOutcome::Indeterminate(format!("{what}: {e}"))),
        Err(_) => Err(OpOutcome::Indeterminate(format!("{what}: no answer within {USER_TIMEOUT:?}"))),
    }
}

async fn create(mut op: OpCtx<Model>) -> OpOutcome {
    let name = pick(&mut op);
    let dbs: Api<Database> = Api::namespaced(client(op.host()), NAMESPACE);
    let db = Database::new(&name, DatabaseSpec::default());
    match outcome("create", tokio::time::timeout(USER_TIMEOUT, dbs.create(&PostParams::default(), &db)).await) {
        Ok(_) => OpOutcome::Ok(format!("created {name}")),
        Err(o) => o,
    }
}

/// Raises `spec.rotation` with a read-modify-write (409 → the operation failed); half the time
/// then, within 40 ms, deletes the Secret to have it re-made with the new password.
async fn rotate(mut op: OpCtx<Model>) -> OpOutcome {
    let name = pick(&mut op);
    let and_delete = op.source().bool(0.5);
    let pause = Duration::from_millis(op.source().below(40));
    let client = client(op.host());
    let dbs: Api<Database> = Api::namespaced(client.clone(), NAMESPACE);
    let mut db = match outcome("get", tokio::time::timeout(USER_TIMEOUT, dbs.get(&name)).await) {
        Ok(db) => db,
        Err(o) => return o,
    };
    db.spec.rotation += 1;
    let rotation = db.spec.rotation;
    if let Err(o) =
        outcome("rotate", tokio::time::timeout(USER_TIMEOUT, dbs.replace(&name, &PostParams::default(), &db)).await)
    {
        return o;
    }
    if and_delete {
        // Shortly after: the operator may be rotating right now.
        tokio::time::sleep(pause).await;
        let secrets: Api<Secret> = Api::namespaced(client, NAMESPACE);
        let deleted =
            tokio::time::timeout(USER_TIMEOUT, secrets.delete(&secret_name(&name), &DeleteParams::default())).await;
        if let Err(o) = outcome("delete secret", deleted) {
            return o;
        }
        return OpOutcome::Ok(format!("rotated {name} to {rotation}, deleted its secret"));
    }
    OpOutcome::Ok(format!("rotated {name} to {rotation}"))
}

async fn delete_secret(mut op: OpCtx<Model>) -> OpOutcome {
    let name = pick(&mut op);
    let secrets: Api<Secret> = Api::namespaced(client(op.host()), NAMESPACE);
    let deleted =
        tokio::time::timeout(USER_TIMEOUT, secrets.delete(&secret_name(&name), &DeleteParams::default())).await;
    match outcome("delete secret", deleted) {
        Ok(_) => OpOutcome::Ok(format!("deleted {name}'s secret")),
        Err(o) => o,
    }
}

async fn delete(mut op: OpCtx<Model>) -> OpOutcome {
    let name = pick(&mut op);
    let dbs: Api<Database> = Api::namespaced(client(op.host()), NAMESPACE);
    match outcome("delete", tokio::time::timeout(USER_TIMEOUT, dbs.delete(&name, &DeleteParams::default())).await) {
        Ok(_) => OpOutcome::Ok(format!("deleted {name}")),
        Err(o) => o,
    }
}

/// Reads the Secret and logs in with its password (refusals are reported, not judged: the
/// operator may be mid-rotation).
async fn login(mut op: OpCtx<Model>) -> OpOutcome {
    let name = pick(&mut op);
    let secrets: Api<Secret> = Api::namespaced(client(op.host()), NAMESPACE);
    let secret = match outcome("get secret", tokio::time::timeout(USER_TIMEOUT, secrets.get(&secret_name(&name))).await)
    {
        Ok(s) => s,
        Err(o) => return o,
    };
    let password = password_of(&secret);
    match DbClient::from_host(op.host()).login(&name, &password).await {
        Ok(true) => OpOutcome::Ok(format!("login {name} accepted")),
        Ok(false) => OpOutcome::Ok(format!("login {name} refused")),
        Err(e) => OpOutcome::Indeterminate(e),
    }
}

fn password_of(s: &Secret) -> String {
    s.data
        .as_ref()
        .and_then(|d| d.get("password"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

/// The users' operations.
pub fn workload() -> Workload<Model> {
    Workload::new(Model)
        .op(Operation::new("create", 3, create))
        .op(Operation::new("rotate", 4, rotate))
        .op(Operation::new("delete-secret", 2, delete_secret))
        .op(Operation::new("delete", 1, delete))
        .op(Operation::new("login", 3, login))
}

/// The state every Database must reach once faults heal: its rotation done, its Secret there,
/// and the database accepting the Secret's password. `Ok` with a summary, or what is missing.
async fn converged(client: &kube::Client, db: &DbClient) -> OpOutcome {
    let dbs: Api<Database> = Api::namespaced(client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let list = match tokio::time::timeout(USER_TIMEOUT, dbs.list(&Default::default())).await {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return OpOutcome::Failed(format!("list: {e}")),
        Err(_) => return OpOutcome::Failed("list: timeout".into()),
    };
    for d in &list.items {
        let name = d.name_any();
        if d.metadata.deletion_timestamp.is_some() {
            return OpOutcome::Failed(format!("{name} is still being deleted"));
        }
        let done = d.status.as_ref().map_or(0, |s| s.rotation);
        if done != d.spec.rotation {
            return OpOutcome::Failed(format!("{name}: rotation {} asked, {done} done", d.spec.rotation));
        }
        let secret = match tokio::time::timeout(USER_TIMEOUT, secrets.get_opt(&secret_name(&name))).await {
            Ok(Ok(Some(s))) => s,
            Ok(Ok(None)) => return OpOutcome::Failed(format!("{name}: no Secret")),
            Ok(Err(e)) => return OpOutcome::Failed(format!("{name}: get secret: {e}")),
            Err(_) => return OpOutcome::Failed(format!("{name}: get secret: timeout")),
        };
        match db.login(&name, &password_of(&secret)).await {
            Ok(true) => {}
            Ok(false) => return OpOutcome::Failed(format!("{name}: the database refuses the Secret's password")),
            Err(e) => return OpOutcome::Failed(format!("{name}: {e}")),
        }
    }
    OpOutcome::Ok(format!("{} database(s) converged", list.items.len()))
}

/// kube-runtime's watcher asks the server to end each watch after this (`watcher::Config`'s
/// default `timeoutSeconds`).
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(290);

/// The convergence bound from the operator's settings and the fault schedule (a silent watch
/// stream is only noticed when the server ends it at the watch's timeout).
pub fn bound(silent_watch: bool) -> LivenessBound {
    let lease = lease_settings();
    let bound = if silent_watch {
        LivenessBound::new().plus("a silent watch ends at its timeoutSeconds", WATCH_TIMEOUT)
    } else {
        LivenessBound::new()
    };
    bound
        .plus("lease takeover (duration + retry)", lease.duration + lease.retry)
        .plus("watcher backoff cap", Duration::from_secs(30))
        .plus("resync", RESYNC)
        .plus("error requeue + database timeout", ERROR_REQUEUE + DB_TIMEOUT * 2)
}

/// The API-server faults a run drew: whether a silent watch cut is among them, and the fake time
/// (since the run started) the last of them ends.
#[derive(Copy, Clone, Debug, Default)]
pub struct ApiFaults {
    /// A silent watch cut was drawn (the bound waits for the watch's timeout).
    pub silent_watch: bool,
    /// When the last fault ends.
    pub end: Duration,
}

/// Liveness: every Database converges within [`bound`] after healing and after the last API
/// fault ended (the checker reads through the API server: a stale list still installed would
/// show it a past state as converged).
///
/// # Errors
/// A liveness failure of oracle `converges`.
pub async fn converges(ctx: &Ctx, faults: ApiFaults) -> Result<(), Failure> {
    let host = ctx.net().host("checker");
    let (client, db) = (client(&host), DbClient::from_host(&host));
    if faults.end >= ctx.elapsed() {
        // Strictly after the last fault's release (an event at that same instant).
        tokio::time::sleep(faults.end - ctx.elapsed() + Duration::from_millis(1)).await;
    }
    check::liveness(ctx, &bound(faults.silent_watch), || converged(&client, &db))
        .await
        .map_err(|f| Failure { oracle: Some(CONVERGES), ..f })
}

/// The rotation oracle: every Database's Secret holds a password the operator made for the
/// Database's current rotation (or a later one), and the database's current password is it.
///
/// # Errors
/// A correctness failure of oracle `rotation-kept`.
pub fn rotation_kept(api: &kubesim::server::ApiServer, passwords: &Passwords, disk: &Users) -> Result<(), Failure> {
    for d in api.list_json("databases.example.com", Some(NAMESPACE)) {
        let name = d["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let rotation = d["spec"]["rotation"].as_u64().unwrap_or(0);
        let Some(secret) = api.get_json("secrets", Some(NAMESPACE), &secret_name(&name)) else { continue };
        let encoded = secret["data"]["password"].as_str().unwrap_or_default();
        let password = String::from_utf8(base64_decode(encoded)).unwrap_or_default();
        match passwords.of(&password) {
            Some((db, made_for, _)) if db == name && made_for >= rotation => {}
            Some((db, made_for, by)) => {
                return Err(Failure::correctness(
                    ROTATION_KEPT,
                    format!(
                        "rotation {rotation} of {name} lost: its Secret holds the password {by} made for rotation \
                         {made_for} of {db} (database's current password: {:?})",
                        disk.password(&name)
                    ),
                ));
            }
            None => {
                return Err(Failure::correctness(
                    ROTATION_KEPT,
                    format!("{name}'s Secret holds a password the operator never made"),
                ));
            }
        }
    }
    Ok(())
}

fn base64_decode(s: &str) -> Vec<u8> {
    serde_json::from_value::<k8s_openapi::ByteString>(serde_json::Value::String(s.to_string()))
        .map(|b| b.0)
        .unwrap_or_default()
}
