//! Object lifecycle rules: `metadata.generation`, the status subresource, finalizers and
//! deletion, namespaces that terminate, CustomResourceDefinitions and their custom resources,
//! and the discovery documents kube-rs reads.

use std::time::Duration;

use fidelity::runner::{Ctx, Scenario};
use fidelity::scenario;
use serde_json::{Value, json};

use crate::objects;
use crate::support::{Answer, Kube, config_map, deployment, widget_crd};

const MERGE: &str = "application/merge-patch+json";

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(objects::generation_counts_spec_changes_of_a_deployment),
        scenario!(objects::status_subresource_of_a_deployment),
        scenario!(objects::custom_resource_generation_and_status_subresource),
        scenario!(objects::delete_with_a_finalizer_marks_the_object),
        scenario!(objects::removing_the_last_finalizer_deletes_the_object),
        scenario!(objects::create_in_a_terminating_namespace_is_forbidden),
        scenario!(objects::custom_resource_definition_lifecycle),
        scenario!(objects::custom_resources_are_validated_by_the_schema),
        scenario!(objects::discovery_of_the_core_group_and_the_groups),
        scenario!(objects::discovery_of_deployments_and_config_maps),
    ]
}

/// `code gen=… rv=… spec.replicas=… status=…` for a Deployment (or any object: the paths
/// given), or the status line.
fn view(k: &Kube<'_>, a: &Answer, paths: &[&str]) -> String {
    if a.body.get("kind").and_then(Value::as_str) == Some("Status") {
        return a.summary();
    }
    let mut out = vec![
        a.code.to_string(),
        format!("gen={}", a.body.pointer("/metadata/generation").map(Value::to_string).unwrap_or("-".into())),
        format!("rv={}", k.rv(&a.rv())),
    ];
    for p in paths {
        let v = a.body.pointer(p).cloned().unwrap_or(Value::Null);
        out.push(format!("{p}={}", k.object(&v)));
    }
    out.join(" ")
}

const DEPLOYMENT_VIEW: &[&str] = &["/spec/replicas", "/metadata/labels", "/status"];

pub async fn generation_counts_spec_changes_of_a_deployment(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let d = deployment("g", json!([{"name": "app", "image": "app:1"}]));
    let a = k.send("POST", &k.group("apps/v1", "deployments", None), Some(d)).await?;
    k.note("create", view(&k, &a, DEPLOYMENT_VIEW));
    let path = k.group("apps/v1", "deployments", Some("g"));
    let mut d = a.body.clone();
    d["spec"]["replicas"] = json!(3);
    let a = k.send("PUT", &path, Some(d)).await?;
    k.note("update of the spec", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k.patch(&path, MERGE, json!({"metadata": {"labels": {"team": "a"}}})).await?;
    k.note("labels only", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k.patch(&path, MERGE, json!({"metadata": {"annotations": {"n": "1"}}})).await?;
    k.note("annotations only (a Deployment counts them)", view(&k, &a, DEPLOYMENT_VIEW));
    let mut d = a.body.clone();
    d["status"] = json!({"replicas": 3, "observedGeneration": 2});
    let a = k.send("PUT", &format!("{path}/status"), Some(d)).await?;
    k.note("status only", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k
        .patch(
            &path,
            MERGE,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}}),
        )
        .await?;
    k.note("template change", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k.patch(&path, MERGE, json!({"spec": {"replicas": 3}})).await?;
    k.note("the same spec again", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k.patch(&path, MERGE, json!({"metadata": {"generation": 99}})).await?;
    k.note("a client-set generation", view(&k, &a, DEPLOYMENT_VIEW));
    Ok(())
}

pub async fn status_subresource_of_a_deployment(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let d = deployment("s", json!([{"name": "app", "image": "app:1"}]));
    let a = k.send("POST", &k.group("apps/v1", "deployments", None), Some(d)).await?;
    let path = k.group("apps/v1", "deployments", Some("s"));
    let mut d = a.body.clone();
    d["status"] = json!({"replicas": 5});
    let a = k
        .send(
            "POST",
            &k.group("apps/v1", "deployments", None),
            Some({
                let mut n = deployment("s2", json!([{"name": "app", "image": "app:1"}]));
                n["status"] = json!({"replicas": 5});
                n
            }),
        )
        .await?;
    k.note("create with a status: dropped", view(&k, &a, DEPLOYMENT_VIEW));
    d["spec"]["replicas"] = json!(4);
    d["metadata"]["labels"] = json!({"via": "status"});
    let a = k.send("PUT", &format!("{path}/status"), Some(d)).await?;
    k.note("PUT /status with spec, labels and status changed", view(&k, &a, DEPLOYMENT_VIEW));
    let mut d = a.body.clone();
    d["spec"]["replicas"] = json!(2);
    d["status"] = json!({"replicas": 9});
    let a = k.send("PUT", &path, Some(d)).await?;
    k.note("PUT with spec and status changed", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k
        .patch(&format!("{path}/status"), MERGE, json!({"spec": {"replicas": 7}, "status": {"availableReplicas": 1}}))
        .await?;
    k.note("merge patch of /status", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k.patch(&path, MERGE, json!({"status": {"replicas": 0}})).await?;
    k.note("merge patch of the status through the main resource", view(&k, &a, DEPLOYMENT_VIEW));
    let a = k.send("GET", &format!("{path}/status"), None).await?;
    k.note("GET /status", format!("{} kind={}", view(&k, &a, DEPLOYMENT_VIEW), a.body["kind"].as_str().unwrap_or("-")));
    let a = k.patch(&format!("{path}/status"), MERGE, json!({"status": {"replicas": -1}})).await?;
    k.note("an invalid status", k.answer(&a));
    let a = k.send("GET", &format!("{}/status", k.core("configmaps", Some("absent"))), None).await?;
    k.note("/status of a type without one", k.answer(&a));
    Ok(())
}

const WIDGET_VIEW: &[&str] = &["/spec", "/status", "/metadata/labels"];

pub async fn custom_resource_generation_and_status_subresource(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let (crd, group) = widget_crd(ctx, "status");
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let (created, established) = k.create_crd(&crd).await?;
    k.note("create the CRD", format!("{created} {established}"));
    let gv = format!("{group}/v1");
    let w = json!({"apiVersion": gv, "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1},
        "status": {"ready": true}});
    let a = k.send("POST", &k.group(&gv, "widgets", None), Some(w)).await?;
    k.note("create with a status: dropped", view(&k, &a, WIDGET_VIEW));
    let path = k.group(&gv, "widgets", Some("w"));
    let a = k.patch(&path, MERGE, json!({"spec": {"size": 2}})).await?;
    k.note("spec change", view(&k, &a, WIDGET_VIEW));
    let a = k.patch(&path, MERGE, json!({"metadata": {"labels": {"l": "v"}}})).await?;
    k.note("metadata only", view(&k, &a, WIDGET_VIEW));
    let mut w = a.body.clone();
    w["status"] = json!({"ready": true});
    w["spec"]["size"] = json!(5);
    let a = k.send("PUT", &format!("{path}/status"), Some(w)).await?;
    k.note("PUT /status with spec and status changed", view(&k, &a, WIDGET_VIEW));
    let mut w = a.body.clone();
    w["status"] = json!({"ready": false});
    w["spec"]["size"] = json!(6);
    let a = k.send("PUT", &path, Some(w)).await?;
    k.note("PUT with spec and status changed", view(&k, &a, WIDGET_VIEW));
    let a = k.patch(&format!("{path}/status"), MERGE, json!({"status": {"ready": false}})).await?;
    k.note("merge patch of /status", view(&k, &a, WIDGET_VIEW));
    let mut w = a.body.clone();
    w["metadata"].as_object_mut().map(|m| m.remove("resourceVersion"));
    w["spec"]["size"] = json!(7);
    let a = k.send("PUT", &path, Some(w)).await?;
    k.note("PUT without a resourceVersion", k.answer(&a));
    let a = k.delete_crd(&name).await?;
    k.note("delete the CRD", crate::support::deleted_crd(&a));
    k.note("the CRD goes", k.crd_gone(&name).await?);
    let a = k.send("GET", &path, None).await?;
    k.note("the widget after", a.summary());
    Ok(())
}

/// `code deletionTimestamp=… finalizers=… data=…` (or the status line).
fn marked(k: &Kube<'_>, a: &Answer) -> String {
    if a.body.get("kind").and_then(Value::as_str) == Some("Status") {
        return a.summary();
    }
    format!(
        "{} rv={} deletionTimestamp={} grace={} finalizers={} data={}",
        a.code,
        k.rv(&a.rv()),
        a.body.pointer("/metadata/deletionTimestamp").is_some(),
        a.body.pointer("/metadata/deletionGracePeriodSeconds").map(Value::to_string).unwrap_or("-".into()),
        a.body.pointer("/metadata/finalizers").cloned().unwrap_or(Value::Null),
        k.object(&a.body.get("data").cloned().unwrap_or(Value::Null)),
    )
}

pub async fn delete_with_a_finalizer_marks_the_object(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let mut cm = config_map("f", json!({"a": "1"}));
    cm["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let a = k.send("POST", &k.core("configmaps", None), Some(cm)).await?;
    k.note("create with a finalizer", marked(&k, &a));
    let path = k.core("configmaps", Some("f"));
    let a = k.send("DELETE", &path, None).await?;
    k.note("delete", marked(&k, &a));
    let a = k.send("DELETE", &path, None).await?;
    k.note("delete again", marked(&k, &a));
    let a = k.send("GET", &path, None).await?;
    k.note("get", marked(&k, &a));
    let a = k.patch(&path, MERGE, json!({"data": {"a": "2"}})).await?;
    k.note("data change while deleting", marked(&k, &a));
    let a = k.patch(&path, MERGE, json!({"metadata": {"finalizers": ["example.com/keep", "example.com/new"]}})).await?;
    k.note("add a finalizer while deleting", k.answer(&a));
    k.note("add a finalizer: details", k.object(&a.body["details"]));
    let a = k.patch(&path, MERGE, json!({"metadata": {"deletionTimestamp": null}})).await?;
    k.note("clear the deletionTimestamp", marked(&k, &a));
    let a = k.send("GET", &k.core("configmaps", None), None).await?;
    k.note("list", k.list(&a));
    let a = k.patch(&path, MERGE, json!({"metadata": {"finalizers": null}})).await?;
    k.note("remove the finalizer", marked(&k, &a));
    let a = k.send("GET", &path, None).await?;
    k.note("get after", a.summary());
    Ok(())
}

pub async fn removing_the_last_finalizer_deletes_the_object(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let mut cm = config_map("w", json!({}));
    cm["metadata"]["finalizers"] = json!(["example.com/a", "example.com/b"]);
    let a = k.send("POST", &k.core("configmaps", None), Some(cm)).await?;
    let start = a.rv();
    k.note("create with two finalizers", marked(&k, &a));
    let path = k.core("configmaps", Some("w"));
    let a = k.send("DELETE", &path, None).await?;
    k.note("delete", marked(&k, &a));
    let a = k
        .patch(
            &path,
            "application/json-patch+json",
            json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/a"},
            {"op": "remove", "path": "/metadata/finalizers/0"}]),
        )
        .await?;
    k.note("remove one finalizer", marked(&k, &a));
    let mut last = a.body.clone();
    last["metadata"]["finalizers"] = json!([]);
    let a = k.send("PUT", &path, Some(last)).await?;
    k.note("PUT without the last finalizer", marked(&k, &a));
    let events =
        k.watch(&format!("{}?resourceVersion={start}", k.core("configmaps", None)), 4, Duration::from_secs(3)).await?;
    k.note("watch from the create", events.join(" | "));
    let a = k.send("GET", &path, None).await?;
    k.note("get after", a.summary());
    Ok(())
}

/// A Namespace's phase, finalizers and deletionTimestamp.
fn namespace_view(k: &Kube<'_>, a: &Answer) -> String {
    if a.body.get("kind").and_then(Value::as_str) == Some("Status") {
        return a.summary();
    }
    let conditions: Vec<String> = a
        .body
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| format!("{}={}", c["type"].as_str().unwrap_or("-"), c["status"].as_str().unwrap_or("-")))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{} kind={} phase={} spec.finalizers={} deletionTimestamp={} conditions=[{}] labels={} rv={}",
        a.code,
        a.body["kind"].as_str().unwrap_or("-"),
        a.body.pointer("/status/phase").and_then(Value::as_str).unwrap_or("-"),
        a.body.pointer("/spec/finalizers").cloned().unwrap_or(Value::Null),
        a.body.pointer("/metadata/deletionTimestamp").is_some(),
        conditions.join(","),
        a.body.pointer("/metadata/labels").map(|l| k.object(l)).unwrap_or("-".into()),
        k.rv(&a.rv()),
    )
}

pub async fn create_in_a_terminating_namespace_is_forbidden(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let ns_path = format!("/api/v1/namespaces/{}", k.ns);
    let a = k.send("GET", &ns_path, None).await?;
    k.note("a new namespace", namespace_view(&k, &a));
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("before", json!({"a": "1"})))).await?;
    k.note("create before", a.summary());
    let a = k.send("DELETE", &ns_path, None).await?;
    k.note("delete the namespace", namespace_view(&k, &a));
    let a = k.send("GET", &ns_path, None).await?;
    k.note("get it", namespace_view(&k, &a));
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("after", json!({})))).await?;
    k.note("create in it", k.answer(&a));
    k.note("create in it: details", k.object(&a.body["details"]));
    let a = k
        .patch(
            &format!("{}?fieldManager=m", k.core("configmaps", Some("after"))),
            "application/apply-patch+yaml",
            config_map("after", json!({})),
        )
        .await?;
    k.note("create by apply in it", k.answer(&a));
    let a = k.patch(&k.core("configmaps", Some("before")), MERGE, json!({"data": {"a": "2"}})).await?;
    k.note("update in it", a.summary());
    let a = k.send("GET", &k.core("configmaps", None), None).await?;
    k.note("list in it", k.list(&a));
    let a = k.send("DELETE", &k.core("configmaps", Some("before")), None).await?;
    k.note("delete in it", a.summary());
    let a = k.send("DELETE", &ns_path, None).await?;
    k.note("delete the namespace again", namespace_view(&k, &a));
    let a = k.patch(&ns_path, MERGE, json!({"metadata": {"labels": {"l": "v"}}})).await?;
    k.note("label the terminating namespace", namespace_view(&k, &a));
    Ok(())
}

pub async fn custom_resource_definition_lifecycle(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let (crd, group) = widget_crd(ctx, "life");
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let gv = format!("{group}/v1");
    let a = k.send("GET", &k.group(&gv, "widgets", None), None).await?;
    k.note("list before the CRD", a.summary());
    let (created, established) = k.create_crd(&crd).await?;
    k.note("create the CRD", format!("{created} {established}"));
    let a = k.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Some(crd.clone())).await?;
    k.note("create it again", a.summary());
    let w =
        json!({"apiVersion": gv, "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3, "color": "red"}});
    let a = k.send("POST", &k.group(&gv, "widgets", None), Some(w)).await?;
    k.note("create a widget", k.answer(&a));
    let a = k.send("GET", &k.group(&gv, "widgets", Some("w1")), None).await?;
    k.note("get it", k.answer(&a));
    let a = k.send("GET", &k.group(&gv, "widgets", None), None).await?;
    k.note("list", k.list(&a));
    let a = k.send("GET", &k.group(&gv, "widgets", Some("absent")), None).await?;
    k.note("get a missing widget", k.answer(&a));
    let a = k.send("GET", &format!("/apis/{gv}"), None).await?;
    let resources: Vec<String> = a.body["resources"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    format!(
                        "{} kind={} namespaced={} short={} verbs={}",
                        r["name"].as_str().unwrap_or("-"),
                        r["kind"].as_str().unwrap_or("-"),
                        r["namespaced"],
                        r.get("shortNames").cloned().unwrap_or(Value::Null),
                        r["verbs"]
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    k.note("discovery of the group version", format!("{} {}", a.code, resources.join("; ")));
    let a = k.delete_crd(&name).await?;
    k.note("delete the CRD", crate::support::deleted_crd(&a));
    k.note("the CRD goes", k.crd_gone(&name).await?);
    let a = k.send("GET", &k.group(&gv, "widgets", None), None).await?;
    k.note("list after", a.summary());
    Ok(())
}

pub async fn custom_resources_are_validated_by_the_schema(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let (crd, group) = widget_crd(ctx, "schema");
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let gv = format!("{group}/v1");
    let (created, established) = k.create_crd(&crd).await?;
    k.note("create the CRD", format!("{created} {established}"));
    let widget =
        |name: &str, spec: Value| json!({"apiVersion": gv, "kind": "Widget", "metadata": {"name": name}, "spec": spec});
    let path = k.group(&gv, "widgets", None);
    let a = k.send("POST", &path, Some(widget("big", json!({"size": 20})))).await?;
    k.note("size above the maximum", k.answer(&a));
    k.note("above the maximum: details", k.object(&a.body["details"]));
    let a = k.send("POST", &path, Some(widget("typed", json!({"size": "three"})))).await?;
    k.note("size of the wrong type", k.answer(&a));
    let a = k.send("POST", &path, Some(widget("two", json!({"size": 0, "color": 5})))).await?;
    // The real server lists several schema errors in no fixed order (Go map iteration): both
    // sides are shown sorted.
    k.note("two errors", sorted_causes_message(&a));
    let mut causes = a.body["details"]["causes"].as_array().cloned().unwrap_or_default();
    causes.sort_by_key(|c| c["field"].as_str().unwrap_or("").to_string());
    k.note("two errors: causes", k.object(&json!(causes)));
    let a = k.send("POST", &path, Some(widget("extra", json!({"size": 2, "unknown": "x"})))).await?;
    k.note("an unknown field is pruned", format!("{} spec={}", a.code, k.object(&a.body["spec"])));
    let a = k.patch(&format!("{}/extra", path), MERGE, json!({"spec": {"size": 11}})).await?;
    k.note("a patch above the maximum", k.answer(&a));
    let a = k.delete_crd(&name).await?;
    k.note("delete the CRD", crate::support::deleted_crd(&a));
    Ok(())
}

/// The status line of a 422 whose `[a, b]` list of causes is sorted.
fn sorted_causes_message(a: &Answer) -> String {
    let line = a.summary();
    let (Some(open), true) = (line.find(": ["), line.ends_with(']')) else { return line };
    let mut items: Vec<&str> = line[open + 3..line.len() - 1].split(", spec.").collect();
    let first = items.remove(0).to_string();
    let mut all: Vec<String> = vec![first];
    all.extend(items.iter().map(|i| format!("spec.{i}")));
    all.sort();
    format!("{}: [{}]", &line[..open], all.join(", "))
}

/// The groups kubesim serves (the real server serves more): `/apis` is compared on these.
const SERVED_GROUPS: &[&str] = &["apps", "coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io"];

pub async fn discovery_of_the_core_group_and_the_groups(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("GET", "/api", None).await?;
    k.note(
        "/api",
        format!("{} kind={} versions={}", a.code, a.body["kind"].as_str().unwrap_or("-"), a.body["versions"]),
    );
    let a = k.send("GET", "/apis", None).await?;
    let groups = a.body["groups"].as_array().cloned().unwrap_or_default();
    k.note(
        "/apis",
        format!("{} kind={} apiVersion={}", a.code, a.body["kind"].as_str().unwrap_or("-"), a.body["apiVersion"]),
    );
    for g in SERVED_GROUPS {
        let found = groups.iter().find(|x| x["name"] == *g);
        let shown = found.map_or("absent".to_string(), |x| {
            let versions: Vec<&str> = x["versions"]
                .as_array()
                .map(|vs| vs.iter().filter_map(|v| v["groupVersion"].as_str()).collect())
                .unwrap_or_default();
            format!("versions={versions:?} preferred={}", x["preferredVersion"]["groupVersion"].as_str().unwrap_or("-"))
        });
        k.note(format!("/apis {g}"), shown);
    }
    k.note("/apis has no core group", format!("{}", !groups.iter().any(|x| x["name"] == "")));
    let a = k.send("GET", "/apis/apps", None).await?;
    k.note(
        "/apis/apps",
        format!(
            "{} kind={} name={} preferred={}",
            a.code,
            a.body["kind"].as_str().unwrap_or("-"),
            a.body["name"],
            a.body["preferredVersion"]["version"]
        ),
    );
    let a = k.send("GET", "/apis/no.such.group", None).await?;
    k.note("/apis/no.such.group", a.summary());
    let a = k.send("GET", "/apis/apps/v9", None).await?;
    k.note("/apis/apps/v9", a.summary());
    let a = k.send("GET", "/version", None).await?;
    k.note(
        "/version has major, minor, gitVersion",
        format!("{} {}", a.code, ["major", "minor", "gitVersion"].iter().all(|f| a.body[f].is_string())),
    );
    Ok(())
}

/// One resource of an APIResourceList as kube-rs reads it.
fn resource_view(list: &Value, name: &str) -> String {
    let Some(r) = list["resources"].as_array().and_then(|rs| rs.iter().find(|r| r["name"] == name)) else {
        return "absent".into();
    };
    let mut verbs: Vec<&str> =
        r["verbs"].as_array().map(|v| v.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    verbs.sort();
    format!(
        "kind={} namespaced={} singular={} shortNames={} verbs={verbs:?} group={} version={}",
        r["kind"].as_str().unwrap_or("-"),
        r["namespaced"],
        r["singularName"].as_str().unwrap_or("-"),
        r.get("shortNames").cloned().unwrap_or(Value::Null),
        r.get("group").and_then(Value::as_str).unwrap_or("-"),
        r.get("version").and_then(Value::as_str).unwrap_or("-"),
    )
}

pub async fn discovery_of_deployments_and_config_maps(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("GET", "/apis/apps/v1", None).await?;
    k.note(
        "/apis/apps/v1",
        format!("{} kind={} groupVersion={}", a.code, a.body["kind"].as_str().unwrap_or("-"), a.body["groupVersion"]),
    );
    k.note("deployments", resource_view(&a.body, "deployments"));
    k.note("deployments/status", resource_view(&a.body, "deployments/status"));
    let a = k.send("GET", "/api/v1", None).await?;
    k.note(
        "/api/v1",
        format!("{} kind={} groupVersion={}", a.code, a.body["kind"].as_str().unwrap_or("-"), a.body["groupVersion"]),
    );
    for r in ["configmaps", "namespaces", "namespaces/status", "secrets", "pods/status"] {
        k.note(r, resource_view(&a.body, r));
    }
    let a = k.send("GET", "/apis/coordination.k8s.io/v1", None).await?;
    k.note("leases", resource_view(&a.body, "leases"));
    Ok(())
}
