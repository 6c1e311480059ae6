//! The linearizability checker against Porcupine on the same histories (a bench binary:
//! `cargo bench -p sim --bench linearizable`).
//!
//! Generates seeded key-value histories of the shape of Porcupine's and Jepsen's etcd/kv tests —
//! many clients running get / put / append on a few keys against a linearizable store with
//! random latencies, 1 % of the operations indeterminate (their effect lands late or never) —
//! some with one planted stale read. Writes each as JSON lines (the format
//! `sim/benches/porcupine/main.go` reads) under `target/sim-bench/linearizable/`, reads it back,
//! and times `linearizable::check` with `KvMap` (the median of a few runs; only the check).
//!
//! With a Go toolchain on the PATH it builds `sim/benches/porcupine` (Porcupine v1.3.1 from the
//! Go module proxy), checks the same files with it (default GOMAXPROCS, and GOMAXPROCS=1), and
//! prints both times and the ratio. The verdicts must agree: a disagreement, or a generated
//! history judged otherwise than it was built (correct ones linearizable, planted ones not),
//! panics. Without Go it says "skipped: no Go toolchain" and times ours only.
//!
//! `--quick` runs fewer repetitions; `--runs N` sets them (default 5); `--only TEXT` keeps the
//! histories whose name contains TEXT.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sim::check::linearizable::{self, KvCommand, KvMap, KvOp, KvOut, Limits, Op, Return, Validity};

/// One generated history's shape.
struct Shape {
    name: &'static str,
    seed: u64,
    clients: u64,
    keys: u64,
    ops: u64,
    /// Operations that are indeterminate, per mille.
    unknown_per_mille: u64,
    /// The operations drawn.
    mix: Mix,
    /// Plant one stale read (the history is then not linearizable).
    stale_read: bool,
}

/// Which operations a history draws.
#[derive(Clone, Copy)]
enum Mix {
    /// Porcupine's kv tests: 50 % get, 25 % put, 25 % append.
    GetPutAppend,
    /// Jepsen's etcd register tests: 40 % read, 30 % write, 30 % compare-and-set.
    GetPutCas,
}

const fn shape(name: &'static str, seed: u64, clients: u64, keys: u64, ops: u64, mix: Mix, stale_read: bool) -> Shape {
    Shape { name, seed, clients, keys, ops, unknown_per_mille: 10, mix, stale_read }
}

const SHAPES: &[Shape] = &[
    shape("kv-c10-k4-2k", 1, 10, 4, 2_000, Mix::GetPutAppend, false),
    shape("kv-c50-k8-10k", 2, 50, 8, 10_000, Mix::GetPutAppend, false),
    shape("kv-c100-k16-50k", 3, 100, 16, 50_000, Mix::GetPutAppend, false),
    shape("kv-c5-k1-1k", 4, 5, 1, 1_000, Mix::GetPutAppend, false),
    shape("kv-c10-k1-1k", 5, 10, 1, 1_000, Mix::GetPutAppend, false),
    shape("etcd-c5-k1-1k", 6, 5, 1, 1_000, Mix::GetPutCas, false),
    shape("etcd-c10-k1-2k", 7, 10, 1, 2_000, Mix::GetPutCas, false),
    shape("etcd-c50-k8-10k", 8, 50, 8, 10_000, Mix::GetPutCas, false),
    shape("kv-c10-k4-2k-stale", 11, 10, 4, 2_000, Mix::GetPutAppend, true),
    shape("kv-c50-k8-10k-stale", 12, 50, 8, 10_000, Mix::GetPutAppend, true),
    shape("kv-c5-k1-1k-stale", 14, 5, 1, 1_000, Mix::GetPutAppend, true),
    shape("etcd-c5-k1-1k-stale", 16, 5, 1, 1_000, Mix::GetPutCas, true),
    shape("etcd-c50-k8-10k-stale", 18, 50, 8, 10_000, Mix::GetPutCas, true),
];

/// The search's bounds here: a history neither checker decides in about this time is reported
/// as unknown by both.
const LIMITS: Limits = Limits { steps_max: 20_000_000, cache_bytes_max: 1 << 29 };
/// Porcupine's bound (its `-timeout`).
const PORCUPINE_TIMEOUT: &str = "20s";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One generated operation before its outputs are known.
struct Gen {
    client: u64,
    call: u64,
    ret: Option<u64>,
    /// When it took effect (ns), if it did.
    effect: Option<u64>,
    key: String,
    command: KvCommand,
    output: Option<Option<Arc<str>>>,
    /// A compare-and-set's answer.
    wrote: bool,
}

/// A history of a linearizable store: each operation takes effect at a random instant inside
/// its interval (an indeterminate one: inside or after it, or never), outputs computed in that
/// order. Times in nanoseconds.
fn generate(shape: &Shape) -> Vec<Gen> {
    let mut rng = Rng(shape.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut free_at: Vec<u64> = (0..shape.clients).map(|c| c * 100_000).collect();
    let mut ops = Vec::with_capacity(shape.ops as usize);
    let mut last_puts: std::collections::BTreeMap<String, Vec<Arc<str>>> = Default::default();
    for n in 0..shape.ops {
        let client = (0..shape.clients).min_by_key(|&c| (free_at[c as usize], c)).expect("clients > 0");
        let call = free_at[client as usize] + rng.below(2_000_000);
        let latency = 1_000_000 + rng.below(9_000_000);
        let key = format!("k{}", rng.below(shape.keys));
        let command = match (shape.mix, rng.below(10)) {
            (Mix::GetPutAppend, 0..=4) | (Mix::GetPutCas, 0..=3) => KvCommand::Get,
            (Mix::GetPutAppend, 5..=7) | (Mix::GetPutCas, 4..=6) => KvCommand::Put(format!("p{n}.").into()),
            (Mix::GetPutAppend, _) => KvCommand::Append(format!("a{n}.").into()),
            (Mix::GetPutCas, _) => {
                // Expect one of the key's last few written values (or absence): some win.
                let written = last_puts.entry(key.clone()).or_default();
                let expected = match rng.below(written.len() as u64 + 1) {
                    0 => None,
                    i => Some(written[written.len() - i as usize].clone()),
                };
                KvCommand::Cas { expected, new: format!("c{n}.").into() }
            }
        };
        if let KvCommand::Put(v) | KvCommand::Cas { new: v, .. } = &command {
            let written = last_puts.entry(key.clone()).or_default();
            written.push(v.clone());
            if written.len() > 3 {
                written.remove(0);
            }
        }
        let (ret, effect) = if rng.below(1000) < shape.unknown_per_mille {
            let effect = (rng.below(2) == 0).then(|| call + rng.below(5 * latency));
            (None, effect)
        } else {
            (Some(call + latency), Some(call + rng.below(latency + 1)))
        };
        free_at[client as usize] = call + latency;
        ops.push(Gen { client, call, ret, effect, key, command, output: None, wrote: false });
    }
    let mut order: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].effect.is_some()).collect();
    order.sort_by_key(|&i| (ops[i].effect, i));
    let mut store: std::collections::BTreeMap<String, Arc<str>> = Default::default();
    for i in order {
        let op = &mut ops[i];
        let current = store.get(&op.key).cloned();
        match &op.command {
            KvCommand::Get => op.output = Some(current),
            KvCommand::Put(v) => {
                store.insert(op.key.clone(), v.clone());
            }
            KvCommand::Append(v) => {
                let joined: Arc<str> = format!("{}{v}", current.as_deref().unwrap_or("")).into();
                store.insert(op.key.clone(), joined);
            }
            KvCommand::Cas { expected, new } => {
                let wrote = current == *expected;
                if wrote {
                    store.insert(op.key.clone(), new.clone());
                }
                op.wrote = wrote;
            }
        }
    }
    if shape.stale_read {
        plant_stale_read(&mut ops);
    }
    ops
}

/// Makes one completed get, late in the history, return a value its key held before a put that
/// returned before the get was called (every put writes a value no other write does, so no
/// order explains it).
fn plant_stale_read(ops: &mut [Gen]) {
    for g in (ops.len() / 2..ops.len()).rev() {
        if !matches!(ops[g].command, KvCommand::Get) || ops[g].ret.is_none() {
            continue;
        }
        let (key, call) = (ops[g].key.clone(), ops[g].call);
        // A put to the key that returned before the get's call, and a value read before that put
        // was called (absence too: no operation deletes a key).
        let puts: Vec<usize> = (0..ops.len())
            .rev()
            .filter(|&p| {
                ops[p].key == key && matches!(ops[p].command, KvCommand::Put(_)) && ops[p].ret.is_some_and(|r| r < call)
            })
            .collect();
        for put in puts {
            let stale = ops.iter().find_map(|o| match (&o.command, &o.output) {
                (KvCommand::Get, Some(v)) if o.key == key && o.ret.is_some_and(|r| r < ops[put].call) => {
                    Some(v.clone())
                }
                _ => None,
            });
            if let Some(stale) = stale {
                ops[g].output = Some(stale);
                return;
            }
        }
    }
    panic!("no get to make stale in the generated history");
}

fn to_json(op: &Gen) -> Value {
    let mut line = json!({ "client": op.client, "call": op.call, "ret": op.ret, "key": op.key });
    match &op.command {
        KvCommand::Get => {
            line["op"] = "get".into();
            if op.ret.is_some() {
                line["output"] = op.output.clone().flatten().map(|v| v.to_string()).into();
            }
        }
        KvCommand::Put(v) => {
            line["op"] = "put".into();
            line["value"] = v.to_string().into();
        }
        KvCommand::Append(v) => {
            line["op"] = "append".into();
            line["value"] = v.to_string().into();
        }
        KvCommand::Cas { expected, new } => {
            line["op"] = "cas".into();
            line["expected"] = expected.as_deref().map(str::to_string).into();
            line["value"] = new.to_string().into();
            if op.ret.is_some() {
                line["wrote"] = op.wrote.into();
            }
        }
    }
    line
}

/// Reads a history file back (the format of `sim/benches/porcupine/main.go`).
fn read_history(path: &Path) -> Vec<Op<KvOp, KvOut>> {
    let text = std::fs::read_to_string(path).expect("history file written above");
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON line written above");
            let s = |f: &str| v[f].as_str().map(str::to_string);
            let key = s("key").expect("key");
            let value = s("value").unwrap_or_default();
            let (input, output) = match v["op"].as_str().expect("op") {
                "get" => (KvOp::get(&key), KvOut::value(v["output"].as_str())),
                "put" => (KvOp::put(&key, &value), KvOut::Done),
                "append" => (KvOp::append(&key, &value), KvOut::Done),
                "cas" => {
                    (KvOp::cas(&key, v["expected"].as_str(), &value), KvOut::Cas(v["wrote"].as_bool().unwrap_or(false)))
                }
                other => panic!("unknown op {other}"),
            };
            let call = Duration::from_nanos(v["call"].as_u64().expect("call"));
            let client = format!("c{}", v["client"]);
            match v["ret"].as_u64() {
                Some(ret) => Op::ok(client, call, Duration::from_nanos(ret), input, output),
                None => Op { client, call, input, ret: Return::Unknown },
            }
        })
        .collect()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn verdict_name(v: &Validity) -> &'static str {
    match v {
        Validity::Linearizable => "Ok",
        Validity::NotLinearizable(_) => "Illegal",
        Validity::Unknown(_) => "Unknown",
    }
}

struct Porcupine {
    verdict: String,
    median: Duration,
}

/// Builds the Porcupine program; `Err` says why it cannot run.
fn build_porcupine(out: &Path) -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/porcupine");
    let binary = out.join("porcupine-check");
    let status = Command::new("go").arg("build").arg("-o").arg(&binary).arg(".").current_dir(&dir).status();
    match status {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err("skipped: no Go toolchain".into()),
        Err(e) => Err(format!("skipped: go build failed to start: {e}")),
        Ok(s) if !s.success() => Err(format!("skipped: go build failed ({s}) in {}", dir.display())),
        Ok(_) => Ok(binary),
    }
}

fn run_porcupine(binary: &Path, files: &[PathBuf], runs: usize, gomaxprocs: Option<u32>) -> Vec<Porcupine> {
    let mut cmd = Command::new(binary);
    cmd.arg("-runs").arg(runs.to_string()).arg("-timeout").arg(PORCUPINE_TIMEOUT).args(files);
    if let Some(n) = gomaxprocs {
        cmd.env("GOMAXPROCS", n.to_string());
    }
    let output = cmd.output().expect("the Porcupine program was just built");
    assert!(output.status.success(), "porcupine: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("porcupine prints JSON lines");
            Porcupine {
                verdict: v["verdict"].as_str().expect("verdict").to_string(),
                median: Duration::from_nanos(v["median_ns"].as_u64().expect("median_ns")),
            }
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut runs = if args.iter().any(|a| a == "--quick") { 3 } else { 5 };
    if let Some(i) = args.iter().position(|a| a == "--runs") {
        runs = args.get(i + 1).and_then(|n| n.parse().ok()).expect("--runs N");
    }
    let only = args.iter().position(|a| a == "--only").map(|i| args.get(i + 1).expect("--only TEXT").clone());
    let shapes: Vec<&Shape> =
        SHAPES.iter().filter(|s| only.as_ref().is_none_or(|o| s.name.contains(o.as_str()))).collect();
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/sim-bench/linearizable");
    std::fs::create_dir_all(&out).expect("create the bench output directory");

    // Porcupine runs right after ours on each file, so both see the machine in the same state.
    let binary = match build_porcupine(&out) {
        Ok(binary) => Some(binary),
        Err(why) => {
            println!("porcupine: {why}");
            None
        }
    };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for shape in &shapes {
        let path = out.join(format!("{}.jsonl", shape.name));
        let lines: Vec<String> = generate(shape).iter().map(|op| to_json(op).to_string()).collect();
        std::fs::write(&path, lines.join("\n") + "\n").expect("write the history file");
        let history = read_history(&path);
        let mut times = Vec::new();
        let mut verdict = None;
        for _ in 0..runs {
            let start = Instant::now();
            let v = linearizable::check_with(&KvMap, &history, &LIMITS).expect("well-formed");
            times.push(start.elapsed());
            let unknown = matches!(v, Validity::Unknown(_));
            verdict = Some(v);
            if unknown {
                break;
            }
        }
        let verdict = verdict.expect("runs > 0");
        let expected = if shape.stale_read { "Illegal" } else { "Ok" };
        assert!(
            matches!(verdict_name(&verdict), "Unknown") || verdict_name(&verdict) == expected,
            "{}: generated {} but checked {verdict:?}",
            shape.name,
            if shape.stale_read { "with a stale read" } else { "linearizable" }
        );
        ours.push((verdict_name(&verdict), median(times), history.len()));
        if let Some(binary) = &binary {
            let parallel = run_porcupine(binary, std::slice::from_ref(&path), runs, None).remove(0);
            let single = run_porcupine(binary, std::slice::from_ref(&path), runs, Some(1)).remove(0);
            theirs.push((parallel, single));
        }
    }

    let porcupine = binary.map(|_| theirs);

    println!("linearizability check, median of {runs} runs (files in {})", out.display());
    println!(
        "{:<22} {:>6} {:>16} {:>12} {:>12} {:>8} {:>12} {:>8}",
        "history", "ops", "sim/porc/porc1", "sim", "porcupine", "ratio", "porc(1 cpu)", "ratio"
    );
    let (mut agree, mut undecided) = (0, 0);
    for (i, shape) in shapes.iter().enumerate() {
        let (verdict, ours_time, ops) = ours[i];
        match &porcupine {
            Some(theirs) => {
                let (p, p1) = (&theirs[i].0, &theirs[i].1);
                for (who, theirs) in [("porcupine", &p.verdict), ("porcupine (1 cpu)", &p1.verdict)] {
                    if theirs != "Unknown" && verdict != "Unknown" {
                        assert_eq!(theirs, verdict, "{}: {who} says {theirs}, sim says {verdict}", shape.name);
                    }
                }
                if p.verdict != "Unknown" && verdict != "Unknown" {
                    agree += 1;
                } else {
                    undecided += 1;
                }
                println!(
                    "{:<22} {:>6} {:>16} {:>12} {:>12} {:>7.1}x {:>12} {:>7.1}x",
                    shape.name,
                    ops,
                    format!("{verdict}/{}/{}", p.verdict, p1.verdict),
                    format!("{ours_time:.2?}"),
                    format!("{:.2?}", p.median),
                    p.median.as_secs_f64() / ours_time.as_secs_f64(),
                    format!("{:.2?}", p1.median),
                    p1.median.as_secs_f64() / ours_time.as_secs_f64(),
                );
            }
            None => println!("{:<22} {:>6} {:>16} {:>12}", shape.name, ops, verdict, format!("{ours_time:.2?}")),
        }
    }
    if porcupine.is_some() {
        println!(
            "verdicts agree with porcupine on {agree} of {} histories ({undecided} left undecided by one of them: \
             sim's Limits {{ steps_max: {}, cache_bytes_max: {} }}, porcupine's timeout {PORCUPINE_TIMEOUT})",
            shapes.len(),
            LIMITS.steps_max,
            LIMITS.cache_bytes_max
        );
    }
}
