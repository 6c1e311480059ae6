//! The network's parameters and identities: [`NetConfig`] (what links are drawn from),
//! [`LinkConfig`], [`ConnInfo`], how an incarnation [`Ending`]s, and Linux's constants.

use std::net::SocketAddr;
use std::time::Duration;

/// The message of a failed name lookup: what `getaddrinfo` reports for an unknown name
/// (`EAI_NONAME`), as std's resolver words it.
pub(crate) const LOOKUP_FAILED: &str = "failed to lookup address information: Name or service not known";

/// The parameters links are drawn from.
#[derive(Clone, Debug, PartialEq)]
pub struct NetConfig {
    /// One-way latency range of a link (inclusive).
    pub latency: (Duration, Duration),
    /// The largest jitter bound a link may draw (at most its latency).
    pub jitter_max: Duration,
    /// Send bound range of a link in bytes (inclusive): unread bytes a writer may have outstanding.
    pub send_buffer: (usize, usize),
    /// SYN retries before a dial fails `ETIMEDOUT` (Linux `tcp_syn_retries`, default 6).
    pub syn_retries: u32,
    /// The listen backlog when none is given (tokio's `TcpListener::bind` uses 1024).
    pub backlog: usize,
}

impl NetConfig {
    /// The largest send bound accepted.
    pub const SEND_BUFFER_MAX: usize = 64 << 20;

    /// Fixed links: every link has exactly this latency, no jitter, and Linux's send bound.
    pub fn fixed(latency: Duration) -> NetConfig {
        NetConfig {
            latency: (latency, latency),
            jitter_max: Duration::ZERO,
            send_buffer: (LINUX_SEND_BOUND, LINUX_SEND_BOUND),
            syn_retries: 6,
            backlog: 1024,
        }
    }

    /// The config with its ranges in order and the send bound in `1..=SEND_BUFFER_MAX`.
    pub fn normalized(mut self) -> NetConfig {
        if self.latency.0 > self.latency.1 {
            self.latency = (self.latency.1, self.latency.0);
        }
        let (lo, hi) = (self.send_buffer.0.min(self.send_buffer.1), self.send_buffer.0.max(self.send_buffer.1));
        self.send_buffer = (lo.clamp(1, Self::SEND_BUFFER_MAX), hi.clamp(1, Self::SEND_BUFFER_MAX));
        self
    }

    /// Links drawn from the run's swarm: `net.latency_max` (0–20 ms), `net.jitter_max` (0–5 ms)
    /// and `net.send_buffer_min` (64 KiB–4 MiB; links draw between it and 4 MiB).
    pub fn from_swarm(swarm: &crate::swarm::Swarm) -> NetConfig {
        let latency_max = swarm.duration("net.latency_max", Duration::ZERO..=Duration::from_millis(20));
        let jitter_max = swarm.duration("net.jitter_max", Duration::ZERO..=Duration::from_millis(5));
        let send_min = swarm.int("net.send_buffer_min", 64 << 10..=4 << 20) as usize;
        NetConfig {
            latency: (Duration::ZERO, latency_max),
            jitter_max,
            send_buffer: (send_min, 4 << 20),
            syn_retries: 6,
            backlog: 1024,
        }
    }
}

/// How an incarnation of a host ends (see [`Network::end_incarnation`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The process exited: sockets closed as `close(2)` closes them.
    Exit,
    /// The process was killed: every connection reset.
    Reset,
    /// The machine vanished: silence.
    Vanish,
}

/// What a writer to a never-reading peer got accepted on Linux loopback before blocking.
pub const LINUX_SEND_BOUND: usize = 3_910_656;

/// One directed link's drawn parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// One-way latency.
    pub latency: Duration,
    /// Jitter bound added per segment (order is kept).
    pub jitter: Duration,
    /// Send bound in bytes.
    pub send_buffer: usize,
}

/// The identity of a connection, for selectors and oracles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    /// Unique within the run, in order of dialing.
    pub id: u64,
    /// The dialer's address.
    pub client: SocketAddr,
    /// The listener's address.
    pub server: SocketAddr,
    /// The dialer's host name.
    pub client_host: String,
    /// The listener's host name.
    pub server_host: String,
}
