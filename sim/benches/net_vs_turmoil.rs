//! Our simulated network against madsim, turmoil and bare tokio on the same workloads (a bench
//! binary: `cargo bench -p sim --bench net_vs_turmoil`, or `... -- --quick` for CI).
//!
//! Each workload runs as one client talking to one server over one TCP connection, written once
//! against tokio's `AsyncRead`/`AsyncWrite` (`madsim/src/workload.rs`, shared with the madsim
//! crate) and run four ways: on our network, on madsim 0.2.34, on turmoil 0.7.2, and on the
//! **tokio floor** (no simulator: a paused tokio runtime and an in-memory pipe, see [`run_floor`]):
//!
//! - **(a) round trips**: 2,000 sequential request/response round trips (64-byte request, 64-byte
//!   echoed response) at 1 ms one-way latency;
//! - **(b) round trips + idle hosts**: (a) with 20 more hosts, each running a server task that
//!   accepts forever and never gets a connection: what simulated hosts that do nothing cost;
//! - **(c) heartbeat**: the client is idle for 600 simulated seconds except for a heartbeat every
//!   second (a 16-byte message, echoed) at 1 ms one-way latency: what simulated idle time costs;
//! - **(d) stream**: 1 GiB from the server to the client at zero latency, in writes of 64 KiB;
//!   the client reads and discards until all of it has arrived (it counts bytes rather than wait
//!   for EOF; see `send_stream`): raw byte throughput;
//! - **(e) ticker**: no network, a 1 ms `tokio::time::interval` ticking for 600 simulated seconds
//!   (600,000 ticks), reported as ticks per second of wall time: what a timer costs.
//!
//! `--quick` shrinks every workload about 10×: 200 round trips, 60 s of heartbeats, 100 MiB, 60 s
//! of ticks (the 20 idle hosts stay), and measures once instead of taking the median of 3
//! repetitions.
//!
//! **madsim** needs its own build (`RUSTFLAGS="--cfg madsim"` swaps tokio's runtime, time and net
//! for madsim's in every crate of the build), so its column comes from a separate crate,
//! `sim/benches/madsim/`, which this bench builds and runs first (`cargo run --release`, target
//! directory `target/madsim-bench` or `$MADSIM_BENCH_TARGET_DIR`) and whose output lines it
//! parses. A failed build or run fails the bench; `NET_BENCH_NO_MADSIM=1` skips the column.
//!
//! **Reading the output.** One row per workload: the median wall time of a whole simulation in
//! each column (ours: `Simulation::run` with one seed, including its fresh thread and runtime;
//! madsim: building the `Runtime` and its nodes, `block_on` and dropping it; turmoil: building
//! the `Sim`, registering hosts, `Sim::run` and dropping it; the floor: a fresh thread with a
//! paused runtime), and the ratios madsim / ours (the headline) and turmoil / ours (above 1: we
//! are faster), and ours / floor (what our simulator costs above tokio itself). A second table
//! gives the simulated time each column covered, as a sanity check that all did the same work:
//! they should be close, but need not be equal (turmoil delivers only at its 1 ms ticks, madsim
//! never sleeps less than 1 ms). The notes printed under the tables say where a simulator cannot
//! express a workload exactly.

#[path = "madsim/src/workload.rs"]
mod workload;

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use sim::net::NetConfig;
use sim::{Ctx, Failure, Simulation};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

use workload::{ONE_WAY, PORT, Sizes, WARM_UP, Workload};

impl Workload {
    /// A name for the simulation (trace directories, `SIM_ONLY`).
    fn name(self) -> &'static str {
        match self {
            Workload::RoundTrips { idle_hosts: 0, .. } => "net_vs_turmoil_round_trips",
            Workload::RoundTrips { .. } => "net_vs_turmoil_idle_hosts",
            Workload::Heartbeat { .. } => "net_vs_turmoil_heartbeat",
            Workload::Stream { .. } => "net_vs_turmoil_stream",
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

/// Our harness for one body: one seed, one thread, no confirmation runs.
fn simulation(name: &str) -> Simulation {
    Simulation::new(name).seeds(0..1).jobs(1).confirm(0).seed_lines(false).watchdog(Duration::from_secs(3600))
}

/// Runs the workload on our network: one seed, one thread.
fn run_ours(workload: Workload) -> Measurement {
    let started = Instant::now();
    let report = simulation(workload.name()).run(move |ctx: Ctx| async move {
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

/// Runs the ticker inside our simulation (one seed, as [`run_ours`]).
fn ticker_ours(ticks: u64) -> Measurement {
    let started = Instant::now();
    let report = simulation("net_vs_turmoil_ticker").run(move |_ctx: Ctx| async move {
        workload::ticker(ticks).await;
        Ok(())
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

/// A turmoil simulation: fixed latency (min = max), default 1 ms tick, seeded RNG.
fn turmoil_sim<'a>(duration: Duration, latency: Duration) -> turmoil::Sim<'a> {
    turmoil::Builder::new()
        .simulation_duration(duration)
        .min_message_latency(latency)
        .max_message_latency(latency)
        .rng_seed(0)
        .build()
}

/// Runs the simulation to its end; the wall time includes dropping it.
fn turmoil_finish(started: Instant, mut sim: turmoil::Sim<'_>, label: &str) -> Measurement {
    if let Err(e) = sim.run() {
        panic!("turmoil {label}: {e}");
    }
    let simulated = sim.elapsed();
    drop(sim);
    Measurement { wall: started.elapsed(), simulated }
}

/// Runs the workload on turmoil.
fn run_turmoil(workload: Workload) -> Measurement {
    let started = Instant::now();
    let mut sim = turmoil_sim(workload.turmoil_duration(), workload.latency());
    for i in 0..workload.idle_hosts() {
        sim.host(format!("idle{i}"), turmoil_idle);
    }
    sim.host("server", move || turmoil_server(workload));
    sim.client("client", async move {
        let stream = turmoil::net::TcpStream::connect(("server", PORT)).await?;
        workload.drive(stream).await?;
        Ok(())
    });
    turmoil_finish(started, sim, &workload.label())
}

/// Runs the ticker inside a turmoil client.
fn ticker_turmoil(sizes: Sizes) -> Measurement {
    let started = Instant::now();
    let mut sim = turmoil_sim(Duration::from_secs(sizes.ticker_secs + 100), Duration::ZERO);
    let ticks = sizes.ticks();
    sim.client("ticker", async move {
        workload::ticker(ticks).await;
        Ok(())
    });
    turmoil_finish(started, sim, "ticker")
}

/// The per-direction buffer of the floor's pipe: large enough that no write of the latency-bound
/// workloads ever waits for the reader; for (d), about Linux loopback's socket buffers (and
/// turmoil's 64-segment window).
const FLOOR_PIPE_BYTES: usize = 4 << 20;

/// One end of the floor's link with latency: a `tokio::io::duplex` end whose every write is
/// handed to the pipe `latency` after it is issued (the writer is held meanwhile), and is then
/// readable at once. Reads go straight to the pipe.
struct Delayed {
    inner: DuplexStream,
    latency: Duration,
    /// One timer, reset per write (no allocation per write).
    delay: Pin<Box<tokio::time::Sleep>>,
    /// Whether the pending write's latency has elapsed.
    due: Option<bool>,
}

impl Delayed {
    fn new(inner: DuplexStream, latency: Duration) -> Delayed {
        Delayed { inner, latency, delay: Box::pin(tokio::time::sleep(Duration::ZERO)), due: None }
    }
}

impl AsyncRead for Delayed {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Delayed {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match this.due {
                None => {
                    let deadline = tokio::time::Instant::now() + this.latency;
                    this.delay.as_mut().reset(deadline);
                    this.due = Some(false);
                }
                Some(false) => {
                    ready!(this.delay.as_mut().poll(cx));
                    this.due = Some(true);
                }
                Some(true) => {
                    let written = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
                    this.due = None;
                    return Poll::Ready(Ok(written));
                }
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Runs `body` as a whole "simulation" on bare tokio: a fresh thread with a paused
/// `current_thread` runtime (time only, no I/O driver), timed from spawning the thread to
/// joining it; the simulated time is the paused clock's advance.
fn on_paused_tokio<F: Future<Output = io::Result<()>> + 'static>(
    label: &str,
    body: impl FnOnce() -> F + Send + 'static,
) -> Measurement {
    let started = Instant::now();
    let simulated = std::thread::spawn(move || {
        // As a simulator on tokio must configure it (issue 19's floor): a seeded scheduler RNG
        // and task hooks (empty here; ours number the polls for the schedule hash).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .rng_seed(tokio::runtime::RngSeed::from_bytes(b"net_vs_turmoil floor"))
            .on_task_spawn(|_| {})
            .on_task_terminate(|_| {})
            .on_before_task_poll(|_| {})
            .on_after_task_poll(|_| {})
            .build()
            .expect("a current_thread runtime with time builds");
        let simulated = runtime.block_on(async move {
            let start = tokio::time::Instant::now();
            body().await.map(|()| start.elapsed())
        });
        drop(runtime);
        simulated
    })
    .join()
    .expect("the floor's thread does not panic");
    match simulated {
        Ok(simulated) => Measurement { wall: started.elapsed(), simulated },
        Err(e) => panic!("tokio floor {label}: {e}"),
    }
}

/// The client and the server of `workload` over one pipe, the server as a spawned task.
async fn floor_pair<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    workload: Workload,
    client: S,
    server: S,
) -> io::Result<()> {
    tokio::spawn(async move {
        let _ = workload.serve(server).await;
    });
    workload.drive(client).await
}

/// Runs the workload on the **tokio floor**: what tokio itself costs for the same work, with no
/// simulator.
///
/// What it does: [`on_paused_tokio`] (a fresh thread, a paused `current_thread` runtime whose
/// clock jumps to the next timer when every task is idle, with a seeded RNG and empty task hooks,
/// as any simulator on tokio configures it); the workload's own `serve` and `drive`
/// as two tasks joined by one `tokio::io::duplex` pipe ([`FLOOR_PIPE_BYTES`] per direction:
/// ordered bytes, a bounded buffer, EOF when an end drops). At nonzero latency each end is
/// [`Delayed`]: every write waits the one-way latency on a tokio timer before its bytes enter
/// the pipe, so every delivered write costs one timer. Each idle host is one task parked
/// forever (an accept that never gets a connection is exactly that to tokio).
///
/// What it does not model: hosts, addresses, ports, listen/connect/accept and their handshake
/// (the pipe exists from the start), segments, windows and acknowledgements, FIN and RST,
/// faults, per-host runtimes, the seeded scheduler, and any record of what happened. Latency is
/// stop-and-wait: a writer waits out its write before it can issue the next, so two writes in
/// one direction are never in flight together (a real link pipelines them). None of (a)-(c)
/// has two writes in flight in one direction, and (d) has no latency, so the floor covers the
/// same simulated time as ours on all four.
fn run_floor(workload: Workload) -> Measurement {
    on_paused_tokio(&workload.label(), move || async move {
        for _ in 0..workload.idle_hosts() {
            tokio::spawn(std::future::pending::<()>());
        }
        let (client, server) = tokio::io::duplex(FLOOR_PIPE_BYTES);
        let latency = workload.latency();
        if latency.is_zero() {
            floor_pair(workload, client, server).await
        } else {
            floor_pair(workload, Delayed::new(client, latency), Delayed::new(server, latency)).await
        }
    })
}

/// Runs the ticker on the tokio floor.
fn ticker_floor(ticks: u64) -> Measurement {
    on_paused_tokio("ticker", move || async move {
        workload::ticker(ticks).await;
        Ok(())
    })
}

/// How to build and run the madsim crate.
struct MadsimCrate {
    cargo: PathBuf,
    manifest: PathBuf,
    target_dir: PathBuf,
    quick: bool,
}

impl MadsimCrate {
    fn new(quick: bool) -> MadsimCrate {
        let sim_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let repo = sim_dir.parent().expect("sim is a directory of the repository");
        MadsimCrate {
            cargo: std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from),
            manifest: sim_dir.join("benches/madsim/Cargo.toml"),
            target_dir: std::env::var_os("MADSIM_BENCH_TARGET_DIR")
                .map_or_else(|| repo.join("target/madsim-bench"), PathBuf::from),
            quick,
        }
    }

    /// The command as a person reruns it.
    fn command_line(&self) -> String {
        format!(
            "RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR={} cargo run --release --manifest-path {}{}",
            self.target_dir.display(),
            self.manifest.display(),
            if self.quick { " -- --quick" } else { "" }
        )
    }

    /// Builds and runs the crate (its build output and progress on our stderr) and parses its
    /// `madsim-bench <key> wall_ms=<f> simulated_s=<f>` lines; panics, naming the command to
    /// rerun, when the build, the run or the output fails.
    fn run(&self) -> BTreeMap<String, Measurement> {
        let fail = |what: String| -> ! {
            panic!(
                "the madsim column failed: {what}\n  rerun: {}\n  (or set NET_BENCH_NO_MADSIM=1 to skip the column)",
                self.command_line()
            )
        };
        let mut command = Command::new(&self.cargo);
        command.args(["run", "--release", "--manifest-path"]).arg(&self.manifest);
        if self.quick {
            command.args(["--", "--quick"]);
        }
        // Only for this child: `--cfg madsim` in the main build would swap tokio for madsim in
        // every crate (and rebuild them all). CARGO_ENCODED_RUSTFLAGS would take precedence.
        command
            .env("RUSTFLAGS", "--cfg madsim")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        let output = command.output().unwrap_or_else(|e| fail(format!("cannot start {}: {e}", self.cargo.display())));
        if !output.status.success() {
            fail(format!("cargo run exited with {}", output.status));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut measured = BTreeMap::new();
        for line in stdout.lines() {
            let Some(rest) = line.strip_prefix("madsim-bench ") else { continue };
            let mut fields = rest.split_whitespace();
            let key = fields.next().unwrap_or_else(|| fail(format!("a line without a key: {line:?}")));
            let mut value = |name: &str| -> f64 {
                fields
                    .next()
                    .and_then(|field| field.strip_prefix(name))
                    .and_then(|v| v.strip_prefix('='))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| fail(format!("no {name}=<number> in {line:?}")))
            };
            let wall = Duration::from_secs_f64(value("wall_ms") / 1e3);
            let simulated = Duration::from_secs_f64(value("simulated_s"));
            measured.insert(key.to_string(), Measurement { wall, simulated });
        }
        measured
    }
}

/// The repetition with the median wall time.
fn median(reps: usize, run: impl Fn() -> Measurement) -> Measurement {
    let mut runs: Vec<Measurement> = (0..reps).map(|_| run()).collect();
    runs.sort_by_key(|m| m.wall);
    runs[runs.len() / 2]
}

/// One row of the tables: a measurement per column (madsim's `None` when skipped).
struct Row {
    label: String,
    /// For the ticker: the tick count, and cells are ticks per second of wall time.
    ticks: Option<u64>,
    ours: Measurement,
    madsim: Option<Measurement>,
    turmoil: Measurement,
    floor: Measurement,
}

impl Row {
    /// A wall-time cell: milliseconds, or ticks per second for the ticker.
    fn cell(&self, m: Option<Measurement>) -> String {
        let Some(m) = m else { return "skipped".to_string() };
        let secs = m.wall.as_secs_f64();
        match self.ticks {
            Some(ticks) => format!("{:.2} M/s", ticks as f64 / secs / 1e6),
            None if secs < 0.01 => format!("{:.2} ms", secs * 1e3),
            None => format!("{:.1} ms", secs * 1e3),
        }
    }
}

/// `a / b` of wall times, as a table cell.
fn ratio(a: Option<Measurement>, b: Option<Measurement>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}×", a.wall.as_secs_f64() / b.wall.as_secs_f64()),
        _ => "-".to_string(),
    }
}

fn simulated(m: Option<Measurement>) -> String {
    m.map_or_else(|| "skipped".to_string(), |m| format!("{:.3} s", m.simulated.as_secs_f64()))
}

/// `--only COLUMN KEYS [N]`: runs one column's (`ours` or `floor`) workloads `KEYS` (a
/// comma-separated list of `round_trips`, `idle_hosts`, `heartbeat`, `stream`, `ticker`) N times
/// (default 1) after one warm-up, printing each wall time: the run to profile (`perf record`,
/// `valgrind --tool=callgrind`), with nothing else in the process.
fn only(sizes: Sizes, column: &str, key: &str, times: usize) {
    type Runs = (fn(Workload) -> Measurement, fn(u64) -> Measurement);
    let (run, ticker): Runs = match column {
        "ours" => (run_ours, ticker_ours),
        "floor" => (run_floor, ticker_floor),
        _ => panic!("--only {column:?}: not a column (ours, floor)"),
    };
    run(WARM_UP);
    for _ in 0..times {
        for key in key.split(',') {
            let m = match sizes.workloads().into_iter().find(|w| w.key() == key) {
                Some(workload) => run(workload),
                None if key == "ticker" => ticker(sizes.ticks()),
                None => panic!(
                    "--only {column} {key:?}: not a workload (round_trips, idle_hosts, heartbeat, stream, ticker)"
                ),
            };
            let (wall, simulated) = (m.wall.as_secs_f64() * 1e3, m.simulated.as_secs_f64());
            println!("{column} {key}: {wall:.3} ms wall, {simulated:.3} s simulated");
        }
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes = Sizes::new(quick);
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--only") {
        let column = args.get(at + 1).map_or("ours", String::as_str);
        let key = args.get(at + 2).map_or("round_trips", String::as_str);
        let times = args.get(at + 3).and_then(|n| n.parse().ok()).unwrap_or(1);
        only(sizes, column, key, times);
        return;
    }
    let reps = sizes.reps;
    let started = Instant::now();

    // madsim first, in its own process, so that its build does not share the machine with a
    // measurement.
    let madsim = if std::env::var_os("NET_BENCH_NO_MADSIM").is_some_and(|v| v == "1") {
        eprintln!("NET_BENCH_NO_MADSIM=1: the madsim column is skipped");
        None
    } else {
        let madsim = MadsimCrate::new(quick);
        eprintln!("building and running the madsim column: {}", madsim.command_line());
        Some(madsim.run())
    };
    let madsim_of = |key: &str| -> Option<Measurement> {
        let measured = madsim.as_ref()?;
        Some(*measured.get(key).unwrap_or_else(|| {
            panic!(
                "the madsim column has no line for {key:?} (got {:?})\n  rerun: {}",
                measured.keys().collect::<Vec<_>>(),
                MadsimCrate::new(quick).command_line()
            )
        }))
    };

    // One untimed run of each in-process column first, so that none pays the process's one-time
    // costs (first thread, lazy statics, page faults of a fresh heap) inside a measurement.
    run_ours(WARM_UP);
    run_turmoil(WARM_UP);
    run_floor(WARM_UP);

    let mut rows = Vec::new();
    for workload in sizes.workloads() {
        eprintln!("running {} ...", workload.label());
        rows.push(Row {
            label: workload.label(),
            ticks: None,
            ours: median(reps, || run_ours(workload)),
            madsim: madsim_of(workload.key()),
            turmoil: median(reps, || run_turmoil(workload)),
            floor: median(reps, || run_floor(workload)),
        });
    }
    eprintln!("running the ticker ...");
    rows.push(Row {
        label: format!("(e) ticker: 1 ms interval, {} s", sizes.ticker_secs),
        ticks: Some(sizes.ticks()),
        ours: median(reps, || ticker_ours(sizes.ticks())),
        madsim: madsim_of("ticker"),
        turmoil: median(reps, || ticker_turmoil(sizes)),
        floor: median(reps, || ticker_floor(sizes.ticks())),
    });

    println!();
    println!(
        "sim::net vs madsim 0.2.34 vs turmoil 0.7.2 vs bare tokio ({}{}; wall time: median of {reps} run{}; one thread)",
        if cfg!(debug_assertions) { "debug build" } else { "release build" },
        if quick { ", --quick" } else { "" },
        if reps == 1 { "" } else { "s" },
    );
    println!(
        "{:<38} {:>10} {:>10} {:>10} {:>11}   {:>11} {:>12} {:>10}",
        "workload", "ours", "madsim", "turmoil", "tokio floor", "madsim/ours", "turmoil/ours", "ours/floor"
    );
    for row in &rows {
        println!(
            "{:<38} {:>10} {:>10} {:>10} {:>11}   {:>11} {:>12} {:>10}",
            row.label,
            row.cell(Some(row.ours)),
            row.cell(row.madsim),
            row.cell(Some(row.turmoil)),
            row.cell(Some(row.floor)),
            ratio(row.madsim, Some(row.ours)),
            ratio(Some(row.turmoil), Some(row.ours)),
            ratio(Some(row.ours), Some(row.floor)),
        );
    }
    println!(
        "(a)-(d): wall time of a whole simulation; (e): ticks per second of wall time. Ratios are of\n\
         wall time: madsim/ours and turmoil/ours above 1, ours is faster; ours/floor, what our\n\
         simulator costs above tokio itself."
    );
    println!();
    println!(
        "{:<38} {:>10} {:>10} {:>10} {:>11}",
        "simulated time covered", "ours", "madsim", "turmoil", "tokio floor"
    );
    for row in &rows {
        println!(
            "{:<38} {:>10} {:>10} {:>10} {:>11}",
            row.label,
            simulated(Some(row.ours)),
            simulated(row.madsim),
            simulated(Some(row.turmoil)),
            simulated(Some(row.floor)),
        );
    }
    println!(
        "Notes on what differs:\n\
         - turmoil advances in 1 ms ticks (its default) and delivers a message only at a tick\n  \
           boundary; ours delivers at the exact instant. At 1 ms latency both cover the same\n  \
           simulated time; at zero latency (d) each turmoil hop still waits for the next tick.\n\
         - (d) turmoil's send window is 64 segments (tcp_capacity: 4 MiB in 64 KiB writes); ours\n  \
           is a byte bound (Linux loopback's 3,910,656 bytes). The reader stops at the byte count,\n  \
           not at EOF: turmoil 0.7.2 does not deliver a FIN that reaches a full receive queue.\n\
         - madsim's TCP is a pair of unbounded in-order message channels: a write only appends to\n  \
           a buffer, a flush sends the buffer as one message (so every write here is flushed), and\n  \
           nothing ever waits for the reader: no window, no segments, no FIN (EOF when the peer's\n  \
           stream is dropped; shutdown does nothing). In (d) the server queues all of the stream\n  \
           before the client reads any, and memory holds it. connect is delivered at once (no\n  \
           handshake latency), but bind, connect and accept each sleep a random 0-5 us first.\n\
         - madsim's latency is drawn per message from Config.net.send_latency; the range is\n  \
           half-open in whole nanoseconds, so latency..latency+1ns fixes it exactly (min = max\n  \
           panics). But the receiver waits for each message with sleep_until, and madsim never\n  \
           sleeps less than 1 ms: zero latency is impossible. (d) costs 1 ms per 64 KiB write, one\n  \
           after another (16.4 simulated s for 1 GiB); the 0-5 us sleeps above become 1 ms each\n  \
           (about 4 ms of connection setup); the ticker's first tick comes after 1 ms.\n\
         - madsim's clock is its own (a timer wheel; Instant::now and SystemTime inside the\n  \
           runtime are its clock, by interposing clock_gettime): it jumps to the next timer when\n  \
           no task is ready, and also moves 50-100 ns per task poll and 50 ns per jump, so its\n  \
           simulated times run a little over the others'. Its executor polls a random ready task.\n\
         - madsim runs in its own process (sim/benches/madsim, built with --cfg madsim and\n  \
           without tokio_unstable; same release profile), measured the same way after a warm-up.\n\
         - the tokio floor is no simulator: two tasks on a paused current_thread runtime (seeded\n  \
           RNG, empty task hooks, as a simulator on tokio configures it) joined by a\n  \
           tokio::io::duplex pipe (4 MiB per direction), each write held for the one-way\n  \
           latency on a tokio timer, idle hosts as parked tasks. No hosts, addresses, handshake,\n  \
           segments, FIN/RST, faults, seeded event queue or history; latency is stop-and-wait (no\n  \
           two writes in flight one way, which none of these workloads needs). In (d) it is the\n  \
           cost of tokio's duplex, which copies every byte into its buffer and out again: not a\n  \
           lower bound for a network that moves bytes differently (ours/floor can be below 1).\n\
         - wall time is a whole simulation: ours includes its fresh thread and runtime; madsim's\n  \
           building the Runtime and its nodes and dropping it; turmoil's building the Sim, one\n  \
           runtime per host, and dropping it; the floor's its fresh thread and runtime. Ours and\n  \
           the floor pay for spawning a thread (tens of microseconds); madsim and turmoil run on\n  \
           the calling thread.\n\
         total time of this bench: {:.1?}",
        started.elapsed()
    );
}
