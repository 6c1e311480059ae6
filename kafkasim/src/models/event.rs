//! Consumer events: what consumers did, as the models read it, and their form in a history.
//!
//! A consumer (or the harness around it) records an [`Event`] for each thing the models judge:
//! a partition assigned or revoked, a record whose processing began, finished or failed, a
//! commit and the broker's answer, a stop request, leaving the group, a crash, a heal. In a
//! simulation each event is a history entry — kind `kafka.consumer.<what>`, identity the
//! member, detail `key=value` fields — so the run's checks see it as it happens and the trace
//! shows it; outside a simulation the [`crate::models::Recorder`] keeps them in memory. Both
//! forms hold the same fields and convert both ways ([`Event::detail`], [`Event::from_history`]).
//!
//! Field values are percent-escaped (`%20` for a space, `%3D` for `=`, `%25` for `%`, and
//! control characters), so any group id, member name, record value or error text round-trips.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The history kind prefix of consumer events.
pub const KIND_PREFIX: &str = "kafka.consumer.";

/// A topic partition, written `topic-partition` (`orders-3`) as Kafka's tools write it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`'s partition `partition`.
    pub fn new(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition { topic: topic.to_string(), partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// How the broker answered an offset commit, as the consumer saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Stored (error code 0).
    Accepted,
    /// Refused with this Kafka error code (`ILLEGAL_GENERATION` 22, `UNKNOWN_MEMBER_ID` 25,
    /// `REBALANCE_IN_PROGRESS` 27, …): the offset was not stored.
    Refused(i16),
    /// No answer (a timeout, a closed connection): the offset may or may not have been stored —
    /// Jepsen's indeterminate outcome. The models count it as possibly stored.
    Unknown,
}

impl Answer {
    /// `Accepted` for code 0, else `Refused(code)`.
    pub fn from_code(code: i16) -> Answer {
        if code == 0 { Answer::Accepted } else { Answer::Refused(code) }
    }

    /// Whether the offset may have been stored (accepted, or unknown).
    pub fn may_have_stored(self) -> bool {
        !matches!(self, Answer::Refused(_))
    }

    fn encode(self) -> String {
        match self {
            Answer::Accepted => "ok".to_string(),
            Answer::Refused(code) => code.to_string(),
            Answer::Unknown => "unknown".to_string(),
        }
    }

    fn decode(text: &str) -> Option<Answer> {
        match text {
            "ok" => Some(Answer::Accepted),
            "unknown" => Some(Answer::Unknown),
            code => code.parse().ok().map(Answer::Refused),
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Accepted => write!(f, "accepted"),
            Answer::Refused(code) => write!(f, "refused ({code})"),
            Answer::Unknown => write!(f, "unknown"),
        }
    }
}

/// What a consumer did (or what happened to it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// The partition was assigned to the member: its hold begins (rdkafka's
    /// `Rebalance::Assign`, Java's `onPartitionsAssigned`).
    Assign(TopicPartition),
    /// The partition was taken away: its hold ends. Record it after the commits made for it on
    /// revocation. `lost` when the member lost it without a chance to commit (KIP-429's
    /// `onPartitionsLost`: the session expired, the generation was fenced).
    Revoke {
        /// The partition.
        tp: TopicPartition,
        /// Lost rather than revoked.
        lost: bool,
    },
    /// The application began processing the record at `offset` (handed it to a worker).
    /// Optional: without it, processing is taken to begin when it finishes.
    Begin {
        /// The partition.
        tp: TopicPartition,
        /// The record's offset.
        offset: i64,
    },
    /// The record's processing finished: its effect happened.
    Process {
        /// The partition.
        tp: TopicPartition,
        /// The record's offset.
        offset: i64,
        /// The record's value (UTF-8, lossy), for reports.
        value: Option<String>,
    },
    /// The record's processing failed: its effect did not happen.
    Error {
        /// The partition.
        tp: TopicPartition,
        /// The record's offset.
        offset: i64,
        /// What failed.
        error: String,
    },
    /// The member committed `offset` — the next record to read, Kafka's convention — and the
    /// broker answered.
    Commit {
        /// The partition.
        tp: TopicPartition,
        /// The committed offset.
        offset: i64,
        /// The answer.
        answer: Answer,
    },
    /// The member was told to stop (SIGTERM, a shutdown request): it should drain and leave.
    Stop,
    /// The member left the group (closed the consumer: LeaveGroup, unless it is static).
    Leave,
    /// The member's process died: nothing it had in flight finishes, nothing more is committed.
    Crash,
    /// A fault was healed; the high watermarks at that moment say which records were waiting.
    Heal {
        /// Each partition's high watermark when the heal happened.
        high_watermarks: BTreeMap<TopicPartition, i64>,
    },
}

impl What {
    /// The partition the event is about, if it is about one.
    pub fn tp(&self) -> Option<&TopicPartition> {
        match self {
            What::Assign(tp)
            | What::Revoke { tp, .. }
            | What::Begin { tp, .. }
            | What::Process { tp, .. }
            | What::Error { tp, .. }
            | What::Commit { tp, .. } => Some(tp),
            What::Stop | What::Leave | What::Crash | What::Heal { .. } => None,
        }
    }

    /// The event's name: the history kind without its prefix (`process`, `commit`, …).
    pub fn name(&self) -> &'static str {
        match self {
            What::Assign(_) => "assign",
            What::Revoke { .. } => "revoke",
            What::Begin { .. } => "begin",
            What::Process { .. } => "process",
            What::Error { .. } => "error",
            What::Commit { .. } => "commit",
            What::Stop => "stop",
            What::Leave => "leave",
            What::Crash => "crash",
            What::Heal { .. } => "heal",
        }
    }
}

/// One consumer event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its position in the history (the history index in a simulation; the recorder's count
    /// outside one). Events are judged in this order.
    pub seq: u64,
    /// When it happened, on the cluster's clock ([`crate::Cluster::elapsed`]: fake time in a
    /// simulation, real time on loopback), the clock of the broker's introspection.
    pub at: Duration,
    /// The consumer group.
    pub group: String,
    /// The member: the consumer's `client.id`, which is how the models find it in the
    /// coordinator's generations.
    pub member: String,
    /// What happened.
    pub what: What,
}

/// A history entry that claims to be a consumer event but cannot be read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable consumer event {kind} {identity} {detail:?}: {reason}")]
pub struct EventError {
    /// The entry's kind.
    pub kind: String,
    /// The entry's identity.
    pub identity: String,
    /// The entry's detail.
    pub detail: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Event {
    /// The history kind (`kafka.consumer.process`, …).
    pub fn kind(&self) -> String {
        format!("{KIND_PREFIX}{}", self.what.name())
    }

    /// The history detail: `key=value` fields, values percent-escaped.
    pub fn detail(&self) -> String {
        let mut fields: Vec<(&str, String)> = vec![("group", self.group.clone())];
        let tp = |fields: &mut Vec<(&str, String)>, tp: &TopicPartition| {
            fields.push(("topic", tp.topic.clone()));
            fields.push(("partition", tp.partition.to_string()));
        };
        match &self.what {
            What::Assign(t) => tp(&mut fields, t),
            What::Revoke { tp: t, lost } => {
                tp(&mut fields, t);
                if *lost {
                    fields.push(("lost", "true".to_string()));
                }
            }
            What::Begin { tp: t, offset } => {
                tp(&mut fields, t);
                fields.push(("offset", offset.to_string()));
            }
            What::Process { tp: t, offset, value } => {
                tp(&mut fields, t);
                fields.push(("offset", offset.to_string()));
                if let Some(v) = value {
                    fields.push(("value", v.clone()));
                }
            }
            What::Error { tp: t, offset, error } => {
                tp(&mut fields, t);
                fields.push(("offset", offset.to_string()));
                fields.push(("error", error.clone()));
            }
            What::Commit { tp: t, offset, answer } => {
                tp(&mut fields, t);
                fields.push(("offset", offset.to_string()));
                fields.push(("answer", answer.encode()));
            }
            What::Stop | What::Leave | What::Crash => {}
            What::Heal { high_watermarks } => {
                let list: Vec<String> =
                    high_watermarks.iter().map(|(tp, hw)| format!("{}:{}:{hw}", tp.topic, tp.partition)).collect();
                fields.push(("hw", list.join(",")));
            }
        }
        fields.iter().map(|(k, v)| format!("{k}={}", escape(v))).collect::<Vec<_>>().join(" ")
    }

    /// Reads a history entry back: `Ok(None)` when it is not a consumer event (its kind does
    /// not start with `kafka.consumer.`), `Ok(Some(event))` when it is one.
    ///
    /// # Errors
    /// [`EventError`] when the kind claims a consumer event but the kind is unknown or a field
    /// is missing or malformed.
    pub fn from_history(
        kind: &str,
        identity: &str,
        detail: &str,
        seq: u64,
        at: Duration,
    ) -> Result<Option<Event>, EventError> {
        let Some(name) = kind.strip_prefix(KIND_PREFIX) else { return Ok(None) };
        let bad = |reason: String| EventError {
            kind: kind.to_string(),
            identity: identity.to_string(),
            detail: detail.to_string(),
            reason,
        };
        let fields = parse_fields(detail).map_err(bad)?;
        let get = |key: &str| fields.get(key).cloned().ok_or_else(|| bad(format!("no field {key}")));
        let int = |key: &str| -> Result<i64, EventError> {
            get(key)?.parse::<i64>().map_err(|e| bad(format!("field {key}: {e}")))
        };
        let tp = || -> Result<TopicPartition, EventError> {
            let partition = get("partition")?.parse::<i32>().map_err(|e| bad(format!("field partition: {e}")))?;
            Ok(TopicPartition { topic: get("topic")?, partition })
        };
        let what = match name {
            "assign" => What::Assign(tp()?),
            "revoke" => What::Revoke { tp: tp()?, lost: fields.get("lost").is_some_and(|v| v == "true") },
            "begin" => What::Begin { tp: tp()?, offset: int("offset")? },
            "process" => What::Process { tp: tp()?, offset: int("offset")?, value: fields.get("value").cloned() },
            "error" => What::Error { tp: tp()?, offset: int("offset")?, error: get("error")? },
            "commit" => {
                let answer = get("answer")?;
                let answer = Answer::decode(&answer).ok_or_else(|| bad(format!("answer {answer:?}")))?;
                What::Commit { tp: tp()?, offset: int("offset")?, answer }
            }
            "stop" => What::Stop,
            "leave" => What::Leave,
            "crash" => What::Crash,
            "heal" => {
                let mut high_watermarks = BTreeMap::new();
                for item in get("hw")?.split(',').filter(|s| !s.is_empty()) {
                    let mut parts = item.rsplitn(3, ':');
                    let (Some(hw), Some(p), Some(topic)) = (parts.next(), parts.next(), parts.next()) else {
                        return Err(bad(format!("high watermark {item:?}")));
                    };
                    let (Ok(hw), Ok(p)) = (hw.parse::<i64>(), p.parse::<i32>()) else {
                        return Err(bad(format!("high watermark {item:?}")));
                    };
                    high_watermarks.insert(TopicPartition::new(topic, p), hw);
                }
                What::Heal { high_watermarks }
            }
            other => return Err(bad(format!("unknown consumer event {other:?}"))),
        };
        Ok(Some(Event { seq, at, group: get("group")?, member: identity.to_string(), what }))
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {:?} {} {} {}", self.seq, self.at, self.kind(), self.member, self.detail())
    }
}

/// Escapes a field value: `%`, `=`, whitespace and control characters as `%XX`.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c == '%' || c == '=' || c.is_whitespace() || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn unescape(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).ok_or_else(|| format!("truncated escape in {value:?}"))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("bad escape %{hex} in {value:?}"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("escapes of {value:?} are not UTF-8"))
}

fn parse_fields(detail: &str) -> Result<BTreeMap<String, String>, String> {
    let mut fields = BTreeMap::new();
    for item in detail.split(' ').filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=').ok_or_else(|| format!("field without '=': {item:?}"))?;
        fields.insert(key.to_string(), unescape(value)?);
    }
    Ok(fields)
}

/// Offsets as ranges for reports: `[3, 4, 5, 9]` → `3..=5, 9`.
pub(crate) fn ranges(offsets: &[i64]) -> String {
    let mut sorted = offsets.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end { start.to_string() } else { format!("{start}..={end}") });
        i += 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(what: What) {
        let e = Event { seq: 7, at: Duration::from_millis(12), group: "bill ing=%".into(), member: "c 1".into(), what };
        let back = Event::from_history(&e.kind(), &e.member, &e.detail(), 7, e.at).expect("readable").expect("ours");
        assert_eq!(back, e);
    }

    #[test]
    fn every_event_round_trips_through_its_history_form() {
        let tp = TopicPartition::new("orders.v2-x", 3);
        round_trip(What::Assign(tp.clone()));
        round_trip(What::Revoke { tp: tp.clone(), lost: true });
        round_trip(What::Revoke { tp: tp.clone(), lost: false });
        round_trip(What::Begin { tp: tp.clone(), offset: 4 });
        round_trip(What::Process { tp: tp.clone(), offset: 4, value: Some("a b=c%d\né".into()) });
        round_trip(What::Process { tp: tp.clone(), offset: 4, value: None });
        round_trip(What::Error { tp: tp.clone(), offset: 5, error: "poison: value=x".into() });
        for answer in [Answer::Accepted, Answer::Refused(22), Answer::Unknown] {
            round_trip(What::Commit { tp: tp.clone(), offset: 6, answer });
        }
        round_trip(What::Stop);
        round_trip(What::Leave);
        round_trip(What::Crash);
        round_trip(What::Heal { high_watermarks: [(tp.clone(), 9), (TopicPartition::new("b", 0), 0)].into() });
        round_trip(What::Heal { high_watermarks: BTreeMap::new() });
    }

    #[test]
    fn other_kinds_are_not_consumer_events_and_broken_ones_are_errors() {
        assert_eq!(Event::from_history("kafka.commit", "g", "x", 0, Duration::ZERO), Ok(None));
        let missing = Event::from_history("kafka.consumer.process", "c1", "group=g topic=t", 0, Duration::ZERO);
        assert!(missing.is_err_and(|e| e.reason.contains("partition")));
        let unknown = Event::from_history("kafka.consumer.dance", "c1", "group=g", 0, Duration::ZERO);
        assert!(unknown.is_err_and(|e| e.reason.contains("dance")));
    }

    #[test]
    fn offsets_print_as_ranges() {
        assert_eq!(ranges(&[9, 3, 4, 5, 5, 11, 12]), "3..=5, 9, 11..=12");
        assert_eq!(ranges(&[]), "");
    }
}
