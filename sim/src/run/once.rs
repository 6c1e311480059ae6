//! One run: a fresh thread, the seeded runtime, the body next to the harness tasks, and the
//! wall-clock watchdog around it all.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::config::Mode;
use super::ctx::{CURRENT_RUN, Ctx, Shared};
use super::simulation::{Body, BoxFuture, Simulation};
use crate::driver::Driver;
use crate::history::History;
use crate::recorder::Recorder;
use crate::report::{Class, Failure, Interposed, Outcome};
use crate::runtime::{self, Progress, Tasks, interpose};
use crate::seed::{Seed, Source, Tape, Tree};
use crate::swarm::{self, Swarm, SwarmError};
use crate::trace::{self, TraceBuf};

/// Everything one run needs.
#[derive(Clone)]
pub(crate) struct RunSpec {
    pub name: String,
    pub seed: Seed,
    pub mode: Mode,
    pub fuzz: Option<Source>,
    /// Writes the run's choices to this tape (a seeded run only; see `crate::fuzz::tape`).
    pub record: Option<Tape>,
    pub horizon: Duration,
    pub time_limit: Duration,
    pub swarm: BTreeMap<String, String>,
    /// Fault numbers whose events do nothing (`SIM_DROP_FAULTS`, see `crate::fault`).
    pub drop_faults: BTreeSet<usize>,
    /// The most operations one `Workload::run` starts (`SIM_MAX_OPS`).
    pub max_ops: Option<u64>,
    pub allow_recovered_panics: bool,
    pub enable_io: bool,
    pub keep_trace: bool,
    pub trace_all: bool,
}

impl RunSpec {
    pub(crate) fn from_sim(sim: &Simulation, seed: Seed, swarm: BTreeMap<String, String>) -> RunSpec {
        RunSpec {
            name: sim.name.clone(),
            seed,
            mode: sim.mode,
            fuzz: None,
            record: None,
            horizon: sim.horizon,
            time_limit: sim.time_limit,
            swarm,
            drop_faults: sim.drop_faults.clone(),
            max_ops: sim.max_ops,
            allow_recovered_panics: sim.allow_recovered_panics,
            enable_io: sim.enable_io,
            keep_trace: true,
            trace_all: false,
        }
    }
}

/// What one run produced, beyond its public [`Outcome`].
pub(crate) struct RunResult {
    pub outcome: Outcome,
    /// The run's history (left empty by the sweep for a seed whose history is not read again).
    pub history: History,
    pub trace: Vec<String>,
    pub swarm_drawn: Vec<String>,
    pub swarm_errors: Vec<SwarmError>,
}

/// Polls the body and counts its polls as activity (the body is not a tokio task).
struct Counted {
    inner: BoxFuture,
    tasks: Tasks,
}

impl Future for Counted {
    type Output = Result<(), Failure>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.tasks.root_polled();
        self.inner.as_mut().poll(cx)
    }
}

enum Ending {
    Returned(Result<(), Failure>),
    Stopped,
    TimeLimit,
}

thread_local! {
    /// Panics seen on this run thread (`Some` on a run thread).
    static RUN_PANICS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

type Hook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

/// The address of the panic hook this crate installed last (0: none).
static OUR_HOOK: AtomicUsize = AtomicUsize::new(0);

fn hook_address(hook: &Hook) -> usize {
    (&**hook as *const (dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send)).cast::<()>() as usize
}

/// Makes sure our panic hook is the process's, wrapping whatever hook is there (the default, or
/// one a library such as color-eyre installed since). On a run thread it records the panic in
/// the run; elsewhere it calls the hook it wraps.
fn ensure_panic_hook() {
    static LOCK: Mutex<()> = Mutex::new(());
    let _serial = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let current = std::panic::take_hook();
    if hook_address(&current) == OUR_HOOK.load(Ordering::SeqCst) {
        std::panic::set_hook(current);
        return;
    }
    let previous = current;
    let ours: Hook = Box::new(move |info| {
        let message = format!(
            "panicked at {}: {}",
            info.location().map_or_else(|| "(unknown)".to_string(), |l| l.to_string()),
            info.payload_as_str().unwrap_or("(non-string payload)")
        );
        let recorded = RUN_PANICS
            .try_with(|p| match p.try_borrow_mut() {
                Ok(mut p) => p.as_mut().map(|list| list.push(message.clone())).is_some(),
                Err(_) => false,
            })
            .unwrap_or(false);
        if recorded {
            if let Some(ctx) = Ctx::try_current() {
                ctx.shared.recorder.record_at(ctx.elapsed(), "panic", "", &message);
            }
        } else {
            previous(info);
        }
    });
    OUR_HOOK.store(hook_address(&ours), Ordering::SeqCst);
    std::panic::set_hook(ours);
}

/// Declares a deadlock when no task (other than this watcher) was polled for `horizon` of fake
/// time and no harness event is pending. Paused time jumps straight to the next timer when every
/// task is idle, so a blocked run reaches the horizon at once in wall time.
async fn watch_horizon(ctx: Ctx, tasks: Tasks, horizon: Duration) {
    let start = tokio::time::Instant::now() - ctx.elapsed();
    loop {
        // Activity: a task polled, or a harness event fired (the timer fires most without a poll).
        let (last, fired) = (tasks.last_active(), ctx.driver().last_fired());
        let active = last.unwrap_or(start).max(start + fired.unwrap_or_default());
        let mut deadline = active + horizon;
        if let Some(due) = ctx.driver().next_due() {
            // The event's own firing is activity: look again just after it.
            deadline = deadline.max(start + due + Duration::from_millis(1));
        }
        tokio::time::sleep_until(deadline).await;
        if tasks.last_active() == last && ctx.driver().last_fired() == fired && ctx.driver().pending() == 0 {
            let live = tasks.live();
            let mut message = format!(
                "nothing ran for {} of fake time and no harness event is pending; blocked: the run's body",
                swarm::format_duration(horizon)
            );
            for task in live.iter().take(16) {
                message.push_str(&format!(", task #{} spawned at {}", task.ordinal, task.spawned_at));
            }
            if live.len() > 16 {
                message.push_str(&format!(" and {} more tasks", live.len() - 16));
            }
            ctx.fail(Failure::new(Class::Deadlock, message).oracle(crate::oracle::Oracle::HORIZON));
            return;
        }
    }
}

/// Yields at most this many times to finish the instant the body returned in.
const FINISH_INSTANT_YIELDS_MAX: usize = 1024;

/// Lets every task that is runnable at this instant run, without advancing fake time (a yield
/// parks the runtime with a zero timeout: paused time does not auto-advance then), until a yield
/// polls no task. Bounded: tasks that wake each other forever at one instant stop being waited
/// for after [`FINISH_INSTANT_YIELDS_MAX`] yields.
async fn finish_instant(tasks: &Tasks) {
    for _ in 0..FINISH_INSTANT_YIELDS_MAX {
        let (before, _) = tasks.schedule();
        tokio::task::yield_now().await;
        if tasks.schedule().0 == before {
            return;
        }
    }
}

/// Run threads the watchdog gave up on that have not finished yet.
static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// How many run threads the watchdog abandoned are still running (they use CPU and slow the
/// runs after them).
pub(crate) fn abandoned_threads() -> usize {
    ABANDONED.load(Ordering::SeqCst)
}

/// The CPU time a thread has used, from its pthread CPU clock.
fn thread_cpu(thread: libc::pthread_t) -> Option<Duration> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `thread` is a live pthread (its JoinHandle is held); `clock` is a valid out-pointer.
    if unsafe { libc::pthread_getcpuclockid(thread, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and an owned timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Whether the kernel counts thread `tid` of this process as runnable (state `R` in
/// `/proc/self/task/<tid>/stat`, proc(5)): running, or waiting only for a CPU.
fn runnable(tid: libc::pid_t) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // `pid (comm) state …`: comm may hold spaces and parentheses; the state follows the last ')'.
    let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    Some(state == "R")
}

/// Says why a run missed its watchdog: still advancing fake time (slow), busy without yielding,
/// or blocked in the kernel or on a lock.
///
/// Busy is told from blocked by the thread's CPU time over a 200 ms window, and — because on a
/// loaded machine a spinning thread may get little CPU — by the kernel's view of it: a thread
/// that is runnable at most of ten samples is busy, one that sleeps is blocked.
fn diagnose(progress: &Progress, thread: libc::pthread_t, tid: Option<libc::pid_t>, watchdog: Duration) -> String {
    const SAMPLES: u32 = 10;
    let (polls_before, fake_before, cpu_before) = (progress.polls(), progress.fake_elapsed(), thread_cpu(thread));
    let mut runnable_samples = 0;
    for _ in 0..SAMPLES {
        std::thread::sleep(Duration::from_millis(200) / SAMPLES);
        if tid.and_then(runnable) == Some(true) {
            runnable_samples += 1;
        }
    }
    let (polls_after, fake_after, cpu_after) = (progress.polls(), progress.fake_elapsed(), thread_cpu(thread));
    let spun =
        matches!((cpu_before, cpu_after), (Some(a), Some(b)) if b.saturating_sub(a) >= Duration::from_millis(100));
    let fake = crate::trace::format_elapsed(progress.fake_elapsed());
    let fake = fake.trim();
    let budget = swarm::format_duration(watchdog);
    if polls_after > polls_before && fake_after == fake_before {
        format!(
            "the run did not finish within the {budget} wall-clock watchdog: tasks keep waking each other at fake \
             time {fake} without time advancing ({polls_after} task polls): a livelock"
        )
    } else if polls_after > polls_before {
        format!(
            "the run did not finish within the {budget} wall-clock watchdog, but it was still making progress \
             (fake time {fake}, {polls_after} task polls): it is slow, not stuck — raise SIM_WATCHDOG, or lower \
             Simulation::time_limit (a periodic timer runs until the limit)"
        )
    } else if spun || runnable_samples > SAMPLES / 2 {
        format!(
            "the run did not finish within the {budget} wall-clock watchdog: its thread is busy without yielding \
             at fake time {fake} (a loop with no .await stops the whole simulation)"
        )
    } else {
        format!(
            "the run did not finish within the {budget} wall-clock watchdog: its thread is blocked at fake time {fake} \
             (waiting in the kernel or on a lock: blocking I/O, a std lock held across .await, another runtime's \
             block_on, thread::sleep, or tokio::time::resume())"
        )
    }
}

/// Runs one seed on a fresh thread under the wall-clock watchdog.
pub(crate) fn run_once(spec: RunSpec, body: Arc<Body>, watchdog: Duration) -> RunResult {
    ensure_panic_hook();
    let (tx, rx) = std::sync::mpsc::channel();
    let (seed, name) = (spec.seed, spec.name.clone());
    let started = Instant::now();
    let progress = Progress::default();
    let thread_progress = progress.clone();
    // The run thread's kernel id, for the watchdog's diagnosis (0: not started yet).
    let tid = Arc::new(std::sync::atomic::AtomicI32::new(0));
    let thread_tid = Arc::clone(&tid);
    let spawned = std::thread::Builder::new()
        .name(format!("sim-{}-seed-{seed}", spec.name))
        .stack_size(16 << 20)
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            thread_tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            let result = run_on_this_thread(spec, body, thread_progress);
            if tx.send(result).is_err() {
                // The watchdog gave up on this run earlier.
                ABANDONED.fetch_sub(1, Ordering::SeqCst);
            }
        });
    let inconclusive = |message: String| RunResult {
        outcome: Outcome {
            simulation: name.clone(),
            seed,
            failure: Some(Failure::new(Class::Inconclusive, message).oracle(crate::oracle::Oracle::WATCHDOG)),
            history_hash: 0,
            events: 0,
            schedule_hash: 0,
            polls: progress.polls(),
            fake_nanos: progress.fake_elapsed().as_nanos() as u64,
            wall_nanos: started.elapsed().as_nanos() as u64,
            swarm: String::new(),
            swarm_simplest: BTreeMap::new(),
            faults: Vec::new(),
            operations: 0,
            interposed: Interposed::default(),
            replay: String::new(),
            replays: None,
            trace: None,
        },
        history: History::new(),
        trace: Vec::new(),
        swarm_drawn: Vec::new(),
        swarm_errors: Vec::new(),
    };
    let handle = match spawned {
        Ok(handle) => handle,
        Err(e) => return inconclusive(format!("could not start the run's thread: {e}")),
    };
    match rx.recv_timeout(watchdog) {
        Ok(result) => {
            let _ = handle.join();
            result
        }
        Err(_) => {
            use std::os::unix::thread::JoinHandleExt;
            let tid = Some(tid.load(Ordering::SeqCst)).filter(|&t| t > 0);
            let message = diagnose(&progress, handle.as_pthread_t(), tid, watchdog);
            // The thread cannot be stopped; it keeps running (and counts) until it finishes.
            ABANDONED.fetch_add(1, Ordering::SeqCst);
            match rx.try_recv() {
                Ok(result) => {
                    ABANDONED.fetch_sub(1, Ordering::SeqCst);
                    result
                }
                Err(_) => inconclusive(message),
            }
        }
    }
}

/// What the run's future needs: the run's parts, made on the run's thread before its runtime.
struct Live {
    spec: RunSpec,
    tasks: Tasks,
    trace: Arc<TraceBuf>,
    tree: Tree,
    swarm: Swarm,
    body: Arc<Body>,
    /// Where the run's shared state is left for the thread to read after the runtime is gone.
    slot: Arc<Mutex<Option<Arc<Shared>>>>,
}

impl Live {
    /// The run inside its runtime: the harness tasks, the body, the end of its instant, the final
    /// checks; returns how it ended and the fake time it took.
    async fn run(self, sim_ref: &interpose::ThreadSim) -> (Ending, Duration) {
        let Live { spec: run_spec, tasks: run_tasks, trace: run_trace, tree, swarm, body, slot } = self;
        let start = tokio::time::Instant::now();
        sim_ref.go_live(start.into_std());
        run_tasks.go_live(start);
        let checks = Arc::new(crate::checks::Checks::<Ctx>::default());
        let recorder = Arc::new(Recorder::new(run_trace, start, Arc::clone(&checks) as _));
        let explore = run_spec.mode == Mode::Explore;
        let driver = Driver::new(Arc::clone(&recorder), tree.prng("driver/ties"), explore);
        driver.set_knobs(run_spec.drop_faults.clone(), run_spec.max_ops);
        let shared = Arc::new(Shared {
            name: run_spec.name.clone(),
            seed: run_spec.seed,
            tree,
            mode: run_spec.mode,
            swarm,
            recorder,
            driver: driver.clone(),
            failure: Mutex::new(None),
            stop: tokio::sync::Notify::new(),
            epoch: sim_ref.epoch(),
            net: std::sync::OnceLock::new(),
            net_config: Mutex::new(None),
            tasks: run_tasks.clone(),
            checks,
            extensions: Mutex::new(std::collections::HashMap::new()),
        });
        let weak = Arc::downgrade(&shared);
        shared.recorder.on_violation(Box::new(move |failure| {
            if let Some(shared) = weak.upgrade() {
                Ctx { shared }.fail(failure);
            }
        }));
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&shared));
        let ctx = Ctx { shared: Arc::clone(&shared) };
        CURRENT_RUN.with(|c| *c.borrow_mut() = Some(ctx.clone()));
        runtime::set_current_tasks(Some(ctx.tasks().clone()));
        runtime::go_live(Some(start));
        let driver_task = tokio::spawn(driver.run());
        run_tasks.mark_harness(driver_task.id());
        let watcher = tokio::spawn(watch_horizon(ctx.clone(), run_tasks.clone(), run_spec.horizon));
        run_tasks.set_watcher(watcher.id());
        let run_tasks_end = run_tasks.clone();
        let root = Counted { inner: body(ctx.clone()), tasks: run_tasks };
        let mut ending = tokio::select! {
            biased;
            () = shared.stop.notified() => Ending::Stopped,
            result = root => Ending::Returned(result),
            () = tokio::time::sleep(run_spec.time_limit) => Ending::TimeLimit,
        };
        // The run ends at the end of the instant the body returned: what was woken at
        // that instant (a node failing at the same fake time) still runs and is judged.
        if matches!(ending, Ending::Returned(Ok(()))) && !ctx.failed() {
            finish_instant(&run_tasks_end).await;
        }
        // Final checks run when the body returned Ok and nothing failed yet.
        if matches!(ending, Ending::Returned(Ok(())))
            && !ctx.failed()
            && let Some(failure) = shared.checks.finish(&ctx)
        {
            ctx.fail(failure);
            ending = Ending::Stopped;
        }
        let elapsed = ctx.elapsed();
        // The history ends here; then pending events (which may hold the network, and
        // the network the driver) are dropped so nothing of this run outlives it.
        shared.recorder.close();
        shared.driver.clear();
        (ending, elapsed)
    }
}

/// The label of the seed that keys `fastrand`'s thread-local generator on the run's thread.
const FASTRAND_LABEL: &str = "fastrand";

/// Seeds `fastrand`'s thread-local generator (and so every `fastrand::Rng::new()`, which forks
/// it: backon's jitter in kube-runtime's watcher backoff) from the run's seed. Left alone it is
/// seeded from a hash of `Instant::now()` and the `ThreadId`, which differs between runs. The
/// value is a child of the root seed, not a draw from any [`Source`] stream, so no other stream
/// moves. Called before the interposition is armed: the generator's first use reads the clock
/// once, and that read goes to the real clock instead of counting as a read of the run.
fn seed_fastrand(seed: Seed) {
    fastrand::seed(seed.child(FASTRAND_LABEL).0);
}

fn run_on_this_thread(spec: RunSpec, body: Arc<Body>, progress: Progress) -> RunResult {
    let wall = Instant::now();
    seed_fastrand(spec.seed);
    let thread_sim = interpose::ThreadSim::new(spec.seed);
    let armed = interpose::Armed::new(&thread_sim);
    RUN_PANICS.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let trace = Arc::new(TraceBuf::new());
    let tracing_guard = trace::install(Arc::clone(&trace), Arc::new(|| Ctx::try_current().map(|ctx| ctx.elapsed())));
    let tree = match (&spec.fuzz, &spec.record) {
        (Some(fuzz), _) => Tree::fuzzed(spec.seed, fuzz.clone()),
        (None, Some(tape)) => Tree::recording(spec.seed, tape.clone()),
        (None, None) => Tree::new(spec.seed),
    };
    let swarm = Swarm::new(tree.clone(), spec.swarm.clone());
    let tasks = Tasks::new(progress);
    let config = runtime::Config { seed: spec.seed, explore: spec.mode == Mode::Explore, enable_io: spec.enable_io };
    let shared_slot: Arc<Mutex<Option<Arc<Shared>>>> = Arc::new(Mutex::new(None));

    let ending = match runtime::build(&config, &tasks) {
        Err(e) => Err(format!("could not build the run's runtime: {e}")),
        Ok(rt) => {
            let live = Live {
                spec: spec.clone(),
                tasks: tasks.clone(),
                trace: Arc::clone(&trace),
                tree,
                swarm,
                body,
                slot: Arc::clone(&shared_slot),
            };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(live.run(&thread_sim))));
            thread_sim.freeze();
            // Dropping the runtime drops every task still alive; a panic in a destructor is a
            // panic of the run.
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(rt)));
            match (result, dropped) {
                (Ok(ending), Ok(())) => Ok(ending),
                (Ok(_), Err(_)) => Err("a task's destructor panicked while the runtime shut down".to_string()),
                (Err(payload), _) => Err(panic_text(payload.as_ref())),
            }
        }
    };
    CURRENT_RUN.with(|c| *c.borrow_mut() = None);
    runtime::set_current_tasks(None);
    runtime::go_live(None);
    let panics = RUN_PANICS.with(|p| p.borrow_mut().take()).unwrap_or_default();
    let shared = shared_slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(tracing_guard);
    drop(armed);

    let fake = match &ending {
        Ok((_, elapsed)) => *elapsed,
        Err(_) => Duration::from_nanos(last_event_nanos(shared.as_ref())),
    };
    let failure = judge(ending, &panics, shared.as_ref(), fake, &spec);
    let history = shared.as_ref().map(|s| s.recorder.take()).unwrap_or_default();
    let (polls, schedule_hash) = tasks.schedule();
    let swarm = shared.as_ref().map(|s| s.swarm.clone());
    let outcome = Outcome {
        simulation: spec.name.clone(),
        seed: spec.seed,
        failure,
        history_hash: history.hash(),
        events: history.len(),
        schedule_hash,
        polls,
        fake_nanos: fake.as_nanos() as u64,
        wall_nanos: wall.elapsed().as_nanos() as u64,
        swarm: swarm.as_ref().map(Swarm::describe).unwrap_or_default(),
        swarm_simplest: swarm.as_ref().map(Swarm::simplest).unwrap_or_default(),
        faults: shared.as_ref().map(|s| s.driver.faults()).unwrap_or_default(),
        operations: shared.as_ref().map_or(0, |s| s.driver.operations()),
        interposed: Interposed {
            getrandom_calls: thread_sim.getrandom_calls.get(),
            getrandom_bytes: thread_sim.getrandom_bytes.get(),
            clock_reads: thread_sim.clock_reads.get(),
        },
        replay: String::new(),
        replays: None,
        trace: None,
    };
    let keep_trace = spec.keep_trace && (outcome.failure.is_some() || spec.trace_all);
    // The run is judged: break the cycles through its shared state (a check or an extension
    // holding the run's Ctx) so the run's memory goes with it.
    if let Some(shared) = &shared {
        shared.tear_down();
    }
    let trace = if keep_trace { trace.render(&history) } else { Vec::new() };
    RunResult {
        history,
        trace,
        swarm_drawn: swarm.as_ref().map(|s| s.values().into_keys().collect()).unwrap_or_default(),
        swarm_errors: swarm.as_ref().map(Swarm::errors).unwrap_or_default(),
        outcome,
    }
}

/// The run's failure, from how it ended: a panic, a failure recorded (by an oracle or a final
/// check), the body's error, a recovered panic, an excused violation, or the time limit.
fn judge(
    ending: Result<(Ending, Duration), String>,
    panics: &[String],
    shared: Option<&Arc<Shared>>,
    fake: Duration,
    spec: &RunSpec,
) -> Option<Failure> {
    let recorded_failure = shared.and_then(|s| s.failure.lock().unwrap_or_else(|p| p.into_inner()).clone());
    let at = |mut f: Failure| {
        f.at_nanos.get_or_insert(fake.as_nanos() as u64);
        f
    };
    match ending {
        Err(message) => {
            let first = panics.first().cloned().unwrap_or(message);
            Some(at(Failure::new(Class::Panic, first).oracle(crate::oracle::Oracle::PANIC)))
        }
        Ok((Ending::Stopped, _)) => recorded_failure,
        Ok((Ending::Returned(result), _)) => match (recorded_failure, result) {
            (Some(f), _) => Some(f),
            (None, Err(f)) => Some(at(f)),
            (None, Ok(())) if !panics.is_empty() && !spec.allow_recovered_panics => Some(at(Failure::new(
                Class::Panic,
                format!("a panic was caught and the run went on (recovered panic): {}", panics[0]),
            )
            .oracle(crate::oracle::Oracle::RECOVERED_PANIC))),
            (None, Ok(())) => shared.and_then(|s| s.checks.excused()).map(at),
        },
        Ok((Ending::TimeLimit, _)) => recorded_failure.or_else(|| {
            Some(at(Failure::liveness(
                "time-limit",
                format!(
                    "the run was still going after its fake-time limit of {}",
                    swarm::format_duration(spec.time_limit)
                ),
            )))
        }),
    }
}

fn last_event_nanos(shared: Option<&Arc<Shared>>) -> u64 {
    shared.map_or(0, |s| s.recorder.last_at_nanos())
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic payload)".to_string())
}
