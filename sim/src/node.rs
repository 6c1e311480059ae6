//! Nodes: the user's services as named instances on the simulated network, and their lifecycle.
//!
//! A [`Service`] is an async entry point (`Fn(NodeCtx) -> Future<Output = Result<(), BoxError>>`)
//! with replicas, a termination grace and optional other versions. [`System::start`] starts each
//! replica as a *node* (`cart-0`, `cart-1`, …) on its own host, routes the service's name to its
//! replicas ClusterIP-style, and waits until each says it is ready.
//!
//! **Lifecycle events** ([`Lifecycle`]), usable at fake times ([`System::at`]) and drawn by the
//! swarm ([`System::schedule_lifecycle`]), follow Kubernetes:
//!
//! | event | what happens |
//! |---|---|
//! | start | a new *incarnation* of the node: a fresh [`NodeCtx`] and host handle |
//! | sigterm | the shutdown signal fires; the node must end within its grace, else it is killed |
//! | crash | the incarnation's tasks are dropped and its sockets fenced: seeded between *reset* (every connection reset: a killed process) and *vanish* (silence: a dead machine) |
//! | sigkill-after(d) | SIGTERM, then crash at +d if still running (`terminationGracePeriodSeconds`) |
//! | restart | crash or SIGTERM (seeded), then start on the same host |
//! | rollout | per replica: out of routing, SIGTERM, start (maybe another version), wait ready, back in |
//! | partition(d) | the node's host is cut off for d |
//!
//! **Dropping a node's tasks.** tokio cannot abort a task by id, so a node's tasks are reached two
//! ways: every task spawned through the node — [`NodeCtx::spawn`], its hyper [`NodeCtx::executor`],
//! [`serve`], [`NodeCtx::http_client`] — is tracked and aborted when the incarnation ends; and
//! every task is given, at spawn, the node of the task that spawned it (lineage through tokio's
//! spawn hook), so a task spawned by a library with a plain `tokio::spawn` is still known to be
//! the node's. When an incarnation ends, its host handle refuses every operation (`ENETDOWN`) and
//! its sockets are fenced, and any of its tasks still alive that is polled afterwards is counted:
//! a crashed node's task that runs after the crash is a *leak* failure naming where it was
//! spawned, and so is a task left behind by a node that stopped cleanly.
//!
//! **Exit causes** are recorded ([`ExitCause`]) and checked: a node that ends with no lifecycle
//! event sent (unless its service is [`Service::finite`]), that answers SIGTERM with an error, or
//! that outlives its grace, is a correctness failure of the `exit-cause` oracle. A node served with
//! [`serve`] that stops after SIGTERM while requests are still in flight (it did not drain) is a
//! correctness failure of the `drain` oracle.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::RangeInclusive;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

    /// How long a node may take to stop after SIGTERM before it is killed.
    pub fn grace(mut self, grace: Duration) -> Service {
        self.grace = grace;
        self
    }

    /// How long a node may take to say it is ready.
    pub fn ready_timeout(mut self, timeout: Duration) -> Service {
        self.ready_timeout = timeout;
        self
    }

    /// An environment variable every node of the service sees ([`NodeCtx::env`]).
    pub fn env(mut self, key: &str, value: &str) -> Service {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    /// The service may end on its own (a job, not a server).
    pub fn finite(mut self) -> Service {
        self.finite = true;
        self
    }
}

/// Why a node's incarnation ended.
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
    /// It was still running when its grace after SIGTERM ran out, and was killed.
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

/// A lifecycle event for a node (or, for a rollout, a service).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Starts the node if it is down.
    Start(String),
    /// Sends SIGTERM.
    Sigterm(String),
    /// Crashes the node (`None`: the seed picks the mode).
    Crash(String, Option<CrashMode>),
    /// SIGTERM, then a crash after the given time if the node still runs.
    SigkillAfter(String, Duration),
    /// Restarts the node: gracefully (SIGTERM, wait) or by a crash, then starts it.
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
    ready: tokio::sync::watch::Sender<bool>,
    tasks: TaskSet,
    /// Requests [`serve`] is handling: (sequence, `METHOD path`).
    inflight: Arc<Mutex<InFlight>>,
}

#[derive(Default)]
struct InFlight {
    next: u64,
    open: BTreeMap<u64, String>,
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
        *self.inner.shutdown.borrow()
    }

    /// Resolves when SIGTERM arrives (at once if it already did). `Send + 'static`, for
    /// `with_graceful_shutdown`-style APIs.
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.inner.shutdown.clone();
        async move {
            let _ = rx.wait_for(|term| *term).await;
        }
    }

    /// Says the node is ready to serve (its readiness probe passes).
    pub fn set_ready(&self) {
        let _ = self.inner.ready.send(true);
    }

    /// Spawns a task that belongs to the node: aborted when the incarnation ends.
    pub fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = tokio::spawn(future);
        self.inner.ctx.tasks().set_owner(handle.id(), self.inner.owner);
        self.inner.tasks.track(handle.abort_handle());
        handle
    }

    /// A hyper executor spawning onto the node ([`NodeCtx::spawn`]): give it to hyper and
    /// hyper-util builders so their connection tasks die with the node.
    pub fn executor(&self) -> NodeExecutor {
        NodeExecutor { node: self.clone() }
    }

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

/// A hyper executor whose tasks belong to a node (see [`NodeCtx::executor`]).
#[derive(Clone, Debug)]
pub struct NodeExecutor {
    node: NodeCtx,
}

impl<F> hyper::rt::Executor<F> for NodeExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        drop(self.node.spawn(future));
    }
}

/// Serves a tower service (an axum `Router`, a tonic router) over HTTP/1.1 and HTTP/2 on a node:
/// accepts on `listener`, serves each connection on the node's executor with tokio's timers,
/// and on SIGTERM stops accepting and drains: it returns once every open connection has finished
/// its in-flight requests (hyper's graceful shutdown; bounded only by the node's grace).
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

/// Keeps a node's in-flight requests, for the drain oracle.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    inflight: Arc<Mutex<InFlight>>,
}

impl<S, B> tower_service::Service<http::Request<hyper::body::Incoming>> for Tracked<S>
where
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

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
        // Removed when the handler finishes, or when hyper drops it (its client went away).
        let done = Done { inflight: Arc::clone(&self.inflight), seq };
        Box::pin(async move {
            let response = future.await;
            drop(done);
            response
        })
    }
}

/// Takes a request out of the in-flight set when dropped.
struct Done {
    inflight: Arc<Mutex<InFlight>>,
    seq: u64,
}

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
    ready: Option<tokio::sync::watch::Receiver<bool>>,
    tasks: TaskSet,
    root: Option<tokio::task::AbortHandle>,
    sigterm_sent: bool,
    crashed: bool,
    inflight: Arc<Mutex<InFlight>>,
}

struct State {
    services: BTreeMap<String, Service>,
    instances: BTreeMap<String, Instance>,
    exits: Vec<ExitRecord>,
    owners: BTreeMap<Owner, (String, u64)>,
    next_owner: Owner,
}

/// The run's nodes: services, their instances, their lifecycle, and what ended them. Cheap to
/// clone.
#[derive(Clone)]
pub struct System {
    ctx: Ctx,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("System").finish_non_exhaustive()
    }
}

fn fail_exit(ctx: &Ctx, message: String) {
    ctx.fail(Failure::correctness("exit-cause", message));
}

impl System {
    /// The nodes of the run of `ctx`.
    pub fn new(ctx: &Ctx) -> System {
        System {
            ctx: ctx.clone(),
            state: Arc::new(Mutex::new(State {
                services: BTreeMap::new(),
                instances: BTreeMap::new(),
                exits: Vec::new(),
                owners: BTreeMap::new(),
                next_owner: 0,
            })),
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
                    ready: None,
                    tasks: TaskSet::default(),
                    root: None,
                    sigterm_sent: false,
                    crashed: false,
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

    /// Starts every node that is down and waits until all are ready.
    ///
    /// # Errors
    /// A liveness failure naming the node that was not ready within its service's ready timeout.
    pub async fn start(&self) -> Result<(), Failure> {
        let names: Vec<String> =
            self.lock().instances.iter().filter(|(_, i)| i.phase == Phase::Down).map(|(n, _)| n.clone()).collect();
        for name in &names {
            self.start_node(name, None);
        }
        for name in &names {
            self.wait_ready(name).await?;
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

    fn start_node(&self, name: &str, version: Option<&str>) {
        let mut st = self.lock();
        let Some(instance) = st.instances.get(name) else { return };
        if instance.phase != Phase::Down {
            return;
        }
        let service_name = instance.service.clone();
        let Some(service) = st.services.get(&service_name).cloned() else { return };
        let wanted = version.map(str::to_string).unwrap_or_else(|| instance.version.clone());
        let (version, entry) =
            service.versions.iter().find(|(v, _)| *v == wanted).cloned().unwrap_or_else(|| service.versions[0].clone());
        let owner = st.next_owner;
        st.next_owner += 1;
        let host = self.ctx.net().start_incarnation(name);
        let incarnation = host.incarnation().unwrap_or(0);
        st.owners.insert(owner, (name.to_string(), incarnation));
        let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
        let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
        let tasks = TaskSet::default();
        let inflight = Arc::new(Mutex::new(InFlight::default()));
        let instance = st.instances.get_mut(name).expect("checked above");
        instance.inflight = Arc::clone(&inflight);
        instance.version = version.clone();
        instance.incarnation = incarnation;
        instance.owner = owner;
        instance.phase = Phase::Running;
        instance.shutdown = Some(shutdown_tx);
        instance.ready = Some(ready_rx);
        instance.tasks = tasks.clone();
        instance.sigterm_sent = false;
        instance.crashed = false;
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
                ready: ready_tx,
                tasks,
                inflight: Arc::clone(&inflight),
            }),
        };
        drop(st);
        self.ctx.record("node.start", name, format!("incarnation {incarnation} {version}"));
        let system = self.clone();
        let node_name = name.to_string();
        let root = tokio::spawn(async move {
            let result = entry(node).await.map_err(|e| e.to_string());
            // Ending the incarnation aborts the node's tasks, this one included: do it from a
            // harness task (spawned by the driver, so it belongs to no node).
            let driver = system.ctx.driver().clone();
            driver.after(
                Duration::ZERO,
                Event::new("node.returned", node_name.clone()).detail(format!("{result:?}")).action(move || {
                    tokio::spawn(async move { system.exited(&node_name, incarnation, result).await });
                }),
            );
        });
        self.ctx.tasks().set_owner(root.id(), owner);
        if let Some(i) = self.lock().instances.get_mut(name) {
            i.root = Some(root.abort_handle());
        }
    }

    async fn wait_ready(&self, name: &str) -> Result<(), Failure> {
        let (rx, timeout) = {
            let st = self.lock();
            let Some(instance) = st.instances.get(name) else { return Ok(()) };
            let timeout = st.services.get(&instance.service).map_or(Duration::from_secs(30), |s| s.ready_timeout);
            (instance.ready.clone(), timeout)
        };
        let Some(mut rx) = rx else { return Ok(()) };
        match tokio::time::timeout(timeout, rx.wait_for(|ready| *ready)).await {
            Ok(Ok(_)) => {
                self.ctx.record("node.ready", name, "");
                Ok(())
            }
            _ => Err(Failure::liveness("readiness", format!("{name} was not ready within {timeout:?}"))),
        }
    }

    /// The root of an incarnation returned: record why, then end the process.
    async fn exited(&self, name: &str, incarnation: u64, result: Result<(), String>) {
        let (cause, finite) = {
            let st = self.lock();
            let Some(instance) = st.instances.get(name) else { return };
            if instance.incarnation != incarnation || instance.crashed {
                return;
            }
            let finite = st.services.get(&instance.service).is_some_and(|s| s.finite);
            let cause = if instance.sigterm_sent {
                ExitCause::Signal(result.clone())
            } else {
                match &result {
                    Ok(()) => ExitCause::Returned,
                    Err(e) => ExitCause::Error(e.clone()),
                }
            };
            (cause, finite)
        };
        match &cause {
            ExitCause::Returned if !finite => {
                fail_exit(
                    &self.ctx,
                    format!("{name} (incarnation {incarnation}) returned on its own with no lifecycle event sent"),
                );
            }
            ExitCause::Error(e) if !finite => {
                fail_exit(
                    &self.ctx,
                    format!("{name} (incarnation {incarnation}) failed on its own with no lifecycle event sent: {e}"),
                );
            }
            ExitCause::Signal(Err(e)) => {
                fail_exit(&self.ctx, format!("{name} (incarnation {incarnation}) answered SIGTERM with an error: {e}"));
            }
            _ => {}
        }
        self.end(name, incarnation, cause, Ending::Exit).await;
    }

    /// Ends an incarnation: records the exit, aborts its tracked tasks, fences its sockets, and
    /// checks for tasks it left behind.
    async fn end(&self, name: &str, incarnation: u64, cause: ExitCause, ending: Ending) {
        let (owner, tasks, root, inflight) = {
            let mut st = self.lock();
            let Some(instance) = st.instances.get_mut(name) else { return };
            if instance.incarnation != incarnation || instance.phase == Phase::Down {
                return;
            }
            instance.phase = Phase::Down;
            instance.crashed = matches!(cause, ExitCause::Crash(_) | ExitCause::Killed);
            instance.shutdown = None;
            instance.ready = None;
            let out = (instance.owner, instance.tasks.clone(), instance.root.take(), Arc::clone(&instance.inflight));
            let at = self.ctx.elapsed();
            let version = instance.version.clone();
            st.exits.push(ExitRecord {
                node: name.to_string(),
                incarnation,
                version,
                cause: cause.clone(),
                at,
                aborted_tasks: 0,
            });
            out
        };
        if matches!(cause, ExitCause::Signal(_)) {
            let dropped: Vec<String> =
                inflight.lock().unwrap_or_else(|p| p.into_inner()).open.values().cloned().collect();
            if !dropped.is_empty() {
                self.ctx.fail(Failure::correctness(
                    "drain",
                    format!(
                        "{name} (incarnation {incarnation}) stopped after SIGTERM with {} request(s) still in flight, which got no response: {}",
                        dropped.len(),
                        dropped.join(", ")
                    ),
                ));
            }
        }
        let mut aborted = tasks.abort_all();
        if let Some(root) = root.filter(|r| !r.is_finished()) {
            root.abort();
            aborted.push(root.id());
        }
        self.ctx.tasks().mark_aborted(aborted.iter().copied());
        let aborted = aborted.len();
        if let Some(exit) = self.lock().exits.iter_mut().rev().find(|e| e.node == name && e.incarnation == incarnation)
        {
            exit.aborted_tasks = aborted;
        }
        let (conns, listeners) = self.ctx.net().end_incarnation(name, incarnation, ending);
        self.ctx.tasks().mark_dead(owner);
        self.ctx.record(
            "node.exit",
            name,
            format!("incarnation {incarnation} {cause:?}: aborted {aborted} tasks, fenced {conns} connection ends and {listeners} listeners"),
        );
        // Let the aborted tasks be dropped, then look for any that escaped tracking.
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        let left: Vec<String> = self
            .ctx
            .tasks()
            .owned(owner)
            .into_iter()
            .map(|t| format!("task #{} spawned at {}", t.ordinal, t.spawned_at))
            .collect();
        if !left.is_empty() {
            let kind = if matches!(cause, ExitCause::Crash(_) | ExitCause::Killed) { "crashed" } else { "stopped" };
            self.ctx.record("node.leftover", name, left.join("; "));
            if kind == "stopped" {
                self.ctx.fail(
                    Failure::new(
                        Class::Leak,
                        format!(
                            "{name} (incarnation {incarnation}) stopped and left {} task(s) it did not spawn through its NodeCtx running: {}",
                            left.len(),
                            left.join("; ")
                        ),
                    )
                    .oracle("leak"),
                );
            }
        }
    }

    /// Sends SIGTERM to a node; kills it if it still runs after its service's grace.
    pub fn sigterm(&self, name: &str) {
        let (incarnation, grace) = {
            let mut st = self.lock();
            let Some(instance) = st.instances.get_mut(name) else { return };
            if instance.phase != Phase::Running {
                return;
            }
            instance.phase = Phase::Terminating;
            instance.sigterm_sent = true;
            if let Some(tx) = &instance.shutdown {
                let _ = tx.send(true);
            }
            let service = instance.service.clone();
            let incarnation = instance.incarnation;
            (incarnation, st.services.get(&service).map_or(Duration::from_secs(30), |s| s.grace))
        };
        self.ctx.record("node.sigterm", name, format!("incarnation {incarnation}, grace {grace:?}"));
        let system = self.clone();
        let node = name.to_string();
        self.ctx.driver().after(
            grace,
            Event::new("node.grace", name.to_string()).action(move || {
                let still = system.lock().instances.get(&node).is_some_and(|i| i.incarnation == incarnation && i.phase != Phase::Down);
                if still {
                    fail_exit(&system.ctx, format!("{node} (incarnation {incarnation}) did not stop within its grace of {grace:?} after SIGTERM"));
                    let system = system.clone();
                    tokio::spawn(async move { system.end(&node, incarnation, ExitCause::Killed, Ending::Reset).await });
                }
            }),
        );
    }

    /// Crashes a node (see [`CrashMode`]; `None`: the seed picks).
    pub async fn crash(&self, name: &str, mode: Option<CrashMode>) {
        let incarnation = match self.lock().instances.get(name) {
            Some(i) if i.phase != Phase::Down => i.incarnation,
            _ => return,
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
        self.end(name, incarnation, ExitCause::Crash(mode), ending).await;
    }

    /// Waits until a node is down, or `limit` passes.
    async fn wait_down(&self, name: &str, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if self.lock().instances.get(name).is_none_or(|i| i.phase == Phase::Down) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// Performs a lifecycle event now.
    ///
    /// # Errors
    /// A liveness failure when a node restarted or rolled out is not ready in time.
    pub async fn apply(&self, event: Lifecycle) -> Result<(), Failure> {
        match event {
            Lifecycle::Start(name) => {
                self.start_node(&name, None);
                self.wait_ready(&name).await
            }
            Lifecycle::Sigterm(name) => {
                self.sigterm(&name);
                Ok(())
            }
            Lifecycle::Crash(name, mode) => {
                self.crash(&name, mode).await;
                Ok(())
            }
            Lifecycle::SigkillAfter(name, after) => {
                self.sigterm(&name);
                if !self.wait_down(&name, after).await {
                    self.crash(&name, Some(CrashMode::Reset)).await;
                }
                Ok(())
            }
            Lifecycle::Restart(name, graceful) => {
                let grace = self.grace_of(&name);
                if graceful {
                    self.sigterm(&name);
                    if !self.wait_down(&name, grace + Duration::from_millis(20)).await {
                        return Ok(()); // killed at the end of its grace; the failure is recorded
                    }
                } else {
                    self.crash(&name, None).await;
                }
                self.start_node(&name, None);
                self.wait_ready(&name).await
            }
            Lifecycle::Rollout(service, version) => self.rollout(&service, version.as_deref()).await,
            Lifecycle::Partition(name, duration) => {
                self.ctx.net().at(self.ctx.elapsed(), Partition::isolate(name)).lasting(duration);
                Ok(())
            }
        }
    }

    fn grace_of(&self, name: &str) -> Duration {
        let st = self.lock();
        st.instances.get(name).and_then(|i| st.services.get(&i.service)).map_or(Duration::from_secs(30), |s| s.grace)
    }

    /// Rolls a service out replica by replica: out of routing, SIGTERM, wait (killed after its
    /// grace), start `version`, wait ready, back into routing.
    ///
    /// # Errors
    /// A liveness failure when a new replica is not ready in time.
    pub async fn rollout(&self, service: &str, version: Option<&str>) -> Result<(), Failure> {
        let replicas = self.replicas(service);
        self.ctx.record("node.rollout", service, format!("to {}", version.unwrap_or("the same version")));
        for name in &replicas {
            let others: Vec<String> = replicas.iter().filter(|r| *r != name).cloned().collect();
            let refs: Vec<&str> = others.iter().map(String::as_str).collect();
            self.ctx.net().set_endpoints(service, &refs);
            let grace = self.grace_of(name);
            self.sigterm(name);
            self.wait_down(name, grace + Duration::from_millis(20)).await;
            self.start_node(name, version);
            let ready = self.wait_ready(name).await;
            let all: Vec<&str> = replicas.iter().map(String::as_str).collect();
            self.ctx.net().set_endpoints(service, &all);
            ready?;
        }
        Ok(())
    }

    /// Schedules a lifecycle event at fake time `at`; a failure it runs into is reported.
    pub fn at(&self, at: Duration, event: Lifecycle) {
        let system = self.clone();
        let label = format!("{event:?}");
        self.ctx.driver().at(
            at,
            Event::new("node.lifecycle", label).action(move || {
                let system2 = system.clone();
                tokio::spawn(async move {
                    if let Err(f) = system2.apply(event).await {
                        system2.ctx.fail(f);
                    }
                });
            }),
        );
    }

    /// Draws a lifecycle schedule from the swarm inside `window` of fake time and schedules it:
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

    /// Heals: starts every node that is down and waits until all are ready.
    ///
    /// # Errors
    /// As [`System::start`].
    pub async fn heal(&self) -> Result<(), Failure> {
        self.ctx.record("node.heal", "system", "");
        self.start().await
    }

    /// Stops every node with SIGTERM and waits for each (killed after its grace); then checks
    /// that no task of an ended incarnation ran after it ended.
    ///
    /// # Errors
    /// A leak failure when a task of an ended incarnation was polled after its end.
    pub async fn stop(&self) -> Result<(), Failure> {
        let running = self.running();
        for name in &running {
            self.sigterm(name);
        }
        for name in &running {
            let grace = self.grace_of(name);
            self.wait_down(name, grace + Duration::from_millis(50)).await;
        }
        self.check_zombies()
    }

    /// Tasks of ended incarnations polled after the end, by node and incarnation.
    pub fn zombie_polls(&self) -> BTreeMap<(String, u64), u64> {
        let polls = self.ctx.tasks().zombie_polls();
        let st = self.lock();
        polls.into_iter().filter_map(|(owner, n)| st.owners.get(&owner).map(|k| (k.clone(), n))).collect()
    }

    /// Fails with a leak when a task of an ended incarnation ran after the end.
    ///
    /// # Errors
    /// The leak failure.
    pub fn check_zombies(&self) -> Result<(), Failure> {
        let zombies = self.zombie_polls();
        self.ctx.record("node.zombies", "system", format!("{zombies:?}"));
        match zombies.iter().next() {
            None => Ok(()),
            Some(((node, incarnation), polls)) => Err(Failure::new(
                Class::Leak,
                format!("tasks of {node} (incarnation {incarnation}) were polled {polls} time(s) after it ended: spawn them through its NodeCtx"),
            )
            .oracle("zombie")),
        }
    }
}
