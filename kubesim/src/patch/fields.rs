//! Field sets: the paths a manager owns, as server-side apply (`sigs.k8s.io/structured-merge-diff`)
//! tracks them, and their `FieldsV1` encoding in `metadata.managedFields[].fieldsV1`.
//!
//! A [`FieldPath`] is a list of elements, each in its `FieldsV1` spelling: `f:<name>` (an object's
//! field), `k:<json object>` (a keyed list item, `k:{"name":"app"}`), `v:<json>` (a set item,
//! `v:"a"`), `i:<n>` (a list item without its key). In `FieldsV1` a set is a tree: each element
//! a key, `{}` a leaf member, `".": {}` a member that also has members below it.
//!
//! Paths never tracked (the real server's `StripMetaManager`): `apiVersion`, `kind`, `metadata`
//! itself, and `metadata.{name, namespace, uid, resourceVersion, generation, creationTimestamp,
//! managedFields, selfLink}`; kubesim also leaves out `metadata.deletionTimestamp` and
//! `metadata.deletionGracePeriodSeconds` (set by the server, not by writers).

use super::schema::{ListType, is_map, list_type};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// One path, elements spelled as in `FieldsV1` (`["f:spec", "f:replicas"]`).
pub type FieldPath = Vec<String>;
/// A set of paths.
pub type FieldSet = BTreeSet<FieldPath>;

const STRIPPED_META: &[&str] = &[
    "f:name",
    "f:namespace",
    "f:uid",
    "f:resourceVersion",
    "f:generation",
    "f:creationTimestamp",
    "f:managedFields",
    "f:selfLink",
    "f:deletionTimestamp",
    "f:deletionGracePeriodSeconds",
];

/// Whether a path is never tracked (see the module docs).
pub fn stripped(path: &[String]) -> bool {
    match path {
        [] => true,
        [first, ..] if first == "f:apiVersion" || first == "f:kind" => true,
        [meta] if meta == "f:metadata" => true,
        [meta, second, ..] if meta == "f:metadata" => STRIPPED_META.contains(&second.as_str()),
        _ => false,
    }
}

/// The element naming `item` of a list of type `ty` at index `i`.
fn item_element(ty: ListType, item: &Value, i: usize) -> String {
    match ty {
        ListType::Map(key) => match item.get(key) {
            Some(k) => {
                let mut m = Map::new();
                m.insert(key.to_string(), k.clone());
                format!("k:{}", Value::Object(m))
            }
            None => format!("i:{i}"),
        },
        ListType::Set => format!("v:{item}"),
        ListType::Atomic => format!("i:{i}"),
    }
}

/// Walks values, tracking the element path and the field names (for the schema).
struct Walker<'a> {
    kind: &'a str,
    path: FieldPath,
    names: Vec<String>,
}

impl Walker<'_> {
    fn names(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }

    fn list_type(&self) -> ListType {
        list_type(self.kind, &self.names())
    }

    fn insert(&self, out: &mut FieldSet) {
        if !stripped(&self.path) {
            out.insert(self.path.clone());
        }
    }

    fn field<R>(&mut self, name: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        self.path.push(format!("f:{name}"));
        self.names.push(name.to_string());
        let r = f(self);
        self.names.pop();
        self.path.pop();
        r
    }

    fn item<R>(&mut self, element: String, f: impl FnOnce(&mut Self) -> R) -> R {
        self.path.push(element);
        let r = f(self);
        self.path.pop();
        r
    }

    /// Every path of `v` (at the current path): leaves, keyed items, and — when `own_maps` (an
    /// `Update` creating them) — maps themselves.
    fn all(&mut self, v: &Value, own_maps: bool, out: &mut FieldSet) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                let item = self.path.last().is_some_and(|e| e.starts_with("k:"));
                if item || (own_maps && is_map(self.kind, &self.names())) {
                    self.insert(out);
                }
                for (k, child) in m {
                    self.field(k, |w| w.all(child, own_maps, out));
                }
            }
            Value::Array(items) if !items.is_empty() && self.list_type() != ListType::Atomic => {
                let ty = self.list_type();
                for (i, item) in items.iter().enumerate() {
                    let e = item_element(ty, item, i);
                    self.item(e, |w| match ty {
                        ListType::Map(_) => w.all(item, own_maps, out),
                        _ => w.insert(out),
                    });
                }
            }
            _ => self.insert(out),
        }
    }

    /// What changed from `old` to `new`: added or modified paths into `changed`, removed
    /// subtrees into `removed`.
    fn diff(&mut self, old: &Value, new: &Value, changed: &mut FieldSet, removed: &mut FieldSet) {
        match (old, new) {
            (Value::Object(o), Value::Object(n)) => {
                for (k, nv) in n {
                    self.field(k, |w| match o.get(k) {
                        None => w.all(nv, true, changed),
                        Some(ov) if ov != nv => w.diff(ov, nv, changed, removed),
                        Some(_) => {}
                    });
                }
                for k in o.keys().filter(|k| !n.contains_key(*k)) {
                    self.field(k, |w| w.insert(removed));
                }
            }
            (Value::Array(o), Value::Array(n)) if self.list_type() != ListType::Atomic => {
                let ty = self.list_type();
                let olds: Vec<(String, &Value)> =
                    o.iter().enumerate().map(|(i, v)| (item_element(ty, v, i), v)).collect();
                let news: Vec<(String, &Value)> =
                    n.iter().enumerate().map(|(i, v)| (item_element(ty, v, i), v)).collect();
                for (e, nv) in &news {
                    let before = olds.iter().find(|(oe, _)| oe == e).map(|(_, v)| *v);
                    self.item(e.clone(), |w| match before {
                        None => w.all(nv, true, changed),
                        Some(ov) if ov != *nv => w.diff(ov, nv, changed, removed),
                        Some(_) => {}
                    });
                }
                for (e, _) in olds.iter().filter(|(e, _)| !news.iter().any(|(ne, _)| ne == e)) {
                    self.item(e.clone(), |w| w.insert(removed));
                }
            }
            _ if old != new => self.insert(changed),
            _ => {}
        }
    }
}

/// The paths an applied configuration sets (its leaves and keyed list items; maps and structs
/// are not owned themselves), as SSA's `ToFieldSet`.
pub fn config_set(kind: &str, config: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    Walker { kind, path: Vec::new(), names: Vec::new() }.all(config, false, &mut out);
    out
}

/// The paths an `Update` from `old` to `new` added or modified (newly created maps and list items
/// included, as `".": {}`), and the subtrees it removed.
pub fn diff(kind: &str, old: &Value, new: &Value) -> (FieldSet, FieldSet) {
    let (mut changed, mut removed) = (FieldSet::new(), FieldSet::new());
    Walker { kind, path: Vec::new(), names: Vec::new() }.diff(old, new, &mut changed, &mut removed);
    (changed, removed)
}

/// Whether `path` is `prefix` or below it.
pub fn under(path: &[String], prefix: &[String]) -> bool {
    path.len() >= prefix.len() && path[..prefix.len()] == *prefix
}

/// The set as a `FieldsV1` tree.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for e in path {
            node = node.entry(e.clone()).or_insert_with(|| Value::Object(Map::new())).as_object_mut().unwrap();
        }
        node.insert(".".into(), Value::Object(Map::new()));
    }
    collapse(&mut root);
    Value::Object(root)
}

/// A node whose only key is `"."` becomes `{}` (a leaf member).
fn collapse(node: &mut Map<String, Value>) {
    for child in node.values_mut() {
        if let Value::Object(c) = child {
            if c.len() == 1 && c.contains_key(".") {
                c.clear();
            } else {
                collapse(c);
            }
        }
    }
}

/// The set a `FieldsV1` tree encodes (anything that is not an object is skipped).
pub fn from_fields_v1(tree: &Value) -> FieldSet {
    fn walk(node: &Map<String, Value>, path: &mut FieldPath, out: &mut FieldSet) {
        for (e, child) in node {
            if e == "." {
                out.insert(path.clone());
                continue;
            }
            let Value::Object(c) = child else { continue };
            path.push(e.clone());
            if c.is_empty() {
                out.insert(path.clone());
            } else {
                walk(c, path, out);
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Value::Object(m) = tree {
        walk(m, &mut Vec::new(), &mut out);
    }
    out
}

/// A path as the real server prints it in conflicts: `.spec.replicas`,
/// `.spec.containers[name="app"].image`, `.metadata.finalizers[="a"]`, `.spec.args[0]`.
pub fn display(path: &[String]) -> String {
    let mut s = String::new();
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = e.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// Whether list item `item` (at index `i`) is the one element `e` names.
fn is_item(e: &str, item: &Value, i: usize) -> bool {
    if let Some(k) = e.strip_prefix("k:") {
        let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
        !keys.is_empty() && keys.iter().all(|(k, v)| item.get(k) == Some(v))
    } else if let Some(v) = e.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
    } else {
        e.strip_prefix("i:").and_then(|n| n.parse::<usize>().ok()) == Some(i)
    }
}

/// The value at `path`, if there is one.
pub fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, e| match (v, e.strip_prefix("f:")) {
        (Value::Object(m), Some(f)) => m.get(f),
        (Value::Array(items), None) => items.iter().enumerate().find(|(i, it)| is_item(e, it, *i)).map(|(_, it)| it),
        _ => None,
    })
}

/// Removes the value at `path` (and everything below it); false if there was none.
pub fn remove(v: &mut Value, path: &[String]) -> bool {
    let Some((last, parent)) = path.split_last() else { return false };
    let mut node = v;
    for e in parent {
        node = match (node, e.strip_prefix("f:")) {
            (Value::Object(m), Some(f)) => match m.get_mut(f) {
                Some(n) => n,
                None => return false,
            },
            (Value::Array(items), None) => match items.iter().enumerate().position(|(i, it)| is_item(e, it, i)) {
                Some(i) => &mut items[i],
                None => return false,
            },
            _ => return false,
        };
    }
    match (node, last.strip_prefix("f:")) {
        (Value::Object(m), Some(f)) => m.remove(f).is_some(),
        (Value::Array(items), None) => match items.iter().enumerate().position(|(i, it)| is_item(last, it, i)) {
            Some(i) => {
                items.remove(i);
                true
            }
            None => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &[&str]) -> FieldPath {
        s.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_config_owns_its_leaves_and_keyed_items() {
        let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "app", "image": "i"}]}}}});
        let set = config_set("Deployment", &cfg);
        let tree = to_fields_v1(&set);
        assert_eq!(
            tree,
            json!({
            "f:metadata": {"f:labels": {"f:a": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
        );
        assert_eq!(from_fields_v1(&tree), set);
    }

    #[test]
    fn an_update_owns_what_it_changed_and_new_maps() {
        let old = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        let new = json!({"metadata": {"name": "c", "labels": {"x": "y"}}, "data": {"a": "2"}, "immutable": false});
        let (changed, removed) = diff("ConfigMap", &old, &new);
        assert_eq!(
            to_fields_v1(&changed),
            json!({"f:data": {"f:a": {}}, "f:immutable": {},
            "f:metadata": {"f:labels": {".": {}, "f:x": {}}}})
        );
        assert!(removed.is_empty());
        let (_, removed) = diff("ConfigMap", &new, &old);
        assert_eq!(removed, [p(&["f:immutable"]), p(&["f:metadata", "f:labels"])].into_iter().collect());
    }

    #[test]
    fn paths_read_print_and_remove() {
        let mut v =
            json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"containers": [{"name": "x", "image": "i"}]}});
        let img = p(&["f:spec", "f:containers", "k:{\"name\":\"x\"}", "f:image"]);
        assert_eq!(get(&v, &img), Some(&json!("i")));
        assert_eq!(display(&img), ".spec.containers[name=\"x\"].image");
        let fin = p(&["f:metadata", "f:finalizers", "v:\"a\""]);
        assert_eq!(display(&fin), ".metadata.finalizers[=\"a\"]");
        assert!(remove(&mut v, &fin));
        assert!(remove(&mut v, &img));
        assert_eq!(v, json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "x"}]}}));
        assert!(!remove(&mut v, &img));
    }
}
