//! Determinism canary for kube-rs' own randomness: kube-runtime's watcher backoff
//! (`DefaultBackoff`, backon's jitter from `fastrand::Rng::new()`) drawn inside a simulation gives
//! one history per seed, repeated in this process and in three fresh processes, and different
//! seeds give different histories.
//!
//! `a_controller_against_kubesim_replays_exactly_across_processes` runs the same Controller against
//! kubesim itself, with API-server faults (503 lists, a watch 410) and writes while it runs.

use std::collections::BTreeSet;

use kube::runtime::watcher::DefaultBackoff;
use sim::Simulation;

#[test]
fn watcher_backoff_jitter_replays_exactly_across_processes() {
    let report =
        Simulation::new("kube_backoff_canary").seeds(0..20).repeat(2).repeat_processes(3).run(|ctx| async move {
            // As a watcher does: a fresh backoff per stream, its delays slept in fake time.
            for stream in 0..3 {
                let mut backoff = DefaultBackoff::default();
                for _ in 0..4 {
                    let delay = backoff.next().expect("the default backoff never ends");
                    tokio::time::sleep(delay).await;
                    ctx.record("kube.backoff", &format!("watcher-{stream}"), format!("{delay:?}"));
                }
            }
            Ok(())
        });
    report.assert_passed();
    let hashes: BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert_eq!(hashes.len(), report.outcomes.len(), "different seeds must draw different jitter");
}

/// The known leak, pinned: kube-runtime's reflector `Store` is an `ahash` map whose keys come from
/// a per-process seed and a counter advanced by heap addresses, so `Store::state()` lists the same
/// objects in another order from run to run (and so does `Controller::reconcile_all_on`, which
/// schedules in that order). The self-check reports it; sort `state()` before acting on it.
#[test]
fn reflector_store_state_order_is_reported_as_replay_diverged() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::{reflector, watcher};

    let report = Simulation::new("kube_store_order").seeds(0..3).repeat(2).confirm(0).run(|ctx| async move {
        let (reader, mut writer) = reflector::store::<ConfigMap>();
        for i in 0..8 {
            let meta = ObjectMeta {
                name: Some(format!("cm-{i}")),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            };
            writer.apply_watcher_event(&watcher::Event::Apply(ConfigMap { metadata: meta, ..ConfigMap::default() }));
        }
        let order: Vec<String> = reader.state().iter().filter_map(|cm| cm.metadata.name.clone()).collect();
        ctx.record("kube.store.state", "configmaps", order.join(","));
        let mut sorted = order.clone();
        sorted.sort();
        ctx.record("kube.store.sorted", "configmaps", sorted.join(","));
        Ok(())
    });
    assert_eq!(report.failures().count(), report.outcomes.len(), "{report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("a failed outcome has a failure");
        assert_eq!(failure.class, sim::Class::ReplayDiverged, "{failure}");
        assert!(failure.message.contains("kube.store.state"), "{}", failure.message);
    }
}

/// A stub API server for the Controller canary: lists `objects` ConfigMaps, fails the first
/// `failures` list/watch requests with 500 (so the watcher backs off with jitter), and answers a
/// watch with a stream that stays open for a minute without events.
mod stub {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use bytes::Bytes;
    use http::{Request, Response, StatusCode};
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Full, StreamBody};
    use hyper::body::{Frame, Incoming};
    use hyper_util::rt::{TokioIo, TokioTimer};

    pub struct Stub {
        pub objects: u64,
        pub failures: u64,
        pub served: AtomicU64,
    }

    fn json(code: StatusCode, v: serde_json::Value) -> Response<BoxBody<Bytes, Infallible>> {
        let mut resp = Response::new(Full::new(Bytes::from(v.to_string())).boxed());
        *resp.status_mut() = code;
        resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        resp
    }

    fn list(objects: u64) -> serde_json::Value {
        let items: Vec<_> = (0..objects)
            .map(|i| {
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": format!("cm-{i}"), "namespace": "default", "uid": format!("uid-{i}"),
                    "resourceVersion": (2 + i).to_string()}})
            })
            .collect();
        serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "100"}, "items": items})
    }

    async fn handle(
        stub: Arc<Stub>,
        req: Request<Incoming>,
    ) -> Result<Response<BoxBody<Bytes, Infallible>>, Infallible> {
        let n = stub.served.fetch_add(1, Ordering::SeqCst);
        let watch = req.uri().query().unwrap_or("").contains("watch=true");
        if n < stub.failures {
            let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "etcdserver: request timed out", "reason": "InternalError", "code": 500});
            return Ok(json(StatusCode::INTERNAL_SERVER_ERROR, status));
        }
        if !watch {
            return Ok(json(StatusCode::OK, list(stub.objects)));
        }
        let open = futures::stream::once(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, Infallible>(Frame::data(Bytes::new()))
        });
        let mut resp = Response::new(StreamBody::new(open).boxed());
        resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        Ok(resp)
    }

    pub fn serve(ctx: &sim::Ctx, stub: Arc<Stub>) -> std::io::Result<()> {
        let listener = ctx.net().host("kube-apiserver").listen("6443")?;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let stub = Arc::clone(&stub);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| handle(Arc::clone(&stub), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("{0}")]
    Panic(#[from] kubesim::models::ReconcilePanic),
}

/// A kube-rs `Controller` (watcher with its default jittered backoff, scheduler, runner,
/// reconciles wrapped in the models' guard) against a stub server that fails its first requests:
/// one history per seed in this process and in three fresh processes.
#[test]
fn a_controller_replays_exactly_across_processes() {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::watcher;

    let report =
        Simulation::new("kube_controller_canary").seeds(0..10).repeat(2).repeat_processes(3).run(|ctx| async move {
            let mut draw = ctx.source("canary");
            let objects = draw.range(2..=5);
            let stub = Arc::new(stub::Stub { objects, failures: draw.range(1..=3), served: Default::default() });
            stub::serve(&ctx, stub)?;
            let host = ctx.net().host("operator-0");
            let api: kube::Api<ConfigMap> =
                kube::Api::default_namespaced(kubesim::client::client(&host, "http://kube-apiserver:6443"));
            let guard = kubesim::models::Guard::new();
            let reconcile = guard.wrap(|cm: Arc<ConfigMap>, ctx: Arc<sim::Ctx>| async move {
                ctx.record("kube.reconciled", cm.metadata.name.as_deref().unwrap_or(""), "");
                Ok::<_, ReconcileError>(Action::requeue(Duration::from_secs(7)))
            });
            let error_policy =
                |_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<sim::Ctx>| Action::requeue(Duration::from_secs(1));
            let controller = Controller::new(api, watcher::Config::default())
                .run(reconcile, error_policy, Arc::new(ctx.clone()))
                .for_each(|_| async {});
            tokio::select! {
                biased;
                () = controller => {}
                () = tokio::time::sleep(Duration::from_secs(120)) => {}
            }
            if let Some(failure) = kubesim::models::first_failure(&guard.violations()) {
                return Err(failure);
            }
            // Every object reconciled, then requeued every 7 s: well over one reconcile each.
            let reconciles = ctx.history().entries().filter(|e| e.kind == "kube.reconciled").count() as u64;
            if reconciles < objects * 5 {
                return Err(sim::Failure::correctness(
                    "canary",
                    format!("{reconciles} reconciles of {objects} objects"),
                ));
            }
            Ok(())
        });
    report.assert_passed();
    let hashes: BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert_eq!(hashes.len(), report.outcomes.len(), "different seeds must give different histories");
    for outcome in &report.outcomes {
        assert!(outcome.events > 10, "seed {}: only {} events", outcome.seed, outcome.events);
    }
}

/// The determinism canary against kubesim: a kube-rs `Controller` reconciling ConfigMaps that a
/// writer keeps changing, through 503s on its lists (jittered backoff) and a watch 410 (relist):
/// one history per seed in this process (×2) and in three fresh processes.
#[test]
fn a_controller_against_kubesim_replays_exactly_across_processes() {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams, PostParams};
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::watcher;
    use kubesim::fault::{ApiVerb, Fault};

    let report = Simulation::new("kube_controller_kubesim_canary").seeds(0..10).repeat(2).repeat_processes(3).run(
        |ctx| async move {
            let server = kubesim::server::ApiServer::new();
            let url = server.serve_sim(&ctx)?;
            let mut draw = ctx.source("canary");
            let objects = draw.range(2..=5);
            let fail_for = draw.duration(Duration::from_millis(100)..=Duration::from_secs(3));
            sim::fault::at(ctx.driver(), &server, Duration::ZERO, Fault::error(503).verb(ApiVerb::List))
                .lasting(fail_for);
            sim::fault::at(ctx.driver(), &server, Duration::from_secs(20), Fault::watch_gone())
                .lasting(Duration::from_millis(300));
            let writer: kube::Api<ConfigMap> =
                kube::Api::default_namespaced(kubesim::client::client(&ctx.net().host("writer"), &url));
            for i in 0..objects {
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some(format!("cm-{i}"));
                writer
                    .create(&PostParams::default(), &cm)
                    .await
                    .map_err(|e| sim::Failure::correctness("canary", e.to_string()))?;
            }
            let api: kube::Api<ConfigMap> =
                kube::Api::default_namespaced(kubesim::client::client(&ctx.net().host("operator-0"), &url));
            let guard = kubesim::models::Guard::new();
            let reconcile = guard.wrap(|cm: Arc<ConfigMap>, ctx: Arc<sim::Ctx>| async move {
                ctx.record(
                    "kube.reconciled",
                    cm.metadata.name.as_deref().unwrap_or(""),
                    cm.metadata.resource_version.clone().unwrap_or_default(),
                );
                Ok::<_, ReconcileError>(Action::requeue(Duration::from_secs(7)))
            });
            let error_policy =
                |_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<sim::Ctx>| Action::requeue(Duration::from_secs(1));
            let controller = Controller::new(api, watcher::Config::default())
                .run(reconcile, error_policy, Arc::new(ctx.clone()))
                .for_each(|_| async {});
            let writes = async {
                for round in 0..20u64 {
                    tokio::time::sleep(Duration::from_millis(draw.range(500..=4000))).await;
                    let name = format!("cm-{}", round % objects);
                    let p = serde_json::json!({"data": {"round": round.to_string()}});
                    let _ = writer.patch(&name, &PatchParams::default(), &Patch::Merge(&p)).await;
                }
                tokio::time::sleep(Duration::from_secs(10)).await;
            };
            tokio::select! {
                biased;
                () = controller => {}
                () = writes => {}
            }
            if let Some(failure) = kubesim::models::first_failure(&guard.violations()) {
                return Err(failure);
            }
            let reconciles = ctx.history().entries().filter(|e| e.kind == "kube.reconciled").count() as u64;
            if reconciles < objects * 3 {
                return Err(sim::Failure::correctness(
                    "canary",
                    format!("{reconciles} reconciles of {objects} objects"),
                ));
            }
            Ok(())
        },
    );
    report.assert_passed();
    let hashes: BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert_eq!(hashes.len(), report.outcomes.len(), "different seeds must give different histories");
    println!(
        "kube-rs Controller against kubesim: {} seeds x (2 runs in process + 3 fresh processes): 1 history per seed",
        report.outcomes.len()
    );
}
