use super::*;
use crate::resource::Registry;
use serde_json::json;

fn ty(group: &str, plural: &str) -> ResourceType {
    Registry::builtin().find(group, "v1", plural).unwrap().clone()
}

fn rng() -> impl FnMut() -> u64 {
    let mut n = 7u64;
    move || {
        n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        n >> 11
    }
}

fn create(t: &ResourceType, ns: Option<&str>, obj: Value) -> Result<Value, ApiError> {
    let mut r = rng();
    prepare_create(t, obj, CreateCtx { ns, now: "2026-01-01T00:00:00Z", rng: &mut r })
}

#[test]
fn create_sets_the_system_fields() {
    let cm = ty("", "configmaps");
    let obj =
        create(&cm, Some("default"), json!({"metadata": {"name": "a", "generation": 7}, "data": {"k": "v"}})).unwrap();
    assert_eq!(obj["apiVersion"], "v1");
    assert_eq!(obj["kind"], "ConfigMap");
    assert_eq!(obj["metadata"]["namespace"], "default");
    assert_eq!(obj["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
    assert_eq!(obj["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(obj["metadata"].get("generation").is_none(), "ConfigMaps carry no generation");
    let d = create(
        &ty("apps", "deployments"),
        Some("default"),
        json!({"metadata": {"name": "d"}, "spec": {}, "status": {"replicas": 3}}),
    )
    .unwrap();
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(d["status"], json!({}), "status is reset on create");
}

#[test]
fn generate_name_draws_a_suffix() {
    let cm = ty("", "configmaps");
    let obj = create(&cm, Some("default"), json!({"metadata": {"generateName": "web-"}})).unwrap();
    let name = name_of(&obj);
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    assert!(name[4..].bytes().all(|c| SUFFIX_ALPHABET.contains(&c)));
    let e = create(&cm, Some("default"), json!({"metadata": {}})).unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(e.message, "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required");
}

#[test]
fn create_refuses_bad_bodies() {
    let cm = ty("", "configmaps");
    let rv = create(&cm, Some("default"), json!({"metadata": {"name": "a", "resourceVersion": "5"}})).unwrap_err();
    assert_eq!(rv.code, 500);
    let kind = create(&cm, Some("default"), json!({"kind": "Secret", "metadata": {"name": "a"}})).unwrap_err();
    assert_eq!(kind.code, 400);
    let av = create(&cm, Some("default"), json!({"apiVersion": "apps/v1", "metadata": {"name": "a"}})).unwrap_err();
    assert_eq!(av.code, 400);
    let ns = create(&cm, Some("default"), json!({"metadata": {"name": "a", "namespace": "other"}})).unwrap_err();
    assert_eq!(ns.code, 400);
    let name = create(&cm, Some("default"), json!({"metadata": {"name": "Bad_Name"}})).unwrap_err();
    assert_eq!(name.code, 422);
    assert!(name.message.starts_with(
        "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"
    ));
    let lease =
        create(&ty("coordination.k8s.io", "leases"), Some("default"), json!({"metadata": {"name": "L"}})).unwrap_err();
    assert!(lease.message.starts_with("Lease.coordination.k8s.io \"L\" is invalid"), "{}", lease.message);
    let ns = create(&ty("", "namespaces"), None, json!({"metadata": {"name": "team", "namespace": "x"}})).unwrap();
    assert!(ns["metadata"].get("namespace").is_none());
    assert_eq!(ns["status"]["phase"], "Active");
}

#[test]
fn generation_follows_spec_changes_only() {
    let d = ty("apps", "deployments");
    let old = create(&d, Some("default"), json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}})).unwrap();
    let mut labels = old.clone();
    labels["metadata"]["labels"] = json!({"a": "b"});
    let same = prepare_update(&d, &old, labels, Some("default"), Endpoint::Main).unwrap();
    assert_eq!(same["metadata"]["generation"], 1);
    let mut spec = old.clone();
    spec["spec"]["replicas"] = json!(3);
    spec["status"] = json!({"replicas": 9});
    let bumped = prepare_update(&d, &old, spec, Some("default"), Endpoint::Main).unwrap();
    assert_eq!(bumped["metadata"]["generation"], 2);
    assert_eq!(bumped["status"], json!({}), "the main endpoint keeps the stored status");
}

#[test]
fn status_endpoint_keeps_all_but_status() {
    let d = ty("apps", "deployments");
    let old = create(&d, Some("default"), json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}})).unwrap();
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(5);
    new["metadata"]["labels"] = json!({"x": "y"});
    new["status"] = json!({"readyReplicas": 1});
    new["metadata"]["annotations"] = json!({"note": "x"});
    let out = prepare_update(&d, &old, new, Some("default"), Endpoint::Status).unwrap();
    assert_eq!(out["spec"]["replicas"], 1);
    assert!(out["metadata"].get("labels").is_none(), "Deployment status keeps the labels");
    assert_eq!(out["metadata"]["annotations"]["note"], "x", "but takes other metadata");
    assert_eq!(out["status"], json!({"readyReplicas": 1}));
    assert_eq!(out["metadata"]["generation"], 1);
}

#[test]
fn immutable_fields_and_finalizers() {
    let cm = ty("", "configmaps");
    let old = create(&cm, Some("default"), json!({"metadata": {"name": "a", "finalizers": ["x/y"]}})).unwrap();
    let mut stamp = old.clone();
    stamp["metadata"]["creationTimestamp"] = json!("1999-01-01T00:00:00Z");
    let kept = prepare_update(&cm, &old, stamp, Some("default"), Endpoint::Main).unwrap();
    assert_eq!(kept["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
    let mut del = old.clone();
    del["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:01Z");
    assert_eq!(prepare_update(&cm, &old, del, Some("default"), Endpoint::Main).unwrap_err().code, 422);
    let mut uid = old.clone();
    uid["metadata"]["uid"] = json!("other");
    let e = prepare_update(&cm, &old, uid, Some("default"), Endpoint::Main).unwrap_err();
    assert_eq!(e.code, 409);
    assert!(e.message.contains("Precondition failed: UID in precondition: other"), "{}", e.message);
    let mut renamed = old.clone();
    renamed["metadata"]["name"] = json!("b");
    assert_eq!(prepare_update(&cm, &old, renamed, Some("default"), Endpoint::Main).unwrap_err().code, 400);

    let mut marked = old.clone();
    mark_deleted(&mut marked, "2026-01-01T00:00:02Z", 0, &[]);
    let mut add = marked.clone();
    add["metadata"]["finalizers"] = json!(["x/y", "new/f"]);
    let e = prepare_update(&cm, &marked, add, Some("default"), Endpoint::Main).unwrap_err();
    assert_eq!(e.code, 422);
    assert!(e.message.ends_with("found new finalizers []string{\"new/f\"}"), "{}", e.message);
    let mut removed = marked.clone();
    removed["metadata"]["finalizers"] = json!([]);
    removed["metadata"]["deletionTimestamp"] = Value::Null;
    let out = prepare_update(&cm, &marked, removed, Some("default"), Endpoint::Main).unwrap();
    assert_eq!(out["metadata"]["deletionTimestamp"], "2026-01-01T00:00:02Z", "deletionTimestamp is kept");
    assert!(should_delete(&out));
}

#[test]
fn noop_ignores_rv_and_managed_fields_times() {
    let a = json!({"metadata": {"name": "a", "resourceVersion": "1", "managedFields": [{"manager": "m", "time": "1"}]}, "data": {}});
    let b = json!({"metadata": {"name": "a", "resourceVersion": "2", "managedFields": [{"manager": "m", "time": "2"}]}, "data": {}});
    assert!(is_noop(&a, &b));
    // A new manager's no-op apply adds an entry: the real server commits it.
    let c = json!({"metadata": {"name": "a", "managedFields": [{"manager": "n"}, {"manager": "m"}]}, "data": {}});
    assert!(!is_noop(&a, &c));
    assert!(!is_noop(&a, &json!({"metadata": {"name": "a"}, "data": {"k": "v"}})));
}

#[test]
fn invalid_reads_as_the_real_servers() {
    let lease = ty("coordination.k8s.io", "leases");
    let e = invalid(
        &lease,
        "l",
        &[(
            "FieldValueInvalid",
            "metadata.resourceVersion",
            "Invalid value: 0x0: must be specified for an update".into(),
        )],
    );
    assert_eq!(
        e.message,
        "Lease.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    assert_eq!(e.details["kind"], "Lease");
    assert_eq!(e.details["causes"][0]["field"], "metadata.resourceVersion");
}

#[test]
fn immutable_config_maps_keep_their_data() {
    let cm = ty("", "configmaps");
    let old = create(&cm, Some("default"), json!({"metadata": {"name": "i"}, "data": {"k": "v"}, "immutable": true}))
        .unwrap();
    let mut new = old.clone();
    new["data"]["k"] = json!("w");
    let e = prepare_update(&cm, &old, new, Some("default"), Endpoint::Main).unwrap_err();
    assert_eq!(e.message, "ConfigMap \"i\" is invalid: data: Forbidden: field is immutable when `immutable` is set");
    let mut labels = old.clone();
    labels["metadata"]["labels"] = json!({"a": "b"});
    assert!(prepare_update(&cm, &old, labels, Some("default"), Endpoint::Main).is_ok());
}

#[test]
fn a_custom_resource_of_the_wrong_kind_is_invalid() {
    let mut r = Registry::builtin();
    let crd = json!({"metadata": {"name": "noxus.mygroup.example.com"},
        "spec": {"group": "mygroup.example.com", "scope": "Namespaced", "names": {"plural": "noxus", "kind": "WishIHadChosenNoxu"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true}]}});
    let t = r.add_crd(&crd).unwrap()[0].clone();
    let e = create(&t, Some("ns"), json!({"kind": "SomethingElse", "metadata": {"name": "foo"}})).unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "SomethingElse.mygroup.example.com \"foo\" is invalid: kind: Invalid value: \"SomethingElse\": must be WishIHadChosenNoxu"
    );
    let e = create(&t, Some("ns"), json!({"apiVersion": "mygroup.example.com/v2", "metadata": {"name": "foo"}}))
        .unwrap_err();
    assert_eq!(
        e.message,
        "the API version in the data (mygroup.example.com/v2) does not match the expected API version (mygroup.example.com/v1beta1)"
    );
}

#[test]
fn custom_resource_status_keeps_all_metadata() {
    let mut r = Registry::builtin();
    let crd = json!({"metadata": {"name": "dbs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "dbs", "kind": "Db"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}});
    let t = r.add_crd(&crd).unwrap()[0].clone();
    let old = create(&t, Some("ns"), json!({"metadata": {"name": "d"}, "spec": {"a": 1}})).unwrap();
    let mut new = old.clone();
    new["metadata"]["annotations"] = json!({"note": "x"});
    new["spec"]["a"] = json!(2);
    new["status"] = json!({"ok": true});
    let out = prepare_update(&t, &old, new, Some("ns"), Endpoint::Status).unwrap();
    assert!(out["metadata"].get("annotations").is_none());
    assert_eq!((out["spec"]["a"].clone(), out["status"]["ok"].clone()), (json!(1), json!(true)));
}
