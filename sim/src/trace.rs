//! The trace of one run: history events and `tracing` output, stamped with fake time.
//!
//! Each run installs a `tracing` subscriber on its own thread (the run's thread), filtered by
//! `SIM_LOG` (a `tracing_subscriber` target list such as `info` or `warn,my_service=debug`;
//! default `info`). Its lines carry the fake time elapsed since the run started instead of the
//! wall clock, so two replays of a seed print the same trace. Recorded history events are written
//! into the same trace, so the log reads as one timeline. On failure the trace is saved to
//! `target/sim/<test>/<seed>/trace.log` (see [`crate::report`]).
//!
//! The trace keeps the last [`TraceBuf::LINES_MAX`] lines in memory.
//!
//! **What a failure prints.** The trace file keeps everything; with the failure the harness
//! prints the lines that concern it ([`Focus`]): those mentioning the operations, keys, nodes and
//! connections the failure names — in its message, as history identities (`put#3`, `op-3`,
//! `kv-0`, `req#5`), or through [`Failure::about`] — from the first such line to the
//! failure, at most [`Focus::LINES_MAX`] of them. A failure that names nothing found in the trace
//! prints the trace's last lines instead ([`crate::Simulation::trace_tail`]).

use std::collections::VecDeque;
use std::io;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::layer::SubscriberExt;

pub use crate::history::format_elapsed;
use crate::report::Failure;
use crate::seed::Seed;

/// The fake time the trace stamps its lines with: the time since the run started, or `None`
/// outside a run.
pub(crate) type Clock = Arc<dyn Fn() -> Option<Duration> + Send + Sync>;

/// The bounded buffer of one run's trace: log lines, and markers of history events (rendered
/// from the history only when the trace is written, so recording an event formats nothing).
#[derive(Debug, Default)]
pub struct TraceBuf {
    lines: Mutex<Lines>,
}

#[derive(Debug)]
enum Item {
    Text(String),
    /// History events `first..first + count`, recorded one after another with no text between.
    Events {
        first: u64,
        count: u64,
    },
}

#[derive(Debug, Default)]
struct Lines {
    kept: VecDeque<Item>,
    /// Lines `kept` holds (an `Events` item holds `count`).
    len: usize,
    dropped: u64,
}

impl Lines {
    /// Drops the oldest lines beyond [`TraceBuf::LINES_MAX`].
    fn trim(&mut self) {
        while self.len > TraceBuf::LINES_MAX {
            match self.kept.front_mut() {
                Some(Item::Events { first, count }) if *count > 1 => {
                    *first += 1;
                    *count -= 1;
                }
                Some(_) => {
                    self.kept.pop_front();
                }
                None => break,
            }
            self.len -= 1;
            self.dropped += 1;
        }
    }
}

impl TraceBuf {
    /// Lines kept in memory; older lines are dropped and counted.
    pub const LINES_MAX: usize = 200_000;

    /// An empty trace.
    pub fn new() -> TraceBuf {
        TraceBuf::default()
    }

    /// Appends one line (without its newline).
    pub fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.kept.push_back(Item::Text(line));
        lines.len += 1;
        lines.trim();
    }

    /// Marks the place of history event `index` (events recorded one after another share one
    /// item).
    pub(crate) fn push_event(&self, index: u64) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        match lines.kept.back_mut() {
            Some(Item::Events { first, count }) if *first + *count == index => *count += 1,
            _ => lines.kept.push_back(Item::Events { first: index, count: 1 }),
        }
        lines.len += 1;
        lines.trim();
    }

    /// Every line kept, oldest first, with events rendered from `history`, preceded by a note if
    /// older lines were dropped.
    pub fn render(&self, history: &crate::history::History) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::with_capacity(lines.len + 1);
        if lines.dropped > 0 {
            out.push(format!("… {} earlier lines dropped (TraceBuf::LINES_MAX = {})", lines.dropped, Self::LINES_MAX));
        }
        let event = |index: u64| match history.entry(index) {
            Some(e) => {
                let sep = if e.detail.is_empty() { "" } else { " " };
                format!("[{}] event #{} {} {}{sep}{}", format_elapsed(e.at()), e.index, e.kind, e.identity, e.detail)
            }
            None => format!("event #{index} (dropped from memory: History::ENTRIES_MAX)"),
        };
        for item in &lines.kept {
            match item {
                Item::Text(text) => out.push(text.clone()),
                Item::Events { first, count } => out.extend((*first..*first + *count).map(event)),
            }
        }
        out
    }
}

/// Stamps `tracing` lines with the run's fake elapsed time.
struct FakeTime(Clock);

impl FormatTime for FakeTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        match (self.0)() {
            Some(elapsed) => write!(w, "[{}]", format_elapsed(elapsed)),
            None => write!(w, "[   (no run)  ]"),
        }
    }
}

/// A `MakeWriter` that appends whole lines to a [`TraceBuf`].
#[derive(Clone)]
struct TraceWriter {
    buf: Arc<TraceBuf>,
}

struct LineWriter {
    buf: Arc<TraceBuf>,
    pending: Vec<u8>,
}

impl io::Write for LineWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(data);
        while let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            self.buf.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            self.buf.push(String::from_utf8_lossy(&self.pending).into_owned());
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for TraceWriter {
    type Writer = LineWriter;
    fn make_writer(&'a self) -> Self::Writer {
        LineWriter { buf: Arc::clone(&self.buf), pending: Vec::new() }
    }
}

/// The filter from `SIM_LOG` (default `info`). An unparsable value falls back to `info` and says
/// so in the trace.
fn filter(buf: &TraceBuf) -> Targets {
    let text = std::env::var("SIM_LOG").unwrap_or_else(|_| "info".to_string());
    Targets::from_str(&text).unwrap_or_else(|e| {
        buf.push(format!("SIM_LOG={text:?} is not a target list ({e}); using info"));
        Targets::new().with_default(tracing::Level::INFO)
    })
}

/// Installs the run's subscriber on the calling thread until the guard drops; its lines are
/// stamped with `clock`.
pub(crate) fn install(buf: Arc<TraceBuf>, clock: Clock) -> tracing::subscriber::DefaultGuard {
    let targets = filter(&buf);
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_timer(FakeTime(clock))
        .with_writer(TraceWriter { buf })
        .with_filter(targets);
    tracing::subscriber::set_default(tracing_subscriber::registry().with(layer))
}

/// The trace lines a failure is about (see the module docs): its terms, and the window of fake
/// time from the first line mentioning one of them to the failure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Focus {
    /// The words a line must mention (as a whole word) to be shown.
    pub terms: Vec<String>,
    /// The window's start (fake time since the run started); `None`: the trace's start.
    pub from: Option<Duration>,
    /// The window's end (the failure's time); `None`: the trace's end.
    pub until: Option<Duration>,
}

/// The lines a [`Focus`] picked out of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excerpt {
    /// The lines shown, in trace order (an elision marker where lines were left out).
    pub lines: Vec<String>,
    /// How many lines matched (those shown and those left out to keep to the limit).
    pub matched: usize,
}

impl Focus {
    /// Lines shown at most: the first quarter and the last three quarters of the matching lines,
    /// so both the operation's start and the lead-up to the failure are seen.
    pub const LINES_MAX: usize = 60;

    /// Terms a failure names: [`Failure::about`]'s, and each word of its message that is a
    /// history identity in `trace` (the first word of an event line's identity, such as `put#3`,
    /// `op-3`, `kv-0`, `req#5` or `conn#12`). The window runs from the first line mentioning a
    /// term to the failure's time.
    pub fn of(failure: &Failure, trace: &[&str]) -> Focus {
        let identities: std::collections::BTreeSet<&str> = trace.iter().filter_map(|l| event_identity(l)).collect();
        let mut terms: Vec<String> = Vec::new();
        let mut add = |t: &str| {
            if !t.is_empty() && !terms.iter().any(|x| x == t) {
                terms.push(t.to_string());
            }
        };
        for t in &failure.focus {
            add(t);
        }
        for word in failure.message.split(|c: char| !is_word_char(c)) {
            let word = word.trim_end_matches(['.', ':', '-']);
            if identities.contains(word) && !GENERIC_IDENTITIES.contains(&word) {
                add(word);
            }
        }
        let until = failure.at();
        let from = trace
            .iter()
            .filter(|l| line_time(l).is_some_and(|t| until.is_none_or(|u| t <= u)))
            .find(|l| terms.iter().any(|t| mentions(l, t)))
            .and_then(|l| line_time(l));
        Focus { terms, from, until }
    }

    /// The lines of `trace` in the window that mention a term, at most [`Focus::LINES_MAX`]
    /// (lines without a time stamp, such as a panic's continuation lines, go with the line
    /// before them). `None` when the focus has no terms or nothing matched.
    pub fn select(&self, trace: &[&str]) -> Option<Excerpt> {
        if self.terms.is_empty() {
            return None;
        }
        let mut time = None;
        let mut picked: Vec<&str> = Vec::new();
        for line in trace {
            if let Some(t) = line_time(line) {
                time = Some(t);
            }
            let in_window = time.is_some_and(|t| self.from.is_none_or(|f| t >= f) && self.until.is_none_or(|u| t <= u));
            if in_window && self.terms.iter().any(|term| mentions(line, term)) {
                picked.push(line);
            }
        }
        if picked.is_empty() {
            return None;
        }
        let matched = picked.len();
        let lines = if matched <= Self::LINES_MAX {
            picked.iter().map(|l| l.to_string()).collect()
        } else {
            let head = Self::LINES_MAX / 4;
            let tail = Self::LINES_MAX - head;
            let mut out: Vec<String> = picked[..head].iter().map(|l| l.to_string()).collect();
            out.push(format!(
                "… {} matching lines left out (Focus::LINES_MAX = {})",
                matched - head - tail,
                Self::LINES_MAX
            ));
            out.extend(picked[matched - tail..].iter().map(|l| l.to_string()));
            out
        };
        Some(Excerpt { lines, matched })
    }
}

/// The text printed with a failing seed's report: the lines its failure is about ([`Focus`]), or
/// when it names nothing in the trace, the trace's last `tail` lines. Each line is indented by
/// four spaces; the heading says which it is and how many lines matched.
pub(crate) fn excerpt_for(trace: &str, failure: Option<&Failure>, seed: Seed, tail: usize) -> String {
    let lines: Vec<&str> = trace.lines().collect();
    let focus = failure.map(|f| Focus::of(f, &lines)).unwrap_or_default();
    let (heading, shown) = match focus.select(&lines) {
        Some(excerpt) => (
            format!(
                "  {} of {} trace lines of seed {} about {} (up to the failure; the whole trace is in the file):\n",
                excerpt.lines.len().min(excerpt.matched),
                lines.len(),
                seed,
                focus.terms.join(", ")
            ),
            excerpt.lines,
        ),
        None => {
            let tail = &lines[lines.len().saturating_sub(tail)..];
            (
                format!("  last {} lines of the trace of seed {}:\n", tail.len(), seed),
                tail.iter().map(|l| l.to_string()).collect(),
            )
        }
    };
    let mut text = heading;
    for line in shown {
        text.push_str("    ");
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Identities too common to pick lines by (they would select most of the trace).
const GENERIC_IDENTITIES: &[&str] = &["workload", "system", "network", "run"];

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '#' | '-' | '_' | '.' | ':')
}

/// Whether `line` mentions `term` as a whole word (`put#3` is not mentioned by `put#30`).
fn mentions(line: &str, term: &str) -> bool {
    let bounded = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '#' | '-' | '_')));
    line.match_indices(term)
        .any(|(i, _)| bounded(line[..i].chars().next_back()) && bounded(line[i + term.len()..].chars().next()))
}

/// The fake time stamp a trace line starts with (`[    1.250000s] …`).
fn line_time(line: &str) -> Option<Duration> {
    let inner = line.strip_prefix('[')?.split(']').next()?.trim().strip_suffix('s')?;
    let (secs, micros) = inner.split_once('.')?;
    Some(Duration::from_secs(secs.parse().ok()?) + Duration::from_micros(micros.parse().ok()?))
}

/// The first word of an event line's identity: `[t] event #N <kind> <identity> …`.
fn event_identity(line: &str) -> Option<&str> {
    let rest = line.split_once("] event #")?.1;
    let mut words = rest.split(' ');
    let _index = words.next()?;
    let _kind = words.next()?;
    words.next().filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &[&str] = &[
        "[    0.000000s] event #0 node.start kv-0 incarnation 1",
        "[    0.100000s] event #1 op.start put#3 key=op-3 client=client-0",
        "[    0.100000s] event #2 op.request put#3 PUT /kv/a value=5",
        "[    0.150000s] event #3 op.start put#30 key=op-30 client=client-1",
        "[    0.200000s]  INFO kv: stored a=5 op-3",
        "[    0.300000s] event #4 op.end put#3 failed 409 conflict",
        "[    0.400000s] event #5 effect.write op-3 a=5",
        "[    0.500000s] event #6 failure correctness [idempotency] key op-3 failed but took effect",
        "[    0.600000s] event #7 node.sigterm kv-0 incarnation 1",
    ];

    #[test]
    fn events_and_text_render_in_order_and_the_oldest_lines_go_beyond_the_bound() {
        let mut history = crate::history::History::new();
        let trace = TraceBuf::new();
        trace.push("start".to_string());
        for i in 0..3u64 {
            let index = history.record(Duration::from_millis(i), "send", "a", "");
            trace.push_event(index);
        }
        trace.push("middle".to_string());
        let index = history.record(Duration::from_millis(5), "recv", "b", "2 bytes");
        trace.push_event(index);
        let rendered = trace.render(&history);
        assert_eq!(rendered.len(), 6, "{rendered:?}");
        assert_eq!(rendered[0], "start");
        assert!(rendered[1].contains("event #0 send a") && rendered[3].contains("event #2 send a"), "{rendered:?}");
        assert_eq!(rendered[4], "middle");
        assert!(rendered[5].ends_with("event #3 recv b 2 bytes"), "{rendered:?}");

        // Past the bound, the oldest lines go one by one, also out of a run of events.
        for _ in 0..TraceBuf::LINES_MAX - 3 {
            let index = history.record(Duration::from_millis(9), "tick", "c", "");
            trace.push_event(index);
        }
        let rendered = trace.render(&history);
        assert_eq!(rendered.len(), TraceBuf::LINES_MAX + 1);
        assert_eq!(rendered[0], format!("… 3 earlier lines dropped (TraceBuf::LINES_MAX = {})", TraceBuf::LINES_MAX));
        assert!(rendered[1].contains("event #2 send a"), "{}", rendered[1]);
        assert_eq!(rendered[2], "middle");
    }

    #[test]
    fn focus_takes_the_message_words_that_are_history_identities_and_ends_at_the_failure() {
        let failure = Failure {
            at_nanos: Some(500_000_000),
            ..Failure::correctness(
                crate::oracle::Oracle::IDEMPOTENCY,
                "key op-3 failed but took effect (operations: put#3 Failed)",
            )
        };
        let focus = Focus::of(&failure, TRACE);
        assert_eq!(focus.terms, vec!["op-3".to_string(), "put#3".to_string()]);
        assert_eq!((focus.from, focus.until), (Some(Duration::from_millis(100)), Some(Duration::from_millis(500))));
        let excerpt = focus.select(TRACE).expect("lines match");
        // put#30 and op-30 are other operations; the SIGTERM is after the failure.
        assert_eq!(excerpt.lines, vec![TRACE[1], TRACE[2], TRACE[4], TRACE[5], TRACE[6], TRACE[7]]);
    }

    #[test]
    fn a_failure_naming_nothing_in_the_trace_selects_nothing() {
        let failure = Failure::liveness(crate::oracle::Oracle::PROGRESS, "no progress within 3s");
        assert_eq!(Focus::of(&failure, TRACE).select(TRACE), None);
    }

    #[test]
    fn a_term_given_with_about_selects_lines_and_the_excerpt_keeps_to_its_limit() {
        let mut trace: Vec<String> = (0..200).map(|i| format!("[    0.{i:06}s]  INFO kv: key a v{i}")).collect();
        trace.push("[    1.000000s] event #0 failure correctness [kv] stale read".to_string());
        let lines: Vec<&str> = trace.iter().map(String::as_str).collect();
        let failure = Failure::correctness("kv", "stale read").about("a");
        let excerpt = Focus::of(&failure, &lines).select(&lines).expect("lines match");
        assert_eq!(excerpt.matched, 200);
        assert_eq!(excerpt.lines.len(), Focus::LINES_MAX + 1, "the limit and one elision marker");
        assert!(
            excerpt.lines[Focus::LINES_MAX / 4].starts_with("… 140 matching lines left out"),
            "{:?}",
            excerpt.lines
        );
        assert_eq!(excerpt.lines.last().map(String::as_str), Some(lines[199]));
    }
}
