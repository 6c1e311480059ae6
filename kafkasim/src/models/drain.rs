//! Q8, shutdown drains: a member told to stop ([`What::Stop`]) finishes what it began,
//! commits what it processed, leaves the group with LeaveGroup, and does nothing afterwards.
//!
//! The `KafkaConsumer` javadoc: `close()` commits (with auto-commit) and leaves the group, so its
//! partitions are reassigned at once instead of after the session timeout; a consumer with
//! manual commits commits its processed offsets before closing (or on revocation). Judged:
//!
//! - at its [`What::Leave`], every record the member began has finished (processed or failed):
//!   no in-flight processing is abandoned;
//! - at its leave, for each partition it held at the stop or was assigned after it, its last
//!   accepted commit covers the last record it processed in its current hold (offset + 1);
//! - it left at all: a member told to stop that never leaves (nor crashes) fails at the end;
//! - the coordinator saw it go with LeaveGroup, after the stop ([`crate::models::Departure`];
//!   judged when the broker's facts know the member's client id). A static member (KIP-345: a
//!   `group.instance.id`) does not send LeaveGroup on close, so its departure is not judged;
//! - after its leave it neither begins, processes nor commits anything, until it is assigned
//!   partitions again (a new incarnation).
//!
//! A crash after the stop (the harness's SIGKILL after the grace) ends the member's obligations.
//!
//! Cut off during the drain — a partition revoked as lost (KIP-429's `onPartitionsLost`: the
//! session expired or the generation was fenced, and committing it would move another owner's
//! offset), or a commit refused `ILLEGAL_GENERATION`/`UNKNOWN_MEMBER_ID` — the member owes that
//! partition nothing more; a commit left without an answer counts as possibly stored (as in every
//! model). Either, or an unanswered commit, is evidence the coordinator could not be reached or no
//! longer knew the member, so a departure the coordinator saw as a session expiry is not judged
//! for it: its LeaveGroup could not arrive or would have been refused.
//!
//! The departure judged is that of the stopped incarnation's member id: the client's member ids
//! first seen in a generation after its previous incarnation ended (its last crash or leave
//! before the stop) and before its own leave. An earlier incarnation that crashed keeps its
//! member id in the group until its session expires — possibly after the next incarnation's
//! stop — and that expiry is the crash's, not the stop's; a later incarnation's ids are its own.
//! A crashed incarnation whose JoinGroup the coordinator held may first appear in the same
//! generation as the stopped one: any of the ids leaving by LeaveGroup after the stop is the
//! stopped incarnation's leave (a crashed one sends none).
//! Not judged either: an incarnation no longer in the group at its stop (every id of it had
//! departed before), and one the coordinator expired while it was still draining (before its
//! leave): a consumer heartbeats until its close ends, so the coordinator had lost touch with it
//! (a network partition) and its LeaveGroup could only come after the expiry. Likewise one the
//! coordinator removed from a rebalance while it drained (did not rejoin or sync within the
//! rebalance timeout): a member finishing its commits does not rejoin (its revocation waits for
//! them, as a Java consumer's `commitSync` in `onPartitionsRevoked` does), and the rebalance
//! that removed it already moved its partitions. Nor the ids a
//! member had when it lost its assignment before the stop (not assigned anything since): its
//! session had timed out, or the coordinator no longer knew it (librdkafka's
//! `rd_kafka_cgrp_session_timeout_check` and an `UNKNOWN_MEMBER_ID` answer drop the member id),
//! so at close it has no LeaveGroup to send for them, whenever the coordinator expires them
//! (at the stop's instant, or after the leave when the coordinator's clock for it runs later).
//! The ids handed out after the loss (its rejoin) are judged. (A loss by `ILLEGAL_GENERATION`
//! keeps the id, and its LeaveGroup at close goes unjudged too: the events do not tell the
//! causes apart.)

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::models::event::{Answer, Event, TopicPartition, What, ranges};
use crate::models::facts::DepartureCause;
use crate::models::facts::Facts;
use crate::models::holds::Holds;
use crate::models::model::{Model, Q8, Spec, Violation};

/// Kafka's `ILLEGAL_GENERATION`.
const ILLEGAL_GENERATION: i16 = 22;
/// Kafka's `UNKNOWN_MEMBER_ID`.
const UNKNOWN_MEMBER_ID: i16 = 25;

#[derive(Debug, Default)]
struct Member {
    /// The stop being drained: (seq, at).
    stop: Option<(u64, Duration)>,
    /// Partitions held at the stop or assigned after it.
    owed: BTreeSet<TopicPartition>,
    /// Records begun and not finished: (partition, offset) → seq.
    in_flight: BTreeMap<(TopicPartition, i64), u64>,
    /// The last offset processed in the current hold, per partition.
    processed: BTreeMap<TopicPartition, i64>,
    /// The highest accepted commit, per partition.
    committed: BTreeMap<TopicPartition, i64>,
    /// Its leave: (seq, at).
    left: Option<(u64, Duration)>,
    /// Cut off from the group during the drain (see the module docs).
    cut_off: bool,
    /// When its previous incarnation ended (its last crash or leave).
    ended: Option<Duration>,
    /// When it last lost its assignment, if not assigned anything since.
    lost: Option<Duration>,
}

/// A drained stop, for the coordinator's evidence.
#[derive(Debug)]
struct Drained {
    member: String,
    stop_at: Duration,
    leave_seq: u64,
    cut_off: bool,
    /// When the incarnation before the stopped one ended (none: the first).
    since: Option<Duration>,
    /// When it left.
    leave_at: Duration,
    /// When it lost its assignment before the stop, not assigned anything since: the ids it
    /// had then are not judged (see the module docs).
    lost_before_stop: Option<Duration>,
}

/// Q8 (see the module docs).
#[derive(Debug)]
pub struct ShutdownDrains {
    group: String,
    holds: Holds,
    members: BTreeMap<String, Member>,
    /// Every drained stop, for the coordinator's evidence.
    drained: Vec<Drained>,
}

impl ShutdownDrains {
    /// Q8 for `spec`'s group.
    pub fn new(spec: &Spec) -> ShutdownDrains {
        ShutdownDrains {
            group: spec.group().to_string(),
            holds: Holds::default(),
            members: BTreeMap::new(),
            drained: Vec::new(),
        }
    }
}

/// A member left: in-flight work and unfinished commits since its stop are violations.
fn on_leave(drained: &mut Vec<Drained>, group: &str, m: &mut Member, e: &Event) -> Vec<Violation> {
    let mut out = Vec::new();
    let stop = m.stop.take();
    // Set before the stop only: a loss during the drain cuts the member off instead.
    let lost_before_stop = m.lost.take();
    let owed = std::mem::take(&mut m.owed);
    let in_flight = std::mem::take(&mut m.in_flight);
    let gaps: Vec<(TopicPartition, i64, Option<i64>)> = owed
        .iter()
        .filter_map(|tp| {
            let processed = *m.processed.get(tp)?;
            let committed = m.committed.get(tp).copied();
            (committed.is_none_or(|c| c <= processed)).then(|| (tp.clone(), processed, committed))
        })
        .collect();
    m.left = Some((e.seq, e.at));
    let since = m.ended.replace(e.at);
    if let Some((stop_seq, stop_at)) = stop {
        drained.push(Drained {
            member: e.member.clone(),
            stop_at,
            leave_seq: e.seq,
            cut_off: std::mem::take(&mut m.cut_off),
            since,
            leave_at: e.at,
            lost_before_stop,
        });
        for ((tp, offset), seq) in in_flight {
            let v = violation(
                group,
                e,
                format!(
                    "left while processing {offset} (begun #{seq}) had not finished: in-flight work \
                         abandoned at shutdown (stop #{stop_seq})"
                ),
            );
            out.push(v.partition(&tp).offsets([offset]));
        }
        for (tp, processed, committed) in gaps {
            let committed = committed.map_or_else(|| "none".to_string(), |c| c.to_string());
            let v = violation(
                group,
                e,
                format!(
                    "left having processed up to {processed} but with its last accepted commit at \
                         {committed}: shutdown did not commit what it processed (stop #{stop_seq})"
                ),
            );
            out.push(v.partition(&tp).offsets([processed]));
        }
    }
    out
}

/// `client`'s member ids first seen in a generation formed after `since` (from the start
/// without) and before `until` (a generation formed at the instant of the leave is the next
/// incarnation's: the leaving member is not in it), each with when it became the incarnation's.
fn incarnation_ids<'f>(
    facts: &'f Facts,
    client: &str,
    since: Option<Duration>,
    until: Duration,
) -> BTreeMap<&'f str, Duration> {
    let mut first_seen: BTreeMap<&str, Duration> = BTreeMap::new();
    for g in &facts.generations {
        for m in g.members.iter().filter(|m| m.client_id == client) {
            let at = first_seen.entry(m.member_id.as_str()).or_insert(g.at);
            *at = (*at).min(g.at);
        }
    }
    // An id is its incarnation's from when it was handed out, when the coordinator says: a
    // crashed incarnation's held JoinGroup may complete (first be seen) after its crash.
    for (id, at) in first_seen.iter_mut() {
        if let Some(handed) = facts.handed_out.get(*id) {
            *at = *handed;
        }
    }
    first_seen.retain(|_, at| since.is_none_or(|s| *at > s) && *at < until);
    first_seen
}

fn violation(group: &str, e: &Event, message: String) -> Violation {
    Violation::new(Q8, group, format!("#{} at {:?}: {message}", e.seq, e.at)).member(&e.member)
}

impl Model for ShutdownDrains {
    fn name(&self) -> &'static str {
        Q8
    }

    fn on_event(&mut self, e: &Event) -> Vec<Violation> {
        self.holds.apply(e);
        let held = self.holds.held(&e.member);
        let group = self.group.as_str();
        let m = self.members.entry(e.member.clone()).or_default();
        let mut out = Vec::new();
        let after_leave = m.left.map(|(seq, at)| format!("after it left the group (#{seq} at {at:?})"));
        match &e.what {
            What::Assign(tp) => {
                // A new hold; after a leave, a new incarnation.
                m.left = None;
                m.lost = None;
                m.processed.remove(tp);
                if m.stop.is_some() {
                    m.owed.insert(tp.clone());
                }
            }
            What::Begin { tp, offset } => {
                m.in_flight.insert((tp.clone(), *offset), e.seq);
                if let Some(when) = after_leave {
                    let v = violation(group, e, format!("began {offset} {when}")).partition(tp).offsets([*offset]);
                    out.push(v);
                }
            }
            What::Process { tp, offset, .. } | What::Error { tp, offset, .. } => {
                m.in_flight.remove(&(tp.clone(), *offset));
                if matches!(e.what, What::Process { .. }) {
                    let last = m.processed.entry(tp.clone()).or_insert(*offset);
                    *last = (*last).max(*offset);
                }
                if let Some(when) = after_leave {
                    let v = violation(group, e, format!("{} {offset} {when}", e.what.name()))
                        .partition(tp)
                        .offsets([*offset]);
                    out.push(v);
                }
            }
            What::Commit { tp, offset, answer } => {
                if answer.may_have_stored() {
                    let c = m.committed.entry(tp.clone()).or_insert(*offset);
                    *c = (*c).max(*offset);
                }
                if m.stop.is_some() {
                    match answer {
                        Answer::Unknown => m.cut_off = true,
                        Answer::Refused(ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID) => {
                            m.cut_off = true;
                            m.owed.remove(tp);
                        }
                        _ => {}
                    }
                }
                if let Some(when) = after_leave {
                    let v = violation(group, e, format!("committed {offset} ({answer}) {when}"))
                        .partition(tp)
                        .offsets([*offset]);
                    out.push(v);
                }
            }
            What::Stop => {
                if m.stop.is_none() {
                    m.stop = Some((e.seq, e.at));
                    m.owed = held;
                }
            }
            What::Leave => out.extend(on_leave(&mut self.drained, group, m, e)),
            What::Crash => {
                *m = Member { ended: Some(e.at), ..Member::default() };
            }
            What::Revoke { tp, lost: true } if m.stop.is_some() => {
                m.cut_off = true;
                m.owed.remove(tp);
            }
            What::Revoke { lost: true, .. } => m.lost = Some(e.at),
            What::Revoke { .. } | What::Heal { .. } => {}
        }
        out
    }

    fn finish(&mut self, facts: &Facts, _end: Duration) -> Vec<Violation> {
        let mut out = Vec::new();
        for (name, m) in &self.members {
            if let Some((seq, at)) = m.stop {
                let in_flight: Vec<i64> = m.in_flight.keys().map(|(_, o)| *o).collect();
                let mut v = Violation::new(
                    Q8,
                    &self.group,
                    format!(
                        "told to stop (#{seq} at {at:?}) and never left the group{}",
                        if in_flight.is_empty() {
                            String::new()
                        } else {
                            format!("; records still in flight: {}", ranges(&in_flight))
                        }
                    ),
                )
                .member(name);
                v.offsets = in_flight;
                out.push(v);
            }
        }
        for Drained { member, stop_at, leave_seq, cut_off, since, leave_at, lost_before_stop } in &self.drained {
            let mut ids = incarnation_ids(facts, member, *since, *leave_at);
            // Lost before the stop: the ids it had then are void to it (librdkafka drops its
            // member id when its session times out); only those it got since are judged.
            if let Some(lost) = lost_before_stop {
                ids.retain(|_, at| *at >= *lost);
            }
            let ids: BTreeSet<&str> = ids.into_keys().collect();
            if ids.is_empty() || facts.is_static(member) || *cut_off {
                continue;
            }
            let gone_before_stop = |id: &&str| facts.departures.iter().any(|d| d.at < *stop_at && d.member_id == *id);
            if ids.iter().all(gone_before_stop) {
                continue;
            }
            let after_stop =
                |d: &&crate::models::facts::Departure| d.at >= *stop_at && ids.contains(d.member_id.as_str());
            // A LeaveGroup of any of the ids proves the stopped incarnation left: a crashed
            // predecessor whose id was first seen in the same generation sends none.
            if facts.departures.iter().filter(after_stop).any(|d| d.cause == DepartureCause::Left) {
                continue;
            }
            let seen = facts.departures.iter().find(after_stop);
            let problem = match seen {
                Some(d) if d.cause == DepartureCause::Left => continue,
                // Let go by the coordinator while it drained: expired, or removed from a
                // rebalance it did not rejoin (a draining member holds the rebalance until its
                // commits are done, then the rebalance timeout removes it).
                Some(d)
                    if matches!(d.cause, DepartureCause::SessionExpired | DepartureCause::Removed(_))
                        && d.at < *leave_at =>
                {
                    continue;
                }
                Some(d) => format!("the coordinator saw member id {} go by {:?} at {:?}", d.member_id, d.cause, d.at),
                None => "the coordinator saw none of its member ids leave after the stop".to_string(),
            };
            out.push(
                Violation::new(
                    Q8,
                    &self.group,
                    format!(
                        "left (#{leave_seq}) without LeaveGroup after its stop at {stop_at:?}: {problem}; its \
                         partitions wait for the session timeout"
                    ),
                )
                .member(member),
            );
        }
        out
    }
}
