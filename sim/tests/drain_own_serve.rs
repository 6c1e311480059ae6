//! The `drain` oracle on a node's own serve loop: `axum::serve(..)` with and without
//! `with_graceful_shutdown`, judged by what the network sees (a request the server read and did
//! not answer when its connection closed after SIGTERM), over HTTP/1.1 and HTTP/2.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use sim::node::{BoxError, NodeCtx, ServiceSpec, System};
use sim::{Class, Ctx, Failure, Simulation};

/// A handler that takes 50 ms, telling `received` when a request reaches it.
fn app(received: Arc<tokio::sync::Notify>) -> axum::Router {
    axum::Router::new().route(
        "/slow",
        axum::routing::get(move || {
            let received = received.clone();
            async move {
                received.notify_one();
                tokio::time::sleep(Duration::from_millis(50)).await;
                "done"
            }
        }),
    )
}

/// Production shutdown code done right: axum stops accepting and waits for in-flight requests.
async fn graceful(node: NodeCtx, received: Arc<tokio::sync::Notify>) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    node.set_ready();
    let shutdown = node.shutdown_signal();
    axum::serve(sim::net::adapters::ServeListener(listener), app(received)).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

/// The planted bug: on SIGTERM the entry returns at once; axum's connection tasks still hold
/// requests when the process ends.
async fn abrupt(node: NodeCtx, received: Arc<tokio::sync::Notify>) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    node.set_ready();
    let serving = axum::serve(sim::net::adapters::ServeListener(listener), app(received));
    tokio::select! {
        result = serving.into_future() => Ok(result?),
        () = node.shutdown_signal() => Ok(()),
    }
}

type Entry =
    fn(NodeCtx, Arc<tokio::sync::Notify>) -> std::pin::Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

/// Starts `entry` as service `kv`, sends one GET that SIGTERM interrupts mid-handler, and waits;
/// with `must_answer`, the GET must get its whole response.
async fn sigterm_during_a_request(ctx: Ctx, entry: Entry, http2: bool, must_answer: bool) -> Result<(), Failure> {
    let system = System::new(&ctx);
    let received = Arc::new(tokio::sync::Notify::new());
    let notify = received.clone();
    system.add(ServiceSpec::new("kv", move |node| entry(node, notify.clone())));
    system.start().await?;
    let system2 = system.clone();
    tokio::spawn(async move {
        received.notified().await;
        let _ = system2.sigterm("kv-0");
    });
    let mut builder = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
    builder.timer(hyper_util::rt::TokioTimer::new()).http2_only(http2);
    let client = builder.build::<_, Full<Bytes>>(sim::net::adapters::Connector::new(ctx.net().host("client")));
    let outcome = match client.get("http://kv:8080/slow".parse().expect("a URI")).await {
        Ok(response) => response.into_body().collect().await.map(|b| b.to_bytes()).map_err(|e| format!("{e}")),
        Err(e) => Err(format!("{e:?}")),
    };
    ctx.record("client.outcome", "client", format!("{outcome:?}"));
    if must_answer && outcome.as_deref() != Ok(b"done".as_slice()) {
        return Err(Failure::correctness("test", format!("the in-flight GET was not answered: {outcome:?}")));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    check_stopped(&system)
}

fn check_stopped(system: &System) -> Result<(), Failure> {
    if system.running().is_empty() { Ok(()) } else { Err(Failure::correctness("test", "kv-0 still runs")) }
}

#[test]
fn axum_with_graceful_shutdown_answers_in_flight_requests_and_the_drain_oracle_is_quiet() {
    for http2 in [false, true] {
        Simulation::new(if http2 { "own_serve_graceful_h2" } else { "own_serve_graceful_h1" })
            .seeds(0..8)
            .run(move |ctx: Ctx| sigterm_during_a_request(ctx, |n, r| Box::pin(graceful(n, r)), http2, true))
            .assert_passed();
    }
}

#[test]
fn axum_returning_on_sigterm_without_draining_fails_the_drain_oracle_over_http1_and_http2() {
    for (http2, what) in [(false, "1 HTTP/1.1 request(s): GET /slow"), (true, "1 HTTP/2 stream(s): 1")] {
        let report = Simulation::new(if http2 { "own_serve_abrupt_h2" } else { "own_serve_abrupt_h1" })
            .seeds(0..4)
            .confirm(0)
            .run(move |ctx: Ctx| sigterm_during_a_request(ctx, |n, r| Box::pin(abrupt(n, r)), http2, false));
        assert_eq!(report.failures().count(), 4, "every seed: {report}");
        for outcome in report.failures() {
            let failure = outcome.failure.as_ref().expect("a failure");
            assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Correctness, Some("drain")), "{failure}");
            assert!(failure.message.contains("kv-0 (incarnation 1) stopped after SIGTERM"), "{failure}");
            assert!(failure.message.contains(what), "{failure}");
        }
    }
}
