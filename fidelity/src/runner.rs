//! Runs scenarios against the fake and the real server, side by side, and reports.
//!
//! Each scenario runs twice, at once: against a fresh fake (started per scenario by the suite's
//! `fake` function) and against the shared counterpart, each on its own thread with its own
//! `current_thread` tokio runtime. Names a scenario makes with [`Ctx::name`] carry a suffix
//! unique to the run, so scenarios never meet on the shared server; the suffix is normalized away
//! in observations. Scenarios run `jobs` at a time.
//!
//! A suite that compares two clients rather than two servers ([`Suite::fake_on_counterpart`])
//! runs its fake side against the counterpart too: both sides then meet one server, so each
//! side's names carry a suffix of its own (still recorded as `N`).

use std::any::Any;
use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::compare::{Comparison, Known, Verdict, compare};
use crate::counterpart::Counterpart;
use crate::observe::{Observations, Recorder};

/// The environment variable that shows every scenario side by side, equal ones too.
pub const SHOW_ENV: &str = "FIDELITY_SHOW";

/// How long one side of one scenario may run before it is stopped and counted as ended early.
pub const SCENARIO_TIME_LIMIT: Duration = Duration::from_secs(120);

/// Which side a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The fake (kafkasim).
    Fake,
    /// The real server.
    Real,
}

/// What a scenario gets: where to connect, names, and the recorder.
#[derive(Debug)]
pub struct Ctx {
    /// The address to connect to (Kafka: bootstrap servers).
    pub address: String,
    /// The side this run is on. Scenarios must not branch on it to make observations agree.
    pub side: Side,
    /// The scenario's name.
    pub scenario: &'static str,
    suffix: String,
    recorder: Recorder,
}

impl Ctx {
    /// A name unique to this run of this scenario: `{scenario}-{base}-{suffix}`; the suffix is
    /// recorded as `N`.
    pub fn name(&self, base: &str) -> String {
        format!("{}-{base}-{}", self.scenario.replace('_', "-"), self.suffix)
    }

    /// Records a step (see [`Recorder::note`]).
    pub fn note(&self, label: impl AsRef<str>, value: impl AsRef<str>) {
        self.recorder.note(label, value);
    }

    /// The run's unique suffix (recorded as `N`), for names that must be shorter than
    /// [`Ctx::name`] makes them (Kubernetes names: 63 characters).
    pub fn suffix(&self) -> &str {
        &self.suffix
    }

    /// The alias of a generated id (see [`Recorder::alias`]).
    pub fn alias(&self, kind: &str, raw: impl AsRef<str>) -> String {
        self.recorder.alias(kind, raw)
    }
}

/// A scenario's body: runs against `ctx.address`, records with `ctx.note`; an `Err` ends it early.
pub type Body = for<'a> fn(&'a Ctx) -> Pin<Box<dyn Future<Output = Result<(), String>> + 'a>>;

/// A named scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name (snake case; it names the test).
    pub name: &'static str,
    /// Its body.
    pub body: Body,
    /// The known difference it pins, if any.
    pub known: Option<Known>,
    /// Whether it must run alone, after every other scenario: it changes the shared real server
    /// for everyone (forcing a compaction of its history).
    pub alone: bool,
}

/// `scenario!(module::name)`, `scenario!(module::name, known difference)` or
/// `scenario!(module::name, known difference, alone)`: a [`Scenario`] named after its body, an
/// `async fn(&Ctx) -> Result<(), String>`.
#[macro_export]
macro_rules! scenario {
    ($m:ident :: $f:ident) => {
        $crate::scenario!($m::$f, None)
    };
    ($m:ident :: $f:ident, $known:expr) => {
        $crate::scenario!($m::$f, $known, false)
    };
    ($m:ident :: $f:ident, $known:expr, $alone:expr) => {{
        fn body(
            ctx: &$crate::runner::Ctx,
        ) -> ::std::pin::Pin<Box<dyn ::std::future::Future<Output = Result<(), String>> + '_>> {
            Box::pin($m::$f(ctx))
        }
        $crate::runner::Scenario { name: stringify!($f), body, known: $known, alone: $alone }
    }};
}

/// A scenario's result.
#[derive(Debug)]
pub struct Outcome {
    /// The scenario.
    pub name: &'static str,
    /// What the comparison means.
    pub verdict: Verdict,
    /// The rows.
    pub comparison: Comparison,
    /// Wall time of the slower side.
    pub wall: Duration,
}

/// Starts a fresh fake: a guard that stops it when dropped, and its address.
pub type StartFake = fn() -> std::io::Result<(Box<dyn Any + Send>, String)>;

/// A suite: scenarios, how to start the fake, and the columns' names.
#[derive(Debug)]
pub struct Suite {
    /// The suite's name (`kafka`).
    pub name: &'static str,
    /// The fake's name for the report (`kafkasim`).
    pub fake_name: &'static str,
    /// The real server's name for the report (`kafka`).
    pub real_name: &'static str,
    /// Starts a fresh fake for each scenario.
    pub start_fake: StartFake,
    /// Whether the fake side runs against the counterpart as well (`start_fake` unused): for
    /// suites whose fake is a client (kafkasim::rdkafka) rather than a server, so both sides
    /// differ only in the client (`Ctx::side` picks it).
    pub fake_on_counterpart: bool,
    /// The scenarios.
    pub scenarios: Vec<Scenario>,
}

/// The suite's results.
#[derive(Debug)]
pub struct SuiteReport {
    /// One per scenario run, in the suite's order.
    pub outcomes: Vec<Outcome>,
}

impl SuiteReport {
    /// `(equal, known differences, failed)`.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for o in &self.outcomes {
            match o.verdict {
                Verdict::Equal => c.0 += 1,
                Verdict::KnownDifference(_) => c.1 += 1,
                Verdict::Failed(_) => c.2 += 1,
            }
        }
        c
    }
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Runs one side of one scenario on a fresh runtime in the calling thread.
fn run_side(scenario: &Scenario, side: Side, address: String, suffix: &str) -> Observations {
    let ctx = Ctx {
        address,
        side,
        scenario: scenario.name,
        suffix: suffix.to_string(),
        recorder: Recorder::new().replacing(suffix, "N"),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return ctx.recorder.finish(Some(format!("building a runtime: {e}"))),
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async { tokio::time::timeout(SCENARIO_TIME_LIMIT, (scenario.body)(&ctx)).await })
    }));
    let ended = match result {
        Ok(Ok(Ok(()))) => None,
        Ok(Ok(Err(e))) => Some(e),
        Ok(Err(_)) => Some(format!("timed out after {SCENARIO_TIME_LIMIT:?}")),
        Err(p) => Some(format!("panicked: {}", panic_message(p.as_ref()))),
    };
    ctx.recorder.finish(ended)
}

impl Suite {
    /// Runs the scenarios whose names contain `filter` against `real`, `jobs` at a time, printing
    /// one line per scenario as it ends.
    ///
    /// Scenarios marked [`Scenario::alone`] run after the others, one at a time.
    pub fn run(&self, real: &dyn Counterpart, filter: Option<&str>, jobs: usize) -> SuiteReport {
        let selected = |alone: bool| -> Vec<&Scenario> {
            self.scenarios.iter().filter(|s| s.alone == alone && filter.is_none_or(|f| s.name.contains(f))).collect()
        };
        let suffix = format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0)
                % 0xffff_ffff
        );
        let mut outcomes = self.run_batch(&selected(false), real, &suffix, jobs);
        outcomes.extend(self.run_batch(&selected(true), real, &suffix, 1));
        let order = |name: &str| self.scenarios.iter().position(|s| s.name == name);
        outcomes.sort_by_key(|o| order(o.name));
        SuiteReport { outcomes }
    }

    fn run_batch(&self, selected: &[&Scenario], real: &dyn Counterpart, suffix: &str, jobs: usize) -> Vec<Outcome> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..selected.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(scenario) = selected.get(i) else { return };
                        let outcome = self.run_one(scenario, real.address(), suffix);
                        let mark = match &outcome.verdict {
                            Verdict::Equal => "equal",
                            Verdict::KnownDifference(_) => "known",
                            Verdict::Failed(_) => "FAILED",
                        };
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "{mark:>6}  {}  ({:.1?})", outcome.name, outcome.wall);
                        results.lock().expect("results lock: nothing panics holding it")[i] = Some(outcome);
                    }
                });
            }
        });
        results
            .into_inner()
            .expect("results lock: nothing panics holding it")
            .into_iter()
            .map(|o| o.expect("every selected scenario ran: the workers run until the list is exhausted"))
            .collect()
    }

    fn run_one(&self, scenario: &Scenario, real_address: &str, suffix: &str) -> Outcome {
        let t = Instant::now();
        let (fake, real) = std::thread::scope(|scope| {
            let fake = scope.spawn(|| {
                if self.fake_on_counterpart {
                    // Both sides meet one server: the fake side's names must differ from the real's.
                    return run_side(scenario, Side::Fake, real_address.to_string(), &format!("{suffix}f"));
                }
                match (self.start_fake)() {
                    Ok((guard, address)) => {
                        let o = run_side(scenario, Side::Fake, address, suffix);
                        drop(guard);
                        o
                    }
                    Err(e) => Observations { steps: vec![], ended_early: Some(format!("starting the fake: {e}")) },
                }
            });
            let real = run_side(scenario, Side::Real, real_address.to_string(), suffix);
            let fake = fake.join().unwrap_or_else(|p| Observations {
                steps: vec![],
                ended_early: Some(format!("panicked: {}", panic_message(p.as_ref()))),
            });
            (fake, real)
        });
        let comparison = compare(&fake, &real);
        let verdict = comparison.verdict(scenario.known.as_ref());
        Outcome { name: scenario.name, verdict, comparison, wall: t.elapsed() }
    }

    /// The report: a table of every scenario, then each non-equal one (every one with
    /// `FIDELITY_SHOW=1`) side by side, then the counts.
    pub fn render(&self, report: &SuiteReport) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let w = report.outcomes.iter().map(|o| o.name.len()).max().unwrap_or(8);
        let _ = writeln!(out, "\n{} differential suite: {} vs {}", self.name, self.fake_name, self.real_name);
        let _ = writeln!(out, "  {:w$}  {:>7}  verdict", "scenario", "steps");
        for o in &report.outcomes {
            let verdict = match &o.verdict {
                Verdict::Equal => "equal".to_string(),
                Verdict::KnownDifference(id) => format!("known difference `{id}`"),
                Verdict::Failed(why) => format!("FAILED: {why}"),
            };
            let _ = writeln!(out, "  {:w$}  {:>7}  {verdict}", o.name, o.comparison.rows.len());
        }
        let show_all = std::env::var_os(SHOW_ENV).is_some_and(|v| !v.is_empty() && v != "0");
        for o in report.outcomes.iter().filter(|o| show_all || o.verdict != Verdict::Equal) {
            let _ = writeln!(out, "\n{}:", o.name);
            out.push_str(&o.comparison.side_by_side(self.fake_name, self.real_name));
        }
        let (equal, known, failed) = report.counts();
        let _ = writeln!(out, "\n{} scenarios: {equal} equal, {known} known differences, {failed} failed", self.name);
        out
    }
}

/// The environment variable that sets how many scenarios run at once (default [`JOBS_DEFAULT`]).
pub const JOBS_ENV: &str = "FIDELITY_JOBS";
/// How many scenarios run at once unless [`JOBS_ENV`] says otherwise.
pub const JOBS_DEFAULT: usize = 6;

impl Suite {
    /// A differential test binary's `main` (`harness = false`): `--list` lists the scenarios;
    /// otherwise it checks that the known-differences page (`page`, read from `page_path`) lists
    /// exactly the pinned ids, gets a counterpart from `counterpart`, runs the scenarios whose
    /// names contain the first non-flag argument, prints the report and a
    /// `fidelity: P passed, F failed, S skipped` line. Without a counterpart every scenario is
    /// skipped, or failed when [`crate::required`].
    pub fn main(
        &self,
        page: &str,
        page_path: &str,
        counterpart: impl FnOnce() -> Result<crate::Selection, crate::Error>,
    ) -> std::process::ExitCode {
        use std::process::ExitCode;
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.iter().any(|a| a == "--list") {
            for s in &self.scenarios {
                println!("{}: test", s.name);
            }
            return ExitCode::SUCCESS;
        }
        let filter = args.iter().find(|a| !a.starts_with('-')).map(String::as_str);
        let selected = self.scenarios.iter().filter(|s| filter.is_none_or(|f| s.name.contains(f))).count();

        // The page and the pinned scenarios must list the same ids, counterpart or not.
        let known: Vec<&str> = self.scenarios.iter().filter_map(|s| s.known.map(|k: Known| k.id)).collect();
        if let Err(e) = crate::compare::check_documented(page, &known) {
            println!("{page_path}: {e}");
            println!("fidelity: 0 passed, 1 failed, {selected} skipped");
            return ExitCode::FAILURE;
        }

        let counterpart = match counterpart() {
            Ok(crate::Selection::Ready(c)) => c,
            Ok(crate::Selection::Skipped(skip)) => {
                println!("{} differential suite: {skip}", self.name);
                if crate::required() {
                    println!("FIDELITY_REQUIRE is set: a missing counterpart is a failure");
                    println!("fidelity: 0 passed, {selected} failed, 0 skipped");
                    return ExitCode::FAILURE;
                }
                println!("fidelity: 0 passed, 0 failed, {selected} skipped");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                println!("{} differential suite: {e}", self.name);
                if let crate::Error::Start { logs: Some(logs), .. } = &e {
                    println!("--- the counterpart's log ---\n{logs}");
                }
                println!("fidelity: 0 passed, {selected} failed, 0 skipped");
                return ExitCode::FAILURE;
            }
        };
        println!("{} differential suite against {}", self.name, counterpart.describe());
        let jobs = std::env::var(JOBS_ENV).ok().and_then(|j| j.parse().ok()).unwrap_or(JOBS_DEFAULT);
        let report = self.run(counterpart.as_ref(), filter, jobs);
        print!("{}", self.render(&report));
        let (equal, known, failed) = report.counts();
        if failed > 0
            && let Some(logs) = counterpart.logs()
        {
            let tail: Vec<&str> = logs.lines().rev().take(40).collect();
            println!("--- the last lines of the real server's log ---");
            for line in tail.into_iter().rev() {
                println!("{line}");
            }
        }
        println!("fidelity: {} passed, {failed} failed, 0 skipped", equal + known);
        if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
    }
}
