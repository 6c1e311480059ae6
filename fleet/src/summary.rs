//! The Markdown summary (`summary.md`), for a CI job summary: never above a byte limit.
//!
//! GitHub refuses a job summary over 1 MiB (`$GITHUB_STEP_SUMMARY`), so the summary is cut to
//! fit `--summary-limit` bytes (default [`LIMIT_DEFAULT`]). The head always stays: the verdict,
//! the totals (lines, runs, shards, commits, seed bases), the canaries, the malformed lines'
//! count and first names, and seeds per simulation. Then one table row per signature (new
//! first), as many as fit, then each shown signature's trace tail in a `<details>` block, as many
//! as fit, then the malformed lines with their errors, if they fit. What is cut is said on a
//! line of its own with how many and where the full data is (`signatures.json`,
//! `outcomes.jsonl`); that notice always stays. A limit below [`LIMIT_MIN`] is refused; a head
//! longer than the limit (many simulations) is cut at a line, with the notice.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::input::Inputs;
use crate::merge::{Merged, Signature};
use crate::verdict::{Status, Verdict};

/// The default byte limit: below GitHub's 1 MiB job-summary limit (1,048,576 bytes).
pub const LIMIT_DEFAULT: usize = 1_000_000;
/// The smallest limit: room for the verdict, the totals and the notice of what was cut.
pub const LIMIT_MIN: usize = 1024;
/// Malformed lines named in the head.
const MALFORMED_NAMED_MAX: usize = 5;
/// Malformed lines listed with their errors at the end.
const MALFORMED_LISTED_MAX: usize = 20;
/// Commits, shards or seed bases named in the head before "and N more".
const NAMED_MAX: usize = 10;

/// What the summary says about where the report is.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    /// The report directory as the user named it (`fleet-report`).
    pub out_dir: &'a str,
    /// The byte limit.
    pub limit: usize,
    /// `--triage K`.
    pub triage: u32,
}

/// Renders the summary; its length is at most `context.limit` bytes.
pub fn render(merged: &Merged, verdict: &Verdict, inputs: &Inputs, context: &Context<'_>) -> String {
    let dir = context.out_dir.trim_end_matches('/');
    let limit = context.limit;
    let total = merged.signatures.len();
    let footer = format!(
        "\nFull data: `{dir}/signatures.json` (every signature, its seeds and triage), `{dir}/outcomes.jsonl` (every line, deduplicated).\n"
    );
    let rows_note = |n: usize| {
        format!(
            "\n_{n} more signature rows cut to stay under {limit} bytes: all {total} are in `{dir}/signatures.json`._\n"
        )
    };
    let traces_note = |n: usize| {
        format!("\n_Trace tails of {n} more signatures cut (limit {limit} bytes): see `{dir}/signatures.json`._\n")
    };

    let mut out = head(merged, verdict, inputs);
    let table_head = if total == 0 {
        String::new()
    } else {
        format!(
            "\n### Signatures ({total})\n\n| # | status | signature | count | seeds | first seed | fastest seed | replay | triage |\n|---|---|---|---|---|---|---|---|---|\n"
        )
    };
    let reserve = rows_note(total).len() + traces_note(total).len() + footer.len();
    if out.len() + table_head.len() + reserve > limit {
        // Not even the table's head fits: the summary's head, cut at a line if it must be.
        let note = format!(
            "\n_Summary cut to stay under {limit} bytes: its {total} signature rows (and any head lines cut here) are in `{dir}/signatures.json`._\n"
        );
        return cut_then(out, limit, &format!("{note}{footer}"));
    }

    let mut shown = 0;
    if total > 0 {
        out.push_str(&table_head);
        for (i, s) in merged.signatures.iter().enumerate() {
            let row = row(i + 1, s, context.triage);
            if out.len() + row.len() + reserve > limit {
                break;
            }
            out.push_str(&row);
            shown += 1;
        }
        if shown < total {
            out.push_str(&rows_note(total - shown));
        }
    }

    let with_tail: Vec<(usize, &Signature)> =
        merged.signatures.iter().take(shown).enumerate().filter(|(_, s)| s.trace_tail.is_some()).collect();
    let reserve = traces_note(total).len() + footer.len();
    let mut blocks = 0;
    for (i, s) in &with_tail {
        let mut block = details(i + 1, s);
        if blocks == 0 {
            block.insert_str(0, "\n### Trace tails\n\n");
        }
        if out.len() + block.len() + reserve > limit {
            break;
        }
        out.push_str(&block);
        blocks += 1;
    }
    if blocks < with_tail.len() {
        out.push_str(&traces_note(with_tail.len() - blocks));
    }

    if !inputs.malformed.is_empty() {
        let list = malformed_list(inputs);
        if out.len() + list.len() + footer.len() <= limit {
            out.push_str(&list);
        }
    }
    out.push_str(&footer);
    // Within the limit by construction; should a long `--out` path make the notes outgrow it,
    // the notice still stays.
    if out.len() <= limit {
        return out;
    }
    cut_then(out, limit, &format!("\n_Summary cut to stay under {limit} bytes: see `{dir}/signatures.json`._\n"))
}

/// Refuses a `--summary-limit` below [`LIMIT_MIN`].
///
/// # Errors
/// The message says the smallest limit.
pub fn check_limit(limit: usize) -> Result<usize, String> {
    if limit < LIMIT_MIN {
        return Err(format!(
            "{limit} bytes cannot hold the summary's verdict, totals and the notice of what was cut: give at least \
             {LIMIT_MIN} (default {LIMIT_DEFAULT})"
        ));
    }
    Ok(limit)
}

/// Parses `--summary-limit` ([`check_limit`]).
///
/// # Errors
/// Not a count, or below [`LIMIT_MIN`].
pub fn parse_limit(text: &str) -> Result<usize, String> {
    let limit = text.trim().parse::<usize>().map_err(|_| format!("{text:?} is not a byte count"))?;
    check_limit(limit)
}

/// `text`, cut at its last whole line that leaves room for `notice` when it must be, then
/// `notice` (itself cut only when it alone outgrows the limit: a `--out` path of ~1000 bytes).
fn cut_then(text: String, limit: usize, notice: &str) -> String {
    let room = limit.saturating_sub(notice.len());
    let mut out = text;
    if out.len() > room {
        out = truncate(out, room);
        match out.rfind('\n') {
            Some(end) => out.truncate(end + 1),
            None => out.clear(),
        }
    }
    out.push_str(notice);
    truncate(out, limit)
}

/// The part that always stays.
fn head(merged: &Merged, verdict: &Verdict, inputs: &Inputs) -> String {
    let t = &merged.totals;
    let mut out = String::new();
    let missing: Vec<&str> = verdict.missing().map(|c| c.canary.as_str()).collect();
    let headline = match (missing.is_empty(), verdict.new) {
        (false, _) => format!("canary not found: {}", missing.join(", ")),
        (true, 0) => "no new failure".to_string(),
        (true, n) => format!("{n} new signature{}", plural(n)),
    };
    let _ = writeln!(out, "## Fleet merge: {headline} (exit {})\n", verdict.exit() as i32);
    let _ = writeln!(
        out,
        "{} lines · {} runs · {} duplicate{} · {} malformed · {} file{}  ",
        t.lines,
        t.runs,
        t.duplicates,
        plural(t.duplicates),
        t.malformed,
        t.files,
        plural(t.files)
    );
    let _ = writeln!(out, "shards: {}  ", shards_seen(&t.shards, t.unsharded_runs));
    let _ = writeln!(out, "commits: {}  ", named(&t.commits));
    if !t.seed_bases.is_empty() {
        let _ = writeln!(out, "seed bases: {}  ", named(&t.seed_bases));
    }
    for c in &verdict.canaries {
        if c.failures == 0 {
            let hint = c.hint.as_deref().map(|h| format!(": {}", cell(h))).unwrap_or_default();
            let _ = writeln!(out, "canary `{}`: **not found**{hint}  ", c.canary);
        } else {
            let _ = writeln!(out, "canary `{}`: found ({} failing run{})  ", c.canary, c.failures, plural(c.failures));
        }
    }
    if t.malformed > 0 {
        let mut names: Vec<String> =
            inputs.malformed.iter().take(MALFORMED_NAMED_MAX).map(|m| format!("`{}`", cell(&m.at))).collect();
        if t.malformed > names.len() {
            names.push(format!("and {} more", t.malformed - names.len()));
        }
        let _ = writeln!(out, "malformed lines: {}  ", names.join(", "));
    }
    if !inputs.skipped_reports.is_empty() {
        let names: BTreeSet<String> = inputs.skipped_reports.iter().map(|p| p.display().to_string()).collect();
        let _ = writeln!(out, "earlier reports skipped: {}  ", named(&names));
    }
    let _ = write!(out, "\n| simulation | runs | seeds | failed | excused |\n|---|---|---|---|---|\n");
    for (name, s) in &t.simulations {
        let _ = writeln!(out, "| `{}` | {} | {} | {} | {} |", cell(name), s.runs, s.seeds, s.failed, s.excused);
    }
    out
}

/// `8 of 8`, `7 of 8 (missing 3/8)`, or `none` (with the runs that named no shard).
pub fn shards_seen(shards: &BTreeSet<String>, unsharded_runs: usize) -> String {
    let mut parts = Vec::new();
    let mut counts: std::collections::BTreeMap<u64, BTreeSet<u64>> = std::collections::BTreeMap::new();
    let mut other = BTreeSet::new();
    for s in shards {
        match s.split_once('/').and_then(|(i, n)| Some((i.parse::<u64>().ok()?, n.parse::<u64>().ok()?))) {
            Some((i, n)) if i < n => drop(counts.entry(n).or_default().insert(i)),
            _ => drop(other.insert(s.clone())),
        }
    }
    for (n, seen) in counts {
        let missing: Vec<String> =
            (0..n).filter(|i| !seen.contains(i)).take(NAMED_MAX).map(|i| format!("{i}/{n}")).collect();
        let missing_count = n - seen.len() as u64;
        if missing_count == 0 {
            parts.push(format!("{} of {n}", seen.len()));
        } else {
            let more = if missing_count > missing.len() as u64 { ", …" } else { "" };
            parts.push(format!("{} of {n} (missing {}{more})", seen.len(), missing.join(", ")));
        }
    }
    if !other.is_empty() {
        parts.push(named(&other));
    }
    if unsharded_runs > 0 {
        parts.push(format!("{unsharded_runs} unsharded run{}", plural(unsharded_runs)));
    }
    if parts.is_empty() { "none".to_string() } else { parts.join("; ") }
}

fn named(set: &BTreeSet<String>) -> String {
    let mut names: Vec<String> = set.iter().take(NAMED_MAX).map(|s| format!("`{}`", cell(s))).collect();
    if set.len() > NAMED_MAX {
        names.push(format!("and {} more", set.len() - NAMED_MAX));
    }
    names.join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn row(n: usize, s: &Signature, triage_k: u32) -> String {
    let status = match s.status {
        Status::New => "**new**",
        other => other.name(),
    };
    let triage = match (&s.triage, s.status) {
        (Some(t), _) => t.label(),
        (None, Status::New) if s.diverged => "not triaged (a divergence)".to_string(),
        (None, Status::New) if triage_k > 0 => "not triaged".to_string(),
        _ => "–".to_string(),
    };
    format!(
        "| {n} | {status} | {} | {} | {} | {} | {} ({}) | {} | {} |\n",
        code(&s.signature),
        s.count,
        s.seeds.len(),
        s.first.seed,
        s.fastest.seed,
        wall(s.fastest.wall_nanos),
        code(&s.fastest.replay),
        cell(&triage)
    )
}

fn details(n: usize, s: &Signature) -> String {
    let tail = s.trace_tail.as_ref().expect("only signatures with a trace tail get a block");
    let body = tail.lines.join("\n");
    let longest_ticks = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_ticks.max(2) + 1);
    format!(
        "<details><summary>{n}. {} — seed {} ({})</summary>\n\n{fence}text\n{body}\n{fence}\n\n</details>\n\n",
        html(&s.signature),
        tail.seed,
        html(&tail.path.display().to_string())
    )
}

fn malformed_list(inputs: &Inputs) -> String {
    let mut out = format!("\n### Malformed lines ({})\n\n", inputs.malformed_count);
    for m in inputs.malformed.iter().take(MALFORMED_LISTED_MAX) {
        let _ = writeln!(out, "- `{}`: {}", cell(&m.at), cell(&m.error));
    }
    if inputs.malformed_count > MALFORMED_LISTED_MAX {
        let _ = writeln!(out, "- and {} more", inputs.malformed_count - MALFORMED_LISTED_MAX);
    }
    out
}

/// Wall time: `850 µs`, `12.3 ms`, `4.56 s`.
fn wall(nanos: u64) -> String {
    match nanos {
        n if n < 1_000_000 => format!("{} µs", n / 1_000),
        n if n < 1_000_000_000 => format!("{:.1} ms", n as f64 / 1e6),
        n => format!("{:.2} s", n as f64 / 1e9),
    }
}

/// Text for a table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    text.replace(['\n', '\r'], " ").replace('|', "\\|")
}

/// A code span for a table cell, fenced with more backticks than it holds.
fn code(text: &str) -> String {
    let text = cell(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{text}{pad}{fence}")
}

fn html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Cuts `text` to at most `limit` bytes on a character boundary.
fn truncate(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_seen_names_the_missing_ones() {
        let shards: BTreeSet<String> = ["0/4", "1/4", "3/4"].iter().map(|s| s.to_string()).collect();
        assert_eq!(shards_seen(&shards, 0), "3 of 4 (missing 2/4)");
        let all: BTreeSet<String> = (0..8).map(|i| format!("{i}/8")).collect();
        assert_eq!(shards_seen(&all, 2), "8 of 8; 2 unsharded runs");
        assert_eq!(shards_seen(&BTreeSet::new(), 0), "none");
    }

    #[test]
    fn code_spans_survive_pipes_and_backticks() {
        assert_eq!(code("a|b"), "`a\\|b`");
        assert_eq!(code("x `y` z"), "``x `y` z``");
        assert_eq!(code("`edge"), "`` `edge ``");
    }

    #[test]
    fn a_cut_keeps_whole_lines_and_the_notice() {
        let text = "line one\nline two\nline three\n".to_string();
        assert_eq!(cut_then(text.clone(), 100, "_cut_\n"), format!("{text}_cut_\n"), "it fits");
        assert_eq!(cut_then(text, 25, "_cut_\n"), "line one\nline two\n_cut_\n");
        assert!(check_limit(LIMIT_MIN - 1).is_err() && check_limit(LIMIT_MIN).is_ok());
        assert!(parse_limit("10").expect_err("too small").contains("give at least 1024"));
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncate("aé".to_string(), 2), "a");
        assert_eq!(truncate("abc".to_string(), 5), "abc");
    }
}
