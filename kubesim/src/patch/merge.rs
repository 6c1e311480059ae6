//! JSON merge patch (RFC 7386), as `application/merge-patch+json` is applied by the real server
//! (`k8s.io/apiserver` uses `evanphx/json-patch`'s `MergePatch`, which follows the RFC).
//!
//! An object patch merges key by key: `null` deletes the key, an object recurses, anything
//! else (arrays included) replaces. A patch that is not an object replaces the target.

use serde_json::{Map, Value};

/// The target with the merge patch applied (RFC 7386 §2). Never fails: every JSON value is a
/// valid merge patch.
pub fn merge(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    merge_into(&mut out, patch);
    out
}

/// [`merge`] in place.
pub fn merge_into(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { unreachable!() };
    for (key, value) in patch {
        if value.is_null() {
            t.remove(key);
        } else {
            merge_into(t.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rfc_examples_hold() {
        // RFC 7386 appendix A, a selection.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!([1, 2]), json!({"a": "b", "c": null}), json!({"a": "b"})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
        ];
        for (target, patch, want) in cases {
            assert_eq!(merge(&target, &patch), want, "{target} + {patch}");
        }
    }
}
