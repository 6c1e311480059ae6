//! hyper #3729 (present in hyper 1.5.0, fixed in 1.5.1).
//!
//! A server gives each HTTP/2 connection a maximum age, as tonic's `max_connection_age` does:
//! when it passes, the server calls `graceful_shutdown` on the connection, which sends GOAWAY and
//! lets the streams it already took finish (RFC 9113 §6.8). Clients dial, send a request at once
//! (it travels right behind the connection preface), and redial when a connection stops taking
//! streams. In hyper 1.5.0, a `graceful_shutdown` that lands while the connection is still
//! handshaking — the age passed before the client's preface was read — closes the connection
//! outright: no GOAWAY, and the request sent with the preface dies as a reset or a broken pipe,
//! so the client cannot tell whether it was processed. hyper 1.5.1 remembers the shutdown and
//! sends GOAWAY once the handshake is done. (Measured in tonic PR #1865 with a 5 ms maximum age:
//! 23,736 OK and 76,512 Unavailable of 100,000 calls.)
//!
//! Written as a user would have written it before the bug was known: the swarm draws the age,
//! the clients and their calls; the network draws latency and jitter (the preface can trail the
//! handshake's last ACK by the link's jitter). Oracles:
//! - `goaway-before-close`: every call is answered, or refused in a way that says it was not
//!   processed (a GOAWAY or `REFUSED_STREAM` from the server, or hyper's "canceled": never sent);
//! - `handled-equals-ok`: the server's handler ran exactly once per answered call.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use sim::{Ctx, Failure, Oracle, Simulation};

/// A call failed in a way that does not say whether it was processed.
const GOAWAY_BEFORE_CLOSE: Oracle = Oracle::new("goaway-before-close");
/// The handler ran a different number of times than calls were answered.
const HANDLED_EQUALS_OK: Oracle = Oracle::new("handled-equals-ok");

/// Attempts per call before the run gives up (each refusal redials).
const ATTEMPTS: u32 = 200;

fn main() {
    regression::main(Simulation::new("hyper-3729"), scenario);
}

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let max_age = ctx.swarm().duration("max_connection_age", Duration::ZERO..=Duration::from_millis(5));
    let clients = ctx.swarm().int("clients", 1..=3);
    let calls = ctx.swarm().int("calls", 5..=40);
    let think = ctx.swarm().duration("think", Duration::ZERO..=Duration::from_millis(2));

    let handled = Arc::new(AtomicU64::new(0));
    let listener = ctx.net().host("server").listen("8080")?;
    let counter = Arc::clone(&handled);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(stream, max_age, Arc::clone(&counter)));
        }
    });

    let mut tasks = Vec::new();
    for c in 0..clients {
        let ctx = ctx.clone();
        tasks.push(tokio::spawn(async move { client(ctx, format!("client-{c}"), calls, think).await }));
    }
    let mut answered = 0;
    for task in tasks {
        answered += task.await.map_err(|e| Failure::correctness("client-task", e.to_string()))??;
    }
    let handled = handled.load(Ordering::SeqCst);
    if handled != answered {
        return Err(Failure::correctness(
            HANDLED_EQUALS_OK,
            format!("the handler ran {handled} times for {answered} answered calls"),
        ));
    }
    Ok(())
}

/// One accepted connection: HTTP/2 with a maximum age, after which it is shut down gracefully.
async fn serve_connection(stream: sim::net::TcpStream, max_age: Duration, handled: Arc<AtomicU64>) {
    let service = hyper::service::service_fn(move |_request: Request<hyper::body::Incoming>| {
        handled.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok")))) }
    });
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let age = tokio::time::sleep(max_age);
    let mut age = std::pin::pin!(age);
    let mut aged = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = age.as_mut(), if !aged => {
                aged = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// A client making `calls` calls one after another, each on the connection it has or a new one.
/// Returns how many were answered.
async fn client(ctx: Ctx, name: String, calls: u64, think: Duration) -> Result<u64, Failure> {
    let host = ctx.net().host(&name);
    let mut sender: Option<hyper::client::conn::http2::SendRequest<Empty<Bytes>>> = None;
    let mut answered = 0;
    for call in 1..=calls {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > ATTEMPTS {
                return Err(Failure::liveness(
                    "calls-complete",
                    format!("{name} call {call}: refused {ATTEMPTS} times"),
                ));
            }
            let mut s = match sender.take() {
                Some(s) if !s.is_closed() => s,
                _ => {
                    let stream = host.dial("server:8080").await?;
                    let (s, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                        .timer(TokioTimer::new())
                        .handshake(TokioIo::new(stream))
                        .await
                        .map_err(|e| Failure::correctness("handshake", e.to_string()))?;
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                    s
                }
            };
            // A connection that no longer takes streams (GOAWAY seen, or closed): redial.
            if s.ready().await.is_err() {
                continue;
            }
            let request = Request::get("http://server:8080/").body(Empty::new()).expect("a valid request");
            match s.send_request(request).await {
                Ok(response) => {
                    let body = response.into_body().collect().await;
                    ctx.record("call", &name, format!("call {call}: answered"));
                    if let Err(e) = body {
                        return Err(Failure::correctness(
                            GOAWAY_BEFORE_CLOSE,
                            format!("{name} call {call}: the response body failed: {e}"),
                        ));
                    }
                    answered += 1;
                    sender = Some(s);
                    break;
                }
                Err(e) if not_processed(&e) => {
                    ctx.record("call", &name, format!("call {call}: refused ({e})"));
                }
                Err(e) => {
                    ctx.record("call", &name, format!("call {call}: failed ({})", chain(&e)));
                    return Err(Failure::correctness(
                        GOAWAY_BEFORE_CLOSE,
                        format!(
                            "{name} call {call} failed with \"{}\" and no GOAWAY: the server closed the connection \
                             under a request it had been sent, so the client cannot tell whether it was processed",
                            chain(&e)
                        ),
                    ));
                }
            }
        }
        tokio::time::sleep(think).await;
    }
    Ok(answered)
}

/// Whether a failed call says it was not processed: hyper's "canceled" (never sent), or an h2
/// stream refused by the server's GOAWAY (NO_ERROR) or `REFUSED_STREAM` (RFC 9113 §8.7).
fn not_processed(e: &hyper::Error) -> bool {
    if e.is_canceled() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<h2::Error>() {
            return (h2.is_go_away() && h2.reason() == Some(h2::Reason::NO_ERROR))
                || h2.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        source = s.source();
    }
    false
}

/// An error and its sources, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
