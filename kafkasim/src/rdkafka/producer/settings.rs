//! The producer's settings, read from a [`ClientConfig`] with librdkafka's defaults and the
//! adjustments it makes for idempotence (librdkafka `CONFIGURATION.md`, `enable.idempotence`:
//! `acks=all`, `max.in.flight.requests.per.connection<=5`, `retries>0`, else creation fails).

use std::time::Duration;

use crate::rdkafka::config::{ClientConfig, bootstrap_servers, int, millis, parse_bool};
use crate::rdkafka::error::{KafkaError, KafkaResult};
use crate::rdkafka::producer::partitioner::Partitioner;

/// The producer's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerSettings {
    /// `bootstrap.servers` (or `metadata.broker.list`): `host:port`, comma-separated.
    pub bootstrap: Vec<String>,
    /// `client.id` (default `rdkafka`).
    pub client_id: String,
    /// `enable.idempotence` (default false).
    pub idempotence: bool,
    /// `acks`: 0, 1 or -1 (all, the default).
    pub acks: i16,
    /// `linger.ms` / `queue.buffering.max.ms` (default 5 ms).
    pub linger: Duration,
    /// `batch.num.messages` (default 10 000).
    pub batch_messages_max: usize,
    /// `queue.buffering.max.messages` (default 100 000; 0 is no limit).
    pub queue_messages_max: usize,
    /// `message.timeout.ms` / `delivery.timeout.ms` (default 300 s; `None` for 0: no limit).
    pub message_timeout: Option<Duration>,
    /// `retries` / `message.send.max.retries` (default `i32::MAX`).
    pub retries: u32,
    /// `retry.backoff.ms` (default 100 ms): the first backoff, doubled on each retry up to
    /// `retry.backoff.max.ms` (default 1 s).
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`.
    pub retry_backoff_max: Duration,
    /// `request.timeout.ms` (default 30 s): sent in each ProduceRequest, the broker's limit on
    /// waiting for acks.
    pub request_timeout: Duration,
    /// `socket.timeout.ms` (default 60 s): how long the client waits for any response.
    pub socket_timeout: Duration,
    /// `max.in.flight.requests.per.connection`. This client sends one request per connection at
    /// a time whatever it is set to.
    pub in_flight_max: u32,
    /// `partitioner` (default `consistent_random`).
    pub partitioner: Partitioner,
    /// `message.max.bytes` (default 1 000 000): a record larger fails `MessageSizeTooLarge`.
    pub message_bytes_max: usize,
    /// `topic.metadata.refresh.interval.ms` (default 300 s; `None` for -1).
    pub metadata_refresh: Option<Duration>,
    /// `topic.metadata.propagation.max.ms` (default 30 s): how long a topic the cluster says does
    /// not exist is waited for before its messages fail `UnknownTopic`.
    pub metadata_propagation_max: Duration,
    /// `allow.auto.create.topics` (the producer's default: true).
    pub auto_create_topics: bool,
}

fn creation(message: impl Into<String>) -> KafkaError {
    KafkaError::ClientCreation(message.into())
}

impl ProducerSettings {
    /// Reads and checks `config`.
    ///
    /// # Errors
    /// [`KafkaError::ClientConfig`] for an unknown key or bad value;
    /// [`KafkaError::ClientCreation`] for settings inconsistent together (librdkafka's messages)
    /// or ones this client does not implement (compression, TLS, SASL), and for no
    /// `bootstrap.servers`.
    pub fn from_config(config: &ClientConfig) -> KafkaResult<ProducerSettings> {
        config.validate()?;
        let bootstrap = bootstrap_servers(config)?;
        let idempotence = config.get("enable.idempotence").and_then(parse_bool).unwrap_or(false);
        let acks_set = config.get("acks").or(config.get("request.required.acks"));
        let acks = match acks_set {
            None | Some("all") => -1,
            Some(v) => v.trim().parse::<i16>().unwrap_or(-1),
        };
        if !(-1..=1).contains(&acks) {
            return Err(creation(format!("acks={acks}: this client supports 0, 1 and all (-1)")));
        }
        let retries_set = ["retries", "message.send.max.retries"].iter().find_map(|k| config.get(k));
        let retries = int(config, &["retries", "message.send.max.retries"], i64::from(i32::MAX));
        let in_flight_set =
            ["max.in.flight.requests.per.connection", "max.in.flight"].iter().find_map(|k| config.get(k));
        let in_flight_max = int(config, &["max.in.flight.requests.per.connection", "max.in.flight"], 1_000_000);
        if idempotence {
            if acks_set.is_some() && acks != -1 {
                return Err(creation("`acks` must be set to `all` when `enable.idempotence` is true"));
            }
            if in_flight_set.is_some() && in_flight_max > 5 {
                return Err(creation(
                    "`max.in.flight.requests.per.connection` must be set <= 5 when `enable.idempotence` is true",
                ));
            }
            if retries_set.is_some() && retries < 1 {
                return Err(creation("`retries` must be set >= 1 when `enable.idempotence` is true"));
            }
        }
        for key in ["compression.type", "compression.codec"] {
            if config.get(key).is_some_and(|v| v != "none") {
                return Err(creation(format!("{key}: compression is not implemented by kafkasim::rdkafka")));
            }
        }
        if config.get("security.protocol").is_some_and(|v| v != "plaintext") {
            return Err(creation("security.protocol: only plaintext is implemented by kafkasim::rdkafka"));
        }
        let linger_ms: f64 = ["linger.ms", "queue.buffering.max.ms"]
            .iter()
            .find_map(|k| config.get(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(5.0);
        let timeout = millis(config, &["message.timeout.ms", "delivery.timeout.ms"], 300_000);
        let refresh = int(config, &["topic.metadata.refresh.interval.ms"], 300_000);
        Ok(ProducerSettings {
            bootstrap,
            client_id: config.get("client.id").unwrap_or("rdkafka").to_string(),
            idempotence,
            acks: if idempotence { -1 } else { acks },
            linger: Duration::from_secs_f64(linger_ms / 1000.0),
            batch_messages_max: usize::try_from(int(config, &["batch.num.messages"], 10_000)).unwrap_or(1),
            queue_messages_max: usize::try_from(int(config, &["queue.buffering.max.messages"], 100_000)).unwrap_or(0),
            message_timeout: (!timeout.is_zero()).then_some(timeout),
            retries: u32::try_from(retries).unwrap_or(0),
            retry_backoff: millis(config, &["retry.backoff.ms"], 100),
            retry_backoff_max: millis(config, &["retry.backoff.max.ms"], 1000),
            request_timeout: millis(config, &["request.timeout.ms"], 30_000),
            socket_timeout: millis(config, &["socket.timeout.ms"], 60_000),
            in_flight_max: u32::try_from(if idempotence { in_flight_max.min(5) } else { in_flight_max }).unwrap_or(1),
            partitioner: Partitioner::parse(config.get("partitioner").unwrap_or("consistent_random"))
                .expect("validated against PROPERTIES"),
            message_bytes_max: usize::try_from(int(config, &["message.max.bytes"], 1_000_000)).unwrap_or(1_000_000),
            metadata_refresh: (refresh >= 0).then(|| Duration::from_millis(refresh as u64)),
            metadata_propagation_max: millis(config, &["topic.metadata.propagation.max.ms"], 30_000),
            auto_create_topics: config.get("allow.auto.create.topics").and_then(parse_bool).unwrap_or(true),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> ClientConfig {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_librdkafkas_and_idempotence_forces_acks_all() {
        let s = ProducerSettings::from_config(&config(&[("bootstrap.servers", "a:1,b")])).expect("valid");
        assert_eq!(s.bootstrap, vec!["a:1", "b:9092"]);
        assert_eq!((s.acks, s.linger, s.batch_messages_max), (-1, Duration::from_millis(5), 10_000));
        assert_eq!((s.message_timeout, s.partitioner), (Some(Duration::from_secs(300)), Partitioner::ConsistentRandom));
        let s = ProducerSettings::from_config(&config(&[
            ("bootstrap.servers", "a:1"),
            ("enable.idempotence", "true"),
            ("acks", "1"),
        ]));
        assert!(matches!(s, Err(KafkaError::ClientCreation(ref m)) if m.contains("`acks` must be set to `all`")));
        let s = ProducerSettings::from_config(&config(&[
            ("bootstrap.servers", "a:1"),
            ("acks", "0"),
            ("message.timeout.ms", "0"),
        ]))
        .expect("valid");
        assert_eq!((s.acks, s.message_timeout), (0, None));
        assert!(matches!(ProducerSettings::from_config(&config(&[])), Err(KafkaError::ClientCreation(_))));
    }
}
