//! Faults and scripted controls: typed values that change what the network does, each recorded in
//! the history when installed and when released.
//!
//! Only what TCP itself can produce: bytes are held (clogs, partitions, holds) and delivered in
//! order once released, never lost while the stream goes on; a connection can be reset, or go
//! silent for good (a dead machine, a black-holed path) so the peers learn of it only from their
//! own timeouts; dials can be refused or black-holed; a listener can stop accepting; a reader can
//! be throttled or get short reads; a write can be cut short by a reset. Never duplication,
//! reordering or corruption.
//!
//! Each control is a [`Fault`] on the [`Network`] (see [`crate::fault`]): install it with
//! [`super::Network::install`] (it lasts until the returned [`crate::fault::FaultGuard`] is dropped
//! or released: the hold-until form), or schedule it at fake times with [`super::Network::at`] and
//! [`crate::fault::Scheduled::lasting`]. Decisions are keyed on identity — host names,
//! connection ids, ports, listener addresses — never on how many times something was called.

use std::net::SocketAddr;
use std::time::Duration;

use super::kernel::{ConnId, HostMode};
use super::network::Network;
use super::rules::Rule;
pub use super::rules::{ConnSel, Direction, Side};
use crate::fault::{Fault, Undo};

fn add_rule(net: &Network, rule: Rule) -> Undo<Network> {
    let id = {
        let mut st = net.core.lock();
        let id = st.next_id();
        st.rules.insert(id, rule);
        id
    };
    net.reschedule_all();
    Box::new(move |net: &Network| {
        net.core.lock().rules.remove(&id);
        net.reschedule_all();
    })
}

/// A one-way clog: segments from hosts `from` to hosts `to` wait (bytes queue, none are lost),
/// and handshakes across it go unanswered (and are retried) until it is released.
#[derive(Clone, Debug)]
pub struct Clog {
    from: Vec<String>,
    to: Vec<String>,
}

impl Clog {
    /// Clogs the link from one host to another.
    pub fn link(from: impl Into<String>, to: impl Into<String>) -> Clog {
        Clog { from: vec![from.into()], to: vec![to.into()] }
    }

    /// Clogs everything a host sends.
    pub fn outbound(host: impl Into<String>) -> Clog {
        Clog { from: vec![host.into()], to: Vec::new() }
    }

    /// Clogs everything a host receives.
    pub fn inbound(host: impl Into<String>) -> Clog {
        Clog { from: Vec::new(), to: vec![host.into()] }
    }
}

impl Fault<Network> for Clog {
    fn describe(&self) -> String {
        format!("clog {:?} -> {:?}", self.from, self.to)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        add_rule(net, Rule::Clog { from: self.from.clone(), to: self.to.clone(), except: Vec::new() })
    }
}

/// A two-way partition: two sides that cannot reach each other; bytes between them queue.
#[derive(Clone, Debug)]
pub struct Partition {
    a: Vec<String>,
    b: Vec<String>,
    /// `b` empty means "every other host" (not "nobody").
    isolate: bool,
}

impl Partition {
    /// Partitions hosts `a` from hosts `b` (an empty side makes it a no-op, recorded as such).
    pub fn between<S: AsRef<str>>(a: &[S], b: &[S]) -> Partition {
        let names = |side: &[S]| side.iter().map(|s| s.as_ref().to_string()).collect();
        Partition { a: names(a), b: names(b), isolate: false }
    }

    /// Cuts one host off from every other host.
    pub fn isolate(host: impl Into<String>) -> Partition {
        Partition { a: vec![host.into()], b: Vec::new(), isolate: true }
    }
}

impl Fault<Network> for Partition {
    fn describe(&self) -> String {
        if self.b.is_empty() {
            format!("partition: isolate {:?}", self.a)
        } else {
            format!("partition {:?} | {:?}", self.a, self.b)
        }
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        if self.a.is_empty() || (self.b.is_empty() && !self.isolate) {
            net.core.record("net.control.ignored", "network", "partition with an empty side");
            return Box::new(|_| {});
        }
        let one = add_rule(net, Rule::Clog { from: self.a.clone(), to: self.b.clone(), except: Vec::new() });
        let two = add_rule(net, Rule::Clog { from: self.b.clone(), to: self.a.clone(), except: Vec::new() });
        Box::new(move |net| {
            one(net);
            two(net);
        })
    }
}

/// Holds one direction of the selected connections: bytes wait until released.
#[derive(Clone, Debug)]
pub struct Hold {
    /// The connections.
    pub conn: ConnSel,
    /// The direction held.
    pub direction: Direction,
}

impl Fault<Network> for Hold {
    fn describe(&self) -> String {
        format!("hold {:?} of {}", self.direction, self.conn.describe())
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        add_rule(net, Rule::Hold { conn: self.conn.clone(), direction: self.direction })
    }
}

/// Delivers the first `bytes` of a direction of the selected connections, then holds the rest:
/// "the request was processed, the response was lost" (with [`Direction::ToClient`] and 0).
#[derive(Clone, Debug)]
pub struct HoldAfterBytes {
    /// The connections.
    pub conn: ConnSel,
    /// The direction.
    pub direction: Direction,
    /// Bytes of the direction (counted from the connection's start) delivered before holding.
    pub bytes: u64,
}

impl Fault<Network> for HoldAfterBytes {
    fn describe(&self) -> String {
        format!("hold {:?} of {} after {} bytes", self.direction, self.conn.describe(), self.bytes)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        add_rule(net, Rule::HoldAfter { conn: self.conn.clone(), direction: self.direction, bytes: self.bytes })
    }
}

/// Resets the selected connections (both ends see RST) when installed, and every selected
/// connection established while installed.
#[derive(Clone, Debug)]
pub struct Reset {
    /// The connections.
    pub conn: ConnSel,
}

impl Fault<Network> for Reset {
    fn describe(&self) -> String {
        format!("reset {}", self.conn.describe())
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        net.reset_where(&self.conn);
        let sel = self.conn.clone();
        net.add_on_established(std::sync::Arc::new(move |net, info| {
            if sel.matches(info) {
                net.reset_where(&ConnSel::Id(info.id));
            }
        }))
    }
}

/// Makes the selected connections silent for good: nothing more is delivered either way, no FIN,
/// no RST; each peer learns of it only from its own timeouts (a black-holed path). Applies to
/// matching connections when installed and to those established while installed; releasing it
/// does not revive a silenced connection (its bytes are gone).
#[derive(Clone, Debug)]
pub struct Silence {
    /// The connections.
    pub conn: ConnSel,
}

impl Fault<Network> for Silence {
    fn describe(&self) -> String {
        format!("silence {}", self.conn.describe())
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        net.silence_where(&self.conn);
        let sel = self.conn.clone();
        net.add_on_established(std::sync::Arc::new(move |net, info| {
            if sel.matches(info) {
                net.silence_where(&ConnSel::Id(info.id));
            }
        }))
    }
}

/// Refuses new dials to a target (a host or service name, or `name:port` / `ip:port`):
/// `ECONNREFUSED`, as a closed port answers.
#[derive(Clone, Debug)]
pub struct RefuseDials {
    /// The target as dialed.
    pub target: String,
}

impl Fault<Network> for RefuseDials {
    fn describe(&self) -> String {
        format!("refuse dials to {}", self.target)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        add_rule(net, Rule::Refuse { target: self.target.clone() })
    }
}

/// Black-holes new dials to a target: SYNs vanish, the dialer retries (1 s, 3 s, 7 s, …) and gets
/// `ETIMEDOUT` after its SYN retries (127 s with Linux's default of 6), unless it gives up first.
#[derive(Clone, Debug)]
pub struct BlackholeDials {
    /// The target as dialed.
    pub target: String,
}

impl Fault<Network> for BlackholeDials {
    fn describe(&self) -> String {
        format!("black-hole dials to {}", self.target)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        add_rule(net, Rule::Blackhole { target: self.target.clone() })
    }
}

/// Pauses a listener: `accept` does not return while installed (a stopped or overloaded process);
/// the kernel still completes handshakes into the accept queue until it holds backlog + 1, then
/// drops SYNs.
#[derive(Clone, Debug)]
pub struct PauseListener {
    /// The listener's address, as its `local_addr` reports it (a loopback address such as
    /// `127.0.0.1:P` or `[::1]:P` is every host's: it pauses each host's listener there).
    pub addr: SocketAddr,
}

impl Fault<Network> for PauseListener {
    fn describe(&self) -> String {
        format!("pause listener {}", self.addr)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        let undo = add_rule(net, Rule::Pause { addr: self.addr });
        Box::new(move |net| {
            undo(net);
            net.wake_listeners();
        })
    }
}

/// Throttles reads at one side of the selected connections: at most `bytes` per `every`
/// (a slow consumer; the writer blocks once the send bound fills).
#[derive(Clone, Debug)]
pub struct ThrottleReader {
    /// The connections.
    pub conn: ConnSel,
    /// The reading side.
    pub side: Side,
    /// Bytes per interval.
    pub bytes: usize,
    /// The interval.
    pub every: Duration,
}

impl Fault<Network> for ThrottleReader {
    fn describe(&self) -> String {
        format!(
            "throttle {:?} reads of {} to {} bytes per {:?}",
            self.side,
            self.conn.describe(),
            self.bytes,
            self.every
        )
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        add_rule(
            net,
            Rule::Throttle { conn: self.conn.clone(), side: self.side, bytes: self.bytes.max(1), every: self.every },
        )
    }
}

/// Short reads at one side of the selected connections: each read returns at most `bytes`.
#[derive(Clone, Debug)]
pub struct ShortReads {
    /// The connections.
    pub conn: ConnSel,
    /// The reading side.
    pub side: Side,
    /// The most one read returns.
    pub bytes: usize,
}

impl Fault<Network> for ShortReads {
    fn describe(&self) -> String {
        format!("short reads of at most {} bytes at {:?} of {}", self.bytes, self.side, self.conn.describe())
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        add_rule(net, Rule::ShortReads { conn: self.conn.clone(), side: self.side, bytes: self.bytes.max(1) })
    }
}

/// A partial write followed by an error: the side's writes accept `bytes` more bytes (the write
/// that crosses the limit returns a short count), then the connection is reset and the next write
/// fails with `ECONNRESET`. Applies once, to the selected connections open when installed.
#[derive(Clone, Debug)]
pub struct PartialWrite {
    /// The connections.
    pub conn: ConnSel,
    /// The writing side.
    pub side: Side,
    /// Bytes accepted before the reset.
    pub bytes: usize,
}

impl Fault<Network> for PartialWrite {
    fn describe(&self) -> String {
        format!("partial write: {:?} of {} resets after {} more bytes", self.side, self.conn.describe(), self.bytes)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        let mut st = net.core.lock();
        let ids: Vec<ConnId> = st.conns.values().filter(|c| self.conn.matches(&c.info())).map(|c| c.id).collect();
        for id in ids {
            if let Some(c) = st.conns.get_mut(&id) {
                c.ends[self.side.index()].write_budget = Some(self.bytes);
            }
        }
        Box::new(|_| {})
    }
}

/// Makes a host's machine vanish: nothing reaches it and nothing leaves it, its connections go
/// silent and dials to it go unanswered. Released, the host answers again (its old connections
/// stay silent; their bytes are gone).
#[derive(Clone, Debug)]
pub struct SilentHost {
    /// The host's name.
    pub host: String,
}

impl Fault<Network> for SilentHost {
    fn describe(&self) -> String {
        format!("silent host {}", self.host)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        let host = self.host.clone();
        {
            let mut st = net.core.lock();
            let ids: Vec<ConnId> = st.conns.values().filter(|c| c.hosts.contains(&host)).map(|c| c.id).collect();
            for id in ids {
                if let Some(c) = st.conns.get_mut(&id) {
                    c.silent = true;
                }
            }
            st.set_host_mode(&host, HostMode::Silent);
        }
        net.reschedule_all();
        Box::new(move |net| {
            net.core.lock().set_host_mode(&host, HostMode::Up);
        })
    }
}

/// Routes a ClusterIP or headless service name to these backends while installed (the previous
/// endpoints come back on release). Existing connections are not moved.
#[derive(Clone, Debug)]
pub struct Route {
    /// The service name.
    pub name: String,
    /// The backends' host names.
    pub backends: Vec<String>,
}

impl Fault<Network> for Route {
    fn describe(&self) -> String {
        format!("route {} -> {:?}", self.name, self.backends)
    }
    fn install(&self, net: &Network) -> Undo<Network> {
        let Some(previous) = net.endpoints(&self.name) else {
            net.core.record("net.control.ignored", &self.name, "Route: not a service name");
            return Box::new(|_| {});
        };
        let refs: Vec<&str> = self.backends.iter().map(String::as_str).collect();
        net.set_endpoints(&self.name, &refs);
        let name = self.name.clone();
        Box::new(move |net| {
            let refs: Vec<&str> = previous.iter().map(String::as_str).collect();
            let _ = net.set_endpoints(&name, &refs);
        })
    }
}
