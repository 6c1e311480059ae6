//! The handle a run's body gets: [`Ctx`].

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::config::Mode;
use crate::driver::Driver;
use crate::history;
use crate::recorder::Recorder;
use crate::report::Failure;
use crate::seed::{Seed, Source, Tree};
use crate::swarm::Swarm;

/// The state of one live run, shared by every clone of its [`Ctx`].
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) seed: Seed,
    pub(crate) tree: Tree,
    pub(crate) mode: Mode,
    pub(crate) swarm: Swarm,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) driver: Driver,
    pub(crate) failure: Mutex<Option<Failure>>,
    pub(crate) stop: tokio::sync::Notify,
    pub(crate) epoch: std::time::SystemTime,
    pub(crate) net: std::sync::OnceLock<crate::net::Network>,
    pub(crate) net_config: Mutex<Option<crate::net::NetConfig>>,
    pub(crate) tasks: crate::runtime::Tasks,
    pub(crate) checks: Arc<crate::checks::Checks<Ctx>>,
    pub(crate) extensions: Mutex<std::collections::HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>>,
}

impl Shared {
    /// Drops what may hold a [`Ctx`] of this run — its extensions, its checks, its network's
    /// hooks and sockets, the events destructors scheduled while the runtime shut down — once
    /// the run is judged. Each of them is reached
    /// from this state, so one holding a `Ctx` is a cycle that would keep the whole run (its
    /// history, network and nodes' state: 0.1–1 MB in the walkthroughs) alive after it ended.
    pub(crate) fn tear_down(&self) {
        let extensions = std::mem::take(&mut *self.extensions.lock().unwrap_or_else(|p| p.into_inner()));
        drop(extensions);
        self.checks.clear();
        if let Some(net) = self.net.get() {
            net.tear_down();
        }
        self.driver.clear();
    }
}

/// The handle a run's body gets: the seed's streams, the swarm, the driver, the history.
///
/// Cheap to clone, `Send + Sync`. Inside a run, [`Ctx::current`] finds it from any task.
#[derive(Clone)]
pub struct Ctx {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("simulation", &self.shared.name).field("seed", &self.shared.seed).finish()
    }
}

thread_local! {
    /// The run on this thread (set while its runtime runs).
    pub(crate) static CURRENT_RUN: RefCell<Option<Ctx>> = const { RefCell::new(None) };
}

impl Ctx {
    /// The run on this thread, if the thread runs one.
    pub fn try_current() -> Option<Ctx> {
        CURRENT_RUN.try_with(|c| c.try_borrow().ok().and_then(|c| c.clone())).ok().flatten()
    }

    /// The run on this thread.
    ///
    /// # Panics
    /// Outside a simulation run.
    #[track_caller]
    pub fn current() -> Ctx {
        Ctx::try_current().expect("sim::Ctx::current() called outside a simulation run")
    }

    /// The simulation's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The run's root seed.
    pub fn seed(&self) -> Seed {
        self.shared.seed
    }

    /// The run's mode.
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// The stream for a `/`-separated label path (see [`crate::seed`]).
    pub fn source(&self, label: &str) -> Source {
        self.shared.tree.source(label)
    }

    /// The run's swarm.
    pub fn swarm(&self) -> &Swarm {
        &self.shared.swarm
    }

    /// The run's event queue.
    pub fn driver(&self) -> &Driver {
        &self.shared.driver
    }

    /// Fake time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.shared.recorder.elapsed()
    }

    /// `SystemTime::now()` at the start of the run (drawn from the seed).
    pub fn epoch(&self) -> std::time::SystemTime {
        self.shared.epoch
    }

    /// Appends an event to the history (and the trace) at the current fake time; returns its
    /// index.
    pub fn record(&self, kind: &str, identity: &str, detail: impl AsRef<str>) -> u64 {
        self.shared.recorder.record_at(self.elapsed(), kind, identity, detail.as_ref())
    }

    /// Ends the run with `failure` (the first failure reported wins). The run stops at the next
    /// point where the harness runs; the failure is recorded in the history.
    pub fn fail(&self, mut failure: Failure) {
        let at = self.elapsed();
        failure.at_nanos.get_or_insert(at.as_nanos() as u64);
        let mut slot = self.shared.failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            self.shared.recorder.record_at(at, "failure", failure.class.name(), &failure.to_string());
            *slot = Some(failure);
            self.shared.stop.notify_one();
        }
    }

    /// Whether a failure was reported.
    pub fn failed(&self) -> bool {
        self.shared.failure.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// A copy of the history so far.
    pub fn history(&self) -> history::History {
        self.shared.recorder.snapshot()
    }

    /// The run's value of type `T`, made with `T::default()` on first use: per-run state shared
    /// by every part of the run (the effects ledger, request logs, a model).
    pub fn extension<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut map = self.shared.extensions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map
            .entry(std::any::TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Arc<dyn std::any::Any + Send + Sync>);
        Arc::clone(entry).downcast::<T>().expect("the map is keyed by the value's TypeId")
    }

    pub(crate) fn tasks(&self) -> &crate::runtime::Tasks {
        &self.shared.tasks
    }

    pub(crate) fn recorder(&self) -> Arc<Recorder> {
        Arc::clone(&self.shared.recorder)
    }

    /// The run's simulated network, made on first use with links drawn from
    /// [`crate::net::NetConfig::from_swarm`] (or the config given to [`Ctx::set_net_config`]).
    pub fn net(&self) -> &crate::net::Network {
        self.shared.net.get_or_init(|| {
            let config = self.shared.net_config.lock().unwrap_or_else(|p| p.into_inner()).take();
            let config = config.unwrap_or_else(|| crate::net::NetConfig::from_swarm(self.swarm()));
            let jitter = self.source("net/jitter");
            crate::net::Network::new(config, self.seed(), jitter, self.driver().clone(), self.recorder())
        })
    }

    /// Chooses the network's link parameters instead of drawing them from the swarm. Call it
    /// before anything makes the network: the first [`Ctx::net`], a host, or `System::add`.
    ///
    /// # Errors
    /// [`NetConfigTooLate`] if the network already exists (its links are drawn): nothing changes.
    pub fn set_net_config(&self, config: crate::net::NetConfig) -> Result<(), NetConfigTooLate> {
        if self.shared.net.get().is_some() {
            return Err(NetConfigTooLate);
        }
        *self.shared.net_config.lock().unwrap_or_else(|p| p.into_inner()) = Some(config);
        Ok(())
    }
}

/// [`Ctx::set_net_config`] was called after the run's network was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetConfigTooLate;

impl std::fmt::Display for NetConfigTooLate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "Ctx::set_net_config: the run's network already exists (made by Ctx::net, a host, or System::add); \
             call set_net_config first in the run's body, before adding nodes",
        )
    }
}

impl std::error::Error for NetConfigTooLate {}

impl From<NetConfigTooLate> for Failure {
    fn from(e: NetConfigTooLate) -> Failure {
        Failure::correctness("net-config", e.to_string())
    }
}
