//! Produce (appends, idempotent sequences, acks=0) and InitProducerId.

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;

use super::cluster::{Cluster, State};
use super::conn::Outcome;
use crate::codec::ResponseBody;
use crate::faults::Part;
use crate::log::validate_batch;
use crate::producer_ids::SequenceCheck;

impl Cluster {
    /// Produce. With acks=0 nothing is answered, and a request with any partition error closes
    /// the connection instead, so the producer notices and refreshes its metadata (Apache Kafka's
    /// `KafkaApis.handleProduceRequest`; measured against Kafka 4.2 by fidelity's differential
    pub(super) fn produce(&self, broker: i32, version: i16, req: &ProduceRequest) -> Outcome {
        let acks_ok = matches!(req.acks, -1..=1);
        let mut appended = Vec::new();
        let responses = {
            let mut st = self.lock();
            let st = &mut *st;
            req.topic_data
                .iter()
                .map(|t| {
                    let name = t.name.0.to_string();
                    let partitions = t
                        .partition_data
                        .iter()
                        .map(|p| {
                            let result = if !acks_ok {
                                Err(Refusal::from(E::InvalidRequiredAcks.code()))
                            } else {
                                self.append(st, broker, &name, p).inspect(|(base, last, _)| {
                                    if *last >= *base {
                                        appended.push(format!("{name}-{} {base}..={last}", p.index));
                                    }
                                })
                            };
                            let log_start = st
                                .topics
                                .get(&name)
                                .and_then(|t| t.partitions.get(p.index as usize))
                                .map_or(-1, |p| p.log.log_start());
                            let mut r = produce_response::PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_log_append_time_ms(-1);
                            r = match result {
                                Ok((base, _, log_append_time)) => {
                                    r.with_base_offset(base).with_log_append_time_ms(log_append_time)
                                }
                                Err(refusal) => r
                                    .with_error_code(refusal.code)
                                    .with_base_offset(-1)
                                    .with_record_errors(refusal.record_errors())
                                    .with_error_message(refusal.message()),
                            };
                            if version >= 5 {
                                r = r.with_log_start_offset(log_start);
                            }
                            r
                        })
                        .collect();
                    produce_response::TopicProduceResponse::default()
                        .with_name(t.name.clone())
                        .with_partition_responses(partitions)
                })
                .collect()
        };
        if !appended.is_empty() {
            self.inner.log_changed.send_modify(|v| *v += 1);
            self.record("kafka.produce", &format!("broker-{broker}"), appended.join(", "));
        }
        if req.acks != 0 {
            return Outcome::Reply(ResponseBody::Produce(ProduceResponse::default().with_responses(responses)));
        }
        let failed: Vec<String> = responses
            .iter()
            .flat_map(|t| {
                t.partition_responses
                    .iter()
                    .filter(|p| p.error_code != 0)
                    .map(move |p| format!("{}-{}: error {}", t.name.0.as_str(), p.index, p.error_code))
            })
            .collect();
        if failed.is_empty() {
            Outcome::NoReply
        } else {
            Outcome::Close(format!("acks=0 produce failed: {}", failed.join(", ")))
        }
    }

    /// Appends one partition's batch; `(base, last)` offsets (a duplicate gives its original
    /// base and `last < base`) and the log append time (-1 unless the topic's
    /// `message.timestamp.type` is `LogAppendTime`), or the error code.
    fn append(
        &self,
        st: &mut State,
        broker: i32,
        topic: &str,
        p: &produce_request::PartitionProduceData,
    ) -> Result<(i64, i64, i64), Refusal> {
        let part = Part { topic: Some(topic), partition: Some(p.index), group: None };
        let Some(t) = st.topics.get_mut(topic) else {
            return Err(E::UnknownTopicOrPartition.code().into());
        };
        if t.internal {
            // Kafka's ReplicaManager: "Cannot append to internal topic".
            return Err(E::InvalidTopicException.code().into());
        }
        let bytes_max = t.configs.max_message_bytes(&self.broker_defaults());
        let Some(partition) = usize::try_from(p.index).ok().and_then(|i| t.partitions.get_mut(i)) else {
            return Err(E::UnknownTopicOrPartition.code().into());
        };
        if partition.leader != broker {
            return Err(E::NotLeaderOrFollower.code().into());
        }
        if let Some(code) = st.faults.error_for(ApiKey::Produce, broker, part) {
            return Err(code.into());
        }
        let records = p.records.clone().unwrap_or_default();
        let batch = validate_batch(&records, bytes_max).map_err(|e| Refusal::from(e.code()))?;
        if batch.info.control {
            // Kafka's LogValidator: clients may not append control records.
            return Err(E::InvalidRecord.code().into());
        }
        if !batch.keyless.is_empty() && t.configs.cleanup("compact") {
            return Err(Refusal::keyless(topic, p.index, &batch.keyless));
        }
        if batch.info.transactional {
            Self::check_transactional_append(st, batch.info.producer_id, topic, p.index)
                .map_err(|e| Refusal::from(e.code()))?;
        }
        let producer = (batch.info.producer_id, batch.info.producer_epoch);
        let seq = (batch.info.base_sequence, batch.last_sequence());
        match st.producers.check(producer, topic, p.index, seq.0, seq.1) {
            SequenceCheck::Refuse(code) => Err(code.into()),
            SequenceCheck::Duplicate(base) => Ok((base, base - 1, -1)),
            SequenceCheck::Append => {
                let t = st.topics.get_mut(topic).expect("checked above");
                let limits = t.configs.log_limits(self.inner.config.partition_bytes_max);
                let now_ms = Self::now_ms();
                let (batch, log_append_time) = if t.configs.log_append_time() {
                    (batch.with_log_append_time(now_ms), now_ms)
                } else {
                    (batch, -1)
                };
                let partition = &mut t.partitions[p.index as usize];
                let base = partition.log.append(&batch, partition.leader_epoch, &limits, now_ms);
                st.producers.appended(producer, topic, p.index, seq, base);
                self.arm_retention(st, topic, Some(p.index));
                self.arm_cleaner(st, topic, Some(p.index));
                Ok((base, base + i64::from(batch.info.record_count) - 1, log_append_time))
            }
        }
    }

    pub(super) fn init_producer_id(
        &self,
        broker: i32,
        version: i16,
        req: &InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        let mut st = self.lock();
        let r = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
        if let Some(code) = st.faults.error_for(ApiKey::InitProducerId, broker, Part::default()) {
            return r.with_error_code(code);
        }
        if req.transactional_id.as_ref().is_some_and(|t| t.is_empty()) {
            // Kafka's transaction coordinator refuses an empty transactional id.
            return r.with_error_code(E::InvalidRequest.code());
        }
        if let Some(id) = req.transactional_id.as_ref().map(|t| t.0.to_string()) {
            return match self.init_transactional(&mut st, broker, version, &id, req) {
                Ok((pid, epoch)) => {
                    drop(st);
                    self.record("kafka.producer.init", &format!("producer-{pid}"), format!("epoch {epoch} txn {id}"));
                    InitProducerIdResponse::default().with_producer_id(ProducerId(pid)).with_producer_epoch(epoch)
                }
                Err(e) => r.with_error_code(e.code()),
            };
        }
        let existing = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
        match st.producers.init(existing) {
            Ok((id, epoch)) => {
                drop(st);
                self.record("kafka.producer.init", &format!("producer-{id}"), format!("epoch {epoch}"));
                InitProducerIdResponse::default().with_producer_id(ProducerId(id)).with_producer_epoch(epoch)
            }
            Err(code) => r.with_error_code(code),
        }
    }
}

/// Why one partition's batch was not appended: the error code and, for records the log
/// validator refused one by one, their indexes in the batch and why (Produce v8+'s
/// `record_errors` and `error_message`, KIP-467).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    code: i16,
    records: Vec<(i32, String)>,
}

impl From<i16> for Refusal {
    fn from(code: i16) -> Self {
        Refusal { code, records: Vec::new() }
    }
}

impl Refusal {
    /// Records without a key sent to a compacted topic (Kafka's `LogValidator.validateKey`).
    fn keyless(topic: &str, partition: i32, indexes: &[i32]) -> Refusal {
        let why = format!("Compacted topic cannot accept message without key in topic partition {topic}-{partition}");
        Refusal { code: E::InvalidRecord.code(), records: indexes.iter().map(|i| (*i, why.clone())).collect() }
    }

    fn record_errors(&self) -> Vec<produce_response::BatchIndexAndErrorMessage> {
        self.records
            .iter()
            .map(|(i, why)| {
                produce_response::BatchIndexAndErrorMessage::default()
                    .with_batch_index(*i)
                    .with_batch_index_error_message(Some(why.clone().into()))
            })
            .collect()
    }

    /// Kafka's summary (`UnifiedLog`'s `RecordValidationException` handling): the count and the
    /// first three, as Java prints a list of `RecordError`s.
    fn message(&self) -> Option<kafka_protocol::protocol::StrBytes> {
        if self.records.is_empty() {
            return None;
        }
        let shown: Vec<String> = self
            .records
            .iter()
            .take(3)
            .map(|(i, why)| format!("RecordError(batchIndex={i}, message='{why}')"))
            .collect();
        let text = format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first \
             three errors at most: [{}]",
            self.records.len(),
            shown.join(", ")
        );
        Some(text.into())
    }
}
