//! Topic configs on the wire: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
//!
//! Semantics (Kafka's `ConfigAdminManager` and `ConfigurationControlManager`, measured against
//! Apache Kafka 4.2.0; the configs themselves are [`crate::topic_config`]'s):
//! - only the TOPIC resource (type 2) is served; any other resource type is answered
//!   `INVALID_REQUEST` naming it (a known difference: Kafka also describes broker, group and
//!   client-metrics configs);
//! - an unknown topic is `UNKNOWN_TOPIC_OR_PARTITION` (describe: an empty message; alter: "The
//!   topic 'NAME' does not exist.");
//! - DescribeConfigs lists every config sorted by name, or the `configuration_keys` asked for, with
//!   synonyms only when `include_synonyms`, and its type from v3; documentation is never sent;
//! - IncrementalAlterConfigs applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) to one
//!   resource at a time, all or nothing: a key twice is `INVALID_REQUEST` "Error due to duplicate
//!   config keys", a null SET value `INVALID_REQUEST`, APPEND/SUBTRACT on a non-LIST config
//!   `INVALID_CONFIG` "Can't APPEND to key NAME because its type is not LIST.", APPEND starting
//!   from the effective value (the default when unset) and skipping elements already present,
//!   DELETE of an unset or unknown name a no-op, an unknown operation `UNKNOWN_SERVER_ERROR`;
//!   every resulting value is validated and stored as Kafka prints it;
//! - AlterConfigs (the legacy API) replaces all of a topic's overrides with the ones sent;
//! - `validate_only` checks everything and changes nothing.

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;

use super::cluster::{Cluster, State, s};
use crate::topic_config::{ConfigError, ConfigType, TopicConfigs, list_elements, lookup, validate};

/// ConfigResource type TOPIC.
const TOPIC: i8 = 2;

fn unsupported_resource(kind: i8) -> ConfigError {
    ConfigError::request(format!("kafkasim serves topic configs only, not resource type {kind}"))
}

fn unknown_topic(name: &str) -> ConfigError {
    ConfigError { error: E::UnknownTopicOrPartition, message: format!("The topic '{name}' does not exist.") }
}

/// The code and message of an alter result (an unexpected error carries no message).
fn outcome(result: Result<(), ConfigError>) -> (i16, Option<String>) {
    match result {
        Ok(()) => (0, None),
        Err(e) if e.message.is_empty() => (e.error.code(), None),
        Err(e) => (e.error.code(), Some(e.message)),
    }
}

impl Cluster {
    pub(super) fn describe_configs(&self, version: i16, req: &DescribeConfigsRequest) -> DescribeConfigsResponse {
        let st = self.lock();
        let broker = self.broker_defaults();
        let results = req
            .resources
            .iter()
            .map(|r| {
                let result = describe_configs_response::DescribeConfigsResult::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone());
                if r.resource_type != TOPIC {
                    let e = unsupported_resource(r.resource_type);
                    return result.with_error_code(e.error.code()).with_error_message(Some(s(&e.message)));
                }
                let Some(topic) = st.topics.get(r.resource_name.as_str()) else {
                    return result.with_error_code(E::UnknownTopicOrPartition.code()).with_error_message(Some(s("")));
                };
                let keys: Option<Vec<&str>> =
                    r.configuration_keys.as_ref().map(|k| k.iter().map(|k| k.as_str()).collect());
                let configs = topic
                    .configs
                    .describe(&broker, keys.as_deref())
                    .into_iter()
                    .map(|d| {
                        let synonyms = if req.include_synonyms {
                            d.synonyms
                                .iter()
                                .map(|(name, value, source)| {
                                    describe_configs_response::DescribeConfigsSynonym::default()
                                        .with_name(s(name))
                                        .with_value(Some(s(value)))
                                        .with_source(source.code())
                                })
                                .collect()
                        } else {
                            Vec::new()
                        };
                        let c = describe_configs_response::DescribeConfigsResourceResult::default()
                            .with_name(s(d.name))
                            .with_value(Some(s(&d.value)))
                            .with_config_source(d.source.code())
                            .with_synonyms(synonyms);
                        if version >= 3 { c.with_config_type(d.ty.code()) } else { c }
                    })
                    .collect();
                result.with_configs(configs)
            })
            .collect();
        DescribeConfigsResponse::default().with_results(results)
    }

    pub(super) fn incremental_alter_configs(
        &self,
        req: &IncrementalAlterConfigsRequest,
    ) -> IncrementalAlterConfigsResponse {
        let mut st = self.lock();
        let responses = req
            .resources
            .iter()
            .map(|r| {
                let name = r.resource_name.as_str();
                let ops: Vec<(&str, i8, Option<&str>)> =
                    r.configs.iter().map(|c| (c.name.as_str(), c.config_operation, c.value.as_deref())).collect();
                let result = if r.resource_type == TOPIC {
                    self.alter_topic(&mut st, name, req.validate_only, |configs| incremental(configs, &ops))
                } else {
                    Err(unsupported_resource(r.resource_type))
                };
                let (code, message) = outcome(result);
                incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_error_code(code)
                    .with_error_message(message.map(|m| s(&m)))
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
            })
            .collect();
        IncrementalAlterConfigsResponse::default().with_responses(responses)
    }

    pub(super) fn alter_configs(&self, req: &AlterConfigsRequest) -> AlterConfigsResponse {
        let mut st = self.lock();
        let responses = req
            .resources
            .iter()
            .map(|r| {
                let name = r.resource_name.as_str();
                let pairs: Vec<(&str, Option<&str>)> =
                    r.configs.iter().map(|c| (c.name.as_str(), c.value.as_deref())).collect();
                let result = if r.resource_type == TOPIC {
                    self.alter_topic(&mut st, name, req.validate_only, |configs| {
                        *configs = TopicConfigs::from_pairs(pairs.iter().copied())?;
                        Ok(())
                    })
                } else {
                    Err(unsupported_resource(r.resource_type))
                };
                let (code, message) = outcome(result);
                alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_error_code(code)
                    .with_error_message(message.map(|m| s(&m)))
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
            })
            .collect();
        AlterConfigsResponse::default().with_responses(responses)
    }

    /// Applies `change` to a copy of topic `name`'s configs, checks the result, and keeps it
    /// unless `validate_only`.
    fn alter_topic(
        &self,
        st: &mut State,
        name: &str,
        validate_only: bool,
        change: impl FnOnce(&mut TopicConfigs) -> Result<(), ConfigError>,
    ) -> Result<(), ConfigError> {
        let topic = st.topics.get_mut(name).ok_or_else(|| unknown_topic(name))?;
        let mut configs = topic.configs.clone();
        change(&mut configs)?;
        configs.check()?;
        if !validate_only && configs != topic.configs {
            let summary = configs.overrides().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            topic.configs = configs;
            self.record("kafka.topic.configs", name, summary);
            self.arm_retention(st, name, None);
            self.arm_cleaner(st, name, None);
        }
        Ok(())
    }
}

/// IncrementalAlterConfigs' operations on one topic's configs.
fn incremental(configs: &mut TopicConfigs, ops: &[(&str, i8, Option<&str>)]) -> Result<(), ConfigError> {
    for (i, (name, _, _)) in ops.iter().enumerate() {
        if ops[..i].iter().any(|(n, _, _)| n == name) {
            return Err(ConfigError::request("Error due to duplicate config keys"));
        }
    }
    let current = |configs: &TopicConfigs, name: &str| {
        configs.get(name).map(str::to_string).or_else(|| lookup(name).map(|d| d.default.to_string()))
    };
    for &(name, op, value) in ops {
        match op {
            0 => {
                let Some(value) = value else {
                    return Err(ConfigError::request(format!("Null value not supported for : {name}")));
                };
                let stored = validate(name, Some(value))?;
                configs.set(name, stored);
            }
            1 => configs.remove(name),
            2 | 3 => {
                let verb = if op == 2 { "APPEND" } else { "SUBTRACT" };
                let def = lookup(name);
                if def.is_none() {
                    validate(name, value)?;
                }
                if def.is_some_and(|d| d.ty != ConfigType::List) {
                    return Err(ConfigError {
                        error: E::InvalidConfig,
                        message: format!("Can't {verb} to key {name} because its type is not LIST."),
                    });
                }
                let have = current(configs, name).unwrap_or_default();
                let mut elements: Vec<String> = list_elements(&have).into_iter().map(str::to_string).collect();
                let given = list_elements(value.unwrap_or_default());
                if op == 2 {
                    for e in given {
                        if !elements.iter().any(|x| x == e) {
                            elements.push(e.to_string());
                        }
                    }
                } else {
                    elements.retain(|x| !given.contains(&x.as_str()));
                }
                let stored = validate(name, Some(&elements.join(",")))?;
                configs.set(name, stored);
            }
            // Kafka's OpType.forId fails outside 0..=3, and the broker answers that as an
            // unexpected error, without a message.
            _ => return Err(ConfigError { error: E::UnknownServerError, message: String::new() }),
        }
    }
    Ok(())
}
