//! The store's rules, one test each (writes and metadata here; lists and watches in
//! `tests_read.rs`).

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::introspect::Verb;
use crate::patch::Patch;
use crate::resource::ResourceType;
use crate::status::ApiError;
use crate::store::{DeleteOptions, Deleted, EventKind, Store, StoreConfig, Subresource, WatchOptions, WriteCtx};

/// A store with a deterministic rng and a settable clock.
pub struct H {
    pub s: Store,
    seed: u64,
    pub secs: u64,
    pub actor: &'static str,
    pub manager: Option<&'static str>,
    pub dry_run: bool,
}

impl H {
    pub fn new() -> H {
        H::with_config(StoreConfig::default())
    }

    pub fn with_config(config: StoreConfig) -> H {
        H { s: Store::new(config), seed: 1, secs: 1000, actor: "test", manager: None, dry_run: false }
    }

    pub fn ty(&self, group: &str, plural: &str) -> ResourceType {
        self.s.registry().find(group, "v1", plural).unwrap_or_else(|| panic!("{group}/{plural}")).clone()
    }

    pub fn with<R>(&mut self, f: impl FnOnce(&mut Store, &mut WriteCtx<'_>) -> R) -> R {
        let mut seed = self.seed;
        self.seed += 1;
        let mut rng = move || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            seed >> 7
        };
        let mut w = WriteCtx {
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + self.secs),
            at: Duration::from_secs(self.secs),
            actor: self.actor,
            field_manager: self.manager,
            dry_run: self.dry_run,
            rng: &mut rng,
        };
        f(&mut self.s, &mut w)
    }

    pub fn create(&mut self, group: &str, plural: &str, ns: Option<&str>, obj: Value) -> Result<Value, ApiError> {
        let ty = self.ty(group, plural);
        self.with(|s, w| s.create(&ty, ns, obj, w))
    }

    pub fn cm(&mut self, name: &str, labels: Value) -> Value {
        self.create(
            "",
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
        )
        .unwrap()
    }

    pub fn update(&mut self, group: &str, plural: &str, obj: Value, sub: Subresource) -> Result<Value, ApiError> {
        let ty = self.ty(group, plural);
        let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        self.with(|s, w| s.update(&ty, ns.as_deref(), &name, obj, sub, w))
    }

    pub fn delete(
        &mut self,
        group: &str,
        plural: &str,
        ns: Option<&str>,
        name: &str,
        opts: DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let ty = self.ty(group, plural);
        self.with(|s, w| s.delete(&ty, ns, name, &opts, w))
    }

    pub fn get(&self, group: &str, plural: &str, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.s.get(&self.ty(group, plural), ns, name)
    }

    pub fn rv_of(obj: &Value) -> u64 {
        obj["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
    }
}

#[test]
fn the_store_boots_with_four_namespaces() {
    let mut h = H::new();
    assert_eq!(h.s.rv(), 4);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let n = h.get("", "namespaces", None, ns).unwrap();
        assert_eq!(n["status"]["phase"], "Active");
        assert_eq!(n["kind"], "Namespace");
    }
    assert!(h.s.writes().is_empty());
    let cm = h.cm("a", json!({}));
    assert_eq!(cm["metadata"]["resourceVersion"], "5");
    assert_eq!(cm["metadata"]["creationTimestamp"], "2023-11-14T22:30:00Z");
}

#[test]
fn create_needs_a_namespace_and_a_free_name() {
    let mut h = H::new();
    let e = h.create("", "configmaps", Some("nope"), json!({"metadata": {"name": "a"}})).unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (404, "namespaces \"nope\" not found"));
    h.cm("a", json!({}));
    let e = h.create("", "configmaps", Some("default"), json!({"metadata": {"name": "a"}})).unwrap_err();
    assert_eq!((e.code, e.reason, e.message.as_str()), (409, "AlreadyExists", "configmaps \"a\" already exists"));
    let ns = h.create("", "namespaces", None, json!({"metadata": {"name": "team"}})).unwrap();
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    h.create("", "configmaps", Some("team"), json!({"metadata": {"name": "a"}})).unwrap();
    let g1 = h.create("", "configmaps", Some("team"), json!({"metadata": {"generateName": "x-"}})).unwrap();
    let g2 = h.create("", "configmaps", Some("team"), json!({"metadata": {"generateName": "x-"}})).unwrap();
    assert_ne!(g1["metadata"]["name"], g2["metadata"]["name"]);
    assert_ne!(g1["metadata"]["uid"], g2["metadata"]["uid"]);
}

#[test]
fn a_stale_update_is_a_conflict() {
    let mut h = H::new();
    let cm = h.cm("a", json!({}));
    let mut v2 = cm.clone();
    v2["data"]["k"] = json!("v2");
    let out = h.update("", "configmaps", v2, Subresource::Main).unwrap();
    assert_eq!(H::rv_of(&out), H::rv_of(&cm) + 1);
    let mut stale = cm.clone();
    stale["data"]["k"] = json!("v3");
    let e = h.update("", "configmaps", stale.clone(), Subresource::Main).unwrap_err();
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    stale["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let out = h.update("", "configmaps", stale, Subresource::Main).unwrap();
    assert_eq!(out["data"]["k"], "v3", "ConfigMaps allow unconditional updates");
    let e = h.update("", "configmaps", json!({"metadata": {"name": "zz", "namespace": "default"}}), Subresource::Main);
    assert_eq!(e.unwrap_err().code, 404);
    let e = h.update("", "configmaps", json!({"metadata": {"name": "a", "namespace": "default"}}), Subresource::Status);
    assert_eq!(e.unwrap_err().message, "the server could not find the requested resource");
}

#[test]
fn leases_refuse_unconditional_updates() {
    let mut h = H::new();
    let lease = h
        .create(
            "coordination.k8s.io",
            "leases",
            Some("default"),
            json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}),
        )
        .unwrap();
    let mut u = lease.clone();
    u["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let e = h.update("coordination.k8s.io", "leases", u, Subresource::Main).unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Lease.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
}

#[test]
fn an_update_changing_nothing_commits_nothing() {
    let mut h = H::new();
    let cm = h.cm("a", json!({}));
    let rv = h.s.rv();
    let out = h.update("", "configmaps", cm.clone(), Subresource::Main).unwrap();
    assert_eq!((h.s.rv(), out["metadata"]["resourceVersion"].clone()), (rv, cm["metadata"]["resourceVersion"].clone()));
    assert_eq!(h.s.writes().len(), 1);
}

#[test]
fn status_is_a_subresource_for_deployments() {
    let mut h = H::new();
    let d = h
        .create(
            "apps",
            "deployments",
            Some("default"),
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}, "status": {"x": 1}}),
        )
        .unwrap();
    assert_eq!(d["status"], json!({}));
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    let mut s = d.clone();
    s["status"] = json!({"replicas": 1, "readyReplicas": 1});
    s["spec"]["replicas"] = json!(4);
    let out = h.update("apps", "deployments", s, Subresource::Status).unwrap();
    assert_eq!((out["spec"]["replicas"].clone(), out["status"]["readyReplicas"].clone()), (json!(1), json!(1)));
    assert_eq!(out["metadata"]["generation"], 1);
    let mut m = out.clone();
    m["spec"]["replicas"] = json!(4);
    m["status"] = json!({});
    let out = h.update("apps", "deployments", m, Subresource::Main).unwrap();
    assert_eq!((out["spec"]["replicas"].clone(), out["status"]["readyReplicas"].clone()), (json!(4), json!(1)));
    assert_eq!(out["metadata"]["generation"], 2);
    assert_eq!(h.s.writes()[1].verb, Verb::UpdateStatus);
}

#[test]
fn finalizers_hold_a_deleted_object_until_removed() {
    let mut h = H::new();
    let cm = h
        .create("", "configmaps", Some("default"), json!({"metadata": {"name": "f", "finalizers": ["x.io/f"]}}))
        .unwrap();
    let watch = h.s.watch_start(&h.ty("", "configmaps"), Some("default"), &WatchOptions::default()).unwrap();
    let Deleted::Marked(marked) = h.delete("", "configmaps", Some("default"), "f", DeleteOptions::default()).unwrap()
    else {
        panic!("finalizers keep the object")
    };
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(H::rv_of(&marked), H::rv_of(&cm) + 1);
    let again = h.delete("", "configmaps", Some("default"), "f", DeleteOptions::default()).unwrap();
    assert_eq!(again, Deleted::Marked(marked.clone()), "a second delete commits nothing");
    let mut add = marked.clone();
    add["metadata"]["finalizers"] = json!(["x.io/f", "y.io/g"]);
    assert_eq!(h.update("", "configmaps", add, Subresource::Main).unwrap_err().code, 422);
    let mut done = marked.clone();
    done["metadata"]["finalizers"] = json!([]);
    h.update("", "configmaps", done, Subresource::Main).unwrap();
    assert_eq!(h.get("", "configmaps", Some("default"), "f").unwrap_err().code, 404);
    let events = h.s.watch_next(&h.ty("", "configmaps"), Some("default"), &watch.filter, watch.after_rv).unwrap();
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::Modified, EventKind::Deleted]);
    let verbs: Vec<Verb> = h.s.writes().iter().map(|w| w.verb).collect();
    assert_eq!(verbs, [Verb::Create, Verb::DeleteMarked, Verb::Deleted]);
}

#[test]
fn delete_checks_preconditions() {
    let mut h = H::new();
    let cm = h.cm("p", json!({}));
    let opts = DeleteOptions { preconditions_uid: Some("nope".into()), ..Default::default() };
    let e = h.delete("", "configmaps", Some("default"), "p", opts).unwrap_err();
    assert_eq!(e.code, 409);
    // The generic registry's wording, measured on kube-apiserver v1.37.2 (the differential suite's
    // `delete_preconditions_on_uid_and_resource_version`).
    assert!(
        e.message.starts_with("Operation cannot be fulfilled on ConfigMap \"p\": the UID in the precondition (nope) does not match the UID in record ("),
        "{}",
        e.message
    );
    let opts = DeleteOptions { preconditions_rv: Some("1".into()), ..Default::default() };
    let e = h.delete("", "configmaps", Some("default"), "p", opts).unwrap_err();
    assert!(
        e.message
            .ends_with("the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (5). The object might have been modified"),
        "{}",
        e.message
    );
    let opts =
        DeleteOptions { preconditions_uid: cm["metadata"]["uid"].as_str().map(str::to_string), ..Default::default() };
    assert!(matches!(h.delete("", "configmaps", Some("default"), "p", opts).unwrap(), Deleted::Gone(_)));
    assert_eq!(h.delete("", "configmaps", Some("default"), "p", DeleteOptions::default()).unwrap_err().code, 404);
}

#[test]
fn propagation_policies_add_their_finalizers() {
    let mut h = H::new();
    h.cm("o", json!({}));
    let opts = DeleteOptions { propagation_policy: Some("Orphan".into()), ..Default::default() };
    let Deleted::Marked(m) = h.delete("", "configmaps", Some("default"), "o", opts).unwrap() else { panic!() };
    assert_eq!(m["metadata"]["finalizers"], json!(["orphan"]));
    let opts = DeleteOptions { propagation_policy: Some("Sideways".into()), ..Default::default() };
    assert_eq!(h.delete("", "configmaps", Some("default"), "o", opts).unwrap_err().code, 400);
}

#[test]
fn a_deleted_namespace_stays_terminating() {
    let mut h = H::new();
    h.create("", "namespaces", None, json!({"metadata": {"name": "gone"}})).unwrap();
    let Deleted::Marked(ns) = h.delete("", "namespaces", None, "gone", DeleteOptions::default()).unwrap() else {
        panic!()
    };
    assert_eq!(ns["status"]["phase"], "Terminating");
    let e = h.create("", "configmaps", Some("gone"), json!({"metadata": {"name": "a"}})).unwrap_err();
    assert_eq!((e.code, e.reason), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "configmaps \"a\" is forbidden: unable to create new content in namespace gone because it is being terminated"
    );
}

#[test]
fn a_bound_pod_waits_its_grace_period() {
    let mut h = H::new();
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}});
    let created = h.create("", "pods", Some("default"), pod).unwrap();
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(created["metadata"]["generation"], 1);
    let Deleted::Marked(m) = h.delete("", "pods", Some("default"), "p", DeleteOptions::default()).unwrap() else {
        panic!()
    };
    assert_eq!(m["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(m["metadata"]["generation"], 2);
    let now = DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    assert!(matches!(h.delete("", "pods", Some("default"), "p", now).unwrap(), Deleted::Gone(_)));
    h.create(
        "",
        "pods",
        Some("default"),
        json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    assert!(matches!(h.delete("", "pods", Some("default"), "q", DeleteOptions::default()).unwrap(), Deleted::Gone(_)));
}

#[test]
fn patches_are_unconditional_unless_they_carry_a_version() {
    let mut h = H::new();
    let cm = h.cm("m", json!({}));
    let ty = h.ty("", "configmaps");
    let p = Patch::Merge(json!({"data": {"k": "patched"}}));
    let out = h.with(|s, w| s.patch(&ty, Some("default"), "m", &p, Subresource::Main, w)).unwrap();
    assert_eq!(out["data"]["k"], "patched");
    assert_eq!(h.s.writes().last().unwrap().verb, Verb::Patch);
    let stale =
        Patch::Merge(json!({"metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]}, "data": {"k": "x"}}));
    let e = h.with(|s, w| s.patch(&ty, Some("default"), "m", &stale, Subresource::Main, w)).unwrap_err();
    assert_eq!(e.code, 409);
    let e = h.with(|s, w| s.patch(&ty, Some("default"), "none", &p, Subresource::Main, w)).unwrap_err();
    assert_eq!(e.code, 404);
    let apply = Patch::Apply {
        body: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}}),
        manager: "m".into(),
        force: false,
    };
    let made = h.with(|s, w| s.patch(&ty, Some("default"), "new", &apply, Subresource::Main, w)).unwrap();
    assert_eq!(made["metadata"]["name"], "new");
}

#[test]
fn dry_runs_commit_nothing() {
    let mut h = H::new();
    h.dry_run = true;
    let out = h.create("", "configmaps", Some("default"), json!({"metadata": {"name": "d"}})).unwrap();
    assert_eq!(out["metadata"]["name"], "d");
    assert_eq!(h.s.rv(), 4);
    assert!(h.get("", "configmaps", Some("default"), "d").is_err());
}

#[test]
fn writes_name_their_actor_and_diff() {
    let mut h = H::new();
    h.actor = "kube-rs/5.0";
    let cm = h.cm("w", json!({}));
    h.manager = Some("my-controller");
    let mut u = cm.clone();
    u["data"]["k"] = json!("v2");
    h.update("", "configmaps", u, Subresource::Main).unwrap();
    let timeline = h.s.timeline(&h.ty("", "configmaps").object_ref(Some("default"), "w"));
    assert_eq!(timeline.len(), 2);
    assert_eq!((timeline[0].actor.as_str(), timeline[0].diff.as_str()), ("kube-rs/5.0", "created"));
    assert_eq!((timeline[1].actor.as_str(), timeline[1].diff.as_str()), ("my-controller", "data.k: \"v\" -> \"v2\""));
    assert_eq!(timeline[1].object.to_string(), "configmaps/default/w");
}

#[test]
fn lease_writes_make_the_lease_timeline() {
    let mut h = H::new();
    let spec = json!({"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0});
    let l = h
        .create(
            "coordination.k8s.io",
            "leases",
            Some("kube-system"),
            json!({"metadata": {"name": "lead"}, "spec": spec}),
        )
        .unwrap();
    h.actor = "b";
    let mut u = l.clone();
    u["spec"]["holderIdentity"] = json!("b");
    u["spec"]["leaseTransitions"] = json!(1);
    h.update("coordination.k8s.io", "leases", u, Subresource::Main).unwrap();
    let t = h.s.lease_timeline("kube-system", "lead");
    assert_eq!(t.len(), 2);
    assert_eq!((t[0].holder.as_deref(), t[0].duration_s, t[0].transitions), (Some("a"), Some(15), Some(0)));
    assert_eq!((t[1].holder.as_deref(), t[1].actor.as_str(), t[1].transitions), (Some("b"), "b", Some(1)));
    assert!(h.s.lease_timeline("default", "lead").is_empty());
}

pub fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "databases.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "databases", "kind": "Database"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}})
}

#[test]
fn a_crd_serves_its_kind_until_deleted() {
    let mut h = H::new();
    let made = h.create("apiextensions.k8s.io", "customresourcedefinitions", None, crd()).unwrap();
    let conditions = made["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
    assert_eq!(made["status"]["acceptedNames"]["kind"], "Database");
    assert_eq!(made["spec"]["names"]["listKind"], "DatabaseList");
    let db = h
        .create(
            "example.com",
            "databases",
            Some("default"),
            json!({"apiVersion": "example.com/v1", "kind": "Database",
            "metadata": {"name": "db1"}, "spec": {"size": 1}, "status": {"ready": true}}),
        )
        .unwrap();
    assert_eq!(db["metadata"]["generation"], 1);
    assert!(db.get("status").is_none(), "status is dropped on create");
    let mut u = db.clone();
    u["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    assert_eq!(h.update("example.com", "databases", u, Subresource::Main).unwrap_err().code, 422);
    let ty = h.ty("example.com", "databases");
    h.delete(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        None,
        "databases.example.com",
        DeleteOptions::default(),
    )
    .unwrap();
    assert!(h.s.registry().find("example.com", "v1", "databases").is_none());
    assert_eq!(h.s.get(&ty, Some("default"), "db1").unwrap_err().code, 404);
    let late = h.with(|s, w| s.create(&ty, Some("default"), json!({"metadata": {"name": "db2"}}), w));
    assert_eq!(late.unwrap_err().code, 404, "a removed CRD's kind is no longer served");
    let bad = json!({"metadata": {"name": "x.example.com"}, "spec": {"group": "example.com"}});
    assert_eq!(h.create("apiextensions.k8s.io", "customresourcedefinitions", None, bad).unwrap_err().code, 422);
}

#[test]
fn delete_collection_deletes_what_the_selector_selects() {
    let mut h = H::new();
    h.cm("a", json!({"app": "web"}));
    h.cm("b", json!({"app": "db"}));
    h.cm("c", json!({"app": "web"}));
    let ty = h.ty("", "configmaps");
    let sel =
        crate::store::ListOptions { label_selector: Some("app=web".into()), limit: Some(1), ..Default::default() };
    let gone = h.with(|s, w| s.delete_collection(&ty, Some("default"), &sel, &DeleteOptions::default(), w)).unwrap();
    assert_eq!(gone.len(), 2);
    let left = h.s.list(&ty, Some("default"), &Default::default()).unwrap();
    assert_eq!(left.items.len(), 1);
    assert_eq!(left.items[0]["metadata"]["name"], "b");
}

#[test]
fn a_custom_resource_reads_and_writes_through_every_served_version() {
    let mut h = H::new();
    let mut two = crd();
    two["spec"]["versions"] =
        json!([{"name": "v1", "served": true, "storage": true}, {"name": "v1beta1", "served": true, "storage": false}]);
    h.create("apiextensions.k8s.io", "customresourcedefinitions", None, two).unwrap();
    let beta = h.s.registry().find("example.com", "v1beta1", "databases").unwrap().clone();
    let v1 = h.ty("example.com", "databases");
    let made = h
        .with(|s, w| {
            s.create(
                &beta,
                Some("default"),
                json!({"apiVersion": "example.com/v1beta1", "metadata": {"name": "d"}, "spec": {"a": 1}}),
                w,
            )
        })
        .unwrap();
    assert_eq!(made["apiVersion"], "example.com/v1beta1");
    let mut got = h.s.get(&v1, Some("default"), "d").unwrap();
    assert_eq!(got["apiVersion"], "example.com/v1");
    got["spec"]["a"] = json!(2);
    let out = h.with(|s, w| s.update(&v1, Some("default"), "d", got, Subresource::Main, w)).unwrap();
    assert_eq!((out["spec"]["a"].clone(), out["metadata"]["generation"].clone()), (json!(2), json!(2)));
    let listed = h.s.list(&beta, None, &Default::default()).unwrap();
    assert_eq!(listed.items[0]["apiVersion"], "example.com/v1beta1");
    assert_eq!(h.s.registry().groups().iter().find(|g| g.name == "example.com").unwrap().preferred_version(), "v1");
}

#[test]
fn services_get_a_cluster_ip_that_sticks() {
    let mut h = H::new();
    let svc = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}});
    let a = h.create("", "services", Some("default"), svc).unwrap();
    assert_eq!(a["spec"]["clusterIP"], "10.96.0.10");
    assert_eq!(a["spec"]["clusterIPs"], json!(["10.96.0.10"]));
    assert_eq!(a["spec"]["type"], "ClusterIP");
    let b = h
        .create("", "services", Some("default"), json!({"metadata": {"name": "db"}, "spec": {"clusterIP": "None"}}))
        .unwrap();
    assert_eq!(b["spec"]["clusterIP"], "None");
    let mut u = a.clone();
    u["spec"].as_object_mut().unwrap().remove("clusterIP");
    u["spec"]["ports"][0]["port"] = json!(81);
    let out = h.update("", "services", u, Subresource::Main).unwrap();
    assert_eq!(out["spec"]["clusterIP"], "10.96.0.10");
    let mut moved = out.clone();
    moved["spec"]["clusterIP"] = json!("10.96.0.99");
    assert_eq!(h.update("", "services", moved, Subresource::Main).unwrap_err().code, 422);
    let c = h.create("", "services", Some("default"), json!({"metadata": {"name": "c"}, "spec": {}})).unwrap();
    assert_eq!(c["spec"]["clusterIP"], "10.96.0.11");
}
