//! A nemesis: a schedule of network faults drawn by the swarm.
//!
//! [`Nemesis::schedule`] draws, from the run's seed, which kinds of fault happen (each kind is a
//! swarm flag, so some runs have none of a kind), how many, when (inside a window of fake time)
//! and for how long, and schedules each as a control with its release. Every fault heals by the
//! end of the window, so a liveness phase can follow.
//!
//! The faults, each kind a swarm flag (p = 0.5), `nemesis.count` of each (0..=`max_faults`):
//! - **partition** (`nemesis.partitions`): one host isolated ([`Partition::isolate`]) for up to
//!   `longest`: bytes to and from it queue, none is lost;
//! - **reset** (`nemesis.resets`): the connections to one host reset ([`Reset`]);
//! - **lost response** (`nemesis.lost_responses`): every byte from one host to its clients held
//!   ([`HoldAfterBytes`] toward the client) for up to `longest`: requests are processed, their
//!   responses do not arrive until the hold ends.
//!
//! Hosts are host names: a service's replicas (`kv-0`, `kv-1`, as
//! [`crate::node::System::replicas`] returns them) or hosts made with [`crate::net::Network::host`],
//! not a service's routing name (`kv`), which has no host of its own. Times are fake time since
//! the run started.

use std::time::Duration;

use crate::net::control::{ConnSel, Direction, HoldAfterBytes, Partition, Reset};

/// A swarm-drawn fault schedule over some hosts.
#[derive(Clone, Debug)]
pub struct Nemesis {
    hosts: Vec<String>,
    window: (Duration, Duration),
    max_faults: u64,
    longest: Duration,
}

impl Nemesis {
    /// A nemesis over these hosts (host names: replicas such as `kv-0`, not a service's name),
    /// acting between `start` and `end`: fake time since the run started, not since the call.
    pub fn new<S: AsRef<str>>(hosts: &[S], start: Duration, end: Duration) -> Nemesis {
        Nemesis {
            hosts: hosts.iter().map(|h| h.as_ref().to_string()).collect(),
            window: (start, end.max(start)),
            max_faults: 6,
            longest: Duration::from_secs(5),
        }
    }

    /// At most this many faults of each kind (default 6).
    pub fn max_faults(mut self, n: u64) -> Nemesis {
        self.max_faults = n;
        self
    }

    /// The longest a fault lasts (default 5 s).
    pub fn longest(mut self, d: Duration) -> Nemesis {
        self.longest = d.max(Duration::from_millis(1));
        self
    }

    /// Draws and schedules the faults; returns how many were scheduled. Swarm dimensions:
    /// `nemesis.partitions`, `nemesis.resets`, `nemesis.lost_responses` (flags), and
    /// `nemesis.count` (0..=max per kind).
    pub fn schedule(&self, ctx: &crate::run::Ctx) -> usize {
        let net = ctx.net();
        let swarm = ctx.swarm();
        let kinds = [
            ("partition", swarm.flag("nemesis.partitions", 0.5)),
            ("reset", swarm.flag("nemesis.resets", 0.5)),
            ("lost-response", swarm.flag("nemesis.lost_responses", 0.5)),
        ];
        let count = swarm.int("nemesis.count", 0..=self.max_faults);
        if self.hosts.len() < 2 {
            return 0;
        }
        let mut draws = ctx.source("net/nemesis");
        let mut scheduled = 0;
        let (start, end) = self.window;
        for (kind, on) in kinds {
            if !on {
                continue;
            }
            for _ in 0..count {
                let at = draws.duration(start..=end);
                let last = draws
                    .duration(Duration::from_millis(1)..=self.longest)
                    .min(end.saturating_sub(at).max(Duration::from_millis(1)));
                let a = draws.choose(&self.hosts).cloned().unwrap_or_default();
                match kind {
                    "partition" => net.at(at, Partition::isolate(a)).lasting(last),
                    "reset" => net.at(at, Reset { conn: ConnSel::To(a) }).lasting(Duration::from_millis(1)),
                    _ => net
                        .at(at, HoldAfterBytes { conn: ConnSel::To(a), direction: Direction::ToClient, bytes: 0 })
                        .lasting(last),
                };
                scheduled += 1;
            }
        }
        scheduled
    }
}
