//! The node's context: what its entry point gets ([`NodeCtx`]), and the per-incarnation state it
//! shares with the [`System`](crate::node::System) that started it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use super::exit::ExitCause;
use super::interleave::{Interleave, Perturbed, Site};
use crate::net::Host;
use crate::run::Ctx;
use crate::runtime::Owner;

/// The run's node incarnations by owner, for [`NodeCtx::current`]. Weak (the run's `Ctx` must
/// not own its nodes: that would be a cycle); the [`System`](crate::node::System) keeps each
/// node's latest incarnation alive until the next one starts, so an entry point that drops its
/// `NodeCtx` early does not make its tasks lose their node.
#[derive(Default)]
pub(super) struct Incarnations {
    by_owner: Mutex<std::collections::HashMap<Owner, std::sync::Weak<NodeInner>>>,
}

impl Incarnations {
    pub(super) fn insert(&self, owner: Owner, node: &NodeCtx) {
        let mut map = self.by_owner.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, n| n.strong_count() > 0);
        map.insert(owner, Arc::downgrade(&node.inner));
    }

    fn get(&self, owner: Owner) -> Option<NodeCtx> {
        let map = self.by_owner.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&owner).and_then(std::sync::Weak::upgrade).map(|inner| NodeCtx { inner })
    }
}

/// The error type node entry points return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A node's tracked tasks: aborted when its incarnation ends.
#[derive(Clone, Default)]
pub(super) struct TaskSet {
    handles: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl TaskSet {
    pub(super) fn track(&self, handle: tokio::task::AbortHandle) {
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        handles.retain(|h| !h.is_finished());
        handles.push(handle);
    }

    /// Aborts every tracked task still alive; returns their ids.
    pub(super) fn abort_all(&self) -> Vec<tokio::task::Id> {
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|p| p.into_inner()));
        let alive: Vec<tokio::task::AbortHandle> = handles.into_iter().filter(|h| !h.is_finished()).collect();
        for h in &alive {
            h.abort();
        }
        alive.iter().map(tokio::task::AbortHandle::id).collect()
    }
}

pub(super) struct NodeInner {
    pub(super) ctx: Ctx,
    pub(super) name: String,
    /// The name again, shared by its tasks' [`Perturbed`](super::interleave::Perturbed) wrappers.
    pub(super) label: Arc<str>,
    /// The run's interleaving state, for the same wrappers.
    pub(super) interleave: Arc<Interleave>,
    pub(super) service: String,
    pub(super) replica: u64,
    pub(super) incarnation: u64,
    pub(super) version: String,
    pub(super) owner: Owner,
    pub(super) host: Host,
    pub(super) env: BTreeMap<String, String>,
    pub(super) shutdown: tokio::sync::watch::Receiver<bool>,
    /// Set once the node looked at its shutdown signal after SIGTERM.
    pub(super) observed_sigterm: Arc<std::sync::atomic::AtomicBool>,
    pub(super) status: tokio::sync::watch::Sender<Status>,
    pub(super) tasks: TaskSet,
    /// Requests [`serve`](crate::node::serve) is handling: (sequence, `METHOD path`).
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(super) inflight: Arc<Mutex<InFlight>>,
}

#[derive(Default)]
pub(super) struct InFlight {
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(super) next: u64,
    pub(super) open: BTreeMap<u64, String>,
}

/// Where an incarnation is, for those waiting on it (a start waiting for readiness, a restart
/// waiting for the end).
#[derive(Clone, Debug, Default)]
pub(super) struct Status {
    /// It said it is ready.
    pub(super) ready: bool,
    /// It ended, and why.
    pub(super) ended: Option<ExitCause>,
    /// Its end was fully processed: tasks aborted and dropped, sockets fenced, leftovers checked.
    pub(super) settled: bool,
}

/// What a node's entry point gets: its host, its shutdown signal, a readiness switch, and a way to
/// spawn tasks that die with it. Cheap to clone.
#[derive(Clone)]
pub struct NodeCtx {
    pub(super) inner: Arc<NodeInner>,
}

impl std::fmt::Debug for NodeCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCtx").field("node", &self.inner.name).field("incarnation", &self.inner.incarnation).finish()
    }
}

impl NodeCtx {
    /// The node whose task is running now: the incarnation that spawned the current task (or
    /// an ancestor of it); `None` outside a run, outside a task, or on a task of no node (the
    /// run's body, harness tasks, destructors of an ended incarnation).
    ///
    /// For libraries that must find the node's [`Host`] without being handed it, as a client
    /// with another library's API does (`kafkasim::rdkafka`'s `ClientConfig::create`).
    pub fn current() -> Option<NodeCtx> {
        let ctx = Ctx::try_current()?;
        let owner = ctx.tasks().owner_of(tokio::task::try_id()?)?;
        ctx.extension::<Incarnations>().get(owner)
    }

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

    /// Spawns a task that belongs to the node: aborted when the incarnation ends. In explore mode
    /// its polls may yield (see [`hold_polls`](crate::node::hold_polls), docs/src/determinism.md).
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_at(future, Site::Spawned(std::panic::Location::caller()))
    }

    fn spawn_at<F>(&self, future: F, site: Site) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = tokio::spawn(self.perturbed(future, site));
        self.inner.ctx.tasks().set_owner(handle.id(), Some(self.inner.owner));
        self.inner.tasks.track(handle.abort_handle());
        handle
    }

    /// `future` as a task of this node whose polls go through the run's interleaving state.
    pub(super) fn perturbed<F>(&self, future: F, site: Site) -> Perturbed<F> {
        Perturbed::new(future, &self.inner.ctx, Arc::clone(&self.inner.interleave), Arc::clone(&self.inner.label), site)
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
        drop(self.node.spawn_at(future, Site::Executor));
    }
}
