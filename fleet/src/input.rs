//! Reading the inputs: JSON-lines files, and directories searched for them.
//!
//! An INPUT is a file (read whatever its name) or a directory, searched recursively (in name
//! order, symlinked directories not followed) for `*.jsonl` and `*.json` files. A directory that
//! holds an earlier report (`summary.md` and `signatures.json`, as [`crate::output`] writes
//! them) is skipped when found under an INPUT, and only its `outcomes.jsonl` is read when it is
//! an INPUT itself (its `signatures.json` is one JSON document, not lines); the directories
//! named `sim` found on the way are remembered for [`crate::trace`] (a shard uploads its
//! `target/sim` traces next to its JSON lines). One line is one seed's outcome as `sim` writes it
//! with `SIM_JSON` ([`sim::Outcome`] flattened with `signature`, `identity`, `mode`, `shard`,
//! `seed_base`; lines without the newer fields are accepted). A line that does not parse is
//! counted and named (file:line), never fatal; blank lines are skipped. The same run reported
//! twice (same simulation, seed, mode, swarm, commit and history hash: a file given twice, or an
//! artifact downloaded into two places) is kept once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sim::Outcome;
use sim::report::Identity;

use crate::Error;

/// The most malformed lines remembered one by one (all are counted).
pub const MALFORMED_KEPT_MAX: usize = 1000;

/// One seed's outcome, as read from a line.
#[derive(Clone, Debug)]
pub struct Record {
    /// The outcome (`sim`'s fields).
    pub outcome: Outcome,
    /// The failure's signature: the line's `signature`, else [`sim::signature::of`] its
    /// failure; `None` when the seed passed (or its violation was excused).
    pub signature: Option<String>,
    /// `replay` or `explore`: the line's `mode`, else `explore` when its replay line sets
    /// `SIM_MODE=explore`, else `replay`.
    pub mode: String,
    /// `SIM_SHARD`'s `i/n`, when the line names one.
    pub shard: Option<String>,
    /// The build-derived seed base (16 hex digits), when the line names one.
    pub seed_base: Option<String>,
    /// The build that ran, when the line names it.
    pub identity: Option<Identity>,
    /// The commit as reports print it (`1a2b3c4d5e6f`, `+dirty` appended), or `unknown`.
    pub commit: String,
    /// Where the line was read.
    pub origin: Origin,
    /// The line as read (without its newline), for `outcomes.jsonl`.
    pub text: String,
}

/// Where a line was read: an index into [`Inputs::files`] and the 1-based line number.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// Index into [`Inputs::files`].
    pub file: usize,
    /// 1-based line number.
    pub line: usize,
}

/// A line that did not parse.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Malformed {
    /// `file:line`.
    pub at: String,
    /// What serde_json said.
    pub error: String,
}

/// Everything read from the inputs.
#[derive(Debug, Default)]
pub struct Inputs {
    /// The INPUT paths as given.
    pub roots: Vec<PathBuf>,
    /// The files read, in reading order.
    pub files: Vec<PathBuf>,
    /// Directories named `sim` found under the directory inputs.
    pub sim_dirs: Vec<PathBuf>,
    /// Directories holding an earlier report, found under the inputs and skipped.
    pub skipped_reports: Vec<PathBuf>,
    /// One record per distinct run, in reading order.
    pub records: Vec<Record>,
    /// Non-blank lines read (parsed or not, duplicates included).
    pub lines: usize,
    /// Lines dropped as a repeat of a run already read.
    pub duplicates: usize,
    /// Lines that did not parse (all of them).
    pub malformed_count: usize,
    /// The first [`MALFORMED_KEPT_MAX`] of them.
    pub malformed: Vec<Malformed>,
}

/// The fields of a line beyond [`Outcome`]'s.
#[derive(serde::Deserialize)]
struct Wire {
    #[serde(flatten)]
    outcome: Outcome,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    shard: Option<String>,
    #[serde(default)]
    seed_base: Option<String>,
    #[serde(default)]
    identity: Option<Identity>,
}

/// A parsed line, before it is given an [`Origin`].
pub struct Parsed {
    outcome: Outcome,
    signature: Option<String>,
    mode: String,
    shard: Option<String>,
    seed_base: Option<String>,
    identity: Option<Identity>,
}

/// Parses one JSON line (see the module docs for the fields and their defaults).
///
/// Errors: serde_json's, naming the missing field or the column.
pub fn parse_line(text: &str) -> Result<Parsed, serde_json::Error> {
    let wire: Wire = serde_json::from_str(text)?;
    let signature = if wire.outcome.failed() {
        wire.signature
            .filter(|s| !s.is_empty())
            .or_else(|| wire.outcome.failure.as_ref().map(|f| sim::signature::of(&wire.outcome.simulation, f)))
    } else {
        None
    };
    let mode = wire.mode.filter(|m| !m.is_empty()).unwrap_or_else(|| {
        if wire.outcome.replay.contains("SIM_MODE=explore") { "explore" } else { "replay" }.to_string()
    });
    Ok(Parsed {
        outcome: wire.outcome,
        signature,
        mode,
        shard: wire.shard.filter(|s| !s.is_empty()),
        seed_base: wire.seed_base.filter(|s| !s.is_empty()),
        identity: wire.identity,
    })
}

impl Parsed {
    /// The record, read at `origin`.
    pub fn at(self, origin: Origin, text: &str) -> Record {
        let commit = match &self.identity {
            Some(id) => {
                format!("{}{}", id.commit.get(..12).unwrap_or(&id.commit), if id.dirty { "+dirty" } else { "" })
            }
            None => "unknown".to_string(),
        };
        Record {
            commit,
            outcome: self.outcome,
            signature: self.signature,
            mode: self.mode,
            shard: self.shard,
            seed_base: self.seed_base,
            identity: self.identity,
            origin,
            text: text.to_string(),
        }
    }
}

/// Whether two records are the same run (see the module docs).
fn same_run(a: &Record, b: &Record) -> bool {
    a.outcome.seed == b.outcome.seed
        && a.outcome.history_hash == b.outcome.history_hash
        && a.outcome.simulation == b.outcome.simulation
        && a.mode == b.mode
        && a.outcome.swarm == b.outcome.swarm
        && a.commit == b.commit
}

/// A hash of what [`same_run`] compares.
fn run_fingerprint(r: &Record) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3Default::new();
    for part in [r.outcome.simulation.as_str(), &r.mode, &r.outcome.swarm, &r.commit] {
        h.update(part.as_bytes());
        h.update(&[0xff]);
    }
    h.update(&r.outcome.seed.0.to_le_bytes());
    h.update(&r.outcome.history_hash.to_le_bytes());
    h.digest()
}

/// One file's lines: parsed records, and malformed lines (`line`, error).
type FileLines = (Vec<Record>, Vec<(usize, String)>, usize);

fn read_file(index: usize, path: &Path) -> Result<FileLines, Error> {
    // Bytes, not a string: a shard killed mid-write can cut a multi-byte character, and that
    // line alone is malformed (the rest of the file still merges).
    let bytes = std::fs::read(path).map_err(Error::io(path))?;
    let (mut records, mut malformed, mut lines) = (Vec::new(), Vec::new(), 0);
    for (n, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let Ok(line) = std::str::from_utf8(raw) else {
            lines += 1;
            malformed.push((n + 1, "not UTF-8 (a line cut mid-write?)".to_string()));
            continue;
        };
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        lines += 1;
        match parse_line(line) {
            Ok(parsed) => records.push(parsed.at(Origin { file: index, line: n + 1 }, line)),
            Err(e) => malformed.push((n + 1, e.to_string())),
        }
    }
    Ok((records, malformed, lines))
}

/// Reads and parses the files on all cores (files are independent); results in file order.
fn read_files(files: &[PathBuf]) -> Vec<Result<FileLines, Error>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, Result<FileLines, Error>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = files.get(i) else { break done };
                        done.push((i, read_file(i, path)));
                    }
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a reader thread does not panic")).collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Reads every INPUT; files and directories under `exclude` (the report's own directory) are
/// skipped.
///
/// Errors: [`Error::MissingInput`] for an INPUT that does not exist, [`Error::Io`] for one that
/// cannot be read, [`Error::NoLines`] when no line parsed.
pub fn read(roots: &[PathBuf], exclude: Option<&Path>) -> Result<Inputs, Error> {
    let exclude = exclude.and_then(|p| std::fs::canonicalize(p).ok());
    let mut inputs = Inputs { roots: roots.to_vec(), ..Inputs::default() };
    for root in roots {
        let meta = std::fs::metadata(root).map_err(|_| Error::MissingInput(root.clone()))?;
        if meta.is_dir() && holds_report(root) {
            let outcomes = root.join(crate::OUTCOMES);
            if outcomes.is_file() {
                inputs.files.push(outcomes);
            }
        } else if meta.is_dir() {
            walk(root, exclude.as_deref(), &mut inputs)?;
        } else {
            inputs.files.push(root.clone());
        }
    }
    // A fingerprint's first record; records whose fingerprint collided with a different run's.
    let mut seen: HashMap<u64, usize, xxhash_rust::xxh3::Xxh3DefaultBuilder> = HashMap::default();
    let mut collided: Vec<usize> = Vec::new();
    for (index, result) in read_files(&inputs.files).into_iter().enumerate() {
        let (records, malformed, lines) = result?;
        inputs.lines += lines;
        inputs.malformed_count += malformed.len();
        let room = MALFORMED_KEPT_MAX.saturating_sub(inputs.malformed.len());
        let path = inputs.files[index].display().to_string();
        inputs
            .malformed
            .extend(malformed.into_iter().take(room).map(|(n, error)| Malformed { at: format!("{path}:{n}"), error }));
        for record in records {
            let next = inputs.records.len();
            let first = *seen.entry(run_fingerprint(&record)).or_insert(next);
            let repeat = first != next
                && (same_run(&inputs.records[first], &record)
                    || collided.iter().any(|&i| same_run(&inputs.records[i], &record)));
            if repeat {
                inputs.duplicates += 1;
            } else {
                if first != next {
                    collided.push(next);
                }
                inputs.records.push(record);
            }
        }
    }
    if inputs.records.is_empty() {
        return Err(Error::NoLines { files: inputs.files.len(), malformed: inputs.malformed_count });
    }
    Ok(inputs)
}

/// Whether `dir` holds a report `fleet merge` wrote (its `summary.md` and `signatures.json`).
pub fn holds_report(dir: &Path) -> bool {
    [crate::SUMMARY, crate::SIGNATURES].iter().all(|name| dir.join(name).is_file())
}

/// Collects `*.jsonl`/`*.json` files and `sim` directories under `dir`, in name order; the
/// report directory being written and earlier reports are skipped.
fn walk(dir: &Path, exclude: Option<&Path>, inputs: &mut Inputs) -> Result<(), Error> {
    if exclude.is_some_and(|x| std::fs::canonicalize(dir).is_ok_and(|d| d == x)) {
        return Ok(());
    }
    if holds_report(dir) {
        inputs.skipped_reports.push(dir.to_path_buf());
        return Ok(());
    }
    if dir.file_name().is_some_and(|n| n == "sim") {
        inputs.sim_dirs.push(dir.to_path_buf());
    }
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).map_err(Error::io(dir))?.collect::<Result<Vec<_>, _>>().map_err(Error::io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type().map_err(Error::io(&path))?;
        if kind.is_dir() {
            walk(&path, exclude, inputs)?;
        } else if path.extension().is_some_and(|e| e == "jsonl" || e == "json") && path.is_file() {
            inputs.files.push(path);
        }
    }
    Ok(())
}
