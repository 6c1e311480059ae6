//! kubesim against a real kube-apiserver, measured in the same run with the same code
//! (`cargo bench -p fidelity --bench kube`, add `-- --quick` for a short run):
//!
//! 1. start-to-ready: kubesim's `ApiServer::start_local()` until `GET /version` through kube-rs
//!    is answered, against the local process (`fidelity/scripts/kube-local.sh start`: make
//!    certificates and keys, start etcd and kube-apiserver, wait for `/readyz`);
//! 2. a create/update/watch loop through kube-rs: a watch open on a namespace while one task
//!    creates a ConfigMap, updates it and waits for the watch to deliver the MODIFIED event;
//!    operations (writes) per second;
//! 3. a `Controller`'s reconcile throughput: N ConfigMaps created, then each updated once; the
//!    time until every object's update has been reconciled, as reconciles per second.
//!
//! Each measurement prints both sides and the ratio. Without a real server (no Go, nothing built:
//! see `fidelity/scripts/kube-local.sh available`) the real side prints `skipped (…)`;
//! `FIDELITY_KUBECONFIG` gives one for parts 2 and 3.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fidelity::counterpart::Counterpart;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

mod support;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

fn kubesim_start_to_ready(n: usize) -> Duration {
    let rt = runtime();
    let mut runs = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let server = fidelity::kube::start_kubesim().expect("kubesim");
        rt.block_on(async {
            let client = fidelity::kube::client(server.url()).await.expect("client");
            client.apiserver_version().await.expect("GET /version");
        });
        runs.push(t.elapsed());
    }
    support::report_ready("kubesim (GET /version answered)", &mut runs)
}

/// The local process's start-to-ready, `n` times: the median and the last server (kept for
/// the loops), or why there is none.
fn real_start_to_ready(n: usize) -> Result<(Duration, Box<dyn Counterpart>), String> {
    support::time_starts(&fidelity::kube::local(), "kube-apiserver + etcd (local process, /readyz)", n)
}

async fn namespace(client: &Client, name: &str) {
    let ns: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(name.to_string());
    ns.create(&PostParams::default(), &n).await.expect("namespace");
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    c
}

/// Writes per second of `count` create+update pairs, each update awaited on an open watch.
fn write_watch_loop(name: &str, address: &str, count: usize) -> f64 {
    let rt = runtime();
    rt.block_on(async {
        let client = fidelity::kube::client(address).await.expect("client");
        let ns = format!("bench-loop-{}-{}", std::process::id(), Instant::now().elapsed().as_nanos() % 100_000);
        namespace(&client, &ns).await;
        let api: Api<ConfigMap> = Api::namespaced(client, &ns);
        let rv =
            api.list_metadata(&Default::default()).await.expect("list").metadata.resource_version.unwrap_or_default();
        let mut events = api.watch(&WatchParams::default().timeout(290), &rv).await.expect("watch").boxed();
        let t = Instant::now();
        for i in 0..count {
            let n = format!("cm-{i}");
            api.create(&PostParams::default(), &cm(&n)).await.expect("create");
            api.patch(&n, &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "1"}}))).await.expect("update");
            loop {
                match events.try_next().await.expect("a watch event") {
                    Some(WatchEvent::Modified(c)) if c.name_any() == n => break,
                    Some(_) => {}
                    None => panic!("{name}: the watch ended"),
                }
            }
        }
        let elapsed = t.elapsed();
        let rate = (2 * count) as f64 / elapsed.as_secs_f64();
        println!("write+watch     {name:<44} n={count:<5} {elapsed:>9.1?}  {rate:>8.0} writes/s");
        rate
    })
}

#[derive(Debug)]
enum Never {}
impl std::fmt::Display for Never {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}
impl std::error::Error for Never {}

type Seen = Arc<Mutex<HashSet<String>>>;

/// Reconciles per second: `count` ConfigMaps created, a Controller started, each updated once;
/// the time from the first update until every update has been reconciled.
fn controller_throughput(name: &str, address: &str, count: usize) -> f64 {
    let rt = runtime();
    rt.block_on(async {
        let client = fidelity::kube::client(address).await.expect("client");
        let ns = format!("bench-ctl-{}-{}", std::process::id(), Instant::now().elapsed().as_nanos() % 100_000);
        namespace(&client, &ns).await;
        let api: Api<ConfigMap> = Api::namespaced(client, &ns);
        for i in 0..count {
            api.create(&PostParams::default(), &cm(&format!("cm-{i}"))).await.expect("create");
        }
        let seen: Seen = Arc::default();
        let reconcile = |c: Arc<ConfigMap>, seen: Arc<Seen>| async move {
            if c.data.as_ref().is_some_and(|d| d.contains_key("v")) {
                seen.lock().expect("seen lock").insert(c.name_any());
            }
            Ok::<_, Never>(Action::await_change())
        };
        let controller = Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, |_, _: &Never, _| Action::await_change(), Arc::new(seen.clone()))
            .for_each(|_| async {});
        let task = tokio::spawn(controller);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = Instant::now();
        for i in 0..count {
            let patch = Patch::Merge(json!({"data": {"v": "1"}}));
            api.patch(&format!("cm-{i}"), &PatchParams::default(), &patch).await.expect("update");
        }
        while seen.lock().expect("seen lock").len() < count {
            assert!(t.elapsed() < Duration::from_secs(120), "{name}: reconciles stalled");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let elapsed = t.elapsed();
        task.abort();
        let rate = count as f64 / elapsed.as_secs_f64();
        println!("controller      {name:<44} n={count:<5} {elapsed:>9.1?}  {rate:>8.0} reconciles/s");
        rate
    })
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    println!("kubesim vs kube-apiserver ({})", if quick { "quick" } else { "full" });
    let (loops, objects) = if quick { (100, 100) } else { (1_000, 1_000) };

    let sim_ready = kubesim_start_to_ready(if quick { 20 } else { 200 });
    let real = real_start_to_ready(if quick { 1 } else { 3 });
    let (real_ready, real_server) = match real {
        Ok((d, c)) => (Some(d), Some(c)),
        Err(why) => {
            println!("real server: skipped ({why})");
            (None, None)
        }
    };
    let external = std::env::var(fidelity::kube::KUBECONFIG_ENV).ok().filter(|p| !p.is_empty());
    let real_address = real_server.as_ref().map(|c| c.address().to_string()).or(external);

    let sim = fidelity::kube::start_kubesim().expect("kubesim");
    let sim_loop = write_watch_loop("kubesim (loopback)", sim.url(), loops);
    let sim_ctl = controller_throughput("kubesim (loopback)", sim.url(), objects);
    drop(sim);
    let real_rates = real_address.as_deref().map(|address| {
        (
            write_watch_loop("kube-apiserver (loopback)", address, loops),
            controller_throughput("kube-apiserver (loopback)", address, objects),
        )
    });
    drop(real_server);

    println!("ratios (kubesim vs kube-apiserver {}):", fidelity::kube::VERSION_DEFAULT);
    match real_ready {
        Some(real) => println!(
            "  start-to-ready  kubesim {sim_ready:>9.1?}  kube-apiserver {real:>9.1?}  kubesim is {:.0}x faster",
            real.as_secs_f64() / sim_ready.as_secs_f64()
        ),
        None => println!("  start-to-ready  real server: skipped"),
    }
    match real_rates {
        Some((real_loop, real_ctl)) => {
            println!(
                "  write+watch     kubesim {sim_loop:>7.0}/s  kube-apiserver {real_loop:>7.0}/s  kubesim/kube-apiserver {:.2}",
                sim_loop / real_loop
            );
            println!(
                "  controller      kubesim {sim_ctl:>7.0}/s  kube-apiserver {real_ctl:>7.0}/s  kubesim/kube-apiserver {:.2}",
                sim_ctl / real_ctl
            );
        }
        None => println!("  write+watch, controller: real server: skipped"),
    }
}
