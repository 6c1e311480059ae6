//! Our simulated network against turmoil on the same workloads (a bench binary:
//! `cargo bench -p sim --bench net_vs_turmoil`, or `... -- --quick` for CI).
//!
//! Each workload runs as one client talking to one server over one TCP connection, written once
//! against tokio's `AsyncRead`/`AsyncWrite` and run on both simulators:
//!
//! - **(a) round trips**: 2,000 sequential request/response round trips (64-byte request, 64-byte
//!   echoed response) at 1 ms one-way latency;
//! - **(b) round trips + idle hosts**: (a) with 20 more hosts, each running a server task that
//!   accepts forever and never gets a connection: what simulated hosts that do nothing cost;
//! - **(c) heartbeat**: the client is idle for 600 simulated seconds except for a heartbeat every
//!   second (a 16-byte message, echoed) at 1 ms one-way latency: what simulated idle time costs;
//! - **(d) stream**: 1 GiB from the server to the client at zero latency, in writes of 64 KiB;
//!   the client reads and discards until all of it has arrived (it counts bytes rather than wait
//!   for EOF; see `send_stream`): raw byte throughput.
//!
//! `--quick` shrinks every workload about 10×: 200 round trips, 60 s of heartbeats, 100 MiB (the
//! 20 idle hosts stay), and measures once instead of taking the median of 3 repetitions.
//!
//! **Reading the output.** One row per workload: the median wall time of a whole simulation on
//! each side (ours: `Simulation::run` with one seed, including its fresh thread and runtime;
//! turmoil: building the `Sim`, registering hosts, `Sim::run` and dropping it), and the ratio
//! turmoil / ours (above 1: we are faster). The simulated time each side covered is printed as a
//! sanity check that both did the same work: they should be close, but need not be equal, since
//! turmoil advances in 1 ms ticks (its default) and delivers a message only at a tick, while our
//! network delivers at the exact instant. The notes printed under the table say where turmoil
//! cannot express a workload exactly.

use std::io;
use std::time::{Duration, Instant};

use sim::net::NetConfig;
use sim::{Ctx, Failure, Simulation};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Request and response size of the round-trip workloads.
const REQUEST: usize = 64;
/// Heartbeat message size (echoed).
const HEARTBEAT: usize = 16;
/// Write size of the stream workload.
const CHUNK: usize = 64 << 10;
/// One-way latency of the latency-bound workloads.
const ONE_WAY: Duration = Duration::from_millis(1);
/// The port the server listens on.
const PORT: u16 = 80;

/// One workload, with its size.
#[derive(Clone, Copy, Debug)]
enum Workload {
    /// `trips` sequential round trips, with `idle_hosts` extra hosts that only accept.
    RoundTrips { trips: u32, idle_hosts: u32 },
    /// A heartbeat every second for `secs` seconds.
    Heartbeat { secs: u64 },
    /// `chunks` writes of [`CHUNK`] bytes, streamed at zero latency.
    Stream { chunks: u64 },
}

impl Workload {
    /// The row label.
    fn label(self) -> String {
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

    /// A name for the simulation (trace directories, `SIM_ONLY`).
    fn name(self) -> &'static str {
        match self {
            Workload::RoundTrips { idle_hosts: 0, .. } => "net_vs_turmoil_round_trips",
            Workload::RoundTrips { .. } => "net_vs_turmoil_idle_hosts",
            Workload::Heartbeat { .. } => "net_vs_turmoil_heartbeat",
            Workload::Stream { .. } => "net_vs_turmoil_stream",
        }
    }

    /// One-way latency of every link.
    fn latency(self) -> Duration {
        match self {
            Workload::Stream { .. } => Duration::ZERO,
            _ => ONE_WAY,
        }
    }

    /// Extra hosts that only accept.
    fn idle_hosts(self) -> u32 {
        match self {
            Workload::RoundTrips { idle_hosts, .. } => idle_hosts,
            _ => 0,
        }
    }

    /// A generous bound on the simulated time the workload needs, for turmoil's
    /// `simulation_duration` (turmoil fails a run that exceeds it).
    fn turmoil_duration(self) -> Duration {
        match self {
            Workload::RoundTrips { trips, .. } => Duration::from_secs(60) + ONE_WAY * 10 * trips.max(1),
            Workload::Heartbeat { secs } => Duration::from_secs(secs + 100),
            Workload::Stream { .. } => Duration::from_secs(3600),
        }
    }

    /// The server's side of one connection.
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(self, stream: S) -> io::Result<()> {
        match self {
            Workload::RoundTrips { .. } | Workload::Heartbeat { .. } => echo(stream).await,
            Workload::Stream { chunks } => send_stream(stream, chunks).await,
        }
    }

    /// The client's side of the connection; returns when the workload is done.
    async fn drive<S: AsyncRead + AsyncWrite + Unpin>(self, mut stream: S) -> io::Result<()> {
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
    }
}

/// `trips` sequential round trips of a [`REQUEST`]-byte message; checks every echo.
async fn round_trips<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, trips: u32) -> io::Result<()> {
    let mut response = [0u8; REQUEST];
    for i in 0..trips {
        let request = [i as u8; REQUEST];
        stream.write_all(&request).await?;
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

/// One simulation's cost.
#[derive(Clone, Copy, Debug)]
struct Measurement {
    /// Wall time of the whole simulation.
    wall: Duration,
    /// Simulated time it covered.
    simulated: Duration,
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("net_vs_turmoil", e.to_string())
}

/// Runs the workload on our network: one seed, one thread.
fn run_ours(workload: Workload) -> Measurement {
    let started = Instant::now();
    let report = Simulation::new(workload.name())
        .seeds(0..1)
        .jobs(1)
        .confirm(0)
        .seed_lines(false)
        .watchdog(Duration::from_secs(3600))
        .run(move |ctx: Ctx| async move {
            ctx.set_net_config(NetConfig::fixed(workload.latency())).expect("set before the network is made");
            let net = ctx.net();
            for i in 0..workload.idle_hosts() {
                let listener = net.host(&format!("idle{i}")).listen(&PORT.to_string()).map_err(fail)?;
                tokio::spawn(async move { while listener.accept().await.is_ok() {} });
            }
            let listener = net.host("server").listen(&PORT.to_string()).map_err(fail)?;
            tokio::spawn(async move {
                if let Ok((stream, _peer)) = listener.accept().await {
                    let _ = workload.serve(stream).await;
                }
            });
            let stream = net.host("client").dial(&format!("server:{PORT}")).await.map_err(fail)?;
            workload.drive(stream).await.map_err(fail)
        });
    let wall = started.elapsed();
    report.assert_passed();
    Measurement { wall, simulated: report.outcomes[0].fake_elapsed() }
}

/// A turmoil host that accepts forever.
async fn turmoil_idle() -> turmoil::Result {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
    loop {
        listener.accept().await?;
    }
}

/// The turmoil server host: accepts one connection and serves it.
async fn turmoil_server(workload: Workload) -> turmoil::Result {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
    let (stream, _peer) = listener.accept().await?;
    workload.serve(stream).await?;
    Ok(())
}

/// Runs the workload on turmoil: fixed latency (min = max), default 1 ms tick, seeded RNG.
fn run_turmoil(workload: Workload) -> Measurement {
    let started = Instant::now();
    let mut sim = turmoil::Builder::new()
        .simulation_duration(workload.turmoil_duration())
        .min_message_latency(workload.latency())
        .max_message_latency(workload.latency())
        .rng_seed(0)
        .build();
    for i in 0..workload.idle_hosts() {
        sim.host(format!("idle{i}"), turmoil_idle);
    }
    sim.host("server", move || turmoil_server(workload));
    sim.client("client", async move {
        let stream = turmoil::net::TcpStream::connect(("server", PORT)).await?;
        workload.drive(stream).await?;
        Ok(())
    });
    if let Err(e) = sim.run() {
        panic!("turmoil {}: {e}", workload.label());
    }
    let simulated = sim.elapsed();
    drop(sim);
    Measurement { wall: started.elapsed(), simulated }
}

/// The repetition with the median wall time.
fn median(reps: usize, run: impl Fn() -> Measurement) -> Measurement {
    let mut runs: Vec<Measurement> = (0..reps).map(|_| run()).collect();
    runs.sort_by_key(|m| m.wall);
    runs[runs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (trips, secs, chunks, reps) = if quick { (200, 60, 1600, 1) } else { (2000, 600, 16384, 3) };
    let workloads = [
        Workload::RoundTrips { trips, idle_hosts: 0 },
        Workload::RoundTrips { trips, idle_hosts: 20 },
        Workload::Heartbeat { secs },
        Workload::Stream { chunks },
    ];
    let started = Instant::now();

    // One untimed run of each side first, so that neither pays the process's one-time costs
    // (first thread, lazy statics, page faults of a fresh heap) inside a measurement.
    let warm_up = Workload::RoundTrips { trips: 10, idle_hosts: 1 };
    run_ours(warm_up);
    run_turmoil(warm_up);

    let mut rows = Vec::new();
    for workload in workloads {
        eprintln!("running {} ...", workload.label());
        let ours = median(reps, || run_ours(workload));
        let theirs = median(reps, || run_turmoil(workload));
        rows.push((workload, ours, theirs));
    }

    println!();
    println!(
        "sim::net vs turmoil 0.7.2 ({}{}; wall time: median of {reps} run{}; one thread)",
        if cfg!(debug_assertions) { "debug build" } else { "release build" },
        if quick { ", --quick" } else { "" },
        if reps == 1 { "" } else { "s" },
    );
    println!(
        "{:<40} {:>10} {:>13} {:>8}   {:>15} {:>15}",
        "workload", "ours (ms)", "turmoil (ms)", "ratio", "simulated ours", "simulated turm."
    );
    for (workload, ours, theirs) in rows {
        println!(
            "{:<40} {:>10.1} {:>13.1} {:>7.1}×   {:>13.3} s {:>13.3} s",
            workload.label(),
            ms(ours.wall),
            ms(theirs.wall),
            theirs.wall.as_secs_f64() / ours.wall.as_secs_f64(),
            ours.simulated.as_secs_f64(),
            theirs.simulated.as_secs_f64(),
        );
    }
    println!(
        "ratio = turmoil / ours (above 1: ours is faster). Notes on what differs:\n\
         - turmoil advances in 1 ms ticks (its default) and delivers a message only at a tick\n  \
           boundary; ours delivers at the exact instant. At 1 ms latency both cover the same\n  \
           simulated time; at zero latency (d) each turmoil hop still waits for the next tick.\n\
         - (d) turmoil's send window is 64 segments (tcp_capacity: 4 MiB in 64 KiB writes); ours\n  \
           is a byte bound (Linux loopback's 3,910,656 bytes). The reader stops at the byte count,\n  \
           not at EOF: turmoil 0.7.2 does not deliver a FIN that reaches a full receive queue.\n\
         - wall time is a whole simulation: ours includes its fresh thread and runtime; turmoil's\n  \
           includes building the Sim, one runtime per host, and dropping it.\n\
         total time of this bench: {:.1?}",
        started.elapsed()
    );
}
