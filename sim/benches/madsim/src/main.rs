//! `net_vs_turmoil`'s workloads on madsim 0.2.34 (the madsim column of that bench, which spawns
//! this binary and parses its output; see `sim/benches/net_vs_turmoil.rs` for the table).
//!
//! Runs the four network workloads of [`workload`] (the same file the bench compiles) over one
//! `madsim::net::TcpStream` between two madsim nodes, plus the ticker, each as a whole simulation:
//! building the `Runtime` and its nodes, `block_on` and dropping the runtime. Prints one line per
//! workload:
//!
//! ```text
//! madsim-bench <key> wall_ms=<f> simulated_s=<f>
//! ```
//!
//! with the median wall time of 3 repetitions (1 with `--quick`), after one untimed warm-up.
//!
//! **Latency.** madsim draws every message's latency from `Config::net.send_latency`, a half-open
//! range sampled in whole nanoseconds, so `latency..latency + 1 ns` fixes it exactly (an empty
//! range, min = max, panics in `gen_range`). But a receiver waits for each message with
//! `sleep_until(arrival)`, and madsim's `sleep_until` never sleeps less than 1 ms: a message is
//! delivered no sooner than 1 ms after the receiver starts waiting for it, so zero latency (d)
//! is impossible — each 64 KiB write costs at least 1 ms of simulated time, one after another.

#[cfg(not(madsim))]
compile_error!("build with RUSTFLAGS=\"--cfg madsim\": without it madsim is plain tokio");

mod workload;

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use madsim::net::{TcpListener, TcpStream};
use madsim::runtime::Runtime;
use madsim::time::TimeHandle;

use workload::{PORT, Sizes, WARM_UP, Workload};

/// One simulation's cost.
#[derive(Clone, Copy, Debug)]
struct Measurement {
    /// Wall time of the whole simulation.
    wall: Duration,
    /// Simulated time it covered.
    simulated: Duration,
}

/// A runtime with every link's latency fixed at `latency` and seed 0.
fn runtime(latency: Duration) -> Runtime {
    let mut config = madsim::Config::default();
    // Half-open and sampled in whole nanoseconds: exactly `latency`.
    config.net.send_latency = latency..latency + Duration::from_nanos(1);
    Runtime::with_seed_and_config(0, config)
}

/// The address of host `index` (10.0.0.0/16, as ours).
fn ip(index: u32) -> IpAddr {
    let [_, _, hi, lo] = (index + 1).to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(10, 0, hi, lo))
}

/// An idle host: accepts forever.
async fn idle(addr: SocketAddr) -> io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    loop {
        listener.accept().await?;
    }
}

/// Runs the workload on madsim: the server on one node, the client on another, `idle_hosts`
/// more nodes that only accept.
fn run_madsim(workload: Workload) -> Measurement {
    let started = Instant::now();
    let runtime = runtime(workload.latency());
    for i in 0..workload.idle_hosts() {
        let node = runtime.create_node().name(format!("idle{i}")).ip(ip(2 + i)).build();
        node.spawn(idle(SocketAddr::new(ip(2 + i), PORT)));
    }
    let server_addr = SocketAddr::new(ip(0), PORT);
    let server = runtime.create_node().name("server").ip(server_addr.ip()).build();
    let client = runtime.create_node().name("client").ip(ip(1)).build();
    // madsim's bind and connect each sleep a few random microseconds first: the client connects
    // once the server is listening (ours and turmoil bind before the client starts, too).
    let (listening, bound) = tokio::sync::oneshot::channel::<()>();
    server.spawn(async move {
        let listener = TcpListener::bind(server_addr).await?;
        let _ = listening.send(());
        let (stream, _peer) = listener.accept().await?;
        workload.serve(stream).await
    });
    let done = client.spawn(async move {
        bound.await.map_err(io::Error::other)?;
        let stream = TcpStream::connect(server_addr).await?;
        workload.drive(stream).await
    });
    let simulated = runtime.block_on(async move {
        match done.await {
            Ok(Ok(())) => TimeHandle::current().elapsed(),
            Ok(Err(e)) => panic!("madsim {}: {e}", workload.label()),
            Err(e) => panic!("madsim {}: client task failed: {e:?}", workload.label()),
        }
    });
    drop(runtime);
    Measurement { wall: started.elapsed(), simulated }
}

/// Runs the ticker on madsim: `ticks` ticks of a 1 ms `madsim::time::interval` on one node.
fn run_ticker(ticks: u64) -> Measurement {
    let started = Instant::now();
    let runtime = runtime(Duration::ZERO);
    let node = runtime.create_node().name("ticker").build();
    let done = node.spawn(workload::ticker(ticks));
    let simulated = runtime.block_on(async move {
        done.await.expect("the ticker task does not fail");
        TimeHandle::current().elapsed()
    });
    drop(runtime);
    Measurement { wall: started.elapsed(), simulated }
}

/// The repetition with the median wall time.
fn median(reps: usize, run: impl Fn() -> Measurement) -> Measurement {
    let mut runs: Vec<Measurement> = (0..reps).map(|_| run()).collect();
    runs.sort_by_key(|m| m.wall);
    runs[runs.len() / 2]
}

fn print(key: &str, m: Measurement) {
    println!(
        "madsim-bench {key} wall_ms={:.3} simulated_s={:.6}",
        m.wall.as_secs_f64() * 1e3,
        m.simulated.as_secs_f64()
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes = Sizes::new(quick);
    // `--only KEY [N]`: one workload N times after the warm-up, each wall time printed (the run to
    // profile, as the bench's own `--only`).
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--only") {
        let key = args.get(at + 1).map_or("round_trips", String::as_str);
        let times = args.get(at + 2).and_then(|n| n.parse().ok()).unwrap_or(1);
        run_madsim(WARM_UP);
        for _ in 0..times {
            let m = match sizes.workloads().into_iter().find(|w| w.key() == key) {
                Some(workload) => run_madsim(workload),
                None if key == "ticker" => run_ticker(sizes.ticks()),
                None => panic!("--only {key:?}: not a workload"),
            };
            print(key, m);
        }
        return;
    }
    run_madsim(WARM_UP);
    for workload in sizes.workloads() {
        eprintln!("madsim: running {} ...", workload.label());
        print(workload.key(), median(sizes.reps, || run_madsim(workload)));
    }
    eprintln!("madsim: running the ticker ...");
    print("ticker", median(sizes.reps, || run_ticker(sizes.ticks())));
}
