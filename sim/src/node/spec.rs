//! The service declaration: what [`System::add`](crate::node::System::add) runs.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::RangeInclusive;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::ctx::{BoxError, NodeCtx};

pub(super) type EntryFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;
pub(super) type Entry = Arc<dyn Fn(NodeCtx) -> EntryFuture + Send + Sync>;

/// A service's declaration: its entry point (one per version), how many replicas, their grace
/// and readiness timeout, their environment, and whether it is a job. [`System::add`] runs it.
///
/// (Named so as not to shadow `tower::Service`, which a node's HTTP router implements.)
///
/// [`System::add`]: crate::node::System::add
#[derive(Clone)]
pub struct ServiceSpec {
    pub(super) name: String,
    pub(super) versions: Vec<(String, Entry)>,
    pub(super) replicas: RangeInclusive<u64>,
    pub(super) grace: Duration,
    pub(super) ready_timeout: Duration,
    pub(super) env: BTreeMap<String, String>,
    pub(super) finite: bool,
    pub(super) may_fail: bool,
}

impl std::fmt::Debug for ServiceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceSpec")
            .field("name", &self.name)
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

impl ServiceSpec {
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
    /// use sim::node::{BoxError, NodeCtx, ServiceSpec};
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
    /// let service = ServiceSpec::new("kv", move |node| kv(node, store.clone())).replicas(2..=2);
    /// # let _ = service;
    /// ```
    pub fn new<F, Fut>(name: &str, entry: F) -> ServiceSpec
    where
        F: Fn(NodeCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        ServiceSpec {
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
    pub fn version<F, Fut>(mut self, version: &str, entry: F) -> ServiceSpec
    where
        F: Fn(NodeCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.versions.push((version.to_string(), Arc::new(move |node| Box::pin(entry(node)) as EntryFuture)));
        self
    }

    /// How many replicas: drawn by the swarm from this range (dimension `<name>.replicas`).
    pub fn replicas(mut self, range: RangeInclusive<u64>) -> ServiceSpec {
        self.replicas = range;
        self
    }

    /// How long a node may take to stop after SIGTERM before it is killed (Kubernetes'
    /// `terminationGracePeriodSeconds`); outliving it fails the `exit-cause` oracle.
    /// [`Lifecycle::SigkillAfter`](crate::node::Lifecycle::SigkillAfter) gives its own grace for
    /// that one event.
    pub fn grace(mut self, grace: Duration) -> ServiceSpec {
        self.grace = grace;
        self
    }

    /// How long a node may take to say it is ready ([`NodeCtx::set_ready`]) when something waits
    /// for it (a start, a restart, a rollout); not ready by then is a liveness failure of oracle
    /// `readiness`. Unused for a [`ServiceSpec::finite`] job.
    pub fn ready_timeout(mut self, timeout: Duration) -> ServiceSpec {
        self.ready_timeout = timeout;
        self
    }

    /// An environment variable every node of the service sees ([`NodeCtx::env`]).
    pub fn env(mut self, key: &str, value: &str) -> ServiceSpec {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    /// The service is a job, not a server: it may return `Ok` on its own (recorded as
    /// [`ExitCause::Returned`](crate::node::ExitCause::Returned)), and nothing waits for it to
    /// become ready — [`System::start`](crate::node::System::start) returns once it is launched
    /// (Kubernetes gates no rollout on a Job's readiness). A job that
    /// returns an error on its own still fails the `exit-cause` oracle, unless
    /// [`ServiceSpec::may_fail`].
    pub fn finite(mut self) -> ServiceSpec {
        self.finite = true;
        self
    }

    /// The node may end on its own with an error without failing the run: a job allowed to fail,
    /// a server expected to exit when a dependency is gone. The exit is still recorded
    /// ([`ExitCause::Error`](crate::node::ExitCause::Error)). Answering SIGTERM with an error is
    /// still a failure.
    pub fn may_fail(mut self) -> ServiceSpec {
        self.may_fail = true;
        self
    }
}
