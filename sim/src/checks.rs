//! The registry of a run's checks: [`Verdict`], and the dispatch of history events and of the
//! end of the run to every installed check (the oracles themselves, and the public `Check` trait,
//! are in [`crate::check`], above the run: a check's `finish` gets the run's `Ctx`).
//!
//! [`Checks`] is generic over what `finish` is handed (`X`, the run's `Ctx`), so this layer sits
//! below the recorder and the run that own it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::history::Entry;
use crate::report::Failure;

/// A check's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing wrong.
    Pass,
    /// The guarantee was violated: fails the run.
    Violation(String),
    /// A violation excused by a broken precondition or a dependency's own fault: reported, does
    /// not fail the sweep.
    Excused(String),
}

/// What the registry calls on a check: the public `Check` trait is blanket-implemented as an
/// `Observer<Ctx>` (see [`crate::check`]).
pub(crate) trait Observer<X: ?Sized>: Send {
    /// The oracle's name, as failures report it.
    fn name(&self) -> &str;
    /// Called for every history event (of the kinds it wants).
    fn on_event(&mut self, event: &Entry) -> Verdict;
    /// Whether `on_event` is to see events of this kind.
    fn wants(&self, kind: &str) -> bool;
    /// Called once when the run's body returned `Ok`.
    fn finish(&mut self, ctx: &X) -> Verdict;
}

/// Where the recorder hands each recorded entry: the run's checks.
pub(crate) trait OnEvent: Send + Sync {
    /// Runs the checks on `event`; returns the first violation.
    fn on_event(&self, event: Entry) -> Option<Failure>;
    /// Whether no check is installed (the recorder then skips the dispatch and its copy of the
    /// entry).
    fn is_empty(&self) -> bool;
    /// Whether some check wants events of this kind, or a dispatch is under way (an event
    /// recorded from inside a check goes to every check): else the recorder skips the event.
    fn wants(&self, kind: &str) -> bool;
}

impl<X: ?Sized> OnEvent for Checks<X> {
    fn on_event(&self, event: Entry) -> Option<Failure> {
        self.dispatch(event)
    }

    fn is_empty(&self) -> bool {
        self.installed.load(Ordering::Acquire) == 0
    }

    fn wants(&self, kind: &str) -> bool {
        if self.dispatch.lock().unwrap_or_else(|p| p.into_inner()).busy {
            return true;
        }
        self.list().iter().any(|check| check.wants(kind))
    }
}

impl<X: ?Sized> Default for Checks<X> {
    fn default() -> Self {
        Checks {
            list: Mutex::new(Vec::new()),
            added: Mutex::new(Vec::new()),
            dispatch: Mutex::new(Dispatch::default()),
            excused: Mutex::new(Vec::new()),
            installed: AtomicUsize::new(0),
        }
    }
}

/// The checks of one run and where their verdicts go.
pub(crate) struct Checks<X: ?Sized> {
    list: Mutex<Vec<Box<dyn Observer<X>>>>,
    /// Checks installed while the list was in use: moved in at the next dispatch.
    added: Mutex<Vec<Box<dyn Observer<X>>>>,
    dispatch: Mutex<Dispatch>,
    excused: Mutex<Vec<Failure>>,
    /// Checks added since the last `clear`.
    installed: AtomicUsize,
}

/// Events waiting for the checks, and whether a dispatch is under way.
#[derive(Default)]
struct Dispatch {
    queue: std::collections::VecDeque<Entry>,
    busy: bool,
}

impl Dispatch {
    /// Events queued at most: checks recording events for each other's events without end.
    const QUEUE_MAX: usize = 1 << 16;
}

impl<X: ?Sized> Checks<X> {
    pub(crate) fn add(&self, check: Box<dyn Observer<X>>) {
        self.added.lock().unwrap_or_else(|p| p.into_inner()).push(check);
        self.installed.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops every check and queued event, at the end of a judged run: a check may hold the
    /// run's `Ctx`, which holds these checks.
    pub(crate) fn clear(&self) {
        let list = std::mem::take(&mut *self.list.lock().unwrap_or_else(|p| p.into_inner()));
        let added = std::mem::take(&mut *self.added.lock().unwrap_or_else(|p| p.into_inner()));
        self.dispatch.lock().unwrap_or_else(|p| p.into_inner()).queue.clear();
        self.installed.store(0, Ordering::Release);
        drop((list, added));
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Box<dyn Observer<X>>>> {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.append(&mut self.added.lock().unwrap_or_else(|p| p.into_inner()));
        list
    }

    fn note(&self, name: &str, verdict: Verdict, violation: &mut Option<Failure>) {
        match verdict {
            Verdict::Pass => {}
            Verdict::Violation(m) => {
                violation.get_or_insert(Failure::correctness(name, m));
            }
            Verdict::Excused(m) => {
                self.excused.lock().unwrap_or_else(|p| p.into_inner()).push(Failure::excused(name, m))
            }
        }
    }

    /// Marks a dispatch as under way; `false` if one already is (the event waits in the queue).
    fn begin(&self, event: Option<Entry>) -> bool {
        let mut dispatch = self.dispatch.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(event) = event {
            assert!(
                dispatch.queue.len() < Dispatch::QUEUE_MAX,
                "checks recorded {} events from inside their own callbacks without the queue draining \
                 (Dispatch::QUEUE_MAX): checks recording events for each other's events without end",
                Dispatch::QUEUE_MAX
            );
            dispatch.queue.push_back(event);
        }
        !std::mem::replace(&mut dispatch.busy, true)
    }

    /// Delivers the queued events to every check until none is left; ends the dispatch.
    fn drain(&self, violation: &mut Option<Failure>) {
        loop {
            let next = {
                let mut dispatch = self.dispatch.lock().unwrap_or_else(|p| p.into_inner());
                let next = dispatch.queue.pop_front();
                if next.is_none() {
                    dispatch.busy = false;
                }
                next
            };
            let Some(event) = next else { return };
            let mut list = self.list();
            for check in list.iter_mut() {
                let verdict = check.on_event(&event);
                self.note(check.name(), verdict, violation);
            }
        }
    }

    /// Runs every check on one event (and on the events checks record meanwhile); returns the
    /// first violation. Called again from inside a check, it only queues the event.
    fn dispatch(&self, event: Entry) -> Option<Failure> {
        if !self.begin(Some(event)) {
            return None;
        }
        let mut violation = None;
        self.drain(&mut violation);
        violation
    }

    /// Runs every final check, and delivers the events they record; returns the first violation.
    pub(crate) fn finish(&self, ctx: &X) -> Option<Failure> {
        let mut violation = None;
        let mut index = 0;
        loop {
            let began = self.begin(None);
            let verdict = {
                let mut list = self.list();
                let Some(check) = list.get_mut(index) else {
                    drop(list);
                    if began {
                        self.drain(&mut violation);
                    }
                    return violation;
                };
                let verdict = check.finish(ctx);
                (check.name().to_string(), verdict)
            };
            self.note(&verdict.0, verdict.1, &mut violation);
            if began {
                self.drain(&mut violation);
            }
            index += 1;
        }
    }

    /// The first excused violation, if any.
    pub(crate) fn excused(&self) -> Option<Failure> {
        self.excused.lock().unwrap_or_else(|p| p.into_inner()).first().cloned()
    }
}
