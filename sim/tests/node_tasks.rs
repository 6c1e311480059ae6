//! What a node's tasks may do when its incarnation ends: the zombie and leak oracles must stay
//! quiet on the drop cascade a crash causes (cancellations, destructors, workers waking to exit)
//! and on shared models' tasks spawned detached, and must still catch a task that keeps running
//! — checked at the end of every run, not only in `System::stop`. The drain oracle follows a
//! response until its body has been sent.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use sim::net::Ending;
use sim::node::{BoxError, CrashMode, Lifecycle, NodeCtx, Restart, ServiceSpec, System};
use sim::{Class, Ctx, Failure, Simulation};

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("node-test", what)) }
}

async fn get(ctx: &Ctx, from: &str, url: &str) -> Result<String, String> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .build::<_, Full<Bytes>>(sim::net::adapters::Connector::new(ctx.net().host(from)));
    let response = client.get(url.parse().map_err(|e| format!("{e}"))?).await.map_err(|e| format!("{e:?}"))?;
    let body = response.into_body().collect().await.map_err(|e| format!("{e}"))?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Runs `service` (named `name`, one replica), sends it a request, crashes it, lets 10 s pass and
/// ends the run, checking for zombies with `System::check_zombies` if `explicitly`, else leaving
/// it to the end-of-run check.
fn crash_and_end(name: &'static str, service: ServiceSpec, seeds: u64, explicitly: bool) -> sim::Report {
    Simulation::new(name).seeds(0..seeds).confirm(0).run(move |ctx: Ctx| {
        let service = service.clone();
        async move {
            let system = System::new(&ctx);
            system.add(service);
            system.start().await?;
            let _ = get(&ctx, "client", &format!("http://{name}:8080/")).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            system.crash(&format!("{name}-0"), CrashMode::Fixed(Ending::Reset)).await?;
            tokio::time::sleep(Duration::from_secs(10)).await;
            if explicitly { system.check_zombies() } else { Ok(()) }
        }
    })
}

async fn joinset_tickers(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let mut tickers = tokio::task::JoinSet::new();
    for _ in 0..3 {
        tickers.spawn(async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
    node.set_ready();
    sim::node::serve(&node, listener, app).await?;
    tickers.shutdown().await;
    Ok(())
}

#[test]
fn children_a_joinset_cancels_when_its_node_crashes_are_not_zombies() {
    crash_and_end("js", ServiceSpec::new("js", joinset_tickers), 8, true).assert_passed();
}

/// A destructor that spawns (a pool closing its connections asynchronously).
struct SpawnOnDrop;

impl Drop for SpawnOnDrop {
    fn drop(&mut self) {
        tokio::spawn(async {
            tokio::time::sleep(Duration::from_millis(10)).await;
        });
    }
}

async fn guarded(node: NodeCtx) -> Result<(), BoxError> {
    let _guard = SpawnOnDrop;
    let listener = node.host().listen("8080")?;
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

#[test]
fn a_task_a_destructor_spawns_while_a_crash_drops_the_node_is_not_a_zombie() {
    crash_and_end("guard", ServiceSpec::new("guard", guarded), 8, true).assert_passed();
}

async fn buffered(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
    // tower's Buffer spawns its worker with a plain tokio::spawn; it exits when its handles drop.
    let service = tower::buffer::Buffer::new(tower::util::BoxCloneSyncService::new(app), 16);
    node.set_ready();
    sim::node::serve(&node, listener, service).await
}

#[test]
fn a_tower_buffer_worker_waking_to_exit_after_a_crash_is_not_a_zombie() {
    crash_and_end("buffer", ServiceSpec::new("buffer", buffered), 8, true).assert_passed();
}

/// A handler that starts background work with a plain `tokio::spawn` and never stops it.
async fn spawns_a_ticker(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(|| async {
            tokio::spawn(async {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
            "ok"
        }),
    );
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

#[test]
fn a_task_still_running_after_its_node_crashed_is_found_at_the_end_of_the_run_without_stop() {
    let report = crash_and_end("ticker", ServiceSpec::new("ticker", spawns_a_ticker), 2, false);
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed is caught: {report}");
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Leak, Some("zombie")), "{failure}");
    assert!(failure.message.contains("ticker-0 (incarnation 1)"), "{failure}");
}

/// A handler that schedules a side effect for later with a plain `tokio::spawn`: after a crash
/// the task wakes once, does it, and returns — a zombie even though it ends in that poll.
async fn delayed_side_effect(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let ctx = node.sim().clone();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let ctx = ctx.clone();
            async move {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    ctx.record("side-effect", "late", "written after the crash");
                });
                "ok"
            }
        }),
    );
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

#[test]
fn a_task_that_wakes_after_the_crash_does_one_thing_and_returns_is_a_zombie() {
    let report = crash_and_end("late", ServiceSpec::new("late", delayed_side_effect), 2, true);
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed is caught: {report}");
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Leak, Some("zombie")), "{failure}");
}

/// A shared in-memory store (one for every replica and incarnation) that starts its actor task
/// on first use: that task belongs to no node, so it is spawned with `sim::spawn_detached`.
#[derive(Default)]
struct Counter {
    tx: OnceLock<tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<u64>>>,
    detached: bool,
}

impl Counter {
    async fn next(&self) -> u64 {
        let tx = self.tx.get_or_init(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<tokio::sync::oneshot::Sender<u64>>();
            let actor = async move {
                let mut n = 0;
                while let Some(reply) = rx.recv().await {
                    n += 1;
                    let _ = reply.send(n);
                }
            };
            if self.detached {
                drop(sim::spawn_detached(actor));
            } else {
                drop(tokio::spawn(actor));
            }
            tx
        });
        let (reply, answer) = tokio::sync::oneshot::channel();
        if tx.send(reply).is_err() {
            return 0;
        }
        answer.await.unwrap_or(0)
    }
}

async fn counter_node(node: NodeCtx, counter: Arc<Counter>) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let counter = counter.clone();
            async move { counter.next().await.to_string() }
        }),
    );
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

fn shared_counter(name: &str, detached: bool) -> sim::Report {
    Simulation::new(name).seeds(0..4).confirm(0).run(move |ctx: Ctx| async move {
        let counter = Arc::new(Counter { tx: OnceLock::new(), detached });
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("db", move |n| counter_node(n, counter.clone())).replicas(2..=2));
        system.start().await?;
        for _ in 0..4 {
            let _ = get(&ctx, "client", "http://db:8080/").await;
        }
        for node in system.replicas("db") {
            system.apply(Lifecycle::Restart { node, how: Restart::Graceful }).await?;
        }
        let last = get(&ctx, "client", "http://db:8080/").await;
        check(last.as_deref() == Ok("5"), format!("the model outlived the restarts: {last:?}"))?;
        system.stop().await
    })
}

#[test]
fn a_shared_models_task_spawned_detached_belongs_to_no_node() {
    shared_counter("shared_detached", true).assert_passed();
    // Spawned with a plain tokio::spawn from a handler, it is the node's by lineage: a leak that
    // says how to spawn it instead.
    let report = shared_counter("shared_plain_spawn", false);
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Leak, Some("leak")), "{failure}");
    assert!(failure.message.contains("sim::spawn_detached"), "{failure}");
}

/// Streams five chunks, 100 ms apart.
fn streaming_body() -> axum::body::Body {
    let chunks = futures::stream::unfold(0u32, |i| async move {
        if i >= 5 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        Some((Ok::<_, std::io::Error>(Bytes::from(format!("chunk{i};"))), i + 1))
    });
    axum::body::Body::from_stream(chunks)
}

async fn streaming(node: NodeCtx, drains: bool) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let app = axum::Router::new().route("/", axum::routing::get(|| async { streaming_body() }));
    node.set_ready();
    if drains {
        return sim::node::serve(&node, listener, app).await;
    }
    // The planted bug: on SIGTERM, return without awaiting the drain.
    tokio::select! {
        result = sim::node::serve(&node, listener, app) => result,
        () = node.shutdown_signal() => Ok(()),
    }
}

fn sigterm_mid_stream(name: &str, drains: bool) -> sim::Report {
    Simulation::new(name).seeds(0..4).confirm(0).run(move |ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("s", move |n| streaming(n, drains)));
        system.start().await?;
        // The handler answers at once; its body takes 500 ms: SIGTERM lands mid-body.
        system.at(ctx.elapsed() + Duration::from_millis(250), Lifecycle::Sigterm { node: "s-0".into() });
        let body = get(&ctx, "client", "http://s:8080/").await;
        check(!drains || body.as_deref() == Ok("chunk0;chunk1;chunk2;chunk3;chunk4;"), format!("{body:?}"))?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        system.stop().await
    })
}

#[test]
fn a_node_that_stops_while_a_response_body_is_still_streaming_fails_the_drain_oracle() {
    let report = sigterm_mid_stream("drain_streaming_planted", false);
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed is caught: {report}");
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("drain"), "{failure}");
    assert!(failure.message.contains("GET /"), "{failure}");
    sigterm_mid_stream("drain_streaming", true).assert_passed();
}

/// A known difference from SIGKILL, pinned: a crash drops the node's futures, so their
/// destructors run (a real killed process runs none).
#[test]
fn a_crash_runs_the_nodes_destructors_a_known_difference_from_sigkill() {
    struct Release(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    Simulation::new("crash_runs_destructors")
        .seeds(0..2)
        .run(|ctx: Ctx| async move {
            let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = released.clone();
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("d", move |node: NodeCtx| {
                let guard = Release(flag.clone());
                async move {
                    let _guard = guard;
                    node.set_ready();
                    node.shutdown_signal().await;
                    Ok::<(), BoxError>(())
                }
            }));
            system.start().await?;
            system.crash("d-0", CrashMode::Fixed(Ending::Vanish)).await?;
            tokio::time::sleep(Duration::from_millis(10)).await;
            check(released.load(std::sync::atomic::Ordering::SeqCst), "the destructor ran at the crash")
        })
        .assert_passed();
}
