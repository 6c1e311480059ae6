//! The breaker checker judges each state change against the three-state model.

use std::time::Duration;

use grpcsim::breaker::{Breaker, BreakerSpec, BreakerState, Checked, Outcome};
use sim::{Ctx, Simulation};
use tonic::Code;

/// A configurable breaker: `counts` decides what it treats as a failure; `cooldown` is how long
/// it really waits; `skip_half_open` jumps from Open straight to Closed.
struct Simple {
    state: BreakerState,
    failures: u32,
    threshold: u32,
    cooldown: Duration,
    opened_at: Duration,
    counts: fn(&Outcome) -> bool,
    skip_half_open: bool,
}

impl Simple {
    fn new(counts: fn(&Outcome) -> bool) -> Simple {
        Simple {
            state: BreakerState::Closed,
            failures: 0,
            threshold: 3,
            cooldown: Duration::from_secs(1),
            opened_at: Duration::ZERO,
            counts,
            skip_half_open: false,
        }
    }
}

impl Breaker for Simple {
    fn allow(&mut self, now: Duration) -> bool {
        if self.state == BreakerState::Open && now >= self.opened_at + self.cooldown {
            self.state = if self.skip_half_open { BreakerState::Closed } else { BreakerState::HalfOpen };
        }
        self.state != BreakerState::Open
    }

    fn record(&mut self, outcome: &Outcome, now: Duration) {
        let failure = (self.counts)(outcome);
        match self.state {
            BreakerState::HalfOpen => {
                self.state = if failure { BreakerState::Open } else { BreakerState::Closed };
                self.opened_at = now;
                self.failures = 0;
            }
            BreakerState::Closed if failure => {
                self.failures += 1;
                if self.failures >= self.threshold {
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

const SPEC: BreakerSpec = BreakerSpec { failure_threshold: 3, cooldown: Duration::from_secs(1) };

/// Feeds a scripted sequence of outcomes, one every 100 ms, asking `allow` before each.
async fn feed(ctx: &Ctx, breaker: Simple, outcomes: &[Outcome]) {
    let mut checked = Checked::new(ctx, "ledger", SPEC, breaker);
    for outcome in outcomes {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if checked.allow(ctx.elapsed()) {
            checked.record(outcome, ctx.elapsed());
        }
    }
}

fn run(name: &str, make: fn() -> Simple, outcomes: Vec<Outcome>) -> Option<String> {
    let report = Simulation::new(name).seeds(0..1).run(move |ctx: Ctx| {
        let outcomes = outcomes.clone();
        async move {
            feed(&ctx, make(), &outcomes).await;
            Ok(())
        }
    });
    report
        .first_failure()
        .and_then(|o| o.failure.as_ref())
        .map(|f| format!("{}: {}", f.oracle.as_deref().unwrap_or_default(), f.message))
}

fn rollout_then_errors() -> Vec<Outcome> {
    let mut v = vec![Outcome::call(Code::Ok), Outcome::stream_end(Code::Ok), Outcome::stream_end(Code::Ok)];
    v.push(Outcome::call(Code::Unavailable));
    v.extend(std::iter::repeat_n(Outcome::call(Code::Unavailable), 3));
    v.extend(std::iter::repeat_n(Outcome::call(Code::Ok), 15));
    v
}

#[test]
fn a_breaker_counting_real_failures_passes() {
    let found = run("breaker_correct", || Simple::new(Outcome::is_failure), rollout_then_errors());
    assert_eq!(found, None);
}

#[test]
fn a_breaker_counting_graceful_stream_ends_opens_illegally() {
    let found =
        run("breaker_counts_stream_ends", || Simple::new(|o| o.stream_end || o.is_failure()), rollout_then_errors())
            .expect("the checker must report the early opening");
    assert!(
        found.starts_with("breaker: breaker ledger: Closed -> Open: opened after 1 consecutive failures"),
        "{found}"
    );
    assert!(found.contains("stream end Ok"), "the report lists the outcomes it counted: {found}");
}

#[test]
fn half_open_before_the_cooldown_is_illegal() {
    let found = run(
        "breaker_short_cooldown",
        || {
            let mut b = Simple::new(Outcome::is_failure);
            b.cooldown = Duration::from_millis(300);
            b
        },
        rollout_then_errors(),
    )
    .expect("the checker must report the short cooldown");
    assert!(found.contains("Open -> HalfOpen: half-opened"), "{found}");
}

#[test]
fn open_to_closed_is_not_an_edge() {
    let found = run(
        "breaker_skips_half_open",
        || {
            let mut b = Simple::new(Outcome::is_failure);
            b.skip_half_open = true;
            b
        },
        rollout_then_errors(),
    )
    .expect("the checker must report Open -> Closed");
    assert!(found.contains("Open -> Closed is not an edge of the model"), "{found}");
}

#[test]
fn letting_calls_through_while_open_is_illegal() {
    struct Leaky(Simple);
    impl Breaker for Leaky {
        fn allow(&mut self, now: Duration) -> bool {
            let _ = self.0.allow(now);
            true
        }
        fn record(&mut self, outcome: &Outcome, now: Duration) {
            self.0.record(outcome, now);
        }
        fn state(&self) -> BreakerState {
            self.0.state()
        }
    }
    let report = Simulation::new("breaker_leaky").seeds(0..1).run(|ctx: Ctx| async move {
        let mut checked = Checked::new(&ctx, "ledger", SPEC, Leaky(Simple::new(Outcome::is_failure)));
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if checked.allow(ctx.elapsed()) {
                checked.record(&Outcome::call(Code::Unavailable), ctx.elapsed());
            }
        }
        Ok(())
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("reported");
    assert!(failure.message.contains("let a call through while Open"), "{failure}");
}

#[test]
fn an_expired_deadline_reported_as_cancelled_counts_as_a_failure() {
    let timeout = tonic::Status::cancelled("Timeout expired");
    assert_eq!(Outcome::call_status(&timeout), Outcome::call(Code::DeadlineExceeded));
    assert!(Outcome::call_status(&timeout).is_failure());
    let cancel = tonic::Status::cancelled("the caller went away");
    assert!(!Outcome::call_status(&cancel).is_failure());
    assert_eq!(Outcome::stream_end_status(None), Outcome::stream_end(Code::Ok));
    // A breaker that counts deadlines, fed through call_status, opens legally.
    let found = run(
        "breaker_deadlines",
        || Simple::new(Outcome::is_failure),
        vec![Outcome::call_status(&timeout); 4]
            .into_iter()
            .chain(std::iter::repeat_n(Outcome::call(Code::Ok), 15))
            .collect(),
    );
    assert_eq!(found, None);
}
