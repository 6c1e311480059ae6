//! The per-host socket state of the network (its kernel): connections and their two ends, the
//! pipes between them (segments in flight, receive queues), listeners and their accept queues,
//! dials, ports and errno values. Plain data: what the fabric ([`super::fabric`]) delivers into
//! and what streams and hosts read; nothing here schedules or records.
//!
//! A connection has two *ends* (0 = the client that dialed, 1 = the server side) and two *pipes*
//! (`pipes[i]` carries what end `i` sends to end `1 - i`). A pipe holds the segments sent but not
//! yet delivered (data, FIN, RST, in order) and the receive buffer of the other end. Linux
//! loopback semantics (see `../shared/data/linux-tcp-loopback.txt` and the conformance suite)
//! decide what each end observes.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use bytes::Bytes;

use super::config::{ConnInfo, LinkConfig};
use crate::driver::EventId;

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

impl Pipe {
    /// Queues a segment. Invariant: segments are queued in order of due time (a segment is never
    /// due before the one sent ahead of it: jitter never reorders).
    pub(crate) fn push(&mut self, seg: Seg) {
        assert!(
            self.queue.back().is_none_or(|last| last.due <= seg.due),
            "Pipe::queue invariant: segments in order of due time (a segment due at {:?} queued after one due at {:?})",
            seg.due,
            self.queue.back().map(|last| last.due)
        );
        self.queue.push_back(seg);
    }

    /// `n` bytes of data left the queue for the receiving end. Invariant: `queued_bytes` is the
    /// data the queue holds, so it never goes below zero.
    pub(crate) fn delivered(&mut self, n: usize) {
        assert!(
            n <= self.queued_bytes,
            "Pipe::queued_bytes invariant: delivering {n} bytes from a pipe with {} bytes queued",
            self.queued_bytes
        );
        self.queued_bytes -= n;
        self.delivered_bytes += n as u64;
    }
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

    pub(crate) fn label(&self, from: usize) -> &str {
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
