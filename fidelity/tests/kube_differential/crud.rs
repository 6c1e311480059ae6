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
    let right = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid, "resourceVersion": rv}});
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
