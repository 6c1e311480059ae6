//! Lifecycle events ([`Lifecycle`]): performed now ([`System::apply`]), at a fake time
//! ([`System::at`], a [`crate::fault`] on the [`System`]) or drawn by the swarm
//! ([`System::schedule_lifecycle`]); and the end of that schedule ([`System::heal`],
//! [`System::stop`]). What each event does: docs/src/nodes.md, "Lifecycle".

use std::fmt;
use std::time::Duration;

use super::exit::CrashMode;
use super::system::{System, lifecycle_error, names};
use crate::driver::Event;
use crate::fault::{self, EndAtHeal, Fault, Phase, Release, Target, Undo};
use crate::net::Partition;
use crate::report::Failure;

/// A lifecycle event for a node (or, for a rollout, a service). Naming a node, service or
/// version that does not exist makes [`System::apply`] fail (oracle `lifecycle`).
///
/// Its `Debug` is [`Lifecycle::label`], the text the history records.
#[derive(Clone, PartialEq, Eq)]
pub enum Lifecycle {
    /// Starts the node if it is down, and waits until it is ready (not for a job). Ready-wait
    /// ended by a crash or kill of that incarnation is not a failure.
    Start {
        /// The node (`cart-1`).
        node: String,
    },
    /// Sends SIGTERM (nothing if the node is down or already terminating).
    Sigterm {
        /// The node.
        node: String,
    },
    /// Crashes the node, as `mode` says (or the seed picks); nothing if it is down.
    Crash {
        /// The node.
        node: String,
        /// How its sockets end.
        mode: CrashMode,
    },
    /// SIGTERM with `grace` as the grace for this event (it replaces the service's grace, as
    /// `kubectl delete --grace-period` does): if the node still runs when it has passed, it is
    /// killed ([`ExitCause::Killed`](crate::node::ExitCause::Killed)), which is what the event
    /// asked for and not a failure. On a node already terminating, it adds that kill; the earlier
    /// SIGTERM's grace still holds.
    SigkillAfter {
        /// The node.
        node: String,
        /// How long it has to stop before it is killed.
        grace: Duration,
    },
    /// Restarts the node `how` says, then starts it and waits until it is ready.
    Restart {
        /// The node.
        node: String,
        /// Gracefully or by a crash.
        how: Restart,
    },
    /// Rolls a service out, replica by replica, to a version.
    Rollout {
        /// The service (`cart`).
        service: String,
        /// The version its replicas start as.
        version: Version,
    },
    /// Cuts the node's host off for `lasting` (a [`Partition::isolate`] on the network), or until
    /// the next [`System::heal`] or [`System::stop`] if that comes sooner.
    Partition {
        /// The node.
        node: String,
        /// How long.
        lasting: Duration,
    },
}

/// How [`Lifecycle::Restart`] stops the node before it starts it again.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    /// SIGTERM, and wait until it ended (killed after its grace).
    Graceful,
    /// A crash, its mode drawn by the seed ([`CrashMode::Seeded`]).
    Crash,
}

/// The version a rollout ([`Lifecycle::Rollout`], [`System::rollout`]) starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Version {
    /// The version each replica ran last.
    Same,
    /// The version of this name (`v2`), declared with
    /// [`ServiceSpec::version`](crate::node::ServiceSpec::version) (or `v1`, the first).
    Named(String),
}

impl Version {
    /// [`Version::Named`] `version`.
    pub fn named(version: &str) -> Version {
        Version::Named(version.to_string())
    }

    /// The version's name, `None` for [`Version::Same`].
    pub fn name(&self) -> Option<&str> {
        match self {
            Version::Same => None,
            Version::Named(v) => Some(v),
        }
    }
}

impl Lifecycle {
    /// The event's label in the history (the identity of its `node.lifecycle` harness event) and
    /// in its `lifecycle` failures: stable history labels, kept byte for byte as they read when
    /// the events were tuple variants (`Crash("cart-1", None)` for a seeded crash,
    /// `Crash("cart-1", Some(Reset))`, `Restart("cart-1", true)` for a graceful restart,
    /// `Rollout("cart", Some("v2"))`, `Partition("cart-1", 2s)`), so that histories and their
    /// hashes do not move.
    pub fn label(&self) -> String {
        match self {
            Lifecycle::Start { node } => format!("Start({node:?})"),
            Lifecycle::Sigterm { node } => format!("Sigterm({node:?})"),
            Lifecycle::Crash { node, mode: CrashMode::Seeded } => format!("Crash({node:?}, None)"),
            Lifecycle::Crash { node, mode: CrashMode::Fixed(ending) } => format!("Crash({node:?}, Some({ending:?}))"),
            Lifecycle::SigkillAfter { node, grace } => format!("SigkillAfter({node:?}, {grace:?})"),
            Lifecycle::Restart { node, how } => format!("Restart({node:?}, {})", *how == Restart::Graceful),
            Lifecycle::Rollout { service, version: Version::Same } => format!("Rollout({service:?}, None)"),
            Lifecycle::Rollout { service, version: Version::Named(v) } => format!("Rollout({service:?}, Some({v:?}))"),
            Lifecycle::Partition { node, lasting } => format!("Partition({node:?}, {lasting:?})"),
        }
    }
}

impl fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// The nodes are a target of faults ([`crate::fault`]): a lifecycle event scheduled with
/// [`System::at`] is one, as a harness event `node.lifecycle` named by its label. The event
/// records what it does itself (`node.crash`, `node.start`, …), so installing one records
/// nothing more, and it is one-shot: it undoes as nothing, and has no release event.
impl Target for System {
    fn event(&self, phase: Phase, label: &str) -> Event {
        match phase {
            Phase::Install => Event::new("node.lifecycle", label),
            Phase::Release => Event::new("node.lifecycle.release", label),
        }
    }
    fn installed(&self, _label: &str) {}
    fn released(&self, _label: &str) {}
}

/// A lifecycle event scheduled with [`System::at`] in an epoch of the schedule: when due, it
/// does nothing if [`System::heal`] or [`System::stop`] ended that schedule since.
struct AtEpoch {
    event: Lifecycle,
    epoch: u64,
}

impl Fault<System> for AtEpoch {
    fn describe(&self) -> String {
        self.event.label()
    }

    /// Performs the event on a task of its own (counted as under way until it is done); a
    /// failure it runs into fails the run.
    fn install(&self, system: &System) -> Undo<System> {
        if system.lock().epoch == self.epoch {
            let system2 = system.clone();
            let event = self.event.clone();
            system2.running_events.send_modify(|n| *n += 1);
            tokio::spawn(async move {
                let result = system2.apply(event).await;
                system2.running_events.send_modify(|n| {
                    assert!(*n > 0, "lifecycle events under way are counted: one ended that never started");
                    *n -= 1;
                });
                if let Err(f) = result {
                    system2.ctx.fail(f);
                }
            });
        }
        Box::new(|_| {})
    }
}

impl System {
    /// Performs a lifecycle event now, and waits for it: a start or restart until the node is
    /// ready (or ended again), a SIGTERM-based stop until the node has ended.
    ///
    /// # Errors
    /// A failure of oracle `lifecycle` when the event names a node, service or version that does
    /// not exist; a liveness failure (oracle `readiness`) when a node started, restarted or
    /// rolled out is not ready in time.
    pub async fn apply(&self, event: Lifecycle) -> Result<(), Failure> {
        let label = event.label();
        let result = match event {
            Lifecycle::Start { node: name } => match self.launch(&name, None) {
                Ok(watch) => self.wait_ready(&name, watch).await,
                Err(f) => Err(f),
            },
            Lifecycle::Sigterm { node: name } => self.sigterm(&name),
            Lifecycle::Crash { node: name, mode } => self.crash(&name, mode).await,
            Lifecycle::SigkillAfter { node: name, grace } => match self.terminate(&name, Some(grace)) {
                Ok(Some(watch)) => {
                    watch.settled().await;
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(f) => Err(f),
            },
            Lifecycle::Restart { node: name, how } => self.restart(&name, how).await,
            Lifecycle::Rollout { service, version } => self.rollout(&service, &version).await,
            Lifecycle::Partition { node: name, lasting } => self.check_node(&name).map(|()| {
                let release =
                    self.ctx.net().at(self.ctx.elapsed(), Partition::isolate(name)).lasting_releasable(lasting);
                self.end_at_heal(release);
            }),
        };
        result.map_err(|mut f| {
            if f.is(&crate::oracle::Oracle::LIFECYCLE) {
                f.message = format!("{label}: {}", f.message);
            }
            f
        })
    }

    async fn restart(&self, name: &str, how: Restart) -> Result<(), Failure> {
        match how {
            Restart::Graceful => {
                if let Some(watch) = self.terminate(name, None)? {
                    watch.settled().await;
                }
            }
            Restart::Crash => self.crash(name, CrashMode::Seeded).await?,
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
    pub async fn rollout(&self, service: &str, version: &Version) -> Result<(), Failure> {
        let version = version.name();
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
    ///
    /// Scheduled as a fault on the nodes ([`crate::fault::at`]): the harness event
    /// `node.lifecycle`, named by the event's [`Lifecycle::label`].
    pub fn at(&self, at: Duration, event: Lifecycle) {
        let epoch = self.lock().epoch;
        let scheduled = fault::at(self.ctx.driver(), self, at, AtEpoch { event, epoch });
        self.lock().scheduled.push(scheduled.install_event());
        scheduled.forever();
    }

    /// Ends a fault at the next [`System::heal`] (or [`System::stop`]), if it has not ended by
    /// then: a fault of the test's own schedule (a broker down until `t`, say) that a check
    /// after the heal must not see. `release` comes from
    /// [`Scheduled::lasting_releasable`](crate::fault::Scheduled::lasting_releasable).
    pub fn end_at_heal(&self, release: Release) {
        self.ctx.extension::<EndAtHeal>().add(release);
    }

    /// Ends the fault schedule: cancels the lifecycle events scheduled with [`System::at`] (and
    /// [`System::schedule_lifecycle`]) that have not happened, waits for those under way (a
    /// restart or a rollout in progress) to finish, then ends the faults the heal ends
    /// ([`System::end_at_heal`]: partitions of [`Lifecycle::Partition`], the nemesis's faults):
    /// those installed are released now, those not yet installed are cancelled.
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
        let (released, cancelled) = self.ctx.extension::<EndAtHeal>().end_all();
        if released + cancelled > 0 {
            // Only then: the histories of runs with nothing to end stay as they were.
            self.ctx.record(
                "node.quiesce",
                "system",
                format!("{why}: {released} faults of the schedule ended early, {cancelled} cancelled"),
            );
        }
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
            plan.push((at, Lifecycle::Crash { node: node.clone(), mode: CrashMode::Seeded }));
            plan.push((at + down, Lifecycle::Start { node }));
        }
        for _ in 0..swarm.int("lifecycle.restarts", 0..=2) {
            let node = draws.choose(&nodes).cloned().unwrap_or_default();
            plan.push((draws.duration(span.clone()), Lifecycle::Restart { node, how: Restart::Graceful }));
        }
        for _ in 0..swarm.int("lifecycle.rollouts", 0..=2) {
            let service = draws.choose(&services).cloned().unwrap_or_default();
            let versions: Vec<String> = self
                .lock()
                .services
                .get(&service)
                .map(|s| s.versions.iter().map(|(v, _)| v.clone()).collect())
                .unwrap_or_default();
            let version = draws.choose(&versions).cloned().map_or(Version::Same, Version::Named);
            plan.push((draws.duration(span.clone()), Lifecycle::Rollout { service, version }));
        }
        for _ in 0..swarm.int("lifecycle.partitions", 0..=2) {
            let node = draws.choose(&nodes).cloned().unwrap_or_default();
            let last = draws.duration(Duration::from_millis(100)..=Duration::from_secs(5));
            plan.push((draws.duration(span.clone()), Lifecycle::Partition { node, lasting: last }));
        }
        for (at, event) in &plan {
            self.at(*at, event.clone());
        }
        plan
    }

    /// Heals: ends the fault schedule, then starts every node that is down and waits until all
    /// are ready. When it returns, no fault of the harness's schedules is active or still to
    /// come, so a bound measured from here (a liveness check, Q9) starts at a true heal point:
    /// - the lifecycle events scheduled with [`System::at`] or [`System::schedule_lifecycle`]
    ///   that have not happened are cancelled; those under way (a restart, a rollout) are
    ///   awaited;
    /// - a [`Lifecycle::Partition`] still in force is lifted now (not when its `lasting` ends);
    /// - the [`crate::nemesis::Nemesis`]'s faults still in force are lifted, those to come cancelled;
    /// - so are faults handed to [`System::end_at_heal`].
    ///
    /// Faults a test schedules itself (`ctx.net().at(..)`, a Kafka cluster's or an API server's
    /// faults) are its own: the heal ends them only if they were handed to
    /// [`System::end_at_heal`].
    ///
    /// # Errors
    /// As [`System::start`].
    pub async fn heal(&self) -> Result<(), Failure> {
        self.quiesce("heal").await;
        self.ctx.record("node.heal", "system", "");
        self.start().await
    }

    /// Stops every node with SIGTERM and waits until each has ended (killed after its grace) —
    /// after ending the fault schedule as [`System::heal`] does (its partitions and the
    /// nemesis's faults too), so that no scheduled restart starts a node again;
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Lifecycle, Restart, Version};
    use crate::net::Ending;
    use crate::node::exit::CrashMode;

    /// The events as they were declared before they had named fields: their derived `Debug` is
    /// the label histories were recorded with.
    #[derive(Debug)]
    #[allow(dead_code, reason = "read through Debug only")]
    enum Old {
        Start(String),
        Sigterm(String),
        Crash(String, Option<OldMode>),
        SigkillAfter(String, Duration),
        Restart(String, bool),
        Rollout(String, Option<String>),
        Partition(String, Duration),
    }

    #[derive(Debug)]
    #[allow(dead_code, reason = "read through Debug only")]
    enum OldMode {
        Reset,
        Vanish,
    }

    #[test]
    fn labels_are_the_old_debug_text() {
        let n = || "cart-1\"x".to_string();
        let d = Duration::from_millis(1500);
        let pairs = [
            (Lifecycle::Start { node: n() }, Old::Start(n())),
            (Lifecycle::Sigterm { node: n() }, Old::Sigterm(n())),
            (Lifecycle::Crash { node: n(), mode: CrashMode::Seeded }, Old::Crash(n(), None)),
            (
                Lifecycle::Crash { node: n(), mode: CrashMode::Fixed(Ending::Reset) },
                Old::Crash(n(), Some(OldMode::Reset)),
            ),
            (
                Lifecycle::Crash { node: n(), mode: CrashMode::Fixed(Ending::Vanish) },
                Old::Crash(n(), Some(OldMode::Vanish)),
            ),
            (Lifecycle::SigkillAfter { node: n(), grace: d }, Old::SigkillAfter(n(), d)),
            (Lifecycle::Restart { node: n(), how: Restart::Graceful }, Old::Restart(n(), true)),
            (Lifecycle::Restart { node: n(), how: Restart::Crash }, Old::Restart(n(), false)),
            (Lifecycle::Rollout { service: n(), version: Version::Same }, Old::Rollout(n(), None)),
            (Lifecycle::Rollout { service: n(), version: Version::named("v2") }, Old::Rollout(n(), Some("v2".into()))),
            (Lifecycle::Partition { node: n(), lasting: d }, Old::Partition(n(), d)),
        ];
        for (new, old) in pairs {
            assert_eq!(new.label(), format!("{old:?}"));
            assert_eq!(format!("{new:?}"), format!("{old:?}"));
        }
    }
}
