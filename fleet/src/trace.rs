//! A signature's trace tail: the last lines of its fastest run's trace file.
//!
//! `sim` writes a failing seed's trace to `<target>/sim/<test>/<seed>/trace.log` and names that
//! absolute path in the JSON line. On the merging machine that path is usually another
//! machine's: a shard uploads its `target/sim` with its JSON lines, and the artifact lands under
//! one of the input directories. A path that does not exist is therefore looked up again by its
//! suffix after the last `sim` component (`<test>/<seed>/trace.log`), under, in order:
//! the directories from the line's own file up to its INPUT (as `D/sim/…`, `D/target/sim/…` and
//! `D/…`, the last for an artifact whose root is `target/sim` itself), then every directory
//! named `sim` under the inputs, those sharing the longest path prefix with the line's file
//! first.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::{Component, Path, PathBuf};

use crate::input::{Inputs, Record};

/// Runs of one signature whose traces are looked for.
pub const RUNS_TRIED_MAX: usize = 10;
/// Lines kept from the end of a trace.
pub const TAIL_LINES: usize = 20;
/// Characters kept of one trace line (the rest is cut with `…`).
pub const LINE_CHARS_MAX: usize = 400;

/// The end of a trace file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Tail {
    /// The seed whose trace it is.
    pub seed: u64,
    /// The file read.
    pub path: PathBuf,
    /// Whether it was found by its `sim/…` suffix rather than at the path the line names.
    pub relocated: bool,
    /// Its last [`TAIL_LINES`] lines.
    pub lines: Vec<String>,
}

/// The tail of `record`'s trace, wherever it is found; `None` when the line names no trace or
/// no copy of it is found (or readable).
///
/// A signature's tail is that of its fastest run whose trace is found, among its
/// [`RUNS_TRIED_MAX`] fastest ([`crate::merge`] orders them).
pub fn tail(record: &Record, inputs: &Inputs) -> Option<Tail> {
    let named = record.outcome.trace.as_ref()?;
    let seed = record.outcome.seed.0;
    if named.is_file() {
        return read_tail(named).map(|lines| Tail { seed, path: named.clone(), relocated: false, lines });
    }
    let suffix = sim_suffix(named)?;
    let file = inputs.files.get(record.origin.file)?;
    candidates(file, &suffix, inputs)
        .into_iter()
        .find(|p| p.is_file())
        .and_then(|path| read_tail(&path).map(|lines| Tail { seed, path, relocated: true, lines }))
}

/// The part of `path` after its last `sim` component (`walk/7/trace.log`), if it has one.
pub fn sim_suffix(path: &Path) -> Option<PathBuf> {
    let parts: Vec<Component<'_>> = path.components().collect();
    let last_sim = parts.iter().rposition(|c| c.as_os_str() == "sim")?;
    let rest: PathBuf = parts[last_sim + 1..].iter().collect();
    (!rest.as_os_str().is_empty()).then_some(rest)
}

/// Where to look for a trace whose `sim/…` suffix is `suffix`, named by a line of `file`.
fn candidates(file: &Path, suffix: &Path, inputs: &Inputs) -> Vec<PathBuf> {
    let root = inputs.roots.iter().filter(|r| file.starts_with(r)).max_by_key(|r| r.components().count());
    let mut out = Vec::new();
    for dir in file.ancestors().skip(1) {
        out.push(dir.join("sim").join(suffix));
        out.push(dir.join("target").join("sim").join(suffix));
        out.push(dir.join(suffix));
        if root.is_none_or(|r| dir == r.as_path()) {
            break;
        }
    }
    let mut sim_dirs: Vec<&PathBuf> = inputs.sim_dirs.iter().collect();
    let shared = |d: &Path| d.components().zip(file.components()).take_while(|(a, b)| a == b).count();
    sim_dirs.sort_by_key(|d| std::cmp::Reverse(shared(d)));
    out.extend(sim_dirs.into_iter().map(|d| d.join(suffix)));
    out
}

/// The last [`TAIL_LINES`] lines of a file, each cut to [`LINE_CHARS_MAX`] characters.
fn read_tail(path: &Path) -> Option<Vec<String>> {
    let file = std::fs::File::open(path).ok()?;
    let mut last = VecDeque::with_capacity(TAIL_LINES + 1);
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line.ok()?;
        if last.len() == TAIL_LINES {
            last.pop_front();
        }
        last.push_back(cut(String::from_utf8_lossy(&line).trim_end_matches('\r')));
    }
    Some(last.into())
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS_MAX) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suffix_is_what_follows_the_last_sim_component() {
        let p = Path::new("/home/runner/work/sim/sim/target/sim/walk/7/trace.log");
        assert_eq!(sim_suffix(p), Some(PathBuf::from("walk/7/trace.log")));
        assert_eq!(sim_suffix(Path::new("/tmp/trace.log")), None);
        assert_eq!(sim_suffix(Path::new("/x/sim")), None);
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "é".repeat(LINE_CHARS_MAX + 5);
        assert_eq!(cut(&long).chars().count(), LINE_CHARS_MAX + 1);
        assert_eq!(cut("short"), "short");
    }
}
