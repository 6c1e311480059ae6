//! The runtime of one run: a fresh OS thread, a tokio `current_thread` runtime with paused time,
//! and every source of nondeterminism on that thread answered from the seed.
//!
//! What is made deterministic on the run's thread, and how:
//!
//! | source | how |
//! |---|---|
//! | tokio's scheduler RNG (`select!` branch order, `JoinSet`) | `Builder::rng_seed` from the seed (needs `--cfg tokio_unstable`) |
//! | task interleaving and timers | `current_thread` runtime, paused clock auto-advancing only when every task is idle |
//! | std `HashMap` iteration (`RandomState` keys) | keys come from `getrandom` once per thread: a fresh thread per run, answered from the seed |
//! | `getrandom`/`getentropy` (rand, uuid, rustls' RNG, ahash) | [`interpose`]: answered from the run's ChaCha8 stream |
//! | `std::time::Instant`, `SystemTime`, `clock_gettime`, `gettimeofday`, `time` | [`interpose`]: a seeded base plus tokio's paused clock |
//! | hyper's timers | give every hyper builder `hyper_util::rt::TokioTimer` (hyper's default reads std `Instant`, which is covered now, but sleeps in real time) |
//! | h2's reset-stream expiry (reads std `Instant`) | covered by the `clock_gettime` interposition |
//! | `fastrand`'s thread-local generator (backon's jitter forks it) | seeded at the start of the run from `seed.child("fastrand")` (`run::once`) |
//!
//! Not covered, and labelled by the self-check as "replays k of n" rather than hidden: OS
//! threads (`std::thread::spawn`, `spawn_blocking`, librdkafka's threads), real sockets and
//! files, a `getrandom` system call made with an inline `syscall` instruction (the one made
//! through libc's `syscall(3)`, as `getrandom` 0.2 makes it, is interposed), `/dev/urandom`, and
//! a second tokio runtime made by user code.
//!
//! The runtime also observes every task poll (tokio's `on_before_task_poll` hook): it keeps a
//! *schedule hash* over the sequence of polled tasks (numbered in spawn order), counts polls for
//! the deadlock horizon, and knows where each live task was spawned for the deadlock report.
//!
//! **Owners and zombies.** Every task inherits, at spawn, the [`Owner`] (a node incarnation) of
//! the task that spawned it; [`spawn_detached`] spawns a task that belongs to no node. When an
//! owner dies, the poll hooks count its tasks' later polls as *zombie polls*, except for the
//! *drop cascade* that ending an incarnation causes: polls at the instant of the death (fake
//! time does not advance while tasks are runnable, so the cascade happens within it) of a task
//! that ends within that instant — tokio's cancellation of a task someone aborted (the harness,
//! or a `JoinSet` being dropped), or a task that wakes to find its channels closed and returns,
//! perhaps after a poll or two that saw only some of its peers gone — are not counted, and a task
//! spawned during such a poll (by a destructor) belongs to no node. A task still alive when fake
//! time moves on (or when the run ends) counts each of its polls at the instant of the death as a
//! zombie poll, and any poll after that instant is one. What this misses: a task woken at the
//! very instant of the death that does a side effect and returns within it.

pub mod interpose;

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::panic::Location;
use std::sync::{Arc, Mutex};

use xxhash_rust::xxh3::xxh3_64;

use crate::seed::Seed;

/// One live task: its spawn-order number, where it was spawned, and the node that owns it.
#[derive(Clone, Debug)]
pub struct TaskInfo {
    /// Spawn order within the run (the run's root future is 0).
    pub ordinal: u64,
    /// Where `tokio::spawn` (or a library's spawn) was called.
    pub spawned_at: &'static Location<'static>,
    /// The owner (a node incarnation) it inherited from the task that spawned it, if any.
    pub owner: Option<Owner>,
}

/// A node incarnation that owns tasks: every task spawned by one of its tasks is its too,
/// whoever spawned it (the node's code, hyper, tower…).
pub type Owner = u32;

/// A run's progress, readable from the watchdog's thread while the run goes on.
#[derive(Clone, Default, Debug)]
pub(crate) struct Progress {
    polls: Arc<std::sync::atomic::AtomicU64>,
    fake_nanos: Arc<std::sync::atomic::AtomicU64>,
}

impl Progress {
    /// Task polls so far.
    pub(crate) fn polls(&self) -> u64 {
        self.polls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Fake time at the last poll.
    pub(crate) fn fake_elapsed(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.fake_nanos.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// A hash of tokio task ids (a counter: a multiply spreads it), for the task table.
#[derive(Clone, Copy, Default)]
struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;

    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Default for TaskState {
    fn default() -> TaskState {
        // The two std `RandomState`s the table's maps were made with (see `live`): made and
        // dropped, so the keys of every later map on this thread are what they were.
        let _live_keys = std::collections::hash_map::RandomState::new();
        let _aborted_keys = std::collections::hash_map::RandomState::new();
        TaskState {
            live: HashMap::default(),
            next_ordinal: 0,
            schedule_hash: 0,
            polls: 0,
            last_active: None,
            watcher: None,
            harness: Vec::new(),
            start: None,
            progress: Progress::default(),
            dead: Default::default(),
            zombie_polls: Default::default(),
            zombie_sites: Default::default(),
            aborted: HashSet::default(),
            cascade: None,
            suspects: Vec::new(),
            next_owner: 0,
        }
    }
}

struct TaskState {
    // Keyed by a cheap hash of the task id (looked up on every poll), but made with a std
    // `RandomState` each, as before ([`TaskState::default`]): each one made on the run's thread
    // moves the keys of every later std map (keys come from the seed once per thread, then
    // count up), so skipping them would move the iteration order of the application's own maps.
    live: HashMap<tokio::task::Id, TaskInfo, IdHash>,
    next_ordinal: u64,
    schedule_hash: u64,
    polls: u64,
    /// When a task other than the deadlock watcher was last polled (tokio's clock).
    last_active: Option<tokio::time::Instant>,
    watcher: Option<tokio::task::Id>,
    harness: Vec<tokio::task::Id>,
    start: Option<tokio::time::Instant>,
    progress: Progress,
    /// Owners whose incarnation ended, with the instant it ended: their tasks' polls are counted.
    dead: std::collections::BTreeMap<Owner, tokio::time::Instant>,
    /// Polls of tasks whose owner had ended, by owner.
    zombie_polls: std::collections::BTreeMap<Owner, u64>,
    /// Where the first such task of each owner was spawned.
    zombie_sites: std::collections::BTreeMap<Owner, &'static Location<'static>>,
    /// Tasks aborted by the harness: their last "poll" is their cancellation, not a run.
    aborted: HashSet<tokio::task::Id, IdHash>,
    /// The poll in progress, when it is a poll of a dead owner's task in the drop cascade.
    cascade: Option<CascadePoll>,
    /// Tasks polled in a drop cascade that did not end in that poll: zombies unless they end
    /// within the instant of the death ([`TaskState::settle`]).
    suspects: Vec<Suspect>,
    /// The next owner to hand out.
    next_owner: Owner,
}

/// A task of a dead owner polled at the instant of the death that did not end: its polls there
/// count as zombie polls if it is still alive once time moves on.
#[derive(Debug)]
struct Suspect {
    id: tokio::task::Id,
    owner: Owner,
    /// The instant of the death.
    at: tokio::time::Instant,
    polls: u64,
}

/// A poll of a dead owner's task at the instant of the death: excused if it ends the task.
#[derive(Debug)]
struct CascadePoll {
    id: tokio::task::Id,
    owner: Owner,
    /// The task ended during the poll (cancelled, or returned).
    ended: bool,
    /// The harness aborted it: the poll is its cancellation, never a zombie poll.
    aborted: bool,
    /// Tasks spawned during the poll (by destructors): no node's if the task ends.
    children: Vec<tokio::task::Id>,
}

/// The task table of one run, fed by tokio's task hooks.
#[derive(Clone)]
pub(crate) struct Tasks {
    state: Arc<Mutex<TaskState>>,
}

impl Tasks {
    /// A task table reporting to `progress`.
    pub(crate) fn new(progress: Progress) -> Tasks {
        Tasks { state: Arc::new(Mutex::new(TaskState { progress, ..TaskState::default() })) }
    }

    /// The run's fake time 0 (progress is reported relative to it).
    pub(crate) fn go_live(&self, start: tokio::time::Instant) {
        self.lock().start = Some(start);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawned(&self, meta: &tokio::runtime::TaskMeta<'_>) {
        // Called by the spawning code: the current task, if any, is the parent.
        let parent = tokio::task::try_id();
        let mut state = self.lock();
        state.next_ordinal += 1;
        let owner = parent.and_then(|p| state.live.get(&p)).and_then(|t| t.owner);
        let info = TaskInfo { ordinal: state.next_ordinal, spawned_at: meta.spawned_at(), owner };
        state.live.insert(meta.id(), info);
        if let Some(cascade) = state.cascade.as_mut()
            && Some(cascade.id) == parent
        {
            cascade.children.push(meta.id());
        }
    }

    /// A new owner (a node incarnation), unique within the run.
    pub(crate) fn new_owner(&self) -> Owner {
        let mut state = self.lock();
        let owner = state.next_owner;
        state.next_owner = owner.checked_add(1).expect("fewer than 2^32 node incarnations in one run");
        owner
    }

    /// The owner of a live task, if it has one.
    pub(crate) fn owner_of(&self, id: tokio::task::Id) -> Option<Owner> {
        self.lock().live.get(&id).and_then(|t| t.owner)
    }

    /// Gives a task (and so everything it will spawn) to an owner, or to none.
    pub(crate) fn set_owner(&self, id: tokio::task::Id, owner: Option<Owner>) {
        if let Some(t) = self.lock().live.get_mut(&id) {
            t.owner = owner;
        }
    }

    /// Tasks the harness aborted: the scheduler's pass that cancels them is not a run.
    pub(crate) fn mark_aborted(&self, ids: impl IntoIterator<Item = tokio::task::Id>) {
        self.lock().aborted.extend(ids);
    }

    /// The owner's incarnation ended now: from now on its tasks' polls are zombie polls (but for
    /// the drop cascade; see the module docs).
    pub(crate) fn mark_dead(&self, owner: Owner) {
        self.lock().dead.insert(owner, tokio::time::Instant::now());
    }

    /// Live tasks of an owner.
    pub(crate) fn owned(&self, owner: Owner) -> Vec<TaskInfo> {
        let state = self.lock();
        let mut out: Vec<TaskInfo> = state.live.values().filter(|t| t.owner == Some(owner)).cloned().collect();
        out.sort_by_key(|t| t.ordinal);
        out
    }

    /// Polls of tasks after their owner ended, by owner (a drop cascade still under way at this
    /// instant not yet counted).
    pub(crate) fn zombie_polls(&self) -> std::collections::BTreeMap<Owner, u64> {
        let mut state = self.lock();
        state.settle(Some(now()));
        state.zombie_polls.clone()
    }

    /// Where the first task polled after its owner ended was spawned, by owner.
    pub(crate) fn zombie_sites(&self) -> std::collections::BTreeMap<Owner, &'static Location<'static>> {
        let mut state = self.lock();
        state.settle(Some(now()));
        state.zombie_sites.clone()
    }

    /// The run is over (its last instant has run out): a task polled in a drop cascade that is
    /// still alive is a zombie.
    pub(crate) fn settle_suspects(&self) {
        self.lock().settle(None);
    }

    fn terminated(&self, meta: &tokio::runtime::TaskMeta<'_>) {
        let mut state = self.lock();
        state.live.remove(&meta.id());
        state.aborted.remove(&meta.id());
        // Ended within the instant of its owner's death: its cascade polls are excused.
        state.suspects.retain(|s| s.id != meta.id());
        if let Some(cascade) = state.cascade.as_mut()
            && cascade.id == meta.id()
        {
            cascade.ended = true;
        }
    }

    fn polled(&self, meta: &tokio::runtime::TaskMeta<'_>) {
        if matches!(CLOCK.get(), Clock::Off | Clock::Parked(_)) {
            // The run's first task poll: its runtime is running (later, only parks turn it off).
            CLOCK.set(Clock::Live(None));
        }
        // Inside a poll hook the runtime's context is entered: this reads the paused clock.
        let now = now();
        let mut state = self.lock();
        state.settle(Some(now));
        let (ordinal, owner) = state.live.get(&meta.id()).map_or((u64::MAX, None), |t| (t.ordinal, t.owner));
        state.cascade = None;
        if let Some(owner) = owner
            && let Some(&died) = state.dead.get(&owner)
        {
            let aborted = state.aborted.contains(&meta.id());
            if aborted || now == died {
                // Judged when the poll ends: excused if the task ended in it.
                state.cascade = Some(CascadePoll { id: meta.id(), owner, ended: false, aborted, children: Vec::new() });
            } else {
                *state.zombie_polls.entry(owner).or_default() += 1;
                state.note_zombie_site(owner, meta.id());
            }
        }
        let watcher = state.watcher == Some(meta.id());
        state.note_poll(ordinal, watcher, now);
    }

    fn poll_ended(&self, meta: &tokio::runtime::TaskMeta<'_>) {
        let mut state = self.lock();
        let Some(cascade) = state.cascade.take() else { return };
        assert_eq!(cascade.id, meta.id(), "the task table's cascade poll is the poll that just ended");
        if cascade.ended || cascade.aborted {
            // Cancelled, or it saw its peers gone and returned: part of the drop cascade. What its
            // destructors spawned belongs to no node.
            for child in cascade.children {
                if let Some(t) = state.live.get_mut(&child) {
                    t.owner = None;
                }
            }
        } else {
            // Still alive: a zombie unless it ends before the instant does (it may have seen only
            // some of its peers dropped so far).
            let at = now();
            match state.suspects.iter_mut().find(|s| s.id == meta.id()) {
                Some(s) => s.polls += 1,
                None => state.suspects.push(Suspect { id: meta.id(), owner: cascade.owner, at, polls: 1 }),
            }
        }
    }

    /// Counts a poll of the run's root future (which is not a task).
    pub(crate) fn root_polled(&self) {
        let now = now();
        self.lock().note_poll(0, false, now);
    }

    /// Marks the deadlock watcher, whose own polls are not activity.
    pub(crate) fn set_watcher(&self, id: tokio::task::Id) {
        self.lock().watcher = Some(id);
    }

    /// When anything but the watcher was last polled.
    pub(crate) fn last_active(&self) -> Option<tokio::time::Instant> {
        self.lock().last_active
    }

    /// Marks a harness task (the driver): left out of the tasks a deadlock report names.
    pub(crate) fn mark_harness(&self, id: tokio::task::Id) {
        self.lock().harness.push(id);
    }

    /// Total polls and the schedule hash.
    pub(crate) fn schedule(&self) -> (u64, u64) {
        let state = self.lock();
        (state.polls, state.schedule_hash)
    }

    /// Live tasks other than the harness's own, in spawn order.
    pub(crate) fn live(&self) -> Vec<TaskInfo> {
        let state = self.lock();
        let mut out: Vec<TaskInfo> = state
            .live
            .iter()
            .filter(|(id, _)| Some(**id) != state.watcher && !state.harness.contains(id))
            .map(|(_, t)| t.clone())
            .collect();
        out.sort_by_key(|t| t.ordinal);
        out
    }
}

impl TaskState {
    /// Counts as zombie polls the cascade polls of suspects whose instant is before `now` (all of
    /// them with `None`): they outlived the instant of their owner's death.
    fn settle(&mut self, now: Option<tokio::time::Instant>) {
        if self.suspects.is_empty() {
            return;
        }
        let (due, keep): (Vec<Suspect>, Vec<Suspect>) =
            std::mem::take(&mut self.suspects).into_iter().partition(|s| now.is_none_or(|now| s.at < now));
        self.suspects = keep;
        for s in due {
            *self.zombie_polls.entry(s.owner).or_default() += s.polls;
            self.note_zombie_site(s.owner, s.id);
        }
    }

    fn note_zombie_site(&mut self, owner: Owner, id: tokio::task::Id) {
        if let Some(task) = self.live.get(&id) {
            let site = task.spawned_at;
            self.zombie_sites.entry(owner).or_insert(site);
        }
    }

    fn note_poll(&mut self, ordinal: u64, watcher: bool, now: tokio::time::Instant) {
        self.polls += 1;
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        self.progress.polls.store(self.polls, relaxed);
        if !watcher {
            self.last_active = Some(now);
            if let Some(start) = self.start {
                self.progress.fake_nanos.store(now.saturating_duration_since(start).as_nanos() as u64, relaxed);
            }
        }
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.schedule_hash.to_le_bytes());
        bytes[8..].copy_from_slice(&ordinal.to_le_bytes());
        self.schedule_hash = xxh3_64(&bytes);
    }
}

/// How the run's runtime is built.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub seed: Seed,
    pub explore: bool,
    pub enable_io: bool,
}

/// Builds the run's tokio runtime on the calling thread (which must be the run's fresh thread,
/// with interposition already armed: tokio reads the clock and `RandomState` while building).
pub(crate) fn build(config: &Config, tasks: &Tasks) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder
        .enable_time()
        .start_paused(true)
        .rng_seed(tokio::runtime::RngSeed::from_bytes(&config.seed.path("runtime/tokio").bytes32()))
        .unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime);
    if config.enable_io {
        builder.enable_io();
    }
    if config.explore {
        // How often the scheduler polls timers and I/O between tasks, and checks the injection
        // queue: both change the interleaving, both are replayable from the seed.
        let mut knobs = config.seed.path("runtime/explore").source();
        builder.event_interval(knobs.range(1..=61) as u32);
        builder.global_queue_interval(knobs.range(1..=61) as u32);
    }
    let (spawned, terminated, polled, poll_ended) = (tasks.clone(), tasks.clone(), tasks.clone(), tasks.clone());
    builder
        .on_thread_park(clock_off)
        .on_thread_unpark(|| {
            CLOCK.set(match CLOCK.get() {
                // An event fired in the park read the clock where the park moved it.
                Clock::Parked(read) => Clock::Live(Some(read)),
                _ => Clock::Live(None),
            })
        })
        .on_task_spawn(move |meta| spawned.spawned(meta))
        .on_task_terminate(move |meta| terminated.terminated(meta))
        .on_before_task_poll(move |meta| polled.polled(meta))
        .on_after_task_poll(move |meta| poll_ended.poll_ended(meta));
    builder.build()
}

/// Spawns a task that belongs to no node: for the tasks of shared models and fakes (an in-memory
/// store's actor, a cache's refresher) that serve every node and outlive each incarnation.
///
/// A task spawned with `tokio::spawn` belongs to the node whose task spawned it (lineage), so a
/// shared model that lazily starts a task on first use, from inside a node's request handler,
/// would have it counted as that node's: a *leak* when the node stops, a *zombie* when it runs
/// after a crash. Spawn such tasks with this function instead; so do the tasks they spawn. Outside
/// a simulation run it is `tokio::spawn`.
///
/// # Panics
/// As `tokio::spawn`: outside a tokio runtime.
#[track_caller]
pub fn spawn_detached<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = tokio::spawn(future);
    if let Some(tasks) = current_tasks() {
        tasks.set_owner(handle.id(), None);
    }
    handle
}

/// The run thread's cache of tokio's paused clock (see [`now`]).
#[derive(Clone, Copy)]
enum Clock {
    /// Not caching: no run's task has been polled yet, the run is over, or the runtime is
    /// parked (the one place paused time moves).
    Off,
    /// Between an unpark and the next park: the clock stands still; `Some` once read, with the
    /// time since the run's start ([`go_live`]).
    Live(Option<(tokio::time::Instant, std::time::Duration)>),
    /// Parked, after an event the driver's timer fired read the clock ([`clock_still`]): tokio's
    /// time driver fires timers last in a park, after moving the clock, so the value holds until
    /// the park ends, and the unpark resumes caching with it (one clock read per event instead of
    /// two). Read as `Off` until then.
    Parked((tokio::time::Instant, std::time::Duration)),
}

thread_local! {
    static CLOCK: Cell<Clock> = const { Cell::new(Clock::Off) };
    /// The run's fake time 0 on this thread ([`go_live`]).
    static RUN_START: Cell<Option<tokio::time::Instant>> = const { Cell::new(None) };
}

/// Sets (or with `None` clears) the start of the run on this thread: [`elapsed_since`] that
/// start is answered from the clock's cache.
pub(crate) fn go_live(start: Option<tokio::time::Instant>) {
    clock_off();
    let _ = RUN_START.try_with(|s| s.set(start));
}

/// Reads tokio's clock and the time since the run's start, caching both when `cache`.
fn read_clock(cache: bool) -> (tokio::time::Instant, std::time::Duration) {
    let now = tokio::time::Instant::now();
    let start = RUN_START.try_with(Cell::get).ok().flatten();
    let elapsed = start.map_or(std::time::Duration::ZERO, |s| now.saturating_duration_since(s));
    if cache {
        CLOCK.set(Clock::Live(Some((now, elapsed))));
    }
    (now, elapsed)
}

/// tokio's paused clock on the run's thread, read once per stretch of work between two parks.
///
/// Paused time moves only when the runtime parks with every task idle (it auto-advances to the
/// next timer there): from the moment the runtime unparks until it parks again the clock stands
/// still, so the first read of a stretch is kept and every later read (the harness's history
/// stamps, the interposed `clock_gettime` that hyper, h2 and tokio's own busy-time metrics call)
/// answers it without taking tokio's clock lock. The park hooks (`on_thread_park` /
/// `on_thread_unpark`) drop the cached value, and caching starts at the run's first task poll
/// (debug builds check every cached answer against tokio's clock). The one way
/// time moves without a park, `tokio::time::advance`, is not something a simulation calls: the
/// harness owns the clock.
pub(crate) fn now() -> tokio::time::Instant {
    cached_clock().0
}

/// [`now`] and the time since the run's start, from the cache when it holds them.
fn cached_clock() -> (tokio::time::Instant, std::time::Duration) {
    match CLOCK.try_with(Cell::get) {
        Ok(Clock::Live(Some(cached))) => {
            debug_assert_eq!(cached.0, tokio::time::Instant::now(), "paused time moved without a park");
            cached
        }
        Ok(Clock::Live(None)) => read_clock(true),
        _ => read_clock(false),
    }
}

/// Fake time since `start`: from the clock's cache when `start` is the run's start (every
/// history stamp, the interposed clocks), computed otherwise.
pub(crate) fn elapsed_since(start: tokio::time::Instant) -> std::time::Duration {
    let (now, elapsed) = cached_clock();
    if RUN_START.try_with(Cell::get).ok().flatten() == Some(start) {
        elapsed
    } else {
        now.saturating_duration_since(start)
    }
}

/// Runs `f` with the clock cached, where it is not (inside a park: a harness event the driver's
/// timer fires runs after the clock moved and before the park ends, so the clock stands still
/// for all of `f`); the cache is as it was afterwards.
pub(crate) fn clock_still<R>(f: impl FnOnce() -> R) -> R {
    let before = CLOCK.try_with(Cell::get).unwrap_or(Clock::Off);
    if matches!(before, Clock::Off) {
        let _ = CLOCK.try_with(|c| c.set(Clock::Live(None)));
    }
    let result = f();
    if matches!(before, Clock::Off) {
        let _ = CLOCK.try_with(|c| {
            c.set(match c.get() {
                Clock::Live(Some(read)) => Clock::Parked(read),
                _ => Clock::Off,
            })
        });
    }
    result
}

/// Stops caching the clock on this thread (the runtime parks, or the run is over).
fn clock_off() {
    let _ = CLOCK.try_with(|c| c.set(Clock::Off));
}

thread_local! {
    /// The task registry of the run on this thread (set and cleared with the run's `Ctx`).
    static CURRENT_TASKS: std::cell::RefCell<Option<Tasks>> = const { std::cell::RefCell::new(None) };
}

/// Sets (or with `None` clears) the task registry of the run on this thread.
pub(crate) fn set_current_tasks(tasks: Option<Tasks>) {
    clock_off();
    CURRENT_TASKS.with(|c| *c.borrow_mut() = tasks);
}

/// The task registry of the run on this thread, if the thread runs one.
fn current_tasks() -> Option<Tasks> {
    CURRENT_TASKS.try_with(|c| c.try_borrow().ok().and_then(|c| c.clone())).ok().flatten()
}
