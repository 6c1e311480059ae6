//! The docs' "a service of your own" (docs/src/first-simulation.md shows this file's code between
//! the markers verbatim): an axum key-value service with its own graceful shutdown, two replicas
//! behind a name, shared state passed into the entry, a workload whose operations record their
//! requests, the effects ledger, the nemesis and lifecycle events.

// --- begin own service ---
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use sim::check::{self, Effects};
use sim::nemesis::Nemesis;
use sim::net::adapters::{Connector, ServeListener};
use sim::node::{BoxError, Lifecycle, NodeCtx, Restart, ServiceSpec, System};
use sim::workload::{Budget, OpCtx, OpOutcome, Operation, Workload};
use sim::{Ctx, Failure, Simulation};

/// The database both replicas share: values by key, and the idempotency keys already applied.
#[derive(Default)]
struct Store {
    values: BTreeMap<String, String>,
    applied: std::collections::BTreeSet<String>,
}

/// The service's entry: production code, with its own `with_graceful_shutdown`. `store` and
/// `dedup` come in through the closure given to `ServiceSpec::new` (below).
async fn kv(node: NodeCtx, store: Arc<Mutex<Store>>, dedup: bool) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let ctx = node.sim().clone();
    let put =
        move |axum::extract::Path(key): axum::extract::Path<String>, headers: axum::http::HeaderMap, value: String| {
            let (ctx, store) = (ctx.clone(), store.clone());
            async move {
                let idem = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                tokio::time::sleep(Duration::from_millis(20)).await; // the write takes a while
                let mut store = store.lock().unwrap();
                // The planted bug (dedup = false): a retry of an applied write is applied again.
                if !dedup || store.applied.insert(idem.clone()) {
                    store.values.insert(key.clone(), value.clone());
                    check::effect(&ctx, "write", &idem, format!("{key}={value}"));
                }
                "ok"
            }
        };
    let app = axum::Router::new().route("/kv/{key}", axum::routing::put(put));
    node.set_ready();
    axum::serve(ServeListener(listener), app).with_graceful_shutdown(node.shutdown_signal()).await?;
    Ok(())
}

/// One write from the operation's client host, retried under the same idempotency key until it
/// gets an answer (at most 3 tries of 1 s each).
async fn write(op: OpCtx<()>) -> OpOutcome {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .build::<_, Full<Bytes>>(Connector::new(op.host().clone()));
    let key = ["a", "b"][op.id() as usize % 2];
    let value = op.id().to_string();
    for attempt in 1..=3 {
        op.request(format!("PUT /kv/{key} value={value} attempt={attempt}"));
        let request = axum::http::Request::put(format!("http://kv:8080/kv/{key}"))
            .header("idempotency-key", op.idempotency_key())
            .body(Full::new(Bytes::from(value.clone())))
            .expect("a valid request");
        let sent = tokio::time::timeout(Duration::from_secs(1), async {
            let response = client.request(request).await.map_err(|e| e.to_string())?;
            response.into_body().collect().await.map(|_| ()).map_err(|e| e.to_string())
        });
        if let Ok(Ok(())) = sent.await {
            return OpOutcome::Ok(format!("{key}={value}"));
        }
    }
    OpOutcome::Indeterminate("no answer after 3 tries".into())
}

async fn simulation(ctx: Ctx, dedup: bool) -> Result<(), Failure> {
    let store = Arc::new(Mutex::new(Store::default()));
    let system = System::new(&ctx);
    // Shared state goes into the entry through a closure; each start calls it again.
    let replicas = system.add(
        ServiceSpec::new("kv", move |node| kv(node, store.clone(), dedup))
            .replicas(2..=2)
            .grace(Duration::from_secs(5)),
    );
    system.start().await?;
    // Faults on the replicas' hosts (kv-0, kv-1), not on the service's name: times are fake
    // time since the run started, as for every schedule.
    Nemesis::new(&replicas, Duration::from_secs(1)..Duration::from_secs(8)).schedule(&ctx);
    system.at(Duration::from_secs(4), Lifecycle::Restart { node: replicas[1].clone(), how: Restart::Graceful });
    let workload = Workload::new(()).op(Operation::new("write", 1, write).declares_effect("write"));
    let records =
        workload.run(&ctx, Budget { ops: 20, window: Duration::from_secs(8), drain: Duration::from_secs(10) }).await;
    system.heal().await?;
    // The ledger the service wrote through check::effect: by idempotency key.
    let ledger = ctx.extension::<Effects>();
    ctx.record("ledger", "kv", format!("{} keys took effects", ledger.all().len()));
    check::idempotency(&ctx, &records, "write")?;
    system.stop().await
}
// --- end own service ---

#[test]
fn the_kv_service_that_deduplicates_retries_passes() {
    Simulation::new("own_service_dedup").seeds(0..40).run(|ctx| simulation(ctx, true)).assert_passed();
}

#[test]
fn a_retry_applied_twice_is_caught_and_its_trace_excerpt_shows_the_operation_s_requests() {
    let report = Simulation::new("own_service_no_dedup").seeds(0..40).confirm(0).run(|ctx| simulation(ctx, false));
    let found = report.first_failure().expect("a lost response makes a retry apply twice in some seed");
    let failure = found.failure.as_ref().expect("a failure");
    assert_eq!(failure.oracle.as_deref(), Some("idempotency"), "{failure}");
    assert!(failure.message.contains(" took effect ") && failure.message.contains(" times: "), "{failure}");
    let trace = std::fs::read_to_string(found.trace.as_ref().expect("a failure's trace is written")).expect("readable");
    let lines: Vec<&str> = trace.lines().collect();
    let focus = sim::trace::Focus::of(failure, &lines);
    let excerpt = focus.select(&lines).expect("the failure names operations in the trace");
    let shown = excerpt.lines.join("\n");
    assert!(shown.contains("op.request write#") && shown.contains("attempt=2"), "the retried requests: {shown}");
    assert!(shown.contains("effect.write"), "the effects: {shown}");
    assert!(excerpt.lines.len() <= sim::trace::Focus::LINES_MAX + 1, "bounded");
}

#[test]
fn the_docs_show_this_file_verbatim() {
    let file = include_str!("own_service.rs");
    let begin = "// --- begin own service ---\n";
    let start = file.find(begin).expect("marker") + begin.len();
    let end = file.find("// --- end own service ---").expect("marker");
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/first-simulation.md"))
        .expect("the page exists");
    assert!(page.contains(&file[start..end]), "docs/src/first-simulation.md must contain tests/own_service.rs's code");
}
