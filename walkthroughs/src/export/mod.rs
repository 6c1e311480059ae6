//! The export service: an HTTP/2 (axum on hyper) service streaming rows to clients, run by a
//! hand-written supervisor next to a reporter, with the two bug classes a Go simulation could
//! find but not replay (the humus proposal's #959 and #1144): both need one node's tasks to run
//! in an order the code does not fix, so explore mode is what finds them
//! (docs/src/walkthrough-export.md).
//!
//! - [`supervisor`]: the node's entry point: runs the services, turns SIGTERM into a
//!   cancellation token, tells "stopping as asked" from "a service ended on its own";
//! - [`server`]: `GET /export/{rows}` streams rows from a slow, flaky source through a producer
//!   task per stream and records each response's [`Outcome`](server::Outcome);
//! - [`tracker`]: the actor owning the open streams; a dropped body tells it the client went away.
//!
//! Clients (hosts `client-N`) download exports over their own HTTP/2 connection, and either read
//! to the end, or stop reading a while and then cancel the stream (RST_STREAM) or close the
//! connection. The swarm draws SIGTERMs, restarts, rollouts, crashes and partitions of the export
//! nodes, the network's faults, and link latencies (every link at 0 in a quarter of the runs: the
//! #1144 class hid behind 1 ms of latency in Go).
//!
//! Oracles: `exit-cause` (a node that answered SIGTERM with an error: the supervisor took a
//! service stopping as asked for a service failing); `response-outcome` (a response recorded as
//! failed by a write error: hyper drops a body only when its stream or connection ended, so that
//! is the client going away; and a response recorded as "client went away" that the client read
//! to the end); the node lifecycle oracles (drain, zombie, leak).

pub mod server;
pub mod supervisor;
pub mod tracker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use sim::check::{self, LivenessBound};
use sim::prelude::*;
use tokio_util::sync::CancellationToken;

use server::{Outcome, Outcomes, RowSource};

/// The oracle over the servers' recorded outcomes.
pub const RESPONSE_OUTCOME: Oracle = Oracle::new("response-outcome");
/// A client's wait for response headers or for one frame.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// The clients' HTTP/2 stream and connection windows: the protocol's default (bytes).
pub const WINDOW: u32 = 65_535;
/// How often the reporter reports.
pub const REPORT_EVERY: Duration = Duration::from_millis(250);

/// Which export service runs: the correct one, or one with a planted bug.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// A service stopping after SIGTERM is stopping; a failed write is the client going away.
    Correct,
    /// The supervisor reports a service that returned because of SIGTERM as a service
    /// returning on its own (humus #959).
    SigtermAsReturn,
    /// A write that failed because the client went away is recorded as a failed response
    /// (humus #1144).
    ClientGoneAsFailure,
}

impl Variant {
    /// Every variant, correct first.
    pub const ALL: [Variant; 3] = [Variant::Correct, Variant::SigtermAsReturn, Variant::ClientGoneAsFailure];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Correct => "correct",
            Variant::SigtermAsReturn => "planted: SIGTERM taken for a return (#959)",
            Variant::ClientGoneAsFailure => "planted: client gone logged failed (#1144)",
        }
    }

    /// The oracle that must catch it (none for the correct variant).
    pub fn oracle(self) -> Option<Oracle> {
        match self {
            Variant::Correct => None,
            Variant::SigtermAsReturn => Some(Oracle::EXIT_CAUSE),
            Variant::ClientGoneAsFailure => Some(RESPONSE_OUTCOME),
        }
    }

    /// The simulation's name for this variant.
    pub fn simulation(self) -> &'static str {
        match self {
            Variant::Correct => "export",
            Variant::SigtermAsReturn => "export_sigterm_as_return",
            Variant::ClientGoneAsFailure => "export_client_gone_as_failure",
        }
    }
}

/// The export node's entry point: the supervisor running the HTTP/2 server and the reporter.
///
/// # Errors
/// As [`supervisor::supervise`].
pub async fn main(node: NodeCtx, source: Arc<RowSource>, variant: Variant) -> Result<(), BoxError> {
    let token = CancellationToken::new();
    let tracker = tracker::start(&node);
    let app = server::router(&node, tracker.clone(), source, variant);
    let services: Vec<supervisor::Service> = vec![
        ("http", Box::pin(server::serve(node.clone(), app, token.clone()))),
        ("reporter", Box::pin(report(node.clone(), tracker, token.clone()))),
    ];
    supervisor::supervise(&node, token, services, variant).await
}

/// The reporter service: records the open streams every [`REPORT_EVERY`] until the token
/// fires, and then returns at once.
async fn report(node: NodeCtx, tracker: tracker::Tracker, token: CancellationToken) -> Result<(), BoxError> {
    loop {
        tokio::select! {
            () = token.cancelled() => return Ok(()),
            () = tokio::time::sleep(REPORT_EVERY) => {
                node.sim().record("export.report", node.name(), format!("{} streams open", tracker.open()));
            }
        }
    }
}

/// What a client did with a download, by request id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientView {
    /// It read every row and the end of the stream.
    ReadToEnd,
    /// It cancelled the stream (RST_STREAM) after reading this many rows.
    Cancelled(u64),
    /// It closed its connection after reading this many rows.
    Closed(u64),
    /// The stream or connection failed, or timed out (the effect is unknown).
    Failed(String),
}

/// The clients' model: what each did with each download.
#[derive(Default)]
pub struct Model {
    views: BTreeMap<String, ClientView>,
}

/// How a download ends on the client's side.
#[derive(Copy, Clone, Debug)]
enum Action {
    ReadToEnd,
    Cancel,
    Close,
}

/// Downloads an export over a fresh HTTP/2 connection and acts as drawn.
async fn download(mut op: OpCtx<Model>) -> OpOutcome {
    let rows = op.source().range(4..=48);
    let action = [Action::ReadToEnd, Action::Cancel, Action::Close][op.source().below(3) as usize];
    let read_before = op.source().range(0..=rows);
    let stall = Duration::from_millis(op.source().range(0..=40));
    let request = format!("{}-{}", op.host().name(), op.id());
    let (view, outcome) = match fetch(&op, &request, rows, action, read_before, stall).await {
        Ok(view) => {
            let what = format!("{view:?}");
            (view, OpOutcome::Ok(what))
        }
        Err(e) => (ClientView::Failed(e.clone()), OpOutcome::Indeterminate(e)),
    };
    op.model().views.insert(request, view);
    outcome
}

async fn fetch(
    op: &OpCtx<Model>,
    request: &str,
    rows: u64,
    action: Action,
    read_before: u64,
    stall: Duration,
) -> Result<ClientView, String> {
    let stream = op.host().dial("export:8080").await.map_err(|e| format!("dial: {e}"))?;
    let io = hyper_util::rt::TokioIo::new(stream);
    // HTTP/2's default windows (RFC 9113 §6.9.2), not hyper's larger ones: a client that stops
    // reading holds the server back after 64 KiB.
    let handshake = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .initial_stream_window_size(WINDOW)
        .initial_connection_window_size(WINDOW)
        .handshake(io);
    let (mut send, connection) = tokio::time::timeout(CLIENT_TIMEOUT, handshake)
        .await
        .map_err(|_| "handshake: timeout".to_string())?
        .map_err(|e| format!("handshake: {e}"))?;
    let connection = tokio::spawn(connection);
    let req = http::Request::get(format!("http://export/export/{rows}"))
        .header("x-request-id", request)
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let response = tokio::time::timeout(CLIENT_TIMEOUT, send.send_request(req))
        .await
        .map_err(|_| "headers: timeout".to_string())?
        .map_err(|e| format!("headers: {e}"))?;
    let mut body = response.into_body();
    let limit = match action {
        Action::ReadToEnd => u64::MAX,
        Action::Cancel | Action::Close => read_before,
    };
    let mut read = 0;
    while read < limit {
        match tokio::time::timeout(CLIENT_TIMEOUT, body.frame()).await {
            Err(_) => return Err(format!("row {read}: timeout")),
            Ok(None) => return Ok(ClientView::ReadToEnd),
            Ok(Some(Err(e))) => return Err(format!("row {read}: {e}")),
            Ok(Some(Ok(frame))) => {
                if frame.is_data() {
                    read += 1;
                }
            }
        }
    }
    // Stop reading for a while: the stream's window fills and the producer waits on its write.
    tokio::time::sleep(stall).await;
    drop(body);
    match action {
        Action::Cancel => {
            drop(send);
            let _ = tokio::time::timeout(CLIENT_TIMEOUT, connection).await;
            Ok(ClientView::Cancelled(read))
        }
        _ => {
            connection.abort();
            drop(send);
            Ok(ClientView::Closed(read))
        }
    }
}

fn workload() -> Workload<Model> {
    Workload::new(Model::default()).op(Operation::new("download", 1, download))
}

/// The response-outcome oracle: no response is recorded as failed by a write error (hyper
/// drops a body only when its stream or connection ended: that is the client going away), and
/// none that its client read to the end is recorded as "client went away".
///
/// # Errors
/// The first response recorded wrongly, with what its client did.
pub fn response_outcomes(ctx: &Ctx, model: &Model) -> Result<(), Failure> {
    for served in ctx.extension::<Outcomes>().all() {
        let view = model.views.get(&served.request);
        let client = view.map_or_else(|| "was still waiting".to_string(), |v| format!("{v:?}"));
        let wrong = match (&served.outcome, view) {
            (Outcome::WriteFailed(e), _) => format!("logged the response as failed ({e}); the client {client}"),
            (Outcome::ClientWentAway, Some(ClientView::ReadToEnd)) => {
                "logged \"client went away\"; the client read the stream to its end".to_string()
            }
            _ => continue,
        };
        return Err(Failure::correctness(
            RESPONSE_OUTCOME,
            format!("{} served {}: {wrong}", served.node, served.request),
        )
        .about(&served.node));
    }
    Ok(())
}

/// One run of the export service with `variant`.
///
/// # Errors
/// The first oracle that fired.
pub async fn run(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    // Zero-latency links stay in the swarm (in Go, 1 ms of latency hid the #1144 class): in a
    // quarter of the runs every link has none; the others draw links of 0–20 ms.
    if ctx.swarm().flag("export.zero_latency", 0.25) {
        ctx.set_net_config(sim::net::NetConfig::fixed(Duration::ZERO)).expect("set before the network is made");
    }
    let failure = ctx.swarm().ratio("export.source_failure", 0.0..=0.05);
    let source = Arc::new(RowSource::new(ctx.source("export/source"), failure, Duration::from_millis(3)));
    let system = System::new(&ctx);
    let (v1, v2) = (Arc::clone(&source), Arc::clone(&source));
    system.add(
        ServiceSpec::new("export", move |node| main(node, Arc::clone(&v1), variant))
            .version("v2", move |node| main(node, Arc::clone(&v2), variant))
            .replicas(1..=2)
            .grace(Duration::from_secs(10)),
    );
    system.start().await?;

    let window = Duration::from_secs(10);
    let start = ctx.elapsed();
    system.schedule_lifecycle(start + Duration::from_millis(500)..start + window);
    Nemesis::new(&system.replicas("export"), start + Duration::from_secs(1)..start + window)
        .longest(Duration::from_secs(2))
        .schedule(&ctx);

    let clients = workload();
    let ops = ctx.swarm().int("workload.ops", 10..=40);
    let records = clients.run(&ctx, Budget { ops, window, drain: Duration::from_secs(30) }).await;
    ctx.record("workload.done", "clients", format!("{:?}", sim::workload::tally(&records)));

    system.heal().await?;
    let bound = LivenessBound::new()
        .plus("client timeout", CLIENT_TIMEOUT * 3)
        .plus("restart and readiness", Duration::from_secs(5));
    let probe = clients.clone();
    let ctx2 = ctx.clone();
    check::liveness(&ctx, &bound, move || {
        let (probe, ctx2) = (probe.clone(), ctx2.clone());
        async move {
            probe
                .run_one(&ctx2, "download", "client-0", None)
                .await
                .map_or(OpOutcome::Failed("no download".into()), |r| r.outcome)
        }
    })
    .await?;

    system.stop().await?;
    response_outcomes(&ctx, &clients.model())
}
