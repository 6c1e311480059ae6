//! The server's state: the store behind a mutex, faults, watchers, the write path that records
//! into the run's history, and the introspection accessors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use sim::fault::{Phase, Target, Undo};

use crate::fault::{Fault, FaultAction, RequestInfo, Restart};
use crate::introspect::{LeaseChange, ObjectRef, Watcher, Write};
use crate::resource::ResourceType;
use crate::store::{Store, StoreConfig, WriteCtx};

/// The default host name of the API server on the simulated network.
pub const DEFAULT_HOST: &str = "kube-apiserver";
/// The default port (the real server's secure port; plain HTTP here).
pub const DEFAULT_PORT: u16 = 6443;

/// How to build an [`ApiServer`].
#[derive(Clone, Debug)]
pub struct ApiServerBuilder {
    host: String,
    port: u16,
    config: StoreConfig,
    bookmark_interval: Duration,
}

impl ApiServerBuilder {
    /// The host name it listens on in a simulation (default `kube-apiserver`).
    pub fn host(mut self, host: &str) -> Self {
        self.host = host.to_string();
        self
    }

    /// The port (default 6443).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The storage configuration (compaction window).
    pub fn store(mut self, config: StoreConfig) -> Self {
        self.config = config;
        self
    }

    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK when the store moved
    /// (default 60 s, as the real server's watch cache, which also sends one 2 s before the
    /// watch's timeout; fake time in a simulation).
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_interval = every;
        self
    }

    /// The server (not serving yet).
    pub fn build(self) -> ApiServer {
        let (changed, _) = tokio::sync::watch::channel(0u64);
        let (restarts, _) = tokio::sync::watch::channel(0u64);
        ApiServer {
            inner: Arc::new(Inner {
                host: self.host,
                port: self.port,
                bookmark_interval: self.bookmark_interval,
                store: Mutex::new(Store::new(self.config)),
                changed,
                restarts,
                faults: Mutex::new(Vec::new()),
                next_fault: AtomicU64::new(1),
                watchers: Mutex::new(Vec::new()),
                next_watcher: AtomicU64::new(1),
                ctx: Mutex::new(None),
                rng: Mutex::new(sim::seed::Source::from_seed(sim::seed::Seed(0x6b75_6265_7369_6d00))),
                recorded: AtomicU64::new(0),
                started: std::time::Instant::now(),
                down: Mutex::new(None),
            }),
        }
    }
}

/// A fake Kubernetes API server (a cheap handle: clones share the server).
#[derive(Clone)]
pub struct ApiServer {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiServer({}:{})", self.inner.host, self.inner.port)
    }
}

pub(crate) struct Inner {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) bookmark_interval: Duration,
    store: Mutex<Store>,
    /// The current revision, sent after every commit (watches wait on it).
    pub(crate) changed: tokio::sync::watch::Sender<u64>,
    /// Bumped by each restart: every connection ends.
    pub(crate) restarts: tokio::sync::watch::Sender<u64>,
    faults: Mutex<Vec<(u64, Fault)>>,
    next_fault: AtomicU64,
    watchers: Mutex<Vec<Watcher>>,
    next_watcher: AtomicU64,
    ctx: Mutex<Option<sim::Ctx>>,
    rng: Mutex<sim::seed::Source>,
    /// How many of the store's writes are in the history already.
    recorded: AtomicU64,
    started: std::time::Instant,
    /// Until when (fake time since the run started) a restart keeps it down.
    pub(crate) down: Mutex<Option<Duration>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Default for ApiServer {
    fn default() -> Self {
        ApiServer::new()
    }
}

impl ApiServer {
    /// A server with the defaults: host `kube-apiserver`, port 6443, 1000 events / 5 min of
    /// watch history per type.
    pub fn new() -> ApiServer {
        ApiServer::builder().build()
    }

    /// A builder.
    pub fn builder() -> ApiServerBuilder {
        ApiServerBuilder {
            host: DEFAULT_HOST.to_string(),
            port: DEFAULT_PORT,
            config: StoreConfig::default(),
            bookmark_interval: Duration::from_secs(60),
        }
    }

    /// The host name it serves on in a simulation.
    pub fn host(&self) -> &str {
        &self.inner.host
    }

    /// The URL clients in a simulation use: `http://<host>:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}:{}", self.inner.host, self.inner.port)
    }

    pub(crate) fn ctx(&self) -> Option<sim::Ctx> {
        lock(&self.inner.ctx).clone()
    }

    pub(crate) fn set_ctx(&self, ctx: &sim::Ctx) {
        *lock(&self.inner.ctx) = Some(ctx.clone());
        *lock(&self.inner.rng) = ctx.source(&format!("kubesim/{}", self.inner.host));
    }

    /// Appends to the run's history (nothing on loopback).
    pub(crate) fn record(&self, kind: &str, identity: &str, detail: impl AsRef<str>) {
        if let Some(ctx) = self.ctx() {
            ctx.record(kind, identity, detail);
        }
    }

    /// Time since the run (or the loopback server) started.
    pub(crate) fn elapsed(&self) -> Duration {
        match self.ctx() {
            Some(ctx) => ctx.elapsed(),
            None => self.inner.started.elapsed(),
        }
    }

    /// Runs `f` on the store with a write context for `actor` / `field_manager`, then records
    /// the writes it committed and wakes the watches.
    pub(crate) fn write<R>(
        &self,
        actor: &str,
        field_manager: Option<&str>,
        dry_run: bool,
        f: impl FnOnce(&mut Store, &mut WriteCtx<'_>) -> R,
    ) -> R {
        let at = self.elapsed();
        let mut rng_slot = lock(&self.inner.rng);
        let mut rng = || rng_slot.u64();
        let mut store = lock(&self.inner.store);
        let mut w = WriteCtx { now: SystemTime::now(), at, actor, field_manager, dry_run, rng: &mut rng };
        let out = f(&mut store, &mut w);
        store.compact(at);
        let rv = store.rv();
        let done = self.inner.recorded.load(Ordering::Relaxed) as usize;
        let new: Vec<Write> = store.writes()[done..].to_vec();
        self.inner.recorded.store(store.writes().len() as u64, Ordering::Relaxed);
        drop(store);
        drop(rng_slot);
        for write in &new {
            self.record(
                "kube.write",
                &write.object.to_string(),
                format!("{} rv={} by {}", write.verb.name(), write.rv, write.actor),
            );
        }
        if !new.is_empty() {
            self.inner.changed.send_replace(rv);
        }
        out
    }

    /// Runs `f` on the store (reads).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        f(&lock(&self.inner.store))
    }

    /// The current resourceVersion (the global revision).
    pub fn rv(&self) -> u64 {
        self.read(Store::rv)
    }

    /// Every committed write, in order.
    pub fn writes(&self) -> Vec<Write> {
        self.read(|s| s.writes().to_vec())
    }

    /// The writes of one object, in order.
    pub fn timeline(&self, obj: &ObjectRef) -> Vec<Write> {
        self.read(|s| s.timeline(obj))
    }

    /// The changes of the Lease `ns/name` (`coordination.k8s.io/v1`), in order.
    pub fn lease_timeline(&self, ns: &str, name: &str) -> Vec<LeaseChange> {
        self.read(|s| s.lease_timeline(ns, name))
    }

    /// The watches open now.
    pub fn watchers(&self) -> Vec<Watcher> {
        lock(&self.inner.watchers).clone()
    }

    fn find_type(&self, resource: &str) -> Option<ResourceType> {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        self.read(|s| {
            let groups = s.registry().groups();
            let g = groups.into_iter().find(|g| g.name == group)?;
            let version = g.preferred_version().to_string();
            s.registry().find(group, &version, plural).cloned()
        })
    }

    /// The object `resource` (`secrets`, `databases.example.com`) `ns/name` as stored, at its
    /// group's preferred version; `None` when absent or the resource is not served.
    pub fn get_json(&self, resource: &str, ns: Option<&str>, name: &str) -> Option<Value> {
        let ty = self.find_type(resource)?;
        self.read(|s| s.get(&ty, ns, name).ok())
    }

    /// Every object of `resource` in `ns` (all namespaces for `None`), in key order.
    pub fn list_json(&self, resource: &str, ns: Option<&str>) -> Vec<Value> {
        let Some(ty) = self.find_type(resource) else { return Vec::new() };
        self.read(|s| s.list(&ty, ns, &Default::default()).map(|l| l.items).unwrap_or_default())
    }

    /// Applies a fault now until the guard is dropped (same as `sim::fault::install`).
    pub fn install(&self, fault: Fault) -> sim::fault::FaultGuard {
        sim::fault::install(self, fault)
    }

    pub(crate) fn add_fault(&self, fault: Fault) -> u64 {
        let id = self.inner.next_fault.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner.faults).push((id, fault));
        // Watches look at the faults again.
        self.inner.changed.send_modify(|_| {});
        id
    }

    pub(crate) fn remove_fault(&self, id: u64) {
        lock(&self.inner.faults).retain(|(i, _)| *i != id);
        self.inner.changed.send_modify(|_| {});
    }

    /// The first fault selecting `req` whose action `pick` accepts.
    pub(crate) fn fault_for<T>(
        &self,
        req: &RequestInfo,
        pick: impl Fn(&FaultAction) -> Option<T>,
    ) -> Option<(String, T)> {
        let faults = lock(&self.inner.faults);
        faults.iter().filter(|(_, f)| f.selects(req)).find_map(|(_, f)| pick(&f.action).map(|t| (f.to_string(), t)))
    }

    pub(crate) fn fault_hit(&self, label: &str, req: &RequestInfo) {
        let target = match (&req.namespace, &req.name) {
            (Some(ns), Some(n)) => format!("{} {}/{ns}/{n}", req.verb.name(), req.plural),
            (None, Some(n)) => format!("{} {}/{n}", req.verb.name(), req.plural),
            (Some(ns), None) => format!("{} {} in {ns}", req.verb.name(), req.plural),
            (None, None) => format!("{} {}", req.verb.name(), req.plural),
        };
        self.record("kube.fault", label, format!("hit {target} by {}", req.user_agent));
    }

    pub(crate) fn open_watcher(&self, mut w: Watcher) -> u64 {
        let id = self.inner.next_watcher.fetch_add(1, Ordering::Relaxed);
        w.id = id;
        lock(&self.inner.watchers).push(w);
        id
    }

    pub(crate) fn watcher_sent(&self, id: u64, rv: u64) {
        if let Some(w) = lock(&self.inner.watchers).iter_mut().find(|w| w.id == id) {
            w.sent_rv = rv;
        }
    }

    pub(crate) fn close_watcher(&self, id: u64) {
        lock(&self.inner.watchers).retain(|w| w.id != id);
    }

    /// Compacts the history below `revision`, as etcd's `Compact(revision)` (which
    /// kube-apiserver runs every `--etcd-compaction-interval`) does: afterwards a watch from a
    /// resourceVersion below `revision - 1`, and a list continued from a page served before it,
    /// answer 410 Gone. Watches already open keep streaming. A `revision` above the current
    /// resourceVersion compacts everything.
    pub fn compact(&self, revision: u64) {
        let revision = revision.min(self.rv() + 1);
        lock(&self.inner.store).compact_to(revision.saturating_sub(1));
        self.record("kube.compact", &self.inner.host, format!("revision {revision}"));
    }

    /// Restarts the server now: every connection ends; it refuses connections for `down`.
    pub fn restart(&self, down: Duration) {
        let until = self.elapsed() + down;
        *lock(&self.inner.down) = Some(until);
        self.record("kube.restart", &self.inner.host, format!("down {down:?}"));
        self.inner.restarts.send_modify(|n| *n += 1);
    }
}

impl Target for ApiServer {
    fn event(&self, phase: Phase, label: &str) -> sim::Event {
        match phase {
            Phase::Install => sim::Event::new("kube.fault.at", label.to_string()),
            Phase::Release => sim::Event::new("kube.fault.until", label.to_string()),
        }
    }

    fn installed(&self, label: &str) {
        self.record("kube.fault", label, "installed");
    }

    fn released(&self, label: &str) {
        self.record("kube.fault", label, "released");
    }
}

impl sim::fault::Fault<ApiServer> for Fault {
    fn describe(&self) -> String {
        self.to_string()
    }

    fn install(&self, api: &ApiServer) -> Undo<ApiServer> {
        let id = api.add_fault(self.clone());
        Box::new(move |api: &ApiServer| api.remove_fault(id))
    }
}

impl sim::fault::Fault<ApiServer> for Restart {
    fn describe(&self) -> String {
        self.to_string()
    }

    fn install(&self, api: &ApiServer) -> Undo<ApiServer> {
        api.restart(self.down);
        Box::new(|_: &ApiServer| {})
    }
}
