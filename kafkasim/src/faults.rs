//! Faults: what the cluster does wrong on purpose, keyed on identity, installable now or at fake
//! times, every install and removal recorded in the run's history.
//!
//! A [`Fault`] selects requests by API key and, optionally, by broker, topic, partition and group
//! — never by how many requests came before — and says what happens to them ([`FaultAction`]).
//! Faults are consulted in install order; the first that matches wins. An error fault answers the
//! selected parts of the request with the error code (the other partitions of the same request
//! are served normally, as a broker does); the other actions act on the whole request and its
//! connection.
//!
//! A fault is a [`sim::fault::Fault`] on the [`crate::Cluster`]: [`crate::Cluster::install`]
//! returns a `#[must_use]` [`sim::fault::FaultGuard`] (dropping it removes the fault), and
//! [`crate::Cluster::at`] schedules one at a fake time with [`sim::fault::Scheduled`].

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;

/// What happens to a request a fault selects.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Answer the selected partitions or groups with this error, without applying them.
    Error(ResponseError),
    /// Hold the request this long before handling it (the connection handles nothing else
    /// meanwhile, as a Kafka broker processes one request per connection at a time).
    Delay(Duration),
    /// Close the connection instead of handling the request.
    DropConnection,
    /// Never answer: the connection stays open and silent until the broker goes down.
    Silence,
    /// Apply the request, then close the connection instead of answering: the outcome-unknown
    /// case (a produce that was appended, a commit that was stored, with the response lost).
    ApplyThenDrop,
}

/// A fault: which requests, and what happens to them.
///
/// ```
/// use kafkasim::{Fault, FaultAction};
/// use kafkasim::kafka_protocol::{ResponseError, messages::ApiKey};
///
/// let fault = Fault::new(ApiKey::OffsetCommit, FaultAction::Error(ResponseError::RebalanceInProgress))
///     .group("payments");
/// assert!(fault.to_string().contains("OffsetCommit"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The API key selected.
    pub api: ApiKey,
    /// Only requests to this broker.
    pub broker: Option<i32>,
    /// Only requests touching this topic.
    pub topic: Option<String>,
    /// Only this partition (with `topic`).
    pub partition: Option<i32>,
    /// Only requests for this group.
    pub group: Option<String>,
    /// What happens.
    pub action: FaultAction,
}

impl Fault {
    /// Every request of `api` gets `action`.
    pub fn new(api: ApiKey, action: FaultAction) -> Fault {
        Fault { api, broker: None, topic: None, partition: None, group: None, action }
    }

    /// Only requests to broker `id`.
    pub fn broker(mut self, id: i32) -> Fault {
        self.broker = Some(id);
        self
    }

    /// Only requests touching `topic`.
    pub fn topic(mut self, topic: &str) -> Fault {
        self.topic = Some(topic.to_string());
        self
    }

    /// Only partition `partition` of the topic.
    pub fn partition(mut self, partition: i32) -> Fault {
        self.partition = Some(partition);
        self
    }

    /// Only requests for group `group`.
    pub fn group(mut self, group: &str) -> Fault {
        self.group = Some(group.to_string());
        self
    }

    /// Whether the fault selects a part of a request to `broker` of `api`: a topic partition
    /// (`Some` topic and partition) or a group.
    pub(crate) fn selects(&self, api: ApiKey, broker: i32, part: &Part<'_>) -> bool {
        if self.api != api || self.broker.is_some_and(|b| b != broker) {
            return false;
        }
        let topic_ok = match (&self.topic, part.topic) {
            (None, _) => true,
            (Some(want), Some(t)) => want == t,
            (Some(_), None) => false,
        };
        let partition_ok = match (self.partition, part.partition) {
            (None, _) => true,
            (Some(want), Some(p)) => want == p,
            (Some(_), None) => false,
        };
        let group_ok = match (&self.group, part.group) {
            (None, _) => true,
            (Some(want), Some(g)) => want == g,
            (Some(_), None) => false,
        };
        topic_ok && partition_ok && group_ok
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.api)?;
        if let Some(b) = self.broker {
            write!(f, " broker={b}")?;
        }
        if let Some(t) = &self.topic {
            write!(f, " topic={t}")?;
        }
        if let Some(p) = self.partition {
            write!(f, " partition={p}")?;
        }
        if let Some(g) = &self.group {
            write!(f, " group={g}")?;
        }
        match &self.action {
            FaultAction::Error(e) => write!(f, ": error {e:?} ({})", e.code()),
            FaultAction::Delay(d) => write!(f, ": delay {d:?}"),
            other => write!(f, ": {other:?}"),
        }
    }
}

/// One part of a request a fault can select: a topic partition, a topic, a group, or the
/// request as a whole (all `None`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Part<'a> {
    pub topic: Option<&'a str>,
    pub partition: Option<i32>,
    pub group: Option<&'a str>,
}

/// The installed faults, in install order.
#[derive(Debug, Default)]
pub(crate) struct FaultSet {
    next_id: u64,
    faults: BTreeMap<u64, Fault>,
}

impl FaultSet {
    /// The most faults installed at once.
    pub const FAULTS_MAX: usize = 10_000;

    pub(crate) fn install(&mut self, fault: Fault) -> u64 {
        assert!(self.faults.len() < Self::FAULTS_MAX, "more than FaultSet::FAULTS_MAX ({}) faults", Self::FAULTS_MAX);
        let id = self.next_id;
        self.next_id += 1;
        self.faults.insert(id, fault);
        id
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<Fault> {
        self.faults.remove(&id)
    }

    /// The first fault selecting any of `parts` of a request of `api` to `broker`.
    pub(crate) fn first<'a>(
        &self,
        api: ApiKey,
        broker: i32,
        parts: impl IntoIterator<Item = Part<'a>>,
    ) -> Option<&Fault> {
        let parts: Vec<Part<'a>> = parts.into_iter().collect();
        self.faults.values().find(|f| parts.iter().any(|p| f.selects(api, broker, p)))
    }

    /// The error a fault injects into one part, if any.
    pub(crate) fn error_for(&self, api: ApiKey, broker: i32, part: Part<'_>) -> Option<i16> {
        self.faults.values().find_map(|f| match &f.action {
            FaultAction::Error(e) if f.selects(api, broker, &part) => Some(e.code()),
            _ => None,
        })
    }
}
