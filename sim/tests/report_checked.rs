//! A failing sweep cannot pass its test by accident: the report of `Simulation::run` is
//! `#[must_use]`, and a failing report dropped before anyone asked whether it failed panics with
//! the failure summary, which `cargo test` then shows even though it captured the sweep's output.
//! A passing report may be dropped unread.

use std::process::Command;

use sim::{Failure, Report, Simulation};

/// A sweep of `seeds` seeds that all fail, without fresh-process confirmation (not needed here).
fn failing(name: &str, seeds: u64) -> Report {
    Simulation::new(name).seeds(0..seeds).confirm(0).seed_lines(false).run(|ctx| async move {
        ctx.record("step", "body", "before the failure");
        Err(Failure::correctness("always", "this body always fails"))
    })
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(f).expect_err("it panics");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn a_failing_report_dropped_unchecked_panics_with_the_failure_summary() {
    let message = panic_message(|| {
        let _forgotten = failing("unchecked_failing", 3);
    });
    assert!(
        message.starts_with("simulation unchecked_failing: 3 of 3 seeds failed, and the report was dropped unchecked")
    );
    assert!(message.contains(".assert_passed()"), "it says what to call: {message}");
    assert!(message.contains("seed 0 (at 0.000000s): correctness [always]: this body always fails"), "{message}");
    assert!(message.contains("replay: SIM_SEED=0 cargo test"), "the replay line is in the message: {message}");
    assert!(message.contains("trace:  "), "the trace's path is in the message: {message}");
}

#[test]
#[should_panic(expected = "3 of 3 seeds failed, and the report was dropped unchecked")]
fn a_forgotten_assertion_fails_the_test() {
    let _report = failing("forgotten_assertion", 3);
}

#[test]
fn a_passing_report_may_be_dropped_unchecked() {
    let _report = Simulation::new("unchecked_passing").seeds(0..3).run(|ctx| async move {
        ctx.record("step", "body", "fine");
        Ok(())
    });
}

#[test]
fn reading_the_verdict_counts_as_checking() {
    assert!(!failing("checked_passed", 1).passed());
    assert_eq!(failing("checked_failures", 2).failures().count(), 2);
    assert!(failing("checked_first", 1).first_failure().is_some());
    // A clone shares the verdict: checking either is enough, and dropping one while the other
    // lives is not yet a forgotten check.
    let report = failing("checked_clone", 1);
    let copy = report.clone();
    drop(report);
    assert!(!copy.passed());
}

#[test]
fn assert_passed_panics_with_the_failure_summary() {
    let report = failing("asserted", 2);
    let message = panic_message(|| report.assert_passed());
    assert!(message.starts_with("simulation asserted: 2 of 2 seeds failed\n"), "{message}");
    assert!(!message.contains("dropped unchecked"), "an assertion is a check: {message}");
    assert!(message.contains("seed 1 (at 0.000000s): correctness [always]: this body always fails"), "{message}");
    assert!(message.contains("replay: SIM_SEED=1 cargo test"), "{message}");
}

#[test]
fn a_report_dropped_while_another_assertion_unwinds_stays_quiet() {
    // A second panic during unwinding would abort the whole test binary.
    let message = panic_message(|| {
        let _report = failing("unwinding", 1);
        panic!("another assertion failed first");
    });
    assert_eq!(message, "another assertion failed first");
}

/// The probe the next test runs in a process of its own: a test body that forgets its assertion.
#[test]
fn probe_forgotten_assertion() {
    if std::env::var_os("REPORT_PROBE").is_none() {
        return;
    }
    let _report = failing("probe_forgotten", 2);
}

#[test]
fn cargo_test_reports_a_forgotten_assertion_as_a_failed_test_and_shows_the_summary() {
    let exe = std::env::current_exe().expect("the test binary");
    // Without --nocapture, as `cargo test` runs it: libtest shows a failed test's captured output
    // and its panic message.
    let output = Command::new(exe)
        .args(["probe_forgotten_assertion", "--exact", "--test-threads=1"])
        .env("REPORT_PROBE", "1")
        .env_remove("SIM_SEED")
        .env_remove("SIM_SEEDS")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "the test passed:\n{stdout}");
    assert!(stdout.contains("test probe_forgotten_assertion ... FAILED"), "{stdout}");
    assert!(
        stdout.contains("simulation probe_forgotten: 2 of 2 seeds failed, and the report was dropped unchecked"),
        "{stdout}"
    );
    assert!(stdout.contains("seed 1 (at 0.000000s): correctness [always]: this body always fails"), "{stdout}");
    assert!(stdout.contains("test result: FAILED. 0 passed; 1 failed"), "{stdout}");
}
