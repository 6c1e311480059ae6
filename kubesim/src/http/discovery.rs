//! Discovery documents (the unaggregated forms `kube::discovery` reads): `/api` (APIVersions),
//! `/apis` (APIGroupList), `/apis/{group}` (APIGroup), `/api/v1` and `/apis/{group}/{version}`
//! (APIResourceList), and `/version`.

use serde_json::{Value, json};

use crate::resource::{ApiGroup, Registry};

/// `/version`, shaped as the real server's.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-kubesim", "gitCommit": "kubesim",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26",
        "compiler": "gc", "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": "kube-apiserver:6443"}]})
}

fn group_json(g: &ApiGroup) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{}/{}", g.name, v.version), "version": v.version}))
        .collect();
    json!({
        "name": g.name,
        "versions": versions,
        "preferredVersion": {"groupVersion": format!("{}/{}", g.name, g.preferred_version()), "version": g.preferred_version()},
    })
}

/// `/apis`.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry.groups().iter().filter(|g| !g.name.is_empty()).map(group_json).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, `None` when not served.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let g = groups.iter().find(|g| g.name == name && !name.is_empty())?;
    let mut v = group_json(g);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

/// Every served type takes every verb.
const VERBS: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// The verbs of a custom resource, in the order the apiextensions handler lists them.
const CR_VERBS: [&str; 8] = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"];

/// `/api/v1`, `/apis/{group}/{version}`; `None` when not served.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let groups = registry.groups();
    let g = groups.iter().find(|g| g.name == group)?;
    let v = g.versions.iter().find(|v| v.version == version)?;
    let mut list = Vec::new();
    for t in &v.resources {
        let verbs = if t.crd.is_some() { CR_VERBS } else { VERBS };
        let mut r = json!({
            "name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
            "verbs": verbs.iter().filter(|v| **v != "deletecollection" || t.deletecollection()).collect::<Vec<_>>(),
            "storageVersionHash": "",
        });
        // `shortNames` is `omitempty`.
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        list.push(r);
        if t.status_subresource {
            list.push(json!({
                "name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
                "kind": t.kind, "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_the_served_types() {
        let r = Registry::builtin();
        let g = groups(&r);
        let names: Vec<&str> = g["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"apps") && names.contains(&"coordination.k8s.io") && !names.contains(&""));
        let core = resources(&r, "", "v1").unwrap();
        let plurals: Vec<&str> =
            core["resources"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
        assert!(plurals.contains(&"configmaps") && plurals.contains(&"pods/status"));
        assert_eq!(group(&r, "apps").unwrap()["preferredVersion"]["version"], "v1");
        assert!(resources(&r, "apps", "v9").is_none() && group(&r, "nope").is_none());
    }
}
