//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in kinds
//! kubesim serves, after `k8s.io/apimachinery/pkg/util/strategicpatch`:
//! - objects merge key by key as in a merge patch (`null` deletes);
//! - lists merge as [`ListType`] says: by merge key (a patch item updates the live item with
//!   the same key, or is appended), a primitive `merge` list by union, others are replaced;
//! - directives: `$patch: replace` (in an object: the object becomes the patch; as a list
//!   item: the list becomes the patch's other items), `$patch: delete` (in an object: it is
//!   removed; as a keyed list item: the item with that key is removed), `$patch: merge`,
//!   `$deleteFromPrimitiveList/<field>: [values]`, `$retainKeys: [fields]` (fields not listed
//!   are cleared);
//! - custom resources (any kind not in [`super::schema::BUILTIN_KINDS`]) → 415, as the real
//!   server answers (strategic merge needs Go types; CRs offer merge, JSON and apply patches).
//!
//! A merged list comes out in the real server's order: the patch's items first where they are
//! new (see `element_order`); an unknown `$patch` value is the real server's plain 500.
//!
//! Known differences: `$setElementOrder/<field>` is accepted and ignored (the real server
//! reorders to the given order); the real server's list of keyed fields is longer than
//! [`super::schema::list_type`]'s table.

use super::schema::{ListType, is_builtin, list_type};
use crate::status::ApiError;
use serde_json::{Map, Value};

/// The 415 the real server answers for a strategic merge patch on a custom resource.
pub fn unsupported_for_custom_resources() -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )
}

/// The target (an object of `kind`) with the strategic merge patch applied. Errors: 415 for a
/// custom resource, 400 for a patch that is not an object or carries an unknown directive.
pub fn strategic(target: &Value, patch: &Value, kind: &str) -> Result<Value, ApiError> {
    if !is_builtin(kind) {
        return Err(unsupported_for_custom_resources());
    }
    let Value::Object(patch) = patch else {
        return Err(ApiError::bad_request("a strategic merge patch must be a JSON object"));
    };
    let mut out = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut names = Vec::new();
    match merge_map(kind, &mut names, &mut out, patch)? {
        Outcome::Keep => Ok(Value::Object(out)),
        Outcome::Delete => Ok(Value::Object(Map::new())),
    }
}

enum Outcome {
    Keep,
    Delete,
}

fn directive(patch: &Map<String, Value>) -> Result<Option<&str>, ApiError> {
    match patch.get("$patch") {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => Ok(Some(s)),
        // The real server's strategicpatch error reaches the client as a plain 500 (no reason),
        // the map printed as Go's `%v` prints it.
        Some(other) => Err(ApiError::new(
            500,
            "",
            format!("unknown patch type: {} in map: {}", go_fmt(other), go_fmt(&Value::Object(patch.clone()))),
        )),
    }
}

/// `patch` without its `$` directives (what a replace or an appended item stores).
fn plain(patch: &Map<String, Value>) -> Map<String, Value> {
    patch.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip(v))).collect()
}

fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(plain(m)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|i| !i.as_object().is_some_and(|m| m.contains_key("$patch") && m.len() == 1))
                .map(strip)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_map(
    kind: &str,
    names: &mut Vec<String>,
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Outcome, ApiError> {
    match directive(patch)? {
        Some("delete") => return Ok(Outcome::Delete),
        Some("replace") => {
            *target = plain(patch);
            return Ok(Outcome::Keep);
        }
        _ => {}
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(live)), Value::Array(drop)) = (target.get_mut(field), value) {
                live.retain(|v| !drop.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue; // $patch (handled), $retainKeys (below), $setElementOrder (ignored)
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        names.push(key.clone());
        let result = merge_field(kind, names, target, key, value);
        names.pop();
        result?;
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        target.retain(|k, _| keep.iter().any(|v| v.as_str() == Some(k)));
    }
    Ok(Outcome::Keep)
}

fn merge_field(
    kind: &str,
    names: &mut Vec<String>,
    target: &mut Map<String, Value>,
    key: &str,
    value: &Value,
) -> Result<(), ApiError> {
    match (target.get_mut(key), value) {
        (Some(Value::Object(live)), Value::Object(p)) => {
            if let Outcome::Delete = merge_map(kind, names, live, p)? {
                target.remove(key);
            }
        }
        (Some(Value::Array(live)), Value::Array(p)) => {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            merge_list(kind, names, list_type(kind, &refs), live, p)?;
        }
        (_, Value::Object(p)) => {
            if directive(p)? != Some("delete") {
                target.insert(key.to_string(), Value::Object(plain(p)));
            }
        }
        (_, v) => {
            target.insert(key.to_string(), strip(v));
        }
    }
    Ok(())
}

fn merge_list(
    kind: &str,
    names: &mut Vec<String>,
    ty: ListType,
    live: &mut Vec<Value>,
    patch: &[Value],
) -> Result<(), ApiError> {
    let replace = patch.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace || ty == ListType::Atomic {
        *live = match strip(&Value::Array(patch.to_vec())) {
            Value::Array(items) => items,
            _ => unreachable!(),
        };
        return Ok(());
    }
    let original = live.clone();
    let ListType::Map(mk) = ty else {
        for item in patch {
            if !live.contains(item) {
                live.push(item.clone());
            }
        }
        *live = element_order(std::mem::take(live), patch, &original, |v| Some(v.clone()));
        return Ok(());
    };
    for item in patch {
        let Value::Object(p) = item else {
            return Err(ApiError::bad_request(format!("the list items of {} must be objects", names.join("."))));
        };
        let Some(k) = p.get(mk) else {
            return Err(ApiError::bad_request(format!(
                "map: {} does not contain declared merge key: {mk}",
                Value::Object(p.clone())
            )));
        };
        let at = live.iter().position(|l| l.get(mk) == Some(k));
        match (at, directive(p)?) {
            (Some(i), Some("delete")) => {
                live.remove(i);
            }
            (None, Some("delete")) => {}
            (Some(i), _) => {
                if let Value::Object(l) = &mut live[i]
                    && let Outcome::Delete = merge_map(kind, names, l, p)?
                {
                    live.remove(i);
                }
            }
            (None, _) => live.push(Value::Object(plain(p))),
        }
    }
    *live = element_order(std::mem::take(live), patch, &original, |v| v.get(mk).cloned());
    Ok(())
}

/// The merged list in the real server's order (`normalizeElementOrder` and `mergeSortedSlice`
/// in strategicpatch): the items the patch names in the patch's order, the others in the live
/// order, interleaved so that a live item comes before a patch item only when both were live
/// and it was earlier. So a new item lands before the live items that follow no patch item.
fn element_order(
    merged: Vec<Value>,
    patch: &[Value],
    original: &[Value],
    key: impl Fn(&Value) -> Option<Value>,
) -> Vec<Value> {
    let patch_keys: Vec<Value> = patch.iter().filter_map(&key).collect();
    let index = |list: &[Value], item: &Value| -> Option<usize> {
        let k = key(item)?;
        list.iter().position(|l| key(l).as_ref() == Some(&k))
    };
    let (mut named, server_only): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|item| key(item).is_some_and(|k| patch_keys.contains(&k)));
    named.sort_by_key(|item| key(item).and_then(|k| patch_keys.iter().position(|p| *p == k)));
    let (mut left, mut right) = (server_only.into_iter().peekable(), named.into_iter().peekable());
    let mut out = Vec::new();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((index(original, l), index(original, r)), (Some(li), Some(ri)) if li < ri),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// A JSON value as Go's `fmt` `%v` prints the decoded `interface{}` (maps with sorted keys).
fn go_fmt(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_fmt).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries.iter().map(|(k, v)| format!("{k}:{}", go_fmt(v))).collect();
            format!("map[{}]", inner.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "finalizers": ["a"]},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}], "args": ["x"]},
                {"name": "side", "image": "side:1"}]}}}})
    }

    #[test]
    fn keyed_lists_merge_by_name() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}], "args": ["y"]},
            {"name": "new", "image": "new:1"}]}}}});
        let out = strategic(&deployment(), &patch, "Deployment").unwrap();
        let cs = &out["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs.as_array().unwrap().len(), 3);
        assert_eq!(cs[0]["image"], "app:2");
        // The real server's order: a new item comes before the live items after the patch's.
        assert_eq!(cs[0]["env"], json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]));
        assert_eq!(cs[0]["args"], json!(["y"]), "atomic lists are replaced");
        assert_eq!(cs[1]["name"], "new");
        assert_eq!(cs[2]["name"], "side");
    }

    #[test]
    fn directives_delete_replace_and_primitive_lists() {
        let patch = json!({"metadata": {"finalizers": ["b"]}, "spec": {"template": {"spec": {"containers": [
            {"name": "side", "$patch": "delete"}]}}}});
        let out = strategic(&deployment(), &patch, "Deployment").unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "a"]));
        assert_eq!(out["spec"]["template"]["spec"]["containers"].as_array().unwrap().len(), 1);

        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"template": {"spec": {"containers": [{"name": "only"}, {"$patch": "replace"}]}}}});
        let out = strategic(&deployment(), &patch, "Deployment").unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!([]));
        assert_eq!(out["spec"]["template"]["spec"]["containers"], json!([{"name": "only"}]));

        let patch = json!({"spec": {"template": {"$patch": "replace", "spec": {}}}, "status": {"$patch": "delete"}});
        let out = strategic(&deployment(), &patch, "Deployment").unwrap();
        assert_eq!(out["spec"]["template"], json!({"spec": {}}));
        assert!(out.get("status").is_none());
    }

    #[test]
    fn retain_keys_and_nulls() {
        let live = json!({"kind": "Deployment", "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}, "kind": null});
        let out = strategic(&live, &patch, "Deployment").unwrap();
        assert_eq!(out, json!({"spec": {"strategy": {"type": "Recreate"}}}));
    }

    #[test]
    fn service_ports_merge_by_port_and_custom_resources_are_415() {
        let live = json!({"spec": {"ports": [{"port": 80, "name": "http"}]}});
        let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
        let out = strategic(&live, &patch, "Service").unwrap();
        assert_eq!(out["spec"]["ports"], json!([{"port": 80, "name": "http", "targetPort": 8080}, {"port": 443}]));
        assert_eq!(strategic(&live, &patch, "Database").unwrap_err().code, 415);
        assert_eq!(strategic(&live, &json!({"spec": {"ports": [{"name": "x"}]}}), "Service").unwrap_err().code, 400);
    }
}
