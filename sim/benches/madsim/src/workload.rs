//! The workloads of `net_vs_turmoil`, written once against tokio's `AsyncRead`/`AsyncWrite` and
//! `tokio::time`, and compiled twice: into the bench binary (`sim/benches/net_vs_turmoil.rs`, real
//! tokio, run on our network, on turmoil and on the bare-tokio floor) and into the madsim crate
//! beside this file (where `tokio` is `madsim-tokio`, so `tokio::time` is madsim's clock). One file,
//! so that the four columns of the table cannot drift apart in what they measure.
//!
//! Every write is followed by a flush: madsim's `TcpStream` buffers writes and sends them only
//! at `poll_flush` (a flush is free on the other three).

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Request and response size of the round-trip workloads.
pub const REQUEST: usize = 64;
/// Heartbeat message size (echoed).
pub const HEARTBEAT: usize = 16;
/// Write size of the stream workload.
pub const CHUNK: usize = 64 << 10;
/// One-way latency of the latency-bound workloads.
pub const ONE_WAY: Duration = Duration::from_millis(1);
/// The port the server listens on.
pub const PORT: u16 = 80;
/// Period of the ticker's interval.
pub const TICK_PERIOD: Duration = Duration::from_millis(1);

/// The sizes of one run of the bench.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Round trips of (a) and (b).
    pub trips: u32,
    /// Simulated seconds of heartbeats (c).
    pub heartbeat_secs: u64,
    /// [`CHUNK`]-byte writes of the stream (d).
    pub chunks: u64,
    /// Simulated seconds of the ticker (e).
    pub ticker_secs: u64,
    /// Repetitions of each measurement (the median is reported).
    pub reps: usize,
}

impl Sizes {
    /// The full sizes, or `--quick`'s (about 10× smaller, measured once).
    pub fn new(quick: bool) -> Sizes {
        if quick {
            Sizes { trips: 200, heartbeat_secs: 60, chunks: 1600, ticker_secs: 60, reps: 1 }
        } else {
            Sizes { trips: 2000, heartbeat_secs: 600, chunks: 16384, ticker_secs: 600, reps: 3 }
        }
    }

    /// The four network workloads, in table order.
    pub fn workloads(self) -> [Workload; 4] {
        [
            Workload::RoundTrips { trips: self.trips, idle_hosts: 0 },
            Workload::RoundTrips { trips: self.trips, idle_hosts: 20 },
            Workload::Heartbeat { secs: self.heartbeat_secs },
            Workload::Stream { chunks: self.chunks },
        ]
    }

    /// Ticks of the ticker: one per [`TICK_PERIOD`] for `ticker_secs`.
    pub fn ticks(self) -> u64 {
        self.ticker_secs * (Duration::from_secs(1).as_nanos() / TICK_PERIOD.as_nanos()) as u64
    }
}

/// A small simulation run untimed before the measurements, so that no measurement pays the
/// process's one-time costs (first thread, lazy statics, page faults of a fresh heap).
pub const WARM_UP: Workload = Workload::RoundTrips { trips: 10, idle_hosts: 1 };

/// One network workload, with its size: one client talking to one server over one TCP connection.
#[derive(Clone, Copy, Debug)]
pub enum Workload {
    /// `trips` sequential round trips, with `idle_hosts` extra hosts that only accept.
    RoundTrips { trips: u32, idle_hosts: u32 },
    /// A heartbeat every second for `secs` seconds.
    Heartbeat { secs: u64 },
    /// `chunks` writes of [`CHUNK`] bytes, streamed at zero latency.
    Stream { chunks: u64 },
}

impl Workload {
    /// The row label.
    pub fn label(self) -> String {
        match self {
            Workload::RoundTrips { trips, idle_hosts: 0 } => format!("(a) {trips} round trips, 1 ms"),
            Workload::RoundTrips { trips, idle_hosts } => {
                format!("(b) (a) + {idle_hosts} idle hosts ({trips} trips)")
            }
            Workload::Heartbeat { secs } => format!("(c) {secs} s idle, 1 s heartbeat"),
            Workload::Stream { chunks } => {
                format!("(d) {} MiB streamed, 0 latency", (chunks * CHUNK as u64) >> 20)
            }
        }
    }

    /// The key of the workload in the madsim crate's output lines.
    pub fn key(self) -> &'static str {
        match self {
            Workload::RoundTrips { idle_hosts: 0, .. } => "round_trips",
            Workload::RoundTrips { .. } => "idle_hosts",
            Workload::Heartbeat { .. } => "heartbeat",
            Workload::Stream { .. } => "stream",
        }
    }

    /// One-way latency of every link.
    pub fn latency(self) -> Duration {
        match self {
            Workload::Stream { .. } => Duration::ZERO,
            _ => ONE_WAY,
        }
    }

    /// Extra hosts that only accept.
    pub fn idle_hosts(self) -> u32 {
        match self {
            Workload::RoundTrips { idle_hosts, .. } => idle_hosts,
            _ => 0,
        }
    }

    /// The server's side of one connection.
    pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(self, stream: S) -> io::Result<()> {
        match self {
            Workload::RoundTrips { .. } | Workload::Heartbeat { .. } => echo(stream).await,
            Workload::Stream { chunks } => send_stream(stream, chunks).await,
        }
    }

    /// The client's side of the connection; returns when the workload is done.
    pub async fn drive<S: AsyncRead + AsyncWrite + Unpin>(self, mut stream: S) -> io::Result<()> {
        match self {
            Workload::RoundTrips { trips, .. } => round_trips(&mut stream, trips).await,
            Workload::Heartbeat { secs } => heartbeats(&mut stream, secs).await,
            Workload::Stream { chunks } => {
                let want = chunks * CHUNK as u64;
                let got = drain(&mut stream, want).await?;
                if got == want { Ok(()) } else { Err(io::Error::other(format!("read {got} bytes, expected {want}"))) }
            }
        }
    }
}

/// Echoes what it reads until EOF.
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) -> io::Result<()> {
    let mut buf = vec![0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n]).await?;
        stream.flush().await?;
    }
}

/// `trips` sequential round trips of a [`REQUEST`]-byte message; checks every echo.
async fn round_trips<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, trips: u32) -> io::Result<()> {
    let mut response = [0u8; REQUEST];
    for i in 0..trips {
        let request = [i as u8; REQUEST];
        stream.write_all(&request).await?;
        stream.flush().await?;
        stream.read_exact(&mut response).await?;
        if response != request {
            return Err(io::Error::other(format!("round trip {i}: wrong echo")));
        }
    }
    Ok(())
}

/// A [`HEARTBEAT`]-byte message every second for `secs` seconds, each answered before the next.
async fn heartbeats<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, secs: u64) -> io::Result<()> {
    let mut response = [0u8; HEARTBEAT];
    for i in 0..secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let beat = [i as u8; HEARTBEAT];
        stream.write_all(&beat).await?;
        stream.flush().await?;
        stream.read_exact(&mut response).await?;
        if response != beat {
            return Err(io::Error::other(format!("heartbeat {i}: wrong echo")));
        }
    }
    Ok(())
}

/// Writes `chunks` × [`CHUNK`] bytes, then waits for the peer to close (so that on turmoil the
/// server host is still running while its last segments are delivered).
///
/// It does not shut its write side down: the reader stops at the byte count instead of at EOF,
/// because turmoil 0.7.2 loses a FIN that reaches a full receive queue (its `tcp_capacity`, 64
/// segments) — it parks the FIN and only retries when another segment arrives — and a stream
/// whose write count is a multiple of 64 always ends that way.
async fn send_stream<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, chunks: u64) -> io::Result<()> {
    let chunk = vec![0x5a; CHUNK];
    for _ in 0..chunks {
        stream.write_all(&chunk).await?;
        stream.flush().await?;
    }
    let _ = stream.read(&mut [0u8; 1]).await;
    Ok(())
}

/// Reads and discards until `want` bytes have arrived or EOF; returns the byte count.
async fn drain<S: AsyncRead + Unpin>(stream: &mut S, want: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    while total < want {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok(total)
}

/// The ticker (e): `ticks` ticks of a [`TICK_PERIOD`] `tokio::time::interval`; no network.
/// tokio's first tick completes at once; madsim's after 1 ms (its shortest sleep).
pub async fn ticker(ticks: u64) {
    let mut interval = tokio::time::interval(TICK_PERIOD);
    for _ in 0..ticks {
        interval.tick().await;
    }
}
