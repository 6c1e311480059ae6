//! The group task's state machine (librdkafka `rdkafka_cgrp.c`, classic protocol): one request
//! to the coordinator at a time, chosen in this order — a due Heartbeat, the leader's Metadata
//! or SyncGroup (they do not wait for commits), queued commits and lookups (in command order;
//! a due JoinGroup waits only for those queued before it was due), a pending LeaveGroup, then
//! the JoinGroup. A commit carries the generation it was queued in. Closing waits for the
//! commits, lookups and LeaveGroup, not for anything else in flight. Timers: the heartbeat interval, the session timeout
//! (a steady member without a successful heartbeat or SyncGroup for `session.timeout.ms`: the
//! assignment is lost and the member rejoins with a new member id; not checked while joining) and `max.poll.interval.ms` (KIP-62). The next request:
//! `requests`; what the answers do: `answers`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, MetadataResponse, OffsetCommitResponse, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse, join_group_request, leave_group_request, sync_group_request,
};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::rdkafka::consumer::group::assignor::RebalanceProtocol;
use crate::rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use crate::rdkafka::net::Dialer;
use crate::rdkafka::producer::metadata::{METADATA_VERSION, Metadata, TopicState};
use crate::requests::string;

use super::assignor::{self, Member, Strategy};
use super::commits::{self, Job, OFFSET_COMMIT_VERSION, OFFSET_FETCH_VERSION};
use super::coordinator::{self, Conn, coordinator_error};
use super::{GroupCommand, GroupEvent, GroupSettings, Shared, Tp};

mod answers;
mod requests;

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
    Leave(Option<Conn>, Result<LeaveGroupResponse, Code>),
    /// Whether the subscribed topics exist (before joining).
    Topics(Option<Conn>, Result<MetadataResponse, Code>),
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
    /// The member's generation and id when it was queued (-1 and "" when not a member): what
    /// a commit carries, as librdkafka sends it at once, even if it goes out after a rebalance.
    generation: i32,
    member: String,
    /// Queue order (a JoinGroup waits only for the jobs queued before it was due).
    seq: u64,
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
    /// The last job's sequence number.
    job_seq: u64,
    /// A commit, offset fetch or LeaveGroup is in flight (what closing waits for).
    essential_inflight: bool,
    /// LeaveGroups sent again after a coordinator error or a lost connection.
    leave_retries: u32,
    /// When the subscription's topics were last looked up, and whether one of them exists
    /// (librdkafka's cgrp joins only once a subscribed topic is in the metadata).
    topics_checked: Option<Instant>,
    topics_exist: bool,
    /// When a JoinGroup is due: the last job queued before (those go first, later ones after).
    join_barrier: Option<u64>,
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
            job_seq: 0,
            essential_inflight: false,
            leave_retries: 0,
            topics_checked: None,
            topics_exist: false,
            join_barrier: None,
        }
    }

    pub(crate) async fn run(mut self) {
        loop {
            let now = Instant::now();
            self.check_timers(now);
            if self.tasks.is_empty() {
                self.start(now);
            }
            // Closing waits for commits, lookups and the LeaveGroup, not for a coordinator
            // lookup, heartbeat or join in flight (librdkafka's rd_kafka_cgrp_try_terminate);
            // dropping the task aborts those.
            if self.closing && !self.essential_inflight && self.jobs.is_empty() && self.leave.is_none() {
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
        let (generation, member) =
            if self.generation >= 0 { (self.generation, self.member_id.clone()) } else { (-1, String::new()) };
        self.job_seq += 1;
        let seq = self.job_seq;
        self.jobs.push_back(Queued {
            job,
            deadline: now + self.s.socket_timeout,
            not_before: None,
            generation,
            member,
            seq,
        });
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
        self.topics_checked = None;
        self.topics_exist = false;
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
    /// Marks the assignment lost for the consumer (see [`super::Shared::lost`]): when there is
    /// one (its Lost event follows), or when a revoke of it still waits for the application.
    fn mark_lost(&self) {
        if self.assignment.is_some() || self.awaiting_done > 0 {
            self.shared.lock().unwrap_or_else(|p| p.into_inner()).lost = true;
        }
    }

    fn lose_and_rejoin(&mut self) {
        self.mark_lost();
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
        self.mark_lost();
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
        if self.steady() && now >= self.last_heartbeat_ok + self.s.session_timeout {
            // librdkafka's rd_kafka_cgrp_session_timeout_check, which rd_kafka_cgrp_serve runs
            // in join state STEADY only: waiting in (or about to send) JoinGroup or SyncGroup,
            // the member keeps its id however long that takes (a SyncGroup answered
            // REBALANCE_IN_PROGRESS after a long wait rejoins with it).
            self.member_id.clear();
            self.lose_and_rejoin();
        }
    }

    /// A member of its generation, not rebalancing (librdkafka's join state STEADY).
    fn steady(&self) -> bool {
        self.generation >= 0 && !self.joining && matches!(self.phase, Phase::Steady)
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
            if !self.topics_exist {
                t.extend(self.topics_checked.map(|c| c + self.s.metadata_refresh));
            }
            if self.generation >= 0 {
                t.push(self.next_heartbeat);
            }
            if self.steady() {
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
}

fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
