//! A PATCH request's body, decoded by `Content-Type` as the real server's patch handler
//! (`k8s.io/apiserver` `endpoints/handlers/patch.go`) decodes it, with its refusals (measured
//! against kube-apiserver v1.37 by the differential suite):
//! - a content type that is not a patch type → 415 `UnsupportedMediaType`, message `415:
//!   Unsupported Media Type`, details `{}` (also `application/json`); a strategic merge patch
//!   of a custom resource → the 415 of [`super::strategic::unsupported_for_custom_resources`];
//! - a body that is not JSON → 400 `BadRequest` `invalid JSON patch` (merge, JSON and
//!   strategic patches alike), before the object is looked up;
//! - a merge patch that is not an object → 400 `error decoding patch: json: cannot unmarshal
//!   <type> into Go value of type map[string]interface {}` (`null`: `Invalid JSON Patch`); a
//!   strategic one the same without `error decoding patch: `; a JSON patch that is not an
//!   array of objects → 400 `error decoding patch: json: cannot unmarshal <type> into Go value
//!   of type []handlers.jsonPatchOp` (an item: `… handlers.jsonPatchOp`); an apply
//!   configuration that is not an object → 400 `error decoding patch: error unmarshaling JSON:
//!   while decoding JSON: json: cannot unmarshal <type> into Go value of type
//!   map[string]interface {}`; one whose `apiVersion` and `kind` are not the endpoint's → 400
//!   `invalid object type: <group>/<version>, Kind=<kind>` (`/v1, Kind=` without a kind).
//!
//! Known difference: apply bodies are read as JSON (what kube-rs sends); other YAML is 400 with
//! kubesim's own message (the real server converts YAML to JSON first).

use super::Patch;
use super::strategic::unsupported_for_custom_resources;
use crate::resource::ResourceType;
use crate::status::ApiError;
use serde_json::{Value, json};

/// The content type of server-side apply.
pub const APPLY: &str = "application/apply-patch+yaml";

/// Whether `content_type` (parameters stripped) is server-side apply.
pub fn is_apply(content_type: Option<&str>) -> bool {
    matches!(content_type, Some(APPLY | "application/apply-patch+json"))
}

/// The 415 for a content type that is not a patch type.
pub fn unsupported_patch_type() -> ApiError {
    ApiError { details: json!({}), ..ApiError::new(415, "UnsupportedMediaType", "415: Unsupported Media Type") }
}

/// The 415s, answered before anything else about a patch is checked: a content type that is
/// not a patch type, or a strategic merge patch of a custom resource (`custom`).
pub fn check_type(content_type: Option<&str>, custom: bool) -> Result<(), ApiError> {
    match content_type {
        Some("application/strategic-merge-patch+json") if custom => Err(unsupported_for_custom_resources()),
        Some(
            "application/merge-patch+json" | "application/json-patch+json" | "application/strategic-merge-patch+json",
        ) => Ok(()),
        ct if is_apply(ct) => Ok(()),
        _ => Err(unsupported_patch_type()),
    }
}

/// Go's name of a JSON value's type in `encoding/json` unmarshal errors.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Decodes a PATCH body of `content_type` (parameters stripped) for an object of type `ty`; an
/// apply takes `field_manager` (already checked by [`super::validate_patch_options`]) and
/// `force`. Errors: as the module docs say.
pub fn decode(
    content_type: Option<&str>,
    body: &[u8],
    ty: &ResourceType,
    field_manager: Option<&str>,
    force: bool,
) -> Result<Patch, ApiError> {
    check_type(content_type, ty.crd.is_some())?;
    let json_body = || serde_json::from_slice::<Value>(body).map_err(|_| ApiError::bad_request("invalid JSON patch"));
    match content_type {
        Some("application/merge-patch+json") => match json_body()? {
            Value::Null => Err(ApiError::bad_request("Invalid JSON Patch")),
            v @ Value::Object(_) => Ok(Patch::Merge(v)),
            v => Err(ApiError::bad_request(format!(
                "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_type(&v)
            ))),
        },
        Some("application/json-patch+json") => match json_body()? {
            Value::Array(ops) => match ops.iter().find(|op| !op.is_object() && !op.is_null()) {
                Some(op) => Err(ApiError::bad_request(format!(
                    "error decoding patch: json: cannot unmarshal {} into Go value of type handlers.jsonPatchOp",
                    go_type(op)
                ))),
                None => Ok(Patch::Json(Value::Array(ops))),
            },
            Value::Null => Ok(Patch::Json(json!([]))),
            v => Err(ApiError::bad_request(format!(
                "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
                go_type(&v)
            ))),
        },
        Some("application/strategic-merge-patch+json") => match json_body()? {
            v @ Value::Object(_) => Ok(Patch::Strategic(v)),
            v => Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_type(&v)
            ))),
        },
        ct if is_apply(ct) => {
            // kube-rs sends JSON, which is YAML too; other YAML is a known difference.
            let body: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("kubesim reads apply bodies written as JSON (YAML is not parsed): {e}"))
            })?;
            if !body.is_object() {
                return Err(ApiError::bad_request(format!(
                    "error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    go_type(&body)
                )));
            }
            let (api_version, kind) = (body["apiVersion"].as_str().unwrap_or(""), body["kind"].as_str().unwrap_or(""));
            if api_version != ty.api_version() || kind != ty.kind {
                // `schema.GroupVersionKind.String()` of what the configuration names.
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                return Err(ApiError::bad_request(format!("invalid object type: {group}/{version}, Kind={kind}")));
            }
            Ok(Patch::Apply { body, manager: field_manager.unwrap_or_default().to_string(), force })
        }
        _ => Err(unsupported_patch_type()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;

    #[test]
    fn bodies_are_refused_as_the_real_server_words_it() {
        let r = Registry::builtin();
        let cm = r.find("", "v1", "configmaps").expect("configmaps are built in").clone();
        let mut custom = cm.clone();
        custom.crd = Some("widgets.example.com".into());
        let (cm, custom) = (&cm, &custom);
        let merge = Some("application/merge-patch+json");
        assert_eq!(decode(merge, b"{x", cm, None, false).unwrap_err().message, "invalid JSON patch");
        assert_eq!(
            decode(merge, b"[1]", cm, None, false).unwrap_err().message,
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        let jp = Some("application/json-patch+json");
        assert_eq!(
            decode(jp, b"[1]", cm, None, false).unwrap_err().message,
            "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp"
        );
        let e = decode(Some("text/plain"), b"{}", cm, None, false).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (415, "415: Unsupported Media Type"));
        let e = decode(Some("application/strategic-merge-patch+json"), b"{}", custom, None, false).unwrap_err();
        assert_eq!(e.code, 415);
        let e = decode(Some(APPLY), br#"{"kind": "ConfigMap"}"#, cm, Some("m"), true).unwrap_err();
        assert_eq!(e.message, "invalid object type: /, Kind=ConfigMap");
        let body = br#"{"apiVersion": "v1", "kind": "ConfigMap"}"#;
        assert!(matches!(decode(Some(APPLY), body, cm, Some("m"), true), Ok(Patch::Apply { force: true, .. })));
    }
}
