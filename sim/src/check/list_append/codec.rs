//! The history events the [`ListAppend`](super::ListAppend) check reads and a
//! [`Recorder`](super::Recorder) writes: their kinds, field escaping, and the `Feed` that
//! rebuilds a [`History`] from them.

use std::collections::BTreeMap;
use std::time::Duration;

use super::model::{Action, FinalLog, History, Offset, Op, OpId, Open, Record};
use super::report::{Rule, Violation};
use crate::history::Entry;
use crate::outcome::OpOutcome;

/// Kind of the event recording that an operation was sent.
pub const KIND_INVOKE: &str = "list.invoke";
/// Kind of the event recording that an operation was acknowledged.
pub const KIND_OK: &str = "list.ok";
/// Kind of the event recording that an operation definitely failed.
pub const KIND_FAIL: &str = "list.fail";
/// Kind of the event recording that an operation's outcome is unknown.
pub const KIND_INFO: &str = "list.info";
/// Kind of the event recording that a subscriber (re)subscribed.
pub const KIND_SUBSCRIBE: &str = "list.subscribe";
/// Kind of the event recording that a subscriber was delivered a record.
pub const KIND_DELIVER: &str = "list.deliver";
/// Kind of the event recording a key's final read.
pub const KIND_FINAL: &str = "list.final";

/// Whether a byte is kept as is in an event field (everything else is `%XX`).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/' | b'@' | b'+' | b'#')
}

/// Percent-encodes a field value so that it holds no space, `=`, `,` or `:`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reverses [`escape`]; `None` when `s` is not a valid escaped field.
pub fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

pub(super) fn encode_records(records: &[Record]) -> String {
    let parts: Vec<String> = records.iter().map(|r| format!("{}:{}", r.offset, escape(&r.value))).collect();
    parts.join(",")
}

fn decode_records(s: &str) -> Option<Vec<Record>> {
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',')
        .map(|part| {
            let (offset, value) = part.split_once(':')?;
            Some(Record::new(offset.parse().ok()?, unescape(value)?))
        })
        .collect()
}

pub(super) fn encode_offset(offset: Option<Offset>) -> String {
    offset.map_or_else(|| "unknown".to_string(), |o| o.to_string())
}

fn decode_offset(s: &str) -> Option<Option<Offset>> {
    if s == "unknown" { Some(None) } else { s.parse().ok().map(Some) }
}

/// An event's `name=value` fields.
struct Fields<'e>(Vec<(&'e str, &'e str)>);

impl<'e> Fields<'e> {
    fn parse(detail: &'e str) -> Option<Fields<'e>> {
        detail.split(' ').filter(|t| !t.is_empty()).map(|t| t.split_once('=')).collect::<Option<Vec<_>>>().map(Fields)
    }

    fn raw(&self, name: &str) -> Option<&'e str> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    fn text(&self, name: &str) -> Option<String> {
        unescape(self.raw(name)?)
    }
}

/// The history event of an operation being sent: (kind, detail); the identity is the op's.
pub(super) fn invoke_detail(process: &str, key: &str, value: Option<&str>) -> String {
    match value {
        Some(v) => format!("f=append process={} key={} value={}", escape(process), escape(key), escape(v)),
        None => format!("f=read process={} key={}", escape(process), escape(key)),
    }
}

/// What one event added that the per-event rules look at.
pub(super) enum Fed {
    Nothing,
    /// An append of `value` to `key` was sent.
    Appending {
        key: String,
        value: String,
    },
    /// A read was acknowledged (it is in `Feed::done`).
    Read(OpId),
    /// A final read was recorded for this key.
    Final(String),
    /// A delivery.
    Delivered {
        subscriber: String,
        key: String,
        record: Record,
    },
    /// A (re)subscribe.
    Subscribed,
}

/// The [`Rule::Event`] violation naming an event that does not parse, and why.
fn bad_event(entry: &Entry, why: &str) -> Box<Violation> {
    Box::new(Violation {
        rule: Rule::Event,
        key: String::new(),
        value: None,
        offsets: Vec::new(),
        ops: Vec::new(),
        detail: format!("{why}: event {entry}"),
    })
}

/// Builds a [`History`] from history events (the [`ListAppend`](super::ListAppend) kinds).
#[derive(Default)]
pub(super) struct Feed {
    /// The subscriber events and final reads so far (operations are in `open` and `done`).
    pub(super) history: History,
    open: BTreeMap<String, Open>,
    /// The operations ended so far, by id.
    pub(super) done: BTreeMap<OpId, Op>,
    next: u64,
}

impl Feed {
    /// Operations open at once, at most.
    const OPEN_MAX: usize = 1_000_000;

    /// Takes one history event: what it added for the per-event rules, or why it does not parse
    /// (skipped: kinds outside `list.*`).
    pub(super) fn apply(&mut self, entry: &Entry) -> Result<Fed, Box<Violation>> {
        let kind = entry.kind.as_str();
        if !kind.starts_with("list.") {
            return Ok(Fed::Nothing);
        }
        let bad = |why: &str| bad_event(entry, why);
        let fields = Fields::parse(&entry.detail).ok_or_else(|| bad("fields are not name=value"))?;
        let at = entry.at();
        match kind {
            KIND_INVOKE => self.invoke(entry, &fields),
            KIND_OK | KIND_FAIL | KIND_INFO => self.complete(entry, &fields),
            KIND_SUBSCRIBE => {
                let key = fields.text("key").ok_or_else(|| bad("no key"))?;
                let from = fields.raw("from").and_then(decode_offset).ok_or_else(|| bad("no from"))?;
                self.history.subscribe(&entry.identity, &key, from, at);
                Ok(Fed::Subscribed)
            }
            KIND_DELIVER => {
                let key = fields.text("key").ok_or_else(|| bad("no key"))?;
                let offset = fields.raw("offset").and_then(|o| o.parse().ok()).ok_or_else(|| bad("no offset"))?;
                let value = fields.text("value").ok_or_else(|| bad("no value"))?;
                self.history.deliver(&entry.identity, &key, offset, &value, at);
                Ok(Fed::Delivered { subscriber: entry.identity.clone(), key, record: Record::new(offset, value) })
            }
            KIND_FINAL => {
                let log_start =
                    fields.raw("log_start").and_then(|o| o.parse().ok()).ok_or_else(|| bad("no log_start"))?;
                let records = fields.raw("records").and_then(decode_records).ok_or_else(|| bad("no records"))?;
                self.history.set_final(&entry.identity, FinalLog { log_start, records });
                Ok(Fed::Final(entry.identity.clone()))
            }
            _ => Err(bad("unknown list.* kind")),
        }
    }

    /// A `list.invoke`: opens the operation.
    fn invoke(&mut self, entry: &Entry, fields: &Fields<'_>) -> Result<Fed, Box<Violation>> {
        let bad = |why: &str| bad_event(entry, why);
        let at = entry.at();
        let process = fields.text("process").ok_or_else(|| bad("no process"))?;
        let key = fields.text("key").ok_or_else(|| bad("no key"))?;
        let value = match fields.raw("f") {
            Some("append") => Some(fields.text("value").ok_or_else(|| bad("an append without a value"))?),
            Some("read") => None,
            _ => return Err(bad("f is neither append nor read")),
        };
        if self.open.contains_key(&entry.identity) {
            return Err(bad("an operation with this identity is already open"));
        }
        if self.open.len() >= Self::OPEN_MAX {
            return Err(bad("more than Feed::OPEN_MAX operations open at once"));
        }
        self.next += 1;
        let open = Open { id: OpId(self.next), process, key: key.clone(), start: at, value: value.clone() };
        self.open.insert(entry.identity.clone(), open);
        Ok(value.map_or(Fed::Nothing, |value| Fed::Appending { key, value }))
    }

    /// A `list.ok`, `list.fail` or `list.info`: ends the open operation of its identity.
    fn complete(&mut self, entry: &Entry, fields: &Fields<'_>) -> Result<Fed, Box<Violation>> {
        let kind = entry.kind.as_str();
        let bad = |why: &str| bad_event(entry, why);
        let at = entry.at();
        let open = self.open.remove(&entry.identity).ok_or_else(|| bad("no open operation has this identity"))?;
        let why = fields.text("reason").unwrap_or_default();
        let mut seen = Fed::Nothing;
        let op = match (kind, &open.value) {
            (KIND_OK, Some(value)) => {
                let offset = fields.raw("offset").and_then(decode_offset).ok_or_else(|| bad("no offset"))?;
                let action = Action::Append { value: value.clone(), outcome: OpOutcome::Ok(offset) };
                open.close(at, action)
            }
            (KIND_OK, None) => {
                let records = fields.raw("records").and_then(decode_records).ok_or_else(|| bad("no records"))?;
                seen = Fed::Read(open.id);
                open.close(at, Action::Read { outcome: OpOutcome::Ok(records) })
            }
            _ => open.close_without_result(at, kind == KIND_FAIL, why),
        };
        self.done.insert(op.id, op);
        Ok(seen)
    }

    /// The history so far; open operations become unknown, ended at `now`.
    pub(super) fn history(self, now: Duration) -> History {
        let mut h = self.history;
        let mut ops: Vec<Op> = self.done.into_values().collect();
        ops.extend(self.open.into_values().map(|o| o.close_without_result(now, false, "never completed".into())));
        ops.sort_by_key(|op| op.id);
        *h.ops_mut() = ops;
        h
    }
}

impl History {
    /// Rebuilds a history from recorded history events (the kinds listed at [`ListAppend`](super::ListAppend);
    /// other kinds are skipped). Operations still open at the end are unknown, ended at the last
    /// event's time.
    ///
    /// # Errors
    /// The [`Rule::Event`] violation naming the first event that does not parse.
    pub fn from_entries(
        entries: impl IntoIterator<Item = impl std::borrow::Borrow<Entry>>,
    ) -> Result<History, Box<Violation>> {
        let mut feed = Feed::default();
        let mut last = Duration::ZERO;
        for entry in entries {
            let entry = entry.borrow();
            last = entry.at();
            feed.apply(entry)?;
        }
        Ok(feed.history(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_fields_round_trip_and_hold_no_separator() {
        for s in ["plain-value_1", "a b=c,d:e%f", "ünïcödé", ""] {
            let e = escape(s);
            assert!(!e.contains([' ', '=', ',', ':']), "{e}");
            assert_eq!(unescape(&e).as_deref(), Some(s));
        }
        assert_eq!(unescape("%ZZ"), None);
        assert_eq!(unescape("%4"), None);
    }

    #[test]
    fn records_round_trip() {
        let records = vec![Record::new(3, "a,b"), Record::new(9, "c:d")];
        assert_eq!(decode_records(&encode_records(&records)), Some(records));
        assert_eq!(decode_records(""), Some(Vec::new()));
        assert_eq!(decode_records("x"), None);
    }
}
