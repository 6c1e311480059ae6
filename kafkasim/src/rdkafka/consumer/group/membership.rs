//! The group task's state machine (librdkafka `rdkafka_cgrp.c`, classic protocol): one request
//! to the coordinator at a time, chosen in this order — queued commits and lookups (in command
//! order), a pending LeaveGroup, then the membership step (JoinGroup, the leader's Metadata,
//! SyncGroup, or a due Heartbeat). Timers: the heartbeat interval, the session timeout
//! (no successful heartbeat for `session.timeout.ms`: the assignment is lost and the member
//! rejoins with a new member id) and `max.poll.interval.ms` (KIP-62).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    MetadataResponse, OffsetCommitResponse, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
    join_group_request, leave_group_request, sync_group_request,
};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::rdkafka::consumer::RebalanceProtocol;
use crate::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use crate::rdkafka::net::Dialer;
use crate::rdkafka::producer::metadata::{METADATA_VERSION, Metadata, TopicState};
use crate::requests::string;

use super::assignor::{self, Member, Strategy};
use super::commits::{self, Job, OFFSET_COMMIT_VERSION, OFFSET_FETCH_VERSION};
use super::coordinator::{self, Conn, coordinator_error};
use super::{GroupCommand, GroupEvent, GroupSettings, Shared, Tp};

/// The JoinGroup version sent: librdkafka 2.12's (it asks up to 5): v4 has KIP-394's
/// `MEMBER_ID_REQUIRED` round, v5 `group.instance.id` (KIP-345). kafkasim serves 0–9, Apache
/// Kafka 4.x 2–9.
pub(crate) const JOIN_GROUP_VERSION: i16 = 5;
/// The SyncGroup version sent: librdkafka's 3 (`group.instance.id`); kafkasim and Kafka 4.x
/// serve 0–5.
pub(crate) const SYNC_GROUP_VERSION: i16 = 3;
/// The Heartbeat version sent: librdkafka's 3 (`group.instance.id`); both serve 0–4.
pub(crate) const HEARTBEAT_VERSION: i16 = 3;
/// The LeaveGroup version sent: 3, the first with member identities (KIP-345), so a leave
/// names the member it is for (librdkafka sends v1, one member id; kafkasim and Kafka 4.x
/// serve 0–5).
pub(crate) const LEAVE_GROUP_VERSION: i16 = 3;
/// How long a failed JoinGroup waits before the next (librdkafka's `rkcg_join_intvl`, 1 s).
const JOIN_BACKOFF: Duration = Duration::from_secs(1);
/// What a JoinGroup may take on top of the rebalance timeout (librdkafka adds 3 s).
const JOIN_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug)]
enum Phase {
    /// Not subscribed (or fatal, or closing).
    Idle,
    /// A JoinGroup is due.
    Join,
    /// The leader needs the subscribed topics' partitions.
    Metadata(Vec<Member>),
    /// A SyncGroup is due (the leader's with the assignments).
    Sync(Vec<(String, Bytes)>),
    /// A member of the generation.
    Steady,
}

enum Done {
    Found(Result<(i32, String), Code>),
    Join(Option<Conn>, Result<JoinGroupResponse, Code>),
    Metadata(Option<Conn>, Result<MetadataResponse, Code>),
    Sync(Option<Conn>, Result<SyncGroupResponse, Code>),
    Heartbeat(Option<Conn>, i32, Result<HeartbeatResponse, Code>),
    Leave(Option<Conn>),
    Commit(Option<Conn>, Queued, i32, Result<OffsetCommitResponse, Code>),
    Committed(Option<Conn>, Queued, Result<OffsetFetchResponse, Code>),
}

#[derive(Debug)]
struct Queued {
    job: Job,
    /// Waiting for a coordinator past this fails it (`socket.timeout.ms` after it was queued).
    deadline: Instant,
    /// A retry waits until then.
    not_before: Option<Instant>,
}

/// The task.
pub(crate) struct Group {
    s: GroupSettings,
    dialer: Dialer,
    rx: mpsc::UnboundedReceiver<GroupCommand>,
    rx_closed: bool,
    events: mpsc::UnboundedSender<GroupEvent>,
    shared: Arc<Mutex<Shared>>,
    tasks: JoinSet<Done>,
    /// A JoinGroup, Metadata or SyncGroup is in flight (the session check waits).
    joining: bool,
    coord: Option<(i32, String)>,
    conn: Option<Conn>,
    coord_retry_at: Option<Instant>,
    bootstrap_next: usize,
    brokers: Metadata,
    subscription: Vec<String>,
    member_id: String,
    generation: i32,
    protocol: Option<Strategy>,
    /// The group assignment; `None` once revoked or lost (nothing to revoke).
    assignment: Option<BTreeSet<Tp>>,
    phase: Phase,
    awaiting_done: usize,
    join_retry_at: Option<Instant>,
    jobs: VecDeque<Queued>,
    next_heartbeat: Instant,
    last_heartbeat_ok: Instant,
    last_poll: Instant,
    in_poll: bool,
    max_poll_exceeded: bool,
    /// A LeaveGroup to send for this member id.
    leave: Option<String>,
    closing: bool,
    close_reply: Option<tokio::sync::oneshot::Sender<()>>,
    close_deadline: Option<Instant>,
    fatal: bool,
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl Group {
    pub(crate) fn new(
        s: GroupSettings,
        dialer: Dialer,
        rx: mpsc::UnboundedReceiver<GroupCommand>,
        events: mpsc::UnboundedSender<GroupEvent>,
        shared: Arc<Mutex<Shared>>,
    ) -> Group {
        let now = Instant::now();
        Group {
            s,
            dialer,
            rx,
            rx_closed: false,
            events,
            shared,
            tasks: JoinSet::new(),
            joining: false,
            coord: None,
            conn: None,
            coord_retry_at: None,
            bootstrap_next: 0,
            brokers: Metadata::default(),
            subscription: Vec::new(),
            member_id: String::new(),
            generation: -1,
            protocol: None,
            assignment: None,
            phase: Phase::Idle,
            awaiting_done: 0,
            join_retry_at: None,
            jobs: VecDeque::new(),
            next_heartbeat: now,
            last_heartbeat_ok: now,
            last_poll: now,
            in_poll: false,
            max_poll_exceeded: false,
            leave: None,
            closing: false,
            close_reply: None,
            close_deadline: None,
            fatal: false,
        }
    }

    pub(crate) async fn run(mut self) {
        loop {
            let now = Instant::now();
            self.check_timers(now);
            if self.tasks.is_empty() {
                self.start(now);
            }
            if self.closing && self.tasks.is_empty() && self.jobs.is_empty() && self.leave.is_none() {
                if let Some(tx) = self.close_reply.take() {
                    let _ = tx.send(());
                }
                return;
            }
            let wake = self.next_wake(now);
            tokio::select! {
                biased;
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => match done {
                    Ok(done) => self.done(done, Instant::now()),
                    Err(e) => panic!("a kafkasim::rdkafka group request task failed: {e}"),
                },
                cmd = self.rx.recv(), if !self.rx_closed => match cmd {
                    Some(cmd) => self.command(cmd, Instant::now()),
                    None => {
                        // The consumer was dropped: close as rd_kafka_destroy does.
                        self.rx_closed = true;
                        self.close(Instant::now());
                    }
                },
                () = sleep_until(wake) => {}
            }
        }
    }

    fn cooperative(&self) -> bool {
        self.s.strategies.first().is_some_and(|s| s.cooperative())
    }

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        if self.cooperative() { RebalanceProtocol::Cooperative } else { RebalanceProtocol::Eager }
    }

    fn publish(&self) {
        let mut s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        s.member_id = self.member_id.clone();
        s.generation = self.generation;
        s.protocol = if self.protocol.is_some() && self.generation >= 0 {
            self.rebalance_protocol()
        } else {
            RebalanceProtocol::None
        };
    }

    fn emit(&mut self, event: GroupEvent) {
        if matches!(event, GroupEvent::Assign { .. } | GroupEvent::Revoke { .. } | GroupEvent::Lost { .. }) {
            self.awaiting_done += 1;
        }
        if self.events.send(event).is_err() {
            // Nobody will answer: do not wait for it.
            self.awaiting_done = 0;
        }
    }

    fn subscribed(&self) -> bool {
        !self.subscription.is_empty() && !self.fatal && !self.closing
    }

    fn command(&mut self, cmd: GroupCommand, now: Instant) {
        match cmd {
            GroupCommand::Subscribe(topics) => self.subscribe(topics),
            GroupCommand::RebalanceDone => self.awaiting_done = self.awaiting_done.saturating_sub(1),
            GroupCommand::Polled => self.polled(now),
            GroupCommand::InPoll(active) => {
                self.in_poll = active;
                self.polled(now);
            }
            GroupCommand::Commit { offsets, reply } => {
                self.queue(Job::Commit { offsets, reply, attempts: 0 }, now);
            }
            GroupCommand::Committed { partitions, reply } => {
                self.queue(Job::Committed { partitions, reply, attempts: 0 }, now);
            }
            GroupCommand::Close(reply) => {
                self.close_reply = Some(reply);
                self.close(now);
            }
        }
    }

    fn queue(&mut self, job: Job, now: Instant) {
        if self.fatal {
            return job.fail(Code::Fatal);
        }
        self.jobs.push_back(Queued { job, deadline: now + self.s.socket_timeout, not_before: None });
    }

    fn polled(&mut self, now: Instant) {
        self.last_poll = now;
        if self.max_poll_exceeded {
            self.max_poll_exceeded = false;
            self.join_retry_at = None;
        }
    }

    fn close(&mut self, now: Instant) {
        if self.closing {
            return;
        }
        self.closing = true;
        self.close_deadline = Some(now + self.s.socket_timeout);
        if !self.member_id.is_empty() && self.s.instance_id.is_none() {
            self.leave = Some(self.member_id.clone());
        }
        self.phase = Phase::Idle;
    }

    fn subscribe(&mut self, mut topics: Vec<String>) {
        topics.sort();
        topics.dedup();
        if topics == self.subscription || self.fatal || self.closing {
            return;
        }
        let protocol = self.rebalance_protocol();
        if topics.is_empty() {
            // Unsubscribe: revoke everything, then leave (librdkafka leaves on unassign done).
            if let Some(all) = self.assignment.take() {
                self.emit(GroupEvent::Revoke { partitions: all.into_iter().collect(), protocol });
            }
            if !self.member_id.is_empty() {
                self.leave = Some(self.member_id.clone());
            }
            self.subscription.clear();
            self.phase = Phase::Idle;
            return;
        }
        let was_idle = matches!(self.phase, Phase::Idle);
        self.subscription = topics;
        if was_idle {
            self.phase = Phase::Join;
            return;
        }
        if self.cooperative() {
            let gone: Vec<Tp> =
                self.assignment.iter().flatten().filter(|tp| !self.subscription.contains(&tp.0)).cloned().collect();
            if !gone.is_empty() {
                if let Some(a) = self.assignment.as_mut() {
                    a.retain(|tp| !gone.contains(tp));
                }
                self.emit(GroupEvent::Revoke { partitions: gone, protocol });
            }
            self.phase = Phase::Join;
        } else {
            self.rejoin();
        }
    }

    /// The group is rebalancing: eager revokes everything first, cooperative keeps it.
    fn rejoin(&mut self) {
        if !self.cooperative()
            && let Some(all) = self.assignment.take()
        {
            let protocol = RebalanceProtocol::Eager;
            self.emit(GroupEvent::Revoke { partitions: all.into_iter().collect(), protocol });
        }
        if self.subscribed() {
            self.phase = Phase::Join;
        }
    }

    /// The assignment is lost (librdkafka's `rd_kafka_cgrp_revoke_all_rejoin_maybe(lost)`).
    fn lose_and_rejoin(&mut self) {
        if let Some(all) = self.assignment.take() {
            self.emit(GroupEvent::Lost { partitions: all.into_iter().collect() });
        }
        self.generation = -1;
        self.publish();
        if self.subscribed() {
            self.phase = Phase::Join;
        }
    }

    fn fenced(&mut self) {
        self.fatal = true;
        self.emit(GroupEvent::Error(KafkaError::MessageConsumptionFatal(Code::FencedInstanceId)));
        if let Some(all) = self.assignment.take() {
            self.emit(GroupEvent::Lost { partitions: all.into_iter().collect() });
        }
        self.generation = -1;
        self.phase = Phase::Idle;
        self.publish();
        for q in std::mem::take(&mut self.jobs) {
            q.job.fail(Code::Fatal);
        }
    }

    fn coord_dead(&mut self, now: Instant) {
        self.coord = None;
        self.conn = None;
        self.coord_retry_at = Some(now + self.s.retry_backoff);
    }

    fn check_timers(&mut self, now: Instant) {
        // Queued jobs that waited too long for a coordinator.
        let mut keep = VecDeque::new();
        for q in std::mem::take(&mut self.jobs) {
            if q.deadline <= now { q.job.fail(Code::WaitingForCoordinator) } else { keep.push_back(q) }
        }
        self.jobs = keep;
        if self.close_deadline.is_some_and(|d| d <= now) {
            self.leave = None;
        }
        if !self.subscribed() {
            return;
        }
        if !self.max_poll_exceeded && !self.in_poll && now >= self.last_poll + self.s.max_poll_interval {
            // KIP-62 / librdkafka's rd_kafka_cgrp_max_poll_interval_check_tmr_cb.
            self.emit(GroupEvent::Error(KafkaError::MessageConsumption(Code::PollExceeded)));
            self.max_poll_exceeded = true;
            if self.s.instance_id.is_none() && !self.member_id.is_empty() {
                self.leave = Some(self.member_id.clone());
            }
            self.member_id.clear();
            self.lose_and_rejoin();
            return;
        }
        if self.generation >= 0 && !self.joining && now >= self.last_heartbeat_ok + self.s.session_timeout {
            // librdkafka's rd_kafka_cgrp_session_timeout_check.
            self.member_id.clear();
            self.lose_and_rejoin();
        }
    }

    fn next_wake(&self, now: Instant) -> Option<Instant> {
        let mut t: Vec<Instant> = Vec::new();
        t.extend(self.coord_retry_at);
        t.extend(self.join_retry_at);
        t.extend(self.close_deadline);
        for q in &self.jobs {
            t.push(q.deadline);
            t.extend(q.not_before);
        }
        if self.subscribed() {
            if self.generation >= 0 {
                t.push(self.next_heartbeat);
                t.push(self.last_heartbeat_ok + self.s.session_timeout);
            }
            if !self.max_poll_exceeded && !self.in_poll {
                t.push(self.last_poll + self.s.max_poll_interval);
            }
        }
        t.into_iter().filter(|x| *x > now).min()
    }

    fn next_address(&mut self) -> String {
        let mut all = self.brokers.addresses();
        all.extend(self.s.bootstrap.iter().cloned());
        if all.is_empty() {
            return String::new();
        }
        let addr = all[self.bootstrap_next % all.len()].clone();
        self.bootstrap_next = self.bootstrap_next.wrapping_add(1);
        addr
    }

    /// Starts the next request, if one is due (nothing is in flight).
    fn start(&mut self, now: Instant) {
        let membership = self.subscribed() && !matches!(self.phase, Phase::Idle);
        if self.jobs.is_empty() && self.leave.is_none() && !membership {
            return;
        }
        let Some((_, addr)) = self.coord.clone() else {
            if self.coord_retry_at.is_none_or(|t| t <= now) {
                self.coord_retry_at = None;
                let (dialer, addr, id, group, timeout) = (
                    self.dialer.clone(),
                    self.next_address(),
                    self.s.client_id.clone(),
                    self.s.group_id.clone(),
                    self.s.socket_timeout,
                );
                self.tasks
                    .spawn(async move { Done::Found(coordinator::find(&dialer, &addr, &id, &group, timeout).await) });
            }
            return;
        };
        let (dialer, id, conn, timeout) =
            (self.dialer.clone(), self.s.client_id.clone(), self.conn.take(), self.s.socket_timeout);
        let group = GroupId(string(&self.s.group_id));
        let instance = self.s.instance_id.as_deref().map(string);
        if self.jobs.front().is_some_and(|q| q.not_before.is_none_or(|t| t <= now)) {
            let q = self.jobs.pop_front().expect("front exists");
            match &q.job {
                Job::Commit { offsets, .. } => {
                    let (generation, member) = if self.generation >= 0 {
                        (self.generation, self.member_id.clone())
                    } else {
                        (-1, String::new())
                    };
                    let r = commits::commit_request(
                        &self.s.group_id,
                        generation,
                        &member,
                        self.s.instance_id.as_deref(),
                        offsets,
                    );
                    self.tasks.spawn(async move {
                        let (c, r) =
                            coordinator::exchange(conn, &dialer, &addr, &id, r, OFFSET_COMMIT_VERSION, timeout).await;
                        Done::Commit(c, q, generation, r)
                    });
                }
                Job::Committed { partitions, .. } => {
                    let r = commits::fetch_request(&self.s.group_id, partitions);
                    self.tasks.spawn(async move {
                        let (c, r) =
                            coordinator::exchange(conn, &dialer, &addr, &id, r, OFFSET_FETCH_VERSION, timeout).await;
                        Done::Committed(c, q, r)
                    });
                }
            }
            return;
        }
        if !self.jobs.is_empty() {
            // The head waits out a retry backoff; nothing overtakes it.
            self.conn = conn;
            return;
        }
        if let Some(member) = self.leave.clone()
            && (self.awaiting_done == 0 || self.closing)
        {
            let r = LeaveGroupRequest::default().with_group_id(group).with_members(vec![
                leave_group_request::MemberIdentity::default()
                    .with_member_id(string(&member))
                    .with_group_instance_id(instance),
            ]);
            self.tasks.spawn(async move {
                let (c, _) = coordinator::exchange(conn, &dialer, &addr, &id, r, LEAVE_GROUP_VERSION, timeout).await;
                Done::Leave(c)
            });
            return;
        }
        if !membership {
            self.conn = conn;
            return;
        }
        match &self.phase {
            Phase::Join
                if self.awaiting_done == 0
                    && !self.max_poll_exceeded
                    && self.join_retry_at.is_none_or(|t| t <= now) =>
            {
                self.join_retry_at = None;
                let owned: Vec<Tp> = self.assignment.iter().flatten().cloned().collect();
                let metadata = assignor::encode_subscription(&self.subscription, &owned);
                let protocols = self
                    .s
                    .strategies
                    .iter()
                    .map(|st| {
                        join_group_request::JoinGroupRequestProtocol::default()
                            .with_name(string(st.name()))
                            .with_metadata(metadata.clone())
                    })
                    .collect();
                let r = JoinGroupRequest::default()
                    .with_group_id(group)
                    .with_session_timeout_ms(millis(self.s.session_timeout))
                    .with_rebalance_timeout_ms(millis(self.s.max_poll_interval))
                    .with_member_id(string(&self.member_id))
                    .with_group_instance_id(instance)
                    .with_protocol_type(string("consumer"))
                    .with_protocols(protocols);
                let timeout = self.s.max_poll_interval + JOIN_GRACE;
                self.joining = true;
                self.tasks.spawn(async move {
                    let (c, r) = coordinator::exchange(conn, &dialer, &addr, &id, r, JOIN_GROUP_VERSION, timeout).await;
                    Done::Join(c, r)
                });
            }
            Phase::Metadata(members) => {
                let topics: BTreeSet<String> = members.iter().flat_map(|m| m.topics.iter().cloned()).collect();
                let r = Metadata::request(&topics, false);
                self.joining = true;
                self.tasks.spawn(async move {
                    let (c, r) = coordinator::exchange(conn, &dialer, &addr, &id, r, METADATA_VERSION, timeout).await;
                    Done::Metadata(c, r)
                });
            }
            Phase::Sync(assignments) => {
                let r = SyncGroupRequest::default()
                    .with_group_id(group)
                    .with_generation_id(self.generation)
                    .with_member_id(string(&self.member_id))
                    .with_group_instance_id(instance)
                    .with_assignments(
                        assignments
                            .iter()
                            .map(|(m, a)| {
                                sync_group_request::SyncGroupRequestAssignment::default()
                                    .with_member_id(string(m))
                                    .with_assignment(a.clone())
                            })
                            .collect(),
                    );
                let timeout = self.s.max_poll_interval + JOIN_GRACE;
                self.joining = true;
                self.tasks.spawn(async move {
                    let (c, r) = coordinator::exchange(conn, &dialer, &addr, &id, r, SYNC_GROUP_VERSION, timeout).await;
                    Done::Sync(c, r)
                });
            }
            _ if self.generation >= 0 && !self.max_poll_exceeded && now >= self.next_heartbeat => {
                self.next_heartbeat = now + self.s.heartbeat_interval;
                let generation = self.generation;
                let r = HeartbeatRequest::default()
                    .with_group_id(group)
                    .with_generation_id(generation)
                    .with_member_id(string(&self.member_id))
                    .with_group_instance_id(instance);
                self.tasks.spawn(async move {
                    let (c, r) = coordinator::exchange(conn, &dialer, &addr, &id, r, HEARTBEAT_VERSION, timeout).await;
                    Done::Heartbeat(c, generation, r)
                });
            }
            _ => self.conn = conn,
        }
    }

    fn done(&mut self, done: Done, now: Instant) {
        match done {
            Done::Found(Ok(coord)) => {
                self.coord = Some(coord);
                self.conn = None;
            }
            Done::Found(Err(_)) => self.coord_retry_at = Some(now + self.s.retry_backoff),
            Done::Join(conn, r) => {
                self.joining = false;
                self.conn = conn;
                match r {
                    Ok(r) => self.joined(r, now),
                    Err(_) => self.coord_dead(now),
                }
            }
            Done::Metadata(conn, r) => {
                self.joining = false;
                self.conn = conn;
                match r {
                    Ok(r) => self.assign(&r, now),
                    Err(_) => self.coord_dead(now),
                }
            }
            Done::Sync(conn, r) => {
                self.joining = false;
                self.conn = conn;
                match r {
                    Ok(r) => self.synced(r, now),
                    Err(_) => {
                        self.coord_dead(now);
                        self.phase = Phase::Join;
                    }
                }
            }
            Done::Heartbeat(conn, generation, r) => {
                self.conn = conn;
                match r {
                    Err(_) => self.coord_dead(now),
                    Ok(_) if generation != self.generation => {}
                    Ok(r) => self.heartbeat(r.error_code, now),
                }
            }
            Done::Leave(conn) => {
                self.conn = conn;
                self.leave = None;
            }
            Done::Commit(conn, q, generation, r) => {
                self.conn = conn;
                self.committed(q, generation, r, now);
            }
            Done::Committed(conn, q, r) => {
                self.conn = conn;
                self.fetched(q, r, now);
            }
        }
        self.publish();
    }

    fn joined(&mut self, r: JoinGroupResponse, now: Instant) {
        if self.closing {
            // Closed while joining: librdkafka still leaves with the member id the answer
            // carries (a member, or KIP-394's pending member), and joins no further.
            let id = r.member_id.to_string();
            if !id.is_empty() && self.s.instance_id.is_none() && matches!(r.error_code, 0 | 79) {
                self.member_id = id.clone();
                self.leave = Some(id);
            }
            return;
        }
        match r.error_code {
            0 => {
                self.member_id = r.member_id.to_string();
                self.generation = r.generation_id;
                self.protocol = r.protocol_name.as_ref().and_then(|p| Strategy::parse(p.as_str()));
                self.last_heartbeat_ok = now;
                if r.leader.as_str() == self.member_id {
                    let members = r
                        .members
                        .iter()
                        .map(|m| {
                            let (topics, owned) = assignor::decode_subscription(&m.metadata).unwrap_or_default();
                            Member {
                                id: m.member_id.to_string(),
                                instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                                topics,
                                owned,
                            }
                        })
                        .collect();
                    self.phase = Phase::Metadata(members);
                } else {
                    self.phase = Phase::Sync(Vec::new());
                }
            }
            79 => {
                // KIP-394: join again at once with the member id given.
                self.member_id = r.member_id.to_string();
            }
            82 => self.fenced(),
            code => {
                self.join_retry_at = Some(now + JOIN_BACKOFF);
                match code {
                    25 => self.member_id.clear(),
                    22 => self.generation = -1,
                    c if coordinator_error(c) => self.coord_dead(now),
                    // librdkafka's permanent JoinGroup errors reach the application.
                    23 | 24 | 26 | 30 | 81 => {
                        self.emit(GroupEvent::Error(KafkaError::MessageConsumption(Code::from(code))));
                    }
                    _ => {}
                }
                if self.cooperative() && code == 22 {
                    self.lose_and_rejoin();
                }
            }
        }
    }

    fn assign(&mut self, r: &MetadataResponse, now: Instant) {
        let Phase::Metadata(members) = std::mem::replace(&mut self.phase, Phase::Join) else { return };
        self.brokers.update(r, now);
        let topics: BTreeSet<&String> = members.iter().flat_map(|m| m.topics.iter()).collect();
        let mut partitions: BTreeMap<String, i32> = BTreeMap::new();
        for t in topics {
            if let Some(TopicState::Known(leaders)) = self.brokers.topic(t) {
                partitions.insert(t.clone(), i32::try_from(leaders.len()).unwrap_or(0));
            }
        }
        let strategy = self.protocol.or(self.s.strategies.first().copied()).expect("at least one strategy");
        let plan = assignor::assign(strategy, &members, &partitions);
        self.phase = Phase::Sync(plan.iter().map(|(m, tps)| (m.clone(), assignor::encode_assignment(tps))).collect());
    }

    fn synced(&mut self, r: SyncGroupResponse, now: Instant) {
        match r.error_code {
            0 => {
                let new: BTreeSet<Tp> =
                    assignor::decode_assignment(&r.assignment).unwrap_or_default().into_iter().collect();
                self.last_heartbeat_ok = now;
                self.next_heartbeat = now + self.s.heartbeat_interval;
                self.phase = Phase::Steady;
                if !self.cooperative() {
                    self.assignment = Some(new.clone());
                    let protocol = RebalanceProtocol::Eager;
                    self.emit(GroupEvent::Assign { partitions: new.into_iter().collect(), protocol });
                    return;
                }
                let protocol = RebalanceProtocol::Cooperative;
                let old = self.assignment.take().unwrap_or_default();
                let revoked: Vec<Tp> = old.difference(&new).cloned().collect();
                let added: Vec<Tp> = new.difference(&old).cloned().collect();
                self.assignment = Some(new);
                if !revoked.is_empty() {
                    // KIP-429: revoke, then assign (even nothing), then rejoin so the revoked
                    // partitions reach their new owners.
                    self.emit(GroupEvent::Revoke { partitions: revoked, protocol });
                    self.phase = Phase::Join;
                }
                self.emit(GroupEvent::Assign { partitions: added, protocol });
            }
            82 => self.fenced(),
            code => {
                match code {
                    25 => self.member_id.clear(),
                    22 => self.generation = -1,
                    c if coordinator_error(c) => self.coord_dead(now),
                    _ => {}
                }
                if self.cooperative() && (code == 25 || code == 22) {
                    self.lose_and_rejoin();
                } else {
                    self.rejoin();
                }
            }
        }
    }

    fn heartbeat(&mut self, code: i16, now: Instant) {
        match code {
            0 => self.last_heartbeat_ok = now,
            27 => {
                self.last_heartbeat_ok = now;
                if matches!(self.phase, Phase::Steady) {
                    self.rejoin();
                }
            }
            25 => {
                self.member_id.clear();
                self.lose_and_rejoin();
            }
            22 => self.lose_and_rejoin(),
            82 => self.fenced(),
            c if coordinator_error(c) => self.coord_dead(now),
            _ => {}
        }
    }

    fn committed(&mut self, mut q: Queued, generation: i32, r: Result<OffsetCommitResponse, Code>, now: Instant) {
        let r = match r {
            Err(code) => {
                self.coord_dead(now);
                if q.job.retry() {
                    self.jobs.push_front(q);
                } else {
                    q.job.fail(code);
                }
                return;
            }
            Ok(r) => r,
        };
        let Job::Commit { offsets, .. } = &q.job else { unreachable!("a commit's answer is for a commit") };
        let codes = commits::commit_codes(offsets, &r);
        if codes.iter().any(|(_, c)| commits::retriable(*c)) && q.job.retry() {
            if codes.iter().any(|(_, c)| coordinator_error(*c)) {
                self.coord_dead(now);
            }
            q.not_before = Some(now + self.s.retry_backoff);
            self.jobs.push_front(q);
            return;
        }
        let Job::Commit { reply, .. } = q.job else { unreachable!("checked above") };
        let worst = codes.iter().map(|(_, c)| *c).find(|c| matches!(c, 22 | 25 | 82));
        let results = codes
            .into_iter()
            .map(|(tp, c)| (tp, if c == 0 { Ok(()) } else { Err(KafkaError::ConsumerCommit(Code::from(c))) }))
            .collect();
        let _ = reply.send(Ok(results));
        match worst {
            Some(82) => self.fenced(),
            Some(25) if generation >= 0 => {
                self.member_id.clear();
                self.lose_and_rejoin();
            }
            // Outside a rebalance only: a new generation may be on its way.
            Some(22) if generation >= 0 && generation == self.generation && matches!(self.phase, Phase::Steady) => {
                self.lose_and_rejoin();
            }
            _ => {}
        }
    }

    fn fetched(&mut self, mut q: Queued, r: Result<OffsetFetchResponse, Code>, now: Instant) {
        let r = match r {
            Err(code) => {
                self.coord_dead(now);
                if q.job.retry() {
                    self.jobs.push_front(q);
                } else {
                    q.job.fail(code);
                }
                return;
            }
            Ok(r) => r,
        };
        let Job::Committed { partitions, .. } = &q.job else { unreachable!("a lookup's answer is for a lookup") };
        match commits::fetch_results(partitions, &r) {
            Err(c) if commits::retriable(c) && q.job.retry() => {
                if coordinator_error(c) {
                    self.coord_dead(now);
                }
                q.not_before = Some(now + self.s.retry_backoff);
                self.jobs.push_front(q);
            }
            result => {
                let Job::Committed { reply, .. } = q.job else { unreachable!("checked above") };
                let _ = reply.send(result.map_err(|c| KafkaError::MetadataFetch(Code::from(c))));
            }
        }
    }
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
