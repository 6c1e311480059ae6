//! The regression benchmark of real upstream bugs (`docs/src/real-bugs.md`).
//!
//! Each entry under `regressions/entries/<name>/` is a simulation a user could have written
//! before the bug was known, a package of its own (its own workspace and lockfile) whose
//! `[package.metadata.regression]` names the bug, the crate it pins and two releases: `buggy`
//! and `fixed` (no `fixed` for a bug still open, whose `buggy` is the current release). For each
//! release the runner copies the entry to `target/regressions/<name>-<variant>/`, resolves it,
//! pins the crate (`cargo update --precise`) and the entry's `pins`, builds it in release, sweeps
//! `--seeds N` seeds (each failing seed confirmed in three fresh processes), and prints a table:
//! found on the buggy release (failing seeds / N, the first, its class and oracle), quiet on the
//! fixed one (0 / N), how the failures replayed, wall time per seed. It exits non-zero when an
//! entry is not found on its buggy release or not quiet on its fixed one.
//!
//! ```text
//! cargo run --manifest-path regressions/runner/Cargo.toml -- [--seeds N] [--only NAME]...
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The line prefix of an entry's summary (the `regression` crate prints it).
const SUMMARY_PREFIX: &str = "regression-summary ";

#[derive(Debug)]
struct Options {
    seeds: u64,
    only: Vec<String>,
}

/// One entry's metadata.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    dir: PathBuf,
    package: String,
    bug: String,
    url: String,
    krate: String,
    buggy: String,
    fixed: Option<String>,
    /// `name@version` pins applied to both releases (what the pinned crate's era needs).
    pins: Vec<String>,
}

/// What one release of an entry did.
#[derive(Debug)]
struct Run {
    version: String,
    summary: Result<Value, String>,
    build: Duration,
    sweep: Duration,
    dir: PathBuf,
}

fn main() {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\nusage: regressions [--seeds N] [--only NAME]...");
            std::process::exit(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap_or(root);
    let entries = match load_entries(&root.join("regressions/entries"), &options.only) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("regressions: {e}");
            std::process::exit(2);
        }
    };
    let selected = entries;
    if selected.is_empty() {
        eprintln!("regressions: no entry matches {:?}", options.only);
        std::process::exit(2);
    }
    let started = Instant::now();
    let mut results = Vec::new();
    for entry in &selected {
        let mut runs = vec![run_release(&root, entry, "buggy", &entry.buggy, options.seeds)];
        if let Some(fixed) = &entry.fixed {
            runs.push(run_release(&root, entry, "fixed", fixed, options.seeds));
        }
        results.push((entry.clone(), runs));
    }
    let (table, ok) = render(&results, options.seeds, started.elapsed(), &target_dir(&root));
    println!("{table}");
    let json: Vec<Value> = results.iter().map(|(e, runs)| to_json(e, runs)).collect();
    let out = root.join("target/regressions/results.json");
    if let Err(e) = std::fs::write(&out, serde_json::to_string_pretty(&json).unwrap_or_default()) {
        eprintln!("regressions: could not write {}: {e}", out.display());
    }
    std::process::exit(if ok { 0 } else { 1 });
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options { seeds: 100, only: Vec::new() };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seeds" => {
                let v = args.next().ok_or("--seeds needs a number")?;
                options.seeds =
                    v.parse().ok().filter(|n| *n > 0).ok_or(format!("--seeds takes a positive number, not {v:?}"))?;
            }
            "--only" => options.only.push(args.next().ok_or("--only needs an entry name")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

/// Every `entries/<name>/Cargo.toml` (those named in `only`, when given), by name.
fn load_entries(dir: &Path, only: &[String]) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    let listing = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut dirs: Vec<PathBuf> =
        listing.filter_map(|d| d.ok().map(|d| d.path())).filter(|p| p.join("Cargo.toml").is_file()).collect();
    dirs.sort();
    dirs.retain(|d| {
        only.is_empty() || d.file_name().and_then(|n| n.to_str()).is_some_and(|n| only.iter().any(|o| o == n))
    });
    for dir in dirs {
        let output = Command::new("cargo")
            .args(["metadata", "--no-deps", "--format-version", "1", "--manifest-path"])
            .arg(dir.join("Cargo.toml"))
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
        if !output.status.success() {
            return Err(format!("cargo metadata failed for {}", dir.display()));
        }
        let meta: Value = serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
        let package = &meta["packages"][0];
        let m = &package["metadata"]["regression"];
        let field = |k: &str| m[k].as_str().map(str::to_string);
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let need = |k: &str| field(k).ok_or(format!("{name}: [package.metadata.regression] has no `{k}`"));
        entries.push(Entry {
            package: package["name"].as_str().unwrap_or_default().to_string(),
            bug: need("bug")?,
            url: need("url")?,
            krate: need("crate")?,
            buggy: need("buggy")?,
            fixed: field("fixed"),
            pins: m["pins"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            name,
            dir,
        });
    }
    Ok(entries)
}

/// Where the entries build: `$REGRESSIONS_TARGET_DIR`, else `target/regressions/target` (shared by
/// every entry and release: a crate built for one is reused by the next).
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("REGRESSIONS_TARGET_DIR").map_or_else(|| root.join("target/regressions/target"), PathBuf::from)
}

/// Copies, pins, builds and sweeps one release of an entry.
fn run_release(root: &Path, entry: &Entry, variant: &str, version: &str, seeds: u64) -> Run {
    let dir = root.join("target/regressions").join(format!("{}-{variant}", entry.name));
    let target = target_dir(root);
    eprintln!("== {} {variant}: {} {version}", entry.name, entry.krate);
    let started = Instant::now();
    let prepared = prepare(entry, &dir, &target, version);
    let build = started.elapsed();
    let summary = prepared.and_then(|()| {
        let started = Instant::now();
        let output = Command::new("cargo")
            .args(["run", "--quiet", "--release", "--bin", &entry.package, "--", "--seeds", &seeds.to_string()])
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("SIM_SEED")
            .env_remove("SIM_SEEDS")
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run the entry: {e}"))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text.lines().find_map(|l| l.strip_prefix(SUMMARY_PREFIX));
        let summary = match line {
            Some(json) => serde_json::from_str::<Value>(json).map_err(|e| format!("unreadable summary: {e}")),
            None => Err(format!("the entry printed no summary (exit {})", output.status)),
        };
        summary.map(|mut s| {
            s["sweep_secs"] = started.elapsed().as_secs_f64().into();
            s
        })
    });
    let sweep = Duration::from_secs_f64(summary.as_ref().ok().and_then(|s| s["sweep_secs"].as_f64()).unwrap_or(0.0));
    Run { version: version.to_string(), summary, build, sweep, dir }
}

/// The scratch copy at `dir`, resolved, with the crate at `version` and the pins applied, built.
fn prepare(entry: &Entry, dir: &Path, target: &Path, version: &str) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    copy_tree(&entry.dir, dir).map_err(|e| format!("cannot copy {}: {e}", entry.dir.display()))?;
    let cargo = |args: &[&str]| -> Result<(), String> {
        let status = Command::new("cargo")
            .args(args)
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", target)
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if status.success() { Ok(()) } else { Err(format!("`cargo {}` failed ({status})", args.join(" "))) }
    };
    cargo(&["generate-lockfile", "--quiet"])?;
    // Every locked copy of the crate goes to the version: a library of ours that accepts a range
    // (kubesim: kube >=0.91, <6) resolves to the newest release beside the entry's, until pinned.
    let pin = |name: &str, v: &str| -> Result<(), String> {
        for locked in locked_versions(&dir.join("Cargo.lock"), name) {
            if locked != v && locked_versions(&dir.join("Cargo.lock"), name).contains(&locked) {
                cargo(&["update", "--quiet", "-p", &format!("{name}@{locked}"), "--precise", v])?;
            }
        }
        Ok(())
    };
    for p in &entry.pins {
        let (name, v) = p.split_once('@').ok_or(format!("pin {p:?} is not name@version"))?;
        pin(name, v)?;
    }
    pin(&entry.krate, version)?;
    cargo(&["build", "--quiet", "--release", "--bin", &entry.package])
}

/// The versions of `name` a lockfile holds.
fn locked_versions(lock: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let wanted = format!("name = \"{name}\"");
    let mut lines = text.lines();
    let mut versions = Vec::new();
    while let Some(line) = lines.next() {
        if line == wanted
            && let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = \"")).and_then(|l| l.strip_suffix('"'))
        {
            versions.push(v.to_string());
        }
    }
    versions
}

/// Copies `from` to `to`, leaving out `target/` and `Cargo.lock`.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for item in std::fs::read_dir(from)? {
        let item = item?;
        let name = item.file_name();
        if name == "target" || name == "Cargo.lock" {
            continue;
        }
        let (src, dst) = (item.path(), to.join(&name));
        if item.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// "7 / 100, first 12: correctness [drain]"
fn found_cell(s: &Value) -> String {
    let failing = s["failing"].as_u64().unwrap_or(0);
    let seeds = s["seeds"].as_u64().unwrap_or(0);
    if failing == 0 {
        return format!("0 / {seeds}");
    }
    format!(
        "{failing} / {seeds}, first {}: {} [{}]",
        s["first_seed"].as_str().unwrap_or("?"),
        s["class"].as_str().unwrap_or("?"),
        s["oracle"].as_str().unwrap_or("-")
    )
}

/// "exactly, 7 of 7 seeds (3 of 3 processes each)" or the first seed's label.
fn replay_cell(s: &Value) -> String {
    let failing = s["failing"].as_u64().unwrap_or(0);
    if failing == 0 {
        return "-".to_string();
    }
    let exact = s["replayed_exactly"].as_u64().unwrap_or(0);
    if exact == failing {
        format!("exactly ({exact} of {failing} seeds, 3 of 3 processes each)")
    } else {
        format!("{exact} of {failing} seeds exactly; first: {}", s["replays"].as_str().unwrap_or("?"))
    }
}

/// The table and whether every entry did what it should.
fn render(results: &[(Entry, Vec<Run>)], seeds: u64, total: Duration, target: &Path) -> (String, bool) {
    let mut ok = true;
    let mut rows = vec![[
        "bug".to_string(),
        "versions (buggy → fixed)".to_string(),
        "found on buggy".to_string(),
        "quiet on fixed".to_string(),
        "replay".to_string(),
        "ms/seed".to_string(),
        "verdict".to_string(),
    ]];
    let mut notes = String::new();
    for (entry, runs) in results {
        let buggy = &runs[0];
        let fixed = runs.get(1);
        let versions = match fixed {
            Some(f) => format!("{} {} → {}", entry.krate, buggy.version, f.version),
            None => format!("{} {} (open)", entry.krate, buggy.version),
        };
        let (found, found_ok, replay) = match &buggy.summary {
            Ok(s) => (found_cell(s), s["failing"].as_u64().unwrap_or(0) > 0, replay_cell(s)),
            Err(e) => (format!("error: {e}"), false, "-".to_string()),
        };
        let (quiet, quiet_ok) = match fixed.map(|f| &f.summary) {
            None => ("(no fixed release)".to_string(), true),
            Some(Ok(s)) => (found_cell(s), s["failing"].as_u64() == Some(0)),
            Some(Err(e)) => (format!("error: {e}"), false),
        };
        let ms = runs
            .iter()
            .map(|r| {
                r.summary
                    .as_ref()
                    .ok()
                    .and_then(|s| s["wall_ms_per_seed"].as_f64())
                    .map_or("-".into(), |m| format!("{m:.1}"))
            })
            .collect::<Vec<_>>()
            .join(" / ");
        let verdict = match (found_ok, quiet_ok) {
            (true, true) if fixed.is_none() => "found (open bug)",
            (true, true) => "ok",
            (false, _) => "NOT FOUND",
            (true, false) => "NOT QUIET",
        };
        ok &= found_ok && quiet_ok;
        rows.push([entry.bug.clone(), versions, found, quiet, replay, ms, verdict.to_string()]);
        for (variant, run) in ["buggy", "fixed"].iter().zip(runs) {
            let _ = write!(
                notes,
                "\n{} {variant} ({} {}): built in {:.0} s, swept in {:.1} s",
                entry.name,
                entry.krate,
                run.version,
                run.build.as_secs_f64(),
                run.sweep.as_secs_f64()
            );
            if let Ok(s) = &run.summary
                && let Some(replay) = s["replay"].as_str()
            {
                let _ = write!(
                    notes,
                    "\n  {}\n  replay: (cd {} && CARGO_TARGET_DIR={} {replay})",
                    s["message"].as_str().unwrap_or(""),
                    run.dir.display(),
                    target.display()
                );
            }
        }
        let _ = write!(notes, "\n  {}", entry.url);
    }
    let widths: Vec<usize> = (0..7).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut table = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(table, "| {} |", cells.join(" | "));
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let _ = writeln!(table, "|-{}-|", rule.join("-|-"));
        }
    }
    let _ = write!(
        table,
        "{notes}\n\n{} entries, {seeds} seeds per release, {:.0} s in all",
        results.len(),
        total.as_secs_f64()
    );
    (table, ok)
}

fn to_json(entry: &Entry, runs: &[Run]) -> Value {
    let mut releases = BTreeMap::new();
    for (variant, run) in ["buggy", "fixed"].iter().zip(runs) {
        releases.insert(
            variant.to_string(),
            serde_json::json!({
                "version": run.version,
                "summary": run.summary.as_ref().map_or_else(|e| serde_json::json!({"error": e}), Clone::clone),
                "build_secs": run.build.as_secs_f64(),
                "sweep_secs": run.sweep.as_secs_f64(),
            }),
        );
    }
    serde_json::json!({"entry": entry.name, "bug": entry.bug, "url": entry.url, "crate": entry.krate, "releases": releases})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> impl Iterator<Item = String> {
        list.iter().map(|s| s.to_string()).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn arguments_take_seeds_and_entries_and_refuse_the_rest() {
        let o = parse_args(args(&["--seeds", "7", "--only", "a", "--only", "b"])).expect("valid");
        assert_eq!((o.seeds, o.only), (7, vec!["a".to_string(), "b".to_string()]));
        assert_eq!(parse_args(args(&[])).expect("defaults").seeds, 100);
        assert!(parse_args(args(&["--seeds", "0"])).is_err());
        assert!(parse_args(args(&["--seeds"])).is_err());
        assert!(parse_args(args(&["--fast"])).unwrap_err().contains("unknown argument"));
    }

    #[test]
    fn every_locked_copy_of_a_crate_is_found() {
        let dir = std::env::temp_dir().join(format!("regressions-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let lock = dir.join("Cargo.lock");
        std::fs::write(
            &lock,
            "[[package]]\nname = \"kube\"\nversion = \"0.92.1\"\n\n[[package]]\nname = \"kube-client\"\nversion = \
             \"5.0.0\"\n\n[[package]]\nname = \"kube\"\nversion = \"5.0.0\"\n",
        )
        .expect("write");
        assert_eq!(locked_versions(&lock, "kube"), vec!["0.92.1".to_string(), "5.0.0".to_string()]);
        assert_eq!(locked_versions(&lock, "kube-client"), vec!["5.0.0".to_string()]);
        assert!(locked_versions(&lock, "hyper").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cells_say_what_was_found_and_how_it_replayed() {
        let found = serde_json::json!({"seeds": 50, "failing": 3, "first_seed": "2", "class": "correctness",
            "oracle": "goaway-before-close", "replayed_exactly": 3});
        assert_eq!(found_cell(&found), "3 / 50, first 2: correctness [goaway-before-close]");
        assert_eq!(replay_cell(&found), "exactly (3 of 3 seeds, 3 of 3 processes each)");
        let partial =
            serde_json::json!({"seeds": 50, "failing": 2, "replayed_exactly": 1, "replays": "replays 0 of 3"});
        assert_eq!(replay_cell(&partial), "1 of 2 seeds exactly; first: replays 0 of 3");
        let quiet = serde_json::json!({"seeds": 50, "failing": 0});
        assert_eq!((found_cell(&quiet), replay_cell(&quiet)), ("0 / 50".to_string(), "-".to_string()));
    }
}
