//! openraft #883 (present in openraft 0.8.4, fixed in 0.8.6; 0.8.5 was yanked), the bug that
//! came back on openraft's main branch as #1246 (fixed there by PR #1247, in no published release).
//!
//! openraft lets a node that was leader when it stopped come back *as leader*, with no election,
//! when its vote (saved in the log store) is committed and names itself. A state machine kept in
//! memory is empty after a restart and is rebuilt by re-applying the committed part of the durable
//! log; what is committed is learnt again from a quorum (the log store need not save it). In
//! 0.8.4 the leader restored at startup sets its own replication progress to the end of its log
//! without asking whether that makes a quorum, so a leader that alone is a quorum (a one-node
//! cluster) never advances its commit index: nothing is re-applied, and the state machine stays
//! empty until the next write commits everything at once. openraft 0.8.6 (PR #884, "restore
//! replication progress when a leader starts up") updates the local progress through the path
//! that commits, so the restarted leader re-applies its whole log at once. On main, the
//! refactor of July 2024 (e69aea1c) moved the leader's self-progress into `Leader::new` and lost
//! that commit again: #1246, fixed by 681d04da (v0.10.0-alpha.7, a git tag only; crates.io's
//! 0.10 alphas start at alpha.14). The 0.9 line (0.9.0–0.9.25) has #884's code and not the
//! regression: 0.9.16 → 0.9.17 changes nothing here.
//!
//! Written as a user would have written it before the bug was known: a key-value service on
//! openraft, one or three nodes (`raft.nodes`), each serving Raft's RPCs and the clients' API over
//! HTTP (axum, served with `sim::node::serve`; the Raft network is a hyper client dialing from
//! the node's host). The log store (vote and entries) is a durable model held outside the node,
//! shared by its incarnations as a disk is; the state machine (a map) is in memory and lost on
//! every restart.
//! Writes go through `client_write` on the leader; reads are linearizable reads done the textbook
//! way (Raft dissertation §6.4): confirm leadership (`is_leader`), require that the commit index
//! holds an entry of the leader's term, wait until the state machine has applied up to it, read.
//! Clients put and get single keys; the swarm draws crashes, restarts and partitions of the nodes
//! and network faults. After the heal, the whole cluster loses power — every node crashes and
//! starts again — and every key is read.
//!
//! Oracles:
//! - `acked-writes-visible`: after the restart, every key is readable within a bound (elections,
//!   readiness and the client's timeouts), and a key with an acknowledged put is not empty;
//! - `linearizable`: the history of puts and gets, the final reads included, is linearizable
//!   (`sim::check::linearizable`, per key);
//! - the node lifecycle oracles (exit cause, drain, readiness, zombie and leak for the node's own
//!   tasks: openraft's are no node's, see below).
//!
//! On 0.8.4 every run of the one-node cluster fails `acked-writes-visible`: the restarted leader
//! answers every read "no entry of term 1 committed yet (commit index None)" until the bound runs
//! out (a read path that skipped the §6.4 check would instead return the empty map: a stale read).
//! With three nodes the restarted leader learns its commit index from a follower's answer on both
//! releases, so that shape is quiet on both: it shows the oracle does not fire on a healthy
//! restart. Measured (replay mode, seeds 0..300 per shape): 1 node 300/300 on 0.8.4, 0/300 on
//! 0.8.6; 3 nodes 0/300 on both; about 10 ms (1 node) and 40 ms (3 nodes) of wall time a seed.
//!
//! openraft 0.8 spawns its tasks with plain `tokio::spawn`, which the simulation can see but not
//! abort at a crash; the node therefore starts Raft from a task of no node and stops it itself —
//! after the drain at SIGTERM, from the crash's destructors at a crash — and its RPCs fail as soon
//! as Raft is down (`Gate`, `StopOnCrash`), so nothing of a node's Raft outlives the instant it
//! ended. openraft's timers (heartbeat, election, RPC timeouts, backoff) are tokio timers on the
//! run's paused clock; its randomness (`rand::thread_rng`, election timeouts) is seeded through
//! `getrandom`; it starts no thread.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use openraft::async_trait::async_trait;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::Adaptor;
use openraft::{
    BasicNode, Config, Entry, EntryPayload, LogId, LogState, RaftLogReader, RaftNetwork, RaftNetworkFactory,
    RaftSnapshotBuilder, RaftStorage, Snapshot, SnapshotMeta, SnapshotPolicy, StorageError, StorageIOError,
    StoredMembership, Vote,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sim::check::linearizable::{self, KvMap, KvOp, KvOut, Op};
use sim::node::CrashMode;
use sim::prelude::*;

/// After the restart, a key was not readable within the bound, or an acknowledged write was gone.
const ACKED_WRITES_VISIBLE: Oracle = Oracle::new("acked-writes-visible");

/// The keys clients write and read.
const KEYS: [&str; 3] = ["a", "b", "c"];
/// The client's timeout per request.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
/// Attempts of one operation (each after a redirect, a refused connection or a 503).
const ATTEMPTS: u32 = 6;
/// Pause between attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// How long a read waits on the node for its read index (a committed entry of the leader's
/// term, then the state machine applying up to it) before answering 503.
const READ_WAIT: Duration = Duration::from_millis(500);
/// Raft's timers (fake time): heartbeat and election timeout.
const HEARTBEAT_MS: u64 = 100;
const ELECTION_MIN_MS: u64 = 500;
const ELECTION_MAX_MS: u64 = 1000;
/// After the power cut, how long every key has to become readable: a few elections, the
/// replication backoff of an unreachable peer (500 ms), the read waits and the client timeouts.
const VISIBLE_WITHIN: Duration = Duration::from_secs(10);

fn main() {
    regression::main(Simulation::new("openraft-883"), scenario);
}

// ---------------------------------------------------------------------------------------------
// The service: openraft types, a durable log store, an in-memory state machine.

/// The one command: set a key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Put {
    key: String,
    value: String,
}

/// What applying a command answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Applied;

openraft::declare_raft_types!(
    /// The key-value store's Raft types.
    pub Kv: D = Put, R = Applied, NodeId = u64, Node = BasicNode, Entry = Entry<Kv>, SnapshotData = Cursor<Vec<u8>>
);

type NodeId = u64;
type KvRaft = openraft::Raft<Kv, Network, Adaptor<Kv, Store>, Adaptor<Kv, Store>>;

/// What survives a crash: the vote and the log (written before the call returns, as if fsynced).
#[derive(Default)]
pub struct Disk {
    vote: Option<Vote<NodeId>>,
    log: BTreeMap<u64, Entry<Kv>>,
    purged: Option<LogId<NodeId>>,
}

/// The state machine: in memory, a new one for every incarnation.
#[derive(Default)]
pub struct Machine {
    applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    data: BTreeMap<String, String>,
    snapshot: Option<(SnapshotMeta<NodeId, BasicNode>, Vec<u8>)>,
    snapshots: u64,
}

/// openraft's storage for one incarnation: the node's disk and this incarnation's machine.
#[derive(Clone)]
pub struct Store {
    disk: Arc<Mutex<Disk>>,
    machine: Arc<Mutex<Machine>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl RaftLogReader<Kv> for Store {
    async fn get_log_state(&mut self) -> Result<LogState<Kv>, StorageError<NodeId>> {
        let disk = lock(&self.disk);
        let last = disk.log.values().next_back().map(|e| e.log_id).or(disk.purged);
        Ok(LogState { last_purged_log_id: disk.purged, last_log_id: last })
    }

    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send + Sync>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<Kv>>, StorageError<NodeId>> {
        Ok(lock(&self.disk).log.range(range).map(|(_, e)| e.clone()).collect())
    }
}

#[async_trait]
impl RaftSnapshotBuilder<Kv> for Store {
    async fn build_snapshot(&mut self) -> Result<Snapshot<Kv>, StorageError<NodeId>> {
        let mut m = lock(&self.machine);
        let bytes = serde_json::to_vec(&m.data).map_err(|e| StorageIOError::read_state_machine(&e))?;
        m.snapshots += 1;
        let meta = SnapshotMeta {
            last_log_id: m.applied,
            last_membership: m.membership.clone(),
            snapshot_id: format!("{}-{}", m.applied.map_or(0, |l| l.index), m.snapshots),
        };
        m.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

#[async_trait]
impl RaftStorage<Kv> for Store {
    type LogReader = Store;
    type SnapshotBuilder = Store;

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        lock(&self.disk).vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(lock(&self.disk).vote)
    }

    async fn get_log_reader(&mut self) -> Store {
        self.clone()
    }

    async fn append_to_log<I>(&mut self, entries: I) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<Kv>> + Send,
    {
        let mut disk = lock(&self.disk);
        for entry in entries {
            disk.log.insert(entry.log_id.index, entry);
        }
        Ok(())
    }

    async fn delete_conflict_logs_since(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        lock(&self.disk).log.split_off(&log_id.index);
        Ok(())
    }

    async fn purge_logs_upto(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut disk = lock(&self.disk);
        let kept = disk.log.split_off(&(log_id.index + 1));
        disk.log = kept;
        disk.purged = Some(log_id);
        Ok(())
    }

    async fn last_applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>> {
        let m = lock(&self.machine);
        Ok((m.applied, m.membership.clone()))
    }

    async fn apply_to_state_machine(&mut self, entries: &[Entry<Kv>]) -> Result<Vec<Applied>, StorageError<NodeId>> {
        let mut m = lock(&self.machine);
        let mut answers = Vec::with_capacity(entries.len());
        for entry in entries {
            m.applied = Some(entry.log_id);
            match &entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(put) => {
                    m.data.insert(put.key.clone(), put.value.clone());
                }
                EntryPayload::Membership(members) => {
                    m.membership = StoredMembership::new(Some(entry.log_id), members.clone());
                }
            }
            answers.push(Applied);
        }
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Store {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let bytes = snapshot.into_inner();
        let data: BTreeMap<String, String> =
            serde_json::from_slice(&bytes).map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let mut m = lock(&self.machine);
        m.data = data;
        m.applied = meta.last_log_id;
        m.membership = meta.last_membership.clone();
        m.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<Kv>>, StorageError<NodeId>> {
        let m = lock(&self.machine);
        Ok(m.snapshot.clone().map(|(meta, bytes)| Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) }))
    }
}

// ---------------------------------------------------------------------------------------------
// The Raft network: JSON over HTTP, through the node's hyper client.

type HttpClient = hyper_util::client::legacy::Client<sim::net::adapters::Connector, Full<Bytes>>;

/// openraft's network factory: one [`Peer`] per target node.
pub struct Network {
    client: HttpClient,
    host: Host,
    gate: Arc<Gate>,
}

/// The connection to one peer.
pub struct Peer {
    client: HttpClient,
    host: Host,
    gate: Arc<Gate>,
    target: NodeId,
    addr: String,
}

#[async_trait]
impl RaftNetworkFactory<Kv> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer {
            client: self.client.clone(),
            host: self.host.clone(),
            gate: Arc::clone(&self.gate),
            target,
            addr: node.addr.clone(),
        }
    }
}

/// A transport failure of a Raft RPC, as an error openraft can carry.
#[derive(Debug)]
struct Transport(String);

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Transport {}

/// How an RPC's HTTP exchange ended: the body, or whether nothing was sent and why.
type Exchange = Result<Bytes, (bool, String)>;

/// Where an incarnation's RPCs wait for their answers, so that its end can answer them all.
///
/// openraft's tasks end by themselves once Raft is shut down and their RPCs answered. Each RPC's
/// exchange runs in a task of no node and hands its answer over through the gate: when the node's
/// host is gone (a crash), the answer is held until the gate closes — after Raft's shutdown — and
/// then every waiting RPC fails at once, and its stream, finding its core gone, ends. So no task of
/// Raft outlives the instant its node ended, as none would outlive the process.
#[derive(Default)]
pub struct Gate {
    waiting: Mutex<(bool, u64, BTreeMap<u64, tokio::sync::oneshot::Sender<Exchange>>)>,
}

impl Gate {
    /// Registers an RPC; `None` once closed.
    fn wait(&self) -> Option<(u64, tokio::sync::oneshot::Receiver<Exchange>)> {
        let mut g = lock(&self.waiting);
        if g.0 {
            return None;
        }
        g.1 += 1;
        let id = g.1;
        let (tx, rx) = tokio::sync::oneshot::channel();
        g.2.insert(id, tx);
        Some((id, rx))
    }

    /// Hands an exchange to its RPC, unless the node is gone and the gate still open.
    fn answer(&self, id: u64, host: &Host, exchange: Exchange) {
        let mut g = lock(&self.waiting);
        if !host.is_live() && !g.0 {
            return;
        }
        if let Some(tx) = g.2.remove(&id) {
            let _ = tx.send(exchange);
        }
    }

    /// Fails every waiting RPC, and every later one.
    fn close(&self) {
        let waiting = {
            let mut g = lock(&self.waiting);
            g.0 = true;
            std::mem::take(&mut g.2)
        };
        for (_, tx) in waiting {
            let _ = tx.send(Err((false, "the node stopped".into())));
        }
    }
}

impl Peer {
    /// POSTs `req` to `path` and reads the peer's `Result`.
    async fn call<Req, Resp, E>(&self, path: &str, req: &Req) -> Result<Resp, RPCError<NodeId, BasicNode, E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let request = http::Request::post(format!("http://{}{path}", self.addr))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let Some((id, answer)) = self.gate.wait() else {
            return Err(RPCError::Network(NetworkError::new(&Transport("the node stopped".into()))));
        };
        let (client, host, gate) = (self.client.clone(), self.host.clone(), Arc::clone(&self.gate));
        sim::spawn_detached(async move {
            let exchange = match client.request(request).await {
                Err(e) => Err((e.is_connect(), format!("{e:?}"))),
                Ok(response) => {
                    response.into_body().collect().await.map(|b| b.to_bytes()).map_err(|e| (false, e.to_string()))
                }
            };
            gate.answer(id, &host, exchange);
        });
        let bytes = match answer.await {
            Ok(Ok(bytes)) => bytes,
            // Nothing was sent: the peer is down. openraft backs off before it tries again.
            Ok(Err((true, e))) => return Err(RPCError::Unreachable(Unreachable::new(&Transport(e)))),
            Ok(Err((false, e))) => return Err(RPCError::Network(NetworkError::new(&Transport(e)))),
            Err(_) => return Err(RPCError::Network(NetworkError::new(&Transport("the node stopped".into())))),
        };
        let result: Result<Resp, E> =
            serde_json::from_slice(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

#[async_trait]
impl RaftNetwork<Kv> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Kv>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("/raft/append", &rpc).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<Kv>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        self.call("/raft/snapshot", &rpc).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("/raft/vote", &rpc).await
    }
}

// ---------------------------------------------------------------------------------------------
// A node: Raft plus its HTTP API.

/// What the handlers share.
#[derive(Clone)]
struct App {
    id: NodeId,
    raft: KvRaft,
    machine: Arc<Mutex<Machine>>,
}

/// The address of node `id` (its host is the replica `raft-<id>`).
fn addr(id: NodeId) -> String {
    format!("raft-{id}:8080")
}

/// One incarnation of a node: opens its disk, starts Raft (the first node bootstraps the
/// cluster when its disk is empty), serves, and on SIGTERM drains and shuts Raft down.
async fn raft_node(node: NodeCtx, disk: Arc<Mutex<Disk>>, cluster: u64) -> Result<(), BoxError> {
    let id = node.replica();
    let fresh = {
        let d = lock(&disk);
        d.vote.is_none() && d.log.is_empty()
    };
    let machine = Arc::new(Mutex::new(Machine::default()));
    let (log_store, state_machine) = Adaptor::new(Store { disk, machine: Arc::clone(&machine) });
    let config = Config {
        cluster_name: "kv".to_string(),
        heartbeat_interval: HEARTBEAT_MS,
        election_timeout_min: ELECTION_MIN_MS,
        election_timeout_max: ELECTION_MAX_MS,
        snapshot_policy: SnapshotPolicy::Never,
        ..Default::default()
    }
    .validate()?;
    let gate = Arc::new(Gate::default());
    // The RPCs' exchanges run in tasks of no node (see `Gate`), and so do their connections.
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(sim::net::adapters::Connector::new(node.host().clone()));
    let network = Network { client, host: node.host().clone(), gate: Arc::clone(&gate) };
    // openraft spawns its tasks (core, state machine worker, tick, replication streams, RPCs) with
    // plain `tokio::spawn`, where the simulation can see them but not abort them at a crash. They
    // are started from a task of no node, so they are no node's either, and this node stops them
    // itself: at SIGTERM after the drain, at a crash from the crash's destructors (`StopOnCrash`),
    // and their RPCs fail as soon as Raft is down (`Gate`).
    let raft = sim::spawn_detached(KvRaft::new(id, Arc::new(config), network, log_store, state_machine)).await??;
    if id == 0 && fresh {
        let members: BTreeMap<NodeId, BasicNode> = (0..cluster).map(|i| (i, BasicNode::new(addr(i)))).collect();
        raft.initialize(members).await?;
    }

    let mut stop_on_crash = StopOnCrash(Some((raft.clone(), Arc::clone(&gate))));

    let app = App { id, raft: raft.clone(), machine };
    let router = Router::new()
        .route("/raft/append", post(raft_append))
        .route("/raft/vote", post(raft_vote))
        .route("/raft/snapshot", post(raft_snapshot))
        .route("/kv/{key}", get(kv_get).put(kv_put))
        .with_state(app);
    let listener = node.host().listen("8080")?;
    node.set_ready();
    let served = sim::node::serve(&node, listener, router).await;
    stop_on_crash.0 = None;
    let _ = raft.shutdown().await;
    gate.close();
    // Let the streams that were waiting on an RPC see it fail and end, before the node returns.
    tokio::time::sleep(Duration::from_millis(1)).await;
    served
}

/// Stops openraft's tasks when a crash drops the node's futures (a crash runs destructors), from
/// a task of no node, at the crash's instant: Raft's shutdown (its core ends, its tick is
/// aborted), then the gate (the RPCs still waiting fail, and their streams end). Nothing of a
/// crash's meaning changes: the log store wrote through at each call, and shutting down writes
/// nothing; the state machine is dropped as the process's memory would be.
struct StopOnCrash(Option<(KvRaft, Arc<Gate>)>);

impl Drop for StopOnCrash {
    fn drop(&mut self) {
        if let Some((raft, gate)) = self.0.take() {
            sim::spawn_detached(async move {
                let _ = raft.shutdown().await;
                gate.close();
            });
        }
    }
}

async fn raft_append(State(app): State<App>, Json(rpc): Json<AppendEntriesRequest<Kv>>) -> Json<serde_json::Value> {
    Json(serde_json::json!(app.raft.append_entries(rpc).await))
}

async fn raft_vote(State(app): State<App>, Json(rpc): Json<VoteRequest<NodeId>>) -> Json<serde_json::Value> {
    Json(serde_json::json!(app.raft.vote(rpc).await))
}

async fn raft_snapshot(State(app): State<App>, Json(rpc): Json<InstallSnapshotRequest<Kv>>) -> Json<serde_json::Value> {
    Json(serde_json::json!(app.raft.install_snapshot(rpc).await))
}

/// 421: not the leader (the body names the leader it knows, if any). Nothing was done.
fn not_leader(app: &App) -> Response {
    let leader = app.raft.metrics().borrow().current_leader;
    (StatusCode::MISDIRECTED_REQUEST, Json(serde_json::json!({ "leader": leader }))).into_response()
}

/// `PUT /kv/{key}` with the value as the body: 200 once committed and applied; 421 when this
/// node is not the leader (not submitted); 503 when the write was submitted and its fate is
/// unknown (leadership lost meanwhile: it may still commit).
async fn kv_put(State(app): State<App>, Path(key): Path<String>, value: String) -> Response {
    if app.raft.metrics().borrow().current_leader != Some(app.id) {
        return not_leader(&app);
    }
    match app.raft.client_write(Put { key, value }).await {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("unknown: {e}")).into_response(),
    }
}

/// `GET /kv/{key}`: a linearizable read (read index). 200 with the value (JSON, `null` when
/// absent); 421 when this node is not the leader; 503 when the read index could not be served
/// within [`READ_WAIT`].
async fn kv_get(State(app): State<App>, Path(key): Path<String>) -> Response {
    if app.raft.is_leader().await.is_err() {
        return not_leader(&app);
    }
    // The read index: the commit index, once it holds an entry of this leader's term (before
    // that, entries of earlier terms may be committed that this leader does not know of yet).
    let deadline = tokio::time::Instant::now() + READ_WAIT;
    let read_index = loop {
        let term = app.raft.metrics().borrow().current_term;
        let (tx, rx) = tokio::sync::oneshot::channel();
        app.raft.external_request(move |state, _, _| {
            let _ = tx.send(state.committed);
        });
        let committed = rx.await.ok().flatten();
        if let Some(c) = committed
            && c.leader_id.term == term
        {
            break c;
        }
        if tokio::time::Instant::now() >= deadline {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("no entry of term {term} committed yet (commit index {committed:?})"),
            )
                .into_response();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let applied = app
        .raft
        .wait(Some(left.max(Duration::from_millis(1))))
        .metrics(|m| m.last_applied.map(|l| l.index) >= Some(read_index.index), "read index applied")
        .await;
    if let Err(e) = applied {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("read index {read_index} not applied: {e}")).into_response();
    }
    let value = lock(&app.machine).data.get(&key).cloned();
    (StatusCode::OK, Json(serde_json::json!(value))).into_response()
}

// ---------------------------------------------------------------------------------------------
// The clients.

/// The clients' model: what each operation asked.
#[derive(Default)]
struct Model {
    inputs: BTreeMap<u64, KvOp>,
}

/// One pooled HTTP client per client host.
#[derive(Default)]
struct Clients {
    map: Mutex<BTreeMap<String, HttpClient>>,
}

/// How one request ended.
enum Reply {
    Status(u16, Bytes),
    /// The connection was refused: nothing was sent.
    Unsent(String),
    /// Sent, and no answer (a reset, a timeout): its effect is unknown.
    Lost(String),
}

async fn request(ctx: &Ctx, host: &Host, method: http::Method, url: &str, body: Option<String>) -> Reply {
    let client = {
        let clients = ctx.extension::<Clients>();
        let mut map = lock(&clients.map);
        map.entry(host.name().to_string())
            .or_insert_with(|| {
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .timer(hyper_util::rt::TokioTimer::new())
                    .pool_timer(hyper_util::rt::TokioTimer::new())
                    .build(sim::net::adapters::Connector::new(host.clone()))
            })
            .clone()
    };
    let Ok(req) =
        http::Request::builder().method(method).uri(url).body(Full::new(body.map_or_else(Bytes::new, Bytes::from)))
    else {
        return Reply::Unsent("bad request".into());
    };
    let sent = async {
        let response = match client.request(req).await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Reply::Unsent(format!("{e:?}")),
            Err(e) => return Reply::Lost(format!("{e:?}")),
        };
        let status = response.status().as_u16();
        match response.into_body().collect().await {
            Ok(b) => Reply::Status(status, b.to_bytes()),
            Err(e) => Reply::Lost(e.to_string()),
        }
    };
    tokio::time::timeout(CLIENT_TIMEOUT, sent).await.unwrap_or_else(|_| Reply::Lost("client timeout".into()))
}

/// The node an attempt goes to: the leader last heard of, else the next one round the ring.
fn target(ctx: &Ctx, attempt: u32) -> NodeId {
    let model = ctx.extension::<Leader>();
    let (leader, nodes) = *lock(&model.0);
    leader.unwrap_or(attempt as u64 % nodes.max(1))
}

/// The leader the clients last heard of, and the cluster's size.
#[derive(Default)]
struct Leader(Mutex<(Option<NodeId>, u64)>);

fn heard(ctx: &Ctx, leader: Option<NodeId>, nodes_fallback: bool) {
    let l = ctx.extension::<Leader>();
    let mut g = lock(&l.0);
    if leader.is_some() || nodes_fallback {
        g.0 = leader;
    }
}

fn leader_hint(body: &Bytes) -> Option<NodeId> {
    serde_json::from_slice::<serde_json::Value>(body).ok().and_then(|v| v["leader"].as_u64())
}

/// Puts `value` at `key`: retries where nothing was done (421, a refused connection), and gives
/// up as indeterminate once an attempt may have taken effect.
async fn put_value(ctx: &Ctx, host: &Host, key: &str, value: &str) -> OpOutcome {
    let mut last = String::from("no attempt");
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
        let node = target(ctx, attempt);
        let url = format!("http://{}/kv/{key}", addr(node));
        match request(ctx, host, http::Method::PUT, &url, Some(value.to_string())).await {
            Reply::Status(200, _) => {
                heard(ctx, Some(node), false);
                return OpOutcome::Ok("put".into());
            }
            Reply::Status(421, body) => {
                let hint = leader_hint(&body).filter(|l| *l != node);
                heard(ctx, hint, true);
                last = format!("raft-{node}: not the leader");
            }
            Reply::Unsent(e) => {
                heard(ctx, None, true);
                last = format!("raft-{node}: {e}");
            }
            Reply::Status(status, body) => {
                heard(ctx, None, true);
                return OpOutcome::Indeterminate(format!("raft-{node}: {status} {}", String::from_utf8_lossy(&body)));
            }
            Reply::Lost(e) => {
                heard(ctx, None, true);
                return OpOutcome::Indeterminate(format!("raft-{node}: {e}"));
            }
        }
    }
    OpOutcome::Failed(format!("no leader took it: {last}"))
}

/// Reads `key`: any refusal is retried (a read changes nothing); `Ok("none")` or `Ok("=<v>")`.
async fn get_value(ctx: &Ctx, host: &Host, key: &str) -> OpOutcome {
    let mut last = String::from("no attempt");
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
        let node = target(ctx, attempt);
        let url = format!("http://{}/kv/{key}", addr(node));
        match request(ctx, host, http::Method::GET, &url, None).await {
            Reply::Status(200, body) => {
                heard(ctx, Some(node), false);
                return match serde_json::from_slice::<Option<String>>(&body) {
                    Ok(None) => OpOutcome::Ok("none".into()),
                    Ok(Some(v)) => OpOutcome::Ok(format!("={v}")),
                    Err(e) => OpOutcome::Indeterminate(format!("unreadable answer: {e}")),
                };
            }
            Reply::Status(421, body) => {
                let hint = leader_hint(&body).filter(|l| *l != node);
                heard(ctx, hint, true);
                last = format!("raft-{node}: not the leader");
            }
            Reply::Status(status, body) => {
                heard(ctx, None, true);
                last = format!("raft-{node}: {status} {}", String::from_utf8_lossy(&body));
            }
            Reply::Unsent(e) | Reply::Lost(e) => {
                heard(ctx, None, true);
                last = format!("raft-{node}: {e}");
            }
        }
    }
    OpOutcome::Indeterminate(last)
}

async fn put_op(mut op: OpCtx<Model>) -> OpOutcome {
    let key = *op.source().choose(&KEYS).unwrap_or(&"a");
    let value = format!("v{}", op.id());
    op.model().inputs.insert(op.id(), KvOp::put(key, &value));
    op.request(format!("PUT /kv/{key} {value}"));
    put_value(op.ctx(), op.host(), key, &value).await
}

async fn get_op(mut op: OpCtx<Model>) -> OpOutcome {
    let key = *op.source().choose(&KEYS).unwrap_or(&"a");
    op.model().inputs.insert(op.id(), KvOp::get(key));
    op.request(format!("GET /kv/{key}"));
    get_value(op.ctx(), op.host(), key).await
}

/// One operation of the history the checker reads.
fn history_op(client: &str, call: Duration, ret: Duration, input: KvOp, outcome: &OpOutcome) -> Op<KvOp, KvOut> {
    let is_get = matches!(input.command, linearizable::KvCommand::Get);
    match outcome {
        OpOutcome::Ok(v) if is_get => {
            let value = v.strip_prefix('=');
            Op::ok(client, call, ret, input, KvOut::value(value))
        }
        OpOutcome::Ok(_) => Op::ok(client, call, ret, input, KvOut::Done),
        OpOutcome::Failed(_) => Op::failed(client, call, input),
        OpOutcome::Indeterminate(_) => Op::unknown(client, call, input),
    }
}

// ---------------------------------------------------------------------------------------------
// The run.

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let nodes: u64 = ctx.swarm().choice("raft.nodes", &["1", "3"]).parse().unwrap_or(1);
    *lock(&ctx.extension::<Leader>().0) = (None, nodes);

    let disks: Arc<Vec<Arc<Mutex<Disk>>>> = Arc::new((0..nodes).map(|_| Arc::default()).collect());
    let system = System::new(&ctx);
    let d = Arc::clone(&disks);
    let names = system.add(
        ServiceSpec::new("raft", move |node: NodeCtx| {
            let disk = Arc::clone(&d[node.replica() as usize]);
            raft_node(node, disk, nodes)
        })
        .replicas(nodes..=nodes)
        .grace(Duration::from_secs(5)),
    );
    system.start().await?;

    let window = Duration::from_secs(10);
    let start = ctx.elapsed();
    system.schedule_lifecycle(start + Duration::from_millis(500)..start + window);
    Nemesis::new(&names, start + Duration::from_millis(500)..start + window)
        .longest(Duration::from_secs(2))
        .schedule(&ctx);

    let clients =
        Workload::new(Model::default()).op(Operation::new("put", 3, put_op)).op(Operation::new("get", 2, get_op));
    let ops = ctx.swarm().int("workload.ops", 10..=40);
    let records = clients.run(&ctx, Budget { ops, window, drain: Duration::from_secs(20) }).await;
    ctx.record("workload.done", "clients", format!("{:?}", sim::workload::tally(&records)));

    system.heal().await?;

    // The power cut: every node crashes, then every node starts again.
    for name in &names {
        system.crash(name, CrashMode::Seeded).await?;
    }
    for name in &names {
        system.apply(Lifecycle::Start { node: name.clone() }).await?;
    }

    // Every key, read until answered, within the bound.
    let reader = ctx.net().host("client-final");
    let restarted = ctx.elapsed();
    let mut finals = Vec::new();
    for key in KEYS {
        loop {
            let call = ctx.elapsed();
            let outcome = get_value(&ctx, &reader, key).await;
            let ret = ctx.elapsed();
            ctx.record("final.read", key, format!("{outcome:?}"));
            match outcome {
                OpOutcome::Ok(_) => {
                    finals.push((call, ret, key, outcome));
                    break;
                }
                other if ctx.elapsed() - restarted >= VISIBLE_WITHIN => {
                    let _ = system.stop().await;
                    return Err(Failure::liveness(
                        ACKED_WRITES_VISIBLE,
                        format!(
                            "after every node restarted, key {key:?} was not readable within {VISIBLE_WITHIN:?}: \
                             last answer {other:?}"
                        ),
                    ));
                }
                _ => tokio::time::sleep(RETRY_PAUSE).await,
            }
        }
    }
    system.stop().await?;

    let inputs = std::mem::take(&mut clients.model().inputs);
    let mut history = Vec::new();
    for r in &records {
        if let Some(input) = inputs.get(&r.id) {
            history.push(history_op(&r.client, r.started, r.ended, input.clone(), &r.outcome));
        }
    }
    for (call, ret, key, outcome) in &finals {
        let acked: Vec<&str> = records
            .iter()
            .filter(|r| matches!(r.outcome, OpOutcome::Ok(_)))
            .filter_map(|r| inputs.get(&r.id))
            .filter(|i| i.key == *key)
            .filter_map(|i| match &i.command {
                linearizable::KvCommand::Put(v) => Some(&**v),
                _ => None,
            })
            .collect();
        if matches!(outcome, OpOutcome::Ok(v) if v == "none") && !acked.is_empty() {
            return Err(Failure::correctness(
                ACKED_WRITES_VISIBLE,
                format!(
                    "after every node restarted, key {key:?} read empty, but {} put(s) on it were acknowledged ({})",
                    acked.len(),
                    acked.join(", ")
                ),
            ));
        }
        history.push(history_op("client-final", *call, *ret, KvOp::get(key), outcome));
    }
    linearizable::verify(&KvMap, &history)
}
