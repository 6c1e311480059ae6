//! kube-rs #1524 (present in kube 0.92.0, fixed in 0.92.1).
//!
//! A cache of ConfigMaps across namespaces: a kube-runtime `reflector` over a `watcher` of
//! `Api::all`, with a page size for its initial list (`watcher::Config::page_size`, what a
//! service sets to bound the memory a list takes; kube's default is 500). kube 0.92.0's watcher
//! declared the initial list done as soon as a page carried a resourceVersion — every page does —
//! so it never asked for the pages after the first: the store held the first page's objects and
//! nothing past it, on the first list and on every relist after a 410 Gone. The report: "watcher
//! on 0.92 does not get all objects during Init" (the objects the first page held happened to be
//! one namespace's). 0.92.1 goes on while the list returns a continue token.
//!
//! Written as a user would have written it before the bug was known: the swarm draws the
//! namespaces, the objects and the page size; writes go on while the cache starts; a 410 Gone on
//! the cache's watch (kubesim's `Fault::watch_gone`) makes it relist at a seeded time. The oracle
//! is kubesim's convergence model (`kube-convergence`): after the faults end, the reflector's
//! store holds exactly the ConfigMaps the server holds, each at the server's resourceVersion,
//! within the bound the watcher's backoff allows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kubesim::fault::Fault;
use kubesim::models::{ConvergenceSettings, check_after_heal};
use kubesim::server::ApiServer;
use sim::{Ctx, Failure, Simulation};

fn main() {
    regression::main(Simulation::new("kube-1524"), scenario);
}

fn kube_error(what: &str) -> impl Fn(kube::Error) -> Failure + '_ {
    move |e| Failure::correctness("kube-request", format!("{what}: {e}"))
}

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let namespaces = ctx.swarm().int("namespaces", 1..=4);
    let objects = ctx.swarm().int("objects", 1..=30);
    let page_size = ctx.swarm().int("watcher.page_size", 1..=10) as u32;
    let churn = ctx.swarm().int("churn", 0..=10);
    let gone_at = ctx.swarm().duration("watch_gone_at", Duration::from_millis(100)..=Duration::from_secs(3));

    let api = ApiServer::new();
    let url = api.serve_sim(&ctx)?;
    let admin = kubesim::client::client_as(&ctx.net().host("admin"), &url, "admin");
    let ns_api: Api<Namespace> = Api::all(admin.clone());
    for n in 0..namespaces {
        let ns = Namespace { metadata: named(&format!("team-{n}"), None), ..Default::default() };
        ns_api.create(&PostParams::default(), &ns).await.map_err(kube_error("create namespace"))?;
    }
    // The live objects, as (namespace, number).
    let mut live: Vec<(u64, u64)> = Vec::new();
    for i in 0..objects {
        create(&admin, i % namespaces, i).await?;
        live.push((i % namespaces, i));
    }

    // The cache under test.
    let cache = kubesim::client::client(&ctx.net().host("cache"), &url);
    let (reader, writer) = reflector::store::<ConfigMap>();
    let config = watcher::Config::default().page_size(page_size);
    let stream = reflector(writer, watcher(Api::<ConfigMap>::all(cache), config)).default_backoff();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&errors);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                seen.lock().unwrap().push(e.to_string());
            }
        }
    });

    // Writes while the cache starts, and a 410 Gone on its watch at a seeded time.
    let mut writes = ctx.source("churn");
    for k in 0..churn {
        tokio::time::sleep(writes.duration(Duration::ZERO..=Duration::from_millis(300))).await;
        if !live.is_empty() && writes.range(0..=2) == 0 {
            let (ns, i) = live.swap_remove(writes.range(0..=live.len() as u64 - 1) as usize);
            let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &format!("team-{ns}"));
            cms.delete(&format!("cm-{i}"), &DeleteParams::default()).await.map_err(kube_error("delete"))?;
        } else {
            let i = objects + k;
            create(&admin, i % namespaces, i).await?;
            live.push((i % namespaces, i));
        }
    }
    if ctx.elapsed() < gone_at {
        tokio::time::sleep(gone_at - ctx.elapsed()).await;
    }
    {
        let _gone = api.install(Fault::watch_gone().resource("configmaps"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    create(&admin, 0, objects + churn + 1).await?;

    // The oracle: the store converges to what the server holds.
    let settings = ConvergenceSettings { faults_end: ctx.elapsed(), ..ConvergenceSettings::default() };
    let now = {
        let ctx = ctx.clone();
        move || ctx.elapsed()
    };
    let server = api.clone();
    let cached = reader.clone();
    let converged =
        check_after_heal(&settings, now, "the reflector's store equals the server's ConfigMaps", move || {
            held(&server) == cached.state().iter().map(|cm| key_and_rv(&cm.metadata)).collect()
        })
        .await;
    if let Err(mut failure) = converged {
        let want = held(&api);
        let have: BTreeMap<String, String> = reader.state().iter().map(|cm| key_and_rv(&cm.metadata)).collect();
        let missing: Vec<&String> = want.keys().filter(|k| !have.contains_key(*k)).collect();
        failure.message.push_str(&format!(
            "; page size {page_size}: the server holds {} ConfigMaps, the store {} (missing {missing:?}); watcher errors: {:?}",
            want.len(),
            have.len(),
            errors.lock().unwrap()
        ));
        return Err(failure);
    }
    Ok(())
}

/// `team-<ns>/cm-<i>`.
async fn create(admin: &kube::Client, ns: u64, i: u64) -> Result<(), Failure> {
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &format!("team-{ns}"));
    let cm = ConfigMap {
        metadata: named(&format!("cm-{i}"), Some(&format!("team-{ns}"))),
        data: Some([("n".to_string(), i.to_string())].into()),
        ..Default::default()
    };
    cms.create(&PostParams::default(), &cm).await.map_err(kube_error("create configmap"))?;
    Ok(())
}

fn named(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_string()), namespace: namespace.map(str::to_string), ..Default::default() }
}

fn key_and_rv(meta: &ObjectMeta) -> (String, String) {
    (
        format!("{}/{}", meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or("")),
        meta.resource_version.clone().unwrap_or_default(),
    )
}

/// The server's ConfigMaps: `namespace/name` → resourceVersion.
fn held(api: &ApiServer) -> BTreeMap<String, String> {
    api.list_json("configmaps", None)
        .iter()
        .map(|cm| {
            let meta = &cm["metadata"];
            let text = |k: &str| meta[k].as_str().unwrap_or("").to_string();
            (format!("{}/{}", text("namespace"), text("name")), text("resourceVersion"))
        })
        .collect()
}
