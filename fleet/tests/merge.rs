//! `fleet merge` over synthetic shard files: dedup by signature, first and fastest seed,
//! malformed and older lines, statuses, canaries, divergence across shards, trace tails.

mod common;

use common::{failing, idempotency, line, older_line, options, outcome, write};
use fleet::Exit;
use fleet::verdict::{Canary, Status};
use sim::Failure;

#[test]
fn failures_dedup_by_signature_across_shard_files() {
    let dir = tempfile::tempdir().expect("a temp dir");
    write(
        dir.path(),
        "shard-0/sim.jsonl",
        &[
            line(&failing("cart", 3, idempotency("put#3 charged 2 times")), Some("0/2")),
            line(&outcome("cart", 5), Some("0/2")),
            line(&failing("cart", 7, Failure::correctness("one-response", "put#7 got 2 responses")), Some("0/2")),
        ],
    );
    write(
        dir.path(),
        "shard-1/sim.jsonl",
        &[
            line(&failing("cart", 4, idempotency("put#17 charged 3 times")), Some("1/2")),
            line(&outcome("cart", 6), Some("1/2")),
        ],
    );
    let run = fleet::merge(&options(dir.path(), &[dir.path()])).expect("the merge runs");
    let sigs: Vec<(&str, usize)> = run.merged.signatures.iter().map(|s| (s.signature.as_str(), s.count)).collect();
    assert_eq!(
        sigs,
        vec![
            ("cart · correctness [idempotency] · put#N charged N times", 2),
            ("cart · correctness [one-response] · put#N got N responses", 1),
        ]
    );
    let charged = &run.merged.signatures[0];
    assert_eq!(charged.seeds, vec![3, 4]);
    assert_eq!(charged.shards.iter().collect::<Vec<_>>(), vec!["0/2", "1/2"]);
    let t = &run.merged.totals;
    assert_eq!((t.lines, t.runs, t.files, t.simulations["cart"].failed, t.simulations["cart"].seeds), (5, 5, 2, 3, 5));
    assert_eq!(run.exit(), Exit::New, "unexpected failures are new");
}

#[test]
fn the_fastest_and_the_first_seed_are_kept_with_their_replay_lines() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut lines = Vec::new();
    for (seed, wall_ms) in [(9, 5), (4, 9), (12, 1), (30, 1)] {
        let mut o = failing("cart", seed, idempotency(&format!("put#{seed} charged 2 times")));
        o.wall_nanos = wall_ms * 1_000_000;
        lines.push(line(&o, None));
    }
    write(dir.path(), "a.jsonl", &lines);
    let run = fleet::merge(&options(dir.path(), &[dir.path()])).expect("the merge runs");
    let s = &run.merged.signatures[0];
    assert_eq!(
        (s.count, s.first.seed, s.fastest.seed),
        (4, 4, 12),
        "first = lowest seed; fastest = lowest wall, then seed"
    );
    assert_eq!(s.fastest.replay, "SIM_SEED=12 SIM_ONLY=cart cargo run --release -p walkthroughs --");
    assert_eq!(s.fastest.wall_nanos, 1_000_000);
    assert!(run.summary.contains("| 4 | 4 | 4 | 12 (1.0 ms) | `SIM_SEED=12 SIM_ONLY=cart"), "{}", run.summary);
}

#[test]
fn a_malformed_line_is_counted_and_named_not_fatal() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let good = line(&failing("cart", 1, idempotency("put#1 charged 2 times")), None);
    let truncated = good[..good.len() / 2].to_string();
    let file = write(dir.path(), "a.jsonl", &[good.clone(), "not json at all".into(), String::new(), truncated]);
    let run = fleet::merge(&options(dir.path(), &[&file])).expect("malformed lines are not fatal");
    assert_eq!((run.inputs.malformed_count, run.merged.totals.runs, run.merged.totals.lines), (2, 1, 3));
    let at: Vec<&str> = run.inputs.malformed.iter().map(|m| m.at.as_str()).collect();
    assert_eq!(at, vec![format!("{}:2", file.display()), format!("{}:4", file.display())]);
    assert!(run.summary.contains(&format!("malformed lines: `{}:2`", file.display())), "{}", run.summary);
    assert!(run.summary.contains("### Malformed lines (2)"), "{}", run.summary);
}

#[test]
fn a_line_cut_inside_a_multi_byte_character_is_malformed_not_fatal() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let good = line(&failing("cart", 1, idempotency("put#1 charged 2 times")), None);
    let cut = line(&failing("cart", 2, idempotency("put#2 charged 2 times (…)")), None);
    let at = cut.find('…').expect("the line holds a multi-byte character") + 1;
    let mut bytes = format!("{good}\n").into_bytes();
    bytes.extend_from_slice(&cut.as_bytes()[..at]);
    let file = dir.path().join("killed.jsonl");
    std::fs::write(&file, bytes).expect("written");
    let run = fleet::merge(&options(dir.path(), &[&file])).expect("a cut character is not fatal");
    assert_eq!((run.inputs.malformed_count, run.merged.totals.runs), (1, 1));
    assert_eq!(run.inputs.malformed[0].at, format!("{}:2", file.display()));
}

#[test]
fn older_lines_without_the_new_fields_merge_with_a_computed_signature() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let old = failing("cart", 2, idempotency("put#2 charged 2 times"));
    let mut explore = failing("cart", 8, idempotency("put#8 charged 5 times"));
    explore.replay = "SIM_SEED=8 SIM_MODE=explore cargo test -p app --test cart -- sweep --exact --nocapture".into();
    // Written by hand as an older sim did, fields in another order and no identity.
    let hand = r#"{"simulation":"cart","seed":11,"failure":{"class":"correctness","oracle":"idempotency","message":"put#11 charged 4 times\nsecond line","at_nanos":5},"history_hash":"00000000000000ab","events":3,"schedule_hash":"0000000000000001","polls":9,"fake_nanos":10,"wall_nanos":20,"swarm":"","interposed":{"getrandom_calls":0,"getrandom_bytes":0,"clock_reads":0},"replay":"SIM_SEED=11 cargo test -p app --test cart -- sweep --exact --nocapture","replays":null,"trace":null,"class":"correctness","oracle":"idempotency"}"#;
    write(
        dir.path(),
        "mixed.json",
        &[
            older_line(&old),
            older_line(&explore),
            hand.to_string(),
            line(&failing("cart", 3, idempotency("put#3 charged 2 times")), None),
        ],
    );
    let run = fleet::merge(&options(dir.path(), &[dir.path()])).expect("the merge runs");
    assert_eq!(run.inputs.malformed_count, 0, "{:?}", run.inputs.malformed);
    assert_eq!(run.merged.signatures.len(), 1, "old and new lines share the signature");
    assert_eq!(run.merged.signatures[0].count, 4);
    assert_eq!(run.merged.signatures[0].signature, sim::signature::of("cart", &idempotency("put#99 charged 7 times")));
    let modes: Vec<&str> = run.inputs.records.iter().map(|r| r.mode.as_str()).collect();
    assert_eq!(modes, vec!["replay", "explore", "replay", "replay"], "an older line's mode comes from its replay line");
    assert_eq!(run.merged.totals.commits.iter().collect::<Vec<_>>(), vec!["1a2b3c4d5e6f", "unknown"]);
}

#[test]
fn the_same_run_read_twice_counts_once() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let lines = [
        line(&failing("cart", 1, idempotency("put#1 charged 2 times")), Some("0/1")),
        line(&outcome("cart", 2), Some("0/1")),
    ];
    let a = write(dir.path(), "a/sim.jsonl", &lines);
    let b = write(dir.path(), "b/sim.jsonl", &lines);
    let run = fleet::merge(&options(dir.path(), &[&a, &b])).expect("the merge runs");
    assert_eq!((run.merged.totals.lines, run.merged.totals.runs, run.merged.totals.duplicates), (4, 2, 2));
    assert_eq!(run.merged.signatures[0].count, 1);
    let written = std::fs::read_to_string(dir.path().join("report/outcomes.jsonl")).expect("outcomes.jsonl");
    assert_eq!(written.lines().collect::<Vec<_>>(), lines.iter().map(String::as_str).collect::<Vec<_>>());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report/signatures.json")).expect("written"))
            .expect("signatures.json is JSON");
    assert_eq!(json["signatures"][0]["seeds"], serde_json::json!([1]));
    assert_eq!(json["signatures"][0]["status"], "new");
    assert_eq!(json["totals"]["duplicates"], 2);
}

#[test]
fn expected_simulations_and_known_signatures_are_not_new() {
    let dir = tempfile::tempdir().expect("a temp dir");
    write(
        dir.path(),
        "a.jsonl",
        &[
            line(&failing("cart_planted", 1, idempotency("put#1 charged 2 times")), None),
            line(&failing("cart", 2, idempotency("put#2 charged 2 times")), None),
            line(&failing("cart", 3, Failure::correctness("one-response", "no response")), None),
        ],
    );
    let known = write(
        dir.path(),
        "known.txt",
        &[
            "# flaky upstream, see issue 12".into(),
            String::new(),
            "  cart · correctness [idempotency] · put#N charged N times".into(),
        ],
    );
    let mut opts = options(dir.path(), &[&dir.path().join("a.jsonl")]);
    opts.expected = vec!["cart_planted".into()];
    opts.known = vec![known.clone()];
    let run = fleet::merge(&opts).expect("the merge runs");
    let status = |sig: &str| run.merged.signatures.iter().find(|s| s.signature == sig).map(|s| s.status);
    assert_eq!(status("cart_planted · correctness [idempotency] · put#N charged N times"), Some(Status::Expected));
    assert_eq!(status("cart · correctness [idempotency] · put#N charged N times"), Some(Status::Known));
    assert_eq!(status("cart · correctness [one-response] · no response"), Some(Status::New));
    assert_eq!(run.exit(), Exit::New);

    std::fs::write(
        &known,
        "cart · correctness [one-response] · no response\ncart · correctness [idempotency] · put#N charged N times\n",
    )
    .expect("rewritten");
    let run = fleet::merge(&opts).expect("the merge runs");
    assert_eq!(run.verdict.new, 0);
    assert_eq!(run.exit(), Exit::Clean, "known and expected failures pass the merge");
}

#[test]
fn a_missing_canary_fails_the_merge_and_wins_over_new_failures() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = write(
        dir.path(),
        "a.jsonl",
        &[
            line(&failing("wallet_planted", 1, Failure::correctness("goaway-first", "cancel before goaway")), None),
            line(&failing("cart", 2, idempotency("put#2 charged 2 times")), None),
        ],
    );
    let mut opts = options(dir.path(), &[&input]);
    opts.canaries = vec!["wallet_planted:goaway-first".parse().expect("a canary")];
    let run = fleet::merge(&opts).expect("the merge runs");
    assert_eq!(
        run.merged.signatures.iter().find(|s| s.simulation == "wallet_planted").map(|s| s.status),
        Some(Status::Canary)
    );
    assert_eq!(run.verdict.canaries[0].failures, 1);
    assert_eq!(run.exit(), Exit::New, "the canary was found; cart's failure is new");

    opts.canaries.push(Canary { simulation: "orderstatus_late_commit".into(), oracle: None });
    opts.canaries.push("wallet_planted:idempotency".parse().expect("a canary"));
    let run = fleet::merge(&opts).expect("the merge runs");
    let missing: Vec<&str> = run.verdict.missing().map(|c| c.canary.as_str()).collect();
    assert_eq!(missing, vec!["orderstatus_late_commit", "wallet_planted:idempotency"], "a canary's oracle must match");
    assert_eq!(run.exit(), Exit::CanaryMissing, "2 wins over 1");
    assert!(run.summary.contains("canary `orderstatus_late_commit`: **not found**"), "{}", run.summary);
    assert!("".parse::<Canary>().is_err() && "sim:".parse::<Canary>().is_err());
}

#[test]
fn one_seed_with_two_histories_across_shards_is_its_own_signature() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let a = outcome("cart", 7);
    let mut b = outcome("cart", 7);
    b.history_hash ^= 1;
    let mut other_swarm = outcome("cart", 8);
    other_swarm.swarm = "latency=9ms".into();
    let mut same_seed_other_swarm = outcome("cart", 8);
    same_seed_other_swarm.history_hash ^= 1;
    write(dir.path(), "s0/sim.jsonl", &[line(&a, Some("0/2")), line(&other_swarm, Some("0/2"))]);
    write(dir.path(), "s1/sim.jsonl", &[line(&b, Some("1/2")), line(&same_seed_other_swarm, Some("1/2"))]);
    let run = fleet::merge(&options(dir.path(), &[dir.path()])).expect("the merge runs");
    assert_eq!(run.merged.signatures.len(), 1, "{:#?}", run.merged.signatures);
    let s = &run.merged.signatures[0];
    assert_eq!(s.signature, "cart · replay diverged across shards");
    assert!(s.diverged);
    assert_eq!(
        (s.count, s.seeds.clone(), s.status),
        (1, vec![7], Status::New),
        "seed 8 ran two swarms: not a divergence"
    );
    let shards: Vec<Option<&str>> = s.divergences[0].runs.iter().map(|r| r.shard.as_deref()).collect();
    assert_eq!(shards, vec![Some("0/2"), Some("1/2")]);
    assert_eq!(run.exit(), Exit::New);

    let mut opts = options(dir.path(), &[dir.path()]);
    opts.expected = vec!["cart".into()];
    assert_eq!(fleet::merge(&opts).expect("the merge runs").exit(), Exit::New, "a divergence is never expected");
}

#[test]
fn a_trace_tail_is_found_again_by_its_sim_suffix_under_the_inputs() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let o = failing("cart", 7, idempotency("put#7 charged 2 times"));
    write(dir.path(), "artifacts/shard-1/sim.jsonl", &[line(&o, Some("1/2"))]);
    let trace: Vec<String> = (1..=30).map(|i| format!("[ {i}.0s] event #{i}")).collect();
    write(dir.path(), "artifacts/shard-1/target/sim/cart/7/trace.log", &trace);
    write(dir.path(), "artifacts/shard-0/target/sim/cart/7/trace.log", &["another shard's run of seed 7".into()]);
    let run = fleet::merge(&options(dir.path(), &[&dir.path().join("artifacts")])).expect("the merge runs");
    let tail = run.merged.signatures[0].trace_tail.as_ref().expect("the trace is found");
    assert!(tail.relocated);
    assert_eq!(
        tail.path,
        dir.path().join("artifacts/shard-1/target/sim/cart/7/trace.log"),
        "the copy next to the line"
    );
    assert_eq!(tail.lines.len(), fleet::trace::TAIL_LINES);
    assert_eq!((tail.lines[0].as_str(), tail.lines[19].as_str()), ("[ 11.0s] event #11", "[ 30.0s] event #30"));
    assert!(run.summary.contains("<details><summary>1. cart · correctness [idempotency]"), "{}", run.summary);
    assert!(run.summary.contains("[ 30.0s] event #30\n```"), "{}", run.summary);

    // An artifact whose root is `target/sim` itself (upload-artifact keeps only what differs).
    let flat = tempfile::tempdir().expect("a temp dir");
    write(flat.path(), "shard-1/sim.jsonl", &[line(&o, Some("1/2"))]);
    write(flat.path(), "shard-1/cart/7/trace.log", &["the only line".into()]);
    let run = fleet::merge(&options(flat.path(), &[flat.path()])).expect("the merge runs");
    assert_eq!(
        run.merged.signatures[0].trace_tail.as_ref().map(|t| t.lines.clone()),
        Some(vec!["the only line".to_string()])
    );
}

#[test]
fn an_earlier_report_under_an_input_is_skipped_and_a_report_named_as_input_gives_its_outcomes() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let d1 = dir.path().join("d1");
    write(
        &d1,
        "shard-0.jsonl",
        &[
            line(&failing("cart", 3, idempotency("put#3 charged 2 times")), Some("0/2")),
            line(&outcome("cart", 5), Some("0/2")),
        ],
    );
    write(&d1, "shard-1.jsonl", &[line(&outcome("cart", 6), Some("1/2"))]);
    let first = fleet::merge(&fleet::MergeOptions::new(vec![d1.clone()], d1.join("report"))).expect("the first merge");
    assert!(fleet::input::holds_report(&d1.join("report")));

    // Merged again into another directory: the old report is not read back in.
    let again = fleet::merge(&fleet::MergeOptions::new(vec![d1.clone()], d1.join("report2"))).expect("the merge runs");
    let t = &again.merged.totals;
    assert_eq!((t.lines, t.runs, t.duplicates, t.malformed, t.files), (3, 3, 0, 0, 2), "{:?}", again.inputs.files);
    assert_eq!(again.inputs.skipped_reports, vec![d1.join("report")]);
    assert!(again.summary.contains("earlier reports skipped: `"), "{}", again.summary);
    assert!(again.console(&d1.join("report2")).contains("an earlier report"), "said on the terminal too");

    // A report named as an INPUT: its outcomes.jsonl (every line it merged), not signatures.json.
    let out = dir.path().join("from-report");
    let from_report = fleet::merge(&fleet::MergeOptions::new(vec![d1.join("report")], out)).expect("the merge runs");
    assert_eq!(from_report.inputs.files, vec![d1.join("report/outcomes.jsonl")]);
    assert_eq!((from_report.merged.totals.runs, from_report.merged.totals.malformed), (first.merged.totals.runs, 0));
}

#[test]
fn a_canary_not_found_says_whether_its_simulation_ran_and_with_which_oracles_it_failed() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let lines = [
        line(&failing("orderstatus_late_commit_churn", 1, Failure::correctness("q1", "order 4 lost")), Some("0/1")),
        line(&failing("orderstatus_late_commit_churn", 2, Failure::correctness("q1", "order 9 lost")), Some("0/1")),
        line(&outcome("orderstatus_late_commit_churn", 3), Some("0/1")),
        line(&outcome("wallet", 4), Some("0/1")),
    ];
    let input = write(dir.path(), "a.jsonl", &lines);
    let mut opts = options(dir.path(), &[&input]);
    opts.canaries = vec![
        "orderstatus_late_commit_chrn".parse().expect("a canary"),
        "orderstatus_late_commit_churn:q2".parse().expect("a canary"),
        "wallet".parse().expect("a canary"),
    ];
    let run = fleet::merge(&opts).expect("the merge runs");
    assert_eq!(run.exit(), Exit::CanaryMissing);
    let hints: Vec<&str> = run.verdict.canaries.iter().map(|c| c.hint.as_deref().unwrap_or("")).collect();
    assert!(hints[0].starts_with("the inputs hold no run of orderstatus_late_commit_chrn at all"), "{}", hints[0]);
    assert!(hints[0].contains("they hold: orderstatus_late_commit_churn, wallet."), "{}", hints[0]);
    assert!(hints[0].ends_with("Did you mean orderstatus_late_commit_churn?"), "{}", hints[0]);
    assert_eq!(
        hints[1],
        "orderstatus_late_commit_churn ran 3 times and failed only with other oracles: q1 (2) (an oracle is named as in the signature's [ORACLE])"
    );
    assert_eq!(hints[2], "wallet ran 1 time and never failed");
    assert!(
        run.summary.contains(
            "canary `orderstatus_late_commit_churn:q2`: **not found**: orderstatus_late_commit_churn ran 3 times"
        ),
        "{}",
        run.summary
    );
    assert!(run.console(&dir.path().join("report")).contains("Did you mean orderstatus_late_commit_churn?"));
}
