//! grpcsim's server, client and checks on the simulated network: GOAWAY before the application
//! ends its streams, the drain bound, tonic's `max_connection_age`, the seeded balancer following
//! a rollout, the call log, and the GOAWAY-first oracle catching a server that ends streams first.

use std::collections::BTreeMap;
use std::time::Duration;

use grpcsim::calls::{CallLog, OneStatus};
use grpcsim::checks::GoawayFirst;
use grpcsim::probe::{CallRequest, ProbeClient, ProbeService, StreamRequest};
use sim::node::{BoxError, Lifecycle, NodeCtx, ServiceSpec, System, Version};
use sim::{Ctx, Failure, Simulation};

const STREAM: &str = "/grpcsim.probe.Probe/Stream";

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("grpcsim-test", what)) }
}

/// How the probe node ends its streams on SIGTERM.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// After the GOAWAY went out (`Server::draining`).
    AfterGoaway,
    /// At SIGTERM, racing the GOAWAY (the bug class GoawayFirst catches).
    AtSigterm,
    /// Never: streams stay open until the client ends them.
    Never,
}

async fn probe(
    node: NodeCtx,
    ending: Ending,
    drain: Option<Duration>,
    max_age: Option<(Duration, Option<Duration>)>,
) -> Result<(), BoxError> {
    let listener = node.host().listen("50051")?;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
    let mut server = grpcsim::Server::new(&node).health(reporter);
    if let Some(bound) = drain {
        server = server.drain_bound(bound);
    }
    let service = ProbeService::new(node.name());
    let service = match ending {
        Ending::AfterGoaway => service.ending_on(server.draining()),
        Ending::AtSigterm => service.ending_at_sigterm(&node),
        Ending::Never => service,
    };
    let mut builder = server.builder();
    if let Some((age, grace)) = max_age {
        builder = builder.max_connection_age(age);
        if let Some(grace) = grace {
            builder = builder.max_connection_age_grace(grace);
        }
    }
    let router = builder.add_service(health).add_service(service.into_server());
    server.serve(listener, router).await
}

type Client = ProbeClient<grpcsim::calls::Logged<tonic::transport::Channel>>;

fn client(ctx: &Ctx, from: &str, target: &str) -> Client {
    let channel = grpcsim::client::channel(&ctx.net().host(from), target).expect("target");
    ProbeClient::new(tower::Layer::layer(&CallLog::layer(ctx), channel))
}

/// Reads a stream to its end, for at most `limit` in all: (items, how it ended).
async fn read_all(client: &mut Client, limit: Duration) -> (u64, String) {
    let deadline = tokio::time::Instant::now() + limit;
    let mut stream = match client.stream(StreamRequest { count: 0, interval_ms: 50 }).await {
        Ok(s) => s.into_inner(),
        Err(s) => return (0, format!("open failed: {:?}", s.code())),
    };
    let mut n = 0;
    loop {
        match tokio::time::timeout_at(deadline, stream.message()).await {
            Err(_) => return (n, "no end".into()),
            Ok(Ok(Some(_))) => n += 1,
            Ok(Ok(None)) => return (n, "OK".into()),
            Ok(Err(s)) => return (n, format!("{:?}", s.code())),
        }
    }
}

fn kinds_in_order(ctx: &Ctx, kinds: &[&str]) -> Vec<(String, String, String)> {
    ctx.history()
        .entries()
        .filter(|e| kinds.contains(&e.kind.as_str()))
        .map(|e| (e.kind.clone(), e.identity.clone(), e.detail.clone()))
        .collect()
}

#[test]
fn sigterm_sends_goaway_before_the_application_ends_its_streams() {
    Simulation::new("grpc_goaway_first")
        .seeds(0..12)
        .run(|ctx: Ctx| async move {
            ctx.add_check(GoawayFirst::long_lived([STREAM]));
            ctx.add_check(OneStatus::default());
            let system = System::new(&ctx);
            system.add(
                ServiceSpec::new("probe", |node| probe(node, Ending::AfterGoaway, None, None))
                    .grace(Duration::from_secs(5)),
            );
            system.start().await?;
            let mut c = client(&ctx, "client", "probe:50051");
            system.at(ctx.elapsed() + Duration::from_millis(300), Lifecycle::Sigterm { node: "probe-0".into() });
            let (items, end) = read_all(&mut c, Duration::from_secs(10)).await;
            check(
                items >= 3 && end == "OK",
                format!("the stream gave {items} items and ended {end}; want ≥ 3 items, then OK"),
            )?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let order: Vec<_> = kinds_in_order(
                &ctx,
                &["node.sigterm", "grpc.goaway", "grpc.draining", "grpc.stream.end", "grpc.stopped"],
            )
            .into_iter()
            .filter(|(kind, _, detail)| kind != "grpc.stream.end" || detail.starts_with(STREAM))
            .collect();
            let kinds: Vec<&str> = order.iter().map(|(k, _, _)| k.as_str()).collect();
            check(
                kinds == ["node.sigterm", "grpc.goaway", "grpc.draining", "grpc.stream.end", "grpc.stopped"],
                format!("events in the wrong order: {order:?}"),
            )?;
            check(
                order[3].2 == format!("{STREAM} status 0 by the server on :50051"),
                format!("the stream's end: {:?}", order[3]),
            )?;
            system.stop().await
        })
        .assert_passed();
}

#[test]
fn goaway_first_catches_a_server_that_ends_streams_at_sigterm() {
    let run = |ending: Ending| {
        Simulation::new("grpc_goaway_first_bug").seeds(0..20).stop_after_failures(20).run(move |ctx: Ctx| async move {
            ctx.add_check(GoawayFirst::long_lived([STREAM]));
            let system = System::new(&ctx);
            system.add(
                ServiceSpec::new("probe", move |node| probe(node, ending, None, None)).grace(Duration::from_secs(5)),
            );
            system.start().await?;
            let mut c = client(&ctx, "client", "probe:50051");
            system.at(ctx.elapsed() + Duration::from_millis(300), Lifecycle::Sigterm { node: "probe-0".into() });
            let _ = read_all(&mut c, Duration::from_secs(10)).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            system.stop().await
        })
    };
    let buggy = run(Ending::AtSigterm);
    let caught: Vec<_> = buggy
        .failures()
        .filter(|o| o.failure.as_ref().is_some_and(|f| f.oracle.as_deref() == Some("goaway-first")))
        .collect();
    assert!(!caught.is_empty(), "no seed of 20 caught the server ending its streams before GOAWAY");
    assert_eq!(caught.len(), buggy.failures().count(), "every failure is the GOAWAY-first oracle's");
    run(Ending::AfterGoaway).assert_passed();
}

#[test]
fn a_drain_bound_closes_streams_that_never_end() {
    Simulation::new("grpc_drain_bound")
        .seeds(0..8)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            let bound = Duration::from_secs(2);
            system.add(
                ServiceSpec::new("probe", move |node| probe(node, Ending::Never, Some(bound), None))
                    .grace(Duration::from_secs(10)),
            );
            system.start().await?;
            let mut c = client(&ctx, "client", "probe:50051");
            let sigterm_at = ctx.elapsed() + Duration::from_millis(300);
            system.at(sigterm_at, Lifecycle::Sigterm { node: "probe-0".into() });
            let (items, end) = read_all(&mut c, Duration::from_secs(10)).await;
            let ended_at = ctx.elapsed();
            check(items >= 3, format!("only {items} items"))?;
            check(end != "OK" && end != "no end", format!("a stream cut by the drain bound ended {end}"))?;
            check(
                ended_at >= sigterm_at + bound && ended_at <= sigterm_at + bound + Duration::from_millis(100),
                format!("the stream ended at {ended_at:?}; SIGTERM at {sigterm_at:?}, bound {bound:?}"),
            )?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let stopped = kinds_in_order(&ctx, &["grpc.drain.bound", "grpc.stopped"]);
            check(stopped.len() == 2, format!("want the drain bound, then stopped: {stopped:?}"))?;
            system.stop().await
        })
        .assert_passed();
}

#[test]
fn without_a_drain_bound_a_stream_that_never_ends_outlives_the_grace() {
    let report = Simulation::new("grpc_no_drain_bound").seeds(0..4).run(|ctx: Ctx| async move {
        let system = System::new(&ctx);
        system.add(
            ServiceSpec::new("probe", |node| probe(node, Ending::Never, None, None)).grace(Duration::from_secs(3)),
        );
        system.start().await?;
        let mut c = client(&ctx, "client", "probe:50051");
        system.at(ctx.elapsed() + Duration::from_millis(300), Lifecycle::Sigterm { node: "probe-0".into() });
        let _ = read_all(&mut c, Duration::from_secs(10)).await;
        Ok(())
    });
    for outcome in report.failures() {
        let f = outcome.failure.as_ref().expect("a failure");
        assert!(f.message.contains("did not stop within its grace"), "unexpected failure: {}", f.message);
    }
    assert_eq!(report.failures().count(), 4, "tonic waits for open streams forever: every seed outlives the grace");
}

/// tonic 0.14: `max_connection_age` alone sends GOAWAY at the age; with
/// `max_connection_age_grace` too, it sends none and closes the connection at age + grace.
#[test]
fn max_connection_age_goaway_or_close_as_tonic_does() {
    for grace in [None, Some(Duration::from_secs(1))] {
        Simulation::new("grpc_max_age")
            .seeds(0..6)
            .run(move |ctx: Ctx| async move {
                let system = System::new(&ctx);
                system.add(ServiceSpec::new("probe", move |node| {
                    probe(node, Ending::Never, None, Some((Duration::from_secs(2), grace)))
                }));
                system.start().await?;
                let mut c = client(&ctx, "client", "probe:50051");
                let reply = c
                    .call(CallRequest { delay_ms: 0, tag: "a".into() })
                    .await
                    .map_err(|s| Failure::correctness("call", s.to_string()))?;
                check(reply.into_inner().tag == "a", "reply")?;
                // A stream open across the age: ended by the close when there is a grace.
                let (items, end) = read_all(&mut c, Duration::from_secs(5)).await;
                let goaways = kinds_in_order(&ctx, &["grpc.goaway"]);
                match grace {
                    None => check(
                        goaways.len() == 1 && end == "no end",
                        format!("want one GOAWAY and the stream left open: {goaways:?}, {items} items, {end}"),
                    )?,
                    Some(_) => check(
                        goaways.is_empty() && end != "no end" && end != "OK",
                        format!("want no GOAWAY and the stream cut: {goaways:?}, {items} items, {end}"),
                    )?,
                }
                // The channel reconnects: a later call succeeds on a new connection.
                let mut ok = false;
                for _ in 0..3 {
                    if c.call(CallRequest { delay_ms: 0, tag: "b".into() }).await.is_ok() {
                        ok = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                check(ok, "no call succeeded after the connection aged out")?;
                system.stop().await
            })
            .assert_passed();
    }
}

#[test]
fn the_seeded_balancer_spreads_calls_and_follows_a_rollout() {
    let picks = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<u64, Vec<String>>::new()));
    let picks2 = picks.clone();
    Simulation::new("grpc_balance")
        .seeds(0..6)
        .repeat(2)
        .run(move |ctx: Ctx| {
            let picks = picks2.clone();
            async move {
                ctx.add_check(OneStatus::default());
                let system = System::new(&ctx);
                system.add(
                    ServiceSpec::new("probe", |node| probe(node, Ending::AfterGoaway, None, None)).replicas(3..=3),
                );
                let caller = std::sync::Arc::new(tokio::sync::Mutex::new(None));
                let caller2 = caller.clone();
                system.add(ServiceSpec::new("caller", move |node: NodeCtx| {
                    let caller = caller2.clone();
                    async move {
                        let balanced = grpcsim::client::balanced(&node, "probe", 50051).map_err(BoxError::from)?;
                        *caller.lock().await = Some(ProbeClient::new(balanced));
                        node.set_ready();
                        node.shutdown_signal().await;
                        Ok(())
                    }
                }));
                system.start().await?;
                let mut c = caller.lock().await.clone().expect("the caller is ready");
                let mut seen = Vec::new();
                for i in 0..30 {
                    let r = c
                        .call(CallRequest { delay_ms: 5, tag: i.to_string() })
                        .await
                        .map_err(|s| Failure::correctness("call", s.to_string()))?;
                    seen.push(r.into_inner().served_by);
                }
                let distinct: std::collections::BTreeSet<&String> = seen.iter().collect();
                check(distinct.len() == 3, format!("30 calls reached {distinct:?}"))?;
                // During a rollout every call still succeeds: the balancer drops a replica when it
                // leaves the endpoints, before its SIGTERM.
                let rollout = {
                    let system = system.clone();
                    tokio::spawn(async move { system.rollout("probe", &Version::Same).await })
                };
                let mut during = 0;
                while !rollout.is_finished() {
                    c.call(CallRequest { delay_ms: 5, tag: "r".into() })
                        .await
                        .map_err(|s| Failure::correctness("rollout-call", s.to_string()))?;
                    during += 1;
                }
                rollout.await.map_err(|e| Failure::correctness("rollout", e.to_string()))??;
                check(during >= 1, "no call during the rollout")?;
                picks.lock().unwrap().entry(ctx.seed().0).or_default().extend(seen);
                system.stop().await
            }
        })
        .assert_passed();
    let picks = picks.lock().unwrap();
    let sequences: std::collections::BTreeSet<&Vec<String>> = picks.values().collect();
    assert!(sequences.len() > 1, "every seed picked the same replicas: the balancer is not seeded");
}

/// Review finding: a balancer left with no replica for a while must pick up the replicas that come
/// back (its discovery keeps its wait registered between polls).
#[test]
fn the_balancer_recovers_after_the_service_had_no_endpoints() {
    Simulation::new("grpc_balance_empty")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("probe", |node| probe(node, Ending::AfterGoaway, None, None)).replicas(2..=2));
            let caller = std::sync::Arc::new(tokio::sync::Mutex::new(None));
            let caller2 = caller.clone();
            system.add(ServiceSpec::new("caller", move |node: NodeCtx| {
                let caller = caller2.clone();
                async move {
                    let balanced = grpcsim::client::balanced(&node, "probe", 50051).map_err(BoxError::from)?;
                    *caller.lock().await = Some(ProbeClient::new(balanced));
                    node.set_ready();
                    node.shutdown_signal().await;
                    Ok(())
                }
            }));
            system.start().await?;
            let c = caller.lock().await.clone().expect("the caller is ready");
            let call = |tag: &'static str| {
                let mut c = c.clone();
                async move {
                    tokio::time::timeout(Duration::from_secs(1), c.call(CallRequest { delay_ms: 0, tag: tag.into() }))
                        .await
                }
            };
            check(matches!(call("before").await, Ok(Ok(_))), "a call before")?;
            ctx.net().set_endpoints("probe", &[]);
            check(call("none").await.is_err(), "a call with no endpoint waits (and times out)")?;
            ctx.net().set_endpoints("probe", &["probe-1"]);
            let back = call("back").await;
            check(
                matches!(&back, Ok(Ok(r)) if r.get_ref().served_by == "probe-1"),
                format!("after one came back: {back:?}"),
            )?;
            ctx.net().set_endpoints("probe", &["probe-0", "probe-1"]);
            check(matches!(call("both").await, Ok(Ok(_))), "a call with both back")?;
            system.stop().await
        })
        .assert_passed();
}

/// Review finding: a connection that cannot write its GOAWAY (its peer reads nothing and the send
/// buffer is full) must not hold the drain past its bound.
#[test]
fn the_drain_bound_holds_when_a_goaway_cannot_be_written() {
    #[derive(Clone)]
    struct Flood;
    #[tonic::async_trait]
    impl grpcsim::probe::Probe for Flood {
        async fn call(
            &self,
            _request: tonic::Request<CallRequest>,
        ) -> Result<tonic::Response<grpcsim::probe::CallReply>, tonic::Status> {
            Err(tonic::Status::unimplemented("flood"))
        }
        type StreamStream = grpcsim::probe::ItemStream;
        async fn stream(
            &self,
            _request: tonic::Request<StreamRequest>,
        ) -> Result<tonic::Response<Self::StreamStream>, tonic::Status> {
            let big = "x".repeat(256 * 1024);
            let items =
                futures::stream::repeat_with(move || Ok(grpcsim::probe::Item { seq: 0, served_by: big.clone() }));
            Ok(tonic::Response::new(Box::pin(items)))
        }
    }
    async fn flood(node: NodeCtx) -> Result<(), BoxError> {
        let listener = node.host().listen("50051")?;
        let server = grpcsim::Server::new(&node).drain_bound(Duration::from_secs(2));
        let router = server.builder().add_service(grpcsim::probe::ProbeServer::new(Flood));
        server.serve(listener, router).await
    }
    Simulation::new("grpc_drain_bound_stuck")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("flood", flood).grace(Duration::from_secs(10)));
            system.start().await?;
            let channel = grpcsim::client::endpoint("flood:50051")
                .expect("target")
                .initial_stream_window_size(32 << 20)
                .initial_connection_window_size(32 << 20)
                .connect_with_connector_lazy(sim::net::adapters::Connector::new(ctx.net().host("client")));
            let mut c = ProbeClient::new(channel);
            let mut stream = c
                .stream(StreamRequest { count: 0, interval_ms: 0 })
                .await
                .map_err(|s| Failure::correctness("open", s.to_string()))?
                .into_inner();
            let _ = stream.message().await;
            // Stop reading: the server's send buffer fills and stays full.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let sigterm_at = ctx.elapsed();
            system.sigterm("flood-0")?;
            tokio::time::sleep(Duration::from_secs(4)).await;
            let stopped = ctx.history().entries().find(|e| e.kind == "grpc.stopped").map(|e| e.at());
            check(
                stopped.is_some_and(|at| at <= sigterm_at + Duration::from_secs(2) + Duration::from_millis(50)),
                format!("the server stopped at {stopped:?}; SIGTERM at {sigterm_at:?} with a 2 s bound"),
            )?;
            check(ctx.history().entries().any(|e| e.kind == "grpc.drain.bound"), "the bound closed the connection")?;
            drop(stream);
            system.stop().await
        })
        .assert_passed();
}

/// Review finding: a second, idle server on the node drains at once; the GOAWAY-first check must
/// still judge each stream by the server it belongs to.
#[test]
fn goaway_first_judges_each_server_of_a_node_apart() {
    async fn two_servers(node: NodeCtx) -> Result<(), BoxError> {
        let admin_listener = node.host().listen("9000")?;
        let admin = grpcsim::Server::new(&node);
        let admin_router = admin.builder().add_service(ProbeService::new("admin").into_server());
        node.spawn(async move {
            let _ = admin.serve(admin_listener, admin_router).await;
        });
        probe(node, Ending::AtSigterm, None, None).await
    }
    let report = Simulation::new("grpc_goaway_first_two_servers").seeds(0..20).stop_after_failures(20).run(
        |ctx: Ctx| async move {
            ctx.add_check(GoawayFirst::long_lived([STREAM]));
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("probe", two_servers).grace(Duration::from_secs(5)));
            system.start().await?;
            let mut c = client(&ctx, "client", "probe:50051");
            system.at(ctx.elapsed() + Duration::from_millis(300), Lifecycle::Sigterm { node: "probe-0".into() });
            let _ = read_all(&mut c, Duration::from_secs(10)).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            system.stop().await
        },
    );
    let caught = report
        .failures()
        .filter(|o| o.failure.as_ref().is_some_and(|f| f.oracle.as_deref() == Some("goaway-first")))
        .count();
    assert!(caught > 0, "an idle second server hid the bug in all 20 seeds");
}

/// Review finding: a call that never ends (no deadline, its server vanished) fails the one-status
/// check at the end of the run, unless its method may stay open.
#[test]
fn a_call_that_never_ends_fails_one_status_at_the_end_of_the_run() {
    let run = |allow: bool| {
        Simulation::new("grpc_one_status_open").seeds(0..2).run(move |ctx: Ctx| async move {
            let check = if allow { OneStatus::default().may_stay_open([STREAM]) } else { OneStatus::default() };
            ctx.add_check(check);
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("probe", |node| probe(node, Ending::Never, None, None)));
            system.start().await?;
            let mut c = client(&ctx, "client", "probe:50051");
            let mut stream = c
                .stream(StreamRequest { count: 0, interval_ms: 50 })
                .await
                .map_err(|s| Failure::correctness("open", s.to_string()))?
                .into_inner();
            let _ = stream.message().await;
            system.crash("probe-0", sim::node::CrashMode::Fixed(sim::net::Ending::Vanish)).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            std::mem::forget(stream);
            Ok(())
        })
    };
    let strict = run(false);
    let failure = strict.first_failure().and_then(|o| o.failure.clone()).expect("the open call is reported");
    assert_eq!(failure.oracle.as_deref(), Some("one-status"), "{failure}");
    assert!(failure.message.contains("never ended"), "{failure}");
    run(true).assert_passed();
}
