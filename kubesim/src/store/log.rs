//! One type's event log: every committed change in resourceVersion order with the object before
//! it (so watches can tell an object entering or leaving a selector, and stale reads can undo
//! changes), compacted by count and age.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::Value;

use crate::store::options::{Compaction, EventKind};

/// One committed change.
#[derive(Clone, Debug)]
pub struct LogEvent {
    /// The global revision it committed at.
    pub rv: u64,
    /// Its elapsed time.
    pub at: Duration,
    /// `Added`, `Modified` or `Deleted`.
    pub kind: EventKind,
    /// The storage key (`ns/name` or `name`).
    pub key: String,
    /// The namespace (`""` for cluster-scoped).
    pub ns: String,
    /// The object after the change (for `Deleted`: the last stored state, at this `rv`).
    pub object: Value,
    /// The object before (`None` for `Added`).
    pub prev: Option<Value>,
}

/// The events of one type since its floor.
#[derive(Clone, Debug, Default)]
pub struct TypeLog {
    events: VecDeque<LogEvent>,
    floor: u64,
    /// The oldest revision a read (a list at a revision, a continue page) may ask for: one past
    /// the floor after a forced compaction, as etcd keeps the revisions from the compaction's on.
    read_floor: u64,
}

impl TypeLog {
    /// An empty log whose history starts after `floor`.
    pub fn new(floor: u64) -> TypeLog {
        TypeLog { events: VecDeque::new(), floor, read_floor: floor }
    }

    /// The oldest resourceVersion a watch or stale read may start from: every event after it is
    /// kept.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// The oldest revision the state can be read at (see [`TypeLog::compact_to`]).
    pub fn read_floor(&self) -> u64 {
        self.read_floor.max(self.floor)
    }

    /// Appends an event (in rv order).
    pub fn push(&mut self, event: LogEvent) {
        self.events.push_back(event);
    }

    /// Drops events beyond `c.max_events` or older than `c.max_age` before `now_at`.
    pub fn compact(&mut self, c: &Compaction, now_at: Duration) {
        while let Some(first) = self.events.front() {
            let too_many = self.events.len() > c.max_events;
            let too_old = now_at.saturating_sub(first.at) > c.max_age;
            if !too_many && !too_old {
                break;
            }
            self.floor = first.rv;
            self.events.pop_front();
        }
    }

    /// Drops every event at or below `rv` and raises the floor to it (a forced compaction, as
    /// etcd's at revision `rv + 1`: a watch from `rv` still sees every later event, but reads at
    /// `rv` or before are gone).
    pub fn compact_to(&mut self, rv: u64) {
        while self.events.front().is_some_and(|e| e.rv <= rv) {
            self.events.pop_front();
        }
        self.floor = self.floor.max(rv);
        self.read_floor = self.read_floor.max(rv + 1);
    }

    /// The events after `rv`, or `Err(floor)` when some of them were compacted away.
    pub fn since(&self, rv: u64) -> Result<impl DoubleEndedIterator<Item = &LogEvent>, u64> {
        if rv < self.floor {
            return Err(self.floor);
        }
        let start = self.events.partition_point(|e| e.rv <= rv);
        Ok(self.events.range(start..))
    }

    /// How many events are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(rv: u64, at_s: u64) -> LogEvent {
        LogEvent {
            rv,
            at: Duration::from_secs(at_s),
            kind: EventKind::Added,
            key: format!("k{rv}"),
            ns: String::new(),
            object: json!({}),
            prev: None,
        }
    }

    #[test]
    fn compaction_raises_the_floor() {
        let mut log = TypeLog::new(4);
        for (rv, at) in [(5, 0), (7, 10), (9, 20), (12, 400)] {
            log.push(ev(rv, at));
        }
        assert_eq!(log.since(4).unwrap().count(), 4);
        assert_eq!(log.since(7).unwrap().map(|e| e.rv).collect::<Vec<_>>(), [9, 12]);
        assert_eq!(log.since(3).err(), Some(4));
        let c = Compaction { max_events: 3, max_age: Duration::from_secs(300) };
        log.compact(&c, Duration::from_secs(20));
        assert_eq!((log.len(), log.floor()), (3, 5));
        log.compact(&c, Duration::from_secs(400));
        assert_eq!((log.len(), log.floor()), (1, 9));
        assert_eq!(log.since(8).err(), Some(9));
        assert_eq!(log.since(9).unwrap().count(), 1);
    }
}
