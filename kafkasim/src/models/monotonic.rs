//! Q2, monotonic commits: the offsets stored for a group's partition only grow, and none is
//! stored from a member that does not hold the partition.
//!
//! The classic group coordinator fences commits by generation (`ILLEGAL_GENERATION`) and
//! membership (`UNKNOWN_MEMBER_ID`), but it never checks that the committing member was
//! assigned the partition: a member that kept a stale assignment across a rebalance, or that
//! commits its old positions after rejoining, overwrites the new holder's progress, and the
//! coordinator accepts it. Two views, both judged:
//!
//! - **the members' own events**, at each commit answered `Accepted`: the member holds the
//!   partition (between its assignment and its revocation; members that never record
//!   assignments are not judged on holding) — judged at the event; and the offset is not below
//!   the group's previous accepted offset for the partition — judged at the end, because an
//!   answer's arrival does not order the commits: the coordinator stored the commit somewhere
//!   between its request and its answer, and an answer held by the network (a member
//!   partitioned away right after the coordinator stored its commit) can arrive after a later
//!   owner's higher commits were answered, though it was stored before them. So a regression
//!   in the answers is excused when the coordinator's journal shows the member's commit of that
//!   offset stored before the higher one; without a journal ([`Facts::commits`] empty for the
//!   partition, e.g. a history from a real broker) it is reported. Record a revocation after the
//!   commits made for it — commit synchronously on revocation, as the `KafkaConsumer` javadoc
//!   advises;
//! - **the coordinator's journal** ([`Facts::commits`], at the end), in the order it stored
//!   them: a stored offset below the previous one fails (an admin commit — no member,
//!   generation −1, as `kafka-consumer-groups --reset-offsets` sends to an empty group — resets
//!   the sequence); and when the generation's assignments decode (the consumer protocol), a
//!   stored commit from a member not assigned the partition in that generation fails if another
//!   member was, or if the committer was not assigned it in its previous generation either
//!   (under cooperative rebalancing, KIP-429, a partition being revoked is assigned to nobody in
//!   the generation where its old owner commits it on revocation).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::models::event::{Answer, Event, TopicPartition, What};
use crate::models::facts::Facts;
use crate::models::holds::Holds;
use crate::models::model::{Model, Q2, Spec, Violation};

/// Q2 (see the module docs).
#[derive(Debug)]
pub struct MonotonicCommits {
    group: String,
    holds: Holds,
    last: BTreeMap<TopicPartition, (i64, String, u64)>,
    /// Accepted answers below the previous accepted one, judged at the end against the journal.
    regressions: Vec<Regression>,
}

/// An accepted commit answered below the group's previous accepted offset for its partition.
#[derive(Debug)]
struct Regression {
    member: String,
    tp: TopicPartition,
    offset: i64,
    previous: i64,
    violation: Violation,
}

impl Regression {
    /// Whether the coordinator's journal shows the member's commit of `offset` stored before a
    /// commit of `previous` (the answers arrived out of the order the commits were stored in).
    fn stored_before(&self, facts: &Facts) -> bool {
        let stored = |c: &&crate::introspect::CommitRecord| {
            c.error == 0 && c.topic == self.tp.topic && c.partition == self.tp.partition
        };
        let mut journal = facts.commits.iter().filter(stored);
        let mine = |c: &&crate::introspect::CommitRecord| {
            c.offset == self.offset && facts.client_of(&c.member_id).unwrap_or(&c.member_id) == self.member
        };
        journal.by_ref().find(mine).is_some() && journal.any(|c| c.offset == self.previous)
    }
}

impl MonotonicCommits {
    /// Q2 for `spec`'s group.
    pub fn new(spec: &Spec) -> MonotonicCommits {
        MonotonicCommits {
            group: spec.group().to_string(),
            holds: Holds::default(),
            last: BTreeMap::new(),
            regressions: Vec::new(),
        }
    }
}

impl Model for MonotonicCommits {
    fn name(&self) -> &'static str {
        Q2
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        self.holds.apply(e);
        let What::Commit { tp, offset, answer: Answer::Accepted } = &e.what else { return Vec::new() };
        let mut out = Vec::new();
        if self.holds.tracked(&e.member) && self.holds.hold(&e.member, tp).is_none() {
            out.push(
                Violation::new(
                    Q2,
                    &self.group,
                    format!(
                        "#{} at {:?}: committed {offset}, accepted, while not holding the partition (it holds {:?})",
                        e.seq,
                        e.at,
                        self.holds.held(&e.member).iter().map(ToString::to_string).collect::<Vec<_>>()
                    ),
                )
                .member(&e.member)
                .partition(tp)
                .offsets([*offset]),
            );
        }
        if let Some((previous, by, seq)) = self.last.get(tp)
            && offset < previous
        {
            let violation = Violation::new(
                Q2,
                &self.group,
                format!(
                    "#{} at {:?}: committed {offset}, accepted, below the previous accepted {previous} (by {by}, #{seq})",
                    e.seq, e.at
                ),
            )
            .member(&e.member)
            .partition(tp)
            .offsets([*previous, *offset]);
            self.regressions.push(Regression {
                member: e.member.clone(),
                tp: tp.clone(),
                offset: *offset,
                previous: *previous,
                violation,
            });
        }
        self.last.insert(tp.clone(), (*offset, e.member.clone(), e.seq));
        out
    }

    fn finish(&mut self, facts: &Facts, _end: Duration) -> Vec<Violation> {
        let mut out: Vec<Violation> = std::mem::take(&mut self.regressions)
            .into_iter()
            .filter(|r| !r.stored_before(facts))
            .map(|r| r.violation)
            .collect();
        let mut last: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        for c in facts.commits.iter().filter(|c| c.error == 0) {
            let tp = TopicPartition::new(&c.topic, c.partition);
            let who = facts.client_of(&c.member_id).unwrap_or(&c.member_id).to_string();
            let admin = c.member_id.is_empty() && c.generation < 0;
            if let Some(before) = last.get(&tp)
                && c.offset < *before
                && !admin
            {
                out.push(
                    Violation::new(
                        Q2,
                        &self.group,
                        format!(
                            "the coordinator stored {} (member id {}, generation {}, at {:?}) after {before}: the \
                             committed offset went back",
                            c.offset, c.member_id, c.generation, c.at
                        ),
                    )
                    .member(&who)
                    .partition(&tp)
                    .offsets([*before, c.offset]),
                );
            }
            last.insert(tp.clone(), c.offset);
            if admin || c.generation < 0 {
                continue;
            }
            let Some(assignments) = facts.assignments(c.generation) else { continue };
            let mine = assignments.get(&c.member_id);
            if mine.is_some_and(|a| a.contains(&tp)) {
                continue;
            }
            let holder = assignments.iter().find(|(m, a)| **m != c.member_id && a.contains(&tp)).map(|(m, _)| m);
            let held_before = facts
                .generations
                .iter()
                .rev()
                .filter(|g| g.generation < c.generation)
                .find(|g| g.assignments.contains_key(&c.member_id))
                .and_then(|g| facts.assignment(g.generation, &c.member_id))
                .is_some_and(|a| a.contains(&tp));
            let why = match holder {
                Some(h) => format!("generation {} assigned it to {}", c.generation, facts.client_of(h).unwrap_or(h)),
                None if !held_before => {
                    format!("the member was assigned it neither in generation {} nor before", c.generation)
                }
                None => continue,
            };
            out.push(
                Violation::new(
                    Q2,
                    &self.group,
                    format!(
                        "the coordinator stored {} from member id {} (generation {}, at {:?}), which does not hold the \
                         partition: {why}",
                        c.offset, c.member_id, c.generation, c.at
                    ),
                )
                .member(&who)
                .partition(&tp)
                .offsets([c.offset]),
            );
        }
        out
    }
}
