//! The producer's metadata cache: brokers' addresses and each topic's partition leaders, from
//! Metadata responses (v12). Refreshed when the sender says so — a leader error
//! (`NOT_LEADER_OR_FOLLOWER`, `UNKNOWN_TOPIC_OR_PARTITION`, `LEADER_NOT_AVAILABLE`), a lost
//! connection, a topic it has not seen, and every `topic.metadata.refresh.interval.ms` — as
//! librdkafka's `rd_kafka_metadata_refresh_*` are triggered.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName, metadata_request};
use tokio::time::Instant;

use crate::client::Client;
use crate::rdkafka::net::Dialer;

use crate::requests::string;

/// The Metadata version requested (kafkasim serves 0–12, Apache Kafka 4.x 0–13).
pub const METADATA_VERSION: i16 = 12;

/// What the cache knows of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicState {
    /// Its partitions' leaders, by partition (-1: no leader now).
    Known(Vec<i32>),
    /// The cluster answered this error for it, first at `since`.
    Failed {
        /// The error code.
        code: i16,
        /// When the topic was first asked for (librdkafka's propagation window starts there).
        since: Instant,
    },
}

/// The cache.
#[derive(Debug, Default)]
pub struct Metadata {
    brokers: BTreeMap<i32, String>,
    topics: BTreeMap<String, TopicState>,
    /// Topics asked for but not answered yet, with when they were first asked for.
    wanted: BTreeMap<String, Instant>,
}

impl Metadata {
    /// Notes that `topic` is needed (first asked for now, if new); whether it is unknown.
    pub fn want(&mut self, topic: &str, now: Instant) -> bool {
        if self.topics.contains_key(topic) {
            return false;
        }
        self.wanted.entry(topic.to_string()).or_insert(now);
        true
    }

    /// The topics to ask for: every one known or wanted.
    pub fn topics(&self) -> BTreeSet<String> {
        self.topics.keys().chain(self.wanted.keys()).cloned().collect()
    }

    /// A Metadata request for `topics`, letting the broker create missing topics when
    /// `auto_create` (the producer's `allow.auto.create.topics`, true by default).
    pub fn request(topics: &BTreeSet<String>, auto_create: bool) -> MetadataRequest {
        let topics = topics
            .iter()
            .map(|t| metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(string(t)))))
            .collect();
        MetadataRequest::default().with_topics(Some(topics)).with_allow_auto_topic_creation(auto_create)
    }

    /// Takes in a response received at `now`.
    pub fn update(&mut self, response: &MetadataResponse, now: Instant) {
        for b in &response.brokers {
            self.brokers.insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
        }
        for t in &response.topics {
            let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else { continue };
            let since = self.wanted.remove(&name);
            let state = if t.error_code != 0 {
                let since = match self.topics.get(&name) {
                    Some(TopicState::Failed { since, .. }) => *since,
                    _ => since.unwrap_or(now),
                };
                TopicState::Failed { code: t.error_code, since }
            } else {
                let mut leaders = vec![-1; t.partitions.len()];
                for p in &t.partitions {
                    if let Some(slot) = usize::try_from(p.partition_index).ok().and_then(|i| leaders.get_mut(i)) {
                        *slot = if p.error_code == 0 { p.leader_id.0 } else { -1 };
                    }
                }
                TopicState::Known(leaders)
            };
            self.topics.insert(name, state);
        }
    }

    /// What is known of `topic`.
    pub fn topic(&self, topic: &str) -> Option<&TopicState> {
        self.topics.get(topic)
    }

    /// The leader of `topic`-`partition` and its address, when known.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<(i32, &str)> {
        let Some(TopicState::Known(leaders)) = self.topics.get(topic) else { return None };
        let leader = *leaders.get(usize::try_from(partition).ok()?)?;
        self.brokers.get(&leader).map(|addr| (leader, addr.as_str()))
    }

    /// The address of broker `id`.
    pub fn address(&self, id: i32) -> Option<&str> {
        self.brokers.get(&id).map(String::as_str)
    }

    /// Every known broker address, by id.
    pub fn addresses(&self) -> Vec<String> {
        self.brokers.values().cloned().collect()
    }
}

/// When the next Metadata request goes out, and where: the refresh state the producer's sender
/// and the consumer's fetcher share. `due` is set by whoever needs fresh metadata (a leader
/// error, a lost connection, an unknown topic); `next_refresh` by the periodic refresh
/// (`topic.metadata.refresh.interval.ms`) and by a retry; `retry_at` holds requests back after
/// a failed one (`retry.backoff.ms`).
#[derive(Debug, Default)]
pub struct Refresh {
    /// A refresh is wanted.
    pub due: bool,
    /// A request is in flight.
    pub busy: bool,
    /// When a refresh becomes due by itself.
    pub next_refresh: Option<Instant>,
    /// No request before this (after a failed one).
    pub retry_at: Option<Instant>,
    /// Which address the next request goes to (see [`Refresh::next_address`]).
    address_next: usize,
}

impl Refresh {
    /// The address the next request goes to: the known brokers, then the bootstrap servers, in
    /// turn, as librdkafka spreads metadata requests over the brokers it knows.
    pub fn next_address(&mut self, cache: &Metadata, bootstrap: &[String]) -> String {
        let mut all = cache.addresses();
        all.extend(bootstrap.iter().cloned());
        let addr = all[self.address_next % all.len()].clone();
        self.address_next = self.address_next.wrapping_add(1);
        addr
    }

    /// The request to send now and where, if one is due, none is in flight, the cache has
    /// topics to ask for and no backoff holds it; it is then in flight (`busy`) until the caller
    /// clears it with the answer.
    pub fn start(
        &mut self,
        cache: &Metadata,
        bootstrap: &[String],
        auto_create: bool,
        now: Instant,
    ) -> Option<(MetadataRequest, String)> {
        if self.next_refresh.is_some_and(|t| t <= now) {
            self.next_refresh = None;
            self.due = true;
        }
        if !self.due || self.busy || cache.topics().is_empty() || self.retry_at.is_some_and(|t| t > now) {
            return None;
        }
        self.due = false;
        self.busy = true;
        Some((Metadata::request(&cache.topics(), auto_create), self.next_address(cache, bootstrap)))
    }
}

/// Sends one Metadata request to `addr` on a fresh connection, giving up after `timeout`
/// (`socket.timeout.ms`).
///
/// # Errors
/// Why it failed (dial, transport, decode, timeout), as text for the caller's log and retry.
pub(crate) async fn fetch(
    dialer: Dialer,
    addr: String,
    client_id: String,
    timeout: std::time::Duration,
    request: MetadataRequest,
) -> Result<MetadataResponse, String> {
    tokio::time::timeout(timeout, async {
        let stream = dialer.dial(&addr).await.map_err(|e| e.to_string())?;
        Client::new(stream, &client_id).send(request, METADATA_VERSION).await.map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|_| Err("metadata request timed out".into()))
}
