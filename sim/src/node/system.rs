//! The run's nodes ([`System`]): services declared, their instances, and each incarnation's start
//! and end (exit, SIGTERM, kill, crash). See docs/src/nodes.md.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::ctx::{InFlight, NodeCtx, NodeInner, Status, TaskSet};
use super::exit::{CrashMode, ExitCause, ExitRecord};
use super::spec::ServiceSpec;
use super::zombies::{Owners, ZombieCheck, zombie_failure, zombies};
use crate::driver::Event;
use crate::net::Ending;
use crate::report::{Class, Failure};
use crate::run::Ctx;
use crate::runtime::Owner;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Running,
    Terminating,
    Down,
}

pub(super) struct Instance {
    pub(super) service: String,
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
    /// The latest incarnation's context, kept so that [`NodeCtx::current`] finds it from its
    /// tasks even after the entry point dropped its own (until the next incarnation starts).
    node: Option<NodeCtx>,
}

pub(super) struct State {
    pub(super) services: BTreeMap<String, ServiceSpec>,
    pub(super) instances: BTreeMap<String, Instance>,
    exits: Vec<ExitRecord>,
    /// Lifecycle events scheduled with [`System::at`] and not yet cancelled.
    pub(super) scheduled: Vec<crate::driver::EventId>,
    /// Bumped by `heal` and `stop`: a scheduled event of an older epoch does nothing.
    pub(super) epoch: u64,
}

/// The run's nodes: services, their instances, their lifecycle, and what ended them. Cheap to
/// clone.
#[derive(Clone)]
pub struct System {
    pub(super) ctx: Ctx,
    state: Arc<Mutex<State>>,
    owners: Owners,
    /// How many scheduled lifecycle events are being performed now.
    pub(super) running_events: Arc<tokio::sync::watch::Sender<u32>>,
}

impl std::fmt::Debug for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("System").finish_non_exhaustive()
    }
}

/// One incarnation, as those waiting on it see it.
pub(super) struct Watch {
    pub(super) incarnation: u64,
    status: tokio::sync::watch::Receiver<Status>,
}

impl Watch {
    /// Until the incarnation's end has been fully processed. Bounded by the grace timer of a
    /// SIGTERM, or by nothing at all for an incarnation nobody stops.
    pub(super) async fn settled(mut self) {
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
    ctx.fail(Failure::correctness(crate::oracle::Oracle::EXIT_CAUSE, message));
}

pub(super) fn lifecycle_error(message: String) -> Failure {
    Failure::correctness(crate::oracle::Oracle::LIFECYCLE, message)
}

pub(super) fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    keys.map(String::as_str).collect::<Vec<_>>().join(", ")
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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Declares a service; its replicas are drawn now (dimension `<name>.replicas`) and named
    /// `<name>-0`, `<name>-1`, …; the service's name routes to them ClusterIP-style. Returns the
    /// replicas' names.
    pub fn add(&self, service: ServiceSpec) -> Vec<String> {
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
                    node: None,
                },
            );
        }
        st.services.insert(service.name.clone(), service.clone());
        drop(st);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        self.ctx.net().cluster_ip(&service.name, &refs);
        names
    }

    /// Starts every node that is down and waits until each is ready (jobs, [`ServiceSpec::finite`],
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

    pub(super) fn check_node(&self, name: &str) -> Result<(), Failure> {
        let st = self.lock();
        if st.instances.contains_key(name) { Ok(()) } else { Err(Self::unknown_node(&st, name)) }
    }

    /// Starts a node if it is down, as `version` (else the version it ran last); returns the
    /// incarnation running.
    pub(super) fn launch(&self, name: &str, version: Option<&str>) -> Result<Watch, Failure> {
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
        let last = instance.incarnation;
        assert!(
            incarnation > last,
            "node incarnations increase: {name} started incarnation {incarnation} after {last}"
        );
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
                label: Arc::from(name),
                interleave: super::interleave::Interleave::of(&self.ctx),
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
        st.instances.get_mut(name).expect("checked above").node = Some(node.clone());
        drop(st);
        self.ctx.extension::<super::ctx::Incarnations>().insert(owner, &node);
        self.ctx.record("node.start", name, format!("incarnation {incarnation} {version}"));
        let system = self.clone();
        let node_name = name.to_string();
        let wrap = node.clone();
        let root = tokio::spawn(wrap.perturbed(
            async move {
                let result = entry(node).await.map_err(|e| e.to_string());
                // The cause is recorded now, at the instant the entry point returned; the rest of
                // the end waits for the aborted tasks to be dropped, on a task of no node (this
                // one ends).
                if let Some(ended) = system.returned(&node_name, incarnation, result) {
                    drop(crate::runtime::spawn_detached(async move { system.settle(ended).await }));
                }
            },
            super::interleave::Site::Entry,
        ));
        drop(wrap);
        self.ctx.tasks().set_owner(root.id(), Some(owner));
        if let Some(i) = self.lock().instances.get_mut(name).filter(|i| i.incarnation == incarnation) {
            i.root = Some(root.abort_handle());
        }
        Ok(watch)
    }

    /// Waits until an incarnation is ready, or has ended (a lifecycle event, or an exit the
    /// exit-cause oracle judges), or its service's ready timeout has passed.
    pub(super) async fn wait_ready(&self, name: &str, mut watch: Watch) -> Result<(), Failure> {
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
                crate::oracle::Oracle::READINESS,
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
                        "{name} (incarnation {incarnation}) failed on its own {unprompted}: {e} (a service allowed to fail on its own is ServiceSpec::may_fail)"
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
        let signalled = matches!(cause, ExitCause::Signal(_));
        let tracked_drain_failed = signalled && self.tracked_drain_failed(name, incarnation, &inflight);
        let mut aborted = tasks.abort_all();
        // The root is not aborted when it is the task ending the incarnation (it returned).
        let current = tokio::task::try_id();
        if let Some(root) = root.filter(|r| !r.is_finished() && Some(r.id()) != current) {
            root.abort();
            aborted.push(root.id());
        }
        self.ctx.tasks().mark_aborted(aborted.iter().copied());
        let (conns, listeners) = self.ctx.net().end_incarnation(name, incarnation, ending);
        self.check_untracked_drain(name, incarnation, signalled && !tracked_drain_failed);
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
        status.send_modify(|s| {
            assert!(s.ended.is_none(), "an incarnation ends once: {name} incarnation {incarnation} ended twice");
            s.ended = Some(cause);
        });
        Some(Ended { name: name.to_string(), incarnation, owner, crashed, status })
    }

    /// The drain oracle for a node served with [`serve`](crate::node::serve): fails the run if
    /// requests are still in flight; says whether it failed.
    fn tracked_drain_failed(&self, name: &str, incarnation: u64, inflight: &Mutex<InFlight>) -> bool {
        let dropped: Vec<String> = inflight.lock().unwrap_or_else(|p| p.into_inner()).open.values().cloned().collect();
        if !dropped.is_empty() {
            self.ctx.fail(Failure::correctness(
                crate::oracle::Oracle::DRAIN,
                format!(
                    "{name} (incarnation {incarnation}) stopped after SIGTERM with {} request(s) still in flight, which got no (complete) response: {}",
                    dropped.len(),
                    dropped.join(", ")
                ),
            ));
        }
        !dropped.is_empty()
    }

    /// Ends the network's drain watch of the incarnation; with `judge`, fails the run on the
    /// requests it saw left unanswered.
    fn check_untracked_drain(&self, name: &str, incarnation: u64, judge: bool) {
        // The same guarantee seen from the network, for a serve loop of the node's own (axum's
        // `with_graceful_shutdown`, tonic's, a hand-written one): its server connections that
        // closed after SIGTERM — or were just closed by the end — with a request read and not
        // answered, while the client was still there.
        let unanswered = self.ctx.net().take_unanswered(name, incarnation);
        if judge && !unanswered.is_empty() {
            self.ctx.fail(
                Failure::correctness(
                    crate::oracle::Oracle::DRAIN,
                    format!(
                        "{name} (incarnation {incarnation}) stopped after SIGTERM with {} connection(s) closed on requests it had read and not answered: {}",
                        unanswered.len(),
                        unanswered.join("; ")
                    ),
                )
                .about(name),
            );
        }
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
                    .oracle(crate::oracle::Oracle::LEAK),
                );
            }
        }
        ended.status.send_modify(|s| {
            assert!(
                s.ended.is_some() && !s.settled,
                "an ended incarnation settles once: {} incarnation {}",
                ended.name,
                ended.incarnation
            );
            s.settled = true;
        });
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
    pub(super) fn terminate(&self, name: &str, kill_after: Option<Duration>) -> Result<Option<Watch>, Failure> {
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

    /// Crashes a node (see [`CrashMode`]: as given, or as the seed picks). Nothing if it is down.
    ///
    /// # Errors
    /// A failure of oracle `lifecycle` if there is no such node, or if `mode` is
    /// [`CrashMode::Fixed`]`(`[`Ending::Exit`]`)` (not a crash).
    pub async fn crash(&self, name: &str, mode: CrashMode) -> Result<(), Failure> {
        if mode == CrashMode::Fixed(Ending::Exit) {
            return Err(lifecycle_error(format!("a crash of {name:?} ends as Reset or Vanish, not Exit")));
        }
        let incarnation = {
            let st = self.lock();
            match st.instances.get(name) {
                None => return Err(Self::unknown_node(&st, name)),
                Some(i) if i.phase != Phase::Down => i.incarnation,
                Some(_) => return Ok(()),
            }
        };
        let ending = match mode {
            CrashMode::Fixed(ending) => ending,
            CrashMode::Seeded => {
                if self.ctx.source(&format!("node/crash/{name}/{incarnation}")).bool(0.5) {
                    Ending::Vanish
                } else {
                    Ending::Reset
                }
            }
        };
        self.ctx.record("node.crash", name, format!("incarnation {incarnation} {ending:?}"));
        if let Some(ended) = self.end_now(name, incarnation, ExitCause::Crash(ending), ending) {
            // Settled on a task of no node: the caller may be one of the crashed node's tasks.
            let system = self.clone();
            let _ = crate::runtime::spawn_detached(async move { system.settle(ended).await }).await;
        }
        Ok(())
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
