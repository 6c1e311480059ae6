//! A scenario's observations: an ordered list of labelled values, normalized as they are
//! recorded so that the fake's and the real server's runs compare equal when they behave alike.
//!
//! What differs between two correct runs is normalized away: generated ids (member ids,
//! producer ids, cluster ids) become aliases numbered in order of first appearance
//! ([`Recorder::alias`]), so that "the same member as before" is still visible; the run's
//! unique suffix in topic and group names ([`Recorder::replacing`]) becomes `N`. Timestamps and
//! ports are the scenario's to leave out or to record relative to something it chose.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The most steps one scenario may record (a runaway loop is a bug in the scenario).
pub const STEPS_MAX: usize = 10_000;

/// One observation: what was done (the label) and what came back (the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What was done: `produce acks=1`, `commit with generation 1`.
    pub label: String,
    /// What was observed, normalized: `NONE base_offset=3`.
    pub value: String,
}

/// Everything one side of a scenario observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observations {
    /// In the order recorded.
    pub steps: Vec<Step>,
    /// Set when the scenario ended before its last step: the error or panic message.
    pub ended_early: Option<String>,
}

#[derive(Debug, Default)]
struct Inner {
    steps: Vec<Step>,
    aliases: BTreeMap<(String, String), String>,
    per_kind: BTreeMap<String, usize>,
}

/// Records steps from any thread (rdkafka callbacks run on librdkafka's threads).
#[derive(Debug, Default)]
pub struct Recorder {
    inner: Mutex<Inner>,
    replacements: Vec<(String, String)>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// Replaces every occurrence of `from` by `to` in labels and values recorded from now on
    /// (a run-unique suffix in names). An empty `from` is ignored.
    pub fn replacing(mut self, from: impl Into<String>, to: impl Into<String>) -> Recorder {
        let from = from.into();
        if !from.is_empty() {
            self.replacements.push((from, to.into()));
        }
        self
    }

    fn normalize(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (from, to) in &self.replacements {
            out = out.replace(from.as_str(), to);
        }
        out
    }

    /// Records one step.
    ///
    /// # Panics
    /// When the scenario records more than [`STEPS_MAX`] steps.
    pub fn note(&self, label: impl AsRef<str>, value: impl AsRef<str>) {
        let step = Step { label: self.normalize(label.as_ref()), value: self.normalize(value.as_ref()) };
        let mut inner = self.inner.lock().expect("recorder lock: no recording code panics while holding it");
        assert!(inner.steps.len() < STEPS_MAX, "a scenario records at most {STEPS_MAX} steps");
        inner.steps.push(step);
    }

    /// The alias of a generated id: `{kind}#{n}`, `n` counting distinct ids of that kind from 1 in
    /// the order first seen. The same id always gets the same alias; an empty id stays empty (an
    /// empty member id means "none yet" in Kafka, and that must stay visible).
    pub fn alias(&self, kind: &str, raw: impl AsRef<str>) -> String {
        let raw = raw.as_ref();
        if raw.is_empty() {
            return String::new();
        }
        let mut inner = self.inner.lock().expect("recorder lock: no recording code panics while holding it");
        let key = (kind.to_string(), raw.to_string());
        if let Some(a) = inner.aliases.get(&key) {
            return a.clone();
        }
        let n = inner.per_kind.entry(kind.to_string()).or_insert(0);
        *n += 1;
        let alias = format!("{kind}#{n}");
        inner.aliases.insert(key, alias.clone());
        alias
    }

    /// The steps recorded so far, and `ended_early`.
    pub fn finish(&self, ended_early: Option<String>) -> Observations {
        let inner = self.inner.lock().expect("recorder lock: no recording code panics while holding it");
        Observations { steps: inner.steps.clone(), ended_early }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_number_distinct_ids_per_kind_in_order_of_first_appearance() {
        let r = Recorder::new();
        assert_eq!(r.alias("member", "consumer-9f1c"), "member#1");
        assert_eq!(r.alias("member", "consumer-0a2b"), "member#2");
        assert_eq!(r.alias("producer", "4001"), "producer#1");
        assert_eq!(r.alias("member", "consumer-9f1c"), "member#1");
        assert_eq!(r.alias("member", ""), "", "no member id stays visible as none");
    }

    #[test]
    fn the_run_suffix_is_replaced_in_labels_and_values() {
        let r = Recorder::new().replacing("x7f3a", "N");
        r.note("create topic orders-x7f3a", "topic orders-x7f3a: NONE");
        let o = r.finish(None);
        assert_eq!(o.steps, vec![Step { label: "create topic orders-N".into(), value: "topic orders-N: NONE".into() }]);
    }
}
