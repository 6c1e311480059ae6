//! The wallet's circuit breaker in front of the ledger: Closed → Open after
//! [`FAILURE_THRESHOLD`] consecutive failures, Open → HalfOpen after [`COOLDOWN`], and the trial's
//! outcome decides. The wallet runs it under [`grpcsim::breaker::Checked`], which judges every
//! state change.
//!
//! The planted bug ([`super::Variant::BreakerCountsRolloutEnds`]) counts every end of the watch
//! stream as a failure, including the clean ends (status OK) a ledger replica sends when it drains
//! for a rollout: two replicas rolled one after the other open the breaker while a healthy
//! replica serves, and the wallet refuses transfers it could make.

use std::time::Duration;

use grpcsim::breaker::{Breaker, BreakerSpec, BreakerState, Outcome};

/// Consecutive failures that open the breaker.
pub const FAILURE_THRESHOLD: u32 = 2;
/// How long it stays open before a trial call.
pub const COOLDOWN: Duration = Duration::from_secs(1);

/// What the breaker promises, for the checker.
pub const SPEC: BreakerSpec = BreakerSpec { failure_threshold: FAILURE_THRESHOLD, cooldown: COOLDOWN };

/// The wallet's breaker.
#[derive(Debug)]
pub struct WalletBreaker {
    state: BreakerState,
    failures: u32,
    opened_at: Duration,
    counts_stream_ends: bool,
}

impl WalletBreaker {
    /// A closed breaker; `counts_stream_ends` plants the bug.
    pub fn new(counts_stream_ends: bool) -> WalletBreaker {
        WalletBreaker { state: BreakerState::Closed, failures: 0, opened_at: Duration::ZERO, counts_stream_ends }
    }

    fn is_failure(&self, outcome: &Outcome) -> bool {
        if self.counts_stream_ends && outcome.stream_end {
            return true;
        }
        outcome.is_failure()
    }
}

impl Breaker for WalletBreaker {
    fn allow(&mut self, now: Duration) -> bool {
        if self.state == BreakerState::Open && now >= self.opened_at + COOLDOWN {
            self.state = BreakerState::HalfOpen;
        }
        self.state != BreakerState::Open
    }

    fn record(&mut self, outcome: &Outcome, now: Duration) {
        let failure = self.is_failure(outcome);
        if !failure && outcome.stream_end {
            // A clean stream end says nothing about the ledger's health.
            return;
        }
        match self.state {
            BreakerState::HalfOpen if failure => {
                self.state = BreakerState::Open;
                self.opened_at = now;
            }
            BreakerState::HalfOpen => {
                self.state = BreakerState::Closed;
                self.failures = 0;
            }
            BreakerState::Closed if failure => {
                self.failures += 1;
                if self.failures >= FAILURE_THRESHOLD {
                    self.state = BreakerState::Open;
                    self.opened_at = now;
                }
            }
            BreakerState::Closed => self.failures = 0,
            BreakerState::Open => {}
        }
    }

    fn state(&self) -> BreakerState {
        self.state
    }
}
