//! Create, get, update and delete over raw HTTP: status codes, Status reasons and messages, and
//! the objects as stored.

use fidelity::runner::{Ctx, Scenario};
use fidelity::scenario;
use serde_json::json;

use crate::support::{Kube, config_map, mask_generated};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(self::create_get_update_delete_a_config_map),
        scenario!(self::update_with_a_stale_resource_version_is_a_conflict),
        scenario!(self::create_of_an_existing_name_is_already_exists),
        scenario!(self::get_and_delete_of_a_missing_object_are_not_found),
        scenario!(self::generate_name_makes_a_unique_name),
        scenario!(self::delete_preconditions_on_uid_and_resource_version),
        scenario!(self::create_in_a_missing_namespace_is_not_found),
        scenario!(self::invalid_names_and_bodies_are_unprocessable),
        scenario!(self::a_service_gets_a_cluster_ip_and_defaults),
        scenario!(self::a_pod_is_defaulted_as_the_real_server_does),
        scenario!(self::a_deployment_is_defaulted_as_the_real_server_does),
        scenario!(self::secret_string_data_is_merged_into_data),
        scenario!(self::dry_run_create_update_and_delete_store_nothing),
        scenario!(self::delete_collection_with_a_label_selector),
        scenario!(self::a_namespace_gets_its_name_label_and_finalizer),
    ]
}

pub async fn create_get_update_delete_a_config_map(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("settings", json!({"a": "1"})))).await?;
    k.note("create", k.answer(&a));
    let a = k.send("GET", &k.core("configmaps", Some("settings")), None).await?;
    k.note("get", k.answer(&a));
    let mut cm = a.body.clone();
    cm["data"]["b"] = json!("2");
    let a = k.send("PUT", &k.core("configmaps", Some("settings")), Some(cm)).await?;
    k.note("update", k.answer(&a));
    let a = k.send("DELETE", &k.core("configmaps", Some("settings")), None).await?;
    k.note("delete", k.answer(&a));
    let a = k.send("GET", &k.core("configmaps", Some("settings")), None).await?;
    k.note("get after delete", k.answer(&a));
    // Nothing but a name (empty maps are `omitempty`): no field to own, no managedFields entry.
    let empty = json!({"metadata": {"name": "empty", "labels": {}, "annotations": {}}, "data": {}});
    let a = k.send("POST", &k.core("configmaps", None), Some(empty)).await?;
    k.note("create an empty config map", k.answer(&a));
    Ok(())
}

pub async fn update_with_a_stale_resource_version_is_a_conflict(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("c", json!({"v": "1"})))).await?;
    let stale = a.body.clone();
    let mut fresh = a.body.clone();
    fresh["data"]["v"] = json!("2");
    let a = k.send("PUT", &k.core("configmaps", Some("c")), Some(fresh)).await?;
    k.note("update with the current resourceVersion", k.answer(&a));
    let mut late = stale.clone();
    late["data"]["v"] = json!("3");
    let a = k.send("PUT", &k.core("configmaps", Some("c")), Some(late)).await?;
    k.note("update with the old resourceVersion", k.answer(&a));
    let mut unconditional = stale;
    unconditional["metadata"].as_object_mut().map(|m| m.remove("resourceVersion"));
    unconditional["data"]["v"] = json!("4");
    let a = k.send("PUT", &k.core("configmaps", Some("c")), Some(unconditional)).await?;
    k.note("update without a resourceVersion", k.answer(&a));
    let mut garbage = a.body.clone();
    garbage["metadata"]["resourceVersion"] = json!("not-a-number");
    let a = k.send("PUT", &k.core("configmaps", Some("c")), Some(garbage)).await?;
    k.note("update with an unparsable resourceVersion", a.summary());
    Ok(())
}

pub async fn create_of_an_existing_name_is_already_exists(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("dup", json!({})))).await?;
    k.note("first create", a.summary());
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("dup", json!({"x": "y"})))).await?;
    k.note("second create", k.answer(&a));
    k.note("details", k.object(&a.body["details"]));
    Ok(())
}

pub async fn get_and_delete_of_a_missing_object_are_not_found(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("GET", &k.core("configmaps", Some("absent")), None).await?;
    k.note("get", k.answer(&a));
    k.note("details", k.object(&a.body["details"]));
    let a = k.send("DELETE", &k.core("configmaps", Some("absent")), None).await?;
    k.note("delete", k.answer(&a));
    let a = k.send("PUT", &k.core("configmaps", Some("absent")), Some(config_map("absent", json!({})))).await?;
    k.note("put creates", a.summary());
    let a = k.send("GET", &k.group("apps/v1", "deployments", Some("absent")), None).await?;
    k.note("get a deployment", k.answer(&a));
    Ok(())
}

pub async fn generate_name_makes_a_unique_name(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let body = json!({"metadata": {"generateName": "job-"}, "data": {}});
    let a = k.send("POST", &k.core("configmaps", None), Some(body.clone())).await?;
    let first = a.body.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default().to_string();
    k.note("create", a.summary());
    k.note("name shape", format!("prefix job-: {}, length {}", first.starts_with("job-"), first.len()));
    k.note("generateName kept", a.body.pointer("/metadata/generateName").map(|v| v.to_string()).unwrap_or_default());
    let a = k.send("POST", &k.core("configmaps", None), Some(body)).await?;
    let second = a.body.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default().to_string();
    k.note("second create", format!("{} distinct: {}", a.summary(), first != second));
    let a = k.send("POST", &k.core("configmaps", None), Some(json!({"metadata": {"generateName": "Bad_"}}))).await?;
    k.note("invalid prefix", mask_generated(&a.summary(), "Bad_"));
    let a = k.send("POST", &k.core("configmaps", None), Some(json!({"metadata": {}}))).await?;
    k.note("neither name nor generateName", a.summary());
    Ok(())
}

pub async fn delete_preconditions_on_uid_and_resource_version(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("p", json!({})))).await?;
    let uid = a.body.pointer("/metadata/uid").and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let rv = a.rv();
    let wrong_uid = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
    let a = k.send("DELETE", &k.core("configmaps", Some("p")), Some(wrong_uid)).await?;
    k.note("delete with another uid", k.answer(&a).replace(&uid, "UID"));
    let wrong_rv = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}});
    let a = k.send("DELETE", &k.core("configmaps", Some("p")), Some(wrong_rv)).await?;
    k.note("delete with an old resourceVersion", k.answer(&a).replace(&format!("({rv})"), "(RV)"));
    let right =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid, "resourceVersion": rv}});
    let a = k.send("DELETE", &k.core("configmaps", Some("p")), Some(right)).await?;
    k.note("delete with both right", a.summary());
    Ok(())
}

pub async fn create_in_a_missing_namespace_is_not_found(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let path = format!("/api/v1/namespaces/{}-absent/configmaps", k.ns);
    let a = k.send("POST", &path, Some(config_map("x", json!({})))).await?;
    k.note("create", k.answer(&a));
    k.note("details", k.object(&a.body["details"]));
    let a = k.send("GET", &format!("{path}/x"), None).await?;
    k.note("get", k.answer(&a));
    let a = k.send("GET", &path, None).await?;
    k.note("list", k.list(&a));
    Ok(())
}

pub async fn invalid_names_and_bodies_are_unprocessable(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("Upper_Case", json!({})))).await?;
    k.note("an invalid name", a.summary());
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("x", json!({"bad key!": "v"})))).await?;
    k.note("an invalid data key", a.summary());
    let mut other_ns = config_map("y", json!({}));
    other_ns["metadata"]["namespace"] = json!("elsewhere");
    let a = k.send("POST", &k.core("configmaps", None), Some(other_ns)).await?;
    k.note("a namespace unlike the path's", a.summary());
    let a = k.send("PUT", &k.core("configmaps", Some("z")), Some(config_map("not-z", json!({})))).await?;
    k.note("a name unlike the path's", a.summary());
    Ok(())
}

pub async fn a_service_gets_a_cluster_ip_and_defaults(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let svc = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
    let a = k.send("POST", &k.core("services", None), Some(svc)).await?;
    let mut body = a.body.clone();
    // The IP is drawn from --service-cluster-ip-range: 10.96.0.0/12 on both sides (kubeadm's
    // and kind's default; kube-local.sh sets it).
    let ip = body["spec"]["clusterIP"].as_str().unwrap_or_default().to_string();
    let octets: Vec<u8> = ip.split('.').filter_map(|o| o.parse().ok()).collect();
    let in_range = octets.len() == 4 && octets[0] == 10 && (96..112).contains(&octets[1]);
    k.note(
        "cluster IP",
        format!("in 10.96.0.0/12: {in_range}, clusterIPs the same: {}", body["spec"]["clusterIPs"] == json!([ip])),
    );
    body["spec"]["clusterIP"] = json!("IP");
    body["spec"]["clusterIPs"] = json!(["IP"]);
    k.note("create", format!("{} {}", a.code, k.object(&body)));
    // A chosen address unique to the run (the real server is shared across runs), shown as `CHOSEN`.
    let h = ctx.suffix().bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let chosen = format!("10.{}.{}.{}", 100 + h % 8, (h >> 3) % 256, 1 + (h >> 11) % 254);
    let fixed = json!({"metadata": {"name": "fixed"}, "spec": {"clusterIP": chosen, "ports": [{"port": 81, "targetPort": 8081}]}});
    let a = k.send("POST", &k.core("services", None), Some(fixed.clone())).await?;
    k.note("a chosen cluster IP", format!("{} {}", a.code, a.body["spec"]["clusterIP"]).replace(&chosen, "CHOSEN"));
    let mut again = fixed;
    again["metadata"]["name"] = json!("fixed-again");
    let a = k.send("POST", &k.core("services", None), Some(again)).await?;
    k.note("the same cluster IP again", a.summary().replace(&chosen, "CHOSEN"));
    let outside =
        json!({"metadata": {"name": "outside"}, "spec": {"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}});
    let a = k.send("POST", &k.core("services", None), Some(outside)).await?;
    k.note("a cluster IP outside the range", a.summary());
    let headless = json!({"metadata": {"name": "headless"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
    let a = k.send("POST", &k.core("services", None), Some(headless)).await?;
    k.note(
        "a headless service",
        format!("{} {} {}", a.code, a.body["spec"]["clusterIP"], a.body["spec"]["clusterIPs"]),
    );
    Ok(())
}

pub async fn a_pod_is_defaulted_as_the_real_server_does(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "busybox"}]}});
    let a = k.send("POST", &k.core("pods", None), Some(pod)).await?;
    k.note("create", a.code.to_string());
    for part in ["spec", "status"] {
        k.note(part, k.object(&a.body[part]));
    }
    let latest =
        json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "app", "image": "busybox:latest"}]}});
    let a = k.send("POST", &k.core("pods", None), Some(latest)).await?;
    k.note("imagePullPolicy for :latest", a.body["spec"]["containers"][0]["imagePullPolicy"].to_string());
    let none = json!({"metadata": {"name": "r"}, "spec": {"containers": []}});
    let a = k.send("POST", &k.core("pods", None), Some(none)).await?;
    k.note("no containers", a.summary());
    Ok(())
}

pub async fn a_deployment_is_defaulted_as_the_real_server_does(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let d = json!({"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}});
    let a = k.send("POST", &k.group("apps/v1", "deployments", None), Some(d)).await?;
    k.note("create", format!("{} generation {}", a.code, a.body["metadata"]["generation"]));
    k.note("spec", k.object(&a.body["spec"]));
    k.note("status", k.object(&a.body["status"]));
    let mismatch = json!({"metadata": {"name": "bad"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}});
    let a = k.send("POST", &k.group("apps/v1", "deployments", None), Some(mismatch)).await?;
    k.note("a selector that does not match the template", a.summary());
    Ok(())
}

pub async fn secret_string_data_is_merged_into_data(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let secret =
        json!({"metadata": {"name": "s"}, "data": {"a": "b2xk", "b": "Yg=="}, "stringData": {"a": "new", "c": "see"}});
    let a = k.send("POST", &k.core("secrets", None), Some(secret)).await?;
    k.note("create", k.answer(&a));
    let bad = json!({"metadata": {"name": "t"}, "data": {"a": "not base64!"}});
    let a = k.send("POST", &k.core("secrets", None), Some(bad)).await?;
    k.note("data that is not base64", a.summary());
    let typed = json!({"metadata": {"name": "u"}, "type": "kubernetes.io/tls", "data": {}});
    let a = k.send("POST", &k.core("secrets", None), Some(typed)).await?;
    k.note("a TLS secret without its keys", a.summary());
    let immutable = json!({"metadata": {"name": "v"}, "immutable": true, "stringData": {"k": "1"}});
    let a = k.send("POST", &k.core("secrets", None), Some(immutable)).await?;
    let mut changed = a.body.clone();
    changed["data"]["k"] = json!("Mg==");
    let a = k.send("PUT", &k.core("secrets", Some("v")), Some(changed)).await?;
    k.note("changing an immutable secret", a.summary());
    Ok(())
}

pub async fn dry_run_create_update_and_delete_store_nothing(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let path = format!("{}?dryRun=All", k.core("configmaps", None));
    let a = k.send("POST", &path, Some(config_map("dry", json!({"a": "1"})))).await?;
    let mut shown = a.body.clone();
    // A dry-run create has no resourceVersion on the real server; whatever uid it shows is not stored.
    shown["metadata"]["uid"] = json!(shown["metadata"]["uid"].is_string());
    k.note("dry-run create", format!("{} {}", a.code, k.object(&shown)));
    let a = k.send("GET", &k.core("configmaps", Some("dry")), None).await?;
    k.note("get after a dry-run create", a.summary());
    let a = k.send("POST", &k.core("configmaps", None), Some(config_map("real", json!({"a": "1"})))).await?;
    let mut next = a.body.clone();
    next["data"]["a"] = json!("2");
    let a = k.send("PUT", &format!("{}?dryRun=All", k.core("configmaps", Some("real"))), Some(next)).await?;
    k.note("dry-run update", k.answer(&a));
    let a = k.send("DELETE", &format!("{}?dryRun=All", k.core("configmaps", Some("real"))), None).await?;
    k.note("dry-run delete", k.answer(&a));
    let a = k.send("GET", &k.core("configmaps", Some("real")), None).await?;
    k.note("get after both", k.answer(&a));
    let a = k
        .send("POST", &format!("{}?dryRun=Some", k.core("configmaps", None)), Some(config_map("x", json!({}))))
        .await?;
    k.note("an unknown dryRun value", a.summary());
    Ok(())
}

pub async fn delete_collection_with_a_label_selector(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    for (name, tier) in [("a", "web"), ("b", "db"), ("c", "web")] {
        let mut cm = config_map(name, json!({}));
        cm["metadata"]["labels"] = json!({"tier": tier});
        k.send("POST", &k.core("configmaps", None), Some(cm)).await?;
    }
    let a = k.send("DELETE", &format!("{}?labelSelector=tier%3Dweb", k.core("configmaps", None)), None).await?;
    k.note("delete the web tier", k.list(&a));
    let a = k.send("GET", &k.core("configmaps", None), None).await?;
    k.note("left", k.list(&a));
    let a = k.send("DELETE", "/api/v1/namespaces", None).await?;
    k.note("delete every namespace", k.answer(&a));
    Ok(())
}

pub async fn a_namespace_gets_its_name_label_and_finalizer(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let a = k.send("GET", &format!("/api/v1/namespaces/{}", k.ns), None).await?;
    k.note("the scenario's namespace", k.object(&a.body));
    let mut ns = a.body.clone();
    ns["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!("other");
    let a = k.send("PUT", &format!("/api/v1/namespaces/{}", k.ns), Some(ns)).await?;
    k.note("overwrite the name label", k.answer(&a));
    let a = k.send("POST", "/api/v1/namespaces", Some(json!({"metadata": {"name": "default"}}))).await?;
    k.note("create default again", a.summary());
    let a = k.send("DELETE", "/api/v1/namespaces/default", None).await?;
    k.note("delete default", a.summary());
    Ok(())
}
