//! Topic configs: the 33 configs an Apache Kafka 4.2 topic has (their types, defaults, broker
//! synonyms and validators), a topic's overrides, and the typed values the broker applies.
//!
//! Semantics (Kafka's `LogConfig` and `ConfigDef`, measured against Apache Kafka 4.2.0 as
//! `fidelity/scripts/kafka-local.sh` starts it: DescribeConfigs of a fresh topic, and CreateTopics
//! with `validate_only` for values at and past every bound):
//! - a name outside [`DEFS`] is `INVALID_CONFIG` "Unknown topic config name: NAME" (a broker
//!   config name such as `message.max.bytes` is unknown too); a null value is `INVALID_CONFIG`
//!   "Null value not supported for topic configs: NAME";
//! - a value is trimmed, then parsed by its type (INT is `i32`, LONG `i64`, BOOLEAN `true`/`false`
//!   in any case, LIST comma-separated with each element trimmed and "" the empty list) and
//!   checked by its validator; a failure is `INVALID_CONFIG` "Invalid value V for configuration
//!   NAME: REASON" with the reason Kafka gives ("Value must be at least 0", "String must be one
//!   of: compact, delete", "Not a number of type INT", …);
//! - `remote.storage.enable=true` is refused: tiered storage is off, as on the reference broker;
//! - a topic keeps each override as Kafka prints it once parsed (" 100 " is "100", "a, b" is
//!   "a,b"), and an unset config answers its default with source `DEFAULT_CONFIG`, or the broker's value for
//!   `max.message.bytes` (`message.max.bytes`) and `min.insync.replicas` (the cluster default
//!   KRaft writes, `DYNAMIC_DEFAULT_BROKER_CONFIG`).

use std::collections::BTreeMap;

use kafka_protocol::ResponseError as E;

/// The type of a config, as DescribeConfigs v3+ reports it (`config_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// `BOOLEAN` (1).
    Boolean,
    /// `STRING` (2).
    String,
    /// `INT` (3): a 32-bit signed integer.
    Int,
    /// `LONG` (5): a 64-bit signed integer.
    Long,
    /// `DOUBLE` (6).
    Double,
    /// `LIST` (7): comma-separated strings.
    List,
}

impl ConfigType {
    /// The wire code.
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
        }
    }
}

/// Where a config's value comes from (`config_source` in DescribeConfigs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// `DYNAMIC_TOPIC_CONFIG` (1): the topic's own override.
    DynamicTopic,
    /// `DYNAMIC_DEFAULT_BROKER_CONFIG` (3): a cluster-wide dynamic default.
    DynamicDefaultBroker,
    /// `STATIC_BROKER_CONFIG` (4): the broker's configuration file.
    StaticBroker,
    /// `DEFAULT_CONFIG` (5): Kafka's built-in default.
    Default,
}

impl ConfigSource {
    /// The wire code.
    pub fn code(self) -> i8 {
        match self {
            ConfigSource::DynamicTopic => 1,
            ConfigSource::DynamicDefaultBroker => 3,
            ConfigSource::StaticBroker => 4,
            ConfigSource::Default => 5,
        }
    }
}

/// What a value must satisfy beyond parsing as its type.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Any,
    AtLeast(i64),
    Range(i64, i64),
    /// `lo..=hi`, or exactly the third value (gzip's level: 1..=9 or -1).
    RangeOr(i64, i64, i64),
    /// A double in `lo..=hi`.
    Ratio(f64, f64),
    /// One of these strings (STRING), or every element one of them (LIST).
    OneOf(&'static [&'static str]),
    /// `*`, or `partition:broker` pairs (the throttled-replicas lists).
    Throttled,
    /// A boolean that must stay false (tiered storage is off).
    RemoteStorage,
}

/// Where an unset config's value comes from.
#[derive(Debug, Clone, Copy)]
enum Fallback {
    /// Kafka's default, with this broker config as its synonym (or none).
    Default(Option<&'static str>),
    /// The broker's `message.max.bytes` (static when the cluster was built with another limit).
    MessageMaxBytes,
    /// The cluster-wide dynamic default KRaft writes (and the same value statically).
    ClusterDefault,
}

/// One topic config.
#[derive(Debug, Clone, Copy)]
pub struct Def {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub ty: ConfigType,
    /// Kafka 4.2's default, as DescribeConfigs prints it.
    pub default: &'static str,
    rule: Rule,
    fallback: Fallback,
}

const fn def(
    name: &'static str,
    ty: ConfigType,
    default: &'static str,
    rule: Rule,
    synonym: Option<&'static str>,
) -> Def {
    Def { name, ty, default, rule, fallback: Fallback::Default(synonym) }
}

use ConfigType as T;

/// Every topic config of Apache Kafka 4.2, by name (measured: DescribeConfigs of a new topic).
pub const DEFS: &[Def] = &[
    def("cleanup.policy", T::List, "delete", Rule::OneOf(&["compact", "delete"]), Some("log.cleanup.policy")),
    def("compression.gzip.level", T::Int, "-1", Rule::RangeOr(1, 9, -1), Some("compression.gzip.level")),
    def("compression.lz4.level", T::Int, "9", Rule::Range(1, 17), Some("compression.lz4.level")),
    def(
        "compression.type",
        T::String,
        "producer",
        Rule::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        Some("compression.type"),
    ),
    def("compression.zstd.level", T::Int, "3", Rule::Range(-131_072, 22), Some("compression.zstd.level")),
    def("delete.retention.ms", T::Long, "86400000", Rule::AtLeast(0), Some("log.cleaner.delete.retention.ms")),
    def("file.delete.delay.ms", T::Long, "60000", Rule::AtLeast(0), Some("log.segment.delete.delay.ms")),
    def("flush.messages", T::Long, "9223372036854775807", Rule::AtLeast(1), Some("log.flush.interval.messages")),
    def("flush.ms", T::Long, "9223372036854775807", Rule::AtLeast(0), None),
    def("follower.replication.throttled.replicas", T::List, "", Rule::Throttled, None),
    def("index.interval.bytes", T::Int, "4096", Rule::AtLeast(0), Some("log.index.interval.bytes")),
    def("leader.replication.throttled.replicas", T::List, "", Rule::Throttled, None),
    def("local.retention.bytes", T::Long, "-2", Rule::AtLeast(-2), Some("log.local.retention.bytes")),
    def("local.retention.ms", T::Long, "-2", Rule::AtLeast(-2), Some("log.local.retention.ms")),
    def(
        "max.compaction.lag.ms",
        T::Long,
        "9223372036854775807",
        Rule::AtLeast(1),
        Some("log.cleaner.max.compaction.lag.ms"),
    ),
    Def {
        name: "max.message.bytes",
        ty: T::Int,
        default: "1048588",
        rule: Rule::AtLeast(0),
        fallback: Fallback::MessageMaxBytes,
    },
    def(
        "message.timestamp.after.max.ms",
        T::Long,
        "3600000",
        Rule::AtLeast(0),
        Some("log.message.timestamp.after.max.ms"),
    ),
    def(
        "message.timestamp.before.max.ms",
        T::Long,
        "9223372036854775807",
        Rule::AtLeast(0),
        Some("log.message.timestamp.before.max.ms"),
    ),
    def(
        "message.timestamp.type",
        T::String,
        "CreateTime",
        Rule::OneOf(&["CreateTime", "LogAppendTime"]),
        Some("log.message.timestamp.type"),
    ),
    def("min.cleanable.dirty.ratio", T::Double, "0.5", Rule::Ratio(0.0, 1.0), Some("log.cleaner.min.cleanable.ratio")),
    def("min.compaction.lag.ms", T::Long, "0", Rule::AtLeast(0), Some("log.cleaner.min.compaction.lag.ms")),
    Def {
        name: "min.insync.replicas",
        ty: T::Int,
        default: "1",
        rule: Rule::AtLeast(1),
        fallback: Fallback::ClusterDefault,
    },
    def("preallocate", T::Boolean, "false", Rule::Any, Some("log.preallocate")),
    def("remote.log.copy.disable", T::Boolean, "false", Rule::Any, None),
    def("remote.log.delete.on.disable", T::Boolean, "false", Rule::Any, None),
    def("remote.storage.enable", T::Boolean, "false", Rule::RemoteStorage, None),
    def("retention.bytes", T::Long, "-1", Rule::Any, Some("log.retention.bytes")),
    def("retention.ms", T::Long, "604800000", Rule::AtLeast(-1), None),
    def("segment.bytes", T::Int, "1073741824", Rule::AtLeast(1_048_576), Some("log.segment.bytes")),
    def("segment.index.bytes", T::Int, "10485760", Rule::AtLeast(4), Some("log.index.size.max.bytes")),
    def("segment.jitter.ms", T::Long, "0", Rule::AtLeast(0), None),
    def("segment.ms", T::Long, "604800000", Rule::AtLeast(1), None),
    def("unclean.leader.election.enable", T::Boolean, "false", Rule::Any, Some("unclean.leader.election.enable")),
];

/// The config named `name`.
pub fn lookup(name: &str) -> Option<&'static Def> {
    DEFS.iter().find(|d| d.name == name)
}

/// Kafka's default `message.max.bytes` (1 MiB plus the 12-byte log overhead).
pub const MESSAGE_MAX_BYTES_DEFAULT: usize = 1_048_588;

/// A refused config: the error code and Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// `INVALID_CONFIG` or `INVALID_REQUEST`.
    pub error: E,
    /// Kafka's message, e.g. "Invalid value -1 for configuration retention.ms: Value must be at
    /// least -1".
    pub message: String,
}

impl ConfigError {
    fn invalid(message: String) -> Self {
        ConfigError { error: E::InvalidConfig, message }
    }

    /// An `INVALID_REQUEST` (duplicate keys, an unknown operation).
    pub fn request(message: impl Into<String>) -> Self {
        ConfigError { error: E::InvalidRequest, message: message.into() }
    }
}

/// Java's `Double.toString`, for the values Kafka echoes in its messages.
fn java_double(v: f64) -> String {
    if v == 0.0 || (1e-3..1e7).contains(&v.abs()) {
        let s = format!("{v}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let s = format!("{v:E}");
        let (mantissa, exponent) = s.split_once('E').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
        format!("{mantissa}E{exponent}")
    }
}

/// The elements of a LIST value (trimmed; "" is the empty list).
pub fn list_elements(value: &str) -> Vec<&str> {
    let value = value.trim();
    if value.is_empty() { Vec::new() } else { value.split(',').map(str::trim).collect() }
}

fn throttled_element(e: &str) -> bool {
    e.split_once(':').is_some_and(|(p, b)| {
        !p.is_empty() && !b.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit())
    })
}

/// Checks `value` against config `name`'s type and validator; returns it as Kafka stores it
/// (parsed and printed again: " 100 " is "100", "True" is "true", "0.50" is "0.5", "a, b" is "a,b").
///
/// # Errors
/// `INVALID_CONFIG` with Kafka's message: an unknown name, a null value, a value that does not
/// parse as the type, or one its validator refuses.
pub fn validate(name: &str, value: Option<&str>) -> Result<String, ConfigError> {
    let Some(def) = lookup(name) else {
        return Err(ConfigError::invalid(format!("Unknown topic config name: {name}")));
    };
    let Some(value) = value else {
        return Err(ConfigError::invalid(format!("Null value not supported for topic configs: {name}")));
    };
    let v = value.trim();
    let bad = |shown: &str, reason: &str| {
        Err(ConfigError::invalid(format!("Invalid value {shown} for configuration {name}: {reason}")))
    };
    let not_a_number = || bad(v, &format!("Not a number of type {}", def.ty.name()));
    match def.ty {
        T::Int | T::Long => {
            let n = if def.ty == T::Int { v.parse::<i32>().map(i64::from) } else { v.parse::<i64>() };
            let Ok(n) = n else { return not_a_number() };
            let shown = n.to_string();
            match def.rule {
                Rule::AtLeast(lo) if n < lo => bad(&shown, &format!("Value must be at least {lo}")),
                Rule::Range(lo, _) if n < lo => bad(&shown, &format!("Value must be at least {lo}")),
                Rule::Range(_, hi) if n > hi => bad(&shown, &format!("Value must be no more than {hi}")),
                Rule::RangeOr(lo, hi, or) if n != or && !(lo..=hi).contains(&n) => {
                    bad(&shown, &format!("Value must be between {lo} and {hi} or equal to {or}"))
                }
                _ => Ok(shown),
            }
        }
        T::Double => {
            let Ok(x) = v.parse::<f64>() else { return not_a_number() };
            match def.rule {
                Rule::Ratio(lo, _) if x < lo => bad(&java_double(x), &format!("Value must be at least {lo}")),
                Rule::Ratio(_, hi) if x > hi => bad(&java_double(x), &format!("Value must be no more than {hi}")),
                _ => Ok(java_double(x)),
            }
        }
        T::Boolean => {
            let Some(on) = parse_bool(v) else { return bad(v, "Expected value to be either true or false") };
            if matches!(def.rule, Rule::RemoteStorage) && on {
                return Err(ConfigError::invalid(
                    "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
                        .into(),
                ));
            }
            Ok(on.to_string())
        }
        T::String => match def.rule {
            Rule::OneOf(allowed) if !allowed.contains(&v) => {
                bad(v, &format!("String must be one of: {}", allowed.join(", ")))
            }
            _ => Ok(v.to_string()),
        },
        T::List => {
            let elements = list_elements(v);
            match def.rule {
                Rule::OneOf(allowed) => match elements.iter().find(|e| !allowed.contains(e)) {
                    Some(e) => bad(e, &format!("String must be one of: {}", allowed.join(", "))),
                    None => Ok(elements.join(",")),
                },
                Rule::Throttled if !(elements == ["*"] || elements.iter().all(|e| throttled_element(e))) => bad(
                    &format!("[{}]", elements.join(", ")),
                    &format!(
                        "{name} must be the literal '*' or a list of replicas in the following format: \
                         [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                    ),
                ),
                _ => Ok(elements.join(",")),
            }
        }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// What the broker contributes to a topic's effective configs.
#[derive(Debug, Clone, Copy)]
pub struct BrokerDefaults {
    /// The broker's `message.max.bytes` ([`crate::ClusterBuilder::message_bytes_max`]).
    pub message_max_bytes: usize,
}

/// One config of a topic as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The config's name.
    pub name: &'static str,
    /// Its effective value.
    pub value: String,
    /// Where that value comes from.
    pub source: ConfigSource,
    /// Its type.
    pub ty: ConfigType,
    /// The values it would take, most specific first: `(name, value, source)`.
    pub synonyms: Vec<(&'static str, String, ConfigSource)>,
}

/// A topic's config overrides, by name, each as it was sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfigs {
    overrides: BTreeMap<String, String>,
}

impl TopicConfigs {
    /// Validated overrides from CreateTopics' `(name, value)` pairs.
    ///
    /// # Errors
    /// The first pair [`validate`] refuses, or the combination check of [`TopicConfigs::check`].
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Result<Self, ConfigError> {
        let mut overrides = BTreeMap::new();
        for (name, value) in pairs {
            let stored = validate(name, value)?;
            overrides.insert(name.to_string(), stored);
        }
        let configs = TopicConfigs { overrides };
        configs.check()?;
        Ok(configs)
    }

    /// Overrides set directly (already validated by the caller, or internal topics').
    pub(crate) fn with(mut self, name: &str, value: &str) -> Self {
        self.overrides.insert(name.to_string(), value.to_string());
        self
    }

    /// Checks across configs (Kafka's `LogConfig.validateValues`).
    ///
    /// # Errors
    /// `INVALID_CONFIG` when `min.compaction.lag.ms` exceeds `max.compaction.lag.ms`.
    pub fn check(&self) -> Result<(), ConfigError> {
        let min = self.long("min.compaction.lag.ms");
        let max = self.long("max.compaction.lag.ms");
        if min > max {
            return Err(ConfigError::invalid(format!(
                "conflict topic config setting min.compaction.lag.ms ({min}) > max.compaction.lag.ms ({max})"
            )));
        }
        Ok(())
    }

    /// The overrides, by name.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// The override of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.overrides.get(name).map(String::as_str)
    }

    /// Sets `name` (validate first).
    pub(crate) fn set(&mut self, name: &str, value: String) {
        self.overrides.insert(name.to_string(), value);
    }

    /// Removes `name`'s override (a no-op when unset).
    pub(crate) fn remove(&mut self, name: &str) {
        self.overrides.remove(name);
    }

    fn long(&self, name: &str) -> i64 {
        let raw = self.get(name).or_else(|| lookup(name).map(|d| d.default)).unwrap_or("0");
        raw.trim().parse().unwrap_or(0)
    }

    /// The largest record batch a producer may append, in bytes (`max.message.bytes`, else the
    /// broker's `message.max.bytes`).
    pub fn max_message_bytes(&self, broker: &BrokerDefaults) -> usize {
        match self.get("max.message.bytes") {
            Some(v) => v.trim().parse::<usize>().unwrap_or(broker.message_max_bytes),
            None => broker.message_max_bytes,
        }
    }

    /// The log's segment limits (`segment.bytes`, `segment.ms`) under the cluster's cap
    /// `partition_bytes_max`.
    pub fn log_limits(&self, partition_bytes_max: usize) -> crate::log::LogLimits {
        crate::log::LogLimits {
            segment_bytes: usize::try_from(self.long("segment.bytes")).unwrap_or(usize::MAX),
            segment_ms: self.long("segment.ms"),
            partition_bytes_max,
        }
    }

    /// `retention.bytes`: `None` when negative (no limit).
    pub fn retention_bytes(&self) -> Option<u64> {
        u64::try_from(self.long("retention.bytes")).ok()
    }

    /// `retention.ms`: `None` when -1 (kept forever).
    pub fn retention_ms(&self) -> Option<u64> {
        u64::try_from(self.long("retention.ms")).ok()
    }

    /// `delete.retention.ms`: how long a compacted log keeps a tombstone, in milliseconds.
    pub fn delete_retention_ms(&self) -> u64 {
        u64::try_from(self.long("delete.retention.ms")).unwrap_or(0)
    }

    /// The log cleaner's settings: `min.cleanable.dirty.ratio`, `min.compaction.lag.ms`,
    /// `max.compaction.lag.ms`, `delete.retention.ms` and `segment.bytes`.
    pub fn cleaner_config(&self) -> crate::log::compaction::CleanerConfig {
        let ratio =
            self.get("min.cleanable.dirty.ratio").or_else(|| lookup("min.cleanable.dirty.ratio").map(|d| d.default));
        crate::log::compaction::CleanerConfig {
            min_cleanable_ratio: ratio.and_then(|r| r.trim().parse().ok()).unwrap_or(0.5),
            min_lag_ms: self.long("min.compaction.lag.ms"),
            max_lag_ms: self.long("max.compaction.lag.ms"),
            delete_retention_ms: self.long("delete.retention.ms"),
            segment_bytes: usize::try_from(self.long("segment.bytes")).unwrap_or(usize::MAX),
        }
    }

    /// Whether `cleanup.policy` holds `policy` (`delete` or `compact`).
    pub fn cleanup(&self, policy: &str) -> bool {
        list_elements(self.get("cleanup.policy").unwrap_or("delete")).contains(&policy)
    }

    /// Whether `message.timestamp.type` is `LogAppendTime`.
    pub fn log_append_time(&self) -> bool {
        self.get("message.timestamp.type").is_some_and(|v| v.trim() == "LogAppendTime")
    }

    /// Every config, sorted by name, or those of `keys` that exist (DescribeConfigs).
    pub fn describe(&self, broker: &BrokerDefaults, keys: Option<&[&str]>) -> Vec<Described> {
        DEFS.iter().filter(|d| keys.is_none_or(|k| k.contains(&d.name))).map(|d| self.describe_one(d, broker)).collect()
    }

    fn describe_one(&self, def: &'static Def, broker: &BrokerDefaults) -> Described {
        let mut synonyms = Vec::new();
        if let Some(v) = self.get(def.name) {
            synonyms.push((def.name, v.to_string(), ConfigSource::DynamicTopic));
        }
        match def.fallback {
            Fallback::Default(Some(synonym)) => {
                synonyms.push((synonym, def.default.to_string(), ConfigSource::Default))
            }
            Fallback::Default(None) => {}
            Fallback::MessageMaxBytes => {
                if broker.message_max_bytes != MESSAGE_MAX_BYTES_DEFAULT {
                    let v = broker.message_max_bytes.to_string();
                    synonyms.push(("message.max.bytes", v, ConfigSource::StaticBroker));
                }
                synonyms.push(("message.max.bytes", def.default.to_string(), ConfigSource::Default));
            }
            Fallback::ClusterDefault => {
                for source in [ConfigSource::DynamicDefaultBroker, ConfigSource::StaticBroker, ConfigSource::Default] {
                    synonyms.push((def.name, def.default.to_string(), source));
                }
            }
        }
        let (value, source) = match (self.get(def.name), def.fallback) {
            (Some(v), _) => (v.to_string(), ConfigSource::DynamicTopic),
            (None, Fallback::Default(_)) => (def.default.to_string(), ConfigSource::Default),
            (None, _) => synonyms.first().map(|(_, v, s)| (v.clone(), *s)).expect("a broker synonym"),
        };
        // A config without a broker synonym lists no synonym unless the topic overrides it.
        Described { name: def.name, value, source, ty: def.ty, synonyms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(name: &str, value: &str) -> String {
        validate(name, Some(value)).err().map(|e| e.message).unwrap_or_else(|| "OK".into())
    }

    #[test]
    fn values_are_stored_as_kafka_prints_them() {
        // Measured: DescribeConfigs after CreateTopics with these values.
        for (name, value, stored) in [
            ("max.message.bytes", " 100 ", "100"),
            ("message.timestamp.type", " LogAppendTime", "LogAppendTime"),
            ("preallocate", "True", "true"),
            ("min.cleanable.dirty.ratio", "0.50", "0.5"),
            ("leader.replication.throttled.replicas", "0:1, 1:1", "0:1,1:1"),
            ("retention.ms", "+5000", "5000"),
            ("cleanup.policy", "compact, delete", "compact,delete"),
        ] {
            assert_eq!(validate(name, Some(value)).unwrap(), stored, "{name}={value:?}");
        }
    }

    #[test]
    fn values_are_refused_with_kafkas_messages() {
        // Each pair was sent to Apache Kafka 4.2.0 (CreateTopics, validate_only).
        let cases = [
            (
                "max.message.bytes",
                "-1",
                "Invalid value -1 for configuration max.message.bytes: Value must be at least 0",
            ),
            ("max.message.bytes", "0", "OK"),
            (
                "max.message.bytes",
                "2147483648",
                "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT",
            ),
            ("max.message.bytes", " 100 ", "OK"),
            ("max.message.bytes", "", "Invalid value  for configuration max.message.bytes: Not a number of type INT"),
            ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
            ("retention.ms", "1.5", "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"),
            ("retention.bytes", "-5", "OK"),
            (
                "cleanup.policy",
                "bogus",
                "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete",
            ),
            ("cleanup.policy", "compact, delete", "OK"),
            ("cleanup.policy", "", "OK"),
            (
                "cleanup.policy",
                "COMPACT",
                "Invalid value COMPACT for configuration cleanup.policy: String must be one of: compact, delete",
            ),
            (
                "min.insync.replicas",
                "0",
                "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
            ),
            (
                "message.timestamp.type",
                "createtime",
                "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
            ),
            ("message.timestamp.type", " CreateTime", "OK"),
            (
                "segment.bytes",
                "1048575",
                "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576",
            ),
            ("segment.bytes", "1048576", "OK"),
            ("no.such.config", "1", "Unknown topic config name: no.such.config"),
            ("message.max.bytes", "100", "Unknown topic config name: message.max.bytes"),
            (
                "unclean.leader.election.enable",
                "yes",
                "Invalid value yes for configuration unclean.leader.election.enable: Expected value to be either true or false",
            ),
            ("preallocate", "True", "OK"),
            (
                "min.cleanable.dirty.ratio",
                "2",
                "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
            ),
            (
                "min.cleanable.dirty.ratio",
                "2000000000",
                "Invalid value 2.0E9 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
            ),
            (
                "min.cleanable.dirty.ratio",
                "-2000000",
                "Invalid value -2000000.0 for configuration min.cleanable.dirty.ratio: Value must be at least 0",
            ),
            (
                "compression.type",
                "brotli",
                "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
            ),
            (
                "compression.gzip.level",
                "0",
                "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1",
            ),
            ("compression.gzip.level", "-1", "OK"),
            (
                "compression.lz4.level",
                "18",
                "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17",
            ),
            (
                "compression.zstd.level",
                "-131073",
                "Invalid value -131073 for configuration compression.zstd.level: Value must be at least -131072",
            ),
            (
                "remote.storage.enable",
                "TRUE",
                "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
            ),
            ("leader.replication.throttled.replicas", "0:1, 1:1", "OK"),
            ("leader.replication.throttled.replicas", "*", "OK"),
            (
                "leader.replication.throttled.replicas",
                "x",
                "Invalid value [x] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
            ),
            ("flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be at least 1"),
            ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
        ];
        for (name, value, want) in cases {
            assert_eq!(message(name, value), want, "{name}={value:?}");
        }
        let null = validate("retention.ms", None).unwrap_err();
        assert_eq!(
            (null.error, null.message.as_str()),
            (E::InvalidConfig, "Null value not supported for topic configs: retention.ms")
        );
    }

    #[test]
    fn describe_answers_defaults_overrides_and_broker_synonyms() {
        let broker = BrokerDefaults { message_max_bytes: MESSAGE_MAX_BYTES_DEFAULT };
        let configs = TopicConfigs::from_pairs([("max.message.bytes", Some("51200"))]).unwrap();
        let all = configs.describe(&broker, None);
        assert_eq!(all.len(), 33);
        let by = |n: &str| all.iter().find(|d| d.name == n).unwrap().clone();
        let max = by("max.message.bytes");
        assert_eq!((max.value.as_str(), max.source), ("51200", ConfigSource::DynamicTopic));
        assert_eq!(
            max.synonyms,
            vec![
                ("max.message.bytes", "51200".to_string(), ConfigSource::DynamicTopic),
                ("message.max.bytes", "1048588".to_string(), ConfigSource::Default)
            ]
        );
        let isr = by("min.insync.replicas");
        assert_eq!((isr.value.as_str(), isr.source, isr.synonyms.len()), ("1", ConfigSource::DynamicDefaultBroker, 3));
        let retention = by("retention.ms");
        assert_eq!(
            (retention.value.as_str(), retention.source, retention.synonyms.len()),
            ("604800000", ConfigSource::Default, 0)
        );
        assert_eq!(
            by("cleanup.policy").synonyms,
            vec![("log.cleanup.policy", "delete".to_string(), ConfigSource::Default)]
        );
        assert_eq!(configs.max_message_bytes(&broker), 51_200);
        let small = BrokerDefaults { message_max_bytes: 2000 };
        let unset = TopicConfigs::default();
        assert_eq!(unset.max_message_bytes(&small), 2000);
        let max = unset.describe(&small, Some(&["max.message.bytes"])).remove(0);
        assert_eq!((max.value.as_str(), max.source), ("2000", ConfigSource::StaticBroker));
    }

    #[test]
    fn typed_values_follow_overrides_and_defaults() {
        let unset = TopicConfigs::default();
        assert_eq!((unset.retention_bytes(), unset.retention_ms()), (None, Some(604_800_000)));
        assert!(unset.cleanup("delete") && !unset.cleanup("compact") && !unset.log_append_time());
        let set = TopicConfigs::from_pairs([
            ("retention.bytes", Some("4096")),
            ("retention.ms", Some("-1")),
            ("cleanup.policy", Some("compact")),
            ("message.timestamp.type", Some("LogAppendTime")),
        ])
        .unwrap();
        assert_eq!((set.retention_bytes(), set.retention_ms()), (Some(4096), None));
        assert!(set.cleanup("compact") && !set.cleanup("delete") && set.log_append_time());
        let conflict =
            TopicConfigs::from_pairs([("min.compaction.lag.ms", Some("10")), ("max.compaction.lag.ms", Some("5"))]);
        assert_eq!(conflict.unwrap_err().error, E::InvalidConfig);
    }
}
