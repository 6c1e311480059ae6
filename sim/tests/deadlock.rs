//! Deadlock canary: tasks waiting on each other are reported as a deadlock (not a hang), and a
//! busy loop that never yields is reported inconclusive by the wall-clock watchdog.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sim::{Class, Failure, Simulation};

#[test]
fn tasks_waiting_on_each_other_are_a_deadlock() {
    let report = Simulation::new("deadlock_canary").seeds(0..4).confirm(1).run(|_ctx| async move {
        let (to_b, from_a) = tokio::sync::oneshot::channel::<()>();
        let (to_a, from_b) = tokio::sync::oneshot::channel::<()>();
        let a = tokio::spawn(async move {
            let _ = from_b.await;
            let _ = to_b.send(());
        });
        let b = tokio::spawn(async move {
            let _ = from_a.await;
            let _ = to_a.send(());
        });
        let _ = tokio::join!(a, b);
        Ok(())
    });
    assert_eq!(report.failures().count(), report.outcomes.len(), "{report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("failure");
        assert_eq!(failure.class, Class::Deadlock, "{failure}");
        assert_eq!(failure.oracle.as_deref(), Some("horizon"));
        assert_eq!(failure.at(), Some(Simulation::DEFAULT_HORIZON), "found at the horizon, in fake time");
        // Both blocked tasks are named by where they were spawned.
        assert_eq!(failure.message.matches("tests/deadlock.rs").count(), 2, "{}", failure.message);
        assert!(outcome.wall() < Duration::from_secs(10), "fake time, not wall time");
        let replays = outcome.replays.as_ref().expect("confirmed");
        assert_eq!(replays.matched, replays.of);
    }
}

#[test]
fn a_long_timer_is_not_a_deadlock() {
    let report = Simulation::new("long_timer").seeds(0..2).run(|ctx| async move {
        tokio::time::sleep(Duration::from_secs(30 * 60)).await;
        ctx.record("woke", "sleeper", "");
        Ok(())
    });
    // Nothing else runs for half an hour, yet the run is not blocked forever: it is the horizon that
    // decides, and a timer longer than the horizon is reported so the horizon can be raised.
    assert_eq!(report.failures().count(), report.outcomes.len());
    let report = Simulation::new("long_timer_with_horizon").seeds(0..2).horizon(Duration::from_secs(3600)).run(
        |ctx| async move {
            tokio::time::sleep(Duration::from_secs(30 * 60)).await;
            ctx.record("woke", "sleeper", "");
            Ok(())
        },
    );
    report.assert_passed();
}

#[test]
fn a_pending_harness_event_beyond_the_horizon_is_not_a_deadlock() {
    let report = Simulation::new("late_event").seeds(0..2).horizon(Duration::from_secs(60)).run(|ctx| async move {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = std::sync::Mutex::new(Some(tx));
        ctx.driver().at(
            Duration::from_secs(600),
            sim::Event::new("wake", "sleeper").action(move || {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
            }),
        );
        rx.await.map_err(|_| Failure::correctness("wake", "sender dropped"))?;
        Ok(())
    });
    report.assert_passed();
}

static RELEASE: AtomicBool = AtomicBool::new(false);

#[test]
fn a_busy_loop_is_inconclusive() {
    let report = Simulation::new("busy_loop").seeds(0..1).watchdog(Duration::from_millis(500)).run(|_ctx| async move {
        // Never yields to the runtime: no timer, no task, no harness event can run.
        while !RELEASE.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
        Ok(())
    });
    RELEASE.store(true, Ordering::Relaxed);
    let outcome = report.first_failure().expect("the busy loop is reported");
    let failure = outcome.failure.as_ref().expect("failure");
    assert_eq!(failure.class, Class::Inconclusive, "{failure}");
    assert_eq!(failure.oracle.as_deref(), Some("watchdog"));
    assert!(failure.message.contains("busy without yielding"), "{}", failure.message);
    let replays = outcome.replays.as_ref().expect("labelled");
    assert_eq!(replays.of, 0, "an inconclusive seed is not re-run in a fresh process");
}

#[test]
fn a_thread_blocked_in_the_kernel_is_inconclusive_and_said_to_be_blocked() {
    let report =
        Simulation::new("blocked").seeds(0..1).confirm(0).watchdog(Duration::from_millis(300)).run(|_ctx| async move {
            // A blocking call on the run's thread: nothing else can run meanwhile.
            std::thread::sleep(Duration::from_millis(900));
            Ok(())
        });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("reported");
    assert_eq!(failure.class, Class::Inconclusive);
    assert!(failure.message.contains("is blocked"), "{}", failure.message);
}

#[test]
fn a_run_still_advancing_fake_time_at_the_watchdog_is_said_to_be_slow() {
    let report = Simulation::new("slow")
        .seeds(0..1)
        .confirm(0)
        .time_limit(Duration::from_secs(1_000_000))
        .watchdog(Duration::from_millis(300))
        .run(|_ctx| async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            loop {
                tick.tick().await;
            }
        });
    let outcome = report.first_failure().expect("reported");
    let failure = outcome.failure.as_ref().expect("failure");
    assert_eq!(failure.class, Class::Inconclusive);
    assert!(failure.message.contains("still making progress"), "{}", failure.message);
    assert!(outcome.fake_elapsed() > Duration::from_secs(1), "fake time had advanced: {:?}", outcome.fake_elapsed());
}

static STOP_LIVELOCK: AtomicBool = AtomicBool::new(false);

#[test]
fn tasks_waking_each_other_forever_without_time_advancing_is_a_livelock() {
    let report = Simulation::new("livelock").seeds(0..1).confirm(0).watchdog(Duration::from_millis(300)).run(
        |_ctx| async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
            let echo = tx.clone();
            tokio::spawn(async move {
                while !STOP_LIVELOCK.load(Ordering::Relaxed) {
                    let _ = echo.send(());
                    tokio::task::yield_now().await;
                }
            });
            drop(tx);
            while rx.recv().await.is_some() {}
            Ok(())
        },
    );
    // The abandoned run thread would spin for the rest of this process: let it end.
    STOP_LIVELOCK.store(true, Ordering::Relaxed);
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("reported");
    assert_eq!(failure.class, Class::Inconclusive);
    assert!(failure.message.contains("a livelock"), "{}", failure.message);
}
