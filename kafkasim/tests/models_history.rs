//! The queue models Q1–Q9 over hand-built histories: for each model, a history of a
//! deliberately wrong consumer on which it fires — naming the group, partition, offsets and
//! member — and the history of a correct consumer on which it stays quiet. Broker-side rules
//! (Q2's journal, Q5's log start, Q8's LeaveGroup) get hand-built [`Facts`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use kafkasim::introspect::{CommitRecord, Generation, MemberView, PartitionView};
use kafkasim::models::facts::encode_assignment;
use kafkasim::models::*;

const G: &str = "billing";
const T: &str = "orders";

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new(T, p)
}

/// A history under construction: each event 10 ms after the previous one.
struct H {
    h: ConsumerHistory,
    now: Duration,
}

impl H {
    fn new() -> H {
        H { h: ConsumerHistory::new(), now: Duration::ZERO }
    }

    fn ev(&mut self, member: &str, what: What) -> &mut H {
        self.now += Duration::from_millis(10);
        self.h.push(self.now, G, member, what);
        self
    }

    fn wait(&mut self, d: Duration) -> &mut H {
        self.now += d;
        self
    }

    fn assign(&mut self, m: &str, p: i32) -> &mut H {
        self.ev(m, What::Assign(tp(p)))
    }
    fn revoke(&mut self, m: &str, p: i32) -> &mut H {
        self.ev(m, What::Revoke { tp: tp(p), lost: false })
    }
    fn begin(&mut self, m: &str, p: i32, o: i64) -> &mut H {
        self.ev(m, What::Begin { tp: tp(p), offset: o })
    }
    fn process(&mut self, m: &str, p: i32, o: i64) -> &mut H {
        self.ev(m, What::Process { tp: tp(p), offset: o, value: Some(format!("v{o}")) })
    }
    fn error(&mut self, m: &str, p: i32, o: i64) -> &mut H {
        self.ev(m, What::Error { tp: tp(p), offset: o, error: "poison".into() })
    }
    fn commit(&mut self, m: &str, p: i32, o: i64) -> &mut H {
        self.ev(m, What::Commit { tp: tp(p), offset: o, answer: Answer::Accepted })
    }
    fn commit_answered(&mut self, m: &str, p: i32, o: i64, answer: Answer) -> &mut H {
        self.ev(m, What::Commit { tp: tp(p), offset: o, answer })
    }
    fn history(&self) -> ConsumerHistory {
        self.h.clone()
    }
}

fn alo() -> Spec {
    Spec::at_least_once(G)
}

fn amo() -> Spec {
    Spec::at_most_once(G)
}

fn judge_alone(h: &H, spec: &Spec) -> Report {
    judge(&h.history(), &Facts::default(), spec)
}

/// The one violation of `model`, checked for its partition and member.
fn only<'a>(report: &'a Report, model: &str, p: Option<i32>, member: Option<&str>) -> &'a Violation {
    let found = report.of(model);
    assert_eq!(found.len(), 1, "one {model} violation expected:\n{report}");
    let v = found[0];
    assert_eq!(v.group, G);
    assert_eq!(v.partition, p.map(tp), "{v}");
    assert_eq!(v.member.as_deref(), member, "{v}");
    v
}

/// A correct at-least-once consumer: two members, a rebalance, a failure retried, a drained stop.
fn correct_at_least_once() -> H {
    let mut h = H::new();
    h.assign("c1", 0).assign("c1", 1);
    for o in 0..3 {
        h.begin("c1", 0, o).process("c1", 0, o).commit("c1", 0, o + 1);
    }
    h.process("c1", 1, 0).process("c1", 1, 1).commit("c1", 1, 2);
    // c2 joins: c1 commits on revocation, then gives partition 1 up.
    h.process("c1", 1, 2).commit("c1", 1, 3).revoke("c1", 1).assign("c2", 1);
    h.error("c2", 1, 3).process("c2", 1, 3).process("c2", 1, 4).commit("c2", 1, 5);
    h.process("c1", 0, 3).commit("c1", 0, 4);
    h.ev("c1", What::Stop).begin("c1", 0, 4).process("c1", 0, 4).commit("c1", 0, 5).revoke("c1", 0);
    h.ev("c1", What::Leave);
    h
}

/// A correct at-most-once consumer: commit, then process.
fn correct_at_most_once() -> H {
    let mut h = H::new();
    h.assign("c1", 0);
    for o in 0..4 {
        h.commit("c1", 0, o + 1).begin("c1", 0, o).process("c1", 0, o);
    }
    h.ev("c1", What::Stop).ev("c1", What::Leave);
    h
}

#[test]
fn correct_consumers_draw_no_violation_from_any_model() {
    let report = judge_alone(&correct_at_least_once(), &alo());
    assert!(report.is_clean(), "{report}");
    let report = judge_alone(&correct_at_most_once(), &amo());
    assert!(report.is_clean(), "{report}");
}

// ---- Q1 -----------------------------------------------------------------------------------

#[test]
fn q1_fires_on_a_commit_ahead_of_processing_and_names_the_uncovered_records() {
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1);
    // Commits 4 after processing only 1: records 2 and 3 are covered unprocessed.
    h.process("c1", 0, 1).commit("c1", 0, 4).process("c1", 0, 2).process("c1", 0, 3);
    let report = judge_alone(&h, &alo());
    let v = only(&report, Q1, Some(0), Some("c1"));
    assert_eq!(v.offsets, vec![2, 3]);
    assert_eq!(report.models_fired(), vec![Q1], "{report}");
}

#[test]
fn q1_fires_when_the_very_first_commit_precedes_any_processing() {
    let mut h = H::new();
    h.assign("c1", 0).commit("c1", 0, 1).process("c1", 0, 0);
    let report = judge_alone(&h, &alo());
    assert_eq!(only(&report, Q1, Some(0), Some("c1")).offsets, vec![0]);
}

#[test]
fn q1_counts_an_unknown_answer_and_ignores_a_refused_commit() {
    let mut unknown = H::new();
    unknown.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).commit_answered("c1", 0, 3, Answer::Unknown);
    assert_eq!(only(&judge_alone(&unknown, &alo()), Q1, Some(0), Some("c1")).offsets, vec![1, 2]);
    let mut refused = H::new();
    refused.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).commit_answered("c1", 0, 3, Answer::Refused(22));
    assert!(!judge_alone(&refused, &alo()).fired(Q1));
}

#[test]
fn q1_is_quiet_on_process_then_commit_and_excuses_records_retention_deleted() {
    assert!(!judge_alone(&correct_at_least_once(), &alo()).fired(Q1));
    // The group's first commit covers 0..5 but the log starts at 3: 0..3 were deleted unread.
    let mut h = H::new();
    h.assign("c1", 0).commit("c1", 0, 3).process("c1", 0, 3).process("c1", 0, 4).commit("c1", 0, 5);
    let facts = facts_with_log(0, 3, 5);
    let report = judge(&h.history(), &facts, &alo().allow(Cause::Retention));
    assert!(!report.fired(Q1), "{report}");
    // Without the declaration the same history is a Q5 loss (and Q1 stays quiet: the first
    // commit covered only deleted records).
    let report = judge(&h.history(), &facts, &alo());
    assert!(report.fired(Q5) && !report.fired(Q1), "{report}");
}

#[test]
fn q1_fires_when_the_broker_stored_commits_the_history_never_recorded() {
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0);
    let mut facts = Facts::default();
    facts.commits.push(commit_record("member-1", 1, 0, 1));
    let v = only(&judge(&h.history(), &facts, &alo()), Q1, None, None).clone();
    assert!(v.message.contains("records no commit"), "{v}");
}

// ---- Q2 -----------------------------------------------------------------------------------

#[test]
fn q2_fires_on_a_commit_from_a_member_that_no_longer_holds_the_partition() {
    let mut h = H::new();
    h.assign("c1", 0).assign("c1", 1).process("c1", 1, 0).commit("c1", 1, 1);
    h.revoke("c1", 1).assign("c2", 1).process("c2", 1, 1).commit("c2", 1, 2);
    // c1 kept its old assignment and commits partition 1 again.
    h.commit("c1", 1, 2);
    let report = judge_alone(&h, &alo());
    let v = only(&report, Q2, Some(1), Some("c1"));
    assert!(v.message.contains("not holding"), "{v}");
}

#[test]
fn q2_fires_on_a_regressing_offset() {
    let mut h = H::new();
    h.assign("c1", 0);
    for o in 0..5 {
        h.process("c1", 0, o);
    }
    h.commit("c1", 0, 5).commit("c1", 0, 2);
    let report = judge_alone(&h, &alo());
    assert_eq!(only(&report, Q2, Some(0), Some("c1")).offsets, vec![5, 2]);
}

fn member(id: &str, client: &str) -> MemberView {
    MemberView { member_id: id.into(), group_instance_id: None, client_id: client.into() }
}

fn generation(n: i32, assigned: &[(&str, &str, &[i32])]) -> Generation {
    Generation {
        at: Duration::from_millis(n as u64),
        generation: n,
        protocol: Some("range".into()),
        leader: assigned.first().map(|(id, ..)| id.to_string()),
        members: assigned.iter().map(|(id, client, _)| member(id, client)).collect(),
        assignments: assigned
            .iter()
            .map(|(id, _, parts)| {
                let set: BTreeSet<TopicPartition> = parts.iter().map(|p| tp(*p)).collect();
                (id.to_string(), encode_assignment(&set))
            })
            .collect::<BTreeMap<String, Bytes>>(),
    }
}

fn commit_record(member_id: &str, generation: i32, partition: i32, offset: i64) -> CommitRecord {
    CommitRecord {
        at: Duration::from_secs(1),
        group: G.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        generation,
        topic: T.into(),
        partition,
        offset,
        metadata: None,
        error: 0,
    }
}

#[test]
fn q2_fires_on_the_coordinators_journal_when_another_member_was_assigned_the_partition() {
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0, 1])]));
    facts.generations.push(generation(2, &[("m1", "c1", &[0]), ("m2", "c2", &[1])]));
    facts.commits.push(commit_record("m1", 1, 1, 3));
    facts.commits.push(commit_record("m2", 2, 1, 5));
    // Stored: c1 committing partition 1 in generation 2, where c2 holds it (and going back).
    facts.commits.push(commit_record("m1", 2, 1, 4));
    let report = judge(&ConsumerHistory::new(), &facts, &alo());
    let found = report.of(Q2);
    assert_eq!(found.len(), 2, "{report}");
    assert!(found.iter().all(|v| v.member.as_deref() == Some("c1") && v.partition == Some(tp(1))), "{report}");
    assert!(found.iter().any(|v| v.message.contains("went back")), "{report}");
    assert!(found.iter().any(|v| v.message.contains("assigned it to c2")), "{report}");
}

#[test]
fn q2_is_quiet_on_own_partitions_admin_resets_and_cooperative_revocation_commits() {
    assert!(!judge_alone(&correct_at_least_once(), &alo()).fired(Q2));
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0, 1])]));
    // Cooperative (KIP-429): generation 2 assigns partition 1 to nobody while c1 revokes it.
    facts.generations.push(generation(2, &[("m1", "c1", &[0]), ("m2", "c2", &[])]));
    facts.generations.push(generation(3, &[("m1", "c1", &[0]), ("m2", "c2", &[1])]));
    facts.commits.push(commit_record("m1", 1, 1, 3));
    facts.commits.push(commit_record("m1", 2, 1, 4));
    facts.commits.push(commit_record("m2", 3, 1, 6));
    // An operator's reset to an earlier offset (no member, generation -1).
    facts.commits.push(commit_record("", -1, 1, 0));
    facts.commits.push(commit_record("m2", 3, 1, 1));
    let report = judge(&ConsumerHistory::new(), &facts, &alo());
    assert!(!report.fired(Q2), "{report}");
}

/// c1 commits 3 on partition 0; the network holds the answer (c1 is partitioned away) while the
/// coordinator expires c1, c2 takes the partition and commits 5; then c1's answer (accepted)
/// arrives, below c2's, and c1 learns it lost the partition.
fn late_answer() -> H {
    let mut h = H::new();
    h.assign("c1", 0);
    for o in 0..3 {
        h.process("c1", 0, o);
    }
    h.assign("c2", 0).process("c2", 0, 3).process("c2", 0, 4).commit("c2", 0, 5);
    h.commit("c1", 0, 3).ev("c1", What::Revoke { tp: tp(0), lost: true });
    h
}

fn two_owners() -> Facts {
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    facts.generations.push(generation(2, &[("m2", "c2", &[0])]));
    facts
}

#[test]
fn q2_orders_accepted_answers_by_the_journal_not_by_their_arrival() {
    // The journal: c1's 3 stored (generation 1) before c2's 5 — the answer only came late.
    let mut facts = two_owners();
    facts.commits.push(commit_record("m1", 1, 0, 3));
    facts.commits.push(commit_record("m2", 2, 0, 5));
    let report = judge(&late_answer().history(), &facts, &alo());
    assert!(!report.fired(Q2), "{report}");

    // Stored after c2's 5: the committed offset went back — both views report it.
    let mut facts = two_owners();
    facts.commits.push(commit_record("m2", 2, 0, 5));
    facts.commits.push(commit_record("m1", 1, 0, 3));
    let report = judge(&late_answer().history(), &facts, &alo());
    let found = report.of(Q2);
    assert_eq!(found.len(), 2, "{report}");
    assert!(found.iter().any(|v| v.message.contains("went back")), "{report}");
    assert!(found.iter().any(|v| v.message.contains("below the previous accepted 5")), "{report}");

    // No journal (a real broker's history): the answers' order is all there is.
    let report = judge_alone(&late_answer(), &alo());
    let v = only(&report, Q2, Some(0), Some("c1"));
    assert_eq!(v.offsets, vec![5, 3]);
}

// ---- Q3 -----------------------------------------------------------------------------------

#[test]
fn q3_fires_when_an_at_most_once_consumer_reprocesses_after_a_restart() {
    let mut h = H::new();
    // Processes, then commits (wrong order): it crashes before the commit of 1.
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).process("c1", 0, 1).ev("c1", What::Crash);
    h.assign("c1", 0).process("c1", 0, 1).commit("c1", 0, 2);
    let report = judge_alone(&h, &amo());
    assert_eq!(only(&report, Q3, Some(0), Some("c1")).offsets, vec![1]);
}

#[test]
fn q3_is_quiet_on_commit_then_process_and_under_at_least_once() {
    assert!(!judge_alone(&correct_at_most_once(), &amo()).fired(Q3));
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).process("c1", 0, 0).commit("c1", 0, 1);
    assert!(!judge_alone(&h, &alo()).fired(Q3), "duplicates are allowed under at-least-once");
}

// ---- Q4 -----------------------------------------------------------------------------------

#[test]
fn q4_fires_when_an_at_most_once_consumer_processes_before_its_commit_is_acknowledged() {
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1);
    let report = judge_alone(&h, &amo());
    assert_eq!(only(&report, Q4, Some(0), Some("c1")).offsets, vec![0]);
    // A commit sent but unanswered does not count either.
    let mut h = H::new();
    h.assign("c1", 0).commit_answered("c1", 0, 1, Answer::Unknown).begin("c1", 0, 0).process("c1", 0, 0);
    assert_eq!(only(&judge_alone(&h, &amo()), Q4, Some(0), Some("c1")).offsets, vec![0]);
}

#[test]
fn q4_is_quiet_when_the_commit_is_acknowledged_first() {
    assert!(!judge_alone(&correct_at_most_once(), &amo()).fired(Q4));
}

// ---- Q5 -----------------------------------------------------------------------------------

/// At-most-once, commit then process; offset 1 is skipped (committed past, never processed).
fn skipping() -> H {
    let mut h = H::new();
    h.assign("c1", 0).commit("c1", 0, 1).process("c1", 0, 0).commit("c1", 0, 2);
    h.commit("c1", 0, 3).process("c1", 0, 2);
    h
}

#[test]
fn q5_fires_on_a_consumer_that_silently_skips_records() {
    let report = judge_alone(&skipping(), &amo().allow(Cause::Crash));
    let v = only(&report, Q5, Some(0), Some("c1"));
    assert_eq!(v.offsets, vec![1]);
    assert_eq!(report.models_fired(), vec![Q5], "{report}");
}

/// At-most-once with a crash between the commit of 2 and processing 1.
fn crash_between_commit_and_processing() -> H {
    let mut h = H::new();
    h.assign("c1", 0).commit("c1", 0, 1).process("c1", 0, 0).commit("c1", 0, 2).ev("c1", What::Crash);
    h.assign("c1", 0).commit("c1", 0, 3).process("c1", 0, 2);
    h
}

#[test]
fn q5_explains_a_crash_between_commit_and_processing_only_when_allowed() {
    let report = judge_alone(&crash_between_commit_and_processing(), &amo().allow(Cause::Crash));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.explained.len(), 1);
    assert_eq!((report.explained[0].cause, report.explained[0].offsets.clone()), (Cause::Crash, vec![1]));
    let report = judge_alone(&crash_between_commit_and_processing(), &amo());
    assert_eq!(only(&report, Q5, Some(0), Some("c1")).offsets, vec![1]);
}

fn facts_with_log(partition: i32, log_start: i64, high_watermark: i64) -> Facts {
    let mut facts = Facts::default();
    facts.partitions.insert(
        tp(partition),
        PartitionView {
            topic: T.into(),
            partition,
            leader: 0,
            leader_epoch: 0,
            log_start,
            high_watermark,
            last_stable_offset: high_watermark,
            batches: Vec::new(),
        },
    );
    facts
}

#[test]
fn q5_explains_retention_and_reset_latest_with_their_evidence() {
    // Retention: the log starts at 3; the group read from there.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 3).commit("c1", 0, 4);
    let facts = facts_with_log(0, 3, 4);
    let report = judge(&h.history(), &facts, &alo().allow(Cause::Retention));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.explained[0].cause, Cause::Retention);
    // auto.offset.reset=latest: the log starts at 0, the group's first record was 3.
    let facts = facts_with_log(0, 0, 4);
    let report = judge(&h.history(), &facts, &alo().allow(Cause::ResetLatest));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.explained[0].cause, Cause::ResetLatest);
    // Neither allowed: unexplained.
    assert_eq!(only(&judge(&h.history(), &facts, &alo()), Q5, Some(0), Some("c1")).offsets, vec![0, 1, 2]);
}

#[test]
fn q5_uses_the_coordinators_final_committed_offset() {
    // The members recorded nothing past 1, but the coordinator stored 3: 1 and 2 are lost.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1);
    let mut facts = facts_with_log(0, 0, 5);
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    facts.commits.push(commit_record("m1", 1, 0, 1));
    facts.commits.push(commit_record("m1", 1, 0, 3));
    assert_eq!(only(&judge(&h.history(), &facts, &alo()), Q5, Some(0), Some("c1")).offsets, vec![1, 2]);
}

// ---- Q6 -----------------------------------------------------------------------------------

#[test]
fn q6_fires_when_a_worker_pool_finishes_a_partitions_records_out_of_order() {
    let mut h = H::new();
    h.assign("c1", 0).begin("c1", 0, 0).begin("c1", 0, 1).begin("c1", 0, 2);
    h.process("c1", 0, 0).process("c1", 0, 2).process("c1", 0, 1).commit("c1", 0, 3);
    let report = judge_alone(&h, &alo());
    assert_eq!(only(&report, Q6, Some(0), Some("c1")).offsets, vec![2, 1]);
}

#[test]
fn q6_is_quiet_across_holds_on_retries_and_across_partitions() {
    let mut h = H::new();
    h.assign("c1", 0).assign("c1", 1).process("c1", 0, 0).process("c1", 1, 5).process("c1", 0, 1);
    // A retry after a failure, then a new hold that redoes from the committed offset.
    h.error("c1", 0, 2).process("c1", 0, 2).revoke("c1", 0).assign("c1", 0).process("c1", 0, 1);
    assert!(!judge_alone(&h, &alo()).fired(Q6), "{}", judge_alone(&h, &alo()));
}

#[test]
fn q6_is_quiet_when_a_member_that_assigns_partitions_itself_restarts_and_redoes_records() {
    // No assignment recorded (the consumer assigns its partitions itself): its crash still ends
    // what it held, and the restarted member resumes from the committed offset.
    let mut h = H::new();
    h.process("c1", 0, 0).commit("c1", 0, 1).process("c1", 0, 1).process("c1", 0, 2);
    h.ev("c1", What::Crash).process("c1", 0, 1).process("c1", 0, 2).process("c1", 0, 3).commit("c1", 0, 4);
    assert!(!judge_alone(&h, &alo()).fired(Q6), "{}", judge_alone(&h, &alo()));
    // Leaving ends it too.
    let mut h = H::new();
    h.process("c1", 0, 0).process("c1", 0, 1).ev("c1", What::Leave).process("c1", 0, 0).process("c1", 0, 1);
    assert!(!judge_alone(&h, &alo()).fired(Q6), "{}", judge_alone(&h, &alo()));
    // Without a crash or a leave, going back is out of order.
    let mut h = H::new();
    h.process("c1", 0, 0).process("c1", 0, 1).process("c1", 0, 2).process("c1", 0, 1);
    assert_eq!(only(&judge_alone(&h, &alo()), Q6, Some(0), Some("c1")).offsets, vec![2, 1]);
}

// ---- Q7 -----------------------------------------------------------------------------------

#[test]
fn q7_fires_on_a_consumer_that_swallows_a_processing_error_and_commits_past_it() {
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).error("c1", 0, 1).commit("c1", 0, 2);
    let report = judge_alone(&h, &alo());
    let v = only(&report, Q7, Some(0), Some("c1"));
    assert_eq!(v.offsets, vec![1, 2]);
    // Or processes the next record.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).error("c1", 0, 1).process("c1", 0, 2);
    assert_eq!(only(&judge_alone(&h, &alo()), Q7, Some(0), Some("c1")).offsets, vec![1, 2]);
}

#[test]
fn q7_is_quiet_when_the_consumer_ends_or_retries_and_lets_in_flight_work_finish() {
    let mut h = H::new();
    // Two records in flight; 1 fails, 2 (begun before) finishes; c1 commits up to the failure
    // and ends; c2 gets the partition and processes 1.
    h.assign("c1", 0).process("c1", 0, 0).begin("c1", 0, 1).begin("c1", 0, 2).error("c1", 0, 1);
    h.process("c1", 0, 2).commit("c1", 0, 1).ev("c1", What::Stop).ev("c1", What::Leave);
    h.assign("c2", 0).process("c2", 0, 1).process("c2", 0, 2).commit("c2", 0, 3);
    let report = judge_alone(&h, &alo());
    assert!(!report.fired(Q7), "{report}");
    assert!(!judge_alone(&correct_at_least_once(), &alo()).fired(Q7));
}

// ---- Q8 -----------------------------------------------------------------------------------

#[test]
fn q8_fires_on_exit_without_committing_what_was_processed_or_finishing_in_flight_work() {
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).process("c1", 0, 1).process("c1", 0, 2);
    h.ev("c1", What::Stop).begin("c1", 0, 3).ev("c1", What::Leave);
    let report = judge_alone(&h, &alo());
    let found = report.of(Q8);
    assert_eq!(found.len(), 2, "{report}");
    assert!(found.iter().any(|v| v.offsets == vec![3] && v.message.contains("in-flight")), "{report}");
    assert!(found.iter().any(|v| v.offsets == vec![2] && v.message.contains("did not commit")), "{report}");
}

#[test]
fn q8_fires_on_a_consumer_that_never_leaves_or_that_the_coordinator_saw_expire() {
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).ev("c1", What::Stop);
    let v = only(&judge_alone(&h, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("never left"), "{v}");
    // It recorded a leave, but the coordinator saw its session expire: no LeaveGroup.
    h.ev("c1", What::Leave);
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    facts.departures.push(Departure {
        at: h.now + Duration::from_secs(10),
        member_id: "m1".into(),
        cause: DepartureCause::SessionExpired,
    });
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("without LeaveGroup") && v.message.contains("SessionExpired"), "{v}");
}

#[test]
fn q8_is_quiet_on_a_drained_stop_seen_by_the_coordinator_and_for_static_members() {
    let h = correct_at_least_once();
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0, 1])]));
    facts.departures.push(Departure { at: h.now, member_id: "m1".into(), cause: DepartureCause::Left });
    let report = judge(&h.history(), &facts, &alo());
    assert!(!report.fired(Q8), "{report}");
    // A static member's session expiring is what KIP-345 promises.
    let mut facts = Facts::default();
    let mut g = generation(1, &[("m1", "c1", &[0, 1])]);
    g.members[0].group_instance_id = Some("c1-static".into());
    facts.generations.push(g);
    facts.departures.push(Departure { at: h.now, member_id: "m1".into(), cause: DepartureCause::SessionExpired });
    assert!(!judge(&h.history(), &facts, &alo()).fired(Q8));
}

#[test]
fn q8_excuses_a_member_cut_off_from_the_group_while_it_drained() {
    // Stopped, then partitioned: its last commit is refused UNKNOWN_MEMBER_ID (the session
    // expired), the partition is revoked as lost, it leaves; the coordinator saw it expire.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).process("c1", 0, 1).ev("c1", What::Stop);
    h.ev("c1", What::Commit { tp: tp(0), offset: 2, answer: Answer::Refused(25) });
    h.ev("c1", What::Revoke { tp: tp(0), lost: true }).ev("c1", What::Leave);
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    facts.departures.push(Departure {
        at: h.now + Duration::from_secs(10),
        member_id: "m1".into(),
        cause: DepartureCause::SessionExpired,
    });
    let report = judge(&h.history(), &facts, &alo());
    assert!(!report.fired(Q8), "{report}");
    // A commit without an answer (the coordinator unreachable) may have stored the offset.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).ev("c1", What::Stop);
    h.ev("c1", What::Commit { tp: tp(0), offset: 1, answer: Answer::Unknown }).ev("c1", What::Leave);
    let report = judge(&h.history(), &facts, &alo());
    assert!(!report.fired(Q8), "{report}");
    // Not cut off: the same expiry is still a violation.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).ev("c1", What::Stop).commit("c1", 0, 1).ev("c1", What::Leave);
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("SessionExpired"), "{v}");
}

#[test]
fn q8_judges_the_stopped_incarnations_member_id_not_a_crashed_predecessors() {
    // c1's first incarnation (member id m1, generation 1) crashes; the next (m2, generation 2,
    // formed after the crash) stops, drains and leaves by LeaveGroup; m1's session expires after
    // the stop. That expiry is the crash's, not the stop's.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).ev("c1", What::Crash);
    let crashed = h.now;
    h.wait(Duration::from_secs(1)).assign("c1", 0).process("c1", 0, 1).ev("c1", What::Stop);
    h.commit("c1", 0, 2).ev("c1", What::Leave);
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    let mut second = generation(2, &[("m2", "c1", &[0])]);
    second.at = crashed + Duration::from_millis(500);
    facts.generations.push(second);
    // m1 expires during m2's drain, before m2's LeaveGroup.
    let during = h.now - Duration::from_millis(5);
    facts.departures.push(Departure { at: during, member_id: "m1".into(), cause: DepartureCause::SessionExpired });
    facts.departures.push(Departure { at: h.now, member_id: "m2".into(), cause: DepartureCause::Left });
    let report = judge(&h.history(), &facts, &alo());
    assert!(!report.fired(Q8), "{report}");
    // The stopped incarnation's own id expiring is still a violation.
    let after = h.now + Duration::from_secs(2);
    facts.departures = vec![Departure { at: after, member_id: "m2".into(), cause: DepartureCause::SessionExpired }];
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("m2") && v.message.contains("SessionExpired"), "{v}");
}

#[test]
fn q8_takes_a_leave_group_of_any_of_the_incarnations_ids_as_its_leave() {
    // c1's second incarnation (m2) crashes while the coordinator holds its JoinGroup; the third
    // (m3) joins; both first appear in generation 2, formed after the crash. m3 stops, drains
    // and leaves by LeaveGroup; m2 expires at the same instant, listed first.
    let mut h = H::new();
    h.ev("c1", What::Crash);
    let crashed = h.now;
    h.wait(Duration::from_secs(1)).assign("c1", 0).process("c1", 0, 0).ev("c1", What::Stop);
    h.commit("c1", 0, 1).ev("c1", What::Leave);
    let mut facts = Facts::default();
    let mut g = generation(2, &[("m2", "c1", &[]), ("m3", "c1", &[0])]);
    g.at = crashed + Duration::from_millis(500);
    facts.generations.push(g);
    facts.departures.push(Departure { at: h.now, member_id: "m2".into(), cause: DepartureCause::SessionExpired });
    facts.departures.push(Departure { at: h.now, member_id: "m3".into(), cause: DepartureCause::Left });
    let report = judge(&h.history(), &facts, &alo());
    assert!(!report.fired(Q8), "{report}");
    // Without m3's LeaveGroup, m2's expiry is all the coordinator saw: still a violation.
    facts.departures.pop();
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("SessionExpired"), "{v}");
}

#[test]
fn q8_excuses_a_member_the_coordinator_lost_touch_with_before_it_could_leave() {
    // Stopped while partitioned from the coordinator: its session expires during the drain,
    // before its leave (its LeaveGroup could only come after).
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).ev("c1", What::Stop);
    let stop = h.now;
    h.wait(Duration::from_secs(2)).ev("c1", What::Leave);
    let left = h.now;
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    let expired = |at| Departure { at, member_id: "m1".into(), cause: DepartureCause::SessionExpired };
    facts.departures.push(expired(stop + Duration::from_millis(500)));
    assert!(!judge(&h.history(), &facts, &alo()).fired(Q8));
    // Expired before the stop and not back in the group at the stop: nothing to leave.
    facts.departures = vec![expired(stop - Duration::from_millis(5))];
    assert!(!judge(&h.history(), &facts, &alo()).fired(Q8));
    // Expired after its leave: no LeaveGroup came.
    facts.departures = vec![expired(h.now + Duration::from_secs(1))];
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("SessionExpired"), "{v}");
    // A later incarnation's id (first seen in a generation formed at the leave's instant, as
    // when it starts and joins at once) expiring after its crash is not this stop's.
    h.assign("c1", 0).ev("c1", What::Crash);
    let mut later = generation(2, &[("m2", "c1", &[0])]);
    later.at = left;
    facts.generations.push(later);
    facts.departures = vec![
        Departure { at: stop + Duration::from_millis(30), member_id: "m1".into(), cause: DepartureCause::Left },
        Departure { at: h.now + Duration::from_secs(1), member_id: "m2".into(), cause: DepartureCause::SessionExpired },
    ];
    assert!(!judge(&h.history(), &facts, &alo()).fired(Q8));
}

#[test]
fn q8_attributes_a_member_id_to_the_incarnation_it_was_handed_out_to() {
    // c1's incarnation crashes while the coordinator holds its JoinGroup: the id m3 was handed out
    // before the crash, but generation 2, the first to list it, forms after. The next incarnation
    // starts, stops and leaves before it ever joins; m3's session then expires. That expiry is
    // the crash's: the stopped incarnation never had an id.
    let mut h = H::new();
    let asked = h.now;
    h.wait(Duration::from_millis(100)).ev("c1", What::Crash);
    let crashed = h.now;
    h.wait(Duration::from_secs(1)).ev("c1", What::Stop).ev("c1", What::Leave);
    let mut facts = Facts::default();
    let mut g = generation(2, &[("m3", "c1", &[])]);
    g.at = crashed + Duration::from_millis(200);
    facts.generations.push(g);
    facts.departures.push(Departure {
        at: h.now + Duration::from_secs(5),
        member_id: "m3".into(),
        cause: DepartureCause::SessionExpired,
    });
    // Without the hand-out, m3 reads as the stopped incarnation's id (first seen after the crash).
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("m3") && v.message.contains("SessionExpired"), "{v}");
    facts.handed_out.insert("m3".into(), asked);
    let report = judge(&h.history(), &facts, &alo());
    assert!(!report.fired(Q8), "{report}");
    // Handed out after the crash, it is the next incarnation's: its expiry is a violation again.
    facts.handed_out.insert("m3".into(), crashed + Duration::from_millis(100));
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("m3"), "{v}");
}

// ---- Q9 -----------------------------------------------------------------------------------

fn settings() -> ConsumerSettings {
    ConsumerSettings {
        session_timeout: Duration::from_secs(6),
        heartbeat_interval: Duration::from_secs(1),
        max_poll_interval: Duration::from_secs(10),
        reconnect_backoff_max: Duration::from_secs(1),
        retry_backoff_max: Duration::from_millis(500),
        fetch_wait_max: Duration::from_millis(500),
        connection_setup_timeout: Duration::ZERO,
        initial_rebalance_delay: Duration::ZERO,
        processing_max: Duration::from_millis(100),
    }
}

/// c1 processed 0..5; a heal with the log at 8.
fn healed() -> H {
    let mut h = H::new();
    h.assign("c1", 0);
    for o in 0..5 {
        h.process("c1", 0, o).commit("c1", 0, o + 1);
    }
    h.ev("harness", What::Heal { high_watermarks: [(tp(0), 8), (TopicPartition::new("other", 0), 3)].into() });
    h
}

#[test]
fn q9_fires_on_a_consumer_stuck_after_the_heal_and_names_the_bound() {
    let spec = alo().settings(&settings());
    let bound = settings().progress_bound().total();
    assert_eq!(bound, Duration::from_millis(1_000 + 500 + 6_000 + 1_000 + 10_000 + 500 + 100));
    let mut h = healed();
    h.wait(bound + Duration::from_secs(1));
    let history = h.history().ends_at(h.now);
    let report = judge(&history, &Facts::default(), &spec);
    let v = only(&report, Q9, None, None);
    for part in ["reconnect.backoff.max.ms", "session.timeout.ms", "max.poll.interval.ms", "heartbeat.interval.ms"] {
        assert!(v.message.contains(part), "{v}");
    }
    assert!(v.message.contains("orders-0 5..8"), "{v}");
    // A record processed, but after the bound: late is late.
    h.process("c1", 0, 5);
    assert!(judge(&h.history(), &Facts::default(), &spec).fired(Q9));
}

#[test]
fn q9_is_quiet_on_progress_within_the_bound_or_with_nothing_waiting() {
    let spec = alo().settings(&settings());
    let mut h = healed();
    h.wait(Duration::from_secs(3)).process("c1", 0, 5).wait(Duration::from_secs(60));
    let history = h.history().ends_at(h.now);
    assert!(!judge(&history, &Facts::default(), &spec).fired(Q9));
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1);
    h.ev("harness", What::Heal { high_watermarks: [(tp(0), 1)].into() }).wait(Duration::from_secs(60));
    assert!(!judge(&h.history().ends_at(h.now), &Facts::default(), &spec).fired(Q9));
}

#[test]
fn q9_says_so_when_the_history_ends_before_the_bound() {
    let h = healed();
    let report = judge(&h.history(), &Facts::default(), &alo().settings(&settings()));
    assert!(only(&report, Q9, None, None).message.contains("before the bound"), "{report}");
}

// ---- the history form ---------------------------------------------------------------------

#[test]
fn a_history_beyond_its_bound_is_not_judged() {
    let mut h = ConsumerHistory::new();
    for i in 0..=ConsumerHistory::EVENTS_MAX {
        h.push(Duration::from_nanos(i as u64), G, "c1", What::Stop);
    }
    assert_eq!(h.dropped(), 1);
    let report = judge(&h, &Facts::default(), &alo());
    assert_eq!(report.models_fired(), vec!["kafka-history"], "{report}");
}

#[test]
fn a_committed_offset_beyond_the_walk_bound_is_reported_not_walked() {
    let far = OFFSETS_WALKED_MAX * 1_000;
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).commit("c1", 0, far);
    let report = judge_alone(&h, &alo());
    assert!(only(&report, Q1, Some(0), Some("c1")).message.contains("OFFSETS_WALKED_MAX"), "{report}");
    assert!(report.of(Q5).iter().any(|v| v.message.contains("OFFSETS_WALKED_MAX")), "{report}");
}

// ---- Q8: ids lost before the stop (fresh seeds, 2026-12-03) ---------------------------------

/// c1 (member id m1, handed out at the start) holds partition 0 and loses it: its session timed
/// out on its side (a partition from the coordinator) and librdkafka dropped the member id. Then
/// it is stopped, `stop_after` later, and leaves at once. Returns the history and the loss's time.
fn lost_then_stopped(stop_after: Duration) -> (H, Duration) {
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1);
    h.wait(Duration::from_secs(3)).ev("c1", What::Revoke { tp: tp(0), lost: true });
    let lost = h.now;
    // The stop and the leave at the loss's instant (after it), or later.
    h.now += stop_after;
    h.h.push(h.now, G, "c1", What::Stop);
    h.h.push(h.now, G, "c1", What::Leave);
    (h, lost)
}

fn m1_facts(expired_at: Duration) -> Facts {
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    facts.handed_out.insert("m1".into(), Duration::ZERO);
    facts.departures.push(Departure { at: expired_at, member_id: "m1".into(), cause: DepartureCause::SessionExpired });
    facts
}

#[test]
fn q8_excuses_an_id_lost_before_the_stop_that_expires_at_the_stops_instant() {
    // Seeds …5761, churn …6562: the coordinator expires m1 at the very instant of the stop and
    // the leave, the client having revoked it as lost just before (same instant, earlier event).
    let (h, lost) = lost_then_stopped(Duration::ZERO);
    let report = judge(&h.history(), &m1_facts(lost), &alo());
    assert!(!report.fired(Q8), "{report}");
    // Not lost before the stop: the same expiry at the stop's instant is still a violation.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).commit("c1", 0, 1).wait(Duration::from_secs(3));
    h.h.push(h.now, G, "c1", What::Stop);
    h.h.push(h.now, G, "c1", What::Leave);
    let v = only(&judge(&h.history(), &m1_facts(h.now), &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("m1") && v.message.contains("SessionExpired"), "{v}");
}

#[test]
fn q8_excuses_an_id_lost_before_the_stop_that_expires_after_the_leave_but_judges_its_rejoin() {
    // Churn seeds …6543, …6997: the client's session ran out before the coordinator's (its
    // queued commits kept the coordinator's alive), so m1 expires after the leave; the client
    // had no member id to send LeaveGroup for.
    let (h, lost) = lost_then_stopped(Duration::from_millis(90));
    let expired = h.now + Duration::from_millis(50);
    let report = judge(&h.history(), &m1_facts(expired), &alo());
    assert!(!report.fired(Q8), "{report}");
    // It rejoined after the loss: m2, handed out then, is its id at the stop; m2 expiring after
    // the leave (no LeaveGroup) is a violation.
    let mut facts = m1_facts(expired);
    facts.generations.push(generation(2, &[("m2", "c1", &[])]));
    facts.generations[1].at = lost + Duration::from_millis(20);
    facts.handed_out.insert("m2".into(), lost + Duration::from_millis(10));
    facts.departures.push(Departure { at: expired, member_id: "m2".into(), cause: DepartureCause::SessionExpired });
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("m2") && v.message.contains("SessionExpired"), "{v}");
    // Assigned again after the loss (back in the group, here under the same id): judged.
    let mut h = H::new();
    h.assign("c1", 0).ev("c1", What::Revoke { tp: tp(0), lost: true }).assign("c1", 0);
    h.ev("c1", What::Stop).ev("c1", What::Leave);
    let v = only(&judge(&h.history(), &m1_facts(h.now + Duration::from_secs(1)), &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("m1"), "{v}");
}

#[test]
fn q8_excuses_a_member_the_coordinator_removed_from_a_rebalance_while_it_drained() {
    // Churn seed …9384: stopped while the coordinator refused its commits (NOT_COORDINATOR), the
    // member kept committing; a rebalance started meanwhile and, the member not rejoining while it
    // drained, removed it after the rebalance timeout — before its leave.
    let mut h = H::new();
    h.assign("c1", 0).process("c1", 0, 0).ev("c1", What::Stop);
    h.commit_answered("c1", 0, 1, Answer::Refused(16));
    let removed = h.now + Duration::from_millis(5);
    h.wait(Duration::from_secs(3)).commit("c1", 0, 1).ev("c1", What::Leave);
    let mut facts = Facts::default();
    facts.generations.push(generation(1, &[("m1", "c1", &[0])]));
    let gone =
        |at| Departure { at, member_id: "m1".into(), cause: DepartureCause::Removed("did not rejoin in time".into()) };
    facts.departures.push(gone(removed));
    let report = judge(&h.history(), &facts, &alo());
    assert!(!report.fired(Q8), "{report}");
    // Removed after its leave: no LeaveGroup came, a violation.
    facts.departures = vec![gone(h.now + Duration::from_secs(1))];
    let v = only(&judge(&h.history(), &facts, &alo()), Q8, None, Some("c1")).clone();
    assert!(v.message.contains("Removed"), "{v}");
}
