//! `metadata.managedFields`: who owns which fields, read and written in the real server's shape
//! (`metav1.ManagedFieldsEntry`), and its maintenance on non-apply writes (the real server's
//! `fieldmanager` `Update`: the writer owns every field it added or changed, other managers lose
//! those fields, removed fields leave every manager).
//!
//! Entry shape: `{"manager", "operation": "Apply"|"Update", "apiVersion", "time" (RFC 3339,
//! seconds), "fieldsType": "FieldsV1", "fieldsV1": {…}[, "subresource": "status"]}`. Entries are
//! sorted as the real server sorts them: by operation (`Apply` first), time, manager, apiVersion,
//! subresource. A manager left owning nothing is dropped. One entry per (manager, operation,
//! subresource); an `Update` entry also per apiVersion, as in the real server.
//!
//! Known differences: the real server merges several `Update` entries older than the newest ten
//! into one `ancient-changes` entry (kubesim never does); a client-supplied `managedFields` on
//! a non-apply write is ignored (the real server accepts a valid one, and `[{}]` clears it).

use super::fields::{FieldSet, diff, from_fields_v1, stripped, to_fields_v1, under};
use serde_json::{Value, json};

/// One `managedFields` entry, its fields decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The field manager (`kubectl`, the `fieldManager` parameter, a user agent's first word).
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// The apiVersion the manager wrote with (`apps/v1`).
    pub api_version: String,
    /// When it last changed its fields, RFC 3339.
    pub time: String,
    /// `Some("status")` for writes to the status subresource.
    pub subresource: Option<String>,
    /// The fields it owns.
    pub fields: FieldSet,
}

impl Entry {
    /// The entry as the JSON the real server stores.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
            "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&self.fields)});
        if let Some(s) = &self.subresource {
            v["subresource"] = json!(s);
        }
        if self.time.is_empty()
            && let Some(m) = v.as_object_mut()
        {
            // A nil time (`omitempty`): an entry made by a no-op apply.
            m.remove("time");
        }
        v
    }

    fn from_json(v: &Value) -> Entry {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Entry {
            manager: s("manager"),
            operation: s("operation"),
            api_version: s("apiVersion"),
            time: s("time"),
            subresource: v.get("subresource").and_then(Value::as_str).map(str::to_string),
            fields: v.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        }
    }

    /// How the real server names this manager in a conflict: `"x"` for an applier, `"x" using
    /// apps/v1` for an updater, with ` with subresource "status"` after the name where set.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// The entries of `obj`'s `metadata.managedFields` (none if absent or malformed).
pub fn read(obj: &Value) -> Vec<Entry> {
    match obj.pointer("/metadata/managedFields") {
        Some(Value::Array(items)) => items.iter().map(Entry::from_json).collect(),
        _ => Vec::new(),
    }
}

/// Writes `entries` into `obj` (sorted, empty ones dropped; no key when none is left).
pub fn write(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries.iter().map(Entry::to_json).collect()));
    }
}

/// Drops from every entry the fields `gone` names (and all below them).
pub fn forget(entries: &mut [Entry], gone: &FieldSet) {
    for e in entries {
        e.fields.retain(|p| !gone.iter().any(|g| under(p, g)));
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// Records a non-apply write (`operation` "Update"; create included, `old` None) by `manager`
/// into `new`'s `metadata.managedFields`, at `now` (RFC 3339): `manager` owns what it added or
/// changed, other managers lose those fields, removed fields leave every manager. `new`'s own
/// `managedFields` are ignored: the entries are `old`'s. Nothing changes when the write
/// changed no tracked field (the entry keeps its time).
pub fn record_write(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    now: &str,
    subresource: Option<&str>,
) {
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    let mut entries = old.map(read).unwrap_or_default();
    let before = old.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let after = without_managed_fields(new);
    let (mut changed, mut removed) = diff(&kind, &before, &after);
    changed.retain(|p| !stripped(p));
    removed.retain(|p| !stripped(p));
    if changed.is_empty() && removed.is_empty() {
        write(new, entries);
        return;
    }
    forget(&mut entries, &removed);
    forget(&mut entries, &changed);
    let api_version = new.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
    let mine = |e: &Entry| {
        e.manager == manager
            && e.operation == operation
            && e.subresource.as_deref() == subresource
            && e.api_version == api_version
    };
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            e.fields.extend(changed);
            e.time = now.to_string();
        }
        None => entries.push(Entry {
            manager: manager.to_string(),
            operation: operation.to_string(),
            api_version,
            time: now.to_string(),
            subresource: subresource.map(str::to_string),
            fields: changed,
        }),
    }
    write(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:00:01Z";

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "uid": "u"}, "data": data})
    }

    #[test]
    fn a_create_owns_everything_it_set() {
        let mut new = cm(json!({"a": "1"}));
        record_write(None, &mut new, "kubectl", "Update", T0, None);
        assert_eq!(
            new["metadata"]["managedFields"],
            json!([{"manager": "kubectl", "operation": "Update",
            "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}}}}])
        );
    }

    #[test]
    fn an_update_takes_the_fields_it_changed_from_others() {
        let mut v1 = cm(json!({"a": "1", "b": "1"}));
        record_write(None, &mut v1, "one", "Update", T0, None);
        let mut v2 = v1.clone();
        v2["data"]["a"] = json!("2");
        record_write(Some(&v1), &mut v2, "two", "Update", T1, None);
        let e = read(&v2);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].manager, "one");
        assert_eq!(to_fields_v1(&e[0].fields), json!({"f:data": {".": {}, "f:b": {}}}));
        assert_eq!(to_fields_v1(&e[1].fields), json!({"f:data": {"f:a": {}}}));
        // Removing data drops it from every manager: none is left.
        let mut v3 = v2.clone();
        v3.as_object_mut().unwrap().remove("data");
        record_write(Some(&v2), &mut v3, "two", "Update", T1, None);
        assert!(v3["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn a_no_op_write_keeps_the_entries_and_a_status_write_is_marked() {
        let mut v1 = cm(json!({"a": "1"}));
        record_write(None, &mut v1, "one", "Update", T0, None);
        let mut same = v1.clone();
        record_write(Some(&v1), &mut same, "one", "Update", T1, None);
        assert_eq!(same, v1);
        let mut st = v1.clone();
        st["status"] = json!({"phase": "x"});
        record_write(Some(&v1), &mut st, "kubelet", "Update", T1, Some("status"));
        let e = read(&st);
        assert_eq!(e[1].subresource.as_deref(), Some("status"));
        assert_eq!(e[1].describe(), "\"kubelet\" with subresource \"status\" using v1");
    }
}
