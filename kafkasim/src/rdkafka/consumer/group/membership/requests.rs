//! The membership step the group task starts next (one request in flight to the coordinator,
//! in order: queued commits and offset fetches, a pending LeaveGroup, then JoinGroup, the
//! leader's Metadata, SyncGroup or a heartbeat when due).

use super::*;

impl Group {
    /// Starts the next request, if one is due (nothing is in flight).
    pub(super) fn start(&mut self, now: Instant) {
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
        // Membership first when it cannot wait (librdkafka sends heartbeats, SyncGroup and the
        // leader's Metadata on their own, whatever commits are in flight); a JoinGroup waits for
        // the jobs queued before it was due (an eager revoke callback's commits), not for later
        // ones, which would starve it.
        let join_ready = membership
            && matches!(self.phase, Phase::Join)
            && self.awaiting_done == 0
            && !self.max_poll_exceeded
            && self.join_retry_at.is_none_or(|t| t <= now);
        if join_ready && self.join_barrier.is_none() {
            self.join_barrier = Some(self.job_seq);
        }
        // While the JoinGroup waits for those commits, heartbeats go on (during a rebalance the
        // coordinator answers REBALANCE_IN_PROGRESS and keeps the session alive).
        let join_now = join_ready && self.jobs.front().is_none_or(|q| Some(q.seq) > self.join_barrier);
        let rebalancing = matches!(self.phase, Phase::Metadata(_) | Phase::Sync(_));
        let heartbeat_now = membership && !rebalancing && !join_now && self.heartbeat_due(now);
        let urgent = membership && (rebalancing || join_now || heartbeat_now);
        if !urgent && self.jobs.front().is_some_and(|q| q.not_before.is_none_or(|t| t <= now)) {
            let q = self.jobs.pop_front().expect("front exists");
            match &q.job {
                Job::Commit { offsets, .. } => {
                    let (generation, member) = (q.generation, q.member.clone());
                    let r = commits::commit_request(
                        &self.s.group_id,
                        generation,
                        &member,
                        self.s.instance_id.as_deref(),
                        offsets,
                    );
                    self.essential_inflight = true;
                    self.tasks.spawn(async move {
                        let (c, r) =
                            coordinator::exchange(conn, &dialer, &addr, &id, r, OFFSET_COMMIT_VERSION, timeout).await;
                        Done::Commit(c, q, generation, r)
                    });
                }
                Job::Committed { partitions, .. } => {
                    let r = commits::fetch_request(&self.s.group_id, partitions);
                    self.essential_inflight = true;
                    self.tasks.spawn(async move {
                        let (c, r) =
                            coordinator::exchange(conn, &dialer, &addr, &id, r, OFFSET_FETCH_VERSION, timeout).await;
                        Done::Committed(c, q, r)
                    });
                }
            }
            return;
        }
        if !urgent && !self.jobs.is_empty() {
            // The head waits out a retry backoff; only membership overtakes it.
            self.conn = conn;
            return;
        }
        if let Some(member) = self.leave.clone()
            && (self.awaiting_done == 0 || self.closing)
            && !urgent
        {
            let r = LeaveGroupRequest::default().with_group_id(group).with_members(vec![
                leave_group_request::MemberIdentity::default()
                    .with_member_id(string(&member))
                    .with_group_instance_id(instance),
            ]);
            self.essential_inflight = true;
            self.tasks.spawn(async move {
                let (c, r) = coordinator::exchange(conn, &dialer, &addr, &id, r, LEAVE_GROUP_VERSION, timeout).await;
                Done::Leave(c, r)
            });
            return;
        }
        if !membership {
            self.conn = conn;
            return;
        }
        match &self.phase {
            Phase::Join if join_now => {
                if !self.topics_exist {
                    // librdkafka's rd_kafka_cgrp_join: "no matching topics" — no JoinGroup until
                    // the metadata shows a subscribed topic (looked up again every
                    // topic.metadata.refresh.interval.ms).
                    if self.topics_checked.is_none_or(|t| now >= t + self.s.metadata_refresh) {
                        let topics: BTreeSet<String> = self.subscription.iter().cloned().collect();
                        let r = Metadata::request(&topics, false);
                        self.tasks.spawn(async move {
                            let (c, r) =
                                coordinator::exchange(conn, &dialer, &addr, &id, r, METADATA_VERSION, timeout).await;
                            Done::Topics(c, r)
                        });
                    } else {
                        self.conn = conn;
                    }
                    return;
                }
                self.join_retry_at = None;
                self.join_barrier = None;
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
            _ if self.heartbeat_due(now) => {
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

    /// A heartbeat is due (a member, not past max.poll.interval.ms).
    fn heartbeat_due(&self, now: Instant) -> bool {
        self.generation >= 0 && !self.max_poll_exceeded && now >= self.next_heartbeat
    }
}
