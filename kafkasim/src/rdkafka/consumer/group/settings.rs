//! The consumer group's settings, read from a [`ClientConfig`] with librdkafka 2.12's defaults
//! (`CONFIGURATION.md`): `group.id`, `group.instance.id` (KIP-345), `session.timeout.ms`
//! (45 s), `heartbeat.interval.ms` (3 s), `max.poll.interval.ms` (300 s, KIP-62),
//! `partition.assignment.strategy` (`range,roundrobin`), `retry.backoff.ms` (100 ms),
//! `reconnect.backoff.ms` (100 ms), `socket.timeout.ms` (60 s), `client.id` (`rdkafka`).

use std::time::Duration;

use crate::rdkafka::config::{ClientConfig, bootstrap_servers};
use crate::rdkafka::error::{KafkaError, KafkaResult};

use super::assignor::Strategy;

/// What the group task needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupSettings {
    /// `group.id`.
    pub(crate) group_id: String,
    /// `group.instance.id`: a static member (KIP-345) when set.
    pub(crate) instance_id: Option<String>,
    /// `session.timeout.ms`.
    pub(crate) session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub(crate) heartbeat_interval: Duration,
    /// `max.poll.interval.ms`; JoinGroup's rebalance timeout too, as librdkafka sends it.
    pub(crate) max_poll_interval: Duration,
    /// `partition.assignment.strategy`, in preference order (one JoinGroup protocol each).
    pub(crate) strategies: Vec<Strategy>,
    /// `client.id`.
    pub(crate) client_id: String,
    /// `bootstrap.servers` (or `metadata.broker.list`), `host:port` each.
    pub(crate) bootstrap: Vec<String>,
    /// `retry.backoff.ms`: the wait before a coordinator is looked up again, a commit retried.
    pub(crate) retry_backoff: Duration,
    /// `reconnect.backoff.ms`: the wait before a lost coordinator connection is dialed again.
    pub(crate) reconnect_backoff: Duration,
    /// `socket.timeout.ms`: how long any response is waited for (JoinGroup: the rebalance
    /// timeout on top, as librdkafka's join request timeout).
    pub(crate) socket_timeout: Duration,
    /// `topic.metadata.refresh.interval.ms` (default 300 s): how often a subscription none of
    /// whose topics exists is looked up again before joining.
    pub(crate) metadata_refresh: Duration,
}

fn millis(config: &ClientConfig, key: &str, default: u64) -> Duration {
    Duration::from_millis(config.get(key).and_then(|v| v.trim().parse().ok()).unwrap_or(default))
}

impl GroupSettings {
    /// Reads `config`; `None` without a `group.id` (no group: `assign()` only, commits fail).
    ///
    /// # Errors
    /// [`KafkaError::ClientConfig`] for an unknown key or bad value (via
    /// [`ClientConfig::validate`]); [`KafkaError::ClientCreation`] for an empty strategy list, and
    /// for cooperative-sticky mixed with an eager strategy (librdkafka: "All partition assignment
    /// strategies must have the same protocol type").
    pub(crate) fn from_config(config: &ClientConfig) -> KafkaResult<Option<GroupSettings>> {
        config.validate()?;
        let Some(group_id) = config.get("group.id").filter(|g| !g.is_empty()) else { return Ok(None) };
        let strategies: Vec<Strategy> = config
            .get("partition.assignment.strategy")
            .unwrap_or("range,roundrobin")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .filter_map(Strategy::parse)
            .collect();
        if strategies.is_empty() {
            return Err(KafkaError::ClientCreation("partition.assignment.strategy: no supported assignors".into()));
        }
        let cooperative = strategies.iter().filter(|s| s.cooperative()).count();
        if cooperative != 0 && cooperative != strategies.len() {
            return Err(KafkaError::ClientCreation(
                "All partition.assignment.strategy (cooperative-sticky,...) assignors must have the same protocol type, \
                 online migration between assignors with different protocol types is not supported"
                    .into(),
            ));
        }
        let bootstrap = bootstrap_servers(config)?;
        Ok(Some(GroupSettings {
            group_id: group_id.to_string(),
            instance_id: config.get("group.instance.id").filter(|i| !i.is_empty()).map(str::to_string),
            session_timeout: millis(config, "session.timeout.ms", 45_000),
            heartbeat_interval: millis(config, "heartbeat.interval.ms", 3_000),
            max_poll_interval: millis(config, "max.poll.interval.ms", 300_000),
            strategies,
            client_id: config.get("client.id").unwrap_or("rdkafka").to_string(),
            bootstrap,
            retry_backoff: millis(config, "retry.backoff.ms", 100),
            reconnect_backoff: millis(config, "reconnect.backoff.ms", 100),
            socket_timeout: millis(config, "socket.timeout.ms", 60_000),
            metadata_refresh: millis(config, "topic.metadata.refresh.interval.ms", 300_000),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> ClientConfig {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_librdkafkas() {
        assert_eq!(GroupSettings::from_config(&config(&[("bootstrap.servers", "a:1")])).expect("valid"), None);
        let s = GroupSettings::from_config(&config(&[("bootstrap.servers", "a:1"), ("group.id", "g")]))
            .expect("valid")
            .expect("a group");
        assert_eq!(s.strategies, vec![Strategy::Range, Strategy::RoundRobin]);
        assert_eq!((s.session_timeout, s.heartbeat_interval), (Duration::from_secs(45), Duration::from_secs(3)));
        assert_eq!((s.max_poll_interval, s.instance_id), (Duration::from_secs(300), None));
        let mixed = config(&[("group.id", "g"), ("partition.assignment.strategy", "range,cooperative-sticky")]);
        assert!(matches!(GroupSettings::from_config(&mixed), Err(KafkaError::ClientCreation(_))));
    }
}
