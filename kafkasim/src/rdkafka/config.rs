//! Client configuration as rdkafka shapes it: [`ClientConfig`] (string keys and values, as
//! librdkafka's), [`FromClientConfig`] / [`FromClientConfigAndContext`] for what it creates.
//!
//! Keys are librdkafka's (`CONFIGURATION.md` of librdkafka 2.12); [`PROPERTIES`] lists those
//! accepted, with the values librdkafka accepts. Like rdkafka, [`ClientConfig::set`] stores and
//! [`ClientConfig::create`] validates: an unknown key fails with
//! `KafkaError::ClientConfig(RD_KAFKA_CONF_UNKNOWN, "No such configuration property: \"k\"", ..)`,
//! a bad value with `RD_KAFKA_CONF_INVALID` and librdkafka's message for its type.

use std::collections::BTreeMap;

use crate::rdkafka::client::{ClientContext, DefaultClientContext};
use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaConfRes};

/// What values a property takes (librdkafka's property types).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Any string.
    Str,
    /// `true`/`false` (also `t`/`f`, `1`/`0`).
    Bool,
    /// An integer in `min..=max`.
    Int(i64, i64),
    /// A number in `min..=max`.
    Float(f64, f64),
    /// One of these words.
    Enum(&'static [&'static str]),
    /// A comma-separated list of these words.
    List(&'static [&'static str]),
    /// `all` or an integer in `-1..=1000` (`acks`).
    Acks,
}

/// The properties accepted, `(name, values)`: the producer's, the consumer's (stored for the
/// consumer to come, their values validated) and the global ones services set.
pub const PROPERTIES: &[(&str, Kind)] = &[
    ("bootstrap.servers", Kind::Str),
    ("metadata.broker.list", Kind::Str),
    ("client.id", Kind::Str),
    ("client.rack", Kind::Str),
    ("message.max.bytes", Kind::Int(1000, 1_000_000_000)),
    ("socket.timeout.ms", Kind::Int(10, 300_000)),
    ("socket.connection.setup.timeout.ms", Kind::Int(1000, 2_147_483_647)),
    ("socket.keepalive.enable", Kind::Bool),
    ("socket.nagle.disable", Kind::Bool),
    ("max.in.flight.requests.per.connection", Kind::Int(1, 1_000_000)),
    ("max.in.flight", Kind::Int(1, 1_000_000)),
    ("topic.metadata.refresh.interval.ms", Kind::Int(-1, 3_600_000)),
    ("metadata.max.age.ms", Kind::Int(1, 86_400_000)),
    ("topic.metadata.propagation.max.ms", Kind::Int(0, 3_600_000)),
    ("reconnect.backoff.ms", Kind::Int(0, 3_600_000)),
    ("reconnect.backoff.max.ms", Kind::Int(0, 3_600_000)),
    ("statistics.interval.ms", Kind::Int(0, 86_400_000)),
    ("log_level", Kind::Int(0, 7)),
    ("log.connection.close", Kind::Bool),
    ("api.version.request", Kind::Bool),
    ("allow.auto.create.topics", Kind::Bool),
    ("security.protocol", Kind::Enum(&["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"])),
    // Producer.
    ("enable.idempotence", Kind::Bool),
    ("acks", Kind::Acks),
    ("request.required.acks", Kind::Acks),
    ("linger.ms", Kind::Float(0.0, 900_000.0)),
    ("queue.buffering.max.ms", Kind::Float(0.0, 900_000.0)),
    ("queue.buffering.max.messages", Kind::Int(0, i32::MAX as i64)),
    ("queue.buffering.max.kbytes", Kind::Int(1, i32::MAX as i64)),
    ("batch.num.messages", Kind::Int(1, 1_000_000)),
    ("batch.size", Kind::Int(1, i32::MAX as i64)),
    ("message.timeout.ms", Kind::Int(0, i32::MAX as i64)),
    ("delivery.timeout.ms", Kind::Int(0, i32::MAX as i64)),
    ("retries", Kind::Int(0, i32::MAX as i64)),
    ("message.send.max.retries", Kind::Int(0, i32::MAX as i64)),
    ("retry.backoff.ms", Kind::Int(1, 300_000)),
    ("retry.backoff.max.ms", Kind::Int(1, 300_000)),
    ("request.timeout.ms", Kind::Int(1, 900_000)),
    (
        "partitioner",
        Kind::Enum(&[
            "random",
            "consistent",
            "consistent_random",
            "murmur2",
            "murmur2_random",
            "fnv1a",
            "fnv1a_random",
        ]),
    ),
    ("compression.type", Kind::Enum(&["none", "gzip", "snappy", "lz4", "zstd"])),
    ("compression.codec", Kind::Enum(&["none", "gzip", "snappy", "lz4", "zstd"])),
    // Consumer.
    ("group.id", Kind::Str),
    ("group.instance.id", Kind::Str),
    ("enable.auto.commit", Kind::Bool),
    ("auto.commit.interval.ms", Kind::Int(0, 86_400_000)),
    ("enable.auto.offset.store", Kind::Bool),
    ("auto.offset.reset", Kind::Enum(&["smallest", "earliest", "beginning", "largest", "latest", "end", "error"])),
    ("session.timeout.ms", Kind::Int(1, 3_600_000)),
    ("heartbeat.interval.ms", Kind::Int(1, 3_600_000)),
    ("max.poll.interval.ms", Kind::Int(1, 86_400_000)),
    ("partition.assignment.strategy", Kind::List(&["range", "roundrobin", "cooperative-sticky"])),
    ("enable.partition.eof", Kind::Bool),
    ("isolation.level", Kind::Enum(&["read_uncommitted", "read_committed"])),
    ("fetch.wait.max.ms", Kind::Int(0, 300_000)),
    ("fetch.min.bytes", Kind::Int(1, 100_000_000)),
    ("fetch.max.bytes", Kind::Int(0, i32::MAX as i64)),
    ("max.partition.fetch.bytes", Kind::Int(1, 1_000_000_000)),
];

/// A client's configuration: librdkafka property names to string values (rdkafka's
/// `ClientConfig`). Validated by [`ClientConfig::create`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientConfig {
    conf_map: BTreeMap<String, String>,
}

impl ClientConfig {
    /// An empty configuration (every property at librdkafka's default).
    pub fn new() -> ClientConfig {
        ClientConfig::default()
    }

    /// The value set for `key`, `None` when it was not set (defaults are not reported, as in
    /// rdkafka's `ClientConfig::get`).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.conf_map.get(key).map(String::as_str)
    }

    /// Sets `key` to `value`, replacing any earlier value; checked by `create`.
    pub fn set<K: Into<String>, V: Into<String>>(&mut self, key: K, value: V) -> &mut ClientConfig {
        self.conf_map.insert(key.into(), value.into());
        self
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) -> &mut ClientConfig {
        self.conf_map.remove(key);
        self
    }

    /// The properties set, by name.
    pub fn config_map(&self) -> &BTreeMap<String, String> {
        &self.conf_map
    }

    /// Checks every property set against [`PROPERTIES`].
    ///
    /// # Errors
    /// The first bad one (by name), as [`KafkaError::ClientConfig`].
    pub fn validate(&self) -> KafkaResult<()> {
        self.conf_map.iter().try_for_each(|(k, v)| check(k, v))
    }

    /// Creates a `T` (a `FutureProducer`) with the default context.
    ///
    /// # Errors
    /// An invalid configuration, or one `T` cannot run with ([`KafkaError::ClientCreation`]).
    pub fn create<T: FromClientConfig>(&self) -> KafkaResult<T> {
        T::from_config(self)
    }

    /// Creates a `T` with `context`.
    ///
    /// # Errors
    /// As [`ClientConfig::create`].
    pub fn create_with_context<C: ClientContext, T: FromClientConfigAndContext<C>>(
        &self,
        context: C,
    ) -> KafkaResult<T> {
        T::from_config_and_context(self, context)
    }
}

impl FromIterator<(String, String)> for ClientConfig {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> ClientConfig {
        ClientConfig { conf_map: iter.into_iter().collect() }
    }
}

/// What a [`ClientConfig`] creates with the default context (rdkafka's `FromClientConfig`).
pub trait FromClientConfig: Sized {
    /// Creates one.
    ///
    /// # Errors
    /// As [`ClientConfig::create`].
    fn from_config(config: &ClientConfig) -> KafkaResult<Self>;
}

/// What a [`ClientConfig`] creates with a context (rdkafka's `FromClientConfigAndContext`).
pub trait FromClientConfigAndContext<C: ClientContext>: Sized {
    /// Creates one.
    ///
    /// # Errors
    /// As [`ClientConfig::create`].
    fn from_config_and_context(config: &ClientConfig, context: C) -> KafkaResult<Self>;
}

impl<T: FromClientConfigAndContext<DefaultClientContext>> FromClientConfig for T {
    fn from_config(config: &ClientConfig) -> KafkaResult<T> {
        T::from_config_and_context(config, DefaultClientContext)
    }
}

fn invalid(key: &str, value: &str, message: String) -> KafkaError {
    KafkaError::ClientConfig(RDKafkaConfRes::RD_KAFKA_CONF_INVALID, message, key.to_string(), value.to_string())
}

/// Checks one property, with librdkafka's messages (`rd_kafka_anyconf_set_prop0`).
fn check(key: &str, value: &str) -> KafkaResult<()> {
    let Some((_, kind)) = PROPERTIES.iter().find(|(k, _)| *k == key) else {
        return Err(KafkaError::ClientConfig(
            RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN,
            format!("No such configuration property: \"{key}\""),
            key.to_string(),
            value.to_string(),
        ));
    };
    let plain = || invalid(key, value, format!("Invalid value for configuration property \"{key}\""));
    match *kind {
        Kind::Str => Ok(()),
        Kind::Bool => parse_bool(value)
            .map(|_| ())
            .ok_or_else(|| invalid(key, value, format!("Expected bool value for \"{key}\": true or false"))),
        Kind::Int(min, max) => {
            let n: i64 = value.trim().parse().map_err(|_| plain())?;
            in_range(key, value, n as f64, min as f64, max as f64)
        }
        Kind::Float(min, max) => {
            let n: f64 = value.trim().parse().map_err(|_| plain())?;
            in_range(key, value, n, min, max)
        }
        Kind::Acks => {
            if value == "all" {
                return Ok(());
            }
            let n: i64 = value.trim().parse().map_err(|_| plain())?;
            in_range(key, value, n as f64, -1.0, 1000.0)
        }
        Kind::Enum(words) => {
            if words.contains(&value) {
                Ok(())
            } else {
                Err(invalid(key, value, format!("Invalid value for configuration property \"{key}\": {value}")))
            }
        }
        Kind::List(words) => {
            if value.split(',').map(str::trim).all(|w| words.contains(&w)) {
                Ok(())
            } else {
                Err(invalid(key, value, format!("Invalid value for configuration property \"{key}\": {value}")))
            }
        }
    }
}

fn in_range(key: &str, value: &str, n: f64, min: f64, max: f64) -> KafkaResult<()> {
    if n.is_finite() && (min..=max).contains(&n) {
        Ok(())
    } else {
        Err(invalid(
            key,
            value,
            format!("Configuration property \"{key}\" value {value} is outside allowed range {min}..{max}"),
        ))
    }
}

/// A boolean as librdkafka reads one (`true`/`t`/`1`, `false`/`f`/`0`, any case).
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "t" | "1" => Some(true),
        "false" | "f" | "0" => Some(false),
        _ => None,
    }
}

/// The first of `keys` set, as an integer (`default` when none is set or it does not parse;
/// [`ClientConfig::validate`] has checked the values' ranges).
pub(crate) fn int(config: &ClientConfig, keys: &[&str], default: i64) -> i64 {
    keys.iter().find_map(|k| config.get(k)).and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// The first of `keys` set, in milliseconds (negative values: zero).
pub(crate) fn millis(config: &ClientConfig, keys: &[&str], default: i64) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(int(config, keys, default)).unwrap_or(0))
}

/// `bootstrap.servers` (or `metadata.broker.list`): `host:port` each, port 9092 when left out.
///
/// # Errors
/// [`KafkaError::ClientCreation`] when none is set (librdkafka's message).
pub(crate) fn bootstrap_servers(config: &ClientConfig) -> KafkaResult<Vec<String>> {
    let bootstrap: Vec<String> = config
        .get("bootstrap.servers")
        .or(config.get("metadata.broker.list"))
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| if s.contains(':') { s.to_string() } else { format!("{s}:9092") })
        .collect();
    if bootstrap.is_empty() {
        return Err(KafkaError::ClientCreation(
            "No `bootstrap.servers` configured: client cannot connect to any broker".into(),
        ));
    }
    Ok(bootstrap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_values_fail_as_librdkafka_says() {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "kafka-0:9092").set("acks", "all").set("linger.ms", "0.5");
        c.set("group.id", "g")
            .set("auto.offset.reset", "earliest")
            .set("partition.assignment.strategy", "range,roundrobin");
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.get("acks"), Some("all"));
        c.set("no.such", "1");
        let err = c.validate().expect_err("unknown key");
        assert_eq!(err.to_string(), "Client config error: No such configuration property: \"no.such\" no.such 1");
        c.remove("no.such").set("linger.ms", "-1");
        assert!(
            matches!(c.validate(), Err(KafkaError::ClientConfig(RDKafkaConfRes::RD_KAFKA_CONF_INVALID, ref m, _, _)) if m.contains("outside allowed range"))
        );
        c.set("linger.ms", "5").set("enable.idempotence", "maybe");
        assert!(
            matches!(c.validate(), Err(KafkaError::ClientConfig(_, ref m, _, _)) if m == "Expected bool value for \"enable.idempotence\": true or false")
        );
        c.set("enable.idempotence", "true").set("partitioner", "fancy");
        assert!(
            matches!(c.validate(), Err(KafkaError::ClientConfig(_, ref m, _, _)) if m.starts_with("Invalid value for configuration property \"partitioner\""))
        );
    }
}
