//! PLACEHOLDER from work package A1 (storage) so the store compiles: the `Patch` enum and a
//! minimal `apply_patch` (JSON merge patch only, RFC 7386). Work package B replaces this file
//! with JSON patch, strategic merge patch and server-side apply.

use serde_json::Value;

use crate::status::ApiError;

/// A PATCH body by content type.
#[derive(Clone, Debug, PartialEq)]
pub enum Patch {
    /// `application/merge-patch+json`.
    Merge(Value),
    /// `application/json-patch+json`.
    Json(Value),
    /// `application/strategic-merge-patch+json`.
    Strategic(Value),
    /// `application/apply-patch+yaml` (server-side apply).
    Apply {
        /// The applied configuration.
        body: Value,
        /// `?fieldManager=`.
        manager: String,
        /// `?force=true`.
        force: bool,
    },
}

/// RFC 7386 JSON merge patch.
pub fn merge(target: &Value, patch: &Value) -> Value {
    let Value::Object(p) = patch else { return patch.clone() };
    let mut out = match target {
        Value::Object(t) => t.clone(),
        _ => serde_json::Map::new(),
    };
    for (k, v) in p {
        if v.is_null() {
            out.remove(k);
        } else {
            let merged = merge(out.get(k).unwrap_or(&Value::Null), v);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

/// Applies `patch` to `live` (placeholder: merge patches; strategic treated as merge; apply as
/// merge onto the live object or the body itself; JSON patch unsupported).
pub fn apply_patch(
    live: Option<&Value>,
    patch: &Patch,
    _kind: &str,
    _now: &str,
    _update_manager: Option<&str>,
) -> Result<Value, ApiError> {
    match (patch, live) {
        (Patch::Merge(p) | Patch::Strategic(p), Some(live)) => Ok(merge(live, p)),
        (Patch::Apply { body, .. }, Some(live)) => Ok(merge(live, body)),
        (Patch::Apply { body, .. }, None) => Ok(body.clone()),
        (Patch::Json(_), _) => Err(ApiError::unsupported_media_type("application/json-patch+json")),
        (_, None) => Err(ApiError::internal("patch of a missing object")),
    }
}
