//! Patches of every content type (JSON merge, JSON patch, strategic merge) and server-side
//! apply: the objects they make, managedFields, and the real server's refusals (codes, reasons,
//! messages, conflict causes).

use fidelity::runner::{Ctx, Scenario};
use fidelity::scenario;
use serde_json::{Value, json};

use crate::patches;
use crate::support::{Kube, config_map, deployment, field_sets, widget_crd};

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(patches::merge_patch_adds_changes_and_removes_keys),
        scenario!(patches::json_patch_operations_and_their_failures),
        scenario!(patches::strategic_merge_patch_merges_containers_by_name),
        scenario!(patches::strategic_merge_patch_of_a_custom_resource_is_refused),
        scenario!(patches::patch_with_an_unknown_content_type_is_unsupported),
        scenario!(patches::patch_of_a_missing_object_and_with_a_stale_resource_version),
        scenario!(patches::apply_creates_and_a_second_manager_conflicts),
        scenario!(patches::apply_with_force_moves_ownership),
        scenario!(patches::apply_removes_a_field_its_manager_no_longer_applies),
        scenario!(patches::apply_without_a_field_manager_is_refused),
    ]
}

/// Only `data` and the managers of an object (what a patch changes), normalized.
fn data_and_managers(k: &Kube<'_>, a: &crate::support::Answer) -> String {
    if a.body.get("kind").and_then(Value::as_str) == Some("Status") {
        return a.summary();
    }
    let mut shown = json!({"data": a.body.get("data").cloned().unwrap_or(Value::Null),
        "metadata": {"managedFields": a.body.pointer("/metadata/managedFields").cloned().unwrap_or(Value::Null),
            "resourceVersion": a.rv()}});
    if a.body.pointer("/metadata/managedFields").is_none() {
        shown["metadata"].as_object_mut().map(|m| m.remove("managedFields"));
    }
    format!("{} {}", a.code, k.object(&shown))
}

pub async fn merge_patch_adds_changes_and_removes_keys(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("m", json!({"a": "1", "b": "2"})))).await?;
    k.note("create", data_and_managers(&k, &a));
    let path = k.core("configmaps", Some("m"));
    let a = k.patch(&path, MERGE, json!({"data": {"c": "3"}})).await?;
    k.note("add a key", data_and_managers(&k, &a));
    let a = k.patch(&path, MERGE, json!({"data": {"a": "one"}, "metadata": {"labels": {"x": "y"}}})).await?;
    k.note("change a key, add a label", k.answer(&a));
    let a = k.patch(&path, MERGE, json!({"data": {"b": null}, "metadata": {"labels": null}})).await?;
    k.note("null removes a key and the labels", k.answer(&a));
    let a = k.patch(&path, MERGE, json!({"data": {"zzz": null}})).await?;
    k.note("null of an absent key", data_and_managers(&k, &a));
    let a = k.patch(&path, MERGE, json!(["not", "an", "object"])).await?;
    k.note("an array as the patch", a.summary());
    let a = k.send_raw_patch(&path, MERGE, "{not json").await?;
    k.note("malformed JSON", a.summary());
    Ok(())
}

pub async fn json_patch_operations_and_their_failures(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("j", json!({"a": "1", "b": "2"})))).await?;
    k.note("create", a.summary());
    let path = k.core("configmaps", Some("j"));
    let ops = json!([
        {"op": "add", "path": "/data/c", "value": "3"},
        {"op": "replace", "path": "/data/a", "value": "one"},
        {"op": "remove", "path": "/data/b"},
        {"op": "add", "path": "/metadata/labels", "value": {"l": "v"}},
    ]);
    let a = k.patch(&path, JSON_PATCH, ops).await?;
    k.note("add, replace, remove", k.answer(&a));
    let a = k
        .patch(
            &path,
            JSON_PATCH,
            json!([{"op": "test", "path": "/data/a", "value": "one"},
        {"op": "replace", "path": "/data/a", "value": "uno"}]),
        )
        .await?;
    k.note("a test that holds", data_and_managers(&k, &a));
    let a = k
        .patch(
            &path,
            JSON_PATCH,
            json!([{"op": "test", "path": "/data/a", "value": "wrong"},
        {"op": "replace", "path": "/data/a", "value": "never"}]),
        )
        .await?;
    k.note("a test that fails", k.answer(&a));
    k.note("a test that fails: details", k.object(&a.body["details"]));
    let a = k.patch(&path, JSON_PATCH, json!([{"op": "remove", "path": "/data/absent"}])).await?;
    k.note("remove of a missing key", k.answer(&a));
    let a = k.patch(&path, JSON_PATCH, json!([{"op": "replace", "path": "/spec/x", "value": 1}])).await?;
    k.note("replace under a missing parent", k.answer(&a));
    let a = k.patch(&path, JSON_PATCH, json!([{"op": "add", "path": "/no/such/path", "value": 1}])).await?;
    k.note("add under a missing parent", k.answer(&a));
    let a = k.patch(&path, JSON_PATCH, json!([{"op": "frobnicate", "path": "/data/a"}])).await?;
    k.note("an unknown operation", k.answer(&a));
    let a = k.patch(&path, JSON_PATCH, json!({"op": "add", "path": "/data/z", "value": "1"})).await?;
    k.note("an object, not a list", k.answer(&a));
    let a = k.send("GET", &path, None).await?;
    k.note("after the failures", data_and_managers(&k, &a));
    Ok(())
}

pub async fn strategic_merge_patch_merges_containers_by_name(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let containers = json!([
        {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
        {"name": "sidecar", "image": "side:1"},
    ]);
    let a = k.send("POST", &k.group("apps/v1", "deployments", None), Some(deployment("d", containers))).await?;
    k.note("create", a.summary());
    let path = k.group("apps/v1", "deployments", Some("d"));
    let containers_of = |a: &crate::support::Answer| -> String {
        if a.code != 200 {
            return a.summary();
        }
        let cs = a.body.pointer("/spec/template/spec/containers").cloned().unwrap_or(Value::Null);
        let shown: Vec<Value> = cs
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| json!({"name": c["name"], "image": c["image"], "env": c.get("env").cloned().unwrap_or(Value::Null)}))
                    .collect()
            })
            .unwrap_or_default();
        format!("200 containers={} generation={}", k.object(&json!(shown)), a.body["metadata"]["generation"])
    };
    let p = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]}]}}}});
    let a = k.patch(&path, STRATEGIC, p).await?;
    k.note("change one container by name (env merged by name)", containers_of(&a));
    let p = json!({"spec": {"template": {"spec": {"containers": [{"name": "extra", "image": "extra:1"}]}}}});
    let a = k.patch(&path, STRATEGIC, p).await?;
    k.note("a new name is added", containers_of(&a));
    let p = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}});
    let a = k.patch(&path, STRATEGIC, p).await?;
    k.note("$patch: delete removes by name", containers_of(&a));
    let p = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "A", "$patch": "delete"}]}]}}}});
    let a = k.patch(&path, STRATEGIC, p).await?;
    k.note("$patch: delete in a nested list", containers_of(&a));
    let p = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}});
    let a = k.patch(&path, STRATEGIC, p).await?;
    k.note("$retainKeys on the strategy", format!("{} strategy={}", a.code, k.object(&a.body["spec"]["strategy"])));
    let p = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": "bogus"}]}}}});
    let a = k.patch(&path, STRATEGIC, p).await?;
    k.note("an unknown $patch directive", a.summary());
    let a = k.patch(&path, STRATEGIC, json!({"metadata": {"labels": {"team": "x"}}})).await?;
    k.note("metadata only: generation unchanged", containers_of(&a));
    Ok(())
}

pub async fn strategic_merge_patch_of_a_custom_resource_is_refused(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let (crd, group) = widget_crd(ctx, "smp");
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let (created, established) = k.create_crd(&crd).await?;
    k.note("create the CRD", format!("{created} {established}"));
    let gv = format!("{group}/v1");
    let w = json!({"apiVersion": gv, "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}});
    let a = k.send("POST", &k.group(&gv, "widgets", None), Some(w)).await?;
    k.note("create a widget", a.summary());
    let path = k.group(&gv, "widgets", Some("w"));
    let a = k.patch(&path, STRATEGIC, json!({"spec": {"size": 3}})).await?;
    k.note("strategic merge patch", k.answer(&a));
    let a = k.patch(&path, MERGE, json!({"spec": {"size": 3}})).await?;
    k.note("merge patch", format!("{} spec={}", a.code, k.object(&a.body["spec"])));
    let a = k.patch(&k.core("configmaps", Some("absent")), STRATEGIC, json!({"data": {"a": "1"}})).await?;
    k.note("strategic merge patch of a missing ConfigMap", k.answer(&a));
    let a = k.delete_crd(&name).await?;
    k.note("delete the CRD", crate::support::deleted_crd(&a));
    k.note("the CRD goes", k.crd_gone(&name).await?);
    Ok(())
}

pub async fn patch_with_an_unknown_content_type_is_unsupported(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("u", json!({"a": "1"})))).await?;
    k.note("create", a.summary());
    let path = k.core("configmaps", Some("u"));
    for ct in ["text/plain", "application/json", "application/yaml"] {
        let a = k.patch(&path, ct, json!({"data": {"a": "2"}})).await?;
        k.note(format!("PATCH as {ct}"), k.answer(&a));
    }
    let a = k.send("GET", &path, None).await?;
    k.note("unchanged", data_and_managers(&k, &a));
    Ok(())
}

pub async fn patch_of_a_missing_object_and_with_a_stale_resource_version(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let missing = k.core("configmaps", Some("absent"));
    let a = k.patch(&missing, MERGE, json!({"data": {"a": "1"}})).await?;
    k.note("merge patch of a missing object", k.answer(&a));
    k.note("details", k.object(&a.body["details"]));
    let a = k.patch(&missing, JSON_PATCH, json!([{"op": "add", "path": "/data/a", "value": "1"}])).await?;
    k.note("JSON patch of a missing object", k.answer(&a));
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("s", json!({"a": "1"})))).await?;
    let old = a.rv();
    let path = k.core("configmaps", Some("s"));
    let a = k.patch(&path, MERGE, json!({"data": {"a": "2"}, "metadata": {"resourceVersion": old}})).await?;
    k.note("patch with the current resourceVersion", data_and_managers(&k, &a));
    let a = k.patch(&path, MERGE, json!({"data": {"a": "3"}, "metadata": {"resourceVersion": old}})).await?;
    k.note("patch with a stale resourceVersion", k.answer(&a));
    k.note("stale: details", k.object(&a.body["details"]));
    let a = k
        .patch(
            &path,
            JSON_PATCH,
            json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": old},
        {"op": "replace", "path": "/data/a", "value": "4"}]),
        )
        .await?;
    k.note("JSON patch setting a stale resourceVersion", k.answer(&a));
    let a = k.patch(&path, MERGE, json!({"metadata": {"resourceVersion": "not-a-number"}})).await?;
    k.note("patch with an unparsable resourceVersion", k.answer(&a));
    Ok(())
}

/// An apply configuration of ConfigMap `name` with `data`.
fn applied(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

pub async fn apply_creates_and_a_second_manager_conflicts(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let path = k.core("configmaps", Some("a"));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("a", json!({"x": "1", "y": "2"}))).await?;
    k.note("create by apply", k.answer(&a));
    k.note("field sets", field_sets(&a.body));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("a", json!({"x": "1", "y": "2"}))).await?;
    k.note("the same apply again", data_and_managers(&k, &a));
    let a = k.patch(&format!("{path}?fieldManager=bob"), APPLY, applied("a", json!({"x": "other", "z": "3"}))).await?;
    k.note("bob changes alice's field", k.answer(&a));
    k.note("conflict details", k.object(&a.body["details"]));
    let a =
        k.patch(&format!("{path}?fieldManager=bob"), APPLY, applied("a", json!({"x": "other", "y": "other"}))).await?;
    k.note("bob changes two of alice's fields", k.answer(&a));
    k.note("two conflicts: causes", k.object(&a.body["details"]["causes"]));
    let a = k.patch(&format!("{path}?fieldManager=bob"), APPLY, applied("a", json!({"x": "1", "z": "3"}))).await?;
    k.note("bob applies alice's value (shared)", data_and_managers(&k, &a));
    k.note("shared: field sets", field_sets(&a.body));
    let a = k
        .patch(&format!("{path}?fieldManager=carol"), APPLY, json!({"kind": "ConfigMap", "metadata": {"name": "a"}}))
        .await?;
    k.note("apply without apiVersion", k.answer(&a));
    let a = k.patch(&format!("{path}?fieldManager=carol"), APPLY, applied("other", json!({}))).await?;
    k.note("apply with another name", k.answer(&a));
    Ok(())
}

pub async fn apply_with_force_moves_ownership(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let path = k.core("configmaps", Some("f"));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("f", json!({"x": "1", "y": "2"}))).await?;
    k.note("alice applies", a.summary());
    let a = k.patch(&format!("{path}?fieldManager=bob&force=true"), APPLY, applied("f", json!({"x": "bob"}))).await?;
    k.note("bob forces x", data_and_managers(&k, &a));
    k.note("field sets after the force", field_sets(&a.body));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("f", json!({"x": "1", "y": "2"}))).await?;
    k.note("alice applies x again", k.answer(&a));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("f", json!({"y": "2"}))).await?;
    k.note("alice applies without x", data_and_managers(&k, &a));
    k.note("field sets", field_sets(&a.body));
    let a = k.patch(&path, MERGE, json!({"data": {"y": "by-update"}})).await?;
    k.note("a merge patch takes y from alice", data_and_managers(&k, &a));
    k.note("field sets after the update", field_sets(&a.body));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("f", json!({"y": "2"}))).await?;
    k.note("alice applies y again", k.answer(&a));
    let a = k.patch(&format!("{path}?fieldManager=x&force=true"), MERGE, json!({"data": {"q": "1"}})).await?;
    k.note("force on a merge patch", a.summary());
    Ok(())
}

pub async fn apply_removes_a_field_its_manager_no_longer_applies(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let path = k.core("configmaps", Some("r"));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("r", json!({"x": "1", "y": "2"}))).await?;
    k.note("alice applies x and y", a.summary());
    let a = k.patch(&format!("{path}?fieldManager=bob"), APPLY, applied("r", json!({"y": "2"}))).await?;
    k.note("bob shares y", data_and_managers(&k, &a));
    let a = k.patch(&format!("{path}?fieldManager=alice"), APPLY, applied("r", json!({}))).await?;
    k.note("alice drops both: x goes, y stays (bob's)", data_and_managers(&k, &a));
    k.note("field sets", field_sets(&a.body));
    let a = k
        .patch(
            &format!("{path}?fieldManager=bob"),
            APPLY,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "r", "labels": {"l": "v"}}}),
        )
        .await?;
    k.note("bob drops y, applies a label", k.answer(&a));
    k.note("field sets after", field_sets(&a.body));
    Ok(())
}

pub async fn apply_without_a_field_manager_is_refused(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let path = k.core("configmaps", Some("n"));
    let a = k.patch(&path, APPLY, applied("n", json!({"x": "1"}))).await?;
    k.note("apply without fieldManager", k.answer(&a));
    k.note("details", k.object(&a.body["details"]));
    let a = k.patch(&format!("{path}?fieldManager="), APPLY, applied("n", json!({"x": "1"}))).await?;
    k.note("apply with an empty fieldManager", k.answer(&a));
    let a = k.patch(&format!("{path}?fieldManager=m"), APPLY, json!("just a string")).await?;
    k.note("apply of a string", k.answer(&a));
    let a = k.send("GET", &path, None).await?;
    k.note("nothing was created", k.answer(&a));
    Ok(())
}
