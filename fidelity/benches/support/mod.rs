//! What the benches against real servers share: percentiles, the start-to-ready line, and
//! timing a local provider's starts.

use std::time::{Duration, Instant};

use fidelity::counterpart::{Attempt, Counterpart, Provider};

/// The `p` quantile (0..=1) of sorted `runs`.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Sorts `runs` and prints `start-to-ready  {what}  n= median p90 min`; the median.
pub fn report_ready(what: &str, runs: &mut [Duration]) -> Duration {
    runs.sort();
    let (median, p90, min) = (percentile(runs, 0.5), percentile(runs, 0.9), runs[0]);
    println!("start-to-ready  {what:<44} n={:<4} median {median:>9.1?}  p90 {p90:>9.1?}  min {min:>9.1?}", runs.len());
    median
}

/// Starts `provider` `n` times (each after the previous one stopped), timing each start; the
/// median (printed as `what`) and the last server, kept running — or why there is none.
pub fn time_starts(provider: &dyn Provider, what: &str, n: usize) -> Result<(Duration, Box<dyn Counterpart>), String> {
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..n {
        drop(last.take());
        let t = Instant::now();
        match provider.start() {
            Ok(Attempt::Ready(c)) => {
                runs.push(t.elapsed());
                last = Some(c);
            }
            Ok(Attempt::Unavailable(why)) => return Err(why),
            Err(e) => return Err(e.to_string()),
        }
    }
    let median = report_ready(what, &mut runs);
    Ok((median, last.expect("n >= 1 runs")))
}
