//! The transaction coordinator's requests: InitProducerId with a transactional id,
//! AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, the markers EndTxn writes,
//! and the timeout that aborts a transaction left open ([`crate::transactions`] has the rules).

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;

use super::cluster::{Cluster, State};
use super::topics::OFFSETS_TOPIC;
use crate::faults::Part;
use crate::groups::Committed;
use crate::log::{Marker, marker_batch};
use crate::transactions::{Mismatch, TRANSACTION_TIMEOUT_MAX, abort_at};

/// The partition of `__consumer_offsets` holding `group` (Kafka's `partitionFor`: the Java
/// `String.hashCode` of the group id, its absolute value modulo the partition count).
pub(crate) fn offsets_partition(group: &str) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    // Kafka's Utils.abs: `i & 0x7fffffff`.
    (hash & 0x7fff_ffff) % super::topics::OFFSETS_TOPIC_PARTITIONS
}

/// The error a [`Mismatch`] answers at `version`, given the first version that knows
/// `PRODUCER_FENCED` (KIP-588).
fn mismatch(m: Mismatch, version: i16, fenced_from: i16) -> E {
    match m {
        Mismatch::UnknownProducer => E::InvalidProducerIdMapping,
        Mismatch::Fenced if version >= fenced_from => E::ProducerFenced,
        Mismatch::Fenced => E::InvalidProducerEpoch,
    }
}

impl Cluster {
    /// The checks every transactional request starts with: this broker coordinates `id`, and
    /// `(producer_id, epoch)` is its current producer.
    fn txn_check(
        &self,
        st: &mut State,
        broker: i32,
        api: ApiKey,
        id: &str,
        producer: (i64, i16),
        fenced: impl Fn(Mismatch) -> E,
    ) -> Result<(), E> {
        if id.is_empty() {
            return Err(E::InvalidRequest);
        }
        if self.coordinator_of(st, id) != broker {
            return Err(E::NotCoordinator);
        }
        if let Some(code) = st.faults.error_for(api, broker, Part { group: Some(id), ..Part::default() }) {
            return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
        }
        st.transactions.current(id, producer.0, producer.1).map(|_| ()).map_err(fenced)
    }

    /// InitProducerId for transactional id `id`: its producer id and new epoch.
    pub(super) fn init_transactional(
        &self,
        st: &mut State,
        broker: i32,
        version: i16,
        id: &str,
        req: &InitProducerIdRequest,
    ) -> Result<(i64, i16), E> {
        if self.coordinator_of(st, id) != broker {
            return Err(E::NotCoordinator);
        }
        let timeout = u64::try_from(req.transaction_timeout_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(std::time::Duration::from_millis)
            .filter(|t| *t <= TRANSACTION_TIMEOUT_MAX)
            .ok_or(E::InvalidTransactionTimeout)?;
        let Some(meta) = st.transactions.get(id) else {
            let (producer_id, _) = st.producers.init(None).map_err(|_| E::UnknownServerError)?;
            st.transactions.insert(id, producer_id, timeout);
            return Ok((producer_id, 0));
        };
        if req.producer_id.0 >= 0 && (req.producer_id.0, req.producer_epoch) != (meta.producer_id, meta.epoch) {
            // KIP-360: a producer that names itself must be the current one.
            return Err(mismatch(Mismatch::Fenced, version, 4));
        }
        if meta.state == crate::transactions::TxnState::Ongoing {
            // Kafka fences the open transaction's producer, aborts it, and has the caller retry.
            self.abort_open(st, id, "fenced by InitProducerId");
            return Err(E::ConcurrentTransactions);
        }
        let epoch = st.transactions.bump(id).expect("known id");
        let meta = st.transactions.get(id).expect("known id").clone();
        st.producers.fence(meta.producer_id, epoch);
        if let Ok(m) = st.transactions.current(id, meta.producer_id, epoch) {
            m.timeout = timeout;
            m.state = crate::transactions::TxnState::Empty;
        }
        Ok((meta.producer_id, epoch))
    }

    /// Bumps the epoch of `id` and aborts its open transaction (a timeout, or a new producer
    /// with the same transactional id).
    fn abort_open(&self, st: &mut State, id: &str, why: &str) {
        let Some(epoch) = st.transactions.bump(id) else { return };
        let producer_id = st.transactions.get(id).map_or(-1, |m| m.producer_id);
        st.producers.fence(producer_id, epoch);
        self.end_locked(st, id, false);
        self.record("kafka.txn.abort", id, format!("producer {producer_id} epoch {epoch}: {why}"));
    }

    /// Ends the open transaction of `id`: writes its markers and, on commit, its offsets.
    fn end_locked(&self, st: &mut State, id: &str, commit: bool) {
        let ended = st.transactions.end(id, commit);
        let marker = if commit { Marker::Commit } else { Marker::Abort };
        let now_ms = Self::now_ms();
        let batch = marker_batch(ended.producer, marker, 0, now_ms);
        let mut wrote = false;
        for (topic, partition) in &ended.partitions {
            let Some(t) = st.topics.get_mut(topic).filter(|t| !t.internal) else { continue };
            let limits = t.configs.log_limits(self.inner.config.partition_bytes_max);
            let Some(p) = usize::try_from(*partition).ok().and_then(|i| t.partitions.get_mut(i)) else { continue };
            p.log.append_marker(&batch, p.leader_epoch, marker, &limits, now_ms);
            wrote = true;
        }
        for (topic, partition) in &ended.partitions {
            self.arm_retention(st, topic, Some(*partition));
            self.arm_cleaner(st, topic, Some(*partition));
        }
        for ((group, topic, partition), committed) in ended.offsets {
            st.groups.commit_transactional(&group, &topic, partition, committed);
        }
        if wrote {
            self.inner.log_changed.send_modify(|v| *v += 1);
        }
    }

    /// Opens a transaction of `id` if none is open, and arms its timeout.
    fn open(&self, st: &mut State, id: &str) {
        let now = self.elapsed();
        let Some(serial) = st.transactions.open(id, now) else { return };
        let timeout = st.transactions.get(id).map_or(TRANSACTION_TIMEOUT_MAX, |m| m.timeout);
        let at = self.inner.start + abort_at(now, timeout);
        let cluster = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let mut st = cluster.lock();
            if let Some(id) = st.transactions.open_with_serial(serial).map(str::to_string) {
                cluster.abort_open(&mut st, &id, "transaction timed out");
            }
        });
    }

    pub(super) fn add_partitions_to_txn(
        &self,
        broker: i32,
        version: i16,
        req: &AddPartitionsToTxnRequest,
    ) -> AddPartitionsToTxnResponse {
        let mut st = self.lock();
        let id = req.v3_and_below_transactional_id.0.to_string();
        let producer = (req.v3_and_below_producer_id.0, req.v3_and_below_producer_epoch);
        let wanted: Vec<(String, i32)> = req
            .v3_and_below_topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect();
        // Kafka's KafkaApis answers unknown partitions before asking the coordinator: those
        // UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED.
        let unknown: Vec<bool> =
            wanted.iter().map(|(t, p)| !super::cluster::has_partition(&st.topics, t, *p)).collect();
        let codes: Vec<i16> = if unknown.iter().any(|u| *u) {
            unknown
                .iter()
                .map(|u| if *u { E::UnknownTopicOrPartition.code() } else { E::OperationNotAttempted.code() })
                .collect()
        } else {
            let checked =
                self.txn_check(&mut st, broker, ApiKey::AddPartitionsToTxn, &id, producer, |m| mismatch(m, version, 2));
            let code = match checked {
                Ok(()) => {
                    self.open(&mut st, &id);
                    if let Ok(meta) = st.transactions.current(&id, producer.0, producer.1) {
                        meta.partitions.extend(wanted.iter().cloned());
                    }
                    self.record(
                        "kafka.txn.add-partitions",
                        &id,
                        wanted.iter().map(|(t, p)| format!("{t}-{p}")).collect::<Vec<_>>().join(", "),
                    );
                    0
                }
                Err(e) => e.code(),
            };
            vec![code; wanted.len()]
        };
        let mut topics: Vec<add_partitions_to_txn_response::AddPartitionsToTxnTopicResult> = Vec::new();
        for ((topic, partition), code) in wanted.iter().zip(codes) {
            let result = add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(*partition)
                .with_partition_error_code(code);
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.results_by_partition.push(result),
                None => topics.push(
                    add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                        .with_name(TopicName(super::cluster::s(topic)))
                        .with_results_by_partition(vec![result]),
                ),
            }
        }
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
    }

    pub(super) fn add_offsets_to_txn(
        &self,
        broker: i32,
        version: i16,
        req: &AddOffsetsToTxnRequest,
    ) -> AddOffsetsToTxnResponse {
        let mut st = self.lock();
        let id = req.transactional_id.0.to_string();
        let producer = (req.producer_id.0, req.producer_epoch);
        let group = req.group_id.0.to_string();
        let code = match self
            .txn_check(&mut st, broker, ApiKey::AddOffsetsToTxn, &id, producer, |m| mismatch(m, version, 2))
        {
            Ok(()) => {
                self.ensure_offsets_topic(&mut st);
                self.open(&mut st, &id);
                if let Ok(meta) = st.transactions.current(&id, producer.0, producer.1) {
                    meta.partitions.insert((OFFSETS_TOPIC.to_string(), offsets_partition(&group)));
                }
                self.record("kafka.txn.add-offsets", &id, format!("group {group}"));
                0
            }
            Err(e) => e.code(),
        };
        AddOffsetsToTxnResponse::default().with_error_code(code)
    }

    pub(super) fn txn_offset_commit(
        &self,
        broker: i32,
        version: i16,
        req: &TxnOffsetCommitRequest,
    ) -> TxnOffsetCommitResponse {
        let mut st = self.lock();
        let id = req.transactional_id.0.to_string();
        let group = req.group_id.0.to_string();
        let producer = (req.producer_id.0, req.producer_epoch);
        let instance = req.group_instance_id.as_ref().map(|i| i.to_string());
        let top: Result<(), E> = (|| {
            if self.coordinator_of(&st, &group) != broker {
                return Err(E::NotCoordinator);
            }
            if let Some(code) =
                st.faults.error_for(ApiKey::TxnOffsetCommit, broker, Part { group: Some(&group), ..Part::default() })
            {
                return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
            }
            let added = (OFFSETS_TOPIC.to_string(), offsets_partition(&group));
            match st.transactions.current(&id, producer.0, producer.1) {
                Err(m) => return Err(mismatch(m, version, 3)),
                // Kafka 4.2 verifies the group's offsets partition is in the transaction.
                Ok(meta) if !meta.partitions.contains(&added) => return Err(E::InvalidTxnState),
                Ok(_) => {}
            }
            if version >= 3 {
                st.groups.check_txn_member(&group, req.member_id.as_str(), instance.as_deref(), req.generation_id)?;
            }
            Ok(())
        })();
        let mut stored = Vec::new();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let metadata = p.committed_metadata.as_ref().map_or(String::new(), |m| m.to_string());
                        let code = if !super::cluster::has_partition(&st.topics, t.name.0.as_str(), p.partition_index) {
                            E::UnknownTopicOrPartition.code()
                        } else if let Err(e) = top {
                            e.code()
                        } else if metadata.len() > crate::groups::OFFSET_METADATA_BYTES_MAX {
                            E::OffsetMetadataTooLarge.code()
                        } else {
                            stored.push((
                                (group.clone(), t.name.0.to_string(), p.partition_index),
                                Committed {
                                    offset: p.committed_offset,
                                    leader_epoch: p.committed_leader_epoch,
                                    metadata,
                                },
                            ));
                            0
                        };
                        txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code)
                    })
                    .collect();
                txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
        if !stored.is_empty() {
            let detail =
                stored.iter().map(|((_, t, p), c)| format!("{t}-{p}@{}", c.offset)).collect::<Vec<_>>().join(", ");
            if let Ok(meta) = st.transactions.current(&id, producer.0, producer.1) {
                meta.offsets.extend(stored);
            }
            self.record("kafka.txn.offsets", &id, format!("group {group}: {detail}"));
        }
        TxnOffsetCommitResponse::default().with_topics(topics)
    }

    pub(super) fn end_txn(&self, broker: i32, version: i16, req: &EndTxnRequest) -> EndTxnResponse {
        use crate::transactions::TxnState;
        let mut st = self.lock();
        let id = req.transactional_id.0.to_string();
        let producer = (req.producer_id.0, req.producer_epoch);
        let result = self
            .txn_check(&mut st, broker, ApiKey::EndTxn, &id, producer, |m| mismatch(m, version, 2))
            .and_then(|()| {
                let state = st.transactions.get(&id).map(|m| m.state);
                match (state, req.committed) {
                    (Some(TxnState::Ongoing), commit) => {
                        self.end_locked(&mut st, &id, commit);
                        let outcome = if commit { "commit" } else { "abort" };
                        self.record(
                            "kafka.txn.end",
                            &id,
                            format!("{outcome}: producer {} epoch {}", producer.0, producer.1),
                        );
                        Ok(())
                    }
                    (Some(TxnState::CompleteCommit), true) | (Some(TxnState::CompleteAbort), false) => Ok(()),
                    _ => Err(E::InvalidTxnState),
                }
            });
        EndTxnResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
    }

    /// Checks a transactional batch from `producer_id` to `topic`/`partition`: the partition must
    /// be in the producer's open transaction (Kafka 4.2's produce-side verification, KIP-890
    /// part 1).
    pub(super) fn check_transactional_append(
        st: &State,
        producer_id: i64,
        topic: &str,
        partition: i32,
    ) -> Result<(), E> {
        let key = (topic.to_string(), partition);
        let open = st.transactions.iter().any(|(_, m)| {
            m.producer_id == producer_id
                && m.state == crate::transactions::TxnState::Ongoing
                && m.partitions.contains(&key)
        });
        if open { Ok(()) } else { Err(E::InvalidTxnState) }
    }
}

#[cfg(test)]
mod tests {
    use super::offsets_partition;

    #[test]
    fn a_groups_offsets_partition_is_its_java_hash_code_modulo_50() {
        // "group".hashCode() = 98629247; 98629247 % 50 = 47.
        assert_eq!(offsets_partition("group"), 47);
        // "".hashCode() = 0.
        assert_eq!(offsets_partition(""), 0);
    }
}
