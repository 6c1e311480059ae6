//! The main job's `minimize` command as a user drives it: a planted bug's replay line in, a
//! smaller line that fails with the same class and oracle out (and replays), a shrunk input's
//! line; bad lines refused with exit 2, a passing line with exit 1.

use std::path::PathBuf;
use std::process::Command;

const SHOPPINGCART: &str =
    "SIM_SEED=11 SIM_ONLY=shoppingcart_non_atomic_idempotency cargo run --release -p walkthroughs -- --seeds 300";
const WALLET: &str =
    "SIM_SEED=3 SIM_ONLY=wallet_cancel_before_goaway cargo run --release -p walkthroughs -- --seeds 300";

/// A directory of its own under the temp dir for one test's corpus.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("walkthroughs-minimize-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch dir");
    dir
}

/// The debug binary with `env` and `args`, every other `SIM_*` variable removed.
fn main_job(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walkthroughs"));
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("SIM_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("the walkthroughs binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// The line printed after `heading` (indented on the next line).
fn line_after<'a>(text: &'a str, heading: &str) -> &'a str {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading));
    lines.next().unwrap_or_else(|| panic!("no {heading:?} in: {text}"));
    lines.next().map(str::trim).unwrap_or_else(|| panic!("nothing after {heading:?} in: {text}"))
}

/// Runs a printed line's variables with the debug binary and returns its JSON line's failure.
fn failure_of(line: &str, scratch: &std::path::Path) -> serde_json::Value {
    let words = shlex::split(line).expect("a printed line splits");
    let env: Vec<(String, String)> = words
        .iter()
        .map_while(|w| w.split_once('=').filter(|(k, _)| k.starts_with("SIM_")))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert!(words.ends_with(&["--".to_string(), "--seeds".to_string(), "300".to_string()]), "{line}");
    let json = scratch.join("replay.jsonl");
    let _ = std::fs::remove_file(&json);
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let json_text = json.display().to_string();
    all.extend([("SIM_JSON", json_text.as_str()), ("SIM_CONFIRM", "0")]);
    let (code, text) = main_job(&all, &["--seeds", "300"]);
    assert_eq!(code, Some(0), "the planted bug is found by the line {line}: {text}");
    let lines = std::fs::read_to_string(&json).expect("the line's run wrote its JSON line");
    let outcome: serde_json::Value =
        serde_json::from_str(lines.lines().next().expect("one JSON line")).expect("a JSON outcome");
    outcome["failure"].clone()
}

fn minimizes(line: &str, name: &str, oracle: &str) {
    let dir = scratch(name);
    let corpus = dir.display().to_string();
    let (code, text) = main_job(&[("SIM_CORPUS", &corpus)], &["minimize", line, "--shrink-runs", "60"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("removed (in the order removed):"), "{text}");
    assert!(text.contains("faults left:") && text.contains("operations:"), "the choices that matter: {text}");
    let smaller = line_after(&text, "smaller seed line");
    let knobs = ["SIM_SWARM=", "SIM_DROP_FAULTS=", "SIM_MAX_OPS="];
    assert!(knobs.iter().any(|k| smaller.contains(k)), "the smaller line keeps what it removed: {smaller}");
    let failure = failure_of(smaller, &dir);
    assert_eq!(
        (failure["class"].as_str(), failure["oracle"].as_str()),
        (Some("correctness"), Some(oracle)),
        "{smaller}"
    );
    let input = line_after(&text, "input line:");
    assert!(input.contains(&format!("SIM_FUZZ_INPUT={corpus}/artifacts/")), "saved under SIM_CORPUS: {input}");
    let failure = failure_of(input, &dir);
    assert_eq!((failure["class"].as_str(), failure["oracle"].as_str()), (Some("correctness"), Some(oracle)), "{input}");
    let sizes = text.lines().find(|l| l.starts_with("input: ")).expect("the input's sizes");
    let numbers: Vec<usize> = sizes.split_whitespace().filter_map(|w| w.parse().ok()).take(2).collect();
    assert!(numbers.len() == 2 && numbers[1] < numbers[0], "the input shrank: {sizes}");
    assert!(text.contains("seed line replays exactly (3 of 3)"), "{text}");
    assert!(text.contains("input line replays exactly (3 of 3)"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_planted_idempotency_bug_minimizes_to_a_smaller_line_that_fails_the_same_way_and_replays() {
    minimizes(SHOPPINGCART, "shoppingcart", "idempotency");
}

#[test]
fn a_planted_goaway_bug_minimizes_to_a_smaller_line_that_fails_the_same_way_and_replays() {
    minimizes(WALLET, "wallet", "goaway-first");
}

#[test]
fn bad_lines_are_refused_with_exit_2_and_what_is_wrong() {
    let refused = |line: &str, says: &[&str]| {
        let (code, text) = main_job(&[], &["minimize", line]);
        assert_eq!(code, Some(2), "{line}: {text}");
        for s in says {
            assert!(text.contains(s), "{line}: expected {s:?} in: {text}");
        }
    };
    refused(
        "SIM_SEED=11 SIM_ONLY=shopingcart cargo run",
        &["SIM_ONLY=shopingcart names no simulation", "shoppingcart_no_drain"],
    );
    refused("SIM_ONLY=shoppingcart_no_drain cargo run", &["no SIM_SEED"]);
    refused("SIM_SEED=7 cargo run -p walkthroughs", &["no SIM_ONLY"]);
    refused("SIM_SEED=seven SIM_ONLY=shoppingcart_no_drain", &["SIM_SEED=seven"]);
    refused("SIM_SEED=7 SIM_ONLY=shoppingcart_no_drain SIM_SHARD=1/2", &["SIM_SHARD is not a variable minimize reads"]);
    refused("SIM_SEED=7 SIM_ONLY=shoppingcart_no_drain SIM_SWARM=nope", &["SIM_SWARM=nope"]);
    refused("SIM_SEED=7 SIM_ONLY=shoppingcart_no_drain SIM_SWARM=no.such=1", &["no.such"]);
    refused("cargo run --release -p walkthroughs", &["starts with its variables"]);
}

#[test]
fn a_line_that_does_not_fail_exits_1() {
    let (code, text) = main_job(&[], &["minimize", "SIM_SEED=0 SIM_ONLY=shoppingcart cargo run -p walkthroughs"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("does not fail"), "{text}");
}
