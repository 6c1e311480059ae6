//! Topics: creating them (with their configs), the internal `__consumer_offsets`, and Metadata,
//! CreateTopics, DeleteTopics.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;

use super::cluster::{Cluster, PARTITIONS_MAX, Partition, State, TOPICS_MAX, Topic, s, stable_hash, valid_topic_name};
use crate::faults::Part;
use crate::log::PartitionLog;
use crate::topic_config::{Described, TopicConfigs};
use crate::transactions::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};

/// The group coordinator's internal topic.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Its partitions (Kafka's `offsets.topic.num.partitions` default).
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;

/// A created topic's config as CreateTopics v5+ lists it.
fn created_config(d: &Described) -> create_topics_response::CreatableTopicConfigs {
    create_topics_response::CreatableTopicConfigs::default()
        .with_name(s(d.name))
        .with_value(Some(s(&d.value)))
        .with_config_source(d.source.code())
}

impl Cluster {
    /// Creates a topic with `partitions` partitions, leaders spread over the live brokers.
    ///
    /// # Errors
    /// `TOPIC_ALREADY_EXISTS`, `INVALID_TOPIC_EXCEPTION` (a name Kafka refuses, or one that
    /// differs from an existing topic's only by '.' against '_', which Kafka refuses because
    /// both would have the same metric names),
    /// `INVALID_PARTITIONS` (outside `1..=PARTITIONS_MAX`), `POLICY_VIOLATION` beyond
    /// [`TOPICS_MAX`].
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<(), E> {
        let mut st = self.lock();
        self.create_topic_locked(&mut st, name, partitions, TopicConfigs::default(), false)
    }

    /// The config overrides of topic `name` (`None` for an unknown topic).
    pub fn topic_configs(&self, name: &str) -> Option<TopicConfigs> {
        self.lock().topics.get(name).map(|t| t.configs.clone())
    }

    /// Creates `__consumer_offsets` when it does not exist yet, as Kafka's group coordinator does
    /// on its first FindCoordinator for a group: [`OFFSETS_TOPIC_PARTITIONS`] partitions, the
    /// internal topic's configs, listed in Metadata with `is_internal`. kafkasim keeps commits in
    /// its coordinator, so this log stays empty.
    pub(super) fn ensure_offsets_topic(&self, st: &mut State) {
        let configs = TopicConfigs::default()
            .with("cleanup.policy", "compact")
            .with("compression.type", "producer")
            .with("segment.bytes", "104857600");
        self.ensure_internal_topic(st, OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, configs);
    }

    /// `__transaction_state`, created by the first transactional FindCoordinator
    /// (Kafka's `TransactionStateManager.transactionTopicConfigs`; the configs as Kafka 4.2 lists
    /// them, measured by the differential scenario `transaction_state_is_an_internal_topic`).
    pub(super) fn ensure_transaction_state_topic(&self, st: &mut State) {
        let configs = TopicConfigs::default()
            .with("cleanup.policy", "compact")
            .with("compression.type", "uncompressed")
            .with("min.insync.replicas", "1")
            .with("segment.bytes", "104857600")
            .with("unclean.leader.election.enable", "false");
        self.ensure_internal_topic(st, TRANSACTION_STATE_TOPIC, TRANSACTION_STATE_PARTITIONS, configs);
    }

    fn ensure_internal_topic(&self, st: &mut State, name: &str, partitions: i32, configs: TopicConfigs) {
        if st.topics.contains_key(name) {
            return;
        }
        if self.create_topic_locked(st, name, partitions, configs, false).is_ok()
            && let Some(t) = st.topics.get_mut(name)
        {
            t.internal = true;
        }
    }

    fn create_topic_locked(
        &self,
        st: &mut State,
        name: &str,
        partitions: i32,
        configs: TopicConfigs,
        validate_only: bool,
    ) -> Result<(), E> {
        if !valid_topic_name(name) {
            return Err(E::InvalidTopicException);
        }
        if st.topics.contains_key(name) {
            return Err(E::TopicAlreadyExists);
        }
        // Kafka's `Topic.unifyCollisionChars`, checked by its controller after existence.
        let collision_key = |n: &str| n.replace('.', "_");
        let has_collision_chars = |n: &str| n.contains(['.', '_']);
        if has_collision_chars(name) {
            let key = collision_key(name);
            if st.topics.keys().any(|t| has_collision_chars(t) && collision_key(t) == key) {
                return Err(E::InvalidTopicException);
            }
        }
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            return Err(E::InvalidPartitions);
        }
        if st.topics.len() >= TOPICS_MAX {
            return Err(E::PolicyViolation);
        }
        if validate_only {
            return Ok(());
        }
        let live = Self::live(st);
        st.next_topic += 1;
        let offset = (stable_hash(name) % live.len().max(1) as u64) as usize;
        let partitions = (0..partitions as usize)
            .map(|p| Partition {
                leader: if live.is_empty() { -1 } else { live[(p + offset) % live.len()] },
                leader_epoch: 0,
                log: PartitionLog::default(),
            })
            .collect::<Vec<_>>();
        let count = partitions.len();
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&stable_hash(name).to_be_bytes());
        id[8..].copy_from_slice(&st.next_topic.to_be_bytes());
        st.topics
            .insert(name.to_string(), Topic { id: uuid::Uuid::from_bytes(id), partitions, configs, internal: false });
        if name != OFFSETS_TOPIC && name != TRANSACTION_STATE_TOPIC {
            self.record("kafka.topic.create", name, format!("{count} partitions"));
        }
        Ok(())
    }

    /// The topics, by name (internal ones, such as `__consumer_offsets`, left out).
    pub fn topics(&self) -> Vec<String> {
        self.lock().topics.iter().filter(|(_, t)| !t.internal).map(|(n, _)| n.clone()).collect()
    }

    pub(super) fn metadata(&self, broker: i32, version: i16, req: &MetadataRequest) -> MetadataResponse {
        let mut st = self.lock();
        let names: Option<Vec<String>> = match &req.topics {
            None => None,
            Some(t) if t.is_empty() && version == 0 => None,
            Some(t) => Some(t.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect()),
        };
        let auto = self.inner.config.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
        let names = match names {
            None => st.topics.keys().cloned().collect(),
            Some(names) => {
                if auto {
                    for n in &names {
                        if n == OFFSETS_TOPIC {
                            self.ensure_offsets_topic(&mut st);
                        } else if n == TRANSACTION_STATE_TOPIC {
                            self.ensure_transaction_state_topic(&mut st);
                        } else if !st.topics.contains_key(n) && valid_topic_name(n) {
                            let partitions = self.inner.config.default_partitions;
                            let _ = self.create_topic_locked(&mut st, n, partitions, TopicConfigs::default(), false);
                        }
                    }
                }
                names
            }
        };
        let topics = names
            .iter()
            .map(|name| {
                let t = metadata_response::MetadataResponseTopic::default().with_name(Some(TopicName(s(name))));
                if let Some(code) =
                    st.faults.error_for(ApiKey::Metadata, broker, Part { topic: Some(name), ..Part::default() })
                {
                    return t.with_error_code(code);
                }
                let Some(topic) = st.topics.get(name) else {
                    let code =
                        if valid_topic_name(name) { E::UnknownTopicOrPartition } else { E::InvalidTopicException };
                    return t.with_error_code(code.code());
                };
                let partitions = topic
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let replicas = if p.leader >= 0 { vec![BrokerId(p.leader)] } else { Vec::new() };
                        metadata_response::MetadataResponsePartition::default()
                            .with_error_code(if p.leader < 0 { E::LeaderNotAvailable.code() } else { 0 })
                            .with_partition_index(i as i32)
                            .with_leader_id(BrokerId(p.leader))
                            .with_leader_epoch(p.leader_epoch)
                            .with_replica_nodes(replicas.clone())
                            .with_isr_nodes(replicas)
                    })
                    .collect();
                t.with_topic_id(topic.id).with_is_internal(topic.internal).with_partitions(partitions)
            })
            .collect();
        let brokers = st
            .brokers
            .iter()
            .filter(|(_, b)| b.up)
            .map(|(id, b)| {
                metadata_response::MetadataResponseBroker::default()
                    .with_node_id(BrokerId(*id))
                    .with_host(s(&b.host))
                    .with_port(b.port)
            })
            .collect();
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_cluster_id(Some(s(&self.inner.config.cluster_id)))
            .with_controller_id(BrokerId(Self::live(&st).first().copied().unwrap_or(-1)))
            .with_topics(topics)
    }

    pub(super) fn create_topics(&self, broker: i32, version: i16, req: &CreateTopicsRequest) -> CreateTopicsResponse {
        let mut st = self.lock();
        let live = Self::live(&st).len() as i16;
        // A name sent twice is answered once, with INVALID_REQUEST, after the other results, and
        // nothing is created for it (Kafka's ControllerApis.createTopics).
        let mut seen = BTreeMap::<&str, usize>::new();
        for t in &req.topics {
            *seen.entry(t.name.0.as_str()).or_default() += 1;
        }
        let mut duplicates: Vec<&TopicName> = Vec::new();
        for t in req.topics.iter().filter(|t| seen[t.name.0.as_str()] > 1) {
            if !duplicates.contains(&&t.name) {
                duplicates.push(&t.name);
            }
        }
        let duplicated = duplicates.iter().map(|name| {
            let r = create_topics_response::CreatableTopicResult::default()
                .with_name((*name).clone())
                .with_error_code(E::InvalidRequest.code());
            if version >= 5 { r.with_num_partitions(-1).with_replication_factor(-1) } else { r }
        });
        let topics = req
            .topics
            .iter()
            .filter(|t| seen[t.name.0.as_str()] == 1)
            .map(|t| {
                let name = t.name.0.to_string();
                let partitions =
                    if t.num_partitions == -1 { self.inner.config.default_partitions } else { t.num_partitions };
                let replication = if t.replication_factor == -1 { 1 } else { t.replication_factor };
                let configs = TopicConfigs::from_pairs(t.configs.iter().map(|c| (c.name.as_str(), c.value.as_deref())));
                let mut message = None;
                let result = if let Some(code) =
                    st.faults.error_for(ApiKey::CreateTopics, broker, Part { topic: Some(&name), ..Part::default() })
                {
                    Err(E::try_from_code(code).unwrap_or(E::UnknownServerError))
                } else if replication < 1 || replication > live {
                    Err(E::InvalidReplicationFactor)
                } else {
                    match configs {
                        // The name and existence checks come first, as in Kafka's controller;
                        // the configs are validated after them and before the partitions.
                        Err(e) => {
                            self.create_topic_locked(&mut st, &name, 1, TopicConfigs::default(), true).and_then(|()| {
                                message = Some(e.message);
                                Err(e.error)
                            })
                        }
                        Ok(configs) => {
                            // CreateTopics echoes an override as it was sent ("compact, delete");
                            // DescribeConfigs answers it as stored ("compact,delete").
                            let mut described = configs.describe(&self.broker_defaults(), None);
                            for d in &mut described {
                                if let Some(sent) = t.configs.iter().find(|c| c.name.as_str() == d.name) {
                                    d.value = sent.value.as_deref().unwrap_or_default().to_string();
                                }
                            }
                            self.create_topic_locked(&mut st, &name, partitions, configs, req.validate_only)
                                .map(|()| described)
                        }
                    }
                };
                let mut r = create_topics_response::CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(result.as_ref().err().map_or(0, |e| e.code()))
                    .with_error_message(message.map(|m| s(&m)));
                if version >= 5 {
                    r = r
                        .with_num_partitions(if result.is_ok() { partitions } else { -1 })
                        .with_replication_factor(if result.is_ok() { replication } else { -1 });
                    if let Ok(described) = &result {
                        r = r.with_configs(Some(described.iter().map(created_config).collect()));
                    }
                }
                if version >= 7
                    && let Some(topic) = st.topics.get(&name)
                {
                    r = r.with_topic_id(topic.id);
                }
                r
            })
            .chain(duplicated)
            .collect();
        CreateTopicsResponse::default().with_topics(topics)
    }

    pub(super) fn delete_topics(&self, broker: i32, version: i16, req: &DeleteTopicsRequest) -> DeleteTopicsResponse {
        let mut st = self.lock();
        let names: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
            req.topics.iter().map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)).collect()
        } else {
            req.topic_names.iter().map(|n| (Some(n.0.to_string()), uuid::Uuid::nil())).collect()
        };
        let responses = names
            .into_iter()
            .map(|(name, id)| {
                let name = name.or_else(|| st.topics.iter().find(|(_, t)| t.id == id).map(|(n, _)| n.clone()));
                let mut r = delete_topics_response::DeletableTopicResult::default()
                    .with_name(name.as_deref().map(|n| TopicName(s(n))));
                if version >= 6 {
                    r = r.with_topic_id(id);
                }
                let Some(name) = name else {
                    return r.with_error_code(E::UnknownTopicId.code());
                };
                if let Some(code) =
                    st.faults.error_for(ApiKey::DeleteTopics, broker, Part { topic: Some(&name), ..Part::default() })
                {
                    return r.with_error_code(code);
                }
                if st.topics.remove(&name).is_none() {
                    return r.with_error_code(E::UnknownTopicOrPartition.code());
                }
                st.producers.forget_topic(&name);
                st.transactions.forget_topic(&name);
                st.groups.forget_topic(&name);
                self.record("kafka.topic.delete", &name, "");
                r
            })
            .collect();
        DeleteTopicsResponse::default().with_responses(responses)
    }
}
