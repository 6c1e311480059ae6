//! The main job's binary as a user drives it: replay lines and `SIM_ONLY` typos.

use std::process::Command;

fn main_job(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walkthroughs"));
    cmd.args(args).env_remove("SIM_SEED").env_remove("SIM_SEEDS").env_remove("SIM_ONLY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the walkthroughs binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn a_sim_only_naming_no_simulation_is_refused_with_the_names() {
    let (code, text) = main_job(&[("SIM_ONLY", "shopingcart")], &["--seeds", "3"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("SIM_ONLY=shopingcart names no simulation here"), "{text}");
    assert!(text.contains("shoppingcart_non_atomic_idempotency"), "the names are listed: {text}");
}

#[test]
fn a_replay_line_copied_from_a_measuring_run_replays_and_skips_the_measurement() {
    let (code, text) = main_job(
        &[("SIM_SEED", "3"), ("SIM_ONLY", "wallet_cancel_before_goaway"), ("SIM_CONFIRM", "0")],
        &["--seeds", "300", "--measure", "2"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("seed 3: correctness [goaway-first]"), "{text}");
    assert!(text.contains("--measure skipped"), "{text}");
    assert!(!text.contains("median"), "no measurement from a replay: {text}");
}
