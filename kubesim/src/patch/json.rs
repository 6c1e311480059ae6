//! JSON patch (RFC 6902, `application/json-patch+json`) through the `json-patch` crate, with the
//! real server's errors (`k8s.io/apiserver` `endpoints/handlers/patch.go`, since kubernetes PR
//! #68346):
//! - a body that is not an array of objects → 400 `BadRequest` (worded in [`super::decode`]);
//! - an item that is not an operation (an unknown `op`, no `path`) → the 422 below;
//! - an operation that fails on the object (a `test` whose value differs, a path that does not
//!   exist) → 422 `Invalid` built by `NewGenericServerResponse(422, …)`, whose message is the
//!   generic "the server rejected our request due to an error in our request" and whose details
//!   are empty (`{}`): the real server drops the patch library's own message, as clients see
//!   (e.g. java-operator-sdk#2759). kube-runtime's finalizer helper treats any error as a retry.
//!
//! A `test` for `null` on a missing key of an existing object passes (as `evanphx/json-patch`
//! v4 has it; RFC 6902 and the `json-patch` crate would fail it): kube-runtime's finalizer
//! helper adds the first finalizer with `test /metadata/finalizers null` + `add`. Operations
//! apply one at a time to a copy, so a failure changes nothing.
//!
//! Bounds (so that one request cannot take the server down): the values `copy` operations
//! duplicate may add up to 3 MiB (the real server bounds them by its request size), and a
//! result nested deeper than [`DEPTH_MAX`] is refused; both answer the generic 422, as does a
//! patch that replaces the object by something that is not an object. More than 10 000
//! operations are not refused (the real server answers 413).

use crate::status::ApiError;
use serde_json::{Value, json};

/// The message the real server sends when a JSON patch does not apply.
pub const REJECTED: &str = "the server rejected our request due to an error in our request";

/// The target with the JSON patch applied. Errors: 400 for a malformed patch, 422 `Invalid`
/// (message [`REJECTED`]) for a failed operation, `test` included.
pub fn json(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut copied = 0usize;
    // An array of objects that are not all operations (an unknown `op`, a missing `path`) fails
    // when applied on the real server: the generic 422, as for a failed `test`.
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| if patch.is_array() { rejected() } else { ApiError::bad_request(e.to_string()) })?;
    let mut out = target.clone();
    for op in &ops.0 {
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
            && missing_key(&out, t.path.as_str())
        {
            continue;
        }
        if let json_patch::PatchOperation::Copy(c) = op {
            let from = out.pointer(c.from.as_str()).map_or(0, |v| serde_json::to_vec(v).map_or(0, |b| b.len()));
            copied += from;
            if copied > COPIED_MAX {
                return Err(rejected());
            }
        }
        json_patch::patch(&mut out, std::slice::from_ref(op)).map_err(|_| rejected())?;
        if !out.is_object() || depth(&out) > DEPTH_MAX {
            return Err(rejected());
        }
    }
    Ok(out)
}

/// The most bytes `copy` operations of one patch may duplicate.
pub const COPIED_MAX: usize = 3 << 20;
/// The deepest nesting a patched object may have.
pub const DEPTH_MAX: usize = 500;

/// How deeply `v` nests (iteratively: a deep value must not overflow the stack here).
fn depth(v: &Value) -> usize {
    let mut stack = vec![(v, 1usize)];
    let mut max = 0;
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

/// Whether `pointer` names a missing key of an existing object: there a `test` for `null`
/// passes, as in the server's `evanphx/json-patch` (v4), which kube-runtime's finalizer helper
/// relies on (`test /metadata/finalizers null`, then `add`).
fn missing_key(doc: &Value, pointer: &str) -> bool {
    let Some((parent, _)) = pointer.rsplit_once('/') else { return false };
    doc.pointer(pointer).is_none() && doc.pointer(parent).is_some_and(Value::is_object)
}

/// The 422 the real server answers for a JSON patch that fails on the object.
pub fn rejected() -> ApiError {
    ApiError { details: json!({}), ..ApiError::new(422, "Invalid", REJECTED) }
}

#[cfg(test)]
mod bounds {
    use super::*;

    #[test]
    fn a_root_replaced_by_a_non_object_deep_nesting_and_copy_blowup_are_refused() {
        let cm = json!({"metadata": {"name": "c"}, "x": {}});
        assert_eq!(json(&cm, &json!([{"op": "replace", "path": "", "value": "s"}])).unwrap_err().code, 422);
        let deep: Vec<Value> =
            (0..DEPTH_MAX + 5).map(|_| json!({"op": "copy", "from": "/x", "path": "/x/a"})).collect();
        assert_eq!(json(&cm, &Value::Array(deep)).unwrap_err().code, 422);
        let mut blow = vec![json!({"op": "add", "path": "/spec", "value": [["x".repeat(100)]]})];
        blow.extend((0..40).map(|_| json!({"op": "copy", "from": "/spec/0", "path": "/spec/0/-"})));
        assert_eq!(json(&cm, &Value::Array(blow)).unwrap_err().code, 422);
        assert!(json(&cm, &json!([{"op": "copy", "from": "/x", "path": "/y"}])).is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_apply_in_order() {
        let obj = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers/1", "value": "b"},
            {"op": "remove", "path": "/metadata/finalizers/1"},
            {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}},
        ]);
        let out = json(&obj, &patch).unwrap();
        assert_eq!(out, json!({"metadata": {"finalizers": ["a"], "labels": {"x": "y"}}}));
    }

    #[test]
    fn a_failed_test_is_the_real_servers_422_and_changes_nothing() {
        let obj = json!({"metadata": {"finalizers": ["a"]}});
        let patch = json!([
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "test", "path": "/metadata/finalizers/0", "value": "a"},
        ]);
        let e = json(&obj, &patch).unwrap_err();
        assert_eq!((e.code, e.reason, e.message.as_str()), (422, "Invalid", REJECTED));
        assert_eq!(e.to_status()["details"], json!({}));
    }

    #[test]
    fn the_finalizer_helpers_first_add_passes_its_null_test() {
        let obj = json!({"metadata": {"name": "x"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]},
        ]);
        let out = json(&obj, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        // Now present: the same patch fails (another writer added one first).
        assert_eq!(json(&out, &patch).unwrap_err().code, 422);
        // A missing parent is still a failure.
        let deep = json!([{"op": "test", "path": "/spec/x", "value": null}]);
        assert_eq!(json(&obj, &deep).unwrap_err().code, 422);
    }

    #[test]
    fn a_missing_path_is_422_and_a_malformed_patch_is_400() {
        let obj = json!({});
        assert_eq!(json(&obj, &json!([{"op": "remove", "path": "/x"}])).unwrap_err().code, 422);
        assert_eq!(json(&obj, &json!({"op": "add"})).unwrap_err().code, 400);
        // An unknown operation fails when applied on the real server: the generic 422.
        assert_eq!(json(&obj, &json!([{"op": "frob", "path": "/x"}])).unwrap_err().code, 422);
    }
}
