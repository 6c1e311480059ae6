//! Leader election over a Lease on kubesim (a bench binary: `cargo bench -p walkthroughs --bench
//! leader_election`, `-- --quick` for a short run). Two replicas of the databases walkthrough's
//! elector (client-go's algorithm: update with resourceVersion, 15 s / 10 s / 2 s) run against
//! kubesim's API server on the simulated network (1 ms links):
//!
//! 1. wall time of 10 simulated minutes of election (anchor: 0.75 s on client-go's fake in the
//!    humus simulation-testing proposal; target: under 75 ms);
//! 2. takeover: the leader crashes at 60 s; the time until the other replica holds the Lease,
//!    from kubesim's Lease timeline, against the bound the settings allow
//!    (`leaseDuration + 2 × retryPeriod` after the leader's last renewal: the challenger sees the
//!    renewal up to one retry late, and tries once per retry).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use sim::net::NetConfig;
use sim::node::{CrashMode, Lifecycle};
use sim::prelude::*;
use walkthroughs::databases::election::{Elector, LeaseSettings, Write};

const LEASE: &str = "bench";

async fn candidate(node: NodeCtx) -> Result<(), BoxError> {
    let client = kubesim::client::for_node(&node, "http://kube-apiserver:6443");
    let api: Api<Lease> = Api::namespaced(client, "default");
    let mut elector = Elector::new(api, LEASE, node.name(), LeaseSettings::default(), Write::Update);
    node.set_ready();
    elector.campaign(&node, || node.spawn(async {})).await;
    Ok(())
}

/// One run: two candidates for `minutes` simulated minutes; the leader crashed at 60 s when
/// `crash`. Returns the takeover time (crash → the other replica's first write as holder).
async fn election(ctx: Ctx, minutes: u64, crash: bool) -> Result<Option<Duration>, Failure> {
    ctx.set_net_config(NetConfig::fixed(Duration::from_millis(1))).expect("set before the network is made");
    let api = kubesim::server::ApiServer::new();
    api.serve_sim(&ctx).map_err(|e| Failure::correctness("bench", e.to_string()))?;
    let system = System::new(&ctx);
    system.add(ServiceSpec::new("candidate", candidate).replicas(2..=2));
    system.start().await?;
    let crash_at = ctx.elapsed()
        + Duration::from_secs(60)
        + ctx.source("bench/crash").duration(Duration::ZERO..=Duration::from_secs(2));
    if crash {
        tokio::time::sleep(crash_at - ctx.elapsed()).await;
        let leader = api.lease_timeline("default", LEASE).last().and_then(|c| c.holder.clone());
        let leader = leader.ok_or_else(|| Failure::correctness("bench", "no leader after 60 s"))?;
        system.at(ctx.elapsed(), Lifecycle::Crash { node: leader, mode: CrashMode::Seeded });
    }
    tokio::time::sleep(Duration::from_secs(minutes * 60)).await;
    let timeline = api.lease_timeline("default", LEASE);
    let takeover = crash.then(|| {
        let before = timeline.iter().rev().find(|c| c.at <= crash_at).and_then(|c| c.holder.clone());
        timeline.iter().find(|c| c.at > crash_at && c.holder.is_some() && c.holder != before).map(|c| c.at - crash_at)
    });
    system.stop().await?;
    Ok(takeover.flatten())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let seeds = if quick { 3 } else { 21 };
    // Wall time is read outside the runs (inside one, the clock is the simulated one).
    let mut walls = Vec::new();
    for seed in 0..seeds {
        let t = Instant::now();
        Simulation::new("leader_election_bench")
            .test_name("bench")
            .seeds(seed..seed + 1)
            .jobs(1)
            .confirm(0)
            .seed_lines(false)
            .progress(false)
            .time_limit(Duration::from_secs(3600))
            .run(|ctx| async move { election(ctx, 10, false).await.map(|_| ()) })
            .assert_passed();
        walls.push(t.elapsed().as_secs_f64());
    }
    let m = median(walls.clone());
    println!(
        "10 simulated minutes of leader election, 2 replicas, {seeds} seeds (one run each, harness start included): \
         median wall {:.1} ms, min {:.1} ms (target < 75 ms; anchor on client-go's fake 750 ms: ratio {:.3})",
        m * 1e3,
        walls.iter().copied().fold(f64::MAX, f64::min) * 1e3,
        m / 0.75
    );
    let takeovers = Arc::new(Mutex::new(Vec::new()));
    let t2 = Arc::clone(&takeovers);
    Simulation::new("leader_takeover_bench")
        .test_name("bench")
        .seeds(0..seeds)
        .jobs(1)
        .confirm(0)
        .seed_lines(false)
        .progress(false)
        .run(move |ctx| {
            let t2 = Arc::clone(&t2);
            async move {
                let takeover = election(ctx, 1, true).await?;
                let takeover = takeover.ok_or_else(|| Failure::correctness("bench", "no takeover within a minute"))?;
                t2.lock().expect("not poisoned").push(takeover.as_secs_f64());
                Ok(())
            }
        })
        .assert_passed();
    let s = LeaseSettings::default();
    let takeovers = takeovers.lock().expect("not poisoned").clone();
    let (lo, hi) = (takeovers.iter().copied().fold(f64::MAX, f64::min), takeovers.iter().copied().fold(0.0, f64::max));
    println!(
        "takeover after the leader crashed, {seeds} seeds: median {:.2} s, range {lo:.2}-{hi:.2} s; \
         bound: lease duration + 2 x retry (observation lag + try period) = {:?} after the last renewal, which is up to one retry ({:?}) before the crash",
        median(takeovers),
        s.duration + s.retry * 2,
        s.retry
    );
}
