//! The live record of a run: its [`History`], its trace, and the per-event checks every
//! recorded entry is handed to, with the sink their violations go to (the run's `Ctx::fail`).
//! The driver, the network and the run's `Ctx` record through it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::checks::OnEvent;
use crate::history::History;
use crate::report::Failure;
use crate::trace::TraceBuf;

/// The history and trace of a live run, with its fake clock: what the driver and the run's
/// `Ctx` record into.
pub(crate) struct Recorder {
    history: Mutex<History>,
    trace: Arc<TraceBuf>,
    start: tokio::time::Instant,
    checks: Arc<dyn OnEvent>,
    on_violation: OnceLock<Box<dyn Fn(Failure) + Send + Sync>>,
    /// The run is over: what happens while its runtime is torn down (destructors running in an
    /// order tokio does not fix) is not part of the history.
    closed: AtomicBool,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("start", &self.start).finish_non_exhaustive()
    }
}

impl Recorder {
    pub(crate) fn new(trace: Arc<TraceBuf>, start: tokio::time::Instant, checks: Arc<dyn OnEvent>) -> Recorder {
        Recorder {
            history: Mutex::new(History::new()),
            trace,
            start,
            checks,
            on_violation: OnceLock::new(),
            closed: AtomicBool::new(false),
        }
    }

    /// Ends the history: later records are dropped.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Where per-event violations go (the run's `Ctx::fail`).
    pub(crate) fn on_violation(&self, sink: Box<dyn Fn(Failure) + Send + Sync>) {
        let _ = self.on_violation.set(sink);
    }

    /// Fake time since the run started.
    pub(crate) fn elapsed(&self) -> Duration {
        crate::runtime::elapsed_since(self.start)
    }

    /// The run's start on tokio's clock.
    pub(crate) fn start(&self) -> tokio::time::Instant {
        self.start
    }

    /// Appends an event at `at` and marks its place in the trace; returns its index.
    pub(crate) fn record_at(&self, at: Duration, kind: &str, identity: &str, detail: &str) -> u64 {
        if self.closed.load(Ordering::SeqCst) {
            return u64::MAX;
        }
        // The checks get a copy, made only when some check wants the event: a check may record
        // events itself, so it runs without the history's lock.
        let wanted = !self.checks.is_empty() && self.checks.wants(kind);
        let mut history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        let index = history.record(at, kind, identity, detail);
        let copy = if wanted { history.entry(index) } else { None };
        drop(history);
        self.trace.push_event(index);
        if let Some(entry) = copy
            && let Some(failure) = self.checks.on_event(entry)
            && let Some(sink) = self.on_violation.get()
        {
            sink(failure);
        }
        index
    }

    /// A copy of the history so far.
    pub(crate) fn snapshot(&self) -> History {
        self.history.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The fake time of the last entry recorded (0 if none).
    pub(crate) fn last_at_nanos(&self) -> u64 {
        self.history.lock().unwrap_or_else(|p| p.into_inner()).last_at_nanos()
    }

    /// The history, moved out (the run is judged; what is recorded later starts a new one).
    pub(crate) fn take(&self) -> History {
        std::mem::take(&mut *self.history.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
