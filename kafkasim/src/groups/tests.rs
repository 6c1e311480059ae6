//! The coordinator alone, on a stand-in cluster: one broker (0) coordinating every group unless
//! told otherwise, topic `t` with partitions 0 and 1, no faults.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::coordinator::{Coordinator, Env, GroupConfig, Handle, with};
use super::{GroupState, join, sync};
use crate::faults::Part;
use crate::introspect::{CommitRecord, Generation};

#[derive(Clone, Default)]
struct Fake {
    coordinator: Arc<Mutex<Coordinator>>,
    records: Arc<Mutex<Vec<String>>>,
    generations: Arc<Mutex<Vec<Generation>>>,
    commits: Arc<Mutex<Vec<CommitRecord>>>,
    /// The broker coordinating every group (0 unless a test moves it).
    coordinator_id: Arc<Mutex<i32>>,
}

impl Fake {
    fn records(&self) -> Vec<String> {
        self.records.lock().unwrap().clone()
    }
    fn state(&self, group: &str) -> (GroupState, i32) {
        let c = self.coordinator.lock().unwrap();
        let g = c.group(group).expect("the group exists");
        (g.state, g.generation)
    }
}

impl Env for Fake {
    fn coordinator_of(&self, _group: &str) -> i32 {
        *self.coordinator_id.lock().unwrap()
    }
    fn fault_error(&self, _api: ApiKey, _broker: i32, _part: Part<'_>) -> Option<i16> {
        None
    }
    fn has_partition(&self, topic: &str, partition: i32) -> bool {
        topic == "t" && (0..2).contains(&partition)
    }
    fn config(&self) -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay: Duration::ZERO,
            session_timeout_min: Duration::from_secs(6),
            session_timeout_max: Duration::from_secs(1800),
        }
    }
    fn record(&self, kind: &str, group: &str, detail: &str) {
        self.records.lock().unwrap().push(format!("{kind} {group}: {detail}"));
    }
    fn elapsed(&self) -> Duration {
        Duration::ZERO
    }
    fn journal_generation(&self, _group: &str, generation: Generation) {
        self.generations.lock().unwrap().push(generation);
    }
    fn journal_assignments(&self, _group: &str, _generation: i32, _assignments: BTreeMap<String, Bytes>) {}
    fn journal_commits(&self, commits: Vec<CommitRecord>) {
        self.commits.lock().unwrap().extend(commits);
    }
    fn handle(&self) -> Box<dyn Handle> {
        Box::new(self.clone())
    }
}

impl Handle for Fake {
    fn with(&self, f: &mut dyn FnMut(&mut Coordinator, &dyn Env)) {
        let mut c = self.coordinator.lock().unwrap();
        f(&mut c, self);
    }
}

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

const SESSION_MS: i32 = 10_000;

fn join_req(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member_id))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(SESSION_MS)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default().with_name(s("range")).with_metadata(Bytes::new()),
        ])
}

/// Joins with an empty id (MEMBER_ID_REQUIRED), then with the id handed out.
async fn join_new(fake: &Fake, client: &str) -> JoinGroupResponse {
    let first = join(fake, 0, client, 9, join_req("")).await;
    assert_eq!(first.error_code, E::MemberIdRequired.code(), "KIP-394: an id first");
    join(fake, 0, client, 9, join_req(&first.member_id)).await
}

fn sync_req(member_id: &str, generation: i32, assignments: &[&str]) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member_id))
        .with_generation_id(generation)
        .with_assignments(
            assignments
                .iter()
                .map(|m| {
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::from(m.to_string()))
                })
                .collect(),
        )
}

fn heartbeat(fake: &Fake, member_id: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member_id))
        .with_generation_id(generation);
    with(fake, |c, env| c.heartbeat(env, 0, &req)).error_code
}

fn commit(fake: &Fake, member_id: &str, generation: i32, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member_id))
        .with_generation_id_or_member_epoch(generation)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default().with_name(TopicName(s("t"))).with_partitions(
                vec![offset_commit_request::OffsetCommitRequestPartition::default().with_committed_offset(offset)],
            ),
        ]);
    let resp = with(fake, |c, env| c.commit(env, 0, 2, &req));
    resp.topics[0].partitions[0].error_code
}

#[tokio::test(start_paused = true)]
async fn a_join_sync_heartbeat_round_makes_the_group_stable() {
    let fake = Fake::default();
    let joined = join_new(&fake, "c").await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, joined.member_id, "the only member leads");
    assert_eq!(joined.members.len(), 1, "the leader gets every member");
    assert_eq!(fake.state("g"), (GroupState::CompletingRebalance, 1));

    let me = joined.member_id.to_string();
    let synced = sync(&fake, 0, 5, sync_req(&me, 1, &[&me])).await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, Bytes::from(me.clone()), "the leader's assignment for itself");
    assert_eq!(fake.state("g"), (GroupState::Stable, 1));
    assert_eq!(heartbeat(&fake, &me, 1), 0);
    assert_eq!(fake.generations.lock().unwrap().iter().map(|g| g.generation).collect::<Vec<_>>(), vec![1]);
    assert!(fake.records().iter().any(|r| r.starts_with("kafka.group.state g: generation 1: Stable")));
}

#[tokio::test(start_paused = true)]
async fn a_second_member_starts_a_rebalance_that_bumps_the_generation() {
    let fake = Fake::default();
    let a = join_new(&fake, "a").await.member_id.to_string();
    assert_eq!(sync(&fake, 0, 5, sync_req(&a, 1, &[&a])).await.error_code, 0);

    let first = join(&fake, 0, "b", 9, join_req("")).await;
    let b_id = first.member_id.to_string();
    let f2 = fake.clone();
    let b = tokio::spawn(async move { join(&f2, 0, "b", 9, join_req(&b_id)).await });
    tokio::task::yield_now().await;
    assert_eq!(fake.state("g"), (GroupState::PreparingRebalance, 1));
    assert_eq!(heartbeat(&fake, &a, 1), E::RebalanceInProgress.code(), "a is told to rejoin");

    let a_again = join(&fake, 0, "a", 9, join_req(&a)).await;
    let b = b.await.expect("b's join");
    assert_eq!((a_again.error_code, b.error_code), (0, 0));
    assert_eq!((a_again.generation_id, b.generation_id), (2, 2));
    assert_eq!(a_again.leader.as_str(), a, "the old leader rejoined: it stays leader");
    assert_eq!(a_again.members.len(), 2);
    assert!(b.members.is_empty(), "a follower gets no members");
    assert_eq!(fake.state("g"), (GroupState::CompletingRebalance, 2));
    let generations: Vec<i32> = fake.generations.lock().unwrap().iter().map(|g| g.generation).collect();
    assert_eq!(generations, vec![1, 2], "generations increase by one per round");
}

#[tokio::test(start_paused = true)]
async fn a_commit_with_a_stale_generation_is_illegal_generation() {
    let fake = Fake::default();
    let a = join_new(&fake, "a").await.member_id.to_string();
    assert_eq!(sync(&fake, 0, 5, sync_req(&a, 1, &[&a])).await.error_code, 0);
    assert_eq!(commit(&fake, &a, 1, 7), 0);
    assert_eq!(commit(&fake, &a, 0, 8), E::IllegalGeneration.code());
    let c = fake.coordinator.lock().unwrap();
    assert_eq!(c.committed("g", "t", 0).map(|c| c.offset), Some(7), "the stale commit is not stored");
    drop(c);
    let errors: Vec<i16> = fake.commits.lock().unwrap().iter().map(|r| r.error).collect();
    assert_eq!(errors, vec![0, E::IllegalGeneration.code()], "every attempt is journaled");
}

#[tokio::test(start_paused = true)]
async fn unknown_members_and_other_coordinators_are_refused() {
    let fake = Fake::default();
    let a = join_new(&fake, "a").await.member_id.to_string();
    assert_eq!(heartbeat(&fake, "nobody", 1), E::UnknownMemberId.code());
    assert_eq!(commit(&fake, "nobody", 1, 1), E::UnknownMemberId.code());
    let rejoin = join(&fake, 0, "x", 9, join_req("nobody")).await;
    assert_eq!(rejoin.error_code, E::UnknownMemberId.code());
    assert_eq!(heartbeat(&fake, &a, 1), 0, "CompletingRebalance: heartbeats are fine");

    *fake.coordinator_id.lock().unwrap() = 1;
    assert_eq!(heartbeat(&fake, &a, 1), E::NotCoordinator.code());
    assert_eq!(commit(&fake, &a, 1, 1), E::NotCoordinator.code());
}

#[tokio::test(start_paused = true)]
async fn a_silent_member_expires_after_its_session_timeout() {
    let fake = Fake::default();
    let a = join_new(&fake, "a").await.member_id.to_string();
    assert_eq!(sync(&fake, 0, 5, sync_req(&a, 1, &[&a])).await.error_code, 0);
    tokio::time::sleep(Duration::from_millis(u64::try_from(SESSION_MS).unwrap() - 1)).await;
    assert_eq!(heartbeat(&fake, &a, 1), 0, "alive just before the deadline; the heartbeat extends it");
    tokio::time::sleep(Duration::from_millis(u64::try_from(SESSION_MS).unwrap() + 1)).await;
    assert_eq!(heartbeat(&fake, &a, 1), E::UnknownMemberId.code());
    assert!(fake.records().contains(&format!("kafka.group.member g: {a} expired: session timeout")));
    assert_eq!(fake.state("g"), (GroupState::Empty, 2), "the last member gone: an empty generation");
}

/// Joins `a` (alone, synced) then `b` with session timeouts `a_ms` and `b_ms`; returns their ids
/// and the generation both are in (CompletingRebalance, nobody synced).
async fn two_members(fake: &Fake, a_ms: i32, b_ms: i32) -> (String, String, i32) {
    let join_as = |client: &'static str, id: String, ms: i32| {
        let f = fake.clone();
        async move { join(&f, 0, client, 9, join_req(&id).with_session_timeout_ms(ms)).await }
    };
    let first = join_as("a", String::new(), a_ms).await;
    let a = join_as("a", first.member_id.to_string(), a_ms).await.member_id.to_string();
    assert_eq!(sync(fake, 0, 5, sync_req(&a, 1, &[&a])).await.error_code, 0);
    let b_id = join_as("b", String::new(), b_ms).await.member_id.to_string();
    let b = tokio::spawn(join_as("b", b_id, b_ms));
    tokio::task::yield_now().await;
    let a_again = join_as("a", a.clone(), a_ms).await;
    let b = b.await.expect("b's join");
    assert_eq!((a_again.generation_id, b.generation_id), (2, 2));
    assert_eq!(a_again.leader.as_str(), a, "a leads");
    (a, b.member_id.to_string(), 2)
}

#[tokio::test(start_paused = true)]
async fn a_follower_answered_in_sync_group_starts_a_new_session_when_the_leader_expires() {
    // Kafka's propagateAssignment reschedules the heartbeat of every member it answers: b waited
    // in SyncGroup for a leader that never syncs; when the leader expires, b's REBALANCE_IN_PROGRESS
    // answer starts b's session again, so b (closing, say) can still leave by LeaveGroup.
    let fake = Fake::default();
    let (a, b, generation) = two_members(&fake, 6_000, 10_000).await;
    let f = fake.clone();
    let b_id = b.clone();
    let b_sync = tokio::spawn(async move { sync(&f, 0, 5, sync_req(&b_id, generation, &[])).await });
    tokio::time::sleep(Duration::from_millis(6_001)).await;
    assert!(fake.records().contains(&format!("kafka.group.member g: {a} expired: session timeout")));
    assert_eq!(b_sync.await.expect("b's sync").error_code, E::RebalanceInProgress.code());
    // Past b's session counted from the join (10 s), within the one from the answer (16 s).
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    assert!(!fake.records().iter().any(|r| r.contains(&format!("{b} expired"))), "{:?}", fake.records());
    assert_eq!(heartbeat(&fake, &b, generation), E::RebalanceInProgress.code(), "b is still a member");
}

#[tokio::test(start_paused = true)]
async fn a_follower_answered_with_its_assignment_starts_a_new_session() {
    // b waits in SyncGroup past its session timeout (kept alive meanwhile); the leader syncs at
    // 8 s: b's session runs from the answer, not from when its timer last fired (6 s).
    let fake = Fake::default();
    let (a, b, generation) = two_members(&fake, 10_000, 6_000).await;
    let f = fake.clone();
    let b_id = b.clone();
    let b_sync = tokio::spawn(async move { sync(&f, 0, 5, sync_req(&b_id, generation, &[])).await });
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(heartbeat(&fake, &a, generation), 0, "the leader stays alive");
    }
    assert_eq!(sync(&fake, 0, 5, sync_req(&a, generation, &[&a, &b])).await.error_code, 0);
    assert_eq!(b_sync.await.expect("b's sync").assignment, Bytes::from(b.clone()));
    // 12.001 s: past 6 s + 6 s, within 8 s + 6 s.
    tokio::time::sleep(Duration::from_millis(4_001)).await;
    assert_eq!(heartbeat(&fake, &b, generation), 0, "b's session started at its answer");
    assert_eq!(fake.state("g"), (GroupState::Stable, generation));
}
