//! One-shot lookups of a consumer: committed offsets through the group (OffsetFetch) and
//! offsets by time or watermarks from the partitions' leaders (ListOffsets), each bounded by
//! the call's timeout as rdkafka's blocking calls are.

use std::future::Future;
use std::sync::Arc;

use crate::rdkafka::consumer::context::BaseConsumer;
use crate::rdkafka::consumer::context::ConsumerContext;
use crate::rdkafka::consumer::fetcher::Owner;
use crate::rdkafka::consumer::inner::tps;
use crate::rdkafka::consumer::positions::Tp;
use crate::rdkafka::consumer::wire;
use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode as Code};
use crate::rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use crate::rdkafka::util::Timeout;

impl<C: ConsumerContext> BaseConsumer<C> {
    pub(crate) fn committed_lookup(
        &self,
        tpl: TopicPartitionList,
        timeout: Timeout,
    ) -> impl Future<Output = KafkaResult<TopicPartitionList>> + Send + 'static {
        let partitions = tps(&tpl);
        let rx = self.inner.lookup_committed(partitions);
        async move {
            let rx = rx.ok_or(KafkaError::OffsetFetch(Code::UnknownGroup))?;
            let reply = match timeout.as_duration() {
                None => rx.await,
                Some(d) => {
                    tokio::time::timeout(d, rx).await.map_err(|_| KafkaError::OffsetFetch(Code::OperationTimedOut))?
                }
            };
            let found = reply.unwrap_or(Err(KafkaError::OffsetFetch(Code::BrokerDestroy)))?;
            let mut out = TopicPartitionList::with_capacity(tpl.count());
            for e in tpl.elements() {
                let (t, p) = (e.topic(), e.partition());
                let hit = found.iter().find(|((ft, fp), _, _)| ft == t && *fp == p);
                let mut elem = out.add_partition(t, p);
                let offset = hit.and_then(|(_, o, _)| *o).filter(|o| *o >= 0).map_or(Offset::Invalid, Offset::Offset);
                let _ = elem.set_offset(offset);
                if let Some(m) = hit.and_then(|(_, _, m)| m.as_ref()) {
                    elem.set_metadata(m);
                }
            }
            Ok(out)
        }
    }

    pub(crate) fn offsets_lookup(
        &self,
        queries: Vec<(Tp, i64)>,
        timeout: Timeout,
    ) -> impl Future<Output = KafkaResult<Vec<(Tp, KafkaResult<i64>)>>> + Send + 'static {
        let (s, dialer) = (Arc::clone(&self.inner.s), self.inner.dialer.clone());
        async move {
            let work = wire::list_offsets_once(s, dialer, queries);
            match timeout.as_duration() {
                None => work.await,
                Some(d) => tokio::time::timeout(d, work)
                    .await
                    .map_err(|_| KafkaError::MetadataFetch(Code::OperationTimedOut))?,
            }
        }
    }
}
