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

/// Formats fake elapsed time as seconds with microseconds, right-aligned: `    1.250000s`.
pub fn format_elapsed(d: Duration) -> String {
    format!("{:>5}.{:06}s", d.as_secs(), d.subsec_micros())
}

/// The bounded buffer of one run's trace: log lines, and markers of history events (rendered
/// from the history only when the trace is written, so recording an event formats nothing).
#[derive(Debug, Default)]
pub struct TraceBuf {
    lines: Mutex<Lines>,
}

#[derive(Debug)]
enum Item {
    Text(String),
    Event(u64),
}

#[derive(Debug, Default)]
struct Lines {
    kept: VecDeque<Item>,
    dropped: u64,
}

impl TraceBuf {
    /// Lines kept in memory; older lines are dropped and counted.
    pub const LINES_MAX: usize = 200_000;

    /// An empty trace.
    pub fn new() -> TraceBuf {
        TraceBuf::default()
    }

    fn push_item(&self, item: Item) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.kept.len() == Self::LINES_MAX {
            lines.kept.pop_front();
            lines.dropped += 1;
        }
        lines.kept.push_back(item);
    }

    /// Appends one line (without its newline).
    pub fn push(&self, line: String) {
        self.push_item(Item::Text(line));
    }

    /// Marks the place of history event `index`.
    pub(crate) fn push_event(&self, index: u64) {
        self.push_item(Item::Event(index));
    }

    /// Every line kept, oldest first, with events rendered from `history`, preceded by a note if
    /// older lines were dropped.
    pub fn render(&self, history: &crate::history::History) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::with_capacity(lines.kept.len() + 1);
        if lines.dropped > 0 {
            out.push(format!("… {} earlier lines dropped (TraceBuf::LINES_MAX = {})", lines.dropped, Self::LINES_MAX));
        }
        for item in &lines.kept {
            out.push(match item {
                Item::Text(text) => text.clone(),
                Item::Event(index) => match history.entry(*index) {
                    Some(e) => {
                        let sep = if e.detail.is_empty() { "" } else { " " };
                        format!(
                            "[{}] event #{} {} {}{sep}{}",
                            format_elapsed(e.at()),
                            e.index,
                            e.kind,
                            e.identity,
                            e.detail
                        )
                    }
                    None => format!("event #{index} (dropped from memory: History::ENTRIES_MAX)"),
                },
            });
        }
        out
    }
}

/// Stamps `tracing` lines with the run's fake elapsed time.
struct FakeTime;

impl FormatTime for FakeTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        match crate::run::Ctx::try_current() {
            Some(ctx) => write!(w, "[{}]", format_elapsed(ctx.elapsed())),
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

/// Installs the run's subscriber on the calling thread until the guard drops.
pub(crate) fn install(buf: Arc<TraceBuf>) -> tracing::subscriber::DefaultGuard {
    let targets = filter(&buf);
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_timer(FakeTime)
        .with_writer(TraceWriter { buf })
        .with_filter(targets);
    tracing::subscriber::set_default(tracing_subscriber::registry().with(layer))
}
