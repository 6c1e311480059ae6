//! Serving: the simulated listeners, one connection's loop (faults on whole requests), and
//! dispatching a request to its handler.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use tokio::io::{AsyncRead, AsyncWrite};

use super::cluster::{Cluster, SIM_PORT};
use crate::codec::{self, Decoded, DecodedRequest, RequestBody, ResponseBody};
use crate::faults::{FaultAction, Part};
use crate::groups;

/// What a request turned into.
pub(super) enum Outcome {
    Reply(ResponseBody),
    NoReply,
    /// Close the connection without an answer, saying why.
    Close(String),
}

impl Cluster {
    /// Serves the cluster on the run's simulated network: broker `i` listens on host
    /// `<prefix>-<i>` port [`SIM_PORT`], and the cluster records into the run's history.
    /// Returns the bootstrap servers (`kafka-0:9092,…`).
    ///
    /// # Errors
    /// The listen error of a broker's host (`EADDRINUSE` if something listens there already).
    pub fn serve_sim(&self, ctx: &sim::Ctx) -> std::io::Result<String> {
        *self.inner.ctx.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx.clone());
        for id in self.broker_ids() {
            let host_name = format!("{}-{id}", self.inner.config.host_prefix);
            self.set_advertised(id, &host_name, SIM_PORT);
            let host = ctx.net().host(&host_name);
            let first = host.listen(&SIM_PORT.to_string())?;
            let cluster = self.clone();
            tokio::spawn(async move {
                let mut listener = Some(first);
                let mut up = cluster.inner_up(id);
                loop {
                    let Some(l) = listener.take() else {
                        if up.wait_for(|u| *u).await.is_err() {
                            return;
                        }
                        match host.listen(&SIM_PORT.to_string()) {
                            Ok(l) => listener = Some(l),
                            Err(e) => {
                                cluster.record("kafka.broker.listen", &format!("broker-{id}"), e.to_string());
                                return;
                            }
                        }
                        continue;
                    };
                    loop {
                        tokio::select! {
                            biased;
                            _ = up.wait_for(|u| !*u) => break,
                            accepted = l.accept() => match accepted {
                                Ok((stream, _)) => {
                                    let c = cluster.clone();
                                    tokio::spawn(async move { c.serve_connection(id, stream).await });
                                }
                                Err(_) => break,
                            },
                        }
                    }
                    drop(l);
                    if up.wait_for(|u| !*u).await.is_err() {
                        return;
                    }
                }
            });
        }
        Ok(self.bootstrap_servers())
    }

    /// Serves one connection as broker `broker` until the peer closes it, the broker goes down,
    /// a fault drops it, or a request cannot be decoded (that connection closes; others go on).
    /// Transport-agnostic: the simulated network, real sockets and in-memory pipes all work.
    pub async fn serve_connection<S>(&self, broker: i32, stream: S)
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let conn = self.inner.next_conn.fetch_add(1, Ordering::Relaxed);
        let Some(up) = self.inner.up.get(broker as usize) else { return };
        let mut up = up.subscribe();
        if !*up.borrow() {
            return;
        }
        let (mut rd, mut wr) = tokio::io::split(stream);
        let why = tokio::select! {
            biased;
            _ = up.wait_for(|u| !*u) => "broker down".to_string(),
            why = self.connection_loop(broker, conn, &mut rd, &mut wr) => why,
        };
        if why != "closed by the client" {
            self.record("kafka.conn.close", &format!("broker-{broker}/conn#{conn}"), why);
        }
    }

    /// Serves `input` as one connection's incoming bytes, then EOF, and returns what the broker
    /// wrote back before closing the connection: for fuzzing and tests of malformed input.
    /// Runs on the caller's tokio runtime (use a paused clock: a delayed or silent answer then
    /// costs no wall time; a request that would be answered after `timeout` of tokio time is cut
    /// off there).
    pub async fn feed_bytes(&self, broker: i32, input: &[u8], timeout: Duration) -> Vec<u8> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let input = input.to_vec();
        let serve = self.serve_connection(broker, server);
        let talk = async move {
            let (mut rd, mut wr) = tokio::io::split(&mut client);
            let write = async {
                let _ = wr.write_all(&input).await;
                let _ = wr.shutdown().await;
            };
            let mut out = Vec::new();
            let read = rd.read_to_end(&mut out);
            let _ = tokio::join!(write, read);
            out
        };
        let mut out = Vec::new();
        let _ = tokio::time::timeout(timeout, async {
            let ((), bytes) = tokio::join!(serve, talk);
            out = bytes;
        })
        .await;
        out
    }

    async fn connection_loop<R, W>(&self, broker: i32, conn: u64, rd: &mut R, wr: &mut W) -> String
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        loop {
            let frame = match codec::read_frame(rd, codec::REQUEST_BYTES_MAX).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return "closed by the client".to_string(),
                Err(e) => return format!("bad frame: {e}"),
            };
            let request = match codec::decode_request(frame) {
                Ok(Decoded::Request(r)) => *r,
                Ok(Decoded::ApiVersionsTooNew { correlation_id }) => {
                    let body = ResponseBody::ApiVersions(codec::api_versions_response(E::UnsupportedVersion.code()));
                    match codec::encode_response(correlation_id, 0, &body) {
                        Ok(bytes) if codec::write_frame(wr, &bytes).await.is_ok() => continue,
                        _ => return "write failed".to_string(),
                    }
                }
                Err(e) => return format!("undecodable request: {e}"),
            };
            let (api, version, correlation) =
                (request.api_key, request.header.request_api_version, request.header.correlation_id);
            let action = {
                let st = self.lock();
                st.faults
                    .first(api, broker, parts(&request))
                    .filter(|f| !matches!(f.action, FaultAction::Error(_)))
                    .map(|f| (f.action.clone(), f.to_string()))
            };
            let identity = format!("broker-{broker}/conn#{conn}");
            let mut drop_after = false;
            if let Some((action, text)) = action {
                self.record("kafka.fault.hit", &identity, &text);
                match action {
                    FaultAction::Delay(d) => tokio::time::sleep(d).await,
                    FaultAction::DropConnection => return format!("fault: {text}"),
                    FaultAction::Silence => std::future::pending::<()>().await,
                    FaultAction::ApplyThenDrop => drop_after = true,
                    FaultAction::Error(_) => {}
                }
            }
            let outcome = self.handle(broker, request).await;
            if drop_after {
                return "fault: applied, response dropped".to_string();
            }
            match outcome {
                Outcome::NoReply => {}
                Outcome::Close(why) => return why,
                Outcome::Reply(body) => match codec::encode_response(correlation, version, &body) {
                    Ok(bytes) => {
                        if let Err(e) = codec::write_frame(wr, &bytes).await {
                            return format!("write failed: {e}");
                        }
                    }
                    Err(e) => return format!("cannot encode {api:?} v{version} response: {e}"),
                },
            }
        }
    }

    /// Handles one decoded request.
    async fn handle(&self, broker: i32, request: DecodedRequest) -> Outcome {
        let version = request.header.request_api_version;
        let client_id = request.header.client_id.as_deref().unwrap_or_default().to_string();
        let reply = match request.body {
            RequestBody::ApiVersions(r) if version >= 3 && !codec::client_software_valid(&r) => {
                // Apache Kafka's ApiVersionsRequest.isValid: v3+ names the client's software.
                ResponseBody::ApiVersions(ApiVersionsResponse::default().with_error_code(E::InvalidRequest.code()))
            }
            RequestBody::ApiVersions(_) => ResponseBody::ApiVersions(codec::api_versions_response(0)),
            RequestBody::Metadata(r) => ResponseBody::Metadata(self.metadata(broker, version, &r)),
            RequestBody::CreateTopics(r) => ResponseBody::CreateTopics(self.create_topics(broker, version, &r)),
            RequestBody::DeleteTopics(r) => ResponseBody::DeleteTopics(self.delete_topics(broker, version, &r)),
            RequestBody::Produce(r) => return self.produce(broker, version, &r),
            RequestBody::Fetch(r) => ResponseBody::Fetch(self.fetch(broker, version, &r).await),
            RequestBody::ListOffsets(r) => ResponseBody::ListOffsets(self.list_offsets(broker, version, &r)),
            RequestBody::InitProducerId(r) => ResponseBody::InitProducerId(self.init_producer_id(broker, version, &r)),
            RequestBody::AddPartitionsToTxn(r) => {
                ResponseBody::AddPartitionsToTxn(self.add_partitions_to_txn(broker, version, &r))
            }
            RequestBody::AddOffsetsToTxn(r) => {
                ResponseBody::AddOffsetsToTxn(self.add_offsets_to_txn(broker, version, &r))
            }
            RequestBody::EndTxn(r) => ResponseBody::EndTxn(self.end_txn(broker, version, &r)),
            RequestBody::TxnOffsetCommit(r) => {
                ResponseBody::TxnOffsetCommit(self.txn_offset_commit(broker, version, &r))
            }
            RequestBody::FindCoordinator(r) => {
                ResponseBody::FindCoordinator(self.find_coordinator(broker, version, &r))
            }
            RequestBody::JoinGroup(r) => {
                ResponseBody::JoinGroup(groups::join(self, broker, &client_id, version, r).await)
            }
            RequestBody::SyncGroup(r) => ResponseBody::SyncGroup(groups::sync(self, broker, version, r).await),
            RequestBody::Heartbeat(r) => ResponseBody::Heartbeat(self.groups(|c, env| c.heartbeat(env, broker, &r))),
            RequestBody::LeaveGroup(r) => {
                ResponseBody::LeaveGroup(self.groups(|c, env| c.leave(env, broker, version, &r)))
            }
            RequestBody::OffsetCommit(r) => {
                ResponseBody::OffsetCommit(self.groups(|c, env| c.commit(env, broker, version, &r)))
            }
            RequestBody::OffsetFetch(r) => {
                ResponseBody::OffsetFetch(self.groups(|c, env| c.fetch_offsets(env, broker, version, &r)))
            }
            RequestBody::DescribeGroups(r) => {
                ResponseBody::DescribeGroups(self.groups(|c, env| c.describe(env, broker, &r)))
            }
            RequestBody::ListGroups(r) => {
                ResponseBody::ListGroups(self.groups(|c, env| c.list(env, broker, version, &r)))
            }
            RequestBody::DescribeConfigs(r) => ResponseBody::DescribeConfigs(self.describe_configs(version, &r)),
            RequestBody::AlterConfigs(r) => ResponseBody::AlterConfigs(self.alter_configs(&r)),
            RequestBody::IncrementalAlterConfigs(r) => {
                ResponseBody::IncrementalAlterConfigs(self.incremental_alter_configs(&r))
            }
        };
        Outcome::Reply(reply)
    }
}

/// The parts of a request faults select on: its topic partitions and its group.
fn parts(request: &DecodedRequest) -> Vec<Part<'_>> {
    fn topic_parts(t: &str, ps: Vec<i32>) -> Vec<Part<'_>> {
        ps.into_iter().map(|p| Part { topic: Some(t), partition: Some(p), group: None }).collect()
    }
    fn group(g: &str) -> Vec<Part<'_>> {
        vec![Part { group: Some(g), ..Part::default() }]
    }
    let mut out: Vec<Part<'_>> = match &request.body {
        RequestBody::Produce(r) => r
            .topic_data
            .iter()
            .flat_map(|t| topic_parts(t.name.0.as_str(), t.partition_data.iter().map(|p| p.index).collect()))
            .collect(),
        RequestBody::Fetch(r) => r
            .topics
            .iter()
            .flat_map(|t| topic_parts(t.topic.0.as_str(), t.partitions.iter().map(|p| p.partition).collect()))
            .collect(),
        RequestBody::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| topic_parts(t.name.0.as_str(), t.partitions.iter().map(|p| p.partition_index).collect()))
            .collect(),
        RequestBody::Metadata(r) => r
            .topics
            .iter()
            .flatten()
            .filter_map(|t| t.name.as_ref())
            .map(|n| Part { topic: Some(n.0.as_str()), ..Part::default() })
            .collect(),
        RequestBody::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| Part {
                    topic: Some(t.name.0.as_str()),
                    partition: Some(p.partition_index),
                    group: Some(r.group_id.0.as_str()),
                })
            })
            .collect(),
        RequestBody::OffsetFetch(r) => group(r.group_id.0.as_str()),
        RequestBody::JoinGroup(r) => group(r.group_id.0.as_str()),
        RequestBody::SyncGroup(r) => group(r.group_id.0.as_str()),
        RequestBody::Heartbeat(r) => group(r.group_id.0.as_str()),
        RequestBody::LeaveGroup(r) => group(r.group_id.0.as_str()),
        RequestBody::DescribeGroups(r) => {
            r.groups.iter().map(|g| Part { group: Some(g.0.as_str()), ..Part::default() }).collect()
        }
        RequestBody::FindCoordinator(r) => group(r.key.as_str()),
        // The transaction coordinator's requests select on their transactional id as the group.
        RequestBody::InitProducerId(r) => r.transactional_id.as_ref().map_or_else(Vec::new, |t| group(t.0.as_str())),
        RequestBody::AddPartitionsToTxn(r) => group(r.v3_and_below_transactional_id.0.as_str()),
        RequestBody::AddOffsetsToTxn(r) => group(r.transactional_id.0.as_str()),
        RequestBody::EndTxn(r) => group(r.transactional_id.0.as_str()),
        RequestBody::TxnOffsetCommit(r) => group(r.group_id.0.as_str()),
        _ => Vec::new(),
    };
    out.push(Part::default());
    out
}
