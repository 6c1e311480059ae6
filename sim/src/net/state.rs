//! The network's state machine: hosts, names, listeners, connections, and the delivery of
//! segments as driver events. Everything here runs under the network's one mutex, on the run's
//! thread; nothing here starts a task.
//!
//! A connection has two *ends* (0 = the client that dialed, 1 = the server side) and two *pipes*
//! (`pipes[i]` carries what end `i` sends to end `1 - i`). A pipe holds the segments sent but not
//! yet delivered (data, FIN, RST, in order) and the receive buffer of the other end. One driver
//! event at a time delivers a pipe's due segments; the next is scheduled from the queue's head.
//! Linux loopback semantics (see `../shared/data/linux-tcp-loopback.txt` and the conformance
//! suite) decide what each end observes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use bytes::Bytes;

use super::control::{Rule, RuleId};
use super::{ConnInfo, LinkConfig, NetConfig};
use crate::driver::{Driver, Event, EventId};
use crate::seed::{Source, Tree};

pub(crate) type ConnId = u64;
pub(crate) type ListenerId = u64;
pub(crate) type DialId = u64;

/// Linux's default `ip_local_port_range`.
pub(crate) const EPHEMERAL: std::ops::RangeInclusive<u16> = 32768..=60999;

/// The destination key under which a listener's ephemeral port is reserved.
pub(crate) const LISTEN_KEY: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// The most hosts a network has (10.0.0.0/16 minus the network and broadcast addresses).
pub const HOSTS_MAX: u32 = 65_534;

/// `errno` values used, with their Linux numbers.
pub(crate) mod errno {
    pub const EPIPE: i32 = 32;
    pub const EADDRINUSE: i32 = 98;
    pub const EADDRNOTAVAIL: i32 = 99;
    pub const ENETDOWN: i32 = 100;
    pub const ENETUNREACH: i32 = 101;
    pub const ECONNRESET: i32 = 104;
    pub const ENOTCONN: i32 = 107;
    pub const ETIMEDOUT: i32 = 110;
    pub const ECONNREFUSED: i32 = 111;
}

pub(crate) fn os_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// How a host is doing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostMode {
    /// Up.
    Up,
    /// Its machine is gone: nothing reaches it, nothing leaves it, nothing answers.
    Silent,
}

pub(crate) struct HostState {
    pub addr: IpAddr,
    pub mode: HostMode,
    pub next_port: u16,
    /// The current incarnation (a process start on this host; 0 until a node starts one).
    pub incarnation: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NameKind {
    /// A host's own name: its address.
    Host(IpAddr),
    /// A ClusterIP service: one virtual address; each new connection goes to one backend.
    ClusterIp { vip: IpAddr, backends: Vec<String> },
    /// A headless service: resolves to every backend's address.
    Headless { backends: Vec<String> },
}

pub(crate) enum SegKind {
    Data(Bytes),
    Fin,
    Rst,
    /// The dialer's ACK completing the handshake: puts the connection in the accept queue.
    Ack,
}

pub(crate) struct Seg {
    pub due: Duration,
    pub kind: SegKind,
}

#[derive(Default)]
pub(crate) struct Pipe {
    pub queue: VecDeque<Seg>,
    pub queued_bytes: usize,
    pub scheduled: Option<(EventId, Duration)>,
    pub recv: VecDeque<Bytes>,
    pub recv_bytes: usize,
    pub fin_delivered: bool,
    pub sent_bytes: u64,
    pub delivered_bytes: u64,
    pub last_due: Duration,
}

#[derive(Default)]
pub(crate) struct End {
    /// Live user handles (a stream, or its two halves).
    pub handles: u8,
    /// The user closed it (all handles dropped), or it was never accepted and its listener died.
    pub closed: bool,
    pub wrote_fin: bool,
    pub read_shut: bool,
    pub reset: bool,
    /// It was reset because data arrived after it shut reading and sent its FIN (see `receive`).
    pub reset_by_data: bool,
    pub pending_error: Option<i32>,
    pub linger_zero: bool,
    pub read_waker: Option<Waker>,
    pub write_waker: Option<Waker>,
    /// A write found the send bound full and waits for room: it goes on only once a third of the
    /// bound is free again (see [`writable_again`]).
    pub write_blocked: bool,
    /// Bytes this end may still write before a partial-write fault resets the connection.
    pub write_budget: Option<usize>,
    /// Read-side throttle: when the next read may return data.
    pub throttle_until: Option<Duration>,
    /// Its process is gone (its incarnation ended): every local operation fails at once, so that
    /// a task blocked on it is woken and ends at the instant of the end, as the process's threads
    /// would have.
    pub process_gone: bool,
}

impl End {
    pub(crate) fn wake(&mut self) {
        if let Some(w) = self.read_waker.take() {
            w.wake();
        }
        if let Some(w) = self.write_waker.take() {
            w.wake();
        }
    }
}

pub(crate) struct Conn {
    pub id: ConnId,
    pub addrs: [SocketAddr; 2],
    pub hosts: [String; 2],
    pub pipes: [Pipe; 2],
    pub ends: [End; 2],
    pub established: bool,
    pub silent: bool,
    pub send_bound: [usize; 2],
    /// The links each direction travels (drawn once per host pair).
    pub links: [LinkConfig; 2],
    /// The incarnation of each end's host that owns the end.
    pub incarnations: [u64; 2],
    /// The listener the connection was made to.
    pub listener: Option<ListenerId>,
    /// What the dialer sees as its peer: the address it dialed (a ClusterIP's virtual address, as
    /// kube-proxy's DNAT shows it).
    pub dialed: SocketAddr,
    /// `conn#N a->b` for each direction, made once (every delivery records it).
    pub labels: [Arc<str>; 2],
    /// Whether each end is an IPv6 socket carrying IPv4 (a v4-mapped dial, or a connection a
    /// `[::]` listener accepted over IPv4): its addresses show as `[::ffff:a.b.c.d]`.
    pub mapped: [bool; 2],
    /// Requests and responses as the server end (end 1) read and wrote them, for the drain
    /// oracle of a node's own serve loop.
    pub exchange: super::exchange::Exchange,
}

/// `a.b.c.d:p` as an IPv6 socket shows it, `[::ffff:a.b.c.d]:p`; IPv6 addresses unchanged.
pub(crate) fn v4_mapped(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
        v6 => v6,
    }
}

/// Whether a writer that blocked on a full send bound may go on, with `used` bytes unread of
/// `bound`: once a third of the bound is free. Linux wakes a writer waiting for send space only
/// when the free space is at least half of what is queued (`sk_stream_write_space`,
/// `sk_stream_min_wspace`: free ≥ queued / 2, i.e. queued ≤ 2/3 of the buffer), so a slow reader
/// that reads a little does not wake it (measured with tokio: a 64 KiB read after the writer
/// blocked lets it write nothing, within 100 ms or 300 ms later).
pub(crate) fn writable_again(used: usize, bound: usize) -> bool {
    used.saturating_mul(3) <= bound.saturating_mul(2)
}

/// The history identities of a connection's two directions.
pub(crate) fn conn_labels(id: ConnId, addrs: &[SocketAddr; 2]) -> [Arc<str>; 2] {
    [format!("conn#{id} {}->{}", addrs[0], addrs[1]).into(), format!("conn#{id} {}->{}", addrs[1], addrs[0]).into()]
}

impl Conn {
    pub(crate) fn info(&self) -> ConnInfo {
        ConnInfo {
            id: self.id,
            client: self.addrs[0],
            server: self.addrs[1],
            client_host: self.hosts[0].clone(),
            server_host: self.hosts[1].clone(),
        }
    }

    /// End `end`'s own address and its peer's, as its socket reports them (`local_addr`,
    /// `peer_addr`): the dialer's peer is what it dialed.
    pub(crate) fn view(&self, end: usize) -> (SocketAddr, SocketAddr) {
        let show = |a: SocketAddr| if self.mapped[end] { v4_mapped(a) } else { a };
        let peer = if end == 0 { self.dialed } else { show(self.addrs[0]) };
        (show(self.addrs[end]), peer)
    }

    fn label(&self, from: usize) -> &str {
        &self.labels[from]
    }

    /// Whether the whole connection is over for end `i` (both FINs exchanged, or reset).
    pub(crate) fn finished(&self, i: usize) -> bool {
        self.ends[i].reset || (self.ends[i].wrote_fin && self.pipes[1 - i].fin_delivered)
    }
}

/// What a listener is found by: its host (by the host's IPv4 address), the socket's address
/// family, and the port. IPv4 and IPv6 sockets have separate port spaces (a `127.0.0.1:P` and a
/// `[::1]:P` listener coexist, as on Linux); a dual-stack `[::]` listener is an IPv6 key that also
/// answers IPv4 dials.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ListenKey {
    pub host: IpAddr,
    pub v6: bool,
    pub port: u16,
}

pub(crate) struct ListenerState {
    pub host: String,
    /// An IPv6 wildcard (`[::]`) listener: it answers IPv4 dials too (Linux's default
    /// `net.ipv6.bindv6only = 0`).
    pub dual: bool,
    /// An IPv6 socket: connections it accepts over IPv4 show v4-mapped addresses
    /// (`[::ffff:a.b.c.d]`).
    pub maps_v4: bool,
    pub incarnation: u64,
    pub backlog: usize,
    /// Established connections waiting for `accept`.
    pub queue: VecDeque<ConnId>,
    /// Connections whose SYN was answered and whose ACK has not arrived (SYN_RECV).
    pub handshaking: BTreeSet<ConnId>,
    pub waker: Option<Waker>,
}

pub(crate) enum DialState {
    Pending { waker: Option<Waker> },
    Done(io::Result<ConnId>),
    Abandoned,
}

pub(crate) struct Dial {
    pub state: DialState,
    pub conn: ConnId,
    pub attempts: u32,
    pub syn_retries: u32,
    /// The pending SYN retransmission timer (or final timeout), cancelled when the dial ends so
    /// that an answered dial leaves no timer event in the history (Linux stops the SYN timer at
    /// the SYN-ACK: `tcp_rcv_synsent_state_process` → `tcp_finish_connect`).
    pub syn_timer: Option<EventId>,
}

pub(crate) struct State {
    pub hosts: BTreeMap<String, HostState>,
    pub by_addr: BTreeMap<IpAddr, String>,
    pub names: BTreeMap<String, NameKind>,
    pub listeners: BTreeMap<ListenerId, ListenerState>,
    pub listening: BTreeMap<ListenKey, ListenerId>,
    pub conns: BTreeMap<ConnId, Conn>,
    pub dials: BTreeMap<DialId, Dial>,
    pub links: BTreeMap<(String, String), LinkConfig>,
    pub rules: BTreeMap<RuleId, Rule>,
    pub next_id: u64,
    pub next_host: u32,
    pub next_vip: u32,
    pub config: NetConfig,
    pub tree: Tree,
    pub routes: BTreeMap<String, Source>,
    pub draws: Source,
    /// Operations attempted through a host handle of an ended incarnation (refused).
    pub stale_ops: u64,
    /// Incarnations that ended (host, incarnation).
    pub ended: BTreeSet<(String, u64)>,
    /// Ephemeral ports in use per host: (destination, port).
    pub ports: BTreeMap<String, BTreeSet<(SocketAddr, u16)>>,
    /// Watchers of service endpoints.
    pub endpoint_watches: BTreeMap<String, tokio::sync::watch::Sender<Vec<String>>>,
    /// Incarnations draining after SIGTERM (host, incarnation), with the requests their server
    /// ends left unanswered when they closed (see [`super::exchange`]).
    pub draining: BTreeMap<(String, u64), Vec<String>>,
}

/// The shared core of a [`super::Network`].
pub(crate) struct Core {
    pub state: Mutex<State>,
    pub driver: Driver,
    pub recorder: Arc<crate::recorder::Recorder>,
    pub tree: Tree,
}

impl Core {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn now(&self) -> Duration {
        self.driver.elapsed()
    }

    /// Records a network event in the run's history at the current fake time.
    pub(crate) fn record(&self, kind: &str, identity: &str, detail: impl AsRef<str>) {
        self.recorder.record_at(self.now(), kind, identity, detail.as_ref());
    }
}

impl State {
    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(crate) fn host_addr(&mut self, name: &str) -> IpAddr {
        if let Some(h) = self.hosts.get(name) {
            return h.addr;
        }
        assert!(!self.names.contains_key(name), "Network::host({name:?}): the name is already a service");
        assert!(self.next_host < HOSTS_MAX, "a network holds at most HOSTS_MAX = {HOSTS_MAX} hosts");
        self.next_host += 1;
        let n = self.next_host;
        let addr = IpAddr::V4(Ipv4Addr::new(10, 0, (n >> 8) as u8, (n & 0xff) as u8));
        self.hosts.insert(
            name.to_string(),
            HostState { addr, mode: HostMode::Up, next_port: *EPHEMERAL.start(), incarnation: 0 },
        );
        self.by_addr.insert(addr, name.to_string());
        self.names.insert(name.to_string(), NameKind::Host(addr));
        addr
    }

    pub(crate) fn new_vip(&mut self) -> IpAddr {
        self.next_vip += 1;
        let n = self.next_vip;
        IpAddr::V4(Ipv4Addr::new(10, 96, (n >> 8) as u8, (n & 0xff) as u8))
    }

    /// The link from one host to another, drawn once per directed pair.
    pub(crate) fn link(&mut self, from: &str, to: &str) -> LinkConfig {
        let key = (from.to_string(), to.to_string());
        if let Some(l) = self.links.get(&key) {
            return *l;
        }
        let link = if from == to {
            LinkConfig { latency: Duration::ZERO, jitter: Duration::ZERO, send_buffer: self.config.send_buffer.1 }
        } else {
            let mut s = self.tree.source(&format!("net/link/{from}->{to}"));
            let latency = s.duration(self.config.latency.0..=self.config.latency.1);
            let jitter = s.duration(Duration::ZERO..=self.config.jitter_max.min(latency));
            let send_buffer = s.range(self.config.send_buffer.0 as u64..=self.config.send_buffer.1 as u64) as usize;
            LinkConfig { latency, jitter, send_buffer }
        };
        self.links.insert(key, link);
        link
    }

    pub(crate) fn host_mode(&self, name: &str) -> HostMode {
        self.hosts.get(name).map_or(HostMode::Silent, |h| h.mode)
    }

    /// An ephemeral port for a connection from `host` to `to`: Linux's `ip_local_port_range`
    /// (32768–60999), unique per destination (the 4-tuple must be), so one destination can use
    /// 28,232 connections and others are unaffected.
    pub(crate) fn alloc_port(&mut self, host: &str, to: SocketAddr) -> io::Result<u16> {
        let used = self.ports.entry(host.to_string()).or_default();
        let h = self.hosts.get_mut(host).ok_or_else(|| os_error(errno::EADDRNOTAVAIL))?;
        for _ in 0..=(EPHEMERAL.end() - EPHEMERAL.start()) {
            let port = h.next_port;
            h.next_port = if h.next_port >= *EPHEMERAL.end() { *EPHEMERAL.start() } else { h.next_port + 1 };
            if !used.contains(&(to, port)) && !used.contains(&(LISTEN_KEY, port)) {
                used.insert((to, port));
                return Ok(port);
            }
        }
        Err(os_error(errno::EADDRNOTAVAIL))
    }

    /// An ephemeral port for a listener (`listen("0")`): one no connection or listener of the
    /// host uses.
    pub(crate) fn alloc_listen_port(&mut self, host: &str) -> io::Result<u16> {
        let used = self.ports.entry(host.to_string()).or_default();
        let taken: BTreeSet<u16> = used.iter().map(|(_, p)| *p).collect();
        let h = self.hosts.get_mut(host).ok_or_else(|| os_error(errno::EADDRNOTAVAIL))?;
        for _ in 0..=(EPHEMERAL.end() - EPHEMERAL.start()) {
            let port = h.next_port;
            h.next_port = if h.next_port >= *EPHEMERAL.end() { *EPHEMERAL.start() } else { h.next_port + 1 };
            let bound = [false, true].map(|v6| ListenKey { host: h.addr, v6, port });
            if !taken.contains(&port) && !bound.iter().any(|k| self.listening.contains_key(k)) {
                used.insert((LISTEN_KEY, port));
                return Ok(port);
            }
        }
        Err(os_error(errno::EADDRNOTAVAIL))
    }

    /// The listener a SYN to `to` on host `host` reaches: one of its address family on that port,
    /// or, for IPv4, a dual-stack `[::]` listener.
    pub(crate) fn find_listener(&self, host: &str, to: SocketAddr) -> Option<ListenerId> {
        let addr = self.hosts.get(host)?.addr;
        let key = |v6| ListenKey { host: addr, v6, port: to.port() };
        if to.is_ipv6() {
            return self.listening.get(&key(true)).copied();
        }
        self.listening.get(&key(false)).copied().or_else(|| {
            self.listening.get(&key(true)).copied().filter(|id| self.listeners.get(id).is_some_and(|l| l.dual))
        })
    }

    /// Forgets a connection and gives its ephemeral port back.
    pub(crate) fn remove_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.free_port(&c.hosts[0], c.addrs[1], c.addrs[0].port());
            if let Some(l) = c.listener.and_then(|lid| self.listeners.get_mut(&lid)) {
                l.handshaking.remove(&conn);
                l.queue.retain(|q| *q != conn);
            }
        }
    }

    /// Gives a connection's ephemeral port back.
    pub(crate) fn free_port(&mut self, host: &str, to: SocketAddr, port: u16) {
        if let Some(used) = self.ports.get_mut(host) {
            used.remove(&(to, port));
        }
    }
}

/// Schedules the delivery of pipe `from` of `conn` if its head is due and nothing is scheduled.
pub(crate) fn schedule_pipe(core: &Arc<Core>, st: &mut State, conn: ConnId, from: usize) {
    let Some(c) = st.conns.get(&conn) else { return };
    let Some(head_due) = c.pipes[from].queue.front().map(|s| s.due) else {
        return;
    };
    if let Some((_, due)) = c.pipes[from].scheduled
        && due <= head_due
    {
        return;
    }
    if super::control::held(st, conn, from) {
        return;
    }
    let head_is_data = matches!(c.pipes[from].queue.front().map(|s| &s.kind), Some(SegKind::Data(_)));
    if head_is_data && super::control::hold_allowance(st, conn, from) == Some(0) {
        return; // held after its byte allowance: rescheduled when a rule changes
    }
    let label = c.label(from).to_string();
    let core2 = Arc::clone(core);
    let event = Event::new("net.deliver", label).unrecorded().action(move || deliver(&core2, conn, from));
    let id = core.driver.at(head_due, event);
    if let Some(c) = st.conns.get_mut(&conn)
        && let Some((old, _)) = c.pipes[from].scheduled.replace((id, head_due))
    {
        core.driver.cancel(old);
    }
}

/// Queues a segment on a pipe with the link's latency and jitter, preserving order.
pub(crate) fn send_segment(core: &Arc<Core>, st: &mut State, conn: ConnId, from: usize, kind: SegKind) {
    let now = core.now();
    let Some(link) = st.conns.get(&conn).map(|c| c.links[from]) else { return };
    let jitter = if link.jitter.is_zero() { Duration::ZERO } else { st.draws.duration(Duration::ZERO..=link.jitter) };
    let Some(c) = st.conns.get_mut(&conn) else {
        return;
    };
    let pipe = &mut c.pipes[from];
    let due = (now + link.latency + jitter).max(pipe.last_due);
    pipe.last_due = due;
    if let SegKind::Data(b) = &kind {
        pipe.queued_bytes += b.len();
        pipe.sent_bytes += b.len() as u64;
    }
    pipe.queue.push_back(Seg { due, kind });
    schedule_pipe(core, st, conn, from);
}

/// The delivery event of a pipe: hands every due segment to the receiving end.
pub(crate) fn deliver(core: &Arc<Core>, conn: ConnId, from: usize) {
    let now = core.now();
    let mut st = core.lock();
    let st = &mut *st;
    if let Some(c) = st.conns.get_mut(&conn) {
        c.pipes[from].scheduled = None;
    }
    let to = 1 - from;
    let mut described = String::new();
    let mut note = |text: std::fmt::Arguments<'_>| {
        use std::fmt::Write;
        if !described.is_empty() {
            described.push_str(", ");
        }
        let _ = described.write_fmt(text);
    };
    let mut reply_rst = false;
    let mut acked = false;
    loop {
        if super::control::held(st, conn, from) {
            break;
        }
        let allowance = super::control::hold_allowance(st, conn, from);
        let Some(c) = st.conns.get_mut(&conn) else {
            return;
        };
        let Some(seg) = c.pipes[from].queue.front_mut() else {
            break;
        };
        if seg.due > now {
            break;
        }
        if let (Some(allow), SegKind::Data(bytes)) = (allowance, &mut seg.kind) {
            if allow == 0 {
                break;
            }
            if (allow as usize) < bytes.len() {
                // Deliver only what the hold-after-bytes control lets through.
                let head = bytes.split_to(allow as usize);
                c.pipes[from].queued_bytes -= head.len();
                c.pipes[from].delivered_bytes += head.len() as u64;
                note(format_args!("{} bytes (held after)", head.len()));
                receive(c, from, SegKind::Data(head), &mut reply_rst);
                break;
            }
        }
        let seg = c.pipes[from].queue.pop_front().expect("the head was just seen");
        if let SegKind::Data(b) = &seg.kind {
            c.pipes[from].queued_bytes -= b.len();
            c.pipes[from].delivered_bytes += b.len() as u64;
        }
        match &seg.kind {
            SegKind::Data(b) => note(format_args!("{} bytes", b.len())),
            SegKind::Fin => note(format_args!("FIN")),
            SegKind::Rst => note(format_args!("RST")),
            SegKind::Ack => note(format_args!("ACK")),
        }
        if matches!(seg.kind, SegKind::Ack) {
            acked = true;
            continue;
        }
        receive(c, from, seg.kind, &mut reply_rst);
    }
    if acked {
        established(st, conn, &mut reply_rst);
    }
    if !described.is_empty()
        && let Some(c) = st.conns.get(&conn)
    {
        core.record("net.deliver", c.label(from), &described);
    }
    if reply_rst {
        // Data reached an end that is closed: it answers with RST (Linux tcp_rcv_state_process).
        if let Some(c) = st.conns.get_mut(&conn) {
            c.ends[to].reset = true;
        }
        send_segment(core, st, conn, to, SegKind::Rst);
    }
    schedule_pipe(core, st, conn, from);
    maybe_forget(st, conn);
}

/// The handshake's ACK reached the server: the connection joins its listener's accept queue, or,
/// when the listener is gone, the server's stack answers with RST.
fn established(st: &mut State, conn: ConnId, reply_rst: &mut bool) {
    let Some(lid) = st.conns.get(&conn).and_then(|c| c.listener) else { return };
    match st.listeners.get_mut(&lid) {
        Some(l) => {
            l.handshaking.remove(&conn);
            l.queue.push_back(conn);
            if let Some(w) = l.waker.take() {
                w.wake();
            }
        }
        None => {
            if let Some(c) = st.conns.get_mut(&conn)
                && !c.ends[1].closed
            {
                c.ends[1].closed = true;
                *reply_rst = true;
            }
        }
    }
}

/// One segment arrives at end `1 - from`.
fn receive(c: &mut Conn, from: usize, kind: SegKind, reply_rst: &mut bool) {
    let to = 1 - from;
    match kind {
        SegKind::Data(bytes) => {
            if c.ends[to].closed || c.ends[to].reset {
                *reply_rst |= !c.ends[to].reset;
                // The data is gone with the closed socket; the writer's bound frees up.
                c.ends[from].wake();
                return;
            }
            if c.ends[to].read_shut && c.ends[to].wrote_fin {
                // New data at a socket that shut reading after sending its FIN (FIN_WAIT1/2 with
                // RCV_SHUTDOWN): RFC 1122 says it MUST reset, and Linux does
                // (tcp_rcv_state_process, LINUX_MIB_TCPABORTONDATA): the socket itself is reset
                // (ECONNRESET once, to read, write or take_error; what it had queued stays
                // readable) and it answers with RST. Measured: the peer's next write fails
                // EPIPE (its RST comes after our FIN: CLOSE_WAIT) and its reads give EOF.
                let end = &mut c.ends[to];
                end.reset = true;
                end.reset_by_data = true;
                end.pending_error = Some(errno::ECONNRESET);
                *reply_rst = true;
                c.ends[to].wake();
                c.ends[from].wake();
                return;
            }
            c.pipes[from].recv_bytes += bytes.len();
            c.pipes[from].recv.push_back(bytes);
            c.ends[to].wake();
        }
        SegKind::Fin => {
            if c.ends[to].reset_by_data {
                return; // the socket is gone: a FIN after the data that reset it is not seen
            }
            c.pipes[from].fin_delivered = true;
            c.ends[to].wake();
        }
        SegKind::Ack => {}
        SegKind::Rst => {
            let end = &mut c.ends[to];
            if end.reset {
                return;
            }
            end.reset = true;
            // Linux tcp_reset: ECONNRESET, but EPIPE in CLOSE_WAIT (after the peer's FIN). Reads
            // after a FIN give EOF before they look at the error (SOCK_DONE); writes and
            // take_error report it (measured on Linux, point 8).
            if !end.closed {
                end.pending_error = Some(if c.pipes[from].fin_delivered { errno::EPIPE } else { errno::ECONNRESET });
            }
            // What this end had sent and not yet delivered, or not yet read by the peer, dies
            // with the connection: its send bound is free again. (A peer reset by data it would
            // not read still reads what it had queued: it is open and its queue is its own.)
            let pipe = &mut c.pipes[to];
            pipe.queue.clear();
            pipe.queued_bytes = 0;
            if !c.ends[from].reset_by_data {
                pipe.recv.clear();
                pipe.recv_bytes = 0;
            }
            c.ends[to].wake();
            c.ends[from].wake();
        }
    }
}

/// Resets both ends of a connection at once (a middlebox or a fault), as if each received RST.
pub(crate) fn reset_both(core: &Arc<Core>, st: &mut State, conn: ConnId) {
    let Some(c) = st.conns.get_mut(&conn) else {
        return;
    };
    for to in 0..2 {
        let mut ignored = false;
        receive(c, 1 - to, SegKind::Rst, &mut ignored);
    }
    for from in 0..2 {
        if let Some((id, _)) = c.pipes[from].scheduled.take() {
            core.driver.cancel(id);
        }
    }
}

/// The user dropped the last handle of end `i`.
pub(crate) fn close_end(core: &Arc<Core>, st: &mut State, conn: ConnId, i: usize) {
    note_unanswered(st, conn, i);
    let Some(c) = st.conns.get_mut(&conn) else {
        return;
    };
    if c.ends[i].closed {
        return;
    }
    let unread = c.pipes[1 - i].recv_bytes > 0;
    let (linger0, wrote_fin, reset) = (c.ends[i].linger_zero, c.ends[i].wrote_fin, c.ends[i].reset);
    if reset {
        c.ends[i].closed = true;
        maybe_forget(st, conn);
        return;
    }
    if unread || linger0 {
        // Linux tcp_close: unread data (or SO_LINGER 0) aborts the connection with RST.
        abort_end(core, st, conn, i);
        return;
    }
    c.ends[i].closed = true;
    if !wrote_fin {
        c.ends[i].wrote_fin = true;
        send_segment(core, st, conn, i, SegKind::Fin);
    }
    maybe_forget(st, conn);
}

/// Aborts end `i` (close with unread data or linger 0, or its process was killed): the end is
/// closed, what it had not read is discarded — but its peer's send bound stays taken until the
/// RST reaches the peer (an aborting socket sends no window update) — and bytes of its own that a
/// control was holding back are discarded (unacknowledged, so never sent); bytes already on their
/// way still arrive ahead of the RST.
pub(crate) fn abort_end(core: &Arc<Core>, st: &mut State, conn: ConnId, i: usize) {
    let held = super::control::held(st, conn, i) || super::control::hold_allowance(st, conn, i) == Some(0);
    note_unanswered(st, conn, i);
    let Some(c) = st.conns.get_mut(&conn) else { return };
    c.ends[i].closed = true;
    if c.ends[i].reset {
        maybe_forget(st, conn);
        return;
    }
    c.ends[i].reset = true;
    c.pipes[1 - i].recv.clear();
    if held {
        let pipe = &mut c.pipes[i];
        pipe.queue.retain(|seg| !matches!(seg.kind, SegKind::Data(_)));
        pipe.queued_bytes = 0;
    }
    send_segment(core, st, conn, i, SegKind::Rst);
    maybe_forget(st, conn);
}

/// Removes a listener; with `reset`, its queued connections are reset (Linux
/// inet_csk_listen_stop), otherwise they are left to go silent with their host. Half-open
/// connections (SYN_RECV) are discarded either way.
pub(crate) fn drop_listener(core: &Arc<Core>, st: &mut State, id: ListenerId, reset: bool) {
    let Some(l) = st.listeners.remove(&id) else { return };
    st.listening.retain(|_, lid| *lid != id);
    if let Some(w) = l.waker {
        w.wake();
    }
    for conn in l.handshaking {
        if let Some(c) = st.conns.get_mut(&conn) {
            c.listener = None;
        }
    }
    for conn in l.queue {
        if let Some(c) = st.conns.get_mut(&conn) {
            c.ends[1].closed = true;
            c.listener = None;
            if !reset {
                c.silent = true;
                continue;
            }
            c.ends[1].reset = true;
        }
        if reset {
            send_segment(core, st, conn, 1, SegKind::Rst);
        }
        maybe_forget(st, conn);
    }
}

/// Forgets a connection once both ends are closed and nothing is in flight.
/// The server end (`i == 1`) of `conn` is closing (or aborting): if its incarnation is draining
/// and a request it read is unanswered while its client is still there, notes it for the drain
/// oracle, once (the exchange is not followed further).
fn note_unanswered(st: &mut State, conn: ConnId, i: usize) {
    if i != 1 || st.draining.is_empty() {
        return;
    }
    let Some(c) = st.conns.get_mut(&conn) else { return };
    let client_gone = c.ends[0].closed || c.ends[0].reset || c.pipes[0].fin_delivered;
    if c.ends[1].closed || c.ends[1].reset || client_gone {
        return;
    }
    let Some(what) = c.exchange.in_flight() else { return };
    c.exchange = super::exchange::Exchange::Opaque;
    let note = format!("conn#{conn} from {} ({}): {what}", c.hosts[0], c.addrs[0]);
    if let Some(notes) = st.draining.get_mut(&(c.hosts[1].clone(), c.incarnations[1])) {
        notes.push(note);
    }
}

pub(crate) fn maybe_forget(st: &mut State, conn: ConnId) {
    let done = st.conns.get(&conn).is_some_and(|c| {
        c.ends.iter().all(|e| e.closed) && c.pipes.iter().all(|p| p.queue.is_empty() && p.scheduled.is_none())
    });
    let queued = st.listeners.values().any(|l| l.queue.contains(&conn));
    let dialing = st.dials.values().any(|d| d.conn == conn && matches!(d.state, DialState::Pending { .. }));
    if done && !queued && !dialing {
        st.remove_conn(conn);
    }
}
