//! Introspection for oracles: generations, commits, group events, groups and partitions.

use super::cluster::Cluster;
use crate::introspect::{BatchView, CommitRecord, Generation, GroupEvent, GroupView, PartitionView};

impl Cluster {
    /// The generations of `group`, oldest first.
    pub fn generations(&self, group: &str) -> Vec<Generation> {
        self.inner
            .journal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .generations
            .get(group)
            .map(|g| g.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every offset commit attempt, oldest first.
    pub fn commits(&self) -> Vec<CommitRecord> {
        self.inner.journal.lock().unwrap_or_else(|p| p.into_inner()).commits.iter().cloned().collect()
    }

    /// The events of `group`'s coordinator, oldest first: state changes, and members leaving
    /// (LeaveGroup), expiring or being removed ([`GroupEvent`]). The same events a simulation's
    /// history holds, kept on loopback too.
    pub fn group_events(&self, group: &str) -> Vec<GroupEvent> {
        let journal = self.inner.journal.lock().unwrap_or_else(|p| p.into_inner());
        journal.group_events.iter().filter(|e| e.group == group).cloned().collect()
    }

    /// `group`'s current state.
    pub fn group(&self, group: &str) -> Option<GroupView> {
        let st = self.lock();
        st.groups.group(group).map(|g| g.view(self.coordinator_of(&st, group)))
    }

    /// The offset and metadata `group` committed for a partition.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<(i64, String)> {
        let st = self.lock();
        let c = st.groups.committed(group, topic, partition)?;
        Some((c.offset, c.metadata.clone()))
    }

    /// The records a `read_committed` consumer reads from a partition, from the log start to the
    /// last stable offset: no control records, none of an aborted transaction (KIP-98).
    pub fn committed_records(&self, topic: &str, partition: i32) -> Vec<kafka_protocol::records::Record> {
        let st = self.lock();
        let Some(p) = st.topics.get(topic).and_then(|t| t.partitions.get(usize::try_from(partition).ok()?)) else {
            return Vec::new();
        };
        let (start, lso) = (p.log.log_start(), p.log.last_stable_offset());
        let aborted = p.log.aborted_between(start, lso);
        let mut out = Vec::new();
        for b in p.log.batches().filter(|b| b.base_offset < lso) {
            if aborted.iter().any(|a| {
                a.producer_id == b.producer_id && a.first_offset <= b.base_offset && b.base_offset < a.last_offset
            }) {
                continue;
            }
            let mut bytes = b.bytes.clone();
            let Ok(set) = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes) else { continue };
            out.extend(set.records.into_iter().filter(|r| !r.control && r.offset >= start && r.offset < lso));
        }
        out
    }

    /// A partition's leader, offsets and batches.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<PartitionView> {
        let st = self.lock();
        let p = st.topics.get(topic)?.partitions.get(usize::try_from(partition).ok()?)?;
        Some(PartitionView {
            topic: topic.to_string(),
            partition,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            log_start: p.log.log_start(),
            high_watermark: p.log.high_watermark(),
            last_stable_offset: p.log.last_stable_offset(),
            batches: p
                .log
                .batches()
                .map(|b| BatchView {
                    base_offset: b.base_offset,
                    last_offset: b.last_offset,
                    producer_id: b.producer_id,
                    producer_epoch: b.producer_epoch,
                    base_sequence: b.base_sequence,
                    bytes: b.bytes.len(),
                })
                .collect(),
        })
    }
}
