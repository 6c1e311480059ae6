//! Through kube-rs as users call it: typed `Api` calls and the errors they return, `watcher`
//! (list-then-watch and streaming lists), a `Controller`'s reconciles, Leases as leader electors
//! use them, and `Discovery`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fidelity::runner::{Ctx, Scenario};
use fidelity::{Known, scenario};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Discovery, ResourceExt};
use serde_json::json;

use crate::support::Kube;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(self::kube_rs_api_create_get_list_delete),
        scenario!(self::kube_rs_api_errors_carry_the_status),
        scenario!(self::kube_rs_list_pages_with_limit_and_continue),
        scenario!(self::kube_rs_server_side_apply_through_patch_params),
        scenario!(self::kube_rs_watcher_lists_then_watches),
        scenario!(self::kube_rs_watcher_with_streaming_lists),
        scenario!(self::kube_rs_controller_reconciles_every_object_and_each_change),
        scenario!(self::lease_acquire_renew_and_takeover),
        scenario!(self::lease_two_candidates_race_and_one_wins),
        scenario!(
            self::kube_rs_discovery_finds_the_served_groups,
            Some(Known {
                id: "unserved-subresources-are-not-discovered",
                steps: &[
                    "/Namespace subresources",
                    "/Pod subresources",
                    "/Service subresources",
                    "apps/Deployment subresources"
                ]
            })
        ),
    ]
}

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    c.data = Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    c
}

/// A kube-rs error as `code reason: message`, or its display for non-API errors.
fn error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("Api {} {}: {}", s.code, s.reason, s.message),
        other => format!("other: {other}"),
    }
}

fn data(c: &ConfigMap) -> String {
    format!("{}={:?}", c.name_any(), c.data.clone().unwrap_or_default())
}

pub async fn kube_rs_api_create_get_list_delete(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<ConfigMap> = Api::namespaced(k.client.clone(), &k.ns);
    for n in ["b", "a", "c"] {
        let c = api.create(&PostParams::default(), &cm(n, &[("n", n)])).await.map_err(|e| error(&e))?;
        k.note(format!("create {n}"), format!("{} rv {}", data(&c), k.rv(&c.resource_version().unwrap_or_default())));
    }
    let got = api.get("a").await.map_err(|e| error(&e))?;
    k.note("get a", data(&got));
    let opt = api.get_opt("absent").await.map_err(|e| error(&e))?;
    k.note("get_opt absent", format!("{opt:?}"));
    let list = api.list(&ListParams::default()).await.map_err(|e| error(&e))?;
    let names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
    k.note("list", names.join(","));
    let deleted = api.delete("b", &DeleteParams::default()).await.map_err(|e| error(&e))?;
    let status = |s: kube::core::Status| {
        let d = s
            .details
            .map(|d| format!("name={} group={:?} kind={} uid={}", d.name, d.group, d.kind, k.ctx.alias("uid", &d.uid)));
        format!("status {:?} code {} details {}", s.status, s.code, d.unwrap_or_else(|| "-".into()))
    };
    k.note("delete b", deleted.map_left(|c| format!("object {}", c.name_any())).map_right(status).into_inner());
    let list = api.list(&ListParams::default().labels("absent=label")).await.map_err(|e| error(&e))?;
    k.note("list by an absent label", list.items.len().to_string());
    Ok(())
}

pub async fn kube_rs_api_errors_carry_the_status(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<ConfigMap> = Api::namespaced(k.client.clone(), &k.ns);
    let first = api.create(&PostParams::default(), &cm("x", &[])).await.map_err(|e| error(&e))?;
    let again = api.create(&PostParams::default(), &cm("x", &[])).await;
    k.note("create twice", again.err().map(|e| error(&e)).unwrap_or_default());
    let mut stale = first.clone();
    api.replace("x", &PostParams::default(), &cm_with_rv(&first, &[("v", "1")])).await.map_err(|e| error(&e))?;
    stale.data = Some([("v".to_string(), "2".to_string())].into());
    let conflict = api.replace("x", &PostParams::default(), &stale).await;
    k.note("replace with a stale resourceVersion", conflict.err().map(|e| error(&e)).unwrap_or_default());
    let missing = api.get("absent").await;
    k.note("get absent", missing.err().map(|e| error(&e)).unwrap_or_default());
    let other: Api<ConfigMap> = Api::namespaced(k.client.clone(), &format!("{}-absent", k.ns));
    let missing_ns = other.create(&PostParams::default(), &cm("y", &[])).await;
    k.note("create in a missing namespace", missing_ns.err().map(|e| error(&e)).unwrap_or_default());
    Ok(())
}

fn cm_with_rv(base: &ConfigMap, data: &[(&str, &str)]) -> ConfigMap {
    let mut c = cm(&base.name_any(), data);
    c.metadata.resource_version = base.metadata.resource_version.clone();
    c
}

pub async fn kube_rs_list_pages_with_limit_and_continue(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<ConfigMap> = Api::namespaced(k.client.clone(), &k.ns);
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("item-{i}"), &[])).await.map_err(|e| error(&e))?;
    }
    let mut params = ListParams::default().limit(2);
    for page in 1..=4 {
        let list = api.list(&params).await.map_err(|e| error(&e))?;
        let names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
        let token = list.metadata.continue_.clone().filter(|t| !t.is_empty());
        k.note(
            format!("page {page}"),
            format!(
                "[{}] remaining={:?} continue={}",
                names.join(","),
                list.metadata.remaining_item_count,
                token.is_some()
            ),
        );
        match token {
            Some(t) => params = params.continue_token(&t),
            None => break,
        }
    }
    Ok(())
}

pub async fn kube_rs_server_side_apply_through_patch_params(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<ConfigMap> = Api::namespaced(k.client.clone(), &k.ns);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    let c = api.patch("applied", &PatchParams::apply("alpha"), &Patch::Apply(&body)).await.map_err(|e| error(&e))?;
    k.note("apply as alpha", format!("{} managers {}", data(&c), managers(&c)));
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "2"}});
    let conflict = api.patch("applied", &PatchParams::apply("beta"), &Patch::Apply(&other)).await;
    k.note("apply a conflicting value as beta", conflict.err().map(|e| error(&e)).unwrap_or_default());
    let forced = api
        .patch("applied", &PatchParams::apply("beta").force(), &Patch::Apply(&other))
        .await
        .map_err(|e| error(&e))?;
    k.note("force as beta", format!("{} managers {}", data(&forced), managers(&forced)));
    let merged = api
        .patch("applied", &PatchParams::default(), &Patch::Merge(json!({"data": {"b": "x"}})))
        .await
        .map_err(|e| error(&e))?;
    k.note("merge patch", format!("{} managers {}", data(&merged), managers(&merged)));
    Ok(())
}

fn managers(c: &ConfigMap) -> String {
    c.managed_fields()
        .iter()
        .map(|m| format!("{}/{}", m.manager.clone().unwrap_or_default(), m.operation.clone().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads watcher events until `until` holds for the names seen or `within` passes: each as
/// `Init`, `InitApply name`, `InitDone`, `Apply name data`, `Delete name`.
async fn watch_events(
    api: Api<ConfigMap>,
    config: watcher::Config,
    mut act: impl FnMut(usize) -> Option<futures::future::BoxFuture<'static, ()>>,
    count: usize,
    within: Duration,
) -> Vec<String> {
    let mut stream = watcher(api, config).boxed();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while seen.len() < count {
        let Ok(next) = tokio::time::timeout_at(deadline, stream.next()).await else { break };
        let line = match next {
            None => "end".to_string(),
            Some(Err(e)) => format!("error {e}"),
            Some(Ok(watcher::Event::Init)) => "Init".into(),
            Some(Ok(watcher::Event::InitApply(c))) => format!("InitApply {}", c.name_any()),
            Some(Ok(watcher::Event::InitDone)) => "InitDone".into(),
            Some(Ok(watcher::Event::Apply(c))) => format!("Apply {}", data(&c)),
            Some(Ok(watcher::Event::Delete(c))) => format!("Delete {}", c.name_any()),
        };
        seen.push(line);
        if let Some(f) = act(seen.len()) {
            f.await;
        }
    }
    seen
}

/// After the watcher's 4th event (Init, 2 InitApply, InitDone): one create, one update, one
/// delete, each awaited.
fn changes(api: &Api<ConfigMap>) -> impl FnMut(usize) -> Option<futures::future::BoxFuture<'static, ()>> + use<> {
    let api = api.clone();
    move |n| {
        let api = api.clone();
        (n == 4).then(|| -> futures::future::BoxFuture<'static, ()> {
            Box::pin(async move {
                let _ = api.create(&PostParams::default(), &cm("c", &[("v", "1")])).await;
                let _ = api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await;
                let _ = api.delete("b", &DeleteParams::default()).await;
            })
        })
    }
}

pub async fn kube_rs_watcher_lists_then_watches(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<ConfigMap> = Api::namespaced(k.client.clone(), &k.ns);
    for n in ["a", "b"] {
        api.create(&PostParams::default(), &cm(n, &[("v", "1")])).await.map_err(|e| error(&e))?;
    }
    let events = watch_events(api.clone(), watcher::Config::default(), changes(&api), 7, Duration::from_secs(10)).await;
    for (i, e) in events.iter().enumerate() {
        k.note(format!("event {i}"), e);
    }
    Ok(())
}

pub async fn kube_rs_watcher_with_streaming_lists(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<ConfigMap> = Api::namespaced(k.client.clone(), &k.ns);
    for n in ["a", "b"] {
        api.create(&PostParams::default(), &cm(n, &[("v", "1")])).await.map_err(|e| error(&e))?;
    }
    // The real server streams the initial events from its watch cache, which may not have seen
    // the last create yet (it then comes as an Apply after InitDone): let the cache catch up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let config = watcher::Config::default().streaming_lists();
    let events = watch_events(api.clone(), config, changes(&api), 7, Duration::from_secs(10)).await;
    for (i, e) in events.iter().enumerate() {
        k.note(format!("event {i}"), e);
    }
    Ok(())
}

/// The reconciler's error type: it never fails.
#[derive(Debug)]
enum Never {}

impl std::fmt::Display for Never {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

impl std::error::Error for Never {}

/// What the controller reconciled: `name data` per reconcile, in order.
type Reconciled = Arc<Mutex<Vec<String>>>;

async fn reconcile(c: Arc<ConfigMap>, seen: Arc<Reconciled>) -> Result<Action, Never> {
    seen.lock().expect("reconciled lock").push(data(&c));
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &Never, _: Arc<Reconciled>) -> Action {
    Action::await_change()
}

/// Waits until `seen` holds every entry of `want` (in any order) or `within` passes; answers the
/// distinct entries seen, sorted.
async fn reconciled(seen: &Reconciled, want: &[&str], within: Duration) -> String {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let got: BTreeSet<String> = seen.lock().expect("reconciled lock").iter().cloned().collect();
        if want.iter().all(|w| got.contains(*w)) || tokio::time::Instant::now() >= deadline {
            return got.into_iter().collect::<Vec<_>>().join(" ");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn kube_rs_controller_reconciles_every_object_and_each_change(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<ConfigMap> = Api::namespaced(k.client.clone(), &k.ns);
    for n in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(n, &[("v", "1")])).await.map_err(|e| error(&e))?;
    }
    let seen: Reconciled = Arc::default();
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(seen.clone()))
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    let want = ["a={\"v\": \"1\"}", "b={\"v\": \"1\"}", "c={\"v\": \"1\"}"];
    k.note("reconciled at start", reconciled(&seen, &want, Duration::from_secs(10)).await);
    seen.lock().expect("reconciled lock").clear();
    api.patch("b", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await.map_err(|e| error(&e))?;
    k.note("reconciled after b changed", reconciled(&seen, &["b={\"v\": \"2\"}"], Duration::from_secs(10)).await);
    task.abort();
    Ok(())
}

fn micro_time(t: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime {
    let t = t.parse().expect("a fixed RFC 3339 time");
    k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(t)
}

fn lease(holder: &str, transitions: i32, renew: &str) -> Lease {
    let mut l = Lease::default();
    l.metadata.name = Some("leader".into());
    l.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(15),
        acquire_time: Some(micro_time("2026-12-01T10:00:00.000000Z")),
        renew_time: Some(micro_time(renew)),
        lease_transitions: Some(transitions),
        ..Default::default()
    });
    l
}

fn lease_line(k: &Kube<'_>, l: &Lease) -> String {
    let s = l.spec.clone().unwrap_or_default();
    format!(
        "holder={:?} duration={:?} transitions={:?} renew={:?} rv {}",
        s.holder_identity,
        s.lease_duration_seconds,
        s.lease_transitions,
        s.renew_time.map(|t| t.0.to_string()),
        k.rv(&l.resource_version().unwrap_or_default())
    )
}

pub async fn lease_acquire_renew_and_takeover(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<Lease> = Api::namespaced(k.client.clone(), &k.ns);
    // Acquire: create; renew: replace with the current resourceVersion (client-go's
    // resourcelock), takeover: another holder replaces an expired Lease, counting a transition.
    let got = api.create(&PostParams::default(), &lease("pod-a", 0, "2026-12-01T10:00:00.000000Z")).await;
    let got = got.map_err(|e| error(&e))?;
    k.note("acquire", lease_line(&k, &got));
    let mut renew = lease("pod-a", 0, "2026-12-01T10:00:05.123456Z");
    renew.metadata.resource_version = got.metadata.resource_version.clone();
    let renewed = api.replace("leader", &PostParams::default(), &renew).await.map_err(|e| error(&e))?;
    k.note("renew", lease_line(&k, &renewed));
    let mut take = lease("pod-b", 1, "2026-12-01T10:00:30.000000Z");
    take.metadata.resource_version = renewed.metadata.resource_version.clone();
    let taken = api.replace("leader", &PostParams::default(), &take).await.map_err(|e| error(&e))?;
    k.note("takeover", lease_line(&k, &taken));
    let mut late = lease("pod-a", 0, "2026-12-01T10:00:31.000000Z");
    late.metadata.resource_version = renewed.metadata.resource_version.clone();
    let refused = api.replace("leader", &PostParams::default(), &late).await;
    k.note("the old holder renews late", refused.err().map(|e| error(&e)).unwrap_or_default());
    for renew in ["2026-12-01T10:00:31Z", "2026-12-01T10:00:31.5Z"] {
        let body = json!({"metadata": {"name": "bad"}, "spec": {"holderIdentity": "pod-c", "renewTime": renew}});
        let a = k.send("POST", &k.group("coordination.k8s.io/v1", "leases", None), Some(body)).await?;
        k.note(format!("a Lease with renewTime {renew}"), a.summary());
    }
    Ok(())
}

pub async fn lease_two_candidates_race_and_one_wins(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let api: Api<Lease> = Api::namespaced(k.client.clone(), &k.ns);
    let pp = PostParams::default();
    let (la, lb) = (lease("pod-a", 0, "2026-12-01T10:00:00.000000Z"), lease("pod-b", 0, "2026-12-01T10:00:00.000000Z"));
    let (a, b) = tokio::join!(api.create(&pp, &la), api.create(&pp, &lb));
    let outcome = |r: &Result<Lease, kube::Error>| match r {
        Ok(_) => "won".to_string(),
        Err(e) => error(e),
    };
    let mut outcomes = [outcome(&a), outcome(&b)];
    outcomes.sort();
    k.note("two creates at once", outcomes.join(" | "));
    let current = api.get("leader").await.map_err(|e| error(&e))?;
    let rv = current.metadata.resource_version.clone();
    let mut x = lease("pod-x", 1, "2026-12-01T10:01:00.000000Z");
    x.metadata.resource_version = rv.clone();
    let mut y = lease("pod-y", 1, "2026-12-01T10:01:00.000000Z");
    y.metadata.resource_version = rv;
    let (x, y) = tokio::join!(api.replace("leader", &pp, &x), api.replace("leader", &pp, &y));
    let mut outcomes = [outcome(&x), outcome(&y)];
    outcomes.sort();
    k.note("two takeovers from the same resourceVersion", outcomes.join(" | "));
    Ok(())
}

pub async fn kube_rs_discovery_finds_the_served_groups(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let discovery = Discovery::new(k.client.clone()).run().await.map_err(|e| error(&e))?;
    // What kubesim serves; the real server serves more, which is not a difference.
    let wanted = [
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Namespace"),
        ("", "Pod"),
        ("", "Service"),
        ("apps", "Deployment"),
        ("coordination.k8s.io", "Lease"),
        ("events.k8s.io", "Event"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ];
    for (group, kind) in wanted {
        let found = discovery.groups().find(|g| g.name() == group).and_then(|g| {
            g.recommended_resources().into_iter().find(|(r, _)| r.kind == kind).map(|(r, caps)| {
                let mut verbs = caps.operations.clone();
                verbs.sort();
                let subresources: Vec<String> = caps.subresources.iter().map(|(s, _)| s.plural.clone()).collect();
                (
                    format!("{}/{} plural={} scope={:?} verbs={verbs:?}", r.group, r.version, r.plural, caps.scope),
                    format!("{subresources:?}"),
                )
            })
        });
        let (resource, subresources) = found.unwrap_or_else(|| ("not found".into(), "-".into()));
        k.note(format!("{group}/{kind}"), resource);
        k.note(format!("{group}/{kind} subresources"), subresources);
    }
    Ok(())
}
