//! The driver: the harness's event queue.
//!
//! Everything the harness does to a run at a fake time — deliver bytes on a link, start an
//! operation, inject a fault, send SIGTERM — is an [`Event`] in one queue, run by one harness
//! task. The semantics:
//!
//! - **Due times.** An event is scheduled at a fake time ([`Driver::at`]) or after a delay
//!   ([`Driver::after`]). Each event is moved earlier by a distinct seeded offset below
//!   [`Driver::TIE_SPREAD`] (1 µs; 1 ms in explore mode), never before "now", so events asked for
//!   the same instant run in an order the seed decides, never in an order an implementation detail
//!   decides. (Earlier, not later: tokio's timers fire on 1 ms ticks, and an event pushed past a
//!   tick would fire a whole millisecond late.)
//! - **Ties.** Events whose due times are still equal are sorted canonically (kind, identity,
//!   scheduling order) and then picked one by one by the seed.
//! - **Quiescence.** The driver sleeps on tokio's paused clock until the next due time. Paused
//!   time only auto-advances when every task is idle, so an event fires only once the system has
//!   done everything it could do before it. tokio's clock advances in 1 ms ticks: events due within
//!   one tick fire in one pass, in due order, and between two of them the driver yields so that
//!   the tasks the first one woke run before the second fires.
//! - **History.** Each event is recorded in the run's history (kind, identity, detail) at the fake
//!   time it fires, before its action runs — unless it is [`Event::unrecorded`], for events whose
//!   action records a fuller account itself (network deliveries).
//!
//! The queue holds at most [`Driver::PENDING_MAX`] events; scheduling more is a runaway schedule
//! and panics (class *panic*) naming the bound.
//!
//! The driver also keeps the run's harness knobs, because every fault and operation start passes
//! through it: it numbers each scheduled fault ([`crate::fault::at`], 1-based in scheduling order)
//! and says whether `SIM_DROP_FAULTS` drops it, and it caps each workload's operation starts at
//! `SIM_MAX_OPS` and counts them (both reported in the run's [`crate::Outcome`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::recorder::Recorder;
use crate::report::FaultRecord;
use crate::seed::Source;

/// The identity of a scheduled event, for [`Driver::cancel`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(u64);

type Action = Box<dyn FnOnce() + Send>;

/// A harness event: a kind, an identity, an optional detail and the action to run when due.
pub struct Event {
    kind: Cow<'static, str>,
    /// Shared, so a connection's label is not copied for each of its deliveries.
    identity: Arc<str>,
    detail: String,
    action: Option<Action>,
    recorded: bool,
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("kind", &self.kind)
            .field("identity", &self.identity)
            .field("detail", &self.detail)
            .finish()
    }
}

impl Event {
    /// An event of `kind` (e.g. `"net.deliver"`, `"fault.partition"`) concerning `identity` (a
    /// node, a connection, an operation id). Without an action it only marks the history.
    pub fn new(kind: impl Into<Cow<'static, str>>, identity: impl Into<Arc<str>>) -> Event {
        Event { kind: kind.into(), identity: identity.into(), detail: String::new(), action: None, recorded: true }
    }

    /// Leaves the event out of the history: its action records what happened itself.
    pub fn unrecorded(mut self) -> Event {
        self.recorded = false;
        self
    }

    /// Adds a detail recorded with the event.
    pub fn detail(mut self, detail: impl Into<String>) -> Event {
        self.detail = detail.into();
        self
    }

    /// Sets what runs when the event is due (on the run's thread, inside the runtime: it may
    /// spawn tasks and wake wakers, and must not block).
    pub fn action(mut self, action: impl FnOnce() + Send + 'static) -> Event {
        self.action = Some(Box::new(action));
        self
    }
}

/// The driver loop's wait for a new head ([`Driver::new_head`]). Dropped unfinished (the loop's
/// timer fired first), it stops waiting, as a dropped `Notified` leaves `Notify`'s waiter list:
/// a later new head then sets the flag without waking the loop.
struct NewHead<'a> {
    driver: &'a Driver,
}

impl std::future::Future for NewHead<'_> {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let mut queue = self.driver.queue();
        if std::mem::take(&mut queue.head_changed) {
            queue.waiter = None;
            return std::task::Poll::Ready(());
        }
        match &mut queue.waiter {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        std::task::Poll::Pending
    }
}

impl Drop for NewHead<'_> {
    fn drop(&mut self) {
        self.driver.queue().waiter = None;
    }
}

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Key {
    due_nanos: u64,
    seq: u64,
}

struct Queue {
    pending: BTreeSet<Key>,
    events: BTreeMap<u64, Event>,
    next_seq: u64,
    ties: Source,
    tie_spread_nanos: u64,
    fired: u64,
    /// The run is over: new events are dropped.
    closed: bool,
    /// The driver loop, while it waits for a new head (woken by [`Driver::at`]).
    waiter: Option<std::task::Waker>,
    /// A new head arrived while the loop was not waiting: its next wait returns at once.
    head_changed: bool,
}

struct Inner {
    queue: Mutex<Queue>,
    recorder: Arc<Recorder>,
    explore: bool,
    knobs: Mutex<Knobs>,
}

/// The run's fault numbering and operation cap (see the module docs).
#[derive(Default)]
struct Knobs {
    /// Fault numbers (1-based) whose install and release do nothing.
    drop_faults: BTreeSet<usize>,
    /// Every scheduled fault so far, in scheduling order.
    faults: Vec<FaultRecord>,
    /// The most operations one workload run starts.
    max_ops: Option<u64>,
    /// Operations started by the run's workloads so far.
    operations: u64,
}

/// A handle to the run's event queue. Cheap to clone; get the run's own with
/// [`crate::Ctx::driver`].
#[derive(Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver").field("pending", &self.pending()).finish()
    }
}

impl Driver {
    /// Events the queue holds at most.
    pub const PENDING_MAX: usize = 1 << 20;
    /// The bound of the seeded extra delay given to every event in replay mode.
    pub const TIE_SPREAD: Duration = Duration::from_micros(1);
    /// The bound of the seeded extra delay in explore mode (spans a tokio timer tick, so events
    /// also move relative to the nodes' own timers).
    pub const TIE_SPREAD_EXPLORE: Duration = Duration::from_millis(1);

    pub(crate) fn new(recorder: Arc<Recorder>, ties: Source, explore: bool) -> Driver {
        let spread = if explore { Self::TIE_SPREAD_EXPLORE } else { Self::TIE_SPREAD };
        Driver {
            inner: Arc::new(Inner {
                queue: Mutex::new(Queue {
                    pending: BTreeSet::new(),
                    events: BTreeMap::new(),
                    next_seq: 0,
                    ties,
                    tie_spread_nanos: spread.as_nanos() as u64,
                    fired: 0,
                    closed: false,
                    waiter: None,
                    head_changed: false,
                }),
                recorder,
                explore,
                knobs: Mutex::default(),
            }),
        }
    }

    fn knobs(&self) -> std::sync::MutexGuard<'_, Knobs> {
        self.inner.knobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the run's knobs: the fault numbers to drop and the operation cap per workload run.
    pub(crate) fn set_knobs(&self, drop_faults: BTreeSet<usize>, max_ops: Option<u64>) {
        let mut knobs = self.knobs();
        knobs.drop_faults = drop_faults;
        knobs.max_ops = max_ops;
    }

    /// Numbers a fault scheduled at fake time `at` as `label` (1-based, in scheduling order);
    /// returns its number and whether it is dropped.
    pub(crate) fn number_fault(&self, label: &str, at: Duration) -> (usize, bool) {
        let mut knobs = self.knobs();
        let number = knobs.faults.len() + 1;
        let dropped = knobs.drop_faults.contains(&number);
        let at_nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        knobs.faults.push(FaultRecord { number, label: label.to_string(), at_nanos, dropped });
        (number, dropped)
    }

    /// Every fault scheduled so far ([`crate::fault::at`]), in scheduling order.
    pub(crate) fn faults(&self) -> Vec<FaultRecord> {
        self.knobs().faults.clone()
    }

    /// How many of `wanted` operations a workload run starts (at most the run's cap), counted.
    pub(crate) fn start_operations(&self, wanted: u64) -> u64 {
        let mut knobs = self.knobs();
        let started = knobs.max_ops.map_or(wanted, |max| wanted.min(max));
        knobs.operations = knobs.operations.saturating_add(started);
        started
    }

    /// Operations the run's workloads started so far.
    pub(crate) fn operations(&self) -> u64 {
        self.knobs().operations
    }

    /// The run's recorder (for events that record what they did themselves).
    pub(crate) fn recorder(&self) -> Arc<Recorder> {
        Arc::clone(&self.inner.recorder)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.inner.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fake time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.inner.recorder.elapsed()
    }

    /// Schedules `event` at fake time `at` since the run started (a time already past means
    /// "now"), plus its seeded extra delay.
    ///
    /// # Panics
    /// If the queue already holds [`Driver::PENDING_MAX`] events.
    pub fn at(&self, at: Duration, event: Event) -> EventId {
        let now = self.elapsed();
        let at = at.max(now);
        let mut queue = self.queue();
        if queue.closed {
            drop(queue);
            drop(event);
            return EventId(u64::MAX);
        }
        assert!(
            queue.pending.len() < Self::PENDING_MAX,
            "driver queue is full (Driver::PENDING_MAX = {} events): a runaway schedule",
            Self::PENDING_MAX
        );
        let spread = queue.tie_spread_nanos;
        let extra = queue.ties.below(spread.max(1));
        let now_nanos = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
        let due_nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX).saturating_sub(extra).max(now_nanos);
        let seq = queue.next_seq;
        queue.next_seq += 1;
        let key = Key { due_nanos, seq };
        let is_head = queue.pending.first().is_none_or(|head| key < *head);
        queue.pending.insert(key);
        queue.events.insert(seq, event);
        let waiter = if is_head {
            queue.head_changed = true;
            queue.waiter.take()
        } else {
            None
        };
        drop(queue);
        if let Some(waiter) = waiter {
            waiter.wake();
        }
        EventId(seq)
    }

    /// Schedules `event` after `delay` of fake time (see [`Driver::at`]).
    pub fn after(&self, delay: Duration, event: Event) -> EventId {
        self.at(self.elapsed().saturating_add(delay), event)
    }

    /// Removes a pending event. Returns whether it was still pending.
    pub fn cancel(&self, id: EventId) -> bool {
        let mut queue = self.queue();
        match queue.events.remove(&id.0) {
            Some(_) => {
                queue.pending.retain(|k| k.seq != id.0);
                true
            }
            None => false,
        }
    }

    /// Drops every pending event (the run is over).
    pub(crate) fn clear(&self) {
        let events = {
            let mut queue = self.queue();
            queue.closed = true;
            queue.pending.clear();
            std::mem::take(&mut queue.events)
        };
        // Dropped outside the lock: an event's action may own a control guard whose release
        // schedules events (refused now that the queue is closed).
        drop(events);
    }

    /// Events waiting to fire.
    pub fn pending(&self) -> usize {
        self.queue().pending.len()
    }

    /// Events fired so far.
    pub fn fired(&self) -> u64 {
        self.queue().fired
    }

    /// The due time of the next event, if any.
    pub fn next_due(&self) -> Option<Duration> {
        self.queue().pending.first().map(|k| Duration::from_nanos(k.due_nanos))
    }

    /// Takes the next event due at or before `now_nanos`: the earliest due time; among events due
    /// at exactly that time, sorted canonically (kind, identity, scheduling order), one picked by
    /// the seed. One at a time, so an event's action can still cancel the next.
    fn take_next(&self, now_nanos: u64) -> Option<Event> {
        let mut queue = self.queue();
        let first = *queue.pending.first()?;
        if first.due_nanos > now_nanos {
            return None;
        }
        let tied = queue.pending.iter().nth(1).is_some_and(|k| k.due_nanos == first.due_nanos);
        let key = if !tied {
            first
        } else {
            let mut ties: Vec<Key> =
                queue.pending.iter().take_while(|k| k.due_nanos == first.due_nanos).copied().collect();
            ties.sort_by(|a, b| {
                let (ea, eb) = (&queue.events[&a.seq], &queue.events[&b.seq]);
                (&ea.kind, &ea.identity, a.seq).cmp(&(&eb.kind, &eb.identity, b.seq))
            });
            let pick = queue.ties.below(ties.len() as u64) as usize;
            ties[pick]
        };
        queue.pending.remove(&key);
        queue.fired += 1;
        queue.events.remove(&key.seq)
    }

    /// Waits until [`Driver::at`] schedules a new head (at once if one came since the last wait).
    /// A one-slot waiter, as `tokio::sync::Notify::notify_one` with its permit, without its
    /// waiter list: the wake is the same (the loop's waker, woken after the queue's lock is
    /// released), so the schedule is too.
    fn new_head(&self) -> NewHead<'_> {
        NewHead { driver: self }
    }

    /// The driver loop: runs as a harness task for the whole run.
    pub(crate) async fn run(self) {
        let start = self.inner.recorder.start();
        loop {
            let notified = self.new_head();
            match self.next_due() {
                None => notified.await,
                Some(due) => {
                    let deadline = start + due;
                    if deadline > tokio::time::Instant::now() {
                        tokio::select! {
                            biased;
                            () = notified => continue,
                            () = tokio::time::sleep_until(deadline) => {}
                        }
                    }
                }
            }
            let mut now = self.elapsed();
            let now_nanos = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
            while let Some(event) = self.take_next(now_nanos) {
                if event.recorded {
                    self.inner.recorder.record_at(now, &event.kind, &event.identity, &event.detail);
                }
                if let Some(action) = event.action {
                    action();
                }
                let more = self.next_due().is_some_and(|d| d.as_nanos() as u64 <= now_nanos);
                if more || (self.inner.explore && self.queue().ties.ratio(1, 4)) {
                    // Let what this event woke run before the next one (tokio defers a yielding
                    // task until every task that was ready has run and the drivers were polled).
                    tokio::task::yield_now().await;
                    now = self.elapsed();
                }
            }
        }
    }
}
