//! Workloads and oracles: operations start as harness events and end ok / failed /
//! indeterminate; each built-in oracle fires on a wrong history and stays quiet on a right one.

use std::time::Duration;

use sim::check::{self, Check, LivenessBound, OneResponse, RequestLog, Verdict};
use sim::history::Entry;
use sim::workload::{Budget, OpCtx, OpOutcome, Operation, Workload};
use sim::{Class, Ctx, Failure, Simulation};

/// A model: a counter the operations add to; some operations time out (indeterminate).
#[derive(Default)]
struct Counter {
    value: u64,
}

fn workload() -> Workload<Counter> {
    Workload::new(Counter::default())
        .op(Operation::new("add", 3, |mut op: OpCtx<Counter>| async move {
            let n = op.source().range(1..=5);
            op.model().value += n;
            check::effect(op.ctx(), "add", op.key(), n.to_string());
            OpOutcome::Ok(format!("add {n}"))
        }))
        .op(Operation::new("read", 1, |op: OpCtx<Counter>| async move {
            let v = op.model().value;
            OpOutcome::Ok(format!("read {v}"))
        }))
        .op(Operation::new("slow", 1, |op: OpCtx<Counter>| async move {
            match tokio::time::timeout(Duration::from_millis(10), tokio::time::sleep(Duration::from_secs(1))).await {
                Ok(()) => OpOutcome::Ok("slow".into()),
                Err(_) => {
                    let _ = op.id();
                    OpOutcome::Indeterminate("timed out".into())
                }
            }
        }))
}

#[test]
fn operations_start_as_harness_events_and_replay_exactly() {
    let report = Simulation::new("workload").seeds(0..16).repeat(2).run(|ctx: Ctx| async move {
        let records = workload()
            .run(&ctx, Budget { ops: 30, window: Duration::from_secs(5), drain: Duration::from_secs(5) })
            .await;
        if records.len() != 30 {
            return Err(Failure::correctness("workload", format!("{} records", records.len())));
        }
        let starts = ctx.history().entries().filter(|e| e.kind == "op.start").count();
        let ends = ctx.history().entries().filter(|e| e.kind == "op.end").count();
        if starts != 30 || ends != 30 {
            return Err(Failure::correctness("workload", format!("{starts} starts, {ends} ends")));
        }
        if records.iter().any(|r| r.name == "slow" && !r.outcome.is_indeterminate()) {
            return Err(Failure::correctness("workload", "a timeout is indeterminate"));
        }
        check::idempotency(&ctx, &records, "add")
    });
    report.assert_passed();
    let swarms: std::collections::BTreeSet<&str> = report.outcomes.iter().map(|o| o.swarm.as_str()).collect();
    assert!(swarms.len() > 4, "the swarm leaves operations out in some runs: {swarms:?}");
}

#[test]
fn the_idempotency_oracle_fires_on_a_key_that_took_effect_twice() {
    let report = Simulation::new("idempotency").seeds(0..2).confirm(0).run(|ctx: Ctx| async move {
        let w = workload();
        let first = w.run_one(&ctx, "add", "client-0", None).await.expect("add exists");
        // A retry under the same key that the service did not deduplicate.
        let retry = w.run_one(&ctx, "add", "client-0", Some(first.key.clone())).await.expect("add exists");
        check::idempotency(&ctx, &[first, retry], "add")
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("idempotency"));
    assert!(failure.message.contains("took effect 2 times"), "{failure}");
}

#[test]
fn the_idempotency_oracle_fires_on_an_acknowledged_key_without_effect() {
    let report = Simulation::new("idempotency_missing").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        let w = Workload::new(())
            .op(Operation::new("add", 1, |_op: OpCtx<()>| async move { OpOutcome::Ok("add 1".into()) }));
        let record = w.run_one(&ctx, "add", "client-0", None).await.expect("add exists");
        check::idempotency(&ctx, &[record], "add")
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert!(failure.message.contains("acknowledged but took no add effect"), "{failure}");
}

#[test]
fn one_response_per_request() {
    let quiet = Simulation::new("one_response_ok").seeds(0..2).run(|ctx: Ctx| async move {
        ctx.add_check(OneResponse::default());
        let log = RequestLog::of(&ctx);
        let request = log.start(&ctx, "GET /a");
        log.end(request, Ok(200));
        let abandoned = log.start(&ctx, "GET /b");
        drop(abandoned);
        Ok(())
    });
    quiet.assert_passed();
    let twice = Simulation::new("one_response_twice").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        ctx.add_check(OneResponse::default());
        let id = ctx.record("http.request", "req#9", "GET /x");
        let _ = id;
        ctx.record("http.end", "req#9", "response 200");
        ctx.record("http.end", "req#9", "transport error: reset");
        Ok(())
    });
    let failure = twice.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("one-response"), "{failure}");
    let open = Simulation::new("one_response_open").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        ctx.add_check(OneResponse::default());
        let request = RequestLog::of(&ctx).start(&ctx, "GET /never");
        std::mem::forget(request);
        Ok(())
    });
    let failure = open.first_failure().and_then(|o| o.failure.clone()).expect("caught at the final check");
    assert!(failure.message.contains("never got a response"), "{failure}");
}

/// A check with a stated precondition: values must stay below 10, unless the run broke the
/// precondition "no overload", in which case the violation is excused.
struct BelowTen;

impl Check for BelowTen {
    fn name(&self) -> &str {
        "below-ten"
    }
    fn on_event(&mut self, event: &Entry) -> Verdict {
        match (event.kind.as_str(), event.detail.parse::<u64>()) {
            ("value", Ok(v)) if v >= 10 && event.identity == "overloaded" => {
                Verdict::Excused(format!("{v} while overloaded"))
            }
            ("value", Ok(v)) if v >= 10 => Verdict::Violation(format!("{v} is not below ten")),
            _ => Verdict::Pass,
        }
    }
}

#[test]
fn a_check_fires_per_event_and_excused_violations_do_not_fail() {
    let caught = Simulation::new("below_ten").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        ctx.add_check(BelowTen);
        ctx.record("value", "normal", "3");
        tokio::time::sleep(Duration::from_secs(1)).await;
        ctx.record("value", "normal", "12");
        tokio::time::sleep(Duration::from_secs(1)).await;
        ctx.record("unreachable", "body", "");
        Ok(())
    });
    let outcome = caught.first_failure().expect("caught");
    let failure = outcome.failure.as_ref().expect("failure");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Correctness, Some("below-ten")));
    assert_eq!(failure.at(), Some(Duration::from_secs(1)), "found when the event was recorded");
    let excused = Simulation::new("below_ten_excused").seeds(0..1).run(|ctx: Ctx| async move {
        ctx.add_check(BelowTen);
        ctx.record("value", "overloaded", "15");
        Ok(())
    });
    excused.assert_passed();
    let failure = excused.outcomes[0].failure.as_ref().expect("reported");
    assert_eq!(failure.class, Class::Excused);
}

#[test]
fn liveness_requires_progress_within_the_bound() {
    let bound = LivenessBound::new()
        .plus("client timeout", Duration::from_secs(2))
        .plus("retry backoff cap", Duration::from_secs(3));
    assert_eq!(bound.total(), Duration::from_secs(5));
    let stuck = Simulation::new("liveness_stuck").seeds(0..1).confirm(0).run(move |ctx: Ctx| {
        let bound = bound.clone();
        async move { check::liveness(&ctx, &bound, || async { OpOutcome::Indeterminate("timeout".into()) }).await }
    });
    let outcome = stuck.first_failure().expect("no progress is a liveness failure");
    let failure = outcome.failure.as_ref().expect("failure");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Liveness, Some("progress")));
    assert!(failure.message.contains("client timeout 2s + retry backoff cap 3s"), "{failure}");
    let recovers = Simulation::new("liveness_ok").seeds(0..1).run(|ctx: Ctx| async move {
        let healed_at = ctx.elapsed() + Duration::from_secs(2);
        let bound = LivenessBound::new().plus("recovery", Duration::from_secs(5));
        check::liveness(&ctx, &bound, || async move {
            if tokio::time::Instant::now().elapsed() >= Duration::ZERO && Ctx::current().elapsed() >= healed_at {
                OpOutcome::Ok("done".into())
            } else {
                OpOutcome::Failed("not yet".into())
            }
        })
        .await
    });
    recovers.assert_passed();
}
