//! A peer's own test suite against kafkasim: franz-go's `pkg/kgo` tests (the suite franz-go's
//! fake, kfake, passes), run with `go test` against kafkasim on loopback and compared with the
//! expected results in `fidelity/peer/kgo.txt`.
//!
//! - The module comes from the Go module proxy (`go mod download github.com/twmb/franz-go@VERSION`)
//!   and is copied to `target/peer/` (the module cache is read-only); nothing is committed.
//! - Every test is expected to pass unless `kgo.txt` names it: `fail NAME id: why` or
//!   `skip NAME id: why`, or `hang NAME id: why` for a test that never ends against kafkasim
//!   (skipped by name with `go test -skip`). The run fails when a test's result differs from that (a test that passed
//!   now fails, or a listed failure now passes or is skipped), so the list stays true.
//! - `KGO_COUNTERPART=kafka` with `KAFKA_BOOTSTRAP` runs the suite against that real broker
//!   instead and prints its results without comparing (to tell franz-go's own flakiness from
//!   kafkasim's). `KGO_BROKERS` sets kafkasim's broker count (default 1), `KGO_TEST_RECORDS` the
//!   records of the ETL tests (default here 20,000; franz-go's own default is 500,000).
//! - Without `go` on `PATH` the suite prints `skipped: no go toolchain` and passes, unless
//!   `FIDELITY_REQUIRE=1`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// The franz-go release whose suite runs.
const VERSION: &str = "v1.22.3";
const EXPECTED: &str = include_str!("../peer/kgo.txt");

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Pass,
    Fail,
    Skip,
    /// Never ends against kafkasim; not run.
    Hang,
}

impl Status {
    fn parse(s: &str) -> Option<Status> {
        match s {
            "pass" => Some(Status::Pass),
            "fail" => Some(Status::Fail),
            "skip" => Some(Status::Skip),
            "hang" => Some(Status::Hang),
            _ => None,
        }
    }
}

/// `kgo.txt`: test name → (status, id and reason).
fn expected() -> Result<BTreeMap<String, (Status, String)>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in EXPECTED.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.splitn(3, ' ');
        let (Some(status), Some(name), Some(why)) = (words.next(), words.next(), words.next()) else {
            return Err(format!("kgo.txt line {}: want `fail|skip NAME id: why`, got {line:?}", n + 1));
        };
        let status = Status::parse(status).ok_or_else(|| format!("kgo.txt line {}: unknown status {status}", n + 1))?;
        out.insert(name.to_string(), (status, why.to_string()));
    }
    Ok(out)
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The module's source, copied where `go test` may write.
fn module_copy(target: &Path) -> Result<PathBuf, String> {
    let dest = target.join(format!("franz-go@{VERSION}"));
    if dest.join("go.mod").exists() {
        return Ok(dest);
    }
    let json =
        run(Command::new("go").args(["mod", "download", "-json", &format!("github.com/twmb/franz-go@{VERSION}")]))?;
    let dir = json
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"Dir\": \"").and_then(|r| r.strip_suffix("\",")))
        .ok_or_else(|| format!("go mod download printed no Dir: {json}"))?;
    std::fs::create_dir_all(target).map_err(|e| e.to_string())?;
    let partial = target.join("partial");
    let _ = std::fs::remove_dir_all(&partial);
    run(Command::new("cp").arg("-r").arg(dir).arg(&partial))?;
    run(Command::new("chmod").args(["-R", "u+w"]).arg(&partial))?;
    std::fs::rename(&partial, &dest).map_err(|e| e.to_string())?;
    Ok(dest)
}

/// Each top-level test's result, and the output of those that failed.
fn results(json: &str) -> (BTreeMap<String, Status>, BTreeMap<String, String>) {
    let mut results = BTreeMap::new();
    let mut output: BTreeMap<String, String> = BTreeMap::new();
    for line in json.lines() {
        let field = |name: &str| -> Option<String> {
            let key = format!("\"{name}\":\"");
            let start = line.find(&key)? + key.len();
            let mut value = String::new();
            let mut chars = line[start..].chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => return Some(value),
                    '\\' => match chars.next()? {
                        'n' => value.push('\n'),
                        't' => value.push('\t'),
                        other => value.push(other),
                    },
                    c => value.push(c),
                }
            }
            None
        };
        let (Some(action), Some(test)) = (field("Action"), field("Test")) else { continue };
        let top = test.split('/').next().unwrap_or_default().to_string();
        match action.as_str() {
            "output" => output.entry(top).or_default().push_str(&field("Output").unwrap_or_default()),
            a if test == top => {
                if let Some(s) = Status::parse(a) {
                    results.insert(top, s);
                }
            }
            _ => {}
        }
    }
    output.retain(|t, _| results.get(t) != Some(&Status::Pass));
    (results, output)
}

fn main() -> ExitCode {
    let require = std::env::var("FIDELITY_REQUIRE").is_ok_and(|v| v == "1");
    if Command::new("go").arg("version").stdout(Stdio::null()).status().is_err() {
        println!("peer kgo: skipped: no go toolchain on PATH");
        return if require { ExitCode::FAILURE } else { ExitCode::SUCCESS };
    }
    match suite() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("peer kgo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn suite() -> Result<bool, String> {
    let expected = expected()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from).join("peer");
    let module = module_copy(&target)?;
    let real = std::env::var("KGO_COUNTERPART").is_ok_and(|v| v == "kafka");
    let brokers: i32 = std::env::var("KGO_BROKERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut _broker = None;
    let (seeds, against) = if real {
        let seeds = std::env::var("KAFKA_BOOTSTRAP").map_err(|_| "KGO_COUNTERPART=kafka needs KAFKA_BOOTSTRAP")?;
        (seeds.clone(), format!("Apache Kafka at {seeds}"))
    } else {
        let builder = kafkasim::Cluster::builder().brokers(brokers).initial_rebalance_delay(std::time::Duration::ZERO);
        let broker = kafkasim::Broker::start_local_with(builder).map_err(|e| format!("starting kafkasim: {e}"))?;
        let seeds = broker.bootstrap_servers().to_string();
        _broker = Some(broker);
        (seeds, format!("kafkasim ({brokers} broker{})", if brokers == 1 { "" } else { "s" }))
    };
    let records = std::env::var("KGO_TEST_RECORDS").unwrap_or_else(|_| "20000".into());
    println!("peer kgo: franz-go {VERSION} pkg/kgo tests against {against}, {records} records per ETL test");
    let started = Instant::now();
    // Tests listed as `hang` never end against kafkasim: they are skipped by name (and reported).
    let hangs: Vec<&str> = expected.iter().filter(|(_, (s, _))| *s == Status::Hang).map(|(t, _)| t.as_str()).collect();
    let mut args = vec!["test".to_string(), "-json".into(), "-count=1".into(), "-timeout".into(), "15m".into()];
    if !hangs.is_empty() && !real {
        args.push("-skip".into());
        args.push(format!("^({})$", hangs.join("|")));
    }
    args.push("./pkg/kgo".into());
    // The event stream goes to a file, so a long run can be followed (`tail -f`).
    let log = target.join(if real { "kgo-kafka.jsonl" } else { "kgo-kafkasim.jsonl" });
    let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let status = Command::new("go")
        .args(&args)
        .current_dir(&module)
        .env("KGO_SEEDS", &seeds)
        .env("KGO_TEST_RF", "1")
        .env("KGO_TEST_RECORDS", &records)
        .stdout(file)
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| format!("go test: {e}"))?;
    let json = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
    let (mut results, output) = results(&json);
    if results.is_empty() {
        return Err(format!("go test ran no test ({status}):\n{json}"));
    }
    if !real {
        for t in &hangs {
            results.insert((*t).to_string(), Status::Hang);
        }
    }
    let count = |s| results.values().filter(|&&r| r == s).count();
    println!(
        "peer kgo: {} tests in {:.0} s: {} passed, {} failed, {} skipped, {} not run (hang)",
        results.len(),
        started.elapsed().as_secs_f64(),
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Skip),
        count(Status::Hang)
    );
    let mut ok = true;
    for (test, got) in &results {
        let (want, why) = expected.get(test).cloned().unwrap_or((Status::Pass, String::new()));
        match (got, real) {
            (Status::Pass, _) => {}
            (_, true) => println!("  {got:?} {test}"),
            _ if *got == want => println!("  {got:?} {test} (expected: {why})"),
            _ => {}
        }
        if !real && *got != want {
            ok = false;
            println!("  UNEXPECTED: {test} {got:?}, expected {want:?} {why}");
            if let Some(text) = output.get(test) {
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                for l in tail.into_iter().rev() {
                    println!("    | {l}");
                }
            }
        }
    }
    if !real {
        for (test, (want, why)) in &expected {
            if !results.contains_key(test) {
                ok = false;
                println!("  UNEXPECTED: {test} did not run, expected {want:?} {why} (remove it from kgo.txt?)");
            }
        }
        println!(
            "peer kgo: {}",
            if ok {
                "every result as expected (fidelity/peer/kgo.txt)"
            } else {
                "results differ from fidelity/peer/kgo.txt"
            }
        );
    }
    Ok(ok)
}
