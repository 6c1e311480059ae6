//! What consumers did, in order.

use std::time::Duration;

use crate::models::event::{Event, What};

/// What consumers did, in order (see the module docs). Build one by hand with
/// [`ConsumerHistory::push`], or take one from a [`Recorder`](crate::models::Recorder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerHistory {
    pub(super) events: Vec<Event>,
    pub(super) end: Duration,
    pub(super) dropped: u64,
}

impl ConsumerHistory {
    /// Events kept; beyond, events are counted as dropped and the history cannot be judged.
    pub const EVENTS_MAX: usize = 1_000_000;

    /// An empty history.
    pub fn new() -> ConsumerHistory {
        ConsumerHistory::default()
    }

    /// Appends an event at `at` (cluster clock); its `seq` is its position. Returns it.
    pub fn push(&mut self, at: Duration, group: &str, member: &str, what: What) -> &Event {
        let seq = self.events.len() as u64 + self.dropped;
        self.push_event(Event { seq, at, group: group.to_string(), member: member.to_string(), what });
        self.events.last().expect("just pushed")
    }

    pub(super) fn push_event(&mut self, event: Event) {
        self.end = self.end.max(event.at);
        if self.events.len() >= Self::EVENTS_MAX {
            self.dropped += 1;
            return;
        }
        self.events.push(event);
    }

    /// Says the history goes on until `end` (at least its last event): when it was taken.
    pub fn ends_at(mut self, end: Duration) -> ConsumerHistory {
        self.end = self.end.max(end);
        self
    }

    /// The events, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// When the history ends: when it was taken, or its last event.
    pub fn end(&self) -> Duration {
        self.end
    }

    /// Events not kept (beyond [`ConsumerHistory::EVENTS_MAX`]).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}
