//! Faults: one shape for everything a run does wrong on purpose.
//!
//! A [`Fault`] is a value that changes a [`Target`] while it is installed and says how to undo
//! itself: a partition of the network, an error a Kafka broker answers with, a crashed node. Every
//! target (the [`crate::net::Network`], kafkasim's cluster, the [`crate::node::System`] of nodes)
//! installs and schedules faults the same two ways:
//!
//! - **Hold until**: [`install`] applies the fault now and returns a `#[must_use]` [`FaultGuard`];
//!   dropping the guard (or [`FaultGuard::release`]) undoes it, [`FaultGuard::forever`] keeps it
//!   for the rest of the run, [`FaultGuard::release_when`] undoes it when a future completes
//!   ("until this happens").
//! - **At a fake time**: [`at`] schedules the install as a harness event of the
//!   [`crate::Driver`] and returns a `#[must_use]` [`Scheduled`]: [`Scheduled::lasting`] ("at t,
//!   for d"), [`Scheduled::until`] (until fake time t) or [`Scheduled::forever`].
//!   [`Scheduled::lasting_releasable`] ("for d, or until ended sooner") returns a [`Release`]
//!   whose [`Release::now`] ends the fault at once: how a heal ([`crate::node::System::heal`])
//!   ends the faults of the harness's schedules (the lifecycle's partitions, the nemesis) and
//!   those handed to it ([`crate::node::System::end_at_heal`]).
//!
//! Times are fake time since the run started. Each target names the history entries and harness
//! events of its faults ([`Target::installed`], [`Target::released`], [`Target::event`]), so a
//! network fault reads `net.control …` in the history and a Kafka fault `kafka.fault …`.
//!
//! A fault that is a single action (a reset, a crash) installs as that action and undoes as
//! nothing.
//!
//! Every [`at`] of a run is numbered, 1-based in scheduling order, and listed in the run's
//! [`crate::Outcome::faults`] ([`FaultRecord`]). `SIM_DROP_FAULTS=2,5`
//! ([`crate::Simulation::drop_faults`]) drops faults by number: their install and release events
//! still fire at their times (so every other event keeps its place in the driver's order) but do
//! nothing, and the history records `fault N dropped: <label>` in place of the install.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::driver::{Driver, Event, EventId};
pub use crate::report::FaultRecord;

/// How to undo an installed fault on its target.
pub type Undo<T> = Box<dyn FnOnce(&T) + Send>;

/// A fault on a target of type `T`: applies itself and returns how to undo it.
///
/// Any closure `Fn(&T) -> Undo<T>` is a fault too (described as `"custom control"`).
pub trait Fault<T>: Send + Sync + 'static {
    /// What it does, for the history (`"partition [a] | [b]"`).
    fn describe(&self) -> String;
    /// Applies it to `target`; returns how to undo it.
    fn install(&self, target: &T) -> Undo<T>;
}

impl<T, F> Fault<T> for F
where
    F: Fn(&T) -> Undo<T> + Send + Sync + 'static,
{
    fn describe(&self) -> String {
        "custom control".to_string()
    }
    fn install(&self, target: &T) -> Undo<T> {
        self(target)
    }
}

/// The phase of a scheduled fault a harness event stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The event that installs the fault.
    Install,
    /// The event that undoes it.
    Release,
}

/// What faults act on: a cheap handle (cloned into scheduled events and guards) and the names its
/// faults go by in the history.
pub trait Target: Clone + Send + Sync + 'static {
    /// The harness event for `phase` of a scheduled fault described as `label` (its action is
    /// added by [`at`]).
    fn event(&self, phase: Phase, label: &str) -> Event;
    /// Called as a fault is installed, before it applies: record it in the history here.
    fn installed(&self, label: &str);
    /// Called as a fault is undone, before its undo runs.
    fn released(&self, label: &str);
}

/// Installs `fault` on `target` now, until the returned guard is dropped or released.
pub fn install<T: Target>(target: &T, fault: impl Fault<T>) -> FaultGuard {
    let label = fault.describe();
    target.installed(&label);
    let undo = fault.install(target);
    let target = target.clone();
    let on_release = label.clone();
    FaultGuard {
        label,
        undo: Some(Box::new(move || {
            target.released(&on_release);
            undo(&target);
        })),
    }
}

/// Schedules `fault` to be installed on `target` at fake time `at` since the run started, as a
/// harness event of `driver` (the run's, [`crate::Ctx::driver`]); say when it ends with
/// [`Scheduled::lasting`] or [`Scheduled::until`] (or keep it with [`Scheduled::forever`]). A
/// time already past means now.
///
/// The fault gets the run's next fault number; if `SIM_DROP_FAULTS` names it, its events fire
/// but do nothing (see the module docs).
pub fn at<T: Target>(driver: &Driver, target: &T, at: Duration, fault: impl Fault<T>) -> Scheduled {
    let slot: Arc<Mutex<Slot>> = Arc::default();
    let label = fault.describe();
    let (number, dropped) = driver.number_fault(&label, at);
    if dropped {
        // Same kind and identity as the install (ties sort by them), recorded as dropped.
        let recorder = driver.recorder();
        let detail = format!("dropped: {label}");
        let event = target.event(Phase::Install, &label).unrecorded().action(move || {
            recorder.record_at(recorder.elapsed(), "fault", &number.to_string(), &detail);
        });
        let id = driver.at(at, event);
        let release = target.event(Phase::Release, &label).unrecorded();
        return Scheduled { driver: driver.clone(), release, slot, at, id };
    }
    let (owner, slot2) = (target.clone(), Arc::clone(&slot));
    let event = target.event(Phase::Install, &label).action(move || {
        let guard = install(&owner, fault);
        let mut slot = lock(&slot2);
        if slot.released_early {
            drop(slot);
            guard.release();
        } else if slot.release_scheduled {
            slot.guard = Some(guard);
        } else {
            guard.forever();
        }
    });
    let id = driver.at(at, event);
    Scheduled { driver: driver.clone(), release: target.event(Phase::Release, &label), slot, at, id }
}

/// An installed fault; dropping it (or [`FaultGuard::release`]) undoes it, recorded in the
/// history. [`FaultGuard::forever`] keeps it for the rest of the run.
#[must_use = "the fault is undone when the guard is dropped; call .forever() to keep it"]
pub struct FaultGuard {
    label: String,
    undo: Option<Box<dyn FnOnce() + Send>>,
}

impl fmt::Debug for FaultGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultGuard").field("fault", &self.label).finish()
    }
}

impl FaultGuard {
    /// What the fault does ([`Fault::describe`]).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Undoes the fault now.
    pub fn release(mut self) {
        self.undo_now();
    }

    /// Keeps the fault for the rest of the run.
    pub fn forever(mut self) {
        self.undo = None;
    }

    /// Undoes the fault once `signal` completes ("until this happens"), from a task of the run's
    /// own ([`crate::spawn_detached`]).
    ///
    /// # Panics
    /// Outside a simulation run.
    pub fn release_when(self, signal: impl Future<Output = ()> + Send + 'static) {
        crate::runtime::spawn_detached(async move {
            signal.await;
            self.release();
        });
    }

    fn undo_now(&mut self) {
        if let Some(undo) = self.undo.take() {
            undo();
        }
    }
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        self.undo_now();
    }
}

/// Where a scheduled fault's guard lives between its install and its release.
#[derive(Default)]
struct Slot {
    /// A release was scheduled ([`Scheduled::until`]): keep the guard for it.
    release_scheduled: bool,
    /// The release fired before the install (both due at once): release at install.
    released_early: bool,
    guard: Option<FaultGuard>,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fault scheduled at a fake time with [`at`]. [`Scheduled::until`] and [`Scheduled::lasting`]
/// schedule its release; without them ([`Scheduled::forever`], or dropping this) it stays
/// installed for the rest of the run.
#[must_use = "call .until(t), .lasting(d) or .forever()"]
pub struct Scheduled {
    driver: Driver,
    release: Event,
    slot: Arc<Mutex<Slot>>,
    at: Duration,
    id: EventId,
}

impl fmt::Debug for Scheduled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduled").field("at", &self.at).field("release", &self.release).finish()
    }
}

impl Scheduled {
    /// The harness event that installs the fault (for [`Driver::cancel`]).
    pub fn install_event(&self) -> EventId {
        self.id
    }

    /// Undoes the fault at fake time `t` since the run started (not before its install); returns
    /// the release's harness event.
    pub fn until(self, t: Duration) -> EventId {
        lock(&self.slot).release_scheduled = true;
        let slot = Arc::clone(&self.slot);
        self.driver.at(
            t.max(self.at),
            self.release.action(move || {
                let guard = {
                    let mut slot = lock(&slot);
                    if slot.guard.is_none() {
                        slot.released_early = true;
                    }
                    slot.guard.take()
                };
                drop(guard);
            }),
        )
    }

    /// Undoes the fault `d` after it was installed; returns the release's harness event.
    pub fn lasting(self, d: Duration) -> EventId {
        let at = self.at;
        self.until(at + d)
    }

    /// As [`Scheduled::lasting`], and returns a [`Release`] that can end the fault sooner.
    pub fn lasting_releasable(self, d: Duration) -> Release {
        let (driver, install, slot) = (self.driver.clone(), self.id, Arc::downgrade(&self.slot));
        let release = self.lasting(d);
        Release { driver, install, release, slot }
    }

    /// Keeps the fault for the rest of the run once installed.
    pub fn forever(self) {}
}

/// A scheduled fault's release that can come sooner ([`Scheduled::lasting_releasable`]): what
/// ends the harness's faults at a heal ([`crate::node::System::heal`]).
pub struct Release {
    driver: Driver,
    install: EventId,
    release: EventId,
    /// Held by the fault's install and release events while either is pending: gone once the
    /// fault is over.
    slot: std::sync::Weak<Mutex<Slot>>,
}

impl fmt::Debug for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Release").field("install", &self.install).field("release", &self.release).finish()
    }
}

/// What [`Release::now`] found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Not installed yet: its install and release are cancelled, it never happens.
    Cancelled,
    /// Installed: undone now, and recorded as released now.
    Released,
    /// Already released (or dropped by `SIM_DROP_FAULTS` and due no more).
    Over,
}

impl Release {
    /// Ends the fault now: undoes it if installed (the history records its release now), cancels
    /// it if not yet installed, and cancels its scheduled release either way.
    pub fn now(&self) -> Ended {
        let Some(slot) = self.slot.upgrade() else {
            return Ended::Over;
        };
        // Holding the slot here, cancelling drops no guard inside the driver's lock (an undo
        // schedules events).
        let install_pending = self.driver.cancel(self.install);
        self.driver.cancel(self.release);
        let guard = lock(&slot).guard.take();
        match guard {
            Some(guard) => {
                guard.release();
                Ended::Released
            }
            None if install_pending => Ended::Cancelled,
            None => Ended::Over,
        }
    }
}

/// The faults the next heal ends ([`crate::node::System::heal`] and `stop`): the run's own
/// (one per run, [`crate::Ctx::extension`]), filled by the harness's fault schedules (the
/// lifecycle's partitions, the nemesis) and by tests ([`crate::node::System::end_at_heal`]).
#[derive(Default)]
pub(crate) struct EndAtHeal {
    releases: Mutex<Vec<Release>>,
}

impl EndAtHeal {
    /// Adds a fault the next heal ends.
    pub(crate) fn add(&self, release: Release) {
        self.releases.lock().unwrap_or_else(|p| p.into_inner()).push(release);
    }

    /// Ends every fault added since the last call ([`Release::now`]); returns how many were
    /// released and how many cancelled.
    pub(crate) fn end_all(&self) -> (usize, usize) {
        let releases = std::mem::take(&mut *self.releases.lock().unwrap_or_else(|p| p.into_inner()));
        let (mut released, mut cancelled) = (0, 0);
        for release in releases {
            match release.now() {
                Ended::Released => released += 1,
                Ended::Cancelled => cancelled += 1,
                Ended::Over => {}
            }
        }
        (released, cancelled)
    }
}
