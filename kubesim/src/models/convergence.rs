//! Convergence after healing (liveness): once the API server's faults are over, a controller
//! brings the store to the state it promises within a bound computed from its settings.
//!
//! After the last fault of the schedule ends, a kube-runtime `Controller` reconverges after at
//! most, in order:
//!
//! | part | setting | why |
//! |---|---|---|
//! | fault schedule end | the faults installed | nothing is promised while faults are active |
//! | watcher backoff | `DefaultBackoff`: 800 ms doubling to 30 s, reset after 120 s quiet | a watcher whose list/watch failed waits up to its cap before retrying |
//! | error backoff | the user's `error_policy` requeue cap | a reconcile that failed during the faults is retried after it |
//! | requeue | the longest `Action::requeue` | a reconcile waiting for its periodic requeue |
//! | reconcile | the longest reconcile (with its API calls) | the reconcile that does the work |
//! | slack | network and server latency | |
//!
//! The parts are summed ([`ConvergenceSettings::bound`]) as a [`LivenessBound`], each named, and
//! [`check_after_heal`] waits in fake time up to the bound for a predicate; its failure names the
//! parts.

use std::time::Duration;

use sim::check::LivenessBound;
use sim::{Failure, Oracle};

/// The oracle of [`check_after_heal`].
pub const CONVERGENCE: Oracle = Oracle::new("kube-convergence");

/// A controller's settings the convergence bound depends on (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvergenceSettings {
    /// The fake time the last fault of the schedule ends (from the run's start).
    pub faults_end: Duration,
    /// The watcher backoff's cap (kube-runtime's `DefaultBackoff`: 30 s).
    pub watcher_backoff_max: Duration,
    /// The longest requeue after an error (the user's `error_policy`).
    pub error_backoff_max: Duration,
    /// The longest `Action::requeue` after success (zero when the controller only reacts).
    pub requeue_max: Duration,
    /// The longest reconcile.
    pub reconcile_max: Duration,
    /// Network and server latency.
    pub slack: Duration,
}

impl Default for ConvergenceSettings {
    fn default() -> Self {
        ConvergenceSettings {
            faults_end: Duration::ZERO,
            watcher_backoff_max: Duration::from_secs(30),
            error_backoff_max: Duration::from_secs(60),
            requeue_max: Duration::ZERO,
            reconcile_max: Duration::from_secs(1),
            slack: Duration::from_secs(1),
        }
    }
}

impl ConvergenceSettings {
    /// The bound after the faults end, its parts named (the fault schedule's end not included:
    /// [`check_after_heal`] waits from the later of now and [`ConvergenceSettings::faults_end`]).
    pub fn bound(&self) -> LivenessBound {
        LivenessBound::new()
            .plus("watcher backoff cap", self.watcher_backoff_max)
            .plus("error backoff cap", self.error_backoff_max)
            .plus("requeue cap", self.requeue_max)
            .plus("reconcile", self.reconcile_max)
            .plus("slack", self.slack)
    }
}

/// How often [`check_after_heal`] looks.
pub const POLL_EVERY: Duration = Duration::from_millis(100);

/// Waits (fake time, on the run's clock `now`) until the later of now and the faults' end, then
/// up to [`ConvergenceSettings::bound`] for `converged` to hold, looking every [`POLL_EVERY`].
/// Returns how long after the faults' end it held.
///
/// # Errors
/// A liveness [`Failure`] ([`CONVERGENCE`]) naming `what` and the bound's parts when it did not
/// hold in time.
pub async fn check_after_heal(
    settings: &ConvergenceSettings,
    now: impl Fn() -> Duration,
    what: &str,
    mut converged: impl FnMut() -> bool,
) -> Result<Duration, Failure> {
    if now() < settings.faults_end {
        tokio::time::sleep(settings.faults_end - now()).await;
    }
    let from = now();
    let bound = settings.bound();
    loop {
        if converged() {
            return Ok(now().saturating_sub(settings.faults_end));
        }
        let waited = now() - from;
        if waited >= bound.total() {
            return Err(Failure::liveness(
                CONVERGENCE,
                format!(
                    "{what} did not hold {:?} after the faults ended at {:?} (bound {:?}: {bound})",
                    waited,
                    settings.faults_end,
                    bound.total()
                ),
            ));
        }
        tokio::time::sleep(POLL_EVERY.min(bound.total() - waited)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> impl Fn() -> Duration + Clone {
        let start = tokio::time::Instant::now();
        move || start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn converges_within_the_bound() {
        let now = clock();
        let s = ConvergenceSettings { faults_end: Duration::from_secs(5), ..ConvergenceSettings::default() };
        let n = now.clone();
        let took = check_after_heal(&s, now, "ready", move || n() >= Duration::from_secs(7)).await;
        let took = took.expect("converged");
        assert!(took >= Duration::from_secs(2) && took < Duration::from_millis(2_200), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_miss_names_the_bound_terms() {
        let s = ConvergenceSettings::default();
        let e = check_after_heal(&s, clock(), "the Secret exists", || false).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains("watcher backoff cap 30s") && text.contains("error backoff cap"), "{text}");
        assert!(e.is(&CONVERGENCE));
        assert_eq!(s.bound().total(), Duration::from_secs(30 + 60 + 1 + 1));
    }
}
