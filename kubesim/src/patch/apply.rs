//! Server-side apply (`application/apply-patch+yaml`), after `sigs.k8s.io/structured-merge-diff`
//! and `k8s.io/apiserver`'s `fieldmanager`:
//! - the applied configuration merges into the live object ([`ListType`]: keyed lists by key,
//!   sets by union, atomic lists and scalars replaced; `null` removes the field);
//! - a field another manager (apply or update) owns that this apply would change is a conflict:
//!   409 `Conflict`, message `Apply failed with 1 conflict: conflict with "mgr" using apps/v1:
//!   .spec.replicas` (several: `Apply failed with N conflicts: conflicts with "a":\n- .x\n- .y`),
//!   details `{"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"mgr\"
//!   using apps/v1", "field": ".spec.replicas"}]}` (no name/kind, as `errors.NewApplyConflict`);
//!   an applier is printed without `using`; setting a field to the value it already has shares
//!   ownership and is no conflict;
//! - `force` takes the conflicting fields from their owners instead;
//! - fields the applier owned before and no longer sets are removed from the object unless
//!   another manager owns them (or something below them); maps left empty by that removal and
//!   owned by nobody go too;
//! - the applier's `Apply` entry then owns exactly the configuration's fields;
//! - apply on a missing object (`live` None) creates it from the configuration; on an object
//!   without managedFields, its fields first go to a `before-first-apply` `Update` manager (as
//!   the real server's `skipNonAppliedManager`), so applying a different value conflicts.
//!
//! Known differences: a manager never conflicts with its own other entries (the real server
//! keys managers by name, operation and apiVersion, so an `Update` entry of the same name can
//! conflict); conflicts are grouped by manager in sorted order of their printed names; a keyed
//! list item without its key is appended (the real server refuses it).

use super::fields::{FieldPath, FieldSet, config_set, diff, display, get, remove, stripped, under};
use super::managed::{Entry, forget, read, write};
use super::schema::{ListType, list_type};
use crate::status::ApiError;
use serde_json::{Map, Value, json};

/// Applies `config` as `manager` (see the module docs); `subresource` is `Some("status")` for
/// an apply to `/status`. Errors: 422 for an empty `manager`, 400 for a configuration that is not an object or carries
/// `metadata.managedFields`; 409 for conflicts without `force`.
pub fn server_side_apply(
    live: Option<&Value>,
    config: &Value,
    kind: &str,
    manager: &str,
    force: bool,
    now: &str,
    subresource: Option<&str>,
) -> Result<Value, ApiError> {
    super::options::validate_patch_options(true, Some(manager), force)?;
    if !config.is_object() {
        return Err(ApiError::bad_request("an apply configuration must be an object"));
    }
    if config.pointer("/metadata/managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let mut entries = live.map(|l| entries_of(l, now)).unwrap_or_default();
    let mut merged = live.cloned().unwrap_or_else(|| json!({}));
    if let Some(m) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let before = merged.clone();
    merge_config(kind, &mut Vec::new(), &mut merged, config);
    let mut owned = config_set(kind, config);
    owned.retain(|p| !stripped(p) && get(config, p).is_some_and(|v| !v.is_null()));

    let (changed, _) = diff(kind, &before, &merged);
    take_conflicts(&mut entries, &changed, manager, force)?;

    let mine = |e: &Entry| e.manager == manager && e.operation == "Apply" && e.subresource.as_deref() == subresource;
    let previous = entries.iter().find(|e| mine(e)).map(|e| e.fields.clone()).unwrap_or_default();
    let others: Vec<FieldPath> = entries.iter().filter(|e| !mine(e)).flat_map(|e| e.fields.iter().cloned()).collect();
    let claimed = |p: &FieldPath| others.iter().chain(owned.iter()).any(|o| under(o, p));
    for p in previous.difference(&owned) {
        if !claimed(p) && remove(&mut merged, p) {
            prune_empty_parents(&mut merged, p, &claimed);
        }
    }
    forget(&mut entries, &gone_paths(&before, &merged, kind));

    let api_version =
        config.get("apiVersion").or_else(|| before.get("apiVersion")).and_then(Value::as_str).unwrap_or("").to_string();
    // The real server stamps an entry's time only when the object changed: a no-op apply keeps
    // the time, and a new manager's no-op apply gets an entry without one (sorted first).
    let object_changed = merged != before;
    let mut applier = Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version,
        time: now.to_string(),
        subresource: subresource.map(str::to_string),
        fields: owned,
    };
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) if !object_changed => e.fields = applier.fields,
        Some(e) => *e = applier,
        None => {
            if !object_changed {
                applier.time = String::new();
            }
            entries.push(applier)
        }
    }
    if !merged.get("metadata").is_some_and(Value::is_object) {
        merged["metadata"] = json!({});
    }
    write(&mut merged, entries);
    Ok(merged)
}

/// Fields other managers own that this apply changes: a 409 without `force`, taken from their
/// owners with it.
fn take_conflicts(entries: &mut [Entry], changed: &FieldSet, manager: &str, force: bool) -> Result<(), ApiError> {
    let conflicts: Vec<(usize, FieldPath)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.manager != manager)
        .flat_map(|(i, e)| e.fields.iter().filter(|p| changed.contains(*p)).map(move |p| (i, p.clone())))
        .collect();
    if !conflicts.is_empty() {
        if !force {
            return Err(conflict_error(entries, &conflicts));
        }
        for (i, p) in &conflicts {
            entries[*i].fields.remove(p);
        }
    }
    Ok(())
}

/// The live object's entries; an object nobody manages yet gets one `before-first-apply`
/// `Update` entry owning all its fields, as the real server does on the first apply.
fn entries_of(live: &Value, now: &str) -> Vec<Entry> {
    let entries = read(live);
    if !entries.is_empty() {
        return entries;
    }
    let kind = live.get("kind").and_then(Value::as_str).unwrap_or("");
    let (mut fields, _) = diff(kind, &json!({}), live);
    fields.retain(|p| !stripped(p));
    vec![Entry {
        manager: BEFORE_FIRST_APPLY.into(),
        operation: "Update".into(),
        api_version: live.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string(),
        time: now.to_string(),
        subresource: None,
        fields,
    }]
}

/// The manager the real server names the owner of an object's fields before its first apply.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The fields removed from the object by this apply (no one owns them any more).
fn gone_paths(before: &Value, after: &Value, kind: &str) -> FieldSet {
    diff(kind, before, after).1
}

fn prune_empty_parents(v: &mut Value, removed: &[String], claimed: &impl Fn(&FieldPath) -> bool) {
    let mut parent = removed.to_vec();
    while parent.len() > 1 {
        parent.pop();
        if parent == ["f:metadata"] {
            return;
        }
        let empty = get(v, &parent).is_some_and(|p| p.as_object().is_some_and(Map::is_empty));
        if !empty || claimed(&parent) || !remove(v, &parent) {
            return;
        }
    }
}

/// The 409 for apply conflicts, in the real server's words.
fn conflict_error(entries: &[Entry], conflicts: &[(usize, FieldPath)]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(i, p)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", entries[*i].describe()),
                "field": display(p)})
        })
        .collect();
    let message = if let [(i, p)] = conflicts {
        format!("Apply failed with 1 conflict: conflict with {}: {}", entries[*i].describe(), display(p))
    } else {
        let mut managers: Vec<String> = conflicts.iter().map(|(i, _)| entries[*i].describe()).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in &managers {
            lines.push(format!("conflicts with {m}:"));
            for (_, p) in conflicts.iter().filter(|(i, _)| entries[*i].describe() == *m) {
                lines.push(format!("- {}", display(p)));
            }
        }
        format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
    };
    ApiError { details: json!({"causes": causes}), ..ApiError::new(409, "Conflict", message) }
}

/// Merges an applied configuration into `live` (see the module docs).
fn merge_config(kind: &str, names: &mut Vec<String>, live: &mut Value, config: &Value) {
    let Value::Object(cfg) = config else {
        *live = config.clone();
        return;
    };
    if !live.is_object() {
        *live = Value::Object(Map::new());
    }
    let Value::Object(l) = live else { unreachable!() };
    for (k, v) in cfg {
        if v.is_null() {
            l.remove(k);
            continue;
        }
        names.push(k.clone());
        let slot = l.entry(k.clone()).or_insert(Value::Null);
        match (slot, v) {
            (slot @ Value::Array(_), Value::Array(items)) => {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let ty = list_type(kind, &refs);
                merge_list(kind, names, ty, slot, items);
            }
            (slot, v) => merge_config(kind, names, slot, v),
        }
        names.pop();
    }
}

fn merge_list(kind: &str, names: &mut Vec<String>, ty: ListType, slot: &mut Value, items: &[Value]) {
    let Value::Array(live) = slot else { return };
    match ty {
        ListType::Atomic => *live = items.to_vec(),
        ListType::Set => {
            for item in items {
                if !live.contains(item) {
                    live.push(item.clone());
                }
            }
        }
        ListType::Map(key) => {
            for item in items {
                let at = item.get(key).and_then(|k| live.iter().position(|l| l.get(key) == Some(k)));
                match at {
                    Some(i) => merge_config(kind, names, &mut live[i], item),
                    None => live.push(item.clone()),
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
