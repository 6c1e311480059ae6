//! Per-run overhead of the simulation harness (a bench binary: `cargo bench -p sim --bench overhead`).
//!
//! Measures, over many seeds on one thread:
//! - an empty simulation (the body returns at once): thread, runtime, interposition, harness tasks;
//! - the determinism canary's hyper HTTP/1.1 + HTTP/2 scenario, under the harness and, as the
//!   baseline, on a bare paused `current_thread` runtime on a fresh thread without the harness.
//!
//! Prints the median and 90th percentile per run, and runs per second end to end.

#[path = "../tests/support/hyper_scenario.rs"]
mod hyper_scenario;

use std::time::{Duration, Instant};

use sim::{Failure, Simulation};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(label: &str, mut runs: Vec<Duration>, total: Duration) {
    runs.sort();
    println!(
        "{label:<44} n={:<5} median {:>10.1?}  p90 {:>10.1?}  end to end {:>10.1?}/run",
        runs.len(),
        percentile(&runs, 0.5),
        percentile(&runs, 0.9),
        total / runs.len() as u32
    );
}

fn sweep<F, Fut>(name: &str, seeds: u64, body: F) -> (Vec<Duration>, Duration)
where
    F: Fn(sim::Ctx) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), Failure>> + 'static,
{
    let started = Instant::now();
    let report = Simulation::new(name).seeds(0..seeds).jobs(1).confirm(0).seed_lines(false).run(body);
    let total = started.elapsed();
    report.assert_passed();
    (report.outcomes.iter().map(|o| o.wall()).collect(), total)
}

fn bare_runtime(seeds: u64) -> (Vec<Duration>, Duration) {
    // The baseline: the same scenario's server and clients without the harness. It still needs
    // a Ctx for recording, so it runs the scenario's building blocks directly on a paused runtime.
    let started = Instant::now();
    let mut runs = Vec::new();
    for _ in 0..seeds {
        let run = std::thread::spawn(|| {
            let t = Instant::now();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .expect("runtime");
            rt.block_on(hyper_scenario::bare());
            drop(rt);
            t.elapsed()
        });
        runs.push(run.join().expect("bare run"));
    }
    (runs, started.elapsed())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (empty_seeds, canary_seeds) = if quick { (200, 20) } else { (5000, 500) };
    println!(
        "sim per-run overhead ({}; one thread)",
        if cfg!(debug_assertions) { "debug build" } else { "release build" }
    );
    let (runs, total) = sweep("bench_empty", empty_seeds, |_ctx| async { Ok(()) });
    report("empty simulation", runs, total);
    let (runs, total) = sweep("bench_canary", canary_seeds, hyper_scenario::scenario);
    let canary_median = {
        let mut r = runs.clone();
        r.sort();
        percentile(&r, 0.5)
    };
    report("hyper canary scenario under the harness", runs, total);
    let (runs, total) = bare_runtime(canary_seeds);
    let bare_median = {
        let mut r = runs.clone();
        r.sort();
        percentile(&r, 0.5)
    };
    report("hyper canary scenario, bare paused runtime", runs, total);
    println!(
        "harness cost on the canary: {:.2}× the bare runtime (median)",
        canary_median.as_secs_f64() / bare_median.as_secs_f64()
    );
}
