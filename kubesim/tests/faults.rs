//! API-server faults with kube-rs in a simulation: 429 with Retry-After, 504, stale reads, a
//! watch 410 and a restart that a reflector recovers from, a delayed and a cut watch; each
//! recorded as `kube.fault`.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use kubesim::fault::{ApiVerb, Fault, Restart};
use kubesim::server::ApiServer;
use sim::{Ctx, Failure, Simulation};

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("kube", e.to_string())
}

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("kube", what)) }
}

fn code(r: Result<impl std::fmt::Debug, kube::Error>) -> u16 {
    match r {
        Err(kube::Error::Api(s)) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str, v: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
        data: Some(BTreeMap::from([("k".to_string(), v.to_string())])),
        ..Default::default()
    }
}

fn setup(ctx: &Ctx, api: &ApiServer) -> Result<Client, Failure> {
    let url = api.serve_sim(ctx)?;
    Ok(kubesim::client::client(&ctx.net().host("app"), &url))
}

async fn request_faults(ctx: Ctx) -> Result<(), Failure> {
    let api = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(setup(&ctx, &api)?);
    let pp = PostParams::default();
    let throttle = Fault::throttle(2).verb(ApiVerb::List).resource("configmaps");
    let guard = sim::fault::install(&api, throttle);
    check(code(cms.list(&ListParams::default()).await) == 429, "throttled list")?;
    guard.release();
    cms.list(&ListParams::default()).await.map_err(fail)?;
    let guard = sim::fault::install(&api, Fault::error(504).verb(ApiVerb::Create));
    check(code(cms.create(&pp, &cm("a", "1")).await) == 504, "504 on create")?;
    drop(guard);
    let a = cms.create(&pp, &cm("a", "1")).await.map_err(fail)?;
    let mut b = a.clone();
    b.data = Some(BTreeMap::from([("k".to_string(), "2".to_string())]));
    cms.replace("a", &pp, &b).await.map_err(fail)?;
    let guard = sim::fault::install(&api, Fault::stale_reads(1).name("a"));
    let stale = cms.get("a").await.map_err(fail)?;
    check(stale.data == a.data, format!("a stale read serves the old value: {:?}", stale.data))?;
    drop(guard);
    check(cms.get("a").await.map_err(fail)?.data == b.data, "fresh again")?;
    let faults = ctx.history().entries().filter(|e| e.kind == "kube.fault").count();
    check(faults >= 9, format!("installs, hits and releases recorded: {faults}"))
}

#[test]
fn throttle_fail_and_stale_reads() {
    Simulation::new("kubesim_request_faults").seeds(0..2).run(request_faults).assert_passed();
}

async fn watch_faults(ctx: Ctx) -> Result<(), Failure> {
    let api = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(setup(&ctx, &api)?);
    let (reader, writer) = reflector::store();
    let stream =
        reflector(writer, watcher(cms.clone(), watcher::Config::default())).default_backoff().applied_objects();
    let task = tokio::spawn(async move { stream.for_each(|_| async {}).await });
    reader.wait_until_ready().await.map_err(fail)?;
    let gone = sim::fault::install(&api, Fault::watch_gone());
    cms.create(&PostParams::default(), &cm("x", "1")).await.map_err(fail)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(gone);
    sim::fault::install(&api, Restart { down: Duration::from_secs(1) }).forever();
    // Down: connections are refused (the client sees a transport error, not an answer).
    check(matches!(cms.get("x").await, Err(e) if !matches!(e, kube::Error::Api(_))), "down while restarting")?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cms.create(&PostParams::default(), &cm("y", "1")).await.map_err(fail)?;
    for _ in 0..200 {
        if reader.state().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    task.abort();
    check(reader.state().len() == 2, format!("the reflector recovered: {}", reader.state().len()))
}

#[test]
fn a_reflector_recovers_from_410_and_a_restart() {
    Simulation::new("kubesim_watch_faults").seeds(0..2).run(watch_faults).assert_passed();
}

async fn cut_and_delay(ctx: Ctx) -> Result<(), Failure> {
    use futures::TryStreamExt;
    use kube::api::WatchParams;
    let api = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(setup(&ctx, &api)?);
    let a = cms.create(&PostParams::default(), &cm("a", "1")).await.map_err(fail)?;
    let rv = a.metadata.resource_version.clone().unwrap_or_default();
    let delay = sim::fault::install(&api, Fault::delay_watch(Duration::from_secs(3)).user_agent("app"));
    let mut stream = cms.watch(&WatchParams::default(), &rv).await.map_err(fail)?.boxed();
    let sent = ctx.elapsed();
    cms.create(&PostParams::default(), &cm("b", "1")).await.map_err(fail)?;
    stream.try_next().await.map_err(fail)?;
    check(ctx.elapsed() - sent >= Duration::from_secs(3), "the event came 3 s late")?;
    drop(delay);
    let cut = sim::fault::install(&api, Fault::watch_cut(false));
    let rest: Vec<_> = stream.collect().await;
    check(rest.iter().all(Result::is_err), format!("the cut stream ended without more events: {rest:?}"))?;
    drop(cut);
    check(api.watchers().is_empty(), "no watcher left")
}

#[test]
fn a_watch_is_delayed_and_cut() {
    Simulation::new("kubesim_watch_cut").seeds(0..2).run(cut_and_delay).assert_passed();
}
