//! Real libraries over the simulated network, with no forks: a hyper HTTP/1.1 client and server,
//! an HTTP/2 connection, axum, and a tonic unary call and server stream. Each runs inside a
//! simulation and must replay exactly (same history) in this process and in fresh processes.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use sim::net::adapters::{Connector, ServeListener};
use sim::{Ctx, Failure, Simulation};

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("adapter", what)) }
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("adapter", e.to_string())
}

async fn hello(req: hyper::Request<hyper::body::Incoming>) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    Ok(hyper::Response::new(Full::new(Bytes::from(format!("hello {} via {:?}", req.uri().path(), req.version())))))
}

#[test]
fn hyper_http1_and_http2_over_the_simulated_network_replay_exactly() {
    let report =
        Simulation::new("hyper_over_sim_net").seeds(0..10).repeat(2).repeat_processes(2).run(|ctx: Ctx| async move {
            let net = ctx.net();
            let server = net.host("server");
            let listener = server.listen("80").map_err(fail)?;
            tokio::spawn(sim::net::adapters::serve(listener, |stream, _peer| async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .http1()
                    .timer(TokioTimer::new())
                    .http2()
                    .timer(TokioTimer::new())
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(hello))
                    .await;
            }));

            // HTTP/1.1 through hyper-util's pooled client and the simulated connector.
            let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .build::<_, Full<Bytes>>(Connector::new(net.host("client")));
            for i in 0..3 {
                let response =
                    client.get(format!("http://server/h1/{i}").parse().map_err(fail)?).await.map_err(fail)?;
                let body = response.into_body().collect().await.map_err(fail)?.to_bytes();
                ctx.record("h1.response", "client", String::from_utf8_lossy(&body));
                check(body == format!("hello /h1/{i} via HTTP/1.1"), format!("unexpected body {body:?}"))?;
            }

            // HTTP/2 on one connection, several concurrent requests.
            let stream = net.host("client2").dial("server:80").await.map_err(fail)?;
            let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake::<_, Full<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(fail)?;
            tokio::spawn(conn);
            let mut requests = tokio::task::JoinSet::new();
            for i in 0..4 {
                let mut sender = sender.clone();
                let ctx = ctx.clone();
                requests.spawn(async move {
                    let req = hyper::Request::get(format!("http://server/h2/{i}"))
                        .body(Full::new(Bytes::new()))
                        .map_err(fail)?;
                    let response = sender.send_request(req).await.map_err(fail)?;
                    let body = response.into_body().collect().await.map_err(fail)?.to_bytes();
                    ctx.record("h2.response", "client2", String::from_utf8_lossy(&body));
                    check(body == format!("hello /h2/{i} via HTTP/2.0"), format!("unexpected body {body:?}"))
                });
            }
            while let Some(done) = requests.join_next().await {
                done.map_err(fail)??;
            }
            Ok(())
        });
    report.assert_passed();
    assert!(report.outcomes.iter().all(|o| o.events > 10), "the network recorded its deliveries");
}

#[test]
fn axum_serves_on_the_simulated_network() {
    let report =
        Simulation::new("axum_over_sim_net").seeds(0..10).repeat(2).repeat_processes(1).run(|ctx: Ctx| async move {
            let net = ctx.net();
            let listener = net.host("api").listen("8080").map_err(fail)?;
            let app = axum::Router::new().route(
                "/items/{id}",
                axum::routing::get(
                    |axum::extract::Path(id): axum::extract::Path<u32>| async move { format!("item {id}") },
                ),
            );
            tokio::spawn(async move {
                let _ = axum::serve(ServeListener(listener), app).await;
            });
            let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .build::<_, Full<Bytes>>(Connector::new(net.host("web")));
            for id in [3, 14, 15] {
                let response =
                    client.get(format!("http://api:8080/items/{id}").parse().map_err(fail)?).await.map_err(fail)?;
                let status = response.status();
                let body = response.into_body().collect().await.map_err(fail)?.to_bytes();
                ctx.record("axum.response", "web", format!("{status} {}", String::from_utf8_lossy(&body)));
                check(status == 200 && body == format!("item {id}"), format!("{status} {body:?}"))?;
            }
            Ok(())
        });
    report.assert_passed();
}

/// Needs sim's `tonic` feature: `cargo test --workspace` has it (grpcsim enables it), or
/// `cargo test -p sim --features tonic`.
#[cfg(feature = "tonic")]
#[test]
fn tonic_unary_and_server_stream_over_the_simulated_network() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let report =
        Simulation::new("tonic_over_sim_net").seeds(0..10).repeat(2).repeat_processes(1).run(|ctx: Ctx| async move {
            let net = ctx.net();
            let listener = net.host("grpc").listen("50051").map_err(fail)?;
            let (reporter, service) = tonic_health::server::health_reporter();
            reporter.set_service_status("ledger", tonic_health::ServingStatus::Serving).await;
            tokio::spawn(async move {
                let _ = tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(sim::net::adapters::Incoming(listener))
                    .await;
            });
            let channel = tonic::transport::Endpoint::from_static("http://grpc:50051")
                .connect_with_connector(Connector::new(net.host("caller")))
                .await
                .map_err(fail)?;
            let mut client = HealthClient::new(channel);

            let unary = client.check(HealthCheckRequest { service: "ledger".into() }).await.map_err(fail)?;
            ctx.record("grpc.check", "caller", format!("{:?}", unary.get_ref().status()));
            check(unary.get_ref().status() == ServingStatus::Serving, "the unary call returns SERVING")?;

            let mut watch =
                client.watch(HealthCheckRequest { service: "ledger".into() }).await.map_err(fail)?.into_inner();
            let first = watch.message().await.map_err(fail)?.ok_or_else(|| fail("the stream ended early"))?;
            ctx.record("grpc.watch", "caller", format!("{:?}", first.status()));
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            reporter.set_service_status("ledger", tonic_health::ServingStatus::NotServing).await;
            let second = watch.message().await.map_err(fail)?.ok_or_else(|| fail("the stream ended early"))?;
            ctx.record("grpc.watch", "caller", format!("{:?}", second.status()));
            check(
                first.status() == ServingStatus::Serving && second.status() == ServingStatus::NotServing,
                "the stream follows the status",
            )?;
            Ok(())
        });
    report.assert_passed();
}
