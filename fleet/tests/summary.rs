//! The Markdown summary stays under its byte limit and says what it cut.

mod common;

use common::{failing, line, options, write};
use sim::Failure;

/// 500 signatures (5 failing seeds each), every one with a trace file under the input.
fn many_signatures(dir: &std::path::Path) -> std::path::PathBuf {
    let input = dir.join("artifacts");
    let mut lines = Vec::new();
    for sig in 0..500u64 {
        let simulation = format!("sim_{}", sig % 7);
        // Letters, not digits: each `kind` is its own shape.
        let kind: String = format!("{sig:03}").chars().map(|c| (b'a' + (c as u8 - b'0')) as char).collect();
        for k in 0..5u64 {
            let seed = sig * 10 + k;
            let o = failing(
                &simulation,
                seed,
                Failure::correctness("idempotency", format!("{kind} went wrong on put#{k}")),
            );
            lines.push(line(&o, Some(&format!("{}/8", seed % 8))));
            let trace: Vec<String> = (0..25).map(|i| format!("[{i}.0s] a trace line of seed {seed}")).collect();
            write(&input, &format!("target/sim/{simulation}/{seed}/trace.log"), &trace);
        }
    }
    write(&input, "sim.jsonl", &lines);
    input
}

#[test]
fn the_summary_stays_under_its_limit_with_500_signatures_and_says_how_many_rows_were_cut() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = many_signatures(dir.path());
    let mut opts = options(dir.path(), &[&input]);
    opts.summary_limit = 4096;
    let run = fleet::merge(&opts).expect("the merge runs");
    assert_eq!(run.merged.signatures.len(), 500);
    let written = std::fs::read_to_string(dir.path().join("report/summary.md")).expect("summary.md");
    assert_eq!(written, run.summary);
    assert!(written.len() <= 4096, "{} bytes", written.len());
    let rows = written.lines().filter(|l| l.starts_with("| ") && l.contains("| **new** |")).count();
    assert!(rows > 0, "some rows fit:\n{written}");
    let note = format!("_{} more signature rows cut to stay under 4096 bytes: all 500 are in `", 500 - rows);
    assert!(written.contains(&note), "expected {note:?} in:\n{written}");
    assert!(written.contains("/report/signatures.json"), "{written}");
    assert!(written.contains("shards: 8 of 8"), "{written}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report/signatures.json")).expect("written"))
            .expect("JSON");
    assert_eq!(json["signatures"].as_array().map(Vec::len), Some(500), "the JSON keeps every signature");
}

#[test]
fn under_the_default_limit_every_row_and_trace_tail_is_shown() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = many_signatures(dir.path());
    let run = fleet::merge(&options(dir.path(), &[&input])).expect("the merge runs");
    assert!(run.summary.len() <= fleet::summary::LIMIT_DEFAULT);
    assert_eq!(run.summary.lines().filter(|l| l.contains("| **new** |")).count(), 500);
    assert_eq!(run.summary.matches("<details>").count(), 500);
    assert!(!run.summary.contains("cut"), "nothing is cut");
}

#[test]
fn a_limit_too_small_for_the_head_and_its_notice_is_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = many_signatures(dir.path());
    for limit in [0, 10, 500, fleet::summary::LIMIT_MIN - 1] {
        let mut opts = options(dir.path(), &[&input]);
        opts.summary_limit = limit;
        let err = fleet::merge(&opts).expect_err("too small").to_string();
        assert!(err.starts_with(&format!("--summary-limit {limit} bytes cannot hold")), "{err}");
        assert!(err.contains("give at least 1024"), "{err}");
    }
}

#[test]
fn every_cut_keeps_its_notice_even_when_the_head_itself_does_not_fit() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = many_signatures(dir.path());
    for limit in [fleet::summary::LIMIT_MIN, 1500, 2000, 3000, 5000] {
        let mut opts = options(dir.path(), &[&input]);
        opts.summary_limit = limit;
        let run = fleet::merge(&opts).expect("the merge runs");
        assert!(run.summary.len() <= limit, "{} > {limit}", run.summary.len());
        assert!(run.summary.contains("cut to stay under"), "limit {limit}: no notice in\n{}", run.summary);
        assert!(run.summary.contains("/report/signatures.json"), "{}", run.summary);
    }
    // A head longer than the limit: 120 simulations, one row each in the head's table.
    let wide = dir.path().join("wide");
    let lines: Vec<String> = (0..120).map(|i| line(&common::outcome(&format!("simulation_{i:03}"), i), None)).collect();
    write(&wide, "a.jsonl", &lines);
    let mut opts = options(&wide, &[&wide.join("a.jsonl")]);
    opts.summary_limit = 2048;
    let run = fleet::merge(&opts).expect("the merge runs");
    assert!(run.summary.len() <= 2048, "{}", run.summary.len());
    assert!(run.summary.starts_with("## Fleet merge: no new failure (exit 0)"), "{}", run.summary);
    assert!(run.summary.contains("_Summary cut to stay under 2048 bytes:"), "{}", run.summary);
    assert!(!run.summary.contains("simulation_119"), "the head's table was cut: {}", run.summary);
    let before_notice = run.summary.split("\n_Summary cut").next().expect("text");
    assert!(before_notice.ends_with('\n'), "cut at a whole line: {before_notice:?}");
}
