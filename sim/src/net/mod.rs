//! The simulated network: hosts, names, links and TCP streams faithful to Linux loopback.
//!
//! Node code reaches the network only through its [`Host`]: `listen`, `dial`, `resolve`. The cut is
//! at the byte stream — [`TcpStream`] implements tokio's `AsyncRead`/`AsyncWrite`, so real hyper,
//! h2, tonic, rustls, kube and Kafka codecs run above it unchanged (adapters in [`adapters`]).
//!
//! **Links.** Each directed pair of hosts has a link drawn once per seed from the stream
//! `net/link/<from>-><to>`: a latency in [`NetConfig::latency`] (the range includes zero), a jitter
//! bound up to [`NetConfig::jitter_max`] (never reordering: a segment is never due before the one
//! sent ahead of it), and a send bound in [`NetConfig::send_buffer`] — how many bytes a writer may
//! have unread by its peer before writes block (Linux loopback accepted ≈ 3.8 MB). A host talking
//! to itself has zero latency.
//!
//! **Deliveries are harness events.** Every segment (data, FIN, RST) is delivered by a
//! [`crate::Driver`] event, recorded in the history as `net.delivered`. The network starts no
//! tasks of its own.
//!
//! **TCP semantics** (measured on Linux 6.x loopback; `../shared/data/linux-tcp-loopback.txt`; each
//! point pinned by the conformance suite, which runs one test body against this network and
//! against real sockets):
//! 1. after the peer's FIN our first write succeeds; once the closed peer answers with RST, writes
//!    fail `EPIPE`; reads give EOF;
//! 2. closing with unread data (or with `SO_LINGER` 0) sends RST: the peer reads what arrived,
//!    then gets `ECONNRESET` once, then EOF; its writes fail `EPIPE` (a write that comes first gets
//!    the `ECONNRESET`);
//! 3. a dial completes into the accept queue before `accept`; the queue holds backlog + 1; beyond
//!    that SYNs are dropped and retried after 1 s, 3 s, 7 s, … and the dial fails `ETIMEDOUT` after
//!    its SYN retries (6 by default: 127 s);
//! 4. no listener: `ECONNREFUSED`;
//! 5. `shutdown(Write)`: the peer reads the data then EOF and can still write back; our writes fail
//!    `EPIPE`;
//! 6. `shutdown(Read)`: queued data, then EOF; data that arrives later is still readable;
//! 7. dropping a listener resets its queued connections; new dials are refused;
//! 8. an RST after the peer's FIN gives `EPIPE`/EOF, not `ECONNRESET`; the reset is reported once,
//!    to whichever of read, write or `take_error` comes first; `peer_addr` then fails `ENOTCONN`;
//! 9. `set_linger(Some(0))` then close sends RST;
//! 10. a peer that never reads: writes are accepted up to the send bound, then block; a writer
//!     that blocked goes on only once a third of the bound is free again (Linux's
//!     `sk_stream_write_space`), so a slow reader's small reads do not wake it;
//! 11. `AsyncWriteExt::shutdown` on a connection that is over (reset, or both FINs) is `Ok(())`,
//!     as tokio maps `ENOTCONN` (`shutdown(2)` itself fails `ENOTCONN`);
//! 12. data reaching a socket that shut reading after sending its FIN resets it and is answered
//!     with RST (RFC 1122): the writer's next write fails `EPIPE`, the socket reports
//!     `ECONNRESET` once after what it had queued;
//! 13. IPv6: `[::1]` is the host's own loopback with its own port space, `[::]` is dual stack and
//!     shows IPv4 peers v4-mapped, `[::ffff:a.b.c.d]` is the IPv4 address through an IPv6 socket;
//!     hosts have no other IPv6 address (dial `ENETUNREACH`, listen `EADDRNOTAVAIL`, at once).
//!
//! Errors are `io::Error::from_raw_os_error(errno)`, so kinds, codes and messages match real
//! sockets. Faults and scripted controls are in [`control`]; a swarm-drawn schedule of them is
//! [`crate::nemesis::Nemesis`].

pub mod adapters;
mod config;
pub mod control;
mod exchange;
mod fabric;
mod host;
mod kernel;
mod network;
mod rules;
mod state;
mod tcp;

pub use control::{
    BlackholeDials, Clog, ConnSel, Direction, Hold, HoldAfterBytes, PartialWrite, Partition, PauseListener,
    RefuseDials, Reset, Route, ShortReads, Side, Silence, SilentHost, ThrottleReader,
};
pub use host::{DialOptions, Host};

pub use config::{ConnInfo, Ending, LINUX_SEND_BOUND, LinkConfig, NetConfig};
pub use network::Network;
pub use tcp::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, TcpListener, TcpStream, WriteHalf};
