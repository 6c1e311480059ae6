use super::*;
use crate::patch::managed::record_write;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-01T00:00:01Z";

fn deploy(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}, "spec": spec})
}

fn ssa(live: Option<&Value>, cfg: &Value, mgr: &str, force: bool) -> Result<Value, ApiError> {
    server_side_apply(live, cfg, "Deployment", mgr, force, T1, None)
}

fn owners(obj: &Value) -> Vec<(String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["manager"].as_str().unwrap().to_string(), e["fieldsV1"].clone()))
        .collect()
}

#[test]
fn apply_creates_and_owns_the_configuration() {
    let cfg = deploy(json!({"replicas": 2}));
    let out = ssa(None, &cfg, "a", false).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    assert_eq!(out["metadata"]["name"], "d");
    assert_eq!(
        out["metadata"]["managedFields"],
        json!([{"manager": "a", "operation": "Apply",
        "apiVersion": "apps/v1", "time": T1, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}])
    );
}

#[test]
fn a_different_value_conflicts_with_the_owner_and_force_takes_it() {
    let live = ssa(None, &deploy(json!({"replicas": 2})), "a", false).unwrap();
    let e = ssa(Some(&live), &deploy(json!({"replicas": 3})), "b", false).unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
    assert_eq!(e.message, "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas");
    assert_eq!(
        e.details,
        json!({"causes": [{"reason": "FieldManagerConflict",
        "message": "conflict with \"a\"", "field": ".spec.replicas"}]})
    );

    let out = ssa(Some(&live), &deploy(json!({"replicas": 3})), "b", true).unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
    assert_eq!(owners(&out), vec![("b".to_string(), json!({"f:spec": {"f:replicas": {}}}))]);
}

#[test]
fn the_same_value_shares_ownership() {
    let live = ssa(None, &deploy(json!({"replicas": 2})), "a", false).unwrap();
    let out = ssa(Some(&live), &deploy(json!({"replicas": 2, "paused": true})), "b", false).unwrap();
    let o = owners(&out);
    assert_eq!(o.len(), 2);
    assert_eq!(o[1].1, json!({"f:spec": {"f:paused": {}, "f:replicas": {}}}));
    // a drops replicas: b still owns it, so it stays.
    let out = ssa(Some(&out), &deploy(json!({"minReadySeconds": 1})), "a", false).unwrap();
    assert_eq!(out["spec"], json!({"replicas": 2, "paused": true, "minReadySeconds": 1}));
}

#[test]
fn a_field_no_longer_applied_is_removed() {
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"x": "1"}},
        "data": {"a": "1", "b": "2"}});
    let live = server_side_apply(None, &cfg, "ConfigMap", "a", false, T0, None).unwrap();
    let cfg2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let out = server_side_apply(Some(&live), &cfg2, "ConfigMap", "a", false, T1, None).unwrap();
    assert_eq!(out["data"], json!({"a": "1"}));
    assert!(out["metadata"].get("labels").is_none(), "{out}");
    assert_eq!(owners(&out), vec![("a".to_string(), json!({"f:data": {"f:a": {}}}))]);
}

#[test]
fn an_updater_conflicts_with_using_and_keeps_what_it_shares() {
    let mut live = deploy(json!({"replicas": 1}));
    record_write(None, &mut live, "kubectl-edit", "Update", T0, None);
    let e = ssa(Some(&live), &deploy(json!({"replicas": 5})), "a", false).unwrap_err();
    assert_eq!(e.message, "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas");
    let out = ssa(Some(&live), &deploy(json!({"replicas": 1})), "a", false).unwrap();
    assert_eq!(owners(&out).len(), 2);
}

#[test]
fn containers_merge_by_name_and_an_unapplied_one_goes() {
    let two = deploy(json!({"template": {"spec": {"containers": [
        {"name": "app", "image": "app:1"}, {"name": "side", "image": "side:1"}]}}}));
    let live = ssa(None, &two, "a", false).unwrap();
    let mut other = live.clone();
    other["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
    record_write(Some(&live), &mut other, "vpa", "Update", T1, None);
    let one = deploy(json!({"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}));
    let out = ssa(Some(&other), &one, "a", false).unwrap();
    let cs = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(cs, &json!([{"name": "app", "image": "app:2", "resources": {"limits": {"cpu": "1"}}}]));
    let fv = &owners(&out)[0].1;
    assert_eq!(
        fv["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"],
        json!({".": {}, "f:image": {}, "f:name": {}})
    );
}

#[test]
fn image_conflicts_print_the_keyed_path_and_several_conflicts_are_grouped() {
    let cfg = deploy(json!({"replicas": 1, "template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}}));
    let live = ssa(None, &cfg, "a", false).unwrap();
    let cfg2 =
        deploy(json!({"replicas": 2, "template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}));
    let e = ssa(Some(&live), &cfg2, "b", false).unwrap_err();
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"app\"].image"
    );
    assert_eq!(e.details["causes"][1]["field"], ".spec.template.spec.containers[name=\"app\"].image");
}

#[test]
fn finalizers_are_a_set_and_bad_configurations_are_400() {
    let cfg = json!({"apiVersion": "x/v1", "kind": "Database", "metadata": {"name": "db", "finalizers": ["f"]}});
    let live = server_side_apply(None, &cfg, "Database", "op", false, T0, None).unwrap();
    let mut other = live.clone();
    other["metadata"]["finalizers"] = json!(["f", "g"]);
    record_write(Some(&live), &mut other, "u", "Update", T1, None);
    let cfg2 = json!({"apiVersion": "x/v1", "kind": "Database", "metadata": {"name": "db"}});
    let out = server_side_apply(Some(&other), &cfg2, "Database", "op", false, T1, None).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["g"]));
    let bad = json!({"metadata": {"managedFields": []}});
    assert_eq!(ssa(None, &bad, "a", false).unwrap_err().code, 400);
    assert_eq!(ssa(None, &json!([1]), "a", false).unwrap_err().code, 400);
}

#[test]
fn a_no_op_apply_keeps_the_time_and_a_status_apply_is_marked() {
    let cfg = deploy(json!({"replicas": 2}));
    let live = server_side_apply(None, &cfg, "Deployment", "a", false, T0, None).unwrap();
    let again = ssa(Some(&live), &cfg, "a", false).unwrap();
    assert_eq!(again, live);
    let st =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "status": {"replicas": 2}});
    let out = server_side_apply(Some(&live), &st, "Deployment", "ctl", false, T1, Some("status")).unwrap();
    assert_eq!(out["metadata"]["managedFields"][1]["subresource"], "status");
    assert_eq!(out["spec"]["replicas"], 2);
}

#[test]
fn an_unmanaged_object_is_owned_before_the_first_apply() {
    let live = deploy(json!({"replicas": 1, "paused": false}));
    let e = ssa(Some(&live), &deploy(json!({"replicas": 3})), "a", false).unwrap_err();
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1: .spec.replicas"
    );
    let out = ssa(Some(&live), &deploy(json!({"replicas": 3})), "a", true).unwrap();
    let o = owners(&out);
    assert_eq!(o[0], ("a".to_string(), json!({"f:spec": {"f:replicas": {}}})));
    assert_eq!(o[1], (BEFORE_FIRST_APPLY.to_string(), json!({"f:spec": {"f:paused": {}}})));
}
