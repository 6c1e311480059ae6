//! The `fleet` binary's exit codes: 0 clean, 1 new failures, 2 a canary not found, 3 bad usage
//! or no input lines.

mod common;

use std::path::Path;
use std::process::Command;

use common::{failing, idempotency, line, outcome, write};

fn fleet(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fleet")).args(args).current_dir(dir).output().expect("fleet runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().expect("an exit code"), text(&out.stdout), text(&out.stderr))
}

#[test]
fn no_input_lines_is_exit_3() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir(dir.path().join("empty")).expect("a dir");
    let (code, _, err) = fleet(dir.path(), &["merge", "empty"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no JSON lines in the inputs (0 files read, 0 malformed lines)"), "{err}");

    write(dir.path(), "bad/x.jsonl", &["{".into(), "nope".into()]);
    let (code, _, err) = fleet(dir.path(), &["merge", "bad"]);
    assert_eq!(code, 3, "only malformed lines: {err}");
    assert!(err.contains("1 files read, 2 malformed lines"), "{err}");

    let (code, _, err) = fleet(dir.path(), &["merge", "does-not-exist"]);
    assert_eq!((code, err.trim()), (3, "fleet merge: input does-not-exist does not exist"));
}

#[test]
fn bad_usage_is_exit_3_and_help_is_exit_0() {
    let dir = tempfile::tempdir().expect("a temp dir");
    write(dir.path(), "a.jsonl", &[line(&outcome("cart", 1), None)]);
    assert_eq!(fleet(dir.path(), &["merge"]).0, 3, "an INPUT is required");
    assert_eq!(fleet(dir.path(), &["merge", "--frobnicate", "a.jsonl"]).0, 3);
    let (code, _, err) = fleet(dir.path(), &["merge", "--canary", ":oracle", "a.jsonl"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("expected SIMULATION or SIMULATION:ORACLE"), "{err}");
    for (canary, reason) in [
        ("cart::o", "more than one ':'"),
        ("cart:o:x", "more than one ':'"),
        ("cart [o]", "write cart:o"),
        ("cart:", "the oracle after ':' is empty"),
    ] {
        let (code, _, err) = fleet(dir.path(), &["merge", "--canary", canary, "a.jsonl"]);
        assert_eq!(code, 3, "{canary}: {err}");
        assert!(err.contains(&format!("--canary {canary:?}: expected SIMULATION or SIMULATION:ORACLE")), "{err}");
        assert!(err.contains(reason), "{canary}: {err}");
    }
    let (code, _, err) = fleet(dir.path(), &["merge", "--summary-limit", "500", "a.jsonl"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("500 bytes cannot hold the summary's verdict, totals and the notice"), "{err}");
    let (code, _, err) = fleet(dir.path(), &["merge", "--known", "missing.txt", "a.jsonl"]);
    assert_eq!(code, 3, "{err}");
    let (code, help, _) = fleet(dir.path(), &["merge", "--help"]);
    assert_eq!(code, 0);
    assert!(help.contains("Usage: fleet merge [OPTIONS] <INPUT>..."), "{help}");
}

#[test]
fn exit_codes_follow_new_failures_and_canaries() {
    let dir = tempfile::tempdir().expect("a temp dir");
    write(dir.path(), "pass/a.jsonl", &[line(&outcome("cart", 1), Some("0/1"))]);
    write(
        dir.path(),
        "fail/a.jsonl",
        &[
            line(&failing("cart", 2, idempotency("put#2 charged 2 times")), Some("0/1")),
            line(&failing("cart_planted", 3, idempotency("put#3 charged 2 times")), Some("0/1")),
        ],
    );
    let (code, out, err) = fleet(dir.path(), &["merge", "pass"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("report: fleet-report/summary.md (exit 0)"), "{out}");
    assert!(dir.path().join("fleet-report/summary.md").is_file());

    let (code, out, _) = fleet(dir.path(), &["merge", "--out", "r1", "--expected", "cart_planted", "fail"]);
    assert_eq!(code, 1, "cart's failure is new: {out}");
    let row = |status: &str, sig: &str| {
        out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == format!("{status} 1× {sig}"))
    };
    assert!(row("new", "cart · correctness [idempotency] · put#N charged N times"), "{out}");
    assert!(row("expected", "cart_planted · correctness [idempotency] · put#N charged N times"), "{out}");

    let (code, out, _) =
        fleet(dir.path(), &["merge", "--out", "r2", "--canary", "cart_planted", "--expected", "cart", "fail"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("canary cart_planted: found (1 runs)"), "{out}");

    let (code, out, _) = fleet(dir.path(), &["merge", "--out", "r3", "--canary", "wallet_planted", "fail", "pass"]);
    assert_eq!(code, 2, "a missing canary wins over new failures: {out}");
    assert!(out.contains("canary wallet_planted: NOT FOUND"), "{out}");
    let summary = std::fs::read_to_string(dir.path().join("r3/summary.md")).expect("written");
    assert!(summary.starts_with("## Fleet merge: canary not found: wallet_planted (exit 2)"), "{summary}");
}
