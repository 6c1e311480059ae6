//! Kafka partitions as list-append logs, for the history checker
//! [`sim::check::list_append`] (Jepsen's queue analysis of Kafka and Redpanda, in Elle's terms).
//!
//! The mapping, from Kafka's log semantics (Apache Kafka documentation, "Design: the log" and
//! the Produce and Fetch APIs of <https://kafka.apache.org/protocol>):
//! - a **key** is a topic-partition, named `topic-partition` ([`key`]);
//! - a **produce** of a batch is one **append** per record, sent when the request is; the leader
//!   numbers a batch's records from its base offset, so record `i` is acknowledged at
//!   `base_offset + i` ([`produce_outcome`]). `acks=0` has no response: the outcome is unknown.
//!   A transport error before the response (a reset, a closed connection, a broker going down)
//!   is unknown too: the batch may have been appended (kafkasim's `ApplyThenDrop` is exactly
//!   that);
//! - a **fetch** is a **read** of the records it returned, at their offsets; Kafka returns whole
//!   batches, so a fetch from mid-batch also holds records below the fetch offset, and they
//!   are observations like the others;
//! - a consumer following its position is a **subscriber**: it records a subscribe at each
//!   (re)connect with the offset it resumes from, and each record it hands on;
//! - the **final read** is the partition's whole log, fetched from its log start to its high
//!   watermark from the current leader over an in-memory connection ([`final_log`]).
//!
//! Every producer and consumer of the checked partitions must record through the same
//! [`Recorder`]: a value in the log that no recorded append wrote is a phantom (rule 5), and
//! values must be unique (the checker's precondition): a client that retries a batch records it
//! once, before the first attempt, and ends it with the last attempt's outcome.
//!
//! ```no_run
//! # async fn f(ctx: sim::Ctx, cluster: kafkasim::Cluster) -> Result<(), kafkasim::Error> {
//! use kafkasim::history::{self, Recording};
//! use sim::check::list_append::{ListAppend, Recorder};
//!
//! ctx.add_check(ListAppend::new());           // judges the events the recorder records
//! let recorder = Recorder::of(&ctx);
//! let producer = Recording::new(&recorder, "producer-1");
//! let mut client = kafkasim::Client::new(ctx.net().host("app").dial("kafka-0:9092").await?, "app");
//! producer.produce(&mut client, "orders", 0, &["v1", "v2"], -1, None).await?;
//! history::record_final_logs(&recorder, &cluster, "orders").await?; // before the body returns
//! # Ok(()) }
//! ```

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, produce_response::PartitionProduceResponse,
};
use sim::OpOutcome;
use sim::check::list_append::{FinalLog, Offset, PendingAppend, Record, Recorder};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::client::{Client, RecordInput, decode_records, record_batch};
use crate::{Cluster, Error, requests};

pub mod epoch_bump;

/// The Produce version [`Recording::produce`] sends.
pub const PRODUCE_VERSION: i16 = 9;
/// The Fetch version [`Recording::fetch`] and [`final_log`] send.
pub const FETCH_VERSION: i16 = 12;
/// Bytes one fetch asks for per partition.
pub use crate::requests::FETCH_BYTES_MAX;
/// How long [`final_log`] may take (tokio time: fake in a simulation).
pub const FINAL_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The checker's key for a topic-partition: `topic-partition`.
pub fn key(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// The checker's value of a null record value (a tombstone).
const NULL_VALUE: &str = "<null>";

/// A record value as the checker's value: the UTF-8 text when it is text (and neither starts
/// with `0x` nor is `<null>`), else `0x` and its hex digits; a null value (a tombstone) is
/// `<null>`.
pub fn value_of(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => NULL_VALUE.to_string(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(text) if !text.starts_with("0x") && text != NULL_VALUE => text.to_string(),
            _ => {
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                format!("0x{hex}")
            }
        },
    }
}

/// The outcome of record `index` of a batch whose partition response carried `error_code` and
/// `base_offset`, by Kafka's produce semantics:
/// - `0`: acknowledged at `base_offset + index` (without an offset when the base is `-1`);
/// - `DUPLICATE_SEQUENCE_NUMBER` (46): acknowledged without an offset — the broker already holds
///   the batch (KIP-98; the Java producer treats it as success);
/// - `REQUEST_TIMED_OUT` (7) and `NOT_ENOUGH_REPLICAS_AFTER_APPEND` (20): unknown — the leader
///   appended the batch but replication did not complete, so it may survive or not;
/// - `NETWORK_EXCEPTION` (13): unknown;
/// - `NOT_LEADER_OR_FOLLOWER` (6): unknown — with `acks=all` Kafka answers it from the produce
///   purgatory when leadership moves after the leader appended (`DelayedProduce`), so the batch may
///   survive; kafkasim answers it only before appending, but the history cannot tell which;
/// - any other code: definitely failed (the broker refused the batch before appending it).
pub fn produce_outcome(error_code: i16, base_offset: i64, index: usize) -> OpOutcome<Option<Offset>> {
    match error_code {
        0 => OpOutcome::Ok(
            u64::try_from(base_offset)
                .ok()
                .and_then(|base| u64::try_from(index).ok().and_then(|i| base.checked_add(i))),
        ),
        46 => OpOutcome::Ok(None),
        6 | 7 | 13 | 20 => OpOutcome::Indeterminate(code_name(error_code)),
        _ => OpOutcome::Failed(code_name(error_code)),
    }
}

/// One client's recording: a [`Recorder`] and the process name it records under.
#[derive(Clone, Debug)]
pub struct Recording {
    recorder: Recorder,
    process: String,
}

/// The appends of one produced batch, sent and not yet ended: end them with the partition's
/// response ([`ProduceAppends::finish`]) or as unknown. Dropped, they are recorded unknown.
#[derive(Debug)]
#[must_use = "end the appends with finish or unknown"]
pub struct ProduceAppends {
    pending: Vec<PendingAppend>,
}

impl ProduceAppends {
    /// Ends every append by the partition's response ([`produce_outcome`]).
    pub fn finish(self, response: &PartitionProduceResponse) {
        for (i, append) in self.pending.into_iter().enumerate() {
            append.outcome(produce_outcome(response.error_code, response.base_offset, i));
        }
    }

    /// Ends every append unknown (no response: `acks=0`, a transport error, a timeout).
    pub fn unknown(self, reason: &str) {
        for append in self.pending {
            append.unknown(reason);
        }
    }

    /// Ends every append failed (the caller knows the batch was never sent or was refused).
    pub fn failed(self, reason: &str) {
        for append in self.pending {
            append.failed(reason);
        }
    }
}

/// What one recorded fetch saw of a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The partition's error code (0: none).
    pub error_code: i16,
    /// The high watermark (-1 with an error).
    pub high_watermark: i64,
    /// The records returned, whole batches, in offset order.
    pub records: Vec<Record>,
}

/// A Produce request of `values` as one batch to `topic`-`partition` (`producer`: the
/// idempotent producer's `(producer id, epoch, base sequence)`). Record timestamps are 0.
///
/// # Errors
/// [`Error::Encode`].
pub fn produce_request<V: AsRef<str>>(
    topic: &str,
    partition: i32,
    values: &[V],
    acks: i16,
    producer: Option<(i64, i16, i32)>,
) -> Result<ProduceRequest, Error> {
    let records: Vec<RecordInput<'_>> = values.iter().map(|v| (None, Some(v.as_ref().as_bytes()), 0)).collect();
    Ok(requests::produce(topic, partition, record_batch(&records, producer)?, acks))
}

/// A Fetch request of `topic`-`partition` from `offset`, waiting at most `max_wait` for data.
pub fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait: Duration) -> FetchRequest {
    requests::fetch(topic, partition, offset, max_wait)
}

/// The response for `topic`-`partition` inside a Produce response.
pub fn produce_partition<'r>(
    response: &'r ProduceResponse,
    topic: &str,
    partition: i32,
) -> Option<&'r PartitionProduceResponse> {
    response
        .responses
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partition_responses.iter())
        .find(|p| p.index == partition)
}

/// What a Fetch response holds for `topic`-`partition`.
///
/// # Errors
/// [`Error::Malformed`] when the partition is missing or its records do not decode.
pub fn fetched(response: &FetchResponse, topic: &str, partition: i32) -> Result<Fetched, Error> {
    let p = response
        .responses
        .iter()
        .filter(|t| t.topic.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| Error::Malformed { what: "fetch response", reason: format!("no {topic}-{partition}") })?;
    let records = decode_records(p.records.as_ref().unwrap_or(&Bytes::new()))?;
    Ok(Fetched {
        error_code: p.error_code,
        high_watermark: p.high_watermark,
        records: records
            .into_iter()
            .filter_map(|(offset, _, value)| {
                u64::try_from(offset).ok().map(|o| Record::new(o, value_of(value.as_deref())))
            })
            .collect(),
    })
}

impl Recording {
    /// Records as `process` into `recorder`.
    pub fn new(recorder: &Recorder, process: &str) -> Recording {
        Recording { recorder: recorder.clone(), process: process.to_string() }
    }

    /// The recorder.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The process name.
    pub fn process(&self) -> &str {
        &self.process
    }

    /// Records the appends of a batch of `values` to `topic`-`partition`, sent now: end them with
    /// the response. For clients that send themselves (retries, rdkafka).
    pub fn appends<V: AsRef<str>>(&self, topic: &str, partition: i32, values: &[V]) -> ProduceAppends {
        let k = key(topic, partition);
        ProduceAppends { pending: values.iter().map(|v| self.recorder.append(&self.process, &k, v.as_ref())).collect() }
    }

    /// Produces `values` as one batch to `topic`-`partition` through `client`, recording one
    /// append per value; returns the partition's response (`None` with `acks=0`).
    ///
    /// # Errors
    /// The transport's or codec's error (the appends are then recorded unknown). An error code
    /// in the response is not an error here: the appends are recorded by it and it is returned.
    pub async fn produce<S, V>(
        &self,
        client: &mut Client<S>,
        topic: &str,
        partition: i32,
        values: &[V],
        acks: i16,
        producer: Option<(i64, i16, i32)>,
    ) -> Result<Option<PartitionProduceResponse>, Error>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        V: AsRef<str>,
    {
        let request = produce_request(topic, partition, values, acks, producer)?;
        let appends = self.appends(topic, partition, values);
        if acks == 0 {
            let sent = client.send_only(request, PRODUCE_VERSION).await;
            appends.unknown(if sent.is_ok() { "acks=0: no response" } else { "acks=0: the send failed" });
            return sent.map(|()| None);
        }
        match client.send(request, PRODUCE_VERSION).await {
            Ok(response) => match produce_partition(&response, topic, partition) {
                Some(p) => {
                    appends.finish(p);
                    Ok(Some(p.clone()))
                }
                None => {
                    appends.unknown("the response does not name the partition");
                    Err(Error::Malformed { what: "produce response", reason: format!("no {topic}-{partition}") })
                }
            },
            Err(e) => {
                appends.unknown(&e.to_string());
                Err(e)
            }
        }
    }

    /// Fetches `topic`-`partition` from `offset` through `client`, recording a read of the
    /// records returned (failed with an error code, unknown on a transport error).
    ///
    /// # Errors
    /// The transport's or codec's error.
    pub async fn fetch<S>(
        &self,
        client: &mut Client<S>,
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait: Duration,
    ) -> Result<Fetched, Error>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let read = self.recorder.read(&self.process, &key(topic, partition));
        let result = match client.send(fetch_request(topic, partition, offset, max_wait), FETCH_VERSION).await {
            Ok(response) => fetched(&response, topic, partition),
            Err(e) => Err(e),
        };
        match &result {
            Ok(f) if f.error_code == 0 => read.ok(f.records.clone()),
            Ok(f) => read.failed(code_name(f.error_code)),
            Err(e) => read.unknown(e.to_string()),
        }
        result
    }
}

/// A Kafka error code as Kafka names it, with the number: `NotEnoughReplicas (19)`.
fn code_name(code: i16) -> String {
    ResponseError::try_from_code(code).map_or_else(|| format!("error {code}"), |e| format!("{e:?} ({code})"))
}

/// The final read of `topic`-`partition`: its log from the log start to the high watermark,
/// fetched from the current leader over an in-memory connection (so network faults do not
/// reach it; remove Fetch faults of the cluster's first). Works in a simulation and on loopback
/// (it serves the connection on the caller's runtime).
///
/// # Errors
/// [`Error::Response`] `UNKNOWN_TOPIC_OR_PARTITION` for a partition that does not exist, the
/// fetch's error code, a transport error, or [`Error::Closed`] when the read takes longer than
/// [`FINAL_READ_TIMEOUT`] or stops short of the high watermark.
pub async fn final_log(cluster: &Cluster, topic: &str, partition: i32) -> Result<FinalLog, Error> {
    let view = cluster.partition(topic, partition).ok_or(Error::Response(ResponseError::UnknownTopicOrPartition))?;
    let (near, far) = tokio::io::duplex(1 << 20);
    let server = cluster.clone();
    tokio::spawn(async move { server.serve_connection(view.leader, far).await });
    let mut client = Client::new(near, "list-append-final-read");
    let read = async {
        let mut records: Vec<Record> = Vec::new();
        let mut offset = view.log_start;
        while offset < view.high_watermark {
            let response = client.send(fetch_request(topic, partition, offset, Duration::ZERO), FETCH_VERSION).await?;
            let f = fetched(&response, topic, partition)?;
            crate::check_code(f.error_code)?;
            let from = u64::try_from(offset).unwrap_or(0);
            let before = records.len();
            records.extend(f.records.into_iter().filter(|r| r.offset >= from));
            let Some(last) = records.last().filter(|_| records.len() > before) else {
                return Err(Error::Closed);
            };
            offset = i64::try_from(last.offset).unwrap_or(i64::MAX).saturating_add(1);
        }
        Ok(FinalLog { log_start: u64::try_from(view.log_start).unwrap_or(0), records })
    };
    tokio::time::timeout(FINAL_READ_TIMEOUT, read).await.map_err(|_| Error::Closed)?
}

/// Records the final read ([`final_log`]) of every partition of `topic` into `recorder`.
///
/// # Errors
/// As [`final_log`]; `UNKNOWN_TOPIC_OR_PARTITION` when the topic does not exist.
pub async fn record_final_logs(recorder: &Recorder, cluster: &Cluster, topic: &str) -> Result<(), Error> {
    if cluster.partition(topic, 0).is_none() {
        return Err(Error::Response(ResponseError::UnknownTopicOrPartition));
    }
    let mut partition = 0;
    while cluster.partition(topic, partition).is_some() {
        let log = final_log(cluster, topic, partition).await?;
        recorder.final_log(&key(topic, partition), log.log_start, log.records);
        partition += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_outcomes_follow_kafkas_error_semantics() {
        assert_eq!(produce_outcome(0, 10, 2), OpOutcome::Ok(Some(12)));
        assert_eq!(produce_outcome(0, -1, 2), OpOutcome::Ok(None));
        assert_eq!(produce_outcome(46, -1, 0), OpOutcome::Ok(None));
        assert!(produce_outcome(7, -1, 0).is_indeterminate());
        assert!(produce_outcome(20, -1, 0).is_indeterminate());
        assert_eq!(produce_outcome(19, -1, 0), OpOutcome::Failed("NotEnoughReplicas (19)".into()));
        assert!(
            produce_outcome(6, -1, 0).is_indeterminate(),
            "acks=all: answered after the append when leadership moved"
        );
        assert!(produce_outcome(10, -1, 0).is_failed(), "MESSAGE_TOO_LARGE: refused before appending");
    }

    #[test]
    fn a_base_offset_a_broker_sends_near_the_end_of_the_range_does_not_overflow() {
        assert_eq!(produce_outcome(0, i64::MAX, 0), OpOutcome::Ok(Some(i64::MAX as u64)));
        assert_eq!(produce_outcome(0, i64::MAX, 1), OpOutcome::Ok(Some(i64::MAX as u64 + 1)));
        assert_eq!(produce_outcome(0, i64::MAX, usize::MAX), OpOutcome::Ok(None), "past u64: no offset");
    }

    #[test]
    fn values_are_text_hex_or_null_without_collisions() {
        assert_eq!(value_of(Some(b"p1-7")), "p1-7");
        assert_eq!(value_of(Some(&[0xff, 0x00])), "0xff00");
        assert_eq!(value_of(Some(b"0xff00")), "0x307866663030");
        assert_eq!(value_of(None), "<null>");
        assert_eq!(value_of(Some(b"<null>")), "0x3c6e756c6c3e", "the text <null> is not a tombstone");
        assert_eq!(key("orders", 3), "orders-3");
    }
}
