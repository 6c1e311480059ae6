//! Nodes and their lifecycle: start, SIGTERM, crash, restart, rollout; exit causes; tasks dropped
//! with their node, measured.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use sim::net::Ending;
use sim::node::{BoxError, CrashMode, ExitCause, Lifecycle, NodeCtx, Restart, ServiceSpec, System, Version};
use sim::{Class, Ctx, Failure, Simulation};

type EntryFn = fn(NodeCtx) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), BoxError>> + Send>>;

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("node-test", what)) }
}

/// An axum service on a node, served through the node (tracked tasks, graceful drain).
async fn hello(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let name = node.name().to_string();
    let version = node.version().to_string();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let (name, version) = (name.clone(), version.clone());
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                format!("{name} {version}")
            }
        }),
    );
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

/// The same service, but served with axum::serve: its connection tasks escape the node's tracking.
async fn hello_untracked(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let ctx = node.sim().clone();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let ctx = ctx.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ctx.record("handler", "side-effect", "done");
                "hi"
            }
        }),
    );
    node.set_ready();
    let shutdown = node.shutdown_signal();
    axum::serve(sim::net::adapters::ServeListener(listener), app).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

async fn get(ctx: &Ctx, from: &str, url: &str) -> Result<String, String> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .build::<_, Full<Bytes>>(sim::net::adapters::Connector::new(ctx.net().host(from)));
    let response = client.get(url.parse().map_err(|e| format!("{e}"))?).await.map_err(|e| format!("{e:?}"))?;
    let body = response.into_body().collect().await.map_err(|e| format!("{e}"))?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn a_service_starts_serves_and_stops_on_sigterm() {
    Simulation::new("node_basic")
        .seeds(0..8)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            let names = system.add(ServiceSpec::new("hello", hello).replicas(2..=2));
            check(names == ["hello-0", "hello-1"], format!("{names:?}"))?;
            system.start().await?;
            let body =
                get(&ctx, "client", "http://hello:8080/").await.map_err(|e| Failure::correctness("node-test", e))?;
            check(body.starts_with("hello-") && body.ends_with(" v1"), body)?;
            system.stop().await?;
            let exits = system.exits();
            check(exits.len() == 2, format!("{exits:?}"))?;
            check(exits.iter().all(|e| e.cause == ExitCause::Signal(Ok(()))), format!("{exits:?}"))
        })
        .assert_passed();
}

/// `hello`, telling `received` when a request reaches the handler.
async fn hello_notifying(node: NodeCtx, received: std::sync::Arc<tokio::sync::Notify>) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let name = node.name().to_string();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let (name, received) = (name.clone(), received.clone());
            async move {
                received.notify_one();
                tokio::time::sleep(Duration::from_millis(50)).await;
                format!("{name} v1")
            }
        }),
    );
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

#[test]
fn sigterm_drains_in_flight_requests() {
    Simulation::new("node_drain")
        .seeds(0..8)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            let received = std::sync::Arc::new(tokio::sync::Notify::new());
            let notify = received.clone();
            system.add(ServiceSpec::new("hello", move |node| hello_notifying(node, notify.clone())));
            system.start().await?;
            let system2 = system.clone();
            // SIGTERM while the request is being handled (it takes 50 ms).
            tokio::spawn(async move {
                received.notified().await;
                let _ = system2.sigterm("hello-0");
            });
            let body = get(&ctx, "client", "http://hello:8080/").await;
            check(body.as_deref() == Ok("hello-0 v1"), format!("the in-flight request completes: {body:?}"))?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            check(system.running().is_empty(), "then the node stops")?;
            system.check_zombies()
        })
        .assert_passed();
}

#[test]
fn a_crash_drops_the_nodes_tasks_and_none_runs_afterwards() {
    let report = Simulation::new("node_crash").seeds(0..16).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("hello", hello));
        system.start().await?;
        // A request in flight (the handler sleeps 50 ms), and a keep-alive connection.
        let ctx2 = ctx.clone();
        let pending = tokio::spawn(async move { get(&ctx2, "client", "http://hello:8080/").await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        system.crash("hello-0", CrashMode::Seeded).await?;
        let outcome = tokio::time::timeout(Duration::from_secs(5), pending).await;
        ctx.record("client", "after-crash", format!("{outcome:?}"));
        tokio::time::sleep(Duration::from_secs(30)).await;
        check(system.exits().first().is_some_and(|e| matches!(e.cause, ExitCause::Crash(_))), "recorded as a crash")?;
        // The measurement: no task of the crashed incarnation was polled after the crash.
        let zombies = system.zombie_polls();
        check(zombies.is_empty(), format!("tasks ran after the crash: {zombies:?}"))?;
        check(ctx.net().stale_operations() == 0, "nothing of the dead node touched the network")?;
        let aborted =
            ctx.history().entries().find(|e| e.kind == "node.exit").map(|e| e.detail.clone()).unwrap_or_default();
        ctx.record("measure", "crash", aborted);
        Ok(())
    });
    report.assert_passed();
    let modes: std::collections::BTreeSet<bool> = report.outcomes.iter().map(|o| o.swarm.is_empty()).collect();
    assert_eq!(modes.len(), 1);
}

#[test]
fn a_task_left_running_by_a_node_that_stopped_is_a_leak() {
    async fn leaky(node: NodeCtx) -> Result<(), BoxError> {
        // A background ticker spawned with a plain tokio::spawn and never stopped.
        tokio::spawn(async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        node.set_ready();
        node.shutdown_signal().await;
        Ok(())
    }
    let report = Simulation::new("node_leak").seeds(0..4).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("leaky", leaky));
        system.start().await?;
        system.stop().await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(())
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("the leak is found");
    assert_eq!(failure.class, Class::Leak, "{failure}");
    assert!(failure.message.contains("tests/node.rs"), "names where the task was spawned: {failure}");
}

#[test]
fn a_task_that_escaped_tracking_and_runs_after_a_crash_is_a_zombie() {
    async fn ticking(node: NodeCtx) -> Result<(), BoxError> {
        // A background ticker spawned with a plain tokio::spawn: nothing aborts it, and no socket
        // of the node wakes it at the crash (those fail at once, ending what waits on them); its
        // timer does, after the crash.
        tokio::spawn(async {
            loop {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        });
        node.set_ready();
        node.shutdown_signal().await;
        Ok(())
    }
    let report = Simulation::new("node_zombie").seeds(0..4).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("ticking", ticking));
        system.start().await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
        system.crash("ticking-0", CrashMode::Fixed(Ending::Vanish)).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        system.check_zombies()
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("the zombie is found");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Leak, Some("zombie")), "{failure}");
    assert!(failure.message.contains("the first spawned at sim/tests/node.rs"), "names where: {failure}");
}

/// A crashed node's task blocked on one of its sockets ends at the crash: the socket fails at once
/// (`ENETDOWN`), as the process's threads are gone; its handler never runs after the crash.
#[test]
fn a_crash_ends_the_untracked_tasks_waiting_on_the_nodes_sockets() {
    Simulation::new("node_crash_sockets")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("hello", hello_untracked));
            system.start().await?;
            let ctx2 = ctx.clone();
            let pending = tokio::spawn(async move { get(&ctx2, "client", "http://hello:8080/").await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            system.crash("hello-0", CrashMode::Fixed(Ending::Vanish)).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            pending.abort();
            system.check_zombies()
        })
        .assert_passed();
}

#[test]
fn a_node_returning_on_its_own_answering_sigterm_with_an_error_or_outliving_its_grace_fails_the_exit_cause_oracle() {
    async fn returns_early(node: NodeCtx) -> Result<(), BoxError> {
        node.set_ready();
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    }
    async fn errs_on_sigterm(node: NodeCtx) -> Result<(), BoxError> {
        node.set_ready();
        node.shutdown_signal().await;
        Err("interrupted".into())
    }
    async fn ignores_sigterm(node: NodeCtx) -> Result<(), BoxError> {
        node.set_ready();
        std::future::pending::<()>().await;
        Ok(())
    }
    for (name, expected) in [
        ("early", "returned on its own"),
        ("erring", "answered SIGTERM with an error"),
        ("stubborn", "did not stop within its grace"),
    ] {
        let report = Simulation::new(format!("exit_{name}")).seeds(0..2).confirm(0).run(move |ctx: Ctx| async move {
            let system = System::new(&ctx);
            let entry: EntryFn = match name {
                "early" => |n| Box::pin(returns_early(n)),
                "erring" => |n| Box::pin(errs_on_sigterm(n)),
                _ => |n| Box::pin(ignores_sigterm(n)),
            };
            system.add(ServiceSpec::new("svc", entry).grace(Duration::from_secs(5)));
            system.start().await?;
            // "early" returns at 1 s by itself; the others get SIGTERM at 0.5 s.
            tokio::time::sleep(Duration::from_millis(if name == "early" { 2000 } else { 500 })).await;
            system.sigterm("svc-0")?;
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(())
        });
        let failure =
            report.first_failure().and_then(|o| o.failure.clone()).unwrap_or_else(|| panic!("{name}: not caught"));
        assert_eq!(failure.oracle.as_deref(), Some("exit-cause"), "{name}: {failure}");
        assert!(failure.message.contains(expected), "{name}: {failure}");
    }
}

#[test]
fn a_restart_makes_a_new_incarnation_and_the_old_host_handle_is_dead() {
    Simulation::new("node_restart")
        .seeds(0..8)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<sim::net::Host>();
            system.add(ServiceSpec::new("hello", move |node: NodeCtx| {
                let _ = tx.send(node.host().clone());
                hello(node)
            }));
            system.start().await?;
            let old = rx.recv().await.ok_or_else(|| Failure::correctness("node-test", "no host"))?;
            system.apply(Lifecycle::Restart { node: "hello-0".into(), how: Restart::Crash }).await?;
            let new = rx.recv().await.ok_or_else(|| Failure::correctness("node-test", "no host"))?;
            check(
                old.incarnation() == Some(1) && new.incarnation() == Some(2),
                format!("{:?} {:?}", old.incarnation(), new.incarnation()),
            )?;
            let stale = old.dial("hello:8080").await;
            check(
                stale.as_ref().err().and_then(std::io::Error::raw_os_error) == Some(100),
                format!("the old handle is dead: {stale:?}"),
            )?;
            check(ctx.net().stale_operations() == 1, "counted")?;
            let body =
                get(&ctx, "client", "http://hello:8080/").await.map_err(|e| Failure::correctness("node-test", e))?;
            check(body == "hello-0 v1", body)
        })
        .assert_passed();
}

#[test]
fn a_rollout_replaces_each_replica_with_the_new_version() {
    Simulation::new("node_rollout")
        .seeds(0..8)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("hello", hello).version("v2", hello).replicas(3..=3));
            system.start().await?;
            system.rollout("hello", &Version::named("v2")).await?;
            for _ in 0..6 {
                let body = get(&ctx, "client", "http://hello:8080/")
                    .await
                    .map_err(|e| Failure::correctness("node-test", e))?;
                check(body.ends_with(" v2"), body)?;
            }
            let exits = system.exits();
            check(
                exits.len() == 3 && exits.iter().all(|e| e.cause == ExitCause::Signal(Ok(()))),
                format!("{exits:?}"),
            )?;
            system.stop().await
        })
        .assert_passed();
}

#[test]
fn the_swarm_draws_a_lifecycle_schedule() {
    let report = Simulation::new("node_schedule").seeds(0..16).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("hello", hello).version("v2", hello).replicas(1..=3).grace(Duration::from_secs(2)));
        system.start().await?;
        let plan = system.schedule_lifecycle(Duration::from_secs(1)..Duration::from_secs(20));
        ctx.record("plan", "system", format!("{} events", plan.len()));
        tokio::time::sleep(Duration::from_secs(40)).await;
        system.heal().await?;
        let body = get(&ctx, "client", "http://hello:8080/").await.map_err(|e| Failure::correctness("node-test", e))?;
        check(body.starts_with("hello-"), body)?;
        system.stop().await
    });
    report.assert_passed();
    let swarms: std::collections::BTreeSet<&str> = report.outcomes.iter().map(|o| o.swarm.as_str()).collect();
    assert!(swarms.len() > 8, "{swarms:?}");
}

#[test]
fn a_node_that_stops_without_draining_fails_the_drain_oracle() {
    async fn impatient(node: NodeCtx, received: std::sync::Arc<tokio::sync::Notify>) -> Result<(), BoxError> {
        let listener = node.host().listen("8080")?;
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let received = received.clone();
                async move {
                    received.notify_one();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    "done"
                }
            }),
        );
        node.set_ready();
        let serving = sim::node::serve(&node, listener, app);
        // The planted bug: on SIGTERM, return without awaiting the drain.
        tokio::select! {
            result = serving => result,
            () = node.shutdown_signal() => Ok(()),
        }
    }
    let report = Simulation::new("node_no_drain").seeds(0..4).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        let received = std::sync::Arc::new(tokio::sync::Notify::new());
        let notify = received.clone();
        system.add(ServiceSpec::new("svc", move |node| impatient(node, notify.clone())));
        system.start().await?;
        let system2 = system.clone();
        tokio::spawn(async move {
            received.notified().await;
            let _ = system2.sigterm("svc-0");
        });
        let outcome = get(&ctx, "client", "http://svc:8080/").await;
        ctx.record("client", "outcome", format!("{outcome:?}"));
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("drain"), "{failure}");
    assert!(failure.message.contains("GET /"), "{failure}");
}

/// `hello`, ready only after `ready_after` (a slow start: loading caches, warming up).
async fn hello_slow_ready(node: NodeCtx, ready_after: Duration) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
    tokio::time::sleep(ready_after).await;
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

#[test]
fn a_crash_while_a_node_starts_is_a_lifecycle_event_not_a_readiness_failure() {
    // Start waits for readiness (2 s); the crash at +3 s lands during that wait.
    Simulation::new("node_crash_while_starting")
        .seeds(0..8)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("web", |n| hello_slow_ready(n, Duration::from_secs(2))));
            system.start().await?;
            let t = ctx.elapsed();
            system.at(t + Duration::from_secs(1), Lifecycle::Crash { node: "web-0".into(), mode: CrashMode::Seeded });
            system.at(t + Duration::from_secs(2), Lifecycle::Start { node: "web-0".into() });
            system.at(t + Duration::from_secs(3), Lifecycle::Crash { node: "web-0".into(), mode: CrashMode::Seeded });
            system.at(t + Duration::from_secs(5), Lifecycle::Start { node: "web-0".into() });
            tokio::time::sleep(Duration::from_secs(10)).await;
            check(system.running() == ["web-0"], "the last start took")?;
            system.stop().await
        })
        .assert_passed();
    // The same during a rollout: the new replica is crashed while the rollout waits for it.
    Simulation::new("node_crash_during_rollout")
        .seeds(0..8)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            let slow = |n| hello_slow_ready(n, Duration::from_secs(1));
            system.add(ServiceSpec::new("web", slow).version("v2", slow).replicas(2..=2).grace(Duration::from_secs(5)));
            system.start().await?;
            let t = ctx.elapsed();
            system.at(
                t + Duration::from_secs(1),
                Lifecycle::Rollout { service: "web".into(), version: Version::named("v2") },
            );
            system.at(
                t + Duration::from_millis(1500),
                Lifecycle::Crash { node: "web-0".into(), mode: CrashMode::Fixed(Ending::Reset) },
            );
            system.at(t + Duration::from_millis(1600), Lifecycle::Start { node: "web-0".into() });
            tokio::time::sleep(Duration::from_secs(10)).await;
            system.heal().await?;
            system.stop().await
        })
        .assert_passed();
}

#[test]
fn the_swarm_drawn_lifecycle_with_slow_readiness_passes_on_a_correct_service() {
    Simulation::new("node_schedule_slow_ready")
        .seeds(0..48)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            let slow = |n| hello_slow_ready(n, Duration::from_secs(2));
            system.add(ServiceSpec::new("web", slow).version("v2", slow).replicas(1..=3).grace(Duration::from_secs(5)));
            system.start().await?;
            let t = ctx.elapsed();
            system.schedule_lifecycle(t + Duration::from_secs(1)..t + Duration::from_secs(20));
            tokio::time::sleep(Duration::from_secs(40)).await;
            system.heal().await?;
            system.stop().await
        })
        .assert_passed();
}

#[test]
fn a_node_never_ready_fails_readiness_when_its_timeout_has_passed() {
    async fn never_ready(node: NodeCtx) -> Result<(), BoxError> {
        node.shutdown_signal().await;
        Ok(())
    }
    let report = Simulation::new("node_never_ready").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("w", never_ready).ready_timeout(Duration::from_secs(5)));
        system.start().await
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Liveness, Some("readiness")), "{failure}");
    assert!(failure.message.contains("was not ready within 5s"), "{failure}");
    assert_eq!(failure.at(), Some(Duration::from_secs(5)), "{failure}");
}

async fn fails_at_one_second(node: NodeCtx) -> Result<(), BoxError> {
    node.set_ready();
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err("database connection lost; exiting".into())
}

#[test]
fn a_node_failing_on_its_own_as_the_body_returns_still_fails_the_exit_cause_oracle() {
    let report = Simulation::new("exit_race_end").seeds(0..8).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("w", fails_at_one_second));
        system.start().await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    });
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed is caught: {report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("failed");
        assert_eq!(failure.oracle.as_deref(), Some("exit-cause"), "{failure}");
        assert!(failure.message.contains("failed on its own"), "{failure}");
        assert!(failure.message.contains("database connection lost"), "{failure}");
    }
}

#[test]
fn a_node_failing_at_the_instant_of_its_sigterm_is_not_said_to_have_answered_it() {
    let report = Simulation::new("exit_race_stop").seeds(0..8).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("w", fails_at_one_second));
        system.start().await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        system.stop().await
    });
    assert_eq!(report.failures().count(), report.outcomes.len(), "every seed is caught: {report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("failed");
        assert_eq!(failure.oracle.as_deref(), Some("exit-cause"), "{failure}");
        assert!(failure.message.contains("database connection lost"), "{failure}");
        assert!(!failure.message.contains("answered SIGTERM"), "{failure}");
    }
}

#[test]
fn lifecycle_events_naming_an_unknown_node_service_or_version_are_errors() {
    Simulation::new("lifecycle_typos")
        .seeds(0..2)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("web", hello).version("v2", hello));
            system.start().await?;
            for (event, expected) in [
                (
                    Lifecycle::Rollout { service: "web".into(), version: Version::named("V2-typo") },
                    "no version \"V2-typo\"",
                ),
                (Lifecycle::Rollout { service: "nope".into(), version: Version::Same }, "no service \"nope\""),
                (Lifecycle::Crash { node: "nope-0".into(), mode: CrashMode::Seeded }, "no node \"nope-0\""),
                (Lifecycle::Start { node: "web-9".into() }, "no node \"web-9\""),
                (Lifecycle::Sigterm { node: "web".into() }, "no node \"web\""),
                (Lifecycle::SigkillAfter { node: "x".into(), grace: Duration::from_secs(1) }, "no node \"x\""),
                (Lifecycle::Restart { node: "x".into(), how: Restart::Graceful }, "no node \"x\""),
                (Lifecycle::Partition { node: "x".into(), lasting: Duration::from_secs(1) }, "no node \"x\""),
            ] {
                let label = format!("{event:?}");
                let result = system.apply(event).await;
                let failure =
                    result.err().ok_or_else(|| Failure::correctness("node-test", format!("{label}: no error")))?;
                check(failure.message.contains(expected), format!("{label}: {failure}"))?;
            }
            check(system.exits().is_empty(), format!("nothing was restarted: {:?}", system.exits()))?;
            check(
                system.sigterm("nope-0").is_err() && system.crash("nope-0", CrashMode::Seeded).await.is_err(),
                "direct calls too",
            )?;
            system.stop().await
        })
        .assert_passed();
    // Scheduled with `at`, the error fails the run when the event is due.
    let report = Simulation::new("lifecycle_typo_at").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("web", hello));
        system.start().await?;
        system.at(Duration::from_secs(1), Lifecycle::Rollout { service: "web".into(), version: Version::named("v3") });
        tokio::time::sleep(Duration::from_secs(2)).await;
        system.stop().await
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("lifecycle"), "{failure}");
    assert!(failure.message.contains("no version \"v3\""), "{failure}");
}

#[test]
fn a_job_needs_no_readiness_and_a_failed_job_fails_the_run() {
    async fn quick_job(_node: NodeCtx) -> Result<(), BoxError> {
        Ok(())
    }
    async fn slow_job(_node: NodeCtx) -> Result<(), BoxError> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(())
    }
    async fn failing_job(_node: NodeCtx) -> Result<(), BoxError> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Err("exit 1".into())
    }
    Simulation::new("job_ok")
        .seeds(0..2)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("quick", quick_job).finite());
            system.add(ServiceSpec::new("slow", slow_job).finite().ready_timeout(Duration::from_secs(1)));
            system.start().await?;
            tokio::time::sleep(Duration::from_secs(61)).await;
            let causes: Vec<ExitCause> = system.exits().into_iter().map(|e| e.cause).collect();
            check(causes == [ExitCause::Returned, ExitCause::Returned], format!("{causes:?}"))?;
            system.stop().await
        })
        .assert_passed();
    let report = Simulation::new("job_fails").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(ServiceSpec::new("job", failing_job).finite());
        system.start().await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("exit-cause"), "{failure}");
    assert!(failure.message.contains("exit 1"), "{failure}");
    // A job allowed to fail: recorded, not a failure.
    Simulation::new("job_may_fail")
        .seeds(0..1)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("job", failing_job).finite().may_fail());
            system.start().await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let causes: Vec<ExitCause> = system.exits().into_iter().map(|e| e.cause).collect();
            check(causes == [ExitCause::Error("exit 1".into())], format!("{causes:?}"))
        })
        .assert_passed();
}

async fn stubborn(node: NodeCtx) -> Result<(), BoxError> {
    node.set_ready();
    node.shutdown_signal().await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[test]
fn sigkill_after_uses_its_own_duration_as_the_grace() {
    for (grace, kill_after) in [(5, 30), (30, 5)] {
        Simulation::new(format!("sigkill_after_{kill_after}_grace_{grace}"))
            .seeds(0..2)
            .run(move |ctx: Ctx| async move {
                let system = System::new(&ctx);
                system.add(ServiceSpec::new("s", stubborn).grace(Duration::from_secs(grace)));
                system.start().await?;
                let t = ctx.elapsed();
                system
                    .apply(Lifecycle::SigkillAfter { node: "s-0".into(), grace: Duration::from_secs(kill_after) })
                    .await?;
                let exits = system.exits();
                check(exits.len() == 1 && exits[0].cause == ExitCause::Killed, format!("{exits:?}"))?;
                let after = exits[0].at - t;
                let (lo, hi) =
                    (Duration::from_secs(kill_after) - Duration::from_millis(1), Duration::from_secs(kill_after));
                check(lo <= after && after <= hi, format!("killed {after:?} after SigkillAfter"))
            })
            .assert_passed();
    }
}

/// Healing ends the fault schedule: a lifecycle event scheduled for after the heal does not
/// happen, one under way is awaited, and a stopped system is not started again by a restart that
/// was scheduled.
#[test]
fn heal_and_stop_end_the_fault_schedule() {
    Simulation::new("node_quiesce")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("hello", hello));
            system.start().await?;
            let now = ctx.elapsed();
            system.at(
                now + Duration::from_millis(100),
                Lifecycle::Restart { node: "hello-0".into(), how: Restart::Graceful },
            );
            system
                .at(now + Duration::from_secs(5), Lifecycle::Crash { node: "hello-0".into(), mode: CrashMode::Seeded });
            tokio::time::sleep(Duration::from_millis(110)).await;
            // The restart is under way: heal waits for it, and cancels the crash.
            system.heal().await?;
            tokio::time::sleep(Duration::from_secs(10)).await;
            check(
                !system.exits().iter().any(|e| matches!(e.cause, ExitCause::Crash(_))),
                "the crash after heal happened",
            )?;
            check(system.running() == ["hello-0"], "running after heal")?;
            system.at(
                ctx.elapsed() + Duration::from_millis(10),
                Lifecycle::Restart { node: "hello-0".into(), how: Restart::Graceful },
            );
            system.stop().await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            check(
                system.running().is_empty(),
                format!("a scheduled restart started a stopped system: {:?}", system.running()),
            )
        })
        .assert_passed();
}
