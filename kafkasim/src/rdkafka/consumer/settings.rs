//! The consumer's settings: the fetch and offset keys of a [`ClientConfig`], with librdkafka's
//! defaults (`CONFIGURATION.md`). The group keys are read by the group module.

use std::time::Duration;

use crate::rdkafka::config::{ClientConfig, bootstrap_servers, int, millis, parse_bool};
use crate::rdkafka::error::{KafkaError, KafkaResult};

/// What `auto.offset.reset` does when a partition has no committed offset or its offset is out
/// of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// `smallest`, `earliest`, `beginning`: the log start.
    Earliest,
    /// `largest`, `latest`, `end` (the default): the high watermark.
    Latest,
    /// `error`: the application gets `MessageConsumption(AutoOffsetReset)` from `recv()`, and
    /// the partition is not fetched until it is seeked.
    Error,
}

/// The consumer's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerSettings {
    /// `bootstrap.servers` (or `metadata.broker.list`).
    pub bootstrap: Vec<String>,
    /// `client.id` (default `rdkafka`).
    pub client_id: String,
    /// `group.id`, when set.
    pub group_id: Option<String>,
    /// `enable.auto.commit` (default true).
    pub auto_commit: bool,
    /// `auto.commit.interval.ms` (default 5 s).
    pub auto_commit_interval: Duration,
    /// `enable.auto.offset.store` (default true): a message's offset + 1 is stored as `recv()`
    /// returns it.
    pub auto_offset_store: bool,
    /// `auto.offset.reset` (default `latest`).
    pub offset_reset: OffsetReset,
    /// `fetch.wait.max.ms` (default 500 ms).
    pub fetch_wait_max: Duration,
    /// `fetch.min.bytes` (default 1).
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes` (default 52 428 800).
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes` (default 1 048 576).
    pub partition_fetch_max_bytes: i32,
    /// `isolation.level` (default `read_committed`): sent in each FetchRequest.
    pub read_committed: bool,
    /// `retry.backoff.ms` (default 100 ms): after a fetch or offset lookup error.
    pub retry_backoff: Duration,
    /// `socket.timeout.ms` (default 60 s).
    pub socket_timeout: Duration,
    /// `topic.metadata.refresh.interval.ms` (default 300 s; `None` for -1).
    pub metadata_refresh: Option<Duration>,
    /// `allow.auto.create.topics` (the consumer's default: false).
    pub auto_create_topics: bool,
    /// `topic.metadata.propagation.max.ms` (default 30 s): how long an assigned topic the
    /// cluster says does not exist is waited for before the consumer reports it.
    pub metadata_propagation_max: Duration,
}

fn flag(config: &ClientConfig, key: &str, default: bool) -> bool {
    config.get(key).and_then(parse_bool).unwrap_or(default)
}

impl ConsumerSettings {
    /// Reads and checks `config`.
    ///
    /// # Errors
    /// [`KafkaError::ClientConfig`] for an unknown key or bad value; [`KafkaError::ClientCreation`]
    /// for no `bootstrap.servers`, or TLS/SASL (not implemented).
    pub fn from_config(config: &ClientConfig) -> KafkaResult<ConsumerSettings> {
        config.validate()?;
        let bootstrap = bootstrap_servers(config)?;
        if config.get("security.protocol").is_some_and(|v| v != "plaintext") {
            return Err(KafkaError::ClientCreation(
                "security.protocol: only plaintext is implemented by kafkasim::rdkafka".into(),
            ));
        }
        let offset_reset = match config.get("auto.offset.reset").unwrap_or("latest") {
            "smallest" | "earliest" | "beginning" => OffsetReset::Earliest,
            "error" => OffsetReset::Error,
            _ => OffsetReset::Latest,
        };
        let refresh = int(config, &["topic.metadata.refresh.interval.ms"], 300_000);
        let clamp = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
        Ok(ConsumerSettings {
            bootstrap,
            client_id: config.get("client.id").unwrap_or("rdkafka").to_string(),
            group_id: config.get("group.id").filter(|g| !g.is_empty()).map(str::to_string),
            auto_commit: flag(config, "enable.auto.commit", true),
            auto_commit_interval: millis(config, &["auto.commit.interval.ms"], 5_000),
            auto_offset_store: flag(config, "enable.auto.offset.store", true),
            offset_reset,
            fetch_wait_max: millis(config, &["fetch.wait.max.ms"], 500),
            fetch_min_bytes: clamp(int(config, &["fetch.min.bytes"], 1)),
            fetch_max_bytes: clamp(int(config, &["fetch.max.bytes"], 52_428_800)),
            partition_fetch_max_bytes: clamp(int(config, &["max.partition.fetch.bytes"], 1_048_576)),
            read_committed: config.get("isolation.level") != Some("read_uncommitted"),
            retry_backoff: millis(config, &["retry.backoff.ms"], 100),
            socket_timeout: millis(config, &["socket.timeout.ms"], 60_000),
            metadata_refresh: (refresh >= 0).then(|| Duration::from_millis(refresh as u64)),
            auto_create_topics: flag(config, "allow.auto.create.topics", false),
            metadata_propagation_max: Duration::from_millis(
                u64::try_from(int(config, &["topic.metadata.propagation.max.ms"], 30_000)).unwrap_or(0),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_librdkafkas() {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "k:1");
        let s = ConsumerSettings::from_config(&c).expect("valid");
        assert_eq!((s.auto_commit, s.auto_offset_store, s.offset_reset), (true, true, OffsetReset::Latest));
        assert_eq!((s.auto_commit_interval, s.fetch_wait_max), (Duration::from_secs(5), Duration::from_millis(500)));
        assert_eq!((s.group_id, s.partition_fetch_max_bytes, s.read_committed), (None, 1_048_576, true));
        c.set("auto.offset.reset", "smallest").set("group.id", "g").set("enable.auto.commit", "false");
        let s = ConsumerSettings::from_config(&c).expect("valid");
        assert_eq!((s.offset_reset, s.group_id.as_deref(), s.auto_commit), (OffsetReset::Earliest, Some("g"), false));
        assert!(ConsumerSettings::from_config(&ClientConfig::new()).is_err());
    }
}
