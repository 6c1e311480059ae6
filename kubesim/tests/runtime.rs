//! kube-runtime against kubesim in a simulation: `Api::watch` (events, 410 on a compacted
//! resourceVersion), `watcher` + `reflector` (the store fills, survives a 410 fault and a watch
//! cut), a `Controller` reconciling ConfigMaps, and the finalizer helper (add, cleanup, remove).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use kubesim::fault::Fault;
use kubesim::server::ApiServer;
use serde_json::json;
use sim::Failure;
use support::fail;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    c
}

async fn watch_from_rv(client: Client, api: ApiServer) -> Result<(), Failure> {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let rv = api.rv().to_string();
    cms.create(&PostParams::default(), &cm("a")).await.map_err(|e| fail("create", e))?;
    let mut events = cms.watch(&WatchParams::default().timeout(10), &rv).await.map_err(|e| fail("watch", e))?.boxed();
    let first = events.try_next().await.map_err(|e| fail("event", e))?;
    assert!(matches!(first, Some(WatchEvent::Added(ref c)) if c.name_any() == "a"), "{first:?}");
    let p = json!({"data": {"x": "1"}});
    cms.patch("a", &PatchParams::default(), &Patch::Merge(&p)).await.map_err(|e| fail("patch", e))?;
    let second = events.try_next().await.map_err(|e| fail("event", e))?;
    assert!(matches!(second, Some(WatchEvent::Modified(_))), "{second:?}");
    // The 410 fault: the watch ends with an ERROR event carrying 410.
    let guard = api.install(Fault::watch_gone());
    let third = events.try_next().await.map_err(|e| fail("event", e))?;
    assert!(matches!(third, Some(WatchEvent::Error(ref e)) if e.code == 410), "{third:?}");
    drop(guard);
    Ok(())
}

async fn reflector_fills(client: Client, api: ApiServer) -> Result<(), Failure> {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for n in ["a", "b"] {
        cms.create(&PostParams::default(), &cm(n)).await.map_err(|e| fail("create", e))?;
    }
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.map_err(|e| fail("ready", e))?;
    assert_eq!(reader.state().len(), 2);
    // Faults the watcher must survive: a 410 (relist) and a cut stream (rewatch).
    let gone = api.install(Fault::watch_gone());
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(gone);
    cms.create(&PostParams::default(), &cm("c")).await.map_err(|e| fail("create c", e))?;
    let cut = api.install(Fault::watch_cut(false));
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(cut);
    cms.delete("a", &DeleteParams::default()).await.map_err(|e| fail("delete a", e))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut names: Vec<String> = reader.state().iter().map(|c| c.name_any()).collect();
        names.sort();
        if names == ["b", "c"] {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(fail("reflector", format!("never converged: {names:?}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.abort();
    Ok(())
}

#[derive(Debug)]
struct E(String);
impl std::fmt::Display for E {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for E {}

struct Ctx {
    client: Client,
    cleanups: Mutex<Vec<String>>,
}

async fn reconcile(obj: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::runtime::finalizer::Error<E>> {
    let cms: Api<ConfigMap> = Api::default_namespaced(ctx.client.clone());
    finalizer(&cms, "example.com/cleanup", obj, |event| async {
        match event {
            Event::Apply(c) => {
                if c.data.as_ref().is_none_or(|d| !d.contains_key("seen")) {
                    let p = json!({"data": {"seen": "yes"}});
                    cms.patch(&c.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                        .await
                        .map_err(|e| E(e.to_string()))?;
                }
                Ok(Action::await_change())
            }
            Event::Cleanup(c) => {
                ctx.cleanups.lock().expect("not poisoned").push(c.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
}

async fn controller_with_finalizer(client: Client, api: ApiServer) -> Result<(), Failure> {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Ctx { client: client.clone(), cleanups: Mutex::new(Vec::new()) });
    let controller = Controller::new(cms.clone(), watcher::Config::default())
        .run(reconcile, |_, _, _| Action::requeue(Duration::from_secs(1)), Arc::clone(&ctx))
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    cms.create(&PostParams::default(), &cm("x")).await.map_err(|e| fail("create", e))?;
    let until = |pred: Box<dyn Fn(Option<ConfigMap>) -> bool>| {
        let cms = cms.clone();
        async move {
            for _ in 0..600 {
                if pred(cms.get_opt("x").await.map_err(|e| fail("get", e))?) {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(fail("controller", "no progress in 60 s"))
        }
    };
    until(Box::new(|c| {
        c.is_some_and(|c| {
            c.finalizers().iter().any(|f| f == "example.com/cleanup") && c.data.is_some_and(|d| d.contains_key("seen"))
        })
    }))
    .await?;
    cms.delete("x", &DeleteParams::default()).await.map_err(|e| fail("delete", e))?;
    until(Box::new(|c| c.is_none())).await?;
    assert_eq!(*ctx.cleanups.lock().expect("not poisoned"), vec!["x".to_string()], "cleanup ran once");
    let verbs: Vec<&str> = api.writes().iter().map(|w| w.verb.name()).collect();
    assert!(verbs.contains(&"delete-marked") && verbs.contains(&"deleted"), "{verbs:?}");
    task.abort();
    Ok(())
}

#[test]
fn a_watch_streams_changes_and_ends_with_410_on_the_fault() {
    support::in_sim("kubesim_watch", watch_from_rv);
}

#[test]
fn a_reflector_fills_and_survives_410_and_cut_streams() {
    support::in_sim("kubesim_reflector", reflector_fills);
}

#[test]
fn a_controller_reconciles_through_the_finalizer_helper() {
    support::in_sim("kubesim_controller", controller_with_finalizer);
}

#[test]
fn a_controller_reconciles_on_loopback() {
    support::on_loopback(controller_with_finalizer);
}
