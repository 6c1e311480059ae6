//! Fetch (long polls, KIP-74 limits) and ListOffsets.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use tokio::time::Instant;

use super::cluster::{Cluster, FETCH_WAIT_MAX};
use crate::faults::Part;

impl Cluster {
    pub(super) async fn fetch(&self, broker: i32, version: i16, req: &FetchRequest) -> FetchResponse {
        if version >= 7 && (req.session_id != 0 || req.session_epoch > 0) {
            // No fetch session was ever handed out (responses carry session id 0).
            return FetchResponse::default().with_error_code(E::FetchSessionIdNotFound.code());
        }
        let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(FETCH_WAIT_MAX);
        let deadline = Instant::now() + wait;
        let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
        loop {
            let mut changed = self.inner.log_changed.subscribe();
            let (resp, bytes, errors) = self.fetch_once(broker, version, req);
            if errors || bytes >= min_bytes.max(1) || Instant::now() >= deadline {
                return resp;
            }
            tokio::select! {
                biased;
                r = changed.changed() => if r.is_err() { return resp },
                () = tokio::time::sleep_until(deadline) => return self.fetch_once(broker, version, req).0,
            }
        }
    }

    fn fetch_once(&self, broker: i32, version: i16, req: &FetchRequest) -> (FetchResponse, usize, bool) {
        let st = self.lock();
        let mut budget = if version >= 3 { usize::try_from(req.max_bytes).unwrap_or(0) } else { usize::MAX };
        let mut total = 0usize;
        let mut errors = false;
        let responses = req
            .topics
            .iter()
            .map(|t| {
                let name = t.topic.0.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|fp| {
                        let mut r = fetch_response::PartitionData::default()
                            .with_partition_index(fp.partition)
                            .with_records(Some(Bytes::new()))
                            .with_aborted_transactions(Some(Vec::new()));
                        let part = Part { topic: Some(&name), partition: Some(fp.partition), group: None };
                        let found = st
                            .topics
                            .get(&name)
                            .and_then(|t| usize::try_from(fp.partition).ok().and_then(|i| t.partitions.get(i)));
                        let code = match found {
                            None => Some(E::UnknownTopicOrPartition.code()),
                            Some(p) if p.leader != broker => Some(E::NotLeaderOrFollower.code()),
                            Some(_) => st.faults.error_for(ApiKey::Fetch, broker, part),
                        };
                        let Some(p) = found.filter(|_| code.is_none()) else {
                            errors = true;
                            return r
                                .with_error_code(code.unwrap_or(0))
                                .with_high_watermark(-1)
                                .with_last_stable_offset(-1);
                        };
                        let hw = p.log.high_watermark();
                        if fp.fetch_offset < p.log.log_start() || fp.fetch_offset > hw {
                            // As Kafka answers any partition error: no watermarks (measured against
                            // Apache Kafka 4.2 by fidelity's differential suite).
                            errors = true;
                            return r
                                .with_error_code(E::OffsetOutOfRange.code())
                                .with_high_watermark(-1)
                                .with_last_stable_offset(-1)
                                .with_log_start_offset(-1);
                        }
                        let lso = p.log.last_stable_offset();
                        r = r.with_high_watermark(hw).with_last_stable_offset(lso);
                        if version >= 5 {
                            r = r.with_log_start_offset(p.log.log_start());
                        }
                        let partition_max = usize::try_from(fp.partition_max_bytes).unwrap_or(0);
                        // KIP-74, as Kafka's ReplicaManager.readFromLog: each partition within
                        // what is left of max_bytes; the response's first batch goes out whatever
                        // its size, no other batch beyond the limits.
                        let first = total == 0;
                        // READ_COMMITTED (1) reads below the last stable offset and lists the
                        // aborted transactions in what it read.
                        let committed = version >= 4 && req.isolation_level == 1;
                        let end = if committed { lso } else { hw };
                        let batches = p.log.read(fp.fetch_offset, end, partition_max.min(budget), first);
                        if committed {
                            let aborted = p
                                .log
                                .aborted_between(fp.fetch_offset, end)
                                .into_iter()
                                .map(|a| {
                                    fetch_response::AbortedTransaction::default()
                                        .with_producer_id(ProducerId(a.producer_id))
                                        .with_first_offset(a.first_offset)
                                })
                                .collect();
                            r = r.with_aborted_transactions(Some(aborted));
                        }
                        let size: usize = batches.iter().map(Bytes::len).sum();
                        total += size;
                        budget = budget.saturating_sub(size);
                        r.with_records(Some(batches.concat().into()))
                    })
                    .collect();
                fetch_response::FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(partitions)
            })
            .collect();
        (FetchResponse::default().with_responses(responses), total, errors)
    }

    /// ListOffsets. As Kafka's `KafkaApis.handleListOffsetRequest`: a partition asked more than
    /// once is answered once, with `INVALID_REQUEST`; the max-timestamp query (-3) needs v7.
    pub(super) fn list_offsets(&self, broker: i32, version: i16, req: &ListOffsetsRequest) -> ListOffsetsResponse {
        let st = self.lock();
        let mut asked = BTreeMap::<(&str, i32), usize>::new();
        for t in &req.topics {
            for lp in &t.partitions {
                *asked.entry((t.name.0.as_str(), lp.partition_index)).or_default() += 1;
            }
        }
        let mut answered = std::collections::BTreeSet::new();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let name = t.name.0.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .filter(|lp| answered.insert((t.name.0.as_str(), lp.partition_index)))
                    .map(|lp| {
                        let r = list_offsets_response::ListOffsetsPartitionResponse::default()
                            .with_partition_index(lp.partition_index);
                        if asked[&(t.name.0.as_str(), lp.partition_index)] > 1 {
                            return r.with_error_code(E::InvalidRequest.code()).with_offset(-1).with_timestamp(-1);
                        }
                        let part = Part { topic: Some(&name), partition: Some(lp.partition_index), group: None };
                        let found = st
                            .topics
                            .get(&name)
                            .and_then(|t| usize::try_from(lp.partition_index).ok().and_then(|i| t.partitions.get(i)));
                        let Some(p) = found else {
                            return r
                                .with_error_code(E::UnknownTopicOrPartition.code())
                                .with_offset(-1)
                                .with_timestamp(-1);
                        };
                        if p.leader != broker {
                            return r.with_error_code(E::NotLeaderOrFollower.code()).with_offset(-1).with_timestamp(-1);
                        }
                        if let Some(code) = st.faults.error_for(ApiKey::ListOffsets, broker, part) {
                            return r.with_error_code(code).with_offset(-1).with_timestamp(-1);
                        }
                        let (offset, timestamp) = match lp.timestamp {
                            -2 => (p.log.log_start(), -1),
                            -1 if req.isolation_level == 1 => (p.log.last_stable_offset(), -1),
                            -1 => (p.log.high_watermark(), -1),
                            -3 if version >= 7 => p.log.max_timestamp().unwrap_or((-1, -1)),
                            ts if ts >= 0 => p.log.offset_for_timestamp(ts).unwrap_or((-1, -1)),
                            _ => {
                                return r
                                    .with_error_code(E::UnsupportedVersion.code())
                                    .with_offset(-1)
                                    .with_timestamp(-1);
                            }
                        };
                        let mut r = r.with_offset(offset).with_timestamp(timestamp);
                        if version >= 4 {
                            r = r.with_leader_epoch(p.leader_epoch);
                        }
                        r
                    })
                    .collect();
                list_offsets_response::ListOffsetsTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
        ListOffsetsResponse::default().with_topics(topics)
    }
}
