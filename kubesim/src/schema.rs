//! Validation beyond metadata, as the real server words it (measured against kube-apiserver
//! v1.37 by the differential suite):
//! - custom resources by their version's `openAPIV3Schema` (the apiextensions handler's
//!   structural-schema validation and pruning), a subset: `type` (`FieldValueTypeInvalid`:
//!   `Invalid value: "string": spec.size in body must be of type integer: "string"`),
//!   `minimum`/`maximum` and their `exclusive…` forms (`should be greater than or equal to 1`),
//!   `enum` (`FieldValueNotSupported`), `required` (`FieldValueRequired`), `nullable`,
//!   `properties`, `additionalProperties`, `items`; fields the schema does not declare are
//!   pruned unless `x-kubernetes-preserve-unknown-fields` is set. Errors are listed sorted by
//!   field (the order measured for two fields; the real order comes from kube-openapi's walk). Not checked: `pattern`, `format`, lengths, `x-kubernetes-validations` (CEL) and
//!   the other `x-kubernetes-*` extensions;
//! - a Deployment's `status` (`ValidateDeploymentStatus` in `pkg/apis/apps/validation`): counts
//!   non-negative, `updatedReplicas`, `readyReplicas` and `availableReplicas` not above
//!   `replicas`, `availableReplicas` not above `readyReplicas`, in the source's order.

use serde_json::{Map, Value};

use crate::meta;
use crate::resource::ResourceType;
use crate::status::ApiError;

/// One field error: reason, field path, message (as `meta::invalid` takes them).
type Cause = (&'static str, String, String);

/// Checks (and, for a custom resource, prunes) `obj` of type `ty`. Errors: 422 `Invalid` with
/// every cause (see the module docs).
pub fn validate(ty: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if let Some(schema) = &ty.schema
        && let Some(top) = obj.as_object_mut()
    {
        let preserve = schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
        let props = schema["properties"].as_object();
        let keys: Vec<String> = top.keys().cloned().collect();
        for key in keys {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match props.and_then(|p| p.get(&key)) {
                Some(s) => walk(s, top.get_mut(&key).expect("a key just listed"), &key, &mut causes),
                None if preserve => {}
                None => {
                    top.remove(&key);
                }
            }
        }
        required(schema, top, "", &mut causes);
        causes.sort_by(|a, b| a.1.cmp(&b.1));
    }
    if ty.group == "apps" && ty.kind == "Deployment" {
        deployment_status(&obj["status"], &mut causes);
    }
    if causes.is_empty() {
        return Ok(());
    }
    let listed: Vec<(&str, &str, String)> = causes.iter().map(|(r, f, m)| (*r, f.as_str(), m.clone())).collect();
    Err(meta::invalid(ty, meta::name_of(obj), &listed))
}

/// The JSON-schema type name of a value (`integer` for whole numbers).
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A number as Go's `%v` prints a float64 or int64 (`10`, `1.5`).
fn go_number(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
        Some(f) => f.to_string(),
        None => v.to_string(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn required(schema: &Value, obj: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if !obj.contains_key(r) {
            causes.push(("FieldValueRequired", join(path, r), "Required value".into()));
        }
    }
}

fn walk(schema: &Value, v: &mut Value, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() && schema["nullable"].as_bool() == Some(true) {
        return;
    }
    if let Some(want) = schema["type"].as_str() {
        let got = type_of(v);
        if got != want && !(want == "number" && got == "integer") {
            let msg = format!("Invalid value: \"{got}\": {path} in body must be of type {want}: \"{got}\"");
            causes.push(("FieldValueTypeInvalid", path.to_string(), msg));
            return;
        }
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(v)
    {
        let supported: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        let msg = format!("Unsupported value: {}: supported values: {}", v, supported.join(", "));
        causes.push(("FieldValueNotSupported", path.to_string(), msg));
    }
    if let Some(x) = v.as_f64() {
        let bound = |key: &str, exclusive: &str, below: bool| -> Option<String> {
            let limit = schema[key].as_f64()?;
            let strict = schema[exclusive].as_bool() == Some(true);
            let fails = match (below, strict) {
                (true, false) => x < limit,
                (true, true) => x <= limit,
                (false, false) => x > limit,
                (false, true) => x >= limit,
            };
            let word = match (below, strict) {
                (true, false) => "greater than or equal to",
                (true, true) => "greater than",
                (false, false) => "less than or equal to",
                (false, true) => "less than",
            };
            fails.then(|| {
                format!("Invalid value: {}: {path} in body should be {word} {}", go_number(v), go_number(&schema[key]))
            })
        };
        for msg in [bound("minimum", "exclusiveMinimum", true), bound("maximum", "exclusiveMaximum", false)]
            .into_iter()
            .flatten()
        {
            causes.push(("FieldValueInvalid", path.to_string(), msg));
        }
    }
    match v {
        Value::Object(m) => {
            let preserve = schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
            let props = schema["properties"].as_object();
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            let keys: Vec<String> = m.keys().cloned().collect();
            for key in keys {
                let child = join(path, &key);
                match props.and_then(|p| p.get(&key)).or(extra) {
                    Some(s) => walk(s, m.get_mut(&key).expect("a key just listed"), &child, causes),
                    None if preserve || schema["additionalProperties"] == Value::Bool(true) => {}
                    None => {
                        m.remove(&key);
                    }
                }
            }
            required(schema, m, path, causes);
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(s, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

fn deployment_status(status: &Value, causes: &mut Vec<Cause>) {
    if !status.is_object() {
        return;
    }
    let count = |k: &str| status[k].as_i64().unwrap_or(0);
    let mut fields = vec!["observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas"];
    fields.extend(
        ["unavailableReplicas", "terminatingReplicas", "collisionCount"].iter().filter(|k| status.get(**k).is_some()),
    );
    for f in fields {
        if count(f) < 0 {
            let msg = format!("Invalid value: {}: must be greater than or equal to 0", count(f));
            causes.push(("FieldValueInvalid", format!("status.{f}"), msg));
        }
    }
    let replicas = count("replicas");
    for f in ["updatedReplicas", "readyReplicas", "availableReplicas"] {
        if count(f) > replicas {
            let msg = format!("Invalid value: {}: cannot be greater than status.replicas", count(f));
            causes.push(("FieldValueInvalid", format!("status.{f}"), msg));
        }
    }
    if count("availableReplicas") > count("readyReplicas") {
        let msg = format!("Invalid value: {}: cannot be greater than readyReplicas", count("availableReplicas"));
        causes.push(("FieldValueInvalid", "status.availableReplicas".into(), msg));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;
    use serde_json::json;

    #[test]
    fn a_deployment_status_is_checked_in_the_real_servers_order() {
        let r = Registry::builtin();
        let ty = r.find("apps", "v1", "deployments").expect("deployments are built in");
        let mut d = json!({"metadata": {"name": "s"}, "status": {"replicas": -1}});
        let e = validate(ty, &mut d).unwrap_err();
        assert_eq!(
            e.message,
            "Deployment.apps \"s\" is invalid: [status.replicas: Invalid value: -1: must be greater than or equal to 0, status.updatedReplicas: Invalid value: 0: cannot be greater than status.replicas, status.readyReplicas: Invalid value: 0: cannot be greater than status.replicas, status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas]"
        );
    }
}
