//! The operator: two replicas elect a leader over the Lease [`LEASE`]; the leader runs a kube-rs
//! `Controller` over Databases (owning their Secrets) until it loses the Lease or is stopped.
//!
//! Reconcile (through kube-runtime's finalizer helper, [`FINALIZER`]):
//! - re-reads the Database (the controller's copy may be stale);
//! - no Secret: makes a password for the current rotation, sets it on the database service, and
//!   creates the Secret;
//! - a rotation asked for (`spec.rotation > status.rotation`) and not yet in the Secret (its
//!   [`ROTATION_ANNOTATION`]): makes a new password, sets it on the database, and replaces the
//!   Secret with the resourceVersion it read (409 → try again). If the Secret was deleted
//!   meanwhile (404), it creates it with the **new** password;
//! - otherwise makes sure the database accepts the Secret's password;
//! - then records the rotation in `status.rotation`.
//!
//! Cleanup drops the database user and the Secret.
//!
//! Planted bug 1 ([`Variant::StaleSecretRecreated`]): on that 404 it recreates the Secret from the
//! copy it read, the old password: the rotation is lost (and the self-healing step then gives the
//! database the old password back).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use sim::node::{BoxError, NodeCtx};

use super::crd::{Database, FINALIZER, NAMESPACE, secret_name};
use super::dbservice::DbClient;
use super::election::{Elector, LeaseSettings, Write};
use super::{API_URL, Passwords, Variant};

/// The Lease the replicas elect a leader over.
pub const LEASE: &str = "databases-operator";
/// How often the leader looks at every Database even without a change.
pub const RESYNC: Duration = Duration::from_secs(30);
/// The annotation on a Secret naming the rotation its password was made for.
pub const ROTATION_ANNOTATION: &str = "example.com/rotation";
/// The requeue after an error.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(1);

/// What a reconcile can fail with.
#[derive(Debug)]
pub enum Error {
    /// The API server's answer or a transport error.
    Kube(kube::Error),
    /// The database service's.
    Db(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Kube(e) => write!(f, "kube: {e}"),
            Error::Db(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(e)
    }
}

/// The reconciler's context.
pub struct Context {
    client: kube::Client,
    db: DbClient,
    variant: Variant,
    identity: String,
    passwords: Arc<Passwords>,
}

impl Context {
    fn new_password(&self, db: &str, rotation: u64) -> String {
        // A password is the OS's randomness (`getrandom`, which a run answers from its root
        // seed), not a choice: a fuzz input that runs out would answer every choice with the
        // same simplest value, and equal passwords would read as a lost rotation.
        let bytes: [u8; 8] = rand::random();
        let password: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.passwords.made(db, rotation, &password, &self.identity);
        password
    }
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The Secret for `db` holding `password`, owned by the Database.
fn secret(db: &Database, password: &str, rotation: u64) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(secret_name(&db.name_any()));
    s.metadata.namespace = Some(NAMESPACE.to_string());
    s.metadata.owner_references = db.controller_owner_ref(&()).map(|o| vec![o]);
    s.metadata.annotations = Some([(ROTATION_ANNOTATION.to_string(), rotation.to_string())].into());
    s.data = Some([("password".to_string(), ByteString(password.as_bytes().to_vec()))].into());
    s
}

/// The rotation a Secret's password was made for (its `example.com/rotation` annotation).
fn rotation_of(s: &Secret) -> u64 {
    s.metadata.annotations.as_ref().and_then(|a| a.get(ROTATION_ANNOTATION)).and_then(|r| r.parse().ok()).unwrap_or(0)
}

fn password_of(s: &Secret) -> Option<String> {
    s.data.as_ref()?.get("password").map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

/// `s` as a new object to create: without the identity of the one that was deleted.
fn fresh(mut s: Secret) -> Secret {
    s.metadata.resource_version = None;
    s.metadata.uid = None;
    s.metadata.creation_timestamp = None;
    s.metadata.managed_fields = None;
    s
}

async fn rotate(db: &Database, current: Secret, want: u64, ctx: &Context) -> Result<Option<Action>, Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let name = db.name_any();
    let password = ctx.new_password(&name, want);
    ctx.db.set_password(&name, &password).await.map_err(Error::Db)?;
    let mut next = secret(db, &password, want);
    next.metadata.resource_version = current.metadata.resource_version.clone();
    match secrets.replace(&secret_name(&name), &PostParams::default(), &next).await {
        Ok(_) => Ok(None),
        Err(e) if is_code(&e, 409) => Ok(Some(Action::requeue(ERROR_REQUEUE))),
        Err(e) if is_code(&e, 404) => {
            // Deleted while this reconcile was in flight.
            let recreated = match ctx.variant {
                Variant::StaleSecretRecreated => fresh(current),
                _ => fresh(next),
            };
            match secrets.create(&PostParams::default(), &recreated).await {
                Ok(_) => Ok(None),
                Err(e) if is_code(&e, 409) => Ok(Some(Action::requeue(ERROR_REQUEUE))),
                Err(e) => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

async fn apply(cached: Arc<Database>, ctx: &Context) -> Result<Action, Error> {
    let dbs: Api<Database> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let name = cached.name_any();
    let Some(db) = dbs.get_opt(&name).await? else { return Ok(Action::await_change()) };
    let want = db.spec.rotation;
    let done = db.status.as_ref().map_or(0, |s| s.rotation);
    match secrets.get_opt(&secret_name(&name)).await? {
        None => {
            let password = ctx.new_password(&name, want);
            ctx.db.set_password(&name, &password).await.map_err(Error::Db)?;
            match secrets.create(&PostParams::default(), &secret(&db, &password, want)).await {
                Ok(_) => {}
                Err(e) if is_code(&e, 409) => return Ok(Action::requeue(ERROR_REQUEUE)),
                Err(e) => return Err(e.into()),
            }
        }
        // Rotate, unless the Secret already holds this rotation's password (a rotation whose
        // status write failed: rotating again would change the Secret, whose event reconciles
        // again — a hot loop while the status write keeps failing).
        Some(current) if done < want && rotation_of(&current) < want => {
            if let Some(action) = rotate(&db, current, want, ctx).await? {
                return Ok(action);
            }
        }
        // The Secret holds this rotation already: only the status is left to write.
        Some(_) if done < want => {}
        Some(current) => {
            let password = password_of(&current).unwrap_or_default();
            if !ctx.db.login(&name, &password).await.map_err(Error::Db)? {
                ctx.db.set_password(&name, &password).await.map_err(Error::Db)?;
            }
        }
    }
    if done < want {
        let status = serde_json::json!({ "status": { "rotation": want } });
        dbs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    }
    Ok(Action::requeue(RESYNC))
}

async fn cleanup(db: Arc<Database>, ctx: &Context) -> Result<Action, Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let name = db.name_any();
    ctx.db.drop_user(&name).await.map_err(Error::Db)?;
    match secrets.delete(&secret_name(&name), &Default::default()).await {
        Ok(_) => {}
        Err(e) if is_code(&e, 404) => {}
        Err(e) => return Err(e.into()),
    }
    let uid = db.metadata.uid.clone().unwrap_or_default();
    ctx.passwords.cleanups.record(kubesim::models::object_ref(db.as_ref()), &uid, Duration::ZERO);
    Ok(Action::await_change())
}

/// What the controller's reconcile fails with: the finalizer helper's error, or a panic the
/// one-reconcile guard caught.
#[derive(Debug)]
pub enum ReconcileError {
    /// From the finalizer helper (wrapping [`Error`]).
    Finalizer(finalizer::Error<Error>),
    /// A panic inside reconcile (it also fails the run).
    Panic(kubesim::models::ReconcilePanic),
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconcileError::Finalizer(e) => write!(f, "{e}"),
            ReconcileError::Panic(p) => write!(f, "{p}"),
        }
    }
}

impl std::error::Error for ReconcileError {}

impl From<kubesim::models::ReconcilePanic> for ReconcileError {
    fn from(p: kubesim::models::ReconcilePanic) -> Self {
        ReconcileError::Panic(p)
    }
}

async fn reconcile(db: Arc<Database>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let dbs: Api<Database> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    finalizer(&dbs, FINALIZER, db, |event| async {
        match event {
            finalizer::Event::Apply(db) => apply(db, &ctx).await,
            finalizer::Event::Cleanup(db) => cleanup(db, &ctx).await,
        }
    })
    .await
    .map_err(ReconcileError::Finalizer)
}

fn error_policy(_db: Arc<Database>, _error: &ReconcileError, _ctx: Arc<Context>) -> Action {
    Action::requeue(ERROR_REQUEUE)
}

async fn run_controller(ctx: Arc<Context>) {
    let dbs: Api<Database> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    // One reconcile at a time per Database, and a panic fails the run (kubesim's model).
    let guard = kubesim::models::Guard::new();
    Controller::new(dbs, watcher::Config::default())
        .owns(secrets, watcher::Config::default())
        .run(guard.wrap(reconcile), error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// One operator replica.
///
/// # Errors
/// Never: API errors are retried.
pub async fn main(node: NodeCtx, variant: Variant, passwords: Arc<Passwords>) -> Result<(), BoxError> {
    let client = kubesim::client::for_node(&node, API_URL);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let write = if variant == Variant::LeaseMergePatch { Write::MergePatch } else { Write::Update };
    let mut elector = Elector::new(leases, LEASE, node.name(), LeaseSettings::default(), write);
    let ctx =
        Arc::new(Context { client, db: DbClient::new(&node), variant, identity: node.name().to_string(), passwords });
    node.set_ready();
    elector.campaign(&node, || node.spawn(run_controller(Arc::clone(&ctx)))).await;
    Ok(())
}
