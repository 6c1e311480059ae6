//! What the group task does with the coordinator's answers: JoinGroup (the leader's
//! assignment), SyncGroup (the new assignment, eager or cooperative), heartbeats (rebalance,
//! fenced, unknown member), OffsetCommit and OffsetFetch results.

use super::*;

impl Group {
    pub(super) fn done(&mut self, done: Done, now: Instant) {
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
            Done::Topics(conn, r) => {
                self.conn = conn;
                match r {
                    Ok(r) => {
                        self.topics_checked = Some(now);
                        self.topics_exist = r.topics.iter().any(|t| {
                            t.error_code == 0
                                && !t.partitions.is_empty()
                                && t.name.as_ref().is_some_and(|n| self.subscription.iter().any(|s| s == n.0.as_str()))
                        });
                    }
                    Err(_) => {
                        self.coord_dead(now);
                        self.join_retry_at = Some(now + self.s.retry_backoff);
                    }
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
            Done::Leave(conn, r) => {
                self.essential_inflight = false;
                self.conn = conn;
                // librdkafka's rd_kafka_handle_LeaveGroup: a coordinator error or a lost
                // connection looks the coordinator up again and sends the LeaveGroup again.
                let again = r.map_or(true, |r| coordinator_error(r.error_code));
                if again && self.leave_retries < commits::RETRIES_MAX {
                    self.leave_retries += 1;
                    self.coord_dead(now);
                } else {
                    self.leave = None;
                }
            }
            Done::Commit(conn, q, generation, r) => {
                self.essential_inflight = false;
                self.conn = conn;
                self.committed(q, generation, r, now);
            }
            Done::Committed(conn, q, r) => {
                self.essential_inflight = false;
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
                // librdkafka's rd_kafka_cgrp_handle_SyncGroup_memberstate: an assignment that
                // does not parse fails the sync ("synchronization failed: rejoining"); the
                // member joins again (after a pause, not in a loop) instead of taking nothing.
                let Some(new) = assignor::decode_assignment(&r.assignment) else {
                    self.join_retry_at = Some(now + JOIN_BACKOFF);
                    self.rejoin();
                    return;
                };
                let new: BTreeSet<Tp> = new.into_iter().collect();
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

    /// A commit or lookup got no answer (transport, timeout): the coordinator is looked up
    /// again, and the job retried while its retries last, else failed with `code`.
    fn unanswered(&mut self, mut q: Queued, code: Code, now: Instant) {
        self.coord_dead(now);
        if q.job.retry() {
            self.jobs.push_front(q);
        } else {
            q.job.fail(code);
        }
    }

    fn committed(&mut self, mut q: Queued, generation: i32, r: Result<OffsetCommitResponse, Code>, now: Instant) {
        let r = match r {
            Err(code) => return self.unanswered(q, code, now),
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
            Err(code) => return self.unanswered(q, code, now),
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
