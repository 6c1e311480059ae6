//! The report directory (`--out`, default `fleet-report/`).
//!
//! - `summary.md`: the Markdown summary ([`crate::summary`]), within the byte limit.
//! - `signatures.json`: one JSON document, `{"totals", "verdict", "signatures", "malformed_count",
//!   "malformed"}`: every signature with all its seeds, its first and fastest runs, shards,
//!   commits, divergences, trace tail and triage ([`crate::merge::Signature`]).
//! - `outcomes.jsonl`: every distinct input line as read, in reading order (a later merge can
//!   take it as its input: the file, or the report directory, of which only this file is read).
//!
//! A directory holding `summary.md` and `signatures.json` is a report: a later merge skips it
//! when it finds one under its inputs ([`crate::input`]).

use std::io::Write;
use std::path::Path;

use crate::Error;
use crate::input::{Inputs, Malformed};
use crate::merge::{Merged, Signature, Totals};
use crate::verdict::Verdict;

pub use crate::{OUTCOMES, SIGNATURES, SUMMARY};

#[derive(serde::Serialize)]
struct SignaturesFile<'a> {
    totals: &'a Totals,
    verdict: &'a Verdict,
    signatures: &'a [Signature],
    malformed_count: usize,
    malformed: &'a [Malformed],
}

/// Writes the three files into `dir` (created if missing).
///
/// Errors: [`Error::Io`] naming the file that could not be written.
pub fn write(dir: &Path, merged: &Merged, verdict: &Verdict, inputs: &Inputs, summary: &str) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let path = dir.join(SUMMARY);
    std::fs::write(&path, summary).map_err(Error::io(&path))?;

    let path = dir.join(SIGNATURES);
    let document = SignaturesFile {
        totals: &merged.totals,
        verdict,
        signatures: &merged.signatures,
        malformed_count: inputs.malformed_count,
        malformed: &inputs.malformed,
    };
    let mut text = serde_json::to_string_pretty(&document).expect("the report serializes (string keys only)");
    text.push('\n');
    std::fs::write(&path, text).map_err(Error::io(&path))?;

    let path = dir.join(OUTCOMES);
    let file = std::fs::File::create(&path).map_err(Error::io(&path))?;
    let mut file = std::io::BufWriter::new(file);
    for r in &inputs.records {
        file.write_all(r.text.as_bytes()).and_then(|()| file.write_all(b"\n")).map_err(Error::io(&path))?;
    }
    file.flush().map_err(Error::io(&path))
}
