//! JSON patch (RFC 6902, `application/json-patch+json`) through the `json-patch` crate, with the
//! real server's errors (`k8s.io/apiserver` `endpoints/handlers/patch.go`, since kubernetes PR
//! #68346):
//! - a body that does not decode as a patch → 400 `BadRequest` with the decoder's message;
//! - an operation that fails on the object (a `test` whose value differs, a path that does not
//!   exist) → 422 `Invalid` built by `NewGenericServerResponse(422, …)`, whose message is the
//!   generic "the server rejected our request due to an error in our request" and whose details
//!   are empty (`{}`): the real server drops the patch library's own message, as clients see
//!   (e.g. java-operator-sdk#2759). kube-runtime's finalizer helper treats any error as a retry.
//!
//! Known difference: the real server also refuses more than 10 000 operations (413); kubesim
//! does not limit.

use crate::status::ApiError;
use serde_json::{Value, json};

/// The message the real server sends when a JSON patch does not apply.
pub const REJECTED: &str = "the server rejected our request due to an error in our request";

/// The target with the JSON patch applied. Errors: 400 for a malformed patch, 422 `Invalid`
/// (message [`REJECTED`]) for a failed operation, `test` included.
pub fn json(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut out = target.clone();
    json_patch::patch(&mut out, &ops).map_err(|_| rejected())?;
    Ok(out)
}

/// The 422 the real server answers for a JSON patch that fails on the object.
pub fn rejected() -> ApiError {
    ApiError { details: json!({}), ..ApiError::new(422, "Invalid", REJECTED) }
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
    fn a_missing_path_is_422_and_a_malformed_patch_is_400() {
        let obj = json!({});
        assert_eq!(json(&obj, &json!([{"op": "remove", "path": "/x"}])).unwrap_err().code, 422);
        assert_eq!(json(&obj, &json!({"op": "add"})).unwrap_err().code, 400);
        assert_eq!(json(&obj, &json!([{"op": "frob", "path": "/x"}])).unwrap_err().code, 400);
    }
}
