//! Which member holds which partition, from the members' own events.
//!
//! A hold begins at [`What::Assign`] and ends at [`What::Revoke`], the member's
//! [`What::Leave`] or [`What::Crash`], or a new assignment of the same partition (a restarted
//! member that did not record its revocation). Each hold gets its own number, so a member
//! assigned the same partition again starts a new hold. A member that never recorded an
//! assignment (a consumer that assigns partitions itself) has no known holds.

use std::collections::{BTreeMap, BTreeSet};

use crate::models::event::{Event, TopicPartition, What};

#[derive(Debug, Default)]
pub(crate) struct Holds {
    /// member → partition → hold number.
    current: BTreeMap<String, BTreeMap<TopicPartition, u64>>,
    /// Members that recorded at least one assignment.
    tracked: BTreeSet<String>,
    next: u64,
}

/// A hold that ended with this event.
pub(crate) type Ended = Vec<(TopicPartition, u64)>;

impl Holds {
    /// Applies an event; returns the holds it ended.
    pub(crate) fn apply(&mut self, e: &Event) -> Ended {
        match &e.what {
            What::Assign(tp) => {
                self.tracked.insert(e.member.clone());
                self.next += 1;
                let old = self.current.entry(e.member.clone()).or_default().insert(tp.clone(), self.next);
                old.map(|h| vec![(tp.clone(), h)]).unwrap_or_default()
            }
            What::Revoke { tp, .. } => self
                .current
                .get_mut(&e.member)
                .and_then(|held| held.remove(tp))
                .map(|h| vec![(tp.clone(), h)])
                .unwrap_or_default(),
            What::Leave | What::Crash => {
                self.current.remove(&e.member).map(|held| held.into_iter().collect()).unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }

    /// The member's current hold of `tp`: `Some(number)` when held, `None` when not held;
    /// `Some(0)` for a member with no known holds (it never recorded an assignment).
    pub(crate) fn hold(&self, member: &str, tp: &TopicPartition) -> Option<u64> {
        if !self.tracked.contains(member) {
            return Some(0);
        }
        self.current.get(member).and_then(|held| held.get(tp)).copied()
    }

    /// Whether the member recorded assignments (so its holds are known).
    pub(crate) fn tracked(&self, member: &str) -> bool {
        self.tracked.contains(member)
    }

    /// The partitions the member holds now.
    pub(crate) fn held(&self, member: &str) -> BTreeSet<TopicPartition> {
        self.current.get(member).map(|held| held.keys().cloned().collect()).unwrap_or_default()
    }
}
