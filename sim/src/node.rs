//! Nodes: the user's services as named instances on the simulated network, and their lifecycle.
//!
//! A [`Service`] is an async entry point (`Fn(NodeCtx) -> Future<Output = Result<(), BoxError>>`)
//! with replicas, a termination grace and optional other versions. [`System::start`] starts each
//! replica as a *node* (`cart-0`, `cart-1`, …) on its own host, routes the service's name to its
//! replicas ClusterIP-style, and waits until each says it is ready (a [`Service::finite`] job is
//! not waited for: it has no readiness).
//!
//! **Lifecycle events** ([`Lifecycle`]), usable at fake times ([`System::at`]) and drawn by the
//! swarm ([`System::schedule_lifecycle`]), follow Kubernetes:
//!
//! | event | what happens |
//! |---|---|
//! | start | a new *incarnation* of the node: a fresh [`NodeCtx`] and host handle |
//! | sigterm | the shutdown signal fires; the node must end within its grace, else it is killed |
//! | crash | the incarnation's tasks are dropped and its sockets fenced: seeded between *reset* (every connection reset: a killed process) and *vanish* (silence: a dead machine) |
//! | sigkill-after(d) | SIGTERM with `d` as the grace for this event, then a kill at +d if still running (`kubectl delete --grace-period`) |
//! | restart | crash or SIGTERM (seeded), then start on the same host |
//! | rollout | per replica: out of routing, SIGTERM, start (maybe another version), wait ready, back in |
//! | partition(d) | the node's host is cut off for d |
//!
//! An event naming a node, service or version that does not exist is an error (oracle
//! `lifecycle`), never a silent no-op. A crash or a kill that ends an incarnation while something
//! waits for it to become ready (a start, a restart, a rollout) is a lifecycle event, not a
//! readiness failure: the wait ends there, and the node stays down until the next start.
//!
//! **Dropping a node's tasks.** tokio cannot abort a task by id, so a node's tasks are reached two
//! ways: every task spawned through the node — [`NodeCtx::spawn`], its hyper [`NodeCtx::executor`],
//! [`serve`], [`NodeCtx::http_client`] — is tracked and aborted when the incarnation ends; and
//! every task is given, at spawn, the node of the task that spawned it (lineage through tokio's
//! spawn hook), so a task spawned by a library with a plain `tokio::spawn` is still known to be
//! the node's. When an incarnation ends, its host handle refuses every operation (`ENETDOWN`) and
//! its sockets are fenced, and any of its tasks that keeps running afterwards is counted: a
//! crashed node's task that runs after the crash is a *leak* failure (oracle `zombie`, checked at
//! the end of every run and by [`System::stop`]), and a task left behind by a node that stopped
//! cleanly is a *leak* (oracle `leak`) naming where it was spawned. The drop cascade of the end
//! itself — tokio cancelling aborted tasks (a `JoinSet`'s children too), a worker waking to find
//! its channels closed and returning, a task a destructor spawns — is not counted (see
//! [`crate::runtime`]). A task of a shared model that serves every node (an in-memory store's
//! actor) belongs to no node: spawn it with [`crate::spawn_detached`].
//!
//! **A crash runs destructors** (a known difference from SIGKILL): ending an incarnation aborts
//! its tasks, and tokio drops an aborted task's future, so `Drop` impls run — a lock guard
//! releases, a lease is given back, a buffered writer flushes — where a killed process would run
//! nothing. Keep state that must survive a crash out of destructors' reach, or model it in a
//! shared model the crash does not touch.
//!
//! **Exit causes** are recorded ([`ExitCause`]) at the instant the entry point returns, and
//! checked: a node that ends with no lifecycle event sent (unless its service is
//! [`Service::finite`] and returned `Ok`, or is [`Service::may_fail`] and returned an error), that
//! answers SIGTERM with an error, or that outlives its grace, is a correctness failure of the
//! `exit-cause` oracle. A node served with [`serve`] that stops after SIGTERM while requests are
//! still in flight — a handler still running, or a response body not yet fully sent — is a
//! correctness failure of the `drain` oracle.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::RangeInclusive;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::check::{Check, Verdict};
use crate::net::{Ending, Host, Partition};
use crate::report::{Class, Failure};
use crate::runtime::Owner;
use crate::{Ctx, Event};

/// The error type node entry points return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

type EntryFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;
type Entry = Arc<dyn Fn(NodeCtx) -> EntryFuture + Send + Sync>;

/// A service: an entry point and how to run it.
#[derive(Clone)]
pub struct Service {
    name: String,
    versions: Vec<(String, Entry)>,
    replicas: RangeInclusive<u64>,
    grace: Duration,
    ready_timeout: Duration,
    env: BTreeMap<String, String>,
    finite: bool,
    may_fail: bool,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("name", &self.name).field("replicas", &self.replicas).finish_non_exhaustive()
    }
}

impl Service {
    /// A service named `name` (its replicas are `name-0`, `name-1`, …, reachable as `name`)
    /// running `entry`, as version `v1`. One replica, a 30 s grace (Kubernetes' default), 30 s to
    /// become ready.
    ///
    /// `entry` is called at each start of each replica (a restart, a rollout start it again). A
    /// closure passes it shared state — a database model every replica uses, a config, a
    /// planted-bug switch — which outlives incarnations as a database outlives a pod:
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use sim::node::{BoxError, NodeCtx, Service};
    ///
    /// async fn kv(node: NodeCtx, store: Arc<Mutex<Vec<String>>>) -> Result<(), BoxError> {
    ///     let _listener = node.host().listen("8080")?;
    ///     store.lock().unwrap().push(format!("{} started", node.name()));
    ///     node.set_ready();
    ///     node.shutdown_signal().await;
    ///     Ok(())
    /// }
    ///
    /// let store = Arc::new(Mutex::new(Vec::new()));
    /// let service = Service::new("kv", move |node| kv(node, store.clone())).replicas(2..=2);
    /// # let _ = service;
    /// ```
    pub fn new<F, Fut>(name: &str, entry: F) -> Service
    where
        F: Fn(NodeCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        Service {
            name: name.to_string(),
            versions: vec![("v1".to_string(), Arc::new(move |node| Box::pin(entry(node)) as EntryFuture))],
            replicas: 1..=1,
            grace: Duration::from_secs(30),
            ready_timeout: Duration::from_secs(30),
            env: BTreeMap::new(),
            finite: false,
            may_fail: false,
        }
    }

    /// Another version of the entry point, which rollouts may start.
    pub fn version<F, Fut>(mut self, version: &str, entry: F) -> Service
    where
        F: Fn(NodeCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.versions.push((version.to_string(), Arc::new(move |node| Box::pin(entry(node)) as EntryFuture)));
        self
    }

    /// How many replicas: drawn by the swarm from this range (dimension `<name>.replicas`).
    pub fn replicas(mut self, range: RangeInclusive<u64>) -> Service {
        self.replicas = range;
        self
    }

    /// How long a node may take to stop after SIGTERM before it is killed (Kubernetes'
    /// `terminationGracePeriodSeconds`); outliving it fails the `exit-cause` oracle.
    /// [`Lifecycle::SigkillAfter`] gives its own grace for that one event.
    pub fn grace(mut self, grace: Duration) -> Service {
        self.grace = grace;
        self
    }

    /// How long a node may take to say it is ready ([`NodeCtx::set_ready`]) when something waits
    /// for it (a start, a restart, a rollout); not ready by then is a liveness failure of oracle
    /// `readiness`. Unused for a [`Service::finite`] job.
    pub fn ready_timeout(mut self, timeout: Duration) -> Service {
        self.ready_timeout = timeout;
        self
    }

    /// An environment variable every node of the service sees ([`NodeCtx::env`]).
    pub fn env(mut self, key: &str, value: &str) -> Service {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    /// The service is a job, not a server: it may return `Ok` on its own (recorded as
    /// [`ExitCause::Returned`]), and nothing waits for it to become ready — [`System::start`]
    /// returns once it is launched (Kubernetes gates no rollout on a Job's readiness). A job that
    /// returns an error on its own still fails the `exit-cause` oracle, unless
    /// [`Service::may_fail`].
    pub fn finite(mut self) -> Service {
        self.finite = true;
        self
    }

    /// The node may end on its own with an error without failing the run: a job allowed to fail,
    /// a server expected to exit when a dependency is gone. The exit is still recorded
    /// ([`ExitCause::Error`]). Answering SIGTERM with an error is still a failure.
    pub fn may_fail(mut self) -> Service {
        self.may_fail = true;
        self
    }
}

/// Why a node's incarnation ended, as recorded at the instant it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitCause {
    /// Its entry point returned `Ok` with no lifecycle event sent.
    Returned,
    /// Its entry point returned an error with no lifecycle event sent.
    Error(String),
    /// It returned after SIGTERM (`Ok(())`, or the error it returned).
    Signal(Result<(), String>),
    /// It was crashed.
    Crash(CrashMode),
    /// It was still running when its grace after SIGTERM ran out (the service's, or the one
    /// [`Lifecycle::SigkillAfter`] gave), and was killed: its connections are reset.
    Killed,
}

/// How a crash fences the node's sockets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Every connection is reset (the peer sees RST): a killed process.
    Reset,
    /// Silence: a dead machine; peers learn of it only from their own timeouts.
    Vanish,
}

/// One ended incarnation.
#[derive(Clone, Debug)]
pub struct ExitRecord {
    /// The node (`cart-1`).
    pub node: String,
    /// Its incarnation.
    pub incarnation: u64,
    /// Its version.
    pub version: String,
    /// Why it ended.
    pub cause: ExitCause,
    /// When (fake time since the run started).
    pub at: Duration,
    /// Tasks of the incarnation aborted when it ended (tracked tasks still running).
    pub aborted_tasks: usize,
}

/// A lifecycle event for a node (or, for a rollout, a service). Naming a node, service or
/// version that does not exist makes [`System::apply`] fail (oracle `lifecycle`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Starts the node if it is down, and waits until it is ready (not for a job). Ready-wait
    /// ended by a crash or kill of that incarnation is not a failure.
    Start(String),
    /// Sends SIGTERM (nothing if the node is down or already terminating).
    Sigterm(String),
    /// Crashes the node (`None`: the seed picks the mode); nothing if it is down.
    Crash(String, Option<CrashMode>),
    /// SIGTERM with the given duration as the grace for this event (it replaces the service's
    /// grace, as `kubectl delete --grace-period` does): if the node still runs when it has
    /// passed, it is killed ([`ExitCause::Killed`]), which is what the event asked for and not
    /// a failure. On a node already terminating, it adds that kill; the earlier SIGTERM's grace
    /// still holds.
    SigkillAfter(String, Duration),
    /// Restarts the node: gracefully (`true`: SIGTERM, wait until it ended, killed after its
    /// grace) or by a crash (`false`), then starts it and waits until it is ready.
    Restart(String, bool),
    /// Rolls a service out, replica by replica, to a version (`None`: the same version).
    Rollout(String, Option<String>),
    /// Cuts the node's host off for the given time.
    Partition(String, Duration),
}

/// A node's tracked tasks: aborted when its incarnation ends.
#[derive(Clone, Default)]
struct TaskSet {
    handles: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl TaskSet {
    fn track(&self, handle: tokio::task::AbortHandle) {
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        handles.retain(|h| !h.is_finished());
        handles.push(handle);
    }

    /// Aborts every tracked task still alive; returns their ids.
    fn abort_all(&self) -> Vec<tokio::task::Id> {
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|p| p.into_inner()));
        let alive: Vec<tokio::task::AbortHandle> = handles.into_iter().filter(|h| !h.is_finished()).collect();
        for h in &alive {
            h.abort();
        }
        alive.iter().map(tokio::task::AbortHandle::id).collect()
    }
}

struct NodeInner {
    ctx: Ctx,
    name: String,
    service: String,
    replica: u64,
    incarnation: u64,
    version: String,
    owner: Owner,
    host: Host,
    env: BTreeMap<String, String>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// Set once the node looked at its shutdown signal after SIGTERM.
    observed_sigterm: Arc<std::sync::atomic::AtomicBool>,
    status: tokio::sync::watch::Sender<Status>,
    tasks: TaskSet,
    /// Requests [`serve`] is handling: (sequence, `METHOD path`).
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    inflight: Arc<Mutex<InFlight>>,
}

#[derive(Default)]
struct InFlight {
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    next: u64,
    open: BTreeMap<u64, String>,
}

/// Where an incarnation is, for those waiting on it (a start waiting for readiness, a restart
/// waiting for the end).
#[derive(Clone, Debug, Default)]
struct Status {
    /// It said it is ready.
    ready: bool,
    /// It ended, and why.
    ended: Option<ExitCause>,
    /// Its end was fully processed: tasks aborted and dropped, sockets fenced, leftovers checked.
    settled: bool,
}

/// What a node's entry point gets: its host, its shutdown signal, a readiness switch, and a way to
/// spawn tasks that die with it. Cheap to clone.
#[derive(Clone)]
pub struct NodeCtx {
    inner: Arc<NodeInner>,
}

impl std::fmt::Debug for NodeCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCtx").field("node", &self.inner.name).field("incarnation", &self.inner.incarnation).finish()
    }
}

impl NodeCtx {
    /// The node's name (`cart-1`): its host's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The service it is a replica of (`cart`).
    pub fn service(&self) -> &str {
        &self.inner.service
    }

    /// Its replica index.
    pub fn replica(&self) -> u64 {
        self.inner.replica
    }

    /// Its incarnation: 1 for the first start, one more for each restart.
    pub fn incarnation(&self) -> u64 {
        self.inner.incarnation
    }

    /// The version of the entry point running (`v1` unless a rollout chose another).
    pub fn version(&self) -> &str {
        &self.inner.version
    }

    /// The node's host, bound to this incarnation: once it ends, every operation through it fails
    /// `ENETDOWN`.
    pub fn host(&self) -> &Host {
        &self.inner.host
    }

    /// An environment variable of the service.
    pub fn env(&self, key: &str) -> Option<&str> {
        self.inner.env.get(key).map(String::as_str)
    }

    /// The run.
    pub fn sim(&self) -> &Ctx {
        &self.inner.ctx
    }

    /// Whether SIGTERM was received.
    pub fn terminating(&self) -> bool {
        let terminating = *self.inner.shutdown.borrow();
        if terminating {
            self.inner.observed_sigterm.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        terminating
    }

    /// Resolves when SIGTERM arrives (at once if it already did). `Send + 'static`, for
    /// `with_graceful_shutdown`-style APIs.
    ///
    /// This and [`NodeCtx::terminating`] are how a node learns of SIGTERM; the `exit-cause`
    /// oracle counts a node as answering SIGTERM only once it did (an entry point that returns
    /// an error after a SIGTERM it never looked at failed on its own).
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.inner.shutdown.clone();
        let observed = Arc::clone(&self.inner.observed_sigterm);
        async move {
            if rx.wait_for(|term| *term).await.is_ok() {
                observed.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }

    /// Says the node is ready to serve (its readiness probe passes).
    pub fn set_ready(&self) {
        // Once the incarnation ended, it cannot become ready any more.
        self.inner.status.send_if_modified(|status| {
            let changed = !status.ready && status.ended.is_none();
            status.ready |= changed;
            changed
        });
    }

    /// Spawns a task that belongs to the node: aborted when the incarnation ends.
    pub fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = tokio::spawn(future);
        self.inner.ctx.tasks().set_owner(handle.id(), Some(self.inner.owner));
        self.inner.tasks.track(handle.abort_handle());
        handle
    }

    #[cfg(feature = "hyper")]
    /// A hyper executor spawning onto the node ([`NodeCtx::spawn`]): give it to hyper and
    /// hyper-util builders so their connection tasks die with the node.
    pub fn executor(&self) -> NodeExecutor {
        NodeExecutor { node: self.clone() }
    }

    #[cfg(feature = "hyper")]
    /// A hyper-util client dialing through the node's host, spawning on the node, with tokio's
    /// timers.
    pub fn http_client<B>(&self) -> hyper_util::client::legacy::Client<crate::net::adapters::Connector, B>
    where
        B: hyper::body::Body + Send + 'static + Unpin,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        hyper_util::client::legacy::Client::builder(self.executor())
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(crate::net::adapters::Connector::new(self.host().clone()))
    }
}

#[cfg(feature = "hyper")]
/// A hyper executor whose tasks belong to a node (see [`NodeCtx::executor`]).
#[derive(Clone, Debug)]
pub struct NodeExecutor {
    node: NodeCtx,
}

#[cfg(feature = "hyper")]
impl<F> hyper::rt::Executor<F> for NodeExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        drop(self.node.spawn(future));
    }
}

#[cfg(feature = "hyper")]
/// Serves a tower service (an axum `Router`, a tonic router) over HTTP/1.1 and HTTP/2 on a node:
/// accepts on `listener`, serves each connection on the node's executor with tokio's timers,
/// and on SIGTERM stops accepting and drains: it returns once every open connection has finished
/// its in-flight requests (hyper's graceful shutdown; bounded only by the node's grace).
///
/// For the `drain` oracle a request is in flight from when its handler is called until its
/// response body has been sent to the end (or dropped: the client went away), so a streaming
/// body cut off by a node that returns early is caught like an unanswered request.
///
/// # Errors
/// Never: accept errors end the loop as a closed listener does.
pub async fn serve<S, B>(node: &NodeCtx, listener: crate::net::TcpListener, service: S) -> Result<(), BoxError>
where
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let shutdown = node.shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else { break };
                let tracked = Tracked { inner: service.clone(), inflight: Arc::clone(&node.inner.inflight) };
                let service = hyper_util::service::TowerToHyperService::new(tracked);
                let mut builder = hyper_util::server::conn::auto::Builder::new(node.executor());
                builder.http1().timer(hyper_util::rt::TokioTimer::new());
                builder.http2().timer(hyper_util::rt::TokioTimer::new());
                let connection = builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service).into_owned();
                let watched = graceful.watch(connection);
                node.spawn(async move {
                    let _ = watched.await;
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

#[cfg(feature = "hyper")]
/// Keeps a node's in-flight requests, for the drain oracle.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    inflight: Arc<Mutex<InFlight>>,
}

#[cfg(feature = "hyper")]
impl<S, B> tower_service::Service<http::Request<hyper::body::Incoming>> for Tracked<S>
where
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<hyper::body::Incoming>) -> Self::Future {
        let seq = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            inflight.next += 1;
            let seq = inflight.next;
            inflight.open.insert(seq, format!("{} {}", request.method(), request.uri().path()));
            seq
        };
        let future = self.inner.call(request);
        // Removed when the response body has been sent to the end, or when hyper drops the
        // handler's future or the body (its client went away).
        let done = Done { inflight: Arc::clone(&self.inflight), seq };
        Box::pin(async move {
            let response = future.await?;
            Ok(response.map(|body| TrackedBody { inner: Box::pin(body), done: Some(done) }))
        })
    }
}

#[cfg(feature = "hyper")]
/// A response body that keeps its request in flight until its last frame was taken.
struct TrackedBody<B> {
    inner: Pin<Box<B>>,
    done: Option<Done>,
}

#[cfg(feature = "hyper")]
impl<B: hyper::body::Body> hyper::body::Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        let polled = self.inner.as_mut().poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None | Some(Err(_)))) {
            self.done = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(feature = "hyper")]
/// Takes a request out of the in-flight set when dropped.
struct Done {
    inflight: Arc<Mutex<InFlight>>,
    seq: u64,
}

#[cfg(feature = "hyper")]
impl Drop for Done {
    fn drop(&mut self) {
        self.inflight.lock().unwrap_or_else(|p| p.into_inner()).open.remove(&self.seq);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    Terminating,
    Down,
}

struct Instance {
    service: String,
    replica: u64,
    version: String,
    incarnation: u64,
    owner: Owner,
    phase: Phase,
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    status: tokio::sync::watch::Sender<Status>,
    tasks: TaskSet,
    root: Option<tokio::task::AbortHandle>,
    /// When SIGTERM was sent to this incarnation.
    sigterm_at: Option<Duration>,
    /// Whether the incarnation looked at its shutdown signal after SIGTERM (a resolved
    /// [`NodeCtx::shutdown_signal`], or [`NodeCtx::terminating`] saying so).
    observed_sigterm: Arc<std::sync::atomic::AtomicBool>,
    inflight: Arc<Mutex<InFlight>>,
}

struct State {
    services: BTreeMap<String, Service>,
    instances: BTreeMap<String, Instance>,
    exits: Vec<ExitRecord>,
    /// Lifecycle events scheduled with [`System::at`] and not yet cancelled.
    scheduled: Vec<crate::EventId>,
    /// Bumped by `heal` and `stop`: a scheduled event of an older epoch does nothing.
    epoch: u64,
}

/// The node incarnation each task owner stands for: shared with the end-of-run zombie check.
type Owners = Arc<Mutex<BTreeMap<Owner, (String, u64)>>>;

/// The run's nodes: services, their instances, their lifecycle, and what ended them. Cheap to
/// clone.
#[derive(Clone)]
pub struct System {
    ctx: Ctx,
    state: Arc<Mutex<State>>,
    owners: Owners,
    /// How many scheduled lifecycle events are being performed now.
    running_events: Arc<tokio::sync::watch::Sender<u32>>,
}

impl std::fmt::Debug for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("System").finish_non_exhaustive()
    }
}

/// One incarnation, as those waiting on it see it.
struct Watch {
    incarnation: u64,
    status: tokio::sync::watch::Receiver<Status>,
}

impl Watch {
    /// Until the incarnation's end has been fully processed. Bounded by the grace timer of a
    /// SIGTERM, or by nothing at all for an incarnation nobody stops.
    async fn settled(mut self) {
        // An error means every sender is gone: nothing can end it any more.
        let _ = self.status.wait_for(|s| s.settled).await;
    }
}

/// An incarnation that has just ended, for the rest of its end ([`System::settle`]).
struct Ended {
    name: String,
    incarnation: u64,
    owner: Owner,
    crashed: bool,
    status: tokio::sync::watch::Sender<Status>,
}

fn fail_exit(ctx: &Ctx, message: String) {
    ctx.fail(Failure::correctness("exit-cause", message));
}

fn lifecycle_error(message: String) -> Failure {
    Failure::correctness("lifecycle", message)
}

fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    keys.map(String::as_str).collect::<Vec<_>>().join(", ")
}

/// Polls of tasks of ended incarnations after they ended, by node and incarnation.
fn zombies(ctx: &Ctx, owners: &Owners) -> BTreeMap<(String, u64), u64> {
    let polls = ctx.tasks().zombie_polls();
    let owners = owners.lock().unwrap_or_else(|p| p.into_inner());
    polls.into_iter().filter_map(|(owner, n)| owners.get(&owner).map(|k| (k.clone(), n))).collect()
}

/// Where the first zombie task of each ended incarnation was spawned.
fn zombie_sites(ctx: &Ctx, owners: &Owners) -> BTreeMap<(String, u64), String> {
    let sites = ctx.tasks().zombie_sites();
    let owners = owners.lock().unwrap_or_else(|p| p.into_inner());
    sites.into_iter().filter_map(|(owner, at)| owners.get(&owner).map(|k| (k.clone(), at.to_string()))).collect()
}

fn zombie_failure(ctx: &Ctx, owners: &Owners) -> Option<Failure> {
    let zombies = zombies(ctx, owners);
    let ((node, incarnation), polls) = zombies.iter().next()?;
    let site = zombie_sites(ctx, owners)
        .get(&(node.clone(), *incarnation))
        .map(|at| format!(" (the first spawned at {at})"))
        .unwrap_or_default();
    Some(
        Failure::new(
            Class::Leak,
            format!(
                "tasks of {node} (incarnation {incarnation}) kept running after it ended ({polls} poll(s) since){site}: \
                 spawn a node's tasks through its NodeCtx so they die with it (a task of a shared model that serves every \
                 node: sim::spawn_detached)"
            ),
        )
        .oracle("zombie"),
    )
}

/// The zombie oracle at the end of every run that has a [`System`].
struct ZombieCheck {
    owners: Owners,
}

impl Check for ZombieCheck {
    fn name(&self) -> &str {
        "zombie"
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        // A leak, not a correctness violation: reported with its own class.
        if let Some(failure) = zombie_failure(ctx, &self.owners) {
            ctx.fail(failure);
        }
        Verdict::Pass
    }
}

impl System {
    /// The nodes of the run of `ctx`. Installs the end-of-run zombie check (a task of an ended
    /// incarnation that kept running fails the run with class *leak*, oracle `zombie`).
    pub fn new(ctx: &Ctx) -> System {
        let owners = Owners::default();
        ctx.add_check(ZombieCheck { owners: Arc::clone(&owners) });
        System {
            ctx: ctx.clone(),
            state: Arc::new(Mutex::new(State {
                services: BTreeMap::new(),
                instances: BTreeMap::new(),
                exits: Vec::new(),
                scheduled: Vec::new(),
                epoch: 0,
            })),
            owners,
            running_events: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Declares a service; its replicas are drawn now (dimension `<name>.replicas`) and named
    /// `<name>-0`, `<name>-1`, …; the service's name routes to them ClusterIP-style. Returns the
    /// replicas' names.
    pub fn add(&self, service: Service) -> Vec<String> {
        let (lo, hi) = (*service.replicas.start(), *service.replicas.end());
        let count = if lo == hi { lo } else { self.ctx.swarm().int(&format!("{}.replicas", service.name), lo..=hi) };
        let names: Vec<String> = (0..count).map(|i| format!("{}-{i}", service.name)).collect();
        let mut st = self.lock();
        for (i, name) in names.iter().enumerate() {
            st.instances.insert(
                name.clone(),
                Instance {
                    service: service.name.clone(),
                    replica: i as u64,
                    version: service.versions[0].0.clone(),
                    incarnation: 0,
                    owner: Owner::MAX,
                    phase: Phase::Down,
                    shutdown: None,
                    status: tokio::sync::watch::Sender::new(Status::default()),
                    tasks: TaskSet::default(),
                    root: None,
                    sigterm_at: None,
                    observed_sigterm: Arc::default(),
                    inflight: Arc::default(),
                },
            );
        }
        st.services.insert(service.name.clone(), service.clone());
        drop(st);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        self.ctx.net().cluster_ip(&service.name, &refs);
        names
    }

    /// Starts every node that is down and waits until each is ready (jobs, [`Service::finite`],
    /// are not waited for). A node that is crashed or killed while it starts is not waited for
    /// either: that is a lifecycle event, not a readiness failure.
    ///
    /// # Errors
    /// A liveness failure (oracle `readiness`) naming the node that was not ready within its
    /// service's ready timeout.
    pub async fn start(&self) -> Result<(), Failure> {
        let names: Vec<String> =
            self.lock().instances.iter().filter(|(_, i)| i.phase == Phase::Down).map(|(n, _)| n.clone()).collect();
        let mut started = Vec::new();
        for name in names {
            let watch = self.launch(&name, None)?;
            started.push((name, watch));
        }
        for (name, watch) in started {
            self.wait_ready(&name, watch).await?;
        }
        Ok(())
    }

    /// The replicas of a service.
    pub fn replicas(&self, service: &str) -> Vec<String> {
        self.lock().instances.iter().filter(|(_, i)| i.service == service).map(|(n, _)| n.clone()).collect()
    }

    /// Every incarnation that ended, in order.
    pub fn exits(&self) -> Vec<ExitRecord> {
        self.lock().exits.clone()
    }

    /// The nodes running now.
    pub fn running(&self) -> Vec<String> {
        self.lock().instances.iter().filter(|(_, i)| i.phase != Phase::Down).map(|(n, _)| n.clone()).collect()
    }

    fn unknown_node(st: &State, name: &str) -> Failure {
        lifecycle_error(format!("no node {name:?} (nodes: {})", names(st.instances.keys())))
    }

    fn check_node(&self, name: &str) -> Result<(), Failure> {
        let st = self.lock();
        if st.instances.contains_key(name) { Ok(()) } else { Err(Self::unknown_node(&st, name)) }
    }

    /// Starts a node if it is down, as `version` (else the version it ran last); returns the
    /// incarnation running.
    fn launch(&self, name: &str, version: Option<&str>) -> Result<Watch, Failure> {
        let mut st = self.lock();
        let Some(instance) = st.instances.get(name) else { return Err(Self::unknown_node(&st, name)) };
        let service_name = instance.service.clone();
        let service = st.services.get(&service_name).cloned().expect("every instance's service was declared with it");
        let wanted = version.map_or_else(|| instance.version.clone(), str::to_string);
        let Some((version, entry)) = service.versions.iter().find(|(v, _)| *v == wanted).cloned() else {
            return Err(lifecycle_error(format!(
                "no version {wanted:?} of service {service_name:?} (versions: {})",
                names(service.versions.iter().map(|(v, _)| v))
            )));
        };
        if instance.phase != Phase::Down {
            return Ok(Watch { incarnation: instance.incarnation, status: instance.status.subscribe() });
        }
        let owner = self.ctx.tasks().new_owner();
        let host = self.ctx.net().start_incarnation(name);
        let incarnation = host.incarnation().unwrap_or(0);
        self.owners.lock().unwrap_or_else(|p| p.into_inner()).insert(owner, (name.to_string(), incarnation));
        let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
        let status = tokio::sync::watch::Sender::new(Status::default());
        let observed_sigterm = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks = TaskSet::default();
        let inflight = Arc::new(Mutex::new(InFlight::default()));
        let instance = st.instances.get_mut(name).expect("checked above");
        instance.inflight = Arc::clone(&inflight);
        instance.version = version.clone();
        instance.incarnation = incarnation;
        instance.owner = owner;
        instance.phase = Phase::Running;
        instance.shutdown = Some(shutdown_tx);
        instance.status = status.clone();
        instance.tasks = tasks.clone();
        instance.root = None;
        instance.sigterm_at = None;
        instance.observed_sigterm = Arc::clone(&observed_sigterm);
        let watch = Watch { incarnation, status: status.subscribe() };
        let node = NodeCtx {
            inner: Arc::new(NodeInner {
                ctx: self.ctx.clone(),
                name: name.to_string(),
                service: service_name,
                replica: instance.replica,
                incarnation,
                version: version.clone(),
                owner,
                host,
                env: service.env.clone(),
                shutdown: shutdown_rx,
                observed_sigterm,
                status,
                tasks,
                inflight,
            }),
        };
        drop(st);
        self.ctx.record("node.start", name, format!("incarnation {incarnation} {version}"));
        let system = self.clone();
        let node_name = name.to_string();
        let root = tokio::spawn(async move {
            let result = entry(node).await.map_err(|e| e.to_string());
            // The cause is recorded now, at the instant the entry point returned; the rest of the
            // end waits for the aborted tasks to be dropped, on a task of no node (this one ends).
            if let Some(ended) = system.returned(&node_name, incarnation, result) {
                drop(crate::runtime::spawn_detached(async move { system.settle(ended).await }));
            }
        });
        self.ctx.tasks().set_owner(root.id(), Some(owner));
        if let Some(i) = self.lock().instances.get_mut(name).filter(|i| i.incarnation == incarnation) {
            i.root = Some(root.abort_handle());
        }
        Ok(watch)
    }

    /// Waits until an incarnation is ready, or has ended (a lifecycle event, or an exit the
    /// exit-cause oracle judges), or its service's ready timeout has passed.
    async fn wait_ready(&self, name: &str, mut watch: Watch) -> Result<(), Failure> {
        let (timeout, finite) = {
            let st = self.lock();
            let service = st.instances.get(name).and_then(|i| st.services.get(&i.service));
            (service.map_or(Duration::from_secs(30), |s| s.ready_timeout), service.is_some_and(|s| s.finite))
        };
        if finite {
            return Ok(());
        }
        let incarnation = watch.incarnation;
        let waited = tokio::time::timeout(timeout, watch.status.wait_for(|s| s.ready || s.ended.is_some()))
            .await
            .map(|r| r.map(|status| status.clone()));
        match waited {
            Ok(Ok(status)) if status.ready => {
                self.ctx.record("node.ready", name, "");
                Ok(())
            }
            Ok(Ok(status)) => {
                let cause = status.ended.map_or_else(String::new, |c| format!("{c:?}"));
                self.ctx.record(
                    "node.unready",
                    name,
                    format!("incarnation {incarnation} ended before it was ready: {cause}"),
                );
                Ok(())
            }
            Ok(Err(_)) => {
                self.ctx.record("node.unready", name, format!("incarnation {incarnation} is gone"));
                Ok(())
            }
            Err(_) => Err(Failure::liveness(
                "readiness",
                format!("{name} (incarnation {incarnation}) was not ready within {timeout:?}"),
            )),
        }
    }

    /// The entry point of an incarnation returned: records why (and judges it) at this instant,
    /// and ends the incarnation.
    fn returned(&self, name: &str, incarnation: u64, result: Result<(), String>) -> Option<Ended> {
        let (sigterm_at, observed, finite, may_fail) = {
            let st = self.lock();
            let instance = st.instances.get(name)?;
            if instance.incarnation != incarnation || instance.phase == Phase::Down {
                return None;
            }
            let service = st.services.get(&instance.service);
            (
                instance.sigterm_at,
                instance.observed_sigterm.load(std::sync::atomic::Ordering::SeqCst),
                service.is_some_and(|s| s.finite),
                service.is_some_and(|s| s.may_fail),
            )
        };
        self.ctx.record("node.returned", name, format!("incarnation {incarnation} {result:?}"));
        // A SIGTERM the node never looked at did not make it return: it ended on its own.
        let cause = match (result, sigterm_at.is_some() && observed) {
            (result, true) => ExitCause::Signal(result),
            (Ok(()), false) => ExitCause::Returned,
            (Err(e), false) => ExitCause::Error(e),
        };
        let unprompted = match sigterm_at {
            Some(at) => format!("before acting on the SIGTERM sent at {at:?}"),
            None => "with no lifecycle event sent".to_string(),
        };
        match &cause {
            ExitCause::Returned if !finite => {
                fail_exit(&self.ctx, format!("{name} (incarnation {incarnation}) returned on its own {unprompted}"));
            }
            ExitCause::Error(e) if !may_fail => {
                fail_exit(
                    &self.ctx,
                    format!(
                        "{name} (incarnation {incarnation}) failed on its own {unprompted}: {e} (a service allowed to fail on its own is Service::may_fail)"
                    ),
                );
            }
            ExitCause::Signal(Err(e)) => {
                fail_exit(&self.ctx, format!("{name} (incarnation {incarnation}) answered SIGTERM with an error: {e}"));
            }
            _ => {}
        }
        self.end_now(name, incarnation, cause, Ending::Exit)
    }

    /// Ends an incarnation now: records the exit, checks the drain after a SIGTERM, aborts its
    /// tracked tasks, fences its sockets and marks its tasks' later polls as zombie polls. The
    /// rest ([`System::settle`]) must run on a task of no node.
    fn end_now(&self, name: &str, incarnation: u64, cause: ExitCause, ending: Ending) -> Option<Ended> {
        let (owner, tasks, root, inflight, status, version) = {
            let mut st = self.lock();
            let instance = st.instances.get_mut(name)?;
            if instance.incarnation != incarnation || instance.phase == Phase::Down {
                return None;
            }
            instance.phase = Phase::Down;
            instance.shutdown = None;
            (
                instance.owner,
                instance.tasks.clone(),
                instance.root.take(),
                Arc::clone(&instance.inflight),
                instance.status.clone(),
                instance.version.clone(),
            )
        };
        let tracked_drain_failed = matches!(cause, ExitCause::Signal(_))
            && {
                let dropped: Vec<String> =
                    inflight.lock().unwrap_or_else(|p| p.into_inner()).open.values().cloned().collect();
                if !dropped.is_empty() {
                    self.ctx.fail(Failure::correctness(
                    "drain",
                    format!(
                        "{name} (incarnation {incarnation}) stopped after SIGTERM with {} request(s) still in flight, which got no (complete) response: {}",
                        dropped.len(),
                        dropped.join(", ")
                    ),
                ));
                }
                !dropped.is_empty()
            };
        let mut aborted = tasks.abort_all();
        // The root is not aborted when it is the task ending the incarnation (it returned).
        let current = tokio::task::try_id();
        if let Some(root) = root.filter(|r| !r.is_finished() && Some(r.id()) != current) {
            root.abort();
            aborted.push(root.id());
        }
        self.ctx.tasks().mark_aborted(aborted.iter().copied());
        let (conns, listeners) = self.ctx.net().end_incarnation(name, incarnation, ending);
        // The same guarantee seen from the network, for a serve loop of the node's own (axum's
        // `with_graceful_shutdown`, tonic's, a hand-written one): its server connections that
        // closed after SIGTERM — or were just closed by the end — with a request read and not
        // answered, while the client was still there.
        let unanswered = self.ctx.net().take_unanswered(name, incarnation);
        if matches!(cause, ExitCause::Signal(_)) && !tracked_drain_failed && !unanswered.is_empty() {
            self.ctx.fail(
                Failure::correctness(
                    "drain",
                    format!(
                        "{name} (incarnation {incarnation}) stopped after SIGTERM with {} connection(s) closed on requests it had read and not answered: {}",
                        unanswered.len(),
                        unanswered.join("; ")
                    ),
                )
                .about(name),
            );
        }
        self.ctx.tasks().mark_dead(owner);
        let at = self.ctx.elapsed();
        self.lock().exits.push(ExitRecord {
            node: name.to_string(),
            incarnation,
            version,
            cause: cause.clone(),
            at,
            aborted_tasks: aborted.len(),
        });
        self.ctx.record(
            "node.exit",
            name,
            format!(
                "incarnation {incarnation} {cause:?}: aborted {} tasks, fenced {conns} connection ends and {listeners} listeners",
                aborted.len()
            ),
        );
        let crashed = matches!(cause, ExitCause::Crash(_) | ExitCause::Killed);
        status.send_modify(|s| s.ended = Some(cause));
        Some(Ended { name: name.to_string(), incarnation, owner, crashed, status })
    }

    /// The rest of an incarnation's end: lets its aborted tasks be dropped, then looks for tasks
    /// that escaped tracking (a leak if it stopped cleanly); then says it settled.
    async fn settle(&self, ended: Ended) {
        // tokio drops an aborted task on its next turn, and a dropped task may wake others that
        // end in turn (the drop cascade).
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        let left: Vec<String> = self
            .ctx
            .tasks()
            .owned(ended.owner)
            .into_iter()
            .map(|t| format!("task #{} spawned at {}", t.ordinal, t.spawned_at))
            .collect();
        if !left.is_empty() {
            self.ctx.record("node.leftover", &ended.name, left.join("; "));
            if !ended.crashed {
                self.ctx.fail(
                    Failure::new(
                        Class::Leak,
                        format!(
                            "{} (incarnation {}) stopped and left {} task(s) it did not spawn through its NodeCtx running: {} \
                             (spawn a node's tasks through its NodeCtx; a task of a shared model that serves every node: \
                             sim::spawn_detached)",
                            ended.name,
                            ended.incarnation,
                            left.len(),
                            left.join("; ")
                        ),
                    )
                    .oracle("leak"),
                );
            }
        }
        ended.status.send_modify(|s| s.settled = true);
    }

    /// Sends SIGTERM to a node; kills it if it still runs after its service's grace (a failure
    /// of the `exit-cause` oracle). Nothing if the node is down or already terminating.
    ///
    /// # Errors
    /// A failure of oracle `lifecycle` if there is no such node.
    pub fn sigterm(&self, name: &str) -> Result<(), Failure> {
        self.terminate(name, None).map(|_| ())
    }

    /// SIGTERM with the service's grace (outliving it is a failure), or with `kill_after` as the
    /// grace of this event (outliving it is the kill the event asked for). Returns the
    /// incarnation terminating, if the node was up.
    fn terminate(&self, name: &str, kill_after: Option<Duration>) -> Result<Option<Watch>, Failure> {
        let now = self.ctx.elapsed();
        let (watch, first, grace) = {
            let mut st = self.lock();
            let grace = st
                .instances
                .get(name)
                .and_then(|i| st.services.get(&i.service))
                .map_or(Duration::from_secs(30), |s| s.grace);
            let Some(instance) = st.instances.get_mut(name) else { return Err(Self::unknown_node(&st, name)) };
            if instance.phase == Phase::Down {
                return Ok(None);
            }
            let first = instance.phase == Phase::Running;
            if first {
                instance.phase = Phase::Terminating;
                instance.sigterm_at = Some(now);
                if let Some(tx) = &instance.shutdown {
                    let _ = tx.send(true);
                }
            }
            (Watch { incarnation: instance.incarnation, status: instance.status.subscribe() }, first, grace)
        };
        let incarnation = watch.incarnation;
        let (limit, expected) = kill_after.map_or((grace, false), |d| (d, true));
        if first {
            // What the network sees of the node's own serve loop from now on (crate::net's
            // exchange rules), for the drain oracle when the incarnation ends.
            self.ctx.net().watch_drain(name, incarnation);
            self.ctx.record("node.sigterm", name, format!("incarnation {incarnation}, grace {limit:?}"));
        }
        if first || expected {
            let system = self.clone();
            let node = name.to_string();
            let detail = if expected { format!("sigkill-after {limit:?}") } else { String::new() };
            self.ctx.driver().after(
                limit,
                Event::new("node.grace", name.to_string()).detail(detail).action(move || {
                    let still = system
                        .lock()
                        .instances
                        .get(&node)
                        .is_some_and(|i| i.incarnation == incarnation && i.phase != Phase::Down);
                    if !still {
                        return;
                    }
                    if !expected {
                        fail_exit(
                            &system.ctx,
                            format!("{node} (incarnation {incarnation}) did not stop within its grace of {limit:?} after SIGTERM"),
                        );
                    }
                    if let Some(ended) = system.end_now(&node, incarnation, ExitCause::Killed, Ending::Reset) {
                        drop(crate::runtime::spawn_detached(async move { system.settle(ended).await }));
                    }
                }),
            );
        }
        Ok(Some(watch))
    }

    /// Crashes a node (see [`CrashMode`]; `None`: the seed picks). Nothing if it is down.
    ///
    /// # Errors
    /// A failure of oracle `lifecycle` if there is no such node.
    pub async fn crash(&self, name: &str, mode: Option<CrashMode>) -> Result<(), Failure> {
        let incarnation = {
            let st = self.lock();
            match st.instances.get(name) {
                None => return Err(Self::unknown_node(&st, name)),
                Some(i) if i.phase != Phase::Down => i.incarnation,
                Some(_) => return Ok(()),
            }
        };
        let mode = mode.unwrap_or_else(|| {
            if self.ctx.source(&format!("node/crash/{name}/{incarnation}")).bool(0.5) {
                CrashMode::Vanish
            } else {
                CrashMode::Reset
            }
        });
        let ending = match mode {
            CrashMode::Reset => Ending::Reset,
            CrashMode::Vanish => Ending::Vanish,
        };
        self.ctx.record("node.crash", name, format!("incarnation {incarnation} {mode:?}"));
        if let Some(ended) = self.end_now(name, incarnation, ExitCause::Crash(mode), ending) {
            // Settled on a task of no node: the caller may be one of the crashed node's tasks.
            let system = self.clone();
            let _ = crate::runtime::spawn_detached(async move { system.settle(ended).await }).await;
        }
        Ok(())
    }

    /// Performs a lifecycle event now, and waits for it: a start or restart until the node is
    /// ready (or ended again), a SIGTERM-based stop until the node has ended.
    ///
    /// # Errors
    /// A failure of oracle `lifecycle` when the event names a node, service or version that does
    /// not exist; a liveness failure (oracle `readiness`) when a node started, restarted or
    /// rolled out is not ready in time.
    pub async fn apply(&self, event: Lifecycle) -> Result<(), Failure> {
        let label = format!("{event:?}");
        let result = match event {
            Lifecycle::Start(name) => match self.launch(&name, None) {
                Ok(watch) => self.wait_ready(&name, watch).await,
                Err(f) => Err(f),
            },
            Lifecycle::Sigterm(name) => self.sigterm(&name),
            Lifecycle::Crash(name, mode) => self.crash(&name, mode).await,
            Lifecycle::SigkillAfter(name, after) => match self.terminate(&name, Some(after)) {
                Ok(Some(watch)) => {
                    watch.settled().await;
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(f) => Err(f),
            },
            Lifecycle::Restart(name, graceful) => self.restart(&name, graceful).await,
            Lifecycle::Rollout(service, version) => self.rollout(&service, version.as_deref()).await,
            Lifecycle::Partition(name, duration) => self.check_node(&name).map(|()| {
                self.ctx.net().at(self.ctx.elapsed(), Partition::isolate(name)).lasting(duration);
            }),
        };
        result.map_err(|mut f| {
            if f.oracle.as_deref() == Some("lifecycle") {
                f.message = format!("{label}: {}", f.message);
            }
            f
        })
    }

    async fn restart(&self, name: &str, graceful: bool) -> Result<(), Failure> {
        if graceful {
            if let Some(watch) = self.terminate(name, None)? {
                watch.settled().await;
            }
        } else {
            self.crash(name, None).await?;
        }
        let watch = self.launch(name, None)?;
        self.wait_ready(name, watch).await
    }

    /// Rolls a service out replica by replica: out of routing, SIGTERM, wait until it ended
    /// (killed after its grace), start `version`, wait ready, back into routing.
    ///
    /// # Errors
    /// A failure of oracle `lifecycle` when there is no such service or version (nothing is
    /// rolled then); a liveness failure (oracle `readiness`) when a new replica is not ready in
    /// time.
    pub async fn rollout(&self, service: &str, version: Option<&str>) -> Result<(), Failure> {
        {
            let st = self.lock();
            let Some(declared) = st.services.get(service) else {
                return Err(lifecycle_error(format!(
                    "no service {service:?} (services: {})",
                    names(st.services.keys())
                )));
            };
            if let Some(version) = version
                && !declared.versions.iter().any(|(v, _)| v == version)
            {
                return Err(lifecycle_error(format!(
                    "no version {version:?} of service {service:?} (versions: {})",
                    names(declared.versions.iter().map(|(v, _)| v))
                )));
            }
        }
        let replicas = self.replicas(service);
        self.ctx.record("node.rollout", service, format!("to {}", version.unwrap_or("the same version")));
        for name in &replicas {
            let others: Vec<&str> = replicas.iter().filter(|r| *r != name).map(String::as_str).collect();
            self.ctx.net().set_endpoints(service, &others);
            if let Some(watch) = self.terminate(name, None)? {
                watch.settled().await;
            }
            let ready = match self.launch(name, version) {
                Ok(watch) => self.wait_ready(name, watch).await,
                Err(f) => Err(f),
            };
            let all: Vec<&str> = replicas.iter().map(String::as_str).collect();
            self.ctx.net().set_endpoints(service, &all);
            ready?;
        }
        Ok(())
    }

    /// Schedules a lifecycle event at fake time `at` — time since the run started, not since
    /// this call (a time already past means now; `ctx.elapsed() + d` for "in `d`"); a failure it
    /// runs into (an unknown node, a readiness timeout) fails the run.
    pub fn at(&self, at: Duration, event: Lifecycle) {
        let system = self.clone();
        let label = format!("{event:?}");
        let epoch = self.lock().epoch;
        let id = self.ctx.driver().at(
            at,
            Event::new("node.lifecycle", label).action(move || {
                if system.lock().epoch != epoch {
                    return;
                }
                let system2 = system.clone();
                system2.running_events.send_modify(|n| *n += 1);
                tokio::spawn(async move {
                    let result = system2.apply(event).await;
                    system2.running_events.send_modify(|n| *n -= 1);
                    if let Err(f) = result {
                        system2.ctx.fail(f);
                    }
                });
            }),
        );
        self.lock().scheduled.push(id);
    }

    /// Ends the fault schedule: cancels the lifecycle events scheduled with [`System::at`] (and
    /// [`System::schedule_lifecycle`]) that have not happened, and waits for those under way (a
    /// restart or a rollout in progress) to finish.
    async fn quiesce(&self, why: &str) {
        let pending = {
            let mut st = self.lock();
            st.epoch += 1;
            std::mem::take(&mut st.scheduled)
        };
        let cancelled = pending.into_iter().filter(|id| self.ctx.driver().cancel(*id)).count();
        let mut running = self.running_events.subscribe();
        let under_way = *running.borrow();
        self.ctx.record(
            "node.quiesce",
            "system",
            format!("{why}: {cancelled} scheduled lifecycle events cancelled, {under_way} under way"),
        );
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// Draws a lifecycle schedule from the swarm inside `window` of fake time (since the run
    /// started, as for [`System::at`]) and schedules it:
    /// crashes (`lifecycle.crashes`, 0–3) each followed by a restart after a seeded downtime,
    /// graceful restarts (`lifecycle.restarts`, 0–2), rollouts (`lifecycle.rollouts`, 0–2) of
    /// services with several versions or replicas, and partitions (`lifecycle.partitions`, 0–2).
    /// Returns the events scheduled.
    pub fn schedule_lifecycle(&self, window: std::ops::Range<Duration>) -> Vec<(Duration, Lifecycle)> {
        let swarm = self.ctx.swarm().clone();
        let nodes: Vec<String> = self.lock().instances.keys().cloned().collect();
        let services: Vec<String> = self.lock().services.keys().cloned().collect();
        if nodes.is_empty() {
            return Vec::new();
        }
        let mut draws = self.ctx.source("node/lifecycle");
        let mut plan = Vec::new();
        let span = window.start..=window.end.max(window.start);
        for _ in 0..swarm.int("lifecycle.crashes", 0..=3) {
            let node = draws.choose(&nodes).cloned().unwrap_or_default();
            let at = draws.duration(span.clone());
            let down = draws.duration(Duration::from_millis(100)..=Duration::from_secs(5));
            plan.push((at, Lifecycle::Crash(node.clone(), None)));
            plan.push((at + down, Lifecycle::Start(node)));
        }
        for _ in 0..swarm.int("lifecycle.restarts", 0..=2) {
            let node = draws.choose(&nodes).cloned().unwrap_or_default();
            plan.push((draws.duration(span.clone()), Lifecycle::Restart(node, true)));
        }
        for _ in 0..swarm.int("lifecycle.rollouts", 0..=2) {
            let service = draws.choose(&services).cloned().unwrap_or_default();
            let versions: Vec<String> = self
                .lock()
                .services
                .get(&service)
                .map(|s| s.versions.iter().map(|(v, _)| v.clone()).collect())
                .unwrap_or_default();
            let version = draws.choose(&versions).cloned();
            plan.push((draws.duration(span.clone()), Lifecycle::Rollout(service, version)));
        }
        for _ in 0..swarm.int("lifecycle.partitions", 0..=2) {
            let node = draws.choose(&nodes).cloned().unwrap_or_default();
            let last = draws.duration(Duration::from_millis(100)..=Duration::from_secs(5));
            plan.push((draws.duration(span.clone()), Lifecycle::Partition(node, last)));
        }
        for (at, event) in &plan {
            self.at(*at, event.clone());
        }
        plan
    }

    /// Heals: ends the fault schedule (the lifecycle events scheduled with [`System::at`] or
    /// [`System::schedule_lifecycle`] that have not happened are cancelled; those under way are
    /// awaited), then starts every node that is down and waits until all are ready.
    ///
    /// # Errors
    /// As [`System::start`].
    pub async fn heal(&self) -> Result<(), Failure> {
        self.quiesce("heal").await;
        self.ctx.record("node.heal", "system", "");
        self.start().await
    }

    /// Stops every node with SIGTERM and waits until each has ended (killed after its grace) —
    /// after ending the fault schedule as [`System::heal`] does, so that no scheduled restart
    /// starts a node again;
    /// then checks that no task of an ended incarnation kept running after it ended (also checked
    /// at the end of every run).
    ///
    /// # Errors
    /// A leak failure (oracle `zombie`) when a task of an ended incarnation kept running.
    pub async fn stop(&self) -> Result<(), Failure> {
        self.quiesce("stop").await;
        let mut stopping = Vec::new();
        for name in self.running() {
            if let Some(watch) = self.terminate(&name, None)? {
                stopping.push(watch);
            }
        }
        for watch in stopping {
            watch.settled().await;
        }
        self.check_zombies()
    }

    /// Polls of tasks of ended incarnations after they ended (the drop cascade of the end itself
    /// excepted; see [`crate::runtime`]), by node and incarnation.
    pub fn zombie_polls(&self) -> BTreeMap<(String, u64), u64> {
        zombies(&self.ctx, &self.owners)
    }

    /// Fails with a leak when a task of an ended incarnation kept running after the end. The same
    /// check runs by itself at the end of every run.
    ///
    /// # Errors
    /// The leak failure (oracle `zombie`).
    pub fn check_zombies(&self) -> Result<(), Failure> {
        let zombies = self.zombie_polls();
        self.ctx.record("node.zombies", "system", format!("{zombies:?}"));
        zombie_failure(&self.ctx, &self.owners).map_or(Ok(()), Err)
    }
}
