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
            check::effect(op.ctx(), "add", op.idempotency_key(), n.to_string());
            OpOutcome::Ok(format!("add {n}"))
        })
        .declares_effect("add"))
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
            .op(Operation::new("add", 1, |_op: OpCtx<()>| async move { OpOutcome::Ok("added".into()) })
                .declares_effect("add"));
        let record = w.run_one(&ctx, "add", "client-0", None).await.expect("add exists");
        check::idempotency(&ctx, &[record], "add")
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert!(failure.message.contains("acknowledged but took no add effect"), "{failure}");
}

/// A payment service whose first attempt answers "failed" after charging (the bug a
/// non-idempotent retry path hides), or, fixed, answers failed without charging.
fn flaky_payments(charges_on_failure: bool) -> Workload<()> {
    Workload::new(()).op(Operation::new("pay", 1, move |op: OpCtx<()>| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let retry = op.idempotency_key() != format!("op-{}", op.id());
        if !retry {
            if charges_on_failure {
                check::effect(op.ctx(), "charge", op.idempotency_key(), "10 EUR");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            return OpOutcome::Failed("503 try again".into());
        }
        // The retry finds the key's charge (if any) and does not charge again.
        if op.ctx().extension::<check::Effects>().of_kind(op.idempotency_key(), "charge").is_empty() {
            check::effect(op.ctx(), "charge", op.idempotency_key(), "10 EUR");
        }
        OpOutcome::Ok("paid".into())
    })
    .declares_effect("charge"))
}

#[test]
fn an_operation_reported_failed_that_took_effect_fails_the_no_effect_rule() {
    let report = Simulation::new("failed_took_effect").seeds(0..2).confirm(0).run(|ctx: Ctx| async move {
        let w = flaky_payments(true);
        let first = w.run_one(&ctx, "pay", "client-0", None).await.expect("pay exists");
        let retry = w.run_one(&ctx, "pay", "client-0", Some(first.key.clone())).await.expect("pay exists");
        // At most once and exactly once if acknowledged both hold: one charge, and the retry was ok.
        check::idempotency(&ctx, &[first, retry], "charge")
    });
    assert_eq!(report.failures().count(), 2, "{report}");
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.class, Class::Correctness, "{failure}");
    assert_eq!(failure.oracle.as_deref(), Some("failed-took-no-effect"), "{failure}");
    assert!(failure.message.contains("pay#1 (key op-1, client client-0) was reported failed"), "{failure}");
    assert!(failure.message.contains("charge 10 EUR at 5ms"), "{failure}");
}

#[test]
fn a_failed_operation_without_effect_and_an_acknowledged_retry_pass_the_no_effect_rule() {
    let report = Simulation::new("failed_no_effect").seeds(0..4).run(|ctx: Ctx| async move {
        let w = flaky_payments(false);
        let first = w.run_one(&ctx, "pay", "client-0", None).await.expect("pay exists");
        let retry = w.run_one(&ctx, "pay", "client-0", Some(first.key.clone())).await.expect("pay exists");
        check::idempotency(&ctx, &[first.clone(), retry.clone()], "charge")?;
        check::failed_took_no_effect(&ctx, &[first, retry], "charge")
    });
    report.assert_passed();
}

#[test]
fn an_indeterminate_operation_may_take_effect_after_it_ended() {
    let report = Simulation::new("indeterminate_late_effect").seeds(0..2).run(|ctx: Ctx| async move {
        let w = Workload::new(()).op(Operation::new("pay", 1, |op: OpCtx<()>| async move {
            if op.idempotency_key() == format!("op-{}", op.id()) {
                // The client times out; the service charges later.
                let (ctx, key) = (op.ctx().clone(), op.idempotency_key().to_string());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    check::effect(&ctx, "charge", &key, "late");
                });
                return OpOutcome::Indeterminate("timed out".into());
            }
            OpOutcome::Failed("409 already charged".into())
        })
        .declares_effect("charge"));
        let first = w.run_one(&ctx, "pay", "client-0", None).await.expect("pay exists");
        // A retry answered "failed" (a conflict) while the indeterminate attempt's charge lands.
        let retry = w.run_one(&ctx, "pay", "client-0", Some(first.key.clone())).await.expect("pay exists");
        tokio::time::sleep(Duration::from_millis(100)).await;
        if ctx.extension::<check::Effects>().of_kind(&first.key, "charge").len() != 1 {
            return Err(Failure::correctness("test", "the late charge was recorded"));
        }
        check::idempotency(&ctx, &[first, retry], "charge")
    });
    report.assert_passed();
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

/// Records an event from its final check.
struct Summarises(Ctx);

impl Check for Summarises {
    fn name(&self) -> &str {
        "summarises"
    }
    fn finish(&mut self, _ctx: &Ctx) -> Verdict {
        self.0.record("check.summary", "summarises", "all good");
        Verdict::Pass
    }
}

/// Fails on any event of kind `kind`.
struct Forbids(&'static str);

impl Check for Forbids {
    fn name(&self) -> &str {
        "forbids"
    }
    fn on_event(&mut self, event: &Entry) -> Verdict {
        if event.kind == self.0 { Verdict::Violation(format!("saw {}", event.kind)) } else { Verdict::Pass }
    }
}

#[test]
fn a_final_check_may_record_events_and_every_check_sees_them() {
    Simulation::new("finish_records")
        .seeds(0..1)
        .watchdog(Duration::from_secs(20))
        .run(|ctx: Ctx| async move {
            ctx.add_check(Summarises(ctx.clone()));
            ctx.record("x", "y", "z");
            Ok(())
        })
        .assert_passed();
    let report =
        Simulation::new("finish_records_checked").seeds(0..1).confirm(0).watchdog(Duration::from_secs(20)).run(
            |ctx: Ctx| async move {
                ctx.add_check(Summarises(ctx.clone()));
                ctx.add_check(Forbids("check.summary"));
                Ok(())
            },
        );
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Correctness, Some("forbids")), "{failure}");
}

/// Derives an event from each event of kind `x`.
struct Derives(Ctx);

impl Check for Derives {
    fn name(&self) -> &str {
        "derives"
    }
    fn on_event(&mut self, event: &Entry) -> Verdict {
        if event.kind == "x" {
            self.0.record("derived", "derives", "from x");
        }
        Verdict::Pass
    }
}

#[test]
fn events_recorded_inside_on_event_are_delivered_to_every_check() {
    let report = Simulation::new("on_event_records").seeds(0..2).confirm(0).run(|ctx: Ctx| async move {
        ctx.add_check(Derives(ctx.clone()));
        ctx.add_check(Forbids("derived"));
        ctx.record("x", "y", "z");
        Ok(())
    });
    assert_eq!(report.failures().count(), report.outcomes.len(), "{report}");
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("forbids"), "{failure}");
    assert_eq!(failure.at(), Some(Duration::ZERO), "{failure}");
}

#[test]
fn the_idempotency_oracle_links_operations_to_effects_by_declaration() {
    // Declared: an acknowledged payment must have charged, whatever its outcome's text says.
    let report =
        Simulation::new("idempotency_declared").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
            let w = Workload::new(())
                .op(Operation::new("pay", 1, |_op: OpCtx<()>| async move { OpOutcome::Ok("paid".into()) })
                    .declares_effect("charge"));
            let records =
                w.run(&ctx, Budget { ops: 3, window: Duration::from_secs(1), drain: Duration::from_secs(1) }).await;
            check::idempotency(&ctx, &records, "charge")
        });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("idempotency"), "{failure}");
    assert!(failure.message.contains("acknowledged but took no charge effect"), "{failure}");
    // Undeclared: the oracle cannot know which operations charge, and says so.
    let report =
        Simulation::new("idempotency_undeclared").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
            let w = Workload::new(())
                .op(Operation::new("pay", 1, |_op: OpCtx<()>| async move { OpOutcome::Ok("paid".into()) }));
            let records =
                w.run(&ctx, Budget { ops: 3, window: Duration::from_secs(1), drain: Duration::from_secs(1) }).await;
            check::idempotency(&ctx, &records, "charge")
        });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert!(failure.message.contains("Operation::declares_effect(\"charge\")"), "{failure}");
}

#[test]
fn every_request_log_handle_of_a_run_shares_one_id_space() {
    Simulation::new("one_response_handles")
        .seeds(0..2)
        .run(|ctx: Ctx| async move {
            ctx.add_check(OneResponse::default());
            let (mine, shared) = (RequestLog::of(&ctx), RequestLog::of(&ctx));
            let a = mine.start(&ctx, "GET /a");
            let b = shared.start(&ctx, "GET /b");
            mine.end(a, Ok(200));
            shared.end(b, Ok(200));
            let ids: Vec<String> =
                ctx.history().entries().filter(|e| e.kind == "http.request").map(|e| e.identity.clone()).collect();
            if ids != ["req#1", "req#2"] {
                return Err(Failure::correctness("workload", format!("{ids:?}")));
            }
            Ok(())
        })
        .assert_passed();
}

#[test]
fn an_empty_workload_and_operations_of_weight_zero_run_nothing() {
    Simulation::new("workload_empty")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            let budget = Budget { ops: 3, window: Duration::from_secs(1), drain: Duration::from_secs(1) };
            let empty = Workload::new(()).run(&ctx, budget.clone()).await;
            let disabled = Workload::new(())
                .op(Operation::new("disabled", 0, |_op: OpCtx<()>| async { OpOutcome::Ok("ran".into()) }))
                .run(&ctx, budget.clone())
                .await;
            let mixed = Workload::new(())
                .op(Operation::new("disabled", 0, |_op: OpCtx<()>| async { OpOutcome::Ok("ran".into()) }))
                .op(Operation::new("enabled", 1, |_op: OpCtx<()>| async { OpOutcome::Ok("ran".into()) }))
                .run(&ctx, budget)
                .await;
            if !empty.is_empty()
                || !disabled.is_empty()
                || mixed.iter().any(|r| r.name != "enabled")
                || mixed.len() != 3
            {
                return Err(Failure::correctness("workload", format!("{empty:?} {disabled:?} {mixed:?}")));
            }
            Ok(())
        })
        .assert_passed();
}

#[test]
fn operations_still_running_at_the_drain_deadline_are_indeterminate_and_stopped() {
    Simulation::new("workload_drain_deadline")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let counted = ticks.clone();
            let w = Workload::new(()).op(Operation::new("hang", 1, move |_op: OpCtx<()>| {
                let ticks = counted.clone();
                async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }));
            let records =
                w.run(&ctx, Budget { ops: 5, window: Duration::from_secs(1), drain: Duration::from_secs(1) }).await;
            let outcomes: Vec<&OpOutcome> = records.iter().map(|r| &r.outcome).collect();
            if records.len() != 5 || !records.iter().all(|r| r.outcome.is_indeterminate()) {
                return Err(Failure::correctness("workload", format!("{outcomes:?}")));
            }
            let ends = ctx.history().entries().filter(|e| e.kind == "op.end").count();
            let before = ticks.load(std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            let after = ticks.load(std::sync::atomic::Ordering::SeqCst);
            if ends != 5 || before != after {
                return Err(Failure::correctness("workload", format!("{ends} ends; ticks {before} then {after}")));
            }
            Ok(())
        })
        .assert_passed();
}

#[test]
fn liveness_says_the_last_attempt_was_cut_off_by_the_bound() {
    let report = Simulation::new("liveness_pending").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        let bound = LivenessBound::new().plus("client timeout", Duration::from_secs(2));
        check::liveness(&ctx, &bound, std::future::pending::<OpOutcome>).await
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("progress"), "{failure}");
    assert!(failure.message.contains("still running when the bound ran out"), "{failure}");
    assert!(!failure.message.contains("no attempt"), "{failure}");
}
