//! The network's rules: the faults and controls in force ([`Rule`], installed by the controls of
//! [`super::control`]) and every question the fabric, hosts and streams ask of them — is this
//! pipe held, is this link clogged, how many bytes may still pass, is this dial refused or
//! blackholed, is this listener paused, how much may this read return. Evaluated in this one
//! place, against a [`View`] of the network's state.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::config::ConnInfo;
use super::kernel::{Conn, ConnId, HostMode, HostState};

/// The parts of the network's state the rules are evaluated against.
pub(crate) struct View<'a> {
    pub rules: &'a BTreeMap<RuleId, Rule>,
    pub conns: &'a BTreeMap<ConnId, Conn>,
    pub hosts: &'a BTreeMap<String, HostState>,
    /// How many hosts are silent (none: no host lookup is needed).
    pub silent_hosts: usize,
}

impl View<'_> {
    /// A host's mode (an unknown host is silent), as [`super::state::State::host_mode`].
    fn host_mode(&self, name: &str) -> HostMode {
        self.hosts.get(name).map_or(HostMode::Silent, |h| h.mode)
    }
}

pub(crate) type RuleId = u64;

/// Which connections a control applies to.
#[derive(Clone)]
pub enum ConnSel {
    /// Every connection.
    Any,
    /// One connection, by id ([`ConnInfo::id`]).
    Id(u64),
    /// Connections between two hosts, in either direction of dialing.
    Between(String, String),
    /// Connections dialed by this host.
    From(String),
    /// Connections to this host.
    To(String),
    /// Connections to this server port.
    Port(u16),
    /// Connections for which the predicate holds.
    Where(Arc<dyn Fn(&ConnInfo) -> bool + Send + Sync>),
}

impl fmt::Debug for ConnSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl ConnSel {
    /// Connections for which `predicate` holds.
    pub fn matching(predicate: impl Fn(&ConnInfo) -> bool + Send + Sync + 'static) -> ConnSel {
        ConnSel::Where(Arc::new(predicate))
    }

    /// Whether `info` is selected.
    pub fn matches(&self, info: &ConnInfo) -> bool {
        match self {
            ConnSel::Any => true,
            ConnSel::Id(id) => info.id == *id,
            ConnSel::Between(a, b) => {
                (info.client_host == *a && info.server_host == *b) || (info.client_host == *b && info.server_host == *a)
            }
            ConnSel::From(h) => info.client_host == *h,
            ConnSel::To(h) => info.server_host == *h,
            ConnSel::Port(p) => info.server.port() == *p,
            ConnSel::Where(f) => f(info),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            ConnSel::Any => "any connection".to_string(),
            ConnSel::Id(id) => format!("conn#{id}"),
            ConnSel::Between(a, b) => format!("connections between {a} and {b}"),
            ConnSel::From(h) => format!("connections from {h}"),
            ConnSel::To(h) => format!("connections to {h}"),
            ConnSel::Port(p) => format!("connections to port {p}"),
            ConnSel::Where(_) => "connections matching a predicate".to_string(),
        }
    }
}

/// A direction of a connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the client (the dialer) to the server: requests.
    ToServer,
    /// From the server to the client: responses.
    ToClient,
    /// Both directions.
    Both,
}

impl Direction {
    fn includes(self, from: usize) -> bool {
        match self {
            Direction::ToServer => from == 0,
            Direction::ToClient => from == 1,
            Direction::Both => true,
        }
    }
}

/// Which end of a connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Side {
    /// The end that dialed.
    Client,
    /// The end that accepted.
    Server,
}

impl Side {
    pub(crate) fn index(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }
}

/// An installed rule, consulted by the state machine.
pub(crate) enum Rule {
    /// Segments from hosts in `from` to hosts in `to` wait (both lists of names; empty = any).
    Clog { from: Vec<String>, to: Vec<String>, except: Vec<String> },
    /// Segments of selected connections wait, in the given direction.
    Hold { conn: ConnSel, direction: Direction },
    /// Only the first `bytes` of the direction are delivered; the rest waits.
    HoldAfter { conn: ConnSel, direction: Direction, bytes: u64 },
    /// New dials to the target are refused (`ECONNREFUSED`).
    Refuse { target: String },
    /// New dials to the target get no answer (SYNs vanish; `ETIMEDOUT` after the retries).
    Blackhole { target: String },
    /// `accept` on this listener does not return (the kernel still queues up to the backlog).
    Pause { addr: SocketAddr },
    /// Reads at this side return at most `bytes` per `every`.
    Throttle { conn: ConnSel, side: Side, bytes: usize, every: Duration },
    /// Reads at this side return at most `bytes` per call.
    ShortReads { conn: ConnSel, side: Side, bytes: usize },
}

fn host_in(list: &[String], host: &str) -> bool {
    list.is_empty() || list.iter().any(|h| h == host)
}

/// Whether pipe `from` of `conn` is held by a clog or a hold.
pub(crate) fn held(v: &View<'_>, conn: ConnId, from: usize) -> bool {
    let Some(c) = v.conns.get(&conn) else {
        return false;
    };
    let (src, dst) = (&c.hosts[from], &c.hosts[1 - from]);
    // A silent connection or host holds its bytes for good: the writer's bound fills and it
    // blocks, as with a peer that never acknowledges.
    if c.silent
        || (v.silent_hosts > 0 && (v.host_mode(src) == HostMode::Silent || v.host_mode(dst) == HostMode::Silent))
    {
        return true;
    }
    if v.rules.is_empty() {
        return false;
    }
    let info = c.info();
    v.rules.values().any(|rule| match rule {
        Rule::Clog { from: f, to: t, except } => {
            src != dst && host_in(f, src) && host_in(t, dst) && !except.contains(src) && !except.contains(dst)
        }
        Rule::Hold { conn, direction } => direction.includes(from) && conn.matches(&info),
        _ => false,
    })
}

/// Whether a handshake segment from one host to another is held by a clog (it is then lost and
/// retried, as a SYN would be).
pub(crate) fn link_clogged(v: &View<'_>, src: &str, dst: &str) -> bool {
    v.rules.values().any(|rule| match rule {
        Rule::Clog { from, to, except } => {
            src != dst && host_in(from, src) && host_in(to, dst) && !except.iter().any(|h| h == src || h == dst)
        }
        _ => false,
    })
}

/// How many more bytes pipe `from` may deliver under hold-after-bytes controls.
pub(crate) fn hold_allowance(v: &View<'_>, conn: ConnId, from: usize) -> Option<u64> {
    if v.rules.is_empty() {
        return None;
    }
    let c = v.conns.get(&conn)?;
    let info = c.info();
    v.rules
        .values()
        .filter_map(|rule| match rule {
            Rule::HoldAfter { conn, direction, bytes } if direction.includes(from) && conn.matches(&info) => {
                Some(bytes.saturating_sub(c.pipes[from].delivered_bytes))
            }
            _ => None,
        })
        .min()
}

pub(crate) fn dial_verdict(v: &View<'_>, names: &[String]) -> Option<bool> {
    v.rules.values().find_map(|rule| match rule {
        Rule::Refuse { target } if names.iter().any(|n| n == target) => Some(true),
        Rule::Blackhole { target } if names.iter().any(|n| n == target) => Some(false),
        _ => None,
    })
}

pub(crate) fn listener_paused(v: &View<'_>, addr: SocketAddr) -> bool {
    v.rules.values().any(|rule| matches!(rule, Rule::Pause { addr: a } if *a == addr))
}

/// The read limit for end `side` of a connection: `(max bytes, throttle interval)`.
pub(crate) fn read_limit(v: &View<'_>, conn: ConnId, side: usize) -> (Option<usize>, Option<Duration>) {
    // The common case first: no rule at all, nothing to match (and no connection info to build).
    if v.rules.is_empty() {
        return (None, None);
    }
    let Some(c) = v.conns.get(&conn) else {
        return (None, None);
    };
    let info = c.info();
    let mut max: Option<usize> = None;
    let mut every: Option<Duration> = None;
    for rule in v.rules.values() {
        match rule {
            Rule::ShortReads { conn, side: s, bytes } if s.index() == side && conn.matches(&info) => {
                max = Some(max.map_or(*bytes, |m| m.min(*bytes)));
            }
            Rule::Throttle { conn, side: s, bytes, every: e } if s.index() == side && conn.matches(&info) => {
                max = Some(max.map_or(*bytes, |m| m.min(*bytes)));
                every = Some(every.map_or(*e, |x| x.max(*e)));
            }
            _ => {}
        }
    }
    (max, every)
}
