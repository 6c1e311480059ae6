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
//! - **Quiescence.** The driver keeps one tokio timer armed for the next due time. Paused time
//!   only auto-advances when every task is idle, so an event fires only once the system has done
//!   everything it could do before it. tokio's clock advances in 1 ms ticks: events due within one
//!   tick fire in due order, and between two of them the tasks the first one woke run before the
//!   second fires.
//! - **Where an event runs.** When the timer fires and no task is waiting to run, the first event
//!   due runs right there, where tokio's timer wheel wakes what waited for that instant (no task
//!   is polled for it: a delivered segment costs one timer and the poll of the task it wakes, as a
//!   timer of the application's own would). Otherwise — tasks were woken before it at this
//!   instant — and for every later event due at the same instant, and any event scheduled for
//!   "now", the event runs on the driver's own harness task, one per turn of the scheduler, so the
//!   tasks queued before it, and those each event woke, run first. An action that panics is
//!   re-raised on that task (class *panic*).
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

use std::any::Any;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::recorder::Recorder;
use crate::report::FaultRecord;
use crate::seed::Source;

/// The identity of a scheduled event, for [`Driver::cancel`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(Key);

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

/// The driver task's wait for an event due now ([`Driver::due_now`]): ready when the queue's head
/// is due at or before the current fake time, or when an action fired by the timer panicked (the
/// task re-raises it). Dropped unfinished, it stops waiting.
struct DueNow<'a> {
    driver: &'a Driver,
}

impl Future for DueNow<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now_nanos = nanos(self.driver.elapsed());
        let mut queue = self.driver.queue();
        let due = queue.events.first_key_value().is_some_and(|(head, _)| head.due_nanos <= now_nanos);
        if (due && !queue.closed) || queue.panic.is_some() {
            queue.task = None;
            return Poll::Ready(());
        }
        match &mut queue.task {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        drop(queue);
        // The head may have changed since the timer was last armed (an event that was due was
        // cancelled): arm it for the head there is now.
        self.driver.arm();
        Poll::Pending
    }
}

impl Drop for DueNow<'_> {
    fn drop(&mut self) {
        self.driver.queue().task = None;
    }
}

/// The driver's timer: one tokio `Sleep`, re-armed for each new head, whose waker is the driver
/// itself ([`TimerWaker`]), not a task.
struct Timer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// The deadline it is registered for, while it has not fired.
    armed: Option<tokio::time::Instant>,
    waker: Waker,
    /// The run's runtime, to ask whether tasks are ready to run.
    metrics: tokio::runtime::RuntimeMetrics,
}

/// The waker of the driver's timer: fires the events due when tokio's timer wheel reaches the
/// armed instant ([`Driver::on_timer`]). Holds the driver weakly (the timer is the driver's).
struct TimerWaker {
    driver: Weak<Inner>,
}

impl Wake for TimerWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(inner) = self.driver.upgrade() {
            crate::runtime::clock_still(|| Driver { inner }.on_timer());
        }
    }
}

/// Marks the driver busy (see [`Inner::busy`]) until dropped, also when an action panics.
struct Busy<'a>(&'a AtomicBool, bool);

impl<'a> Busy<'a> {
    fn mark(flag: &'a AtomicBool) -> Busy<'a> {
        let was = flag.swap(true, Ordering::Relaxed);
        Busy(flag, was)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        // Nested marks (an action scheduling an event arms the timer) leave it busy.
        self.0.store(self.1, Ordering::Relaxed);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
struct Key {
    due_nanos: u64,
    seq: u64,
}

struct Queue {
    /// The pending events, in due order (ties in scheduling order).
    events: BTreeMap<Key, Event>,
    next_seq: u64,
    ties: Source,
    tie_spread_nanos: u64,
    fired: u64,
    /// The fake time of the last event fired, in nanoseconds.
    last_fired_nanos: Option<u64>,
    /// The run is over: new events are dropped.
    closed: bool,
    /// The driver task, while it waits for an event due now.
    task: Option<Waker>,
    /// The panic of an action the timer fired, for the driver task to re-raise.
    panic: Option<Box<dyn Any + Send>>,
}

struct Inner {
    queue: Mutex<Queue>,
    /// Made by the driver task when it starts (a tokio timer needs the runtime).
    timer: Mutex<Option<Timer>>,
    /// The driver is running an action or arming its timer: a firing of the timer now (a reset
    /// to an instant already past fires at once) is left to the driver task.
    busy: AtomicBool,
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
                    events: BTreeMap::new(),
                    next_seq: 0,
                    ties,
                    tie_spread_nanos: spread.as_nanos() as u64,
                    fired: 0,
                    last_fired_nanos: None,
                    closed: false,
                    task: None,
                    panic: None,
                }),
                timer: Mutex::new(None),
                busy: AtomicBool::new(false),
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
            return EventId(Key { due_nanos: u64::MAX, seq: u64::MAX });
        }
        assert!(
            queue.events.len() < Self::PENDING_MAX,
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
        let is_head = queue.events.first_key_value().is_none_or(|(head, _)| key < *head);
        queue.events.insert(key, event);
        drop(queue);
        if is_head {
            self.arm_for(Some(Duration::from_nanos(due_nanos)));
        }
        EventId(key)
    }

    /// Schedules `event` after `delay` of fake time (see [`Driver::at`]).
    pub fn after(&self, delay: Duration, event: Event) -> EventId {
        self.at(self.elapsed().saturating_add(delay), event)
    }

    /// Removes a pending event. Returns whether it was still pending.
    pub fn cancel(&self, id: EventId) -> bool {
        self.queue().events.remove(&id.0).is_some()
    }

    /// Drops every pending event and the timer (the run is over).
    pub(crate) fn clear(&self) {
        let events = {
            let mut queue = self.queue();
            queue.closed = true;
            std::mem::take(&mut queue.events)
        };
        // Dropped outside the lock: an event's action may own a control guard whose release
        // schedules events (refused now that the queue is closed).
        drop(events);
        let timer = self.timer().take();
        drop(timer);
    }

    fn timer(&self) -> std::sync::MutexGuard<'_, Option<Timer>> {
        self.inner.timer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Events waiting to fire.
    pub fn pending(&self) -> usize {
        self.queue().events.len()
    }

    /// Events fired so far.
    pub fn fired(&self) -> u64 {
        self.queue().fired
    }

    /// The due time of the next event, if any.
    pub fn next_due(&self) -> Option<Duration> {
        self.queue().events.first_key_value().map(|(k, _)| Duration::from_nanos(k.due_nanos))
    }

    /// The fake time the last event fired at, if one has.
    pub(crate) fn last_fired(&self) -> Option<Duration> {
        self.queue().last_fired_nanos.map(Duration::from_nanos)
    }

    /// Takes the next event due at or before `now_nanos`: the earliest due time; among events due
    /// at exactly that time, sorted canonically (kind, identity, scheduling order), one picked by
    /// the seed. One at a time, so an event's action can still cancel the next.
    fn take_next(&self, now_nanos: u64) -> Option<Event> {
        let mut queue = self.queue();
        let mut keys = queue.events.keys();
        let first = *keys.next()?;
        if first.due_nanos > now_nanos {
            return None;
        }
        let tied = keys.next().is_some_and(|k| k.due_nanos == first.due_nanos);
        if !tied {
            queue.fired += 1;
            queue.last_fired_nanos = Some(now_nanos);
            return queue.events.pop_first().map(|(_, event)| event);
        }
        let key = {
            let mut ties: Vec<(&Key, &Event)> =
                queue.events.iter().take_while(|(k, _)| k.due_nanos == first.due_nanos).collect();
            ties.sort_by(|(a, ea), (b, eb)| (&ea.kind, &ea.identity, a.seq).cmp(&(&eb.kind, &eb.identity, b.seq)));
            let ties: Vec<Key> = ties.into_iter().map(|(k, _)| *k).collect();
            let pick = queue.ties.below(ties.len() as u64) as usize;
            ties[pick]
        };
        queue.fired += 1;
        queue.last_fired_nanos = Some(now_nanos);
        queue.events.remove(&key)
    }

    /// Records an event (unless it records itself) and runs its action, at fake time `now`.
    fn fire(&self, now: Duration, event: Event) {
        if event.recorded {
            self.inner.recorder.record_at(now, &event.kind, &event.identity, &event.detail);
        }
        if let Some(action) = event.action {
            action();
        }
    }

    /// Whether the next event is due at or before `now_nanos`; if not, whether explore mode
    /// draws a turn of the scheduler anyway (what woke may run before the timer is re-armed).
    fn again(&self, now_nanos: u64) -> bool {
        let mut queue = self.queue();
        let more = queue.events.first_key_value().is_some_and(|(k, _)| k.due_nanos <= now_nanos);
        more || (self.inner.explore && queue.ties.ratio(1, 4))
    }

    /// Wakes the driver task to fire what is due now (or re-raise a panic).
    fn wake_task(&self) {
        let task = self.queue().task.take();
        if let Some(task) = task {
            task.wake();
        }
    }

    /// Arms the timer for the queue's head: registers the head's instant with tokio's timer
    /// wheel (the timer's waker is [`TimerWaker`]), or, when the head is due already (or the
    /// timer is not made yet), wakes the driver task.
    fn arm(&self) {
        self.arm_for(self.next_due());
    }

    /// [`Driver::arm`] for a head due at `due` (the caller knows it).
    fn arm_for(&self, due: Option<Duration>) {
        let Some(due) = due else { return };
        let deadline = self.inner.recorder.start() + due;
        if deadline <= crate::runtime::now() {
            self.wake_task();
            return;
        }
        let mut timer = self.timer();
        let Some(t) = timer.as_mut() else {
            drop(timer);
            self.wake_task();
            return;
        };
        if t.armed == Some(deadline) {
            return;
        }
        let busy = Busy::mark(&self.inner.busy);
        t.sleep.as_mut().reset(deadline);
        let mut cx = Context::from_waker(&t.waker);
        // Unconstrained: polling the timer must not spend the budget of the task that scheduled
        // the event (tokio's cooperative scheduling would then make that task yield).
        let polled = Pin::new(&mut tokio::task::unconstrained(t.sleep.as_mut())).poll(&mut cx);
        t.armed = polled.is_pending().then_some(deadline);
        drop(timer);
        drop(busy);
        if polled.is_ready() {
            self.wake_task();
        }
    }

    /// The timer fired (see the module docs): runs the first event due, where tokio woke the
    /// timer; leaves any other event due now to the driver task; re-arms for the next head.
    fn on_timer(&self) {
        if self.inner.busy.load(Ordering::Relaxed) {
            // Fired by our own reset (an instant already past), or while an action runs.
            self.wake_task();
            return;
        }
        let ready = match self.timer().as_mut() {
            Some(t) => {
                t.armed = None;
                // Tasks queued already (woken at this instant by timers the wheel fired before
                // this one, or earlier) run before the event, as they would before a task of ours.
                t.metrics.worker_local_queue_depth(0) + t.metrics.global_queue_depth() > 0
            }
            None => false,
        };
        if ready {
            self.wake_task();
            return;
        }
        let now = self.elapsed();
        let now_nanos = nanos(now);
        let event = {
            let queue = self.queue();
            if queue.closed || queue.panic.is_some() {
                return;
            }
            drop(queue);
            self.take_next(now_nanos)
        };
        if let Some(event) = event {
            let busy = Busy::mark(&self.inner.busy);
            let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.fire(now, event)));
            drop(busy);
            if let Err(panic) = fired {
                self.queue().panic = Some(panic);
                self.wake_task();
                return;
            }
        }
        if self.again(now_nanos) {
            self.wake_task();
        }
        self.arm();
    }

    /// Waits until an event is due now (see [`DueNow`]).
    fn due_now(&self) -> DueNow<'_> {
        DueNow { driver: self }
    }

    /// The driver task: runs as a harness task for the whole run. It makes the timer, then fires
    /// the events due now that the timer leaves to it, one per turn of the scheduler.
    pub(crate) async fn run(self) {
        {
            let waker = Waker::from(Arc::new(TimerWaker { driver: Arc::downgrade(&self.inner) }));
            let sleep = Box::pin(tokio::time::sleep_until(self.inner.recorder.start()));
            let metrics = tokio::runtime::Handle::current().metrics();
            *self.timer() = Some(Timer { sleep, armed: None, waker, metrics });
        }
        self.arm();
        loop {
            self.due_now().await;
            if let Some(panic) = self.queue().panic.take() {
                std::panic::resume_unwind(panic);
            }
            let mut now = self.elapsed();
            while let Some(event) = self.take_next(nanos(now)) {
                let busy = Busy::mark(&self.inner.busy);
                self.fire(now, event);
                drop(busy);
                if self.again(nanos(now)) {
                    // Let what this event woke run before the next one (tokio defers a yielding
                    // task until every task that was ready has run and the drivers were polled).
                    tokio::task::yield_now().await;
                    now = self.elapsed();
                }
            }
            self.arm();
        }
    }
}
