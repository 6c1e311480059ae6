//! `fleet`: one report from the `SIM_JSON` lines of many shards, and triage of what is new.
//!
//! A fleet runs a sweep's seeds on many machines (a CI matrix, a Kubernetes Indexed Job), each
//! with `SIM_SHARD=i/n` and `SIM_JSON=<file>`, and uploads its JSON lines with its `target/sim`
//! traces. `fleet merge` reads them all and writes one report; `fleet triage` re-runs a failing
//! line in fresh processes. See `fleet/README.md` for the commands.
//!
//! | module | holds |
//! |---|---|
//! | [`input`] | reading JSON-lines files and directories; malformed lines; exact duplicates |
//! | [`merge`] | failures grouped by signature: counts, first and fastest seed, divergence across shards |
//! | [`canary`] | `--canary SIMULATION[:ORACLE]`: its syntax, and why one was not found |
//! | [`verdict`] | `--canary`, `--expected`, `--known`: each signature's status and the exit code |
//! | [`trace`] | a signature's trace tail, found again under the inputs by its `sim/…` suffix |
//! | [`triage`] | replay lines parsed into commands; fresh-process replays and explore seeds |
//! | [`summary`] | the Markdown summary, within a byte limit |
//! | [`output`] | the report directory: `summary.md`, `signatures.json`, `outcomes.jsonl` |
//!
//! The JSON line format is `sim`'s ([`sim::Outcome`] flattened, plus `class`, `oracle`,
//! `signature`, `identity`, `mode`, `shard`, `seed_base`); lines of an older `sim` without the
//! newer fields merge too (their signature is computed with [`sim::signature::of`]).

pub mod canary;
pub mod input;
pub mod merge;
pub mod output;
pub mod summary;
pub mod trace;
pub mod triage;
pub mod verdict;

use std::path::PathBuf;

// A report's file names: `output` writes them, `input` recognises an earlier report by them.
/// The summary's file name.
pub const SUMMARY: &str = "summary.md";
/// The file of every signature.
pub const SIGNATURES: &str = "signatures.json";
/// The file of every distinct input line.
pub const OUTCOMES: &str = "outcomes.jsonl";

/// What went wrong before a report could be written (all exit 3).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An INPUT named on the command line does not exist.
    #[error("input {} does not exist", .0.display())]
    MissingInput(PathBuf),
    /// The inputs held no JSON line at all (malformed ones aside).
    #[error("no JSON lines in the inputs ({files} files read, {malformed} malformed lines)")]
    NoLines {
        /// `*.jsonl`/`*.json` files read.
        files: usize,
        /// Lines that did not parse.
        malformed: usize,
    },
    /// A `--canary` value is not `SIMULATION[:ORACLE]`.
    #[error("--canary {value:?}: expected SIMULATION or SIMULATION:ORACLE ({reason})")]
    BadCanary {
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--summary-limit` is too small to hold the summary's head and its cut notice.
    #[error("--summary-limit {0}")]
    SummaryLimit(String),
    /// `fleet triage --line` was given neither a JSON line nor a file with a failing line.
    #[error("--line: {0}")]
    BadLine(String),
    /// Triage was asked for no runs (`--k 0`).
    #[error("--k 0 runs nothing: give K of 1 or more (4 is the triage rule)")]
    NoRuns,
    /// The program a replay line (or `--exec`) names cannot be started: not a verdict on the seed.
    #[error("cannot start {program:?}: {reason} (give the shipped binary with --exec PROGRAM)")]
    CannotStart {
        /// The program.
        program: String,
        /// Why.
        reason: String,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

/// The exit codes of `fleet merge` (and `fleet triage`, which uses 0, 1 and 3).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// No new failure, and every canary was found.
    Clean = 0,
    /// At least one new signature (`fleet triage`: a line that did not replay exactly).
    New = 1,
    /// A canary was not found (wins over [`Exit::New`]).
    CanaryMissing = 2,
    /// Bad usage, unreadable input, or no input lines.
    Usage = 3,
}

/// `fleet merge`'s options (see the README for their meaning).
#[derive(Clone, Debug)]
pub struct MergeOptions {
    /// JSON-lines files or directories.
    pub inputs: Vec<PathBuf>,
    /// The report directory.
    pub out: PathBuf,
    /// `--canary SIMULATION[:ORACLE]`.
    pub canaries: Vec<verdict::Canary>,
    /// `--expected SIMULATION`.
    pub expected: Vec<String>,
    /// `--known FILE`.
    pub known: Vec<PathBuf>,
    /// `--triage K`: fresh-process replays (and explore seeds) per new signature; 0 = none.
    pub triage: u32,
    /// `--exec PROGRAM`: what triage runs instead of the replay line's command.
    pub exec: Option<String>,
    /// `--summary-limit BYTES`.
    pub summary_limit: usize,
}

impl MergeOptions {
    /// The options `fleet merge INPUT... --out OUT` runs with: no canary, nothing expected or
    /// known, no triage, the default summary limit.
    pub fn new(inputs: Vec<PathBuf>, out: impl Into<PathBuf>) -> MergeOptions {
        MergeOptions {
            inputs,
            out: out.into(),
            canaries: Vec::new(),
            expected: Vec::new(),
            known: Vec::new(),
            triage: 0,
            exec: None,
            summary_limit: summary::LIMIT_DEFAULT,
        }
    }
}

/// What `fleet merge` found and wrote.
#[derive(Debug)]
pub struct MergeRun {
    /// What was read.
    pub inputs: input::Inputs,
    /// The signatures and totals (trace tails and triage filled in).
    pub merged: merge::Merged,
    /// Canaries and the exit code.
    pub verdict: verdict::Verdict,
    /// The Markdown summary written.
    pub summary: String,
}

impl MergeRun {
    /// The exit code.
    pub fn exit(&self) -> Exit {
        self.verdict.exit()
    }

    /// A few lines for the terminal: each signature's status, count and fastest replay line, the
    /// canaries, the verdict.
    pub fn console(&self, out: &std::path::Path) -> String {
        use std::fmt::Write as _;
        let t = &self.merged.totals;
        let mut text = format!(
            "fleet merge: {} lines, {} runs, {} malformed, {} signatures; shards: {}\n",
            t.lines,
            t.runs,
            t.malformed,
            self.merged.signatures.len(),
            summary::shards_seen(&t.shards, t.unsharded_runs)
        );
        for dir in &self.inputs.skipped_reports {
            let _ = writeln!(text, "  skipped {}: an earlier report (summary.md, signatures.json)", dir.display());
        }
        for s in &self.merged.signatures {
            let _ = writeln!(text, "  {:<8} {:>6}× {}", s.status.name(), s.count, s.signature);
            let _ = writeln!(text, "           fastest seed {}: {}", s.fastest.seed, s.fastest.replay);
            if let Some(t) = &s.triage {
                let _ = writeln!(text, "           {}", t.label());
            }
        }
        for c in &self.verdict.canaries {
            let found = if c.failures == 0 { "NOT FOUND".to_string() } else { format!("found ({} runs)", c.failures) };
            let _ = writeln!(text, "  canary {}: {found}", c.canary);
            if let Some(hint) = &c.hint {
                let _ = writeln!(text, "           {hint}");
            }
        }
        let _ = writeln!(text, "report: {} (exit {})", out.join("summary.md").display(), self.exit() as i32);
        text
    }
}

/// Runs `fleet merge`: reads the inputs, merges, finds trace tails, triages new signatures,
/// writes the report directory.
///
/// Errors: see [`Error`] (all exit 3).
pub fn merge(options: &MergeOptions) -> Result<MergeRun, Error> {
    summary::check_limit(options.summary_limit).map_err(Error::SummaryLimit)?;
    let policy = verdict::Policy::new(options.canaries.clone(), options.expected.clone(), &options.known)?;
    let inputs = input::read(&options.inputs, Some(&options.out))?;
    let mut merged = merge::merge(&inputs, |s| policy.status(s));
    for s in &mut merged.signatures {
        s.trace_tail =
            s.runs.iter().take(trace::RUNS_TRIED_MAX).find_map(|&i| trace::tail(&inputs.records[i], &inputs));
        if options.triage > 0 && s.status == verdict::Status::New && !s.diverged {
            let target = triage::Target::of(&inputs.records[s.fastest.record]).expect("a signature's run failed");
            match triage::triage(&target, options.triage, options.exec.as_deref()) {
                Ok(t) => s.triage = Some(t),
                Err(e) => eprintln!("fleet merge: not triaged: {}: {e}", s.signature),
            }
        }
    }
    let verdict = verdict::Verdict::of(&policy, &merged.signatures, &merged.totals.simulations);
    let context = summary::Context {
        out_dir: &options.out.display().to_string(),
        limit: options.summary_limit,
        triage: options.triage,
    };
    let summary = summary::render(&merged, &verdict, &inputs, &context);
    output::write(&options.out, &merged, &verdict, &inputs, &summary)?;
    Ok(MergeRun { inputs, merged, verdict, summary })
}
