//! Real kube-rs `Api` calls against kubesim: CRUD, optimistic concurrency, generateName,
//! patches, deletes with finalizers, discovery — in a simulation and on loopback.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubesim::server::ApiServer;
use serde_json::json;
use sim::Failure;
use support::fail;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    c.data = Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
    c
}

fn code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        _ => 0,
    }
}

async fn crud(client: Client, api: ApiServer) -> Result<(), Failure> {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = cms.create(&PostParams::default(), &cm("a", &[("k", "1")])).await.map_err(|e| fail("create", e))?;
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    let rv1 = created.resource_version().expect("an rv");
    let again = cms.create(&PostParams::default(), &cm("a", &[])).await.expect_err("exists");
    assert_eq!(code(&again), 409, "{again}");

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "2".to_string())].into());
    let updated = cms.replace("a", &PostParams::default(), &changed).await.map_err(|e| fail("replace", e))?;
    assert!(updated.resource_version().unwrap().parse::<u64>().unwrap() > rv1.parse::<u64>().unwrap());
    // The stale copy (rv1) is refused with the real Conflict.
    let stale = cms.replace("a", &PostParams::default(), &changed).await.expect_err("stale");
    let kube::Error::Api(s) = &stale else { panic!("{stale}") };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(s.message.contains("the object has been modified"), "{}", s.message);

    let mut generated = cm("", &[]);
    generated.metadata.generate_name = Some("gen-".into());
    let g = cms.create(&PostParams::default(), &generated).await.map_err(|e| fail("generateName", e))?;
    assert!(g.name_any().starts_with("gen-") && g.name_any().len() == 9, "{}", g.name_any());

    let list = cms.list(&ListParams::default()).await.map_err(|e| fail("list", e))?;
    assert_eq!(list.items.len(), 2);
    assert_eq!(list.metadata.resource_version.as_deref(), Some(api.rv().to_string().as_str()));

    // Paging.
    let page = cms.list(&ListParams::default().limit(1)).await.map_err(|e| fail("page", e))?;
    assert_eq!(page.items.len(), 1);
    let token = page.metadata.continue_.clone().expect("a continue token");
    let rest = cms.list(&ListParams::default().limit(1).continue_token(&token)).await.map_err(|e| fail("page 2", e))?;
    assert_eq!(rest.items.len(), 1);
    assert_ne!(rest.items[0].name_any(), page.items[0].name_any());

    // Missing namespace.
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let e = elsewhere.create(&PostParams::default(), &cm("x", &[])).await.expect_err("no namespace");
    assert_eq!(code(&e), 404, "{e}");
    let nss: Api<Namespace> = Api::all(client.clone());
    assert!(nss.get("default").await.is_ok());

    // Delete with a finalizer: marked, then gone when the finalizer goes.
    let mut f = cm("fin", &[]);
    f.metadata.finalizers = Some(vec!["example.com/x".into()]);
    cms.create(&PostParams::default(), &f).await.map_err(|e| fail("create fin", e))?;
    let marked = cms.delete("fin", &DeleteParams::default()).await.map_err(|e| fail("delete", e))?;
    assert!(marked.left().is_some_and(|o| o.metadata.deletion_timestamp.is_some()));
    let patch = json!({"metadata": {"finalizers": null}});
    cms.patch("fin", &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| fail("unfinalize", e))?;
    assert_eq!(cms.get_opt("fin").await.map_err(|e| fail("get", e))?.map(|c| c.name_any()), None);
    let gone = cms.delete("a", &DeleteParams::default()).await.map_err(|e| fail("delete a", e))?;
    assert!(gone.right().is_some(), "an immediate delete answers a Status");
    Ok(())
}

async fn patches(client: Client, _api: ApiServer) -> Result<(), Failure> {
    let deps: Api<Deployment> = Api::default_namespaced(client.clone());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "a:1"}, {"name": "side", "image": "s:1"}]}}}
    }))
    .expect("a deployment");
    let d = deps.create(&PostParams::default(), &d).await.map_err(|e| fail("create", e))?;
    assert_eq!(d.metadata.generation, Some(1));
    // Strategic merge: containers merge by name.
    let p = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "a:2"}]}}}});
    let d =
        deps.patch("web", &PatchParams::default(), &Patch::Strategic(&p)).await.map_err(|e| fail("strategic", e))?;
    let containers = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers.clone();
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0].image.as_deref(), Some("a:2"));
    assert_eq!(d.metadata.generation, Some(2));
    // JSON patch with a failing test: 422, nothing changes.
    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/replicas", "value": 5},
        {"op": "replace", "path": "/spec/replicas", "value": 3}
    ]))
    .expect("a json patch");
    let e = deps.patch("web", &PatchParams::default(), &Patch::<()>::Json(jp)).await.expect_err("test fails");
    assert_eq!(code(&e), 422, "{e}");
    // Server-side apply: a different value of a field the creator (an Update manager named by the
    // User-Agent) owns conflicts; the same value shares it; force takes it.
    let apply =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let e = deps
        .patch("web", &PatchParams::apply("a"), &Patch::Apply(&apply))
        .await
        .expect_err("conflict with the creator");
    let kube::Error::Api(s) = &e else { panic!("{e}") };
    assert!(s.message.contains("conflict with \"tester\""), "{}", s.message);
    let same =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1}});
    deps.patch("web", &PatchParams::apply("a"), &Patch::Apply(&same)).await.map_err(|e| fail("apply a", e))?;
    let other =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 4}});
    let e = deps.patch("web", &PatchParams::apply("b"), &Patch::Apply(&other)).await.expect_err("conflict");
    assert_eq!(code(&e), 409, "{e}");
    let d = deps
        .patch("web", &PatchParams::apply("b").force(), &Patch::Apply(&other))
        .await
        .map_err(|e| fail("force", e))?;
    assert_eq!(d.spec.unwrap().replicas, Some(4));
    let managers: Vec<String> =
        d.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|m| m.manager).collect();
    assert!(managers.contains(&"b".to_string()), "{managers:?}");
    Ok(())
}

async fn discovery(client: Client, _api: ApiServer) -> Result<(), Failure> {
    let d = kube::discovery::Discovery::new(client.clone()).run().await.map_err(|e| fail("discovery", e))?;
    let groups: Vec<String> = d.groups().map(|g| g.name().to_string()).collect();
    for g in ["", "apps", "coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io"] {
        assert!(groups.iter().any(|x| x == g), "{g} in {groups:?}");
    }
    let v = client.apiserver_version().await.map_err(|e| fail("version", e))?;
    assert_eq!(v.major, "1");
    Ok(())
}

#[test]
fn crud_in_a_simulation() {
    support::in_sim("kubesim_crud", crud);
}

#[test]
fn crud_on_loopback() {
    support::on_loopback(crud);
}

#[test]
fn patches_in_a_simulation() {
    support::in_sim("kubesim_patches", patches);
}

#[test]
fn discovery_in_a_simulation() {
    support::in_sim("kubesim_discovery", discovery);
}
