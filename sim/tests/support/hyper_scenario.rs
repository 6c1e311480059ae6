//! The determinism canary's scenario: a hyper HTTP/1.1 + HTTP/2 server and 24 clients over
//! in-memory duplex streams, exercising every source of nondeterminism the runtime claims to
//! control: `select!` without `biased`, a `HashMap` iterated in the handler, timers due at the
//! same instant, spawned tasks, `rand`, `uuid::Uuid::new_v4`, `SystemTime::now()`, `Instant`, and
//! request cancellation (HTTP/2 resets, whose expiry h2 times with std `Instant`).
//!
//! Every response (or cancellation, or error) is recorded in the run's history, so the history
//! hash covers the bytes the clients saw.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::sync::Arc;

use sim::{Ctx, Failure, Seed, Source};

/// What the scenario needs from its surroundings: somewhere to record and seeded streams. Under
/// the harness both come from the run's `Ctx`; the bare baseline (in the overhead benchmark)
/// records nothing and keys streams from a fixed seed.
#[derive(Clone)]
pub struct Env {
    record: Arc<RecordFn>,
    source: Arc<SourceFn>,
}

type RecordFn = dyn Fn(&str, &str, String) + Send + Sync;
type SourceFn = dyn Fn(&str) -> Source + Send + Sync;

impl Env {
    fn record(&self, kind: &str, who: &str, detail: String) {
        (self.record)(kind, who, detail);
    }
}

/// Clients in the scenario: half speak HTTP/1.1, half HTTP/2.
pub const CLIENTS: usize = 24;
/// Requests each client sends.
pub const REQUESTS: usize = 4;

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    let mut fields: HashMap<String, u32> = HashMap::new();
    for k in 0..8 {
        fields.insert(format!("k{k}"), k);
    }
    let order: Vec<&String> = fields.keys().collect();
    let id = uuid::Uuid::new_v4();
    let draw: u64 = rand::random();
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(draw % 7)).await;
    let waited = started.elapsed();
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let body = format!(
        "{path} id={id} draw={draw} waited={waited:?} now={}.{:09} order={order:?}",
        wall.as_secs(),
        wall.subsec_nanos()
    );
    Ok(Response::new(Full::new(Bytes::from(body))))
}

fn serve(io: tokio::io::DuplexStream, http2: bool) {
    let io = TokioIo::new(io);
    let service = hyper::service::service_fn(handle);
    if http2 {
        tokio::spawn(async move {
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .serve_connection(io, service)
                .await;
        });
    } else {
        tokio::spawn(async move {
            let _ =
                hyper::server::conn::http1::Builder::new().timer(TokioTimer::new()).serve_connection(io, service).await;
        });
    }
}

async fn client(ctx: Env, index: usize, io: tokio::io::DuplexStream, http2: bool) -> Result<(), String> {
    let who = format!("client-{index}/{}", if http2 { "h2" } else { "h1" });
    let io = TokioIo::new(io);
    let mut source = (ctx.source)(&format!("clients/{index}"));
    // All clients wake at the same instant: several timers due together.
    tokio::time::sleep(Duration::from_millis(10)).await;
    if http2 {
        let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake::<_, Full<Bytes>>(io)
            .await
            .map_err(|e| format!("{who} handshake: {e}"))?;
        tokio::spawn(conn);
        for request in 0..REQUESTS {
            if sender.ready().await.is_err() {
                ctx.record("closed", &who, format!("before request {request}"));
                break;
            }
            let req = Request::get(format!("http://canary/{index}/{request}"))
                .body(Full::new(Bytes::new()))
                .map_err(|e| e.to_string())?;
            let patience = Duration::from_millis(source.range(2..=9));
            tokio::select! {
                response = sender.send_request(req) => record_response(&ctx, &who, request, response).await,
                () = tokio::time::sleep(patience) => { ctx.record("cancelled", &who, format!("request {request} after {patience:?}")); }
            }
        }
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .handshake::<_, Full<Bytes>>(io)
            .await
            .map_err(|e| format!("{who} handshake: {e}"))?;
        tokio::spawn(conn);
        for request in 0..REQUESTS {
            if sender.ready().await.is_err() {
                ctx.record("closed", &who, format!("before request {request}"));
                break;
            }
            let req = Request::get(format!("http://canary/{index}/{request}"))
                .body(Full::new(Bytes::new()))
                .map_err(|e| e.to_string())?;
            let patience = Duration::from_millis(source.range(4..=12));
            tokio::select! {
                response = sender.send_request(req) => record_response(&ctx, &who, request, response).await,
                () = tokio::time::sleep(patience) => { ctx.record("cancelled", &who, format!("request {request} after {patience:?}")); }
            }
        }
    }
    Ok(())
}

async fn record_response(ctx: &Env, who: &str, request: usize, response: hyper::Result<Response<Incoming>>) {
    match response {
        Ok(response) => {
            let status = response.status();
            match response.into_body().collect().await {
                Ok(body) => {
                    ctx.record(
                        "response",
                        who,
                        format!("{request} {status} {}", String::from_utf8_lossy(&body.to_bytes())),
                    );
                }
                Err(e) => {
                    ctx.record("body-error", who, format!("{request} {e}"));
                }
            }
        }
        Err(e) => {
            ctx.record("error", who, format!("{request} {e}"));
        }
    }
}

/// The scenario under the harness.
pub async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let (a, b) = (ctx.clone(), ctx);
    run(Env {
        record: Arc::new(move |kind, who, detail| {
            a.record(kind, who, detail);
        }),
        source: Arc::new(move |label| b.source(label)),
    })
    .await
}

/// The scenario without the harness (the benchmark's baseline).
#[allow(dead_code, reason = "used by the overhead benchmark, not by the tests")]
pub async fn bare() {
    let env = Env { record: Arc::new(|_, _, _| {}), source: Arc::new(|label| Seed(0).path(label).source()) };
    if let Err(e) = run(env).await {
        panic!("the bare scenario failed: {e}");
    }
}

/// The scenario: serve every client on its own duplex pair, run them all, record what each saw.
async fn run(ctx: Env) -> Result<(), Failure> {
    let mut clients = tokio::task::JoinSet::new();
    for index in 0..CLIENTS {
        let http2 = index % 2 == 1;
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        serve(server_io, http2);
        clients.spawn(client(ctx.clone(), index, client_io, http2));
    }
    let mut done = 0;
    while let Some(joined) = clients.join_next().await {
        match joined {
            Ok(Ok(())) => done += 1,
            Ok(Err(e)) => return Err(Failure::correctness("canary", e)),
            Err(e) => {
                return Err(Failure::correctness("canary", format!("client task failed: {e}")));
            }
        }
    }
    ctx.record(
        "done",
        "clients",
        format!("{done} clients finished at {:?}", SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()),
    );
    Ok(())
}
