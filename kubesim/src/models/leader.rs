//! Leader overlap: from a Lease's timeline and the writes each replica made, two replicas acting
//! as leader overlap at most by a bound computed from the lease settings, and no replica writes
//! after its lease expired plus that bound.
//!
//! A replica *believes it leads* from each write it made to the Lease naming itself holder
//! (acquire or renew: [`LeaseChange::actor`] equal to [`LeaseChange::holder`]) until that write's
//! fake time plus the lease duration (`spec.leaseDurationSeconds` as written, else
//! [`LeaseSettings::lease_duration`]); its belief intervals are merged. This is what a replica
//! following client-go's or kube-lease-manager's rules may assume without hearing from the
//! server again. A write to the Lease by anyone else does not shorten it: the replica does not
//! know of it.
//!
//! With a Lease updated under optimistic concurrency (resourceVersion preconditions, 409 handled)
//! a challenger takes over only once it saw the holder's `renewTime + leaseDuration` pass, so the
//! two beliefs overlap only by what separates a holder's clock reading (`renewTime`) from its
//! write's commit, plus a retry period for a renewal in flight when the challenger looked: the
//! bound is [`LeaseSettings::retry_period`] plus [`LeaseSettings::slack`] (network and server
//! latency; never zero). A Lease written without preconditions (a merge patch with no
//! resourceVersion) lets two replicas renew over each other, and their beliefs overlap without
//! end.
//!
//! Identities: a replica's Lease writes and its other writes must name it the same way — its
//! holder identity as the `User-Agent` (`kubesim::client::client_as`) or as the field manager.

use std::collections::BTreeMap;
use std::time::Duration;

use sim::Oracle;
use sim::check::LivenessBound;

use crate::introspect::{LeaseChange, Write};
use crate::models::violation::Violation;

/// The oracle of [`leader_overlap`].
pub const LEADER_OVERLAP: Oracle = Oracle::new("kube-leader-overlap");
/// The oracle of [`writes_after_expiry`].
pub const WRITE_AFTER_EXPIRY: Oracle = Oracle::new("kube-write-after-lease-expiry");

/// The leader election's settings the bound is computed from. Defaults are client-go's
/// (`LeaseDuration` 15 s, `RenewDeadline` 10 s, `RetryPeriod` 2 s) and a slack of 1 s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    /// How long a holder's lease lasts after its last renewal, when the Lease does not say.
    pub lease_duration: Duration,
    /// How long a holder keeps trying to renew before it steps down (informational: a holder may
    /// act until its lease expires, which is later).
    pub renew_deadline: Duration,
    /// How often a replica tries to acquire or renew.
    pub retry_period: Duration,
    /// Network, server and clock slack: what separates a replica's clock reading from its
    /// write's commit.
    pub slack: Duration,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        LeaseSettings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            slack: Duration::from_secs(1),
        }
    }
}

impl LeaseSettings {
    /// The overlap allowed between two replicas' beliefs that they lead (see the module docs),
    /// its parts named.
    pub fn overlap_bound(&self) -> LivenessBound {
        LivenessBound::new().plus("retry period", self.retry_period).plus("network/clock slack", self.slack)
    }
}

/// One replica's belief that it leads: `[from, until)` in fake time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Belief {
    /// The acquire or renew that began it.
    pub from: Duration,
    /// Its last renewal plus the lease duration.
    pub until: Duration,
}

/// Each holder's merged belief intervals, in time order (see the module docs).
pub fn beliefs(timeline: &[LeaseChange], settings: &LeaseSettings) -> BTreeMap<String, Vec<Belief>> {
    let mut out: BTreeMap<String, Vec<Belief>> = BTreeMap::new();
    for change in timeline {
        let Some(holder) = change.holder.as_deref().filter(|h| !h.is_empty() && *h == change.actor) else {
            // A replica writing the Lease away from itself (a release: holder cleared, as
            // client-go's `ReleaseOnCancel`) stops believing it leads at that write.
            if let Some(last) = out.get_mut(&change.actor).and_then(|l| l.last_mut()) {
                last.until = last.until.min(change.at.max(last.from));
            }
            continue;
        };
        let duration = change.duration_s.map_or(settings.lease_duration, Duration::from_secs);
        let belief = Belief { from: change.at, until: change.at + duration };
        let list = out.entry(holder.to_string()).or_default();
        match list.last_mut() {
            Some(last) if belief.from <= last.until => last.until = last.until.max(belief.until),
            _ => list.push(belief),
        }
    }
    out
}

/// Two different replicas believing they lead for longer than [`LeaseSettings::overlap_bound`]
/// (each pair of overlapping intervals is judged on its own length).
pub fn leader_overlap(timeline: &[LeaseChange], settings: &LeaseSettings) -> Vec<Violation> {
    let bound = settings.overlap_bound();
    let all = beliefs(timeline, settings);
    let holders: Vec<(&String, &Vec<Belief>)> = all.iter().collect();
    let mut out = Vec::new();
    for (i, (a, a_beliefs)) in holders.iter().enumerate() {
        for (b, b_beliefs) in &holders[i + 1..] {
            for x in a_beliefs.iter() {
                for y in b_beliefs.iter() {
                    let (from, until) = (x.from.max(y.from), x.until.min(y.until));
                    if until > from && until - from > bound.total() {
                        out.push(Violation::new(
                            &LEADER_OVERLAP,
                            from,
                            format!(
                                "{a} and {b} both believed they led the Lease for {:?} (from {from:?} to {until:?}), \
                                 more than the bound {:?} ({bound})",
                                until - from,
                                bound.total()
                            ),
                        ));
                    }
                }
            }
        }
    }
    out.sort_by_key(|v| v.at);
    out
}

/// Writes by a replica that believed it led (it held the Lease at some point) made after its
/// last belief ended plus the bound, while it did not hold the Lease anew. Writes to the Lease
/// itself (`lease`: its namespace and name) are the election and are skipped.
pub fn writes_after_expiry(
    timeline: &[LeaseChange],
    writes: &[Write],
    lease: (&str, &str),
    settings: &LeaseSettings,
) -> Vec<Violation> {
    let bound = settings.overlap_bound();
    let all = beliefs(timeline, settings);
    let mut out = Vec::new();
    for w in writes {
        if w.object.resource == "leases.coordination.k8s.io"
            && (w.object.namespace.as_str(), w.object.name.as_str()) == lease
        {
            continue;
        }
        let Some(held) = all.get(&w.actor) else { continue };
        let Some(last) = held.iter().rev().find(|b| b.from <= w.at) else { continue };
        if w.at > last.until + bound.total() {
            out.push(Violation::new(
                &WRITE_AFTER_EXPIRY,
                w.at,
                format!(
                    "{} wrote {} ({} rv={}) at {:?}, after its lease expired at {:?} plus the bound {:?} ({bound})",
                    w.actor,
                    w.object,
                    w.verb.name(),
                    w.rv,
                    w.at,
                    last.until,
                    bound.total()
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::introspect::{ObjectRef, Verb};

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn change(at: u64, actor: &str, holder: &str) -> LeaseChange {
        LeaseChange {
            rv: at,
            at: s(at),
            actor: actor.into(),
            holder: Some(holder.into()),
            duration_s: Some(15),
            renew_time: None,
            transitions: None,
        }
    }

    #[test]
    fn renewals_merge_and_a_takeover_after_expiry_does_not_overlap() {
        let t = [change(0, "a", "a"), change(2, "a", "a"), change(4, "a", "a"), change(19, "b", "b")];
        let b = beliefs(&t, &LeaseSettings::default());
        assert_eq!(b["a"], vec![Belief { from: s(0), until: s(19) }]);
        assert!(leader_overlap(&t, &LeaseSettings::default()).is_empty());
    }

    #[test]
    fn overlap_within_the_bound_passes_and_beyond_fails_naming_the_terms() {
        // b takes over 2 s early: 2 s < 3 s bound.
        let ok = [change(0, "a", "a"), change(13, "b", "b")];
        assert!(leader_overlap(&ok, &LeaseSettings::default()).is_empty());
        // Without preconditions both renew over each other.
        let bad = [change(0, "a", "a"), change(1, "b", "b"), change(2, "a", "a"), change(3, "b", "b")];
        let v = leader_overlap(&bad, &LeaseSettings::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("retry period 2s"), "{}", v[0].message);
        assert_eq!(v[0].oracle, LEADER_OVERLAP);
    }

    #[test]
    fn a_write_naming_another_holder_is_not_a_belief() {
        // a's write releasing to b (holder b, actor a) does not make b believe.
        let t = [change(0, "a", "a"), change(1, "a", "b")];
        let b = beliefs(&t, &LeaseSettings::default());
        assert!(!b.contains_key("b"));
    }

    fn write(at: u64, actor: &str, name: &str) -> Write {
        Write {
            rv: at,
            at: s(at),
            verb: Verb::Update,
            object: ObjectRef { resource: "configmaps".into(), namespace: "default".into(), name: name.into() },
            actor: actor.into(),
            after: None,
            diff: String::new(),
        }
    }

    #[test]
    fn a_write_after_the_lease_expired_plus_the_bound_is_found() {
        let t = [change(0, "a", "a"), change(16, "b", "b")];
        let writes = [write(10, "a", "x"), write(17, "a", "y"), write(19, "a", "z"), write(20, "b", "w")];
        let v = writes_after_expiry(&t, &writes, ("default", "lock"), &LeaseSettings::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("configmaps/default/z"), "{}", v[0].message);
    }
}
