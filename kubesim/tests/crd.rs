//! A CustomResourceDefinition created through kube-rs serves its kind at once: discovery lists
//! it, and a typed `Api` of the derived resource creates, lists, patches `/status` and watches it.
//! The run's history records every write as `kube.write`.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use kubesim::server::ApiServer;
use serde_json::json;
use sim::{Ctx, Failure, Simulation};

fn crd_object() -> Result<CustomResourceDefinition, Failure> {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "databases.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "databases", "singular": "database", "kind": "Database", "shortNames": ["db"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .map_err(fail)
}

fn database(name: &str, ar: &ApiResource) -> DynamicObject {
    DynamicObject::new(name, ar).data(json!({"spec": {"engine": "pg"}}))
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("kube", e.to_string())
}

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("kube", what)) }
}

fn oref(ar: &ApiResource) -> reflector::ObjectRef<DynamicObject> {
    reflector::ObjectRef::new_with("orders", ar.clone()).within("default")
}

async fn crd(ctx: Ctx) -> Result<(), Failure> {
    let api = ApiServer::new();
    let url = api.serve_sim(&ctx)?;
    let client = kubesim::client::client(&ctx.net().host("operator"), &url);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd_object()?).await.map_err(fail)?;
    let discovery = kube::Discovery::new(client.clone()).run().await.map_err(fail)?;
    check(discovery.get("example.com").is_some(), "discovery serves example.com")?;
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Database"), "databases");
    let dbs: Api<DynamicObject> = Api::default_namespaced_with(client, &ar);
    let writer = reflector::store::Writer::new(ar.clone());
    let reader = writer.as_reader();
    let stream =
        reflector(writer, watcher(dbs.clone(), watcher::Config::default())).default_backoff().applied_objects();
    let task = tokio::spawn(async move { stream.for_each(|_| async {}).await });
    dbs.create(&PostParams::default(), &database("orders", &ar)).await.map_err(fail)?;
    let status = json!({"status": {"ready": true}});
    let patched = dbs.patch_status("orders", &PatchParams::default(), &Patch::Merge(&status)).await.map_err(fail)?;
    check(patched.data["status"]["ready"] == true, "status patched")?;
    for _ in 0..50 {
        if reader.get(&oref(&ar)).is_some_and(|d| d.data["status"]["ready"] == true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.abort();
    let seen = reader.get(&oref(&ar));
    check(seen.is_some_and(|d| d.data["status"]["ready"] == true), "the reflector saw the status")?;
    check(dbs.get("orders").await.map_err(fail)?.name_any() == "orders", "get")?;
    let writes = ctx.history().entries().filter(|e| e.kind == "kube.write").count();
    check(writes == api.writes().len() && writes >= 3, format!("each write in the history: {writes}"))
}

#[test]
fn a_crd_serves_its_kind() {
    Simulation::new("kubesim_crd").seeds(0..2).repeat(2).run(crd).assert_passed();
}
