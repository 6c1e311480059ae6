//! Bad environment values give clear errors, never a silent no-op: each case runs this test
//! binary again (the `probe` test) with the variable set, in its own process.

use std::process::Command;

use sim::Simulation;

/// The simulation the cases run; only does something when `ENV_PROBE` is set.
#[test]
fn probe() {
    if std::env::var_os("ENV_PROBE").is_none() {
        return;
    }
    let report = Simulation::new("probe").seeds(0..4).confirm(0).run(|ctx| async move {
        let _ = ctx.swarm().int("replicas", 1..=3);
        Ok(())
    });
    report.assert_passed();
}

/// Runs the probe with `vars`; returns (success, stderr).
fn probe_with(vars: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let mut command = Command::new(exe);
    command.args(["probe", "--exact", "--nocapture"]).env("ENV_PROBE", "1");
    for (k, v) in vars {
        command.env(k, v);
    }
    let output = command.output().expect("runs");
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn unparsable_values_are_errors_naming_the_variable() {
    for (var, value, expected) in [
        ("SIM_SEEDS", "0..", "SIM_SEEDS=\"0..\": expected"),
        ("SIM_SEEDS", "1,,3", "SIM_SEEDS=\"1,,3\": expected"),
        ("SIM_SEED", "seven", "SIM_SEED=\"seven\": expected"),
        ("SIM_SHARD", "3/2", "SIM_SHARD=\"3/2\": expected"),
        ("SIM_WATCHDOG", "0s", "SIM_WATCHDOG=\"0s\": expected a positive duration"),
        ("SIM_MODE", "fast", "SIM_MODE=\"fast\": expected"),
        ("SIM_TRACE", "ALWAYS", "SIM_TRACE=\"ALWAYS\": expected"),
        ("SIM_SEED_LINES", "maybe", "SIM_SEED_LINES=\"maybe\": expected"),
        ("SIM_LOG", "info,foo=notalevel", "SIM_LOG=\"info,foo=notalevel\": expected"),
        ("SIM_SWARM", "replicas", "SIM_SWARM: expected name=value"),
        ("SIM_SWARM", "replicas=many", "cannot use \"many\" as an integer"),
        ("SIM_SWARM", "replcas=2", "does not draw: [\"replcas\"]"),
        ("SIM_JSON", "/", "SIM_JSON=\"/\": cannot append"),
    ] {
        let (ok, stderr) = probe_with(&[(var, value)]);
        assert!(!ok, "{var}={value} was accepted:\n{stderr}");
        assert!(stderr.contains(expected), "{var}={value}: no clear error ({expected:?}) in:\n{stderr}");
    }
}

#[test]
fn empty_and_huge_seed_sets_are_errors() {
    for (value, expected) in
        [("5..5", "no seeds to run"), ("random:0", "no seeds to run"), ("0..100000000000", "SEEDS_MAX")]
    {
        let (ok, stderr) = probe_with(&[("SIM_SEEDS", value)]);
        assert!(!ok && stderr.contains(expected), "SIM_SEEDS={value}:\n{stderr}");
    }
}

#[test]
fn sim_only_says_what_it_skipped() {
    let (ok, stderr) = probe_with(&[("SIM_ONLY", "prob")]);
    assert!(ok);
    assert!(stderr.contains("sim: probe: skipped (SIM_ONLY=prob)"), "{stderr}");
}

#[test]
fn a_shard_says_which_seeds_it_runs() {
    let (ok, stderr) = probe_with(&[("SIM_SHARD", "1/3")]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("(shard 1/3: 1 of 4 seeds)"), "{stderr}");
    assert!(stderr.contains("sim: seed 1 ") && !stderr.contains("sim: seed 0 "), "{stderr}");
}

#[test]
fn json_lines_carry_the_documented_fields() {
    let path = std::env::temp_dir().join(format!("sim-env-json-{}.jsonl", std::process::id()));
    let (ok, stderr) = probe_with(&[("SIM_JSON", path.to_str().expect("utf-8 path"))]);
    assert!(ok, "{stderr}");
    let text = std::fs::read_to_string(&path).expect("written");
    let _ = std::fs::remove_file(&path);
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("valid JSON")).collect();
    assert_eq!(lines.len(), 4);
    for line in &lines {
        for field in [
            "simulation",
            "seed",
            "class",
            "oracle",
            "history_hash",
            "schedule_hash",
            "events",
            "swarm",
            "replay",
            "identity",
        ] {
            assert!(line.get(field).is_some(), "missing {field}: {line}");
        }
        let hash = line["history_hash"].as_str().expect("hashes are hex strings");
        assert_eq!(hash.len(), 16);
    }
}
