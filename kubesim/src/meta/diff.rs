//! A short, stable description of what a write changed, for [`crate::introspect::Write::diff`]:
//! changed leaf paths in key order, `path: old -> new` (`<none>` for absent), values cut at 40
//! characters, at most 6 paths then `(+N more)`. `metadata.resourceVersion` and
//! `metadata.managedFields` are left out.

use serde_json::Value;

const MAX_PATHS: usize = 6;
const MAX_VALUE: usize = 40;

fn show(v: Option<&Value>) -> String {
    match v {
        None => "<none>".to_string(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > MAX_VALUE {
                format!("{}…", s.chars().take(MAX_VALUE).collect::<String>())
            } else {
                s
            }
        }
    }
}

fn ignored(path: &str) -> bool {
    path == "metadata.resourceVersion" || path == "metadata.managedFields"
}

fn walk(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<String>) {
    if ignored(path) || old == new {
        return;
    }
    if let (Some(Value::Object(a)), Some(Value::Object(b))) = (old, new) {
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            walk(&p, a.get(k), b.get(k), out);
        }
        return;
    }
    out.push(format!("{path}: {} -> {}", show(old), show(new)));
}

/// `data.password: "a" -> "b", metadata.labels.x: <none> -> "y"`; `created` / `deleted` when one
/// side is missing; `no change` when nothing but the resourceVersion changed.
pub fn describe(old: Option<&Value>, new: Option<&Value>) -> String {
    match (old, new) {
        (None, Some(_)) => "created".to_string(),
        (Some(_), None) => "deleted".to_string(),
        (None, None) => String::new(),
        (Some(a), Some(b)) => {
            let mut out = Vec::new();
            walk("", Some(a), Some(b), &mut out);
            if out.is_empty() {
                return "no change".to_string();
            }
            let more = out.len().saturating_sub(MAX_PATHS);
            out.truncate(MAX_PATHS);
            let mut s = out.join(", ");
            if more > 0 {
                s.push_str(&format!(" (+{more} more)"));
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diffs_name_changed_leaves() {
        let a = json!({"metadata": {"resourceVersion": "1", "labels": {"x": "1"}}, "data": {"p": "a"}});
        let b = json!({"metadata": {"resourceVersion": "2", "labels": {"y": "2"}}, "data": {"p": "b"}});
        assert_eq!(
            describe(Some(&a), Some(&b)),
            "data.p: \"a\" -> \"b\", metadata.labels.x: \"1\" -> <none>, metadata.labels.y: <none> -> \"2\""
        );
        assert_eq!(describe(Some(&a), Some(&a)), "no change");
        assert_eq!(describe(None, Some(&a)), "created");
        let long = json!({"data": {"p": "x".repeat(100)}});
        assert!(describe(Some(&a), Some(&long)).contains('…'));
    }
}
