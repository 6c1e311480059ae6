//! A nemesis: a schedule of network faults drawn by the swarm.
//!
//! [`Nemesis::schedule`] draws, from the run's seed, which kinds of fault happen (each kind is a
//! swarm flag, so some runs have none of a kind), how many, when (inside a window of fake time)
//! and for how long, and schedules each as a control with its release. Every fault heals by the
//! end of the window, or at [`crate::node::System::heal`] (or `stop`) if that comes first (a
//! fault in force is lifted then, one to come is cancelled), so a liveness phase can follow.
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

use std::ops::Range;
use std::time::Duration;

use crate::fault::EndAtHeal;
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
    /// acting inside `window`: fake time since the run started, not since the call (the same
    /// shape as [`crate::node::System::schedule_lifecycle`]'s window).
    pub fn new<S: AsRef<str>>(hosts: &[S], window: Range<Duration>) -> Nemesis {
        Nemesis {
            hosts: hosts.iter().map(|h| h.as_ref().to_string()).collect(),
            window: (window.start, window.end.max(window.start)),
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
    /// `nemesis.count` (0..=max per kind) and, when it is not 0, the kinds `nemesis.partitions`,
    /// `nemesis.resets`, `nemesis.lost_responses` (flags); with a count of 0 the kinds are not
    /// drawn (so the swarm line does not name kinds that cannot happen) unless `SIM_SWARM`
    /// overrides them.
    ///
    /// # Panics
    /// If a host is a service's routing name (`kv`) rather than a host (`kv-0`): a fault on it
    /// would select nothing.
    pub fn schedule(&self, ctx: &crate::run::Ctx) -> usize {
        let net = ctx.net();
        for host in &self.hosts {
            assert!(
                net.endpoints(host).is_none(),
                "Nemesis: {host:?} is a service's routing name, not a host: pass its replicas (System::replicas)"
            );
        }
        let swarm = ctx.swarm();
        let count = swarm.int("nemesis.count", 0..=self.max_faults);
        let kind = |name: &str| (count > 0 || swarm.overridden(name)) && swarm.flag(name, 0.5);
        let kinds = [
            ("partition", kind("nemesis.partitions")),
            ("reset", kind("nemesis.resets")),
            ("lost-response", kind("nemesis.lost_responses")),
        ];
        if self.hosts.len() < 2 {
            return 0;
        }
        let mut draws = ctx.source("net/nemesis");
        let heal = ctx.extension::<EndAtHeal>();
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
                let release = match kind {
                    "partition" => net.at(at, Partition::isolate(a)).lasting_releasable(last),
                    "reset" => net.at(at, Reset { conn: ConnSel::To(a) }).lasting_releasable(Duration::from_millis(1)),
                    _ => net
                        .at(at, HoldAfterBytes { conn: ConnSel::To(a), direction: Direction::ToClient, bytes: 0 })
                        .lasting_releasable(last),
                };
                heal.add(release);
                scheduled += 1;
            }
        }
        scheduled
    }
}
