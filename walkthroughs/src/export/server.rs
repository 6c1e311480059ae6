//! The export service's HTTP/2 side: `GET /export/{rows}` streams `rows` rows of
//! [`ROW_BYTES`] bytes each, read one by one from a slow source, and records how each response
//! ended ([`Outcome`]) — what a service logs as "response failed" or "client went away".
//!
//! Each response body is fed by a producer task through a small channel. When the client cancels
//! the stream (RST_STREAM) or closes its connection, hyper drops the body: the body tells the
//! [tracker](super::tracker) the client went away (which fires the stream's `gone` token) and
//! its channel closes, so the producer's next write fails.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use bytes::Bytes;
use hyper::body::Frame;
use sim::Ctx;
use sim::node::{BoxError, NodeCtx};
use sim::seed::Source;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Variant;
use super::tracker::{Msg, Tracker};

/// Bytes per row.
pub const ROW_BYTES: usize = 8 * 1024;
/// Rows the channel between a producer and its body holds.
const CHANNEL_ROWS: usize = 2;

/// How a response ended, as the server records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every row was written.
    Completed,
    /// The client cancelled the stream or its connection closed.
    ClientWentAway,
    /// The server failed the response: the source failed at a row.
    SourceFailed(u32),
    /// The server failed the response: writing a row failed.
    WriteFailed(String),
}

/// One response's outcome.
#[derive(Clone, Debug)]
pub struct Served {
    /// The request id (`x-request-id`).
    pub request: String,
    /// The node that served it.
    pub node: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// Every outcome the run's servers recorded (a [`Ctx`] extension): the service's log.
#[derive(Default)]
pub struct Outcomes {
    served: Mutex<Vec<Served>>,
}

impl Outcomes {
    fn record(&self, ctx: &Ctx, served: Served) {
        ctx.record("export.outcome", &served.request, format!("{}: {:?}", served.node, served.outcome));
        self.served.lock().unwrap_or_else(|p| p.into_inner()).push(served);
    }

    /// The outcomes so far, in the order they were recorded.
    pub fn all(&self) -> Vec<Served> {
        self.served.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The rows' source, shared by every replica: each row takes its time and may fail (a slow,
/// flaky upstream). Seeded.
pub struct RowSource {
    draws: Mutex<Source>,
    failure: f64,
    slowest: Duration,
}

impl RowSource {
    /// A source failing a row with probability `failure`, taking up to `slowest` per row.
    pub fn new(draws: Source, failure: f64, slowest: Duration) -> RowSource {
        RowSource { draws: Mutex::new(draws), failure, slowest }
    }

    /// How long the next row takes, and whether it fails.
    fn next_row(&self) -> (Duration, bool) {
        let mut draws = self.draws.lock().unwrap_or_else(|p| p.into_inner());
        let micros = draws.range(0..=self.slowest.as_micros() as u64);
        let failed = draws.below(1_000_000) < (self.failure * 1_000_000.0) as u64;
        (Duration::from_micros(micros), failed)
    }
}

#[derive(Clone)]
struct App {
    node: NodeCtx,
    tracker: Tracker,
    source: Arc<RowSource>,
    variant: Variant,
}

/// The export router, with its tracker.
pub fn router(node: &NodeCtx, tracker: Tracker, source: Arc<RowSource>, variant: Variant) -> Router {
    let app = App { node: node.clone(), tracker, source, variant };
    Router::new().route("/export/{rows}", get(export)).with_state(app)
}

async fn export(State(app): State<App>, Path(rows): Path<u32>, headers: HeaderMap) -> Response {
    let request = headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("unnamed").to_string();
    let (tx, rx) = mpsc::channel(CHANNEL_ROWS);
    let gone = CancellationToken::new();
    app.tracker.send(Msg::Open(request.clone(), gone.clone()));
    let body = ExportBody { rx, request: request.clone(), tracker: app.tracker.clone(), ended: false };
    app.node.spawn(produce(app.clone(), request, rows, tx, gone));
    Response::new(axum::body::Body::new(body))
}

/// Writes the rows into the body's channel and records how the response ended.
async fn produce(
    app: App,
    request: String,
    rows: u32,
    tx: mpsc::Sender<Result<Bytes, BoxError>>,
    gone: CancellationToken,
) {
    let outcome = 'rows: {
        for row in 0..rows {
            let (takes, failed) = app.source.next_row();
            tokio::select! {
                () = gone.cancelled() => break 'rows Outcome::ClientWentAway,
                () = tokio::time::sleep(takes) => {}
            }
            if failed {
                let _ = tx.send(Err(format!("source failed at row {row}").into())).await;
                break 'rows Outcome::SourceFailed(row);
            }
            if tx.send(Ok(Bytes::from(vec![b'r'; ROW_BYTES]))).await.is_err() {
                break 'rows match app.variant {
                    // The planted bug (humus #1144): the write failed, so "did the client go
                    // away?" is asked of the `gone` token — which the tracker fires only when it
                    // gets its turn, maybe after this task's.
                    Variant::ClientGoneAsFailure if !gone.is_cancelled() => {
                        Outcome::WriteFailed("the response body is closed".into())
                    }
                    // The fix: hyper drops a body only when its stream or connection ended, so a
                    // failed write is the client going away.
                    _ => Outcome::ClientWentAway,
                };
            }
        }
        Outcome::Completed
    };
    app.tracker.send(Msg::Done(request.clone()));
    let ctx = app.node.sim().clone();
    ctx.extension::<Outcomes>().record(&ctx, Served { request, node: app.node.name().to_string(), outcome });
}

/// A response body fed by a producer; tells the tracker when it is dropped before its end.
struct ExportBody {
    rx: mpsc::Receiver<Result<Bytes, BoxError>>,
    request: String,
    tracker: Tracker,
    ended: bool,
}

impl hyper::body::Body for ExportBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(row))) => Poll::Ready(Some(Ok(Frame::data(row)))),
            Poll::Ready(Some(Err(e))) => {
                self.ended = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for ExportBody {
    fn drop(&mut self) {
        if !self.ended {
            self.tracker.send(Msg::Gone(self.request.clone()));
        }
    }
}

/// Serves `app` over HTTP/2 on port 8080 until `token` fires, then drains: returns once every
/// open connection has finished its streams (hyper's graceful shutdown sends GOAWAY).
///
/// # Errors
/// When it cannot listen.
pub async fn serve(node: NodeCtx, app: Router, token: CancellationToken) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    node.set_ready();
    loop {
        tokio::select! {
            () = token.cancelled() => break,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else { break };
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                let connection = hyper::server::conn::http2::Builder::new(node.executor())
                    .timer(hyper_util::rt::TokioTimer::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                let watched = graceful.watch(connection);
                node.spawn(async move {
                    let _ = watched.await;
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
