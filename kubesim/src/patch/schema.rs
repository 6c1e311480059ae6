//! What the patches need to know of a type's schema: how each list merges, and which objects
//! are maps (rather than structs) for managedFields. Both come from the Kubernetes Go types'
//! tags (`patchStrategy`/`patchMergeKey` for strategic merge, `listType`/`listMapKey` for
//! server-side apply) for the built-ins kubesim serves; a documented subset, keyed by the field's
//! name and its parent's (see the table in [`list_type`]).
//!
//! Custom resources have no tags here (kubesim keeps no CRD schema): only `metadata`'s lists
//! are special; every other list is atomic, every object a struct. The real server reads
//! `x-kubernetes-list-type` from the CRD's schema instead: a known difference.

/// How a list merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole (strategic: no `patchStrategy`; SSA: `listType=atomic`).
    Atomic,
    /// A set of scalars merged by union (strategic `patchStrategy=merge` on a primitive list,
    /// SSA `listType=set`): `metadata.finalizers`.
    Set,
    /// Items are objects merged by this key field (`patchMergeKey`, SSA `listMapKey`).
    Map(&'static str),
}

/// The kinds kubesim serves as built-ins (strategic merge works on these only).
pub const BUILTIN_KINDS: &[&str] =
    &["Namespace", "ConfigMap", "Secret", "Pod", "Service", "Deployment", "Lease", "Event", "CustomResourceDefinition"];

/// Whether `kind` is one of [`BUILTIN_KINDS`].
pub fn is_builtin(kind: &str) -> bool {
    BUILTIN_KINDS.contains(&kind)
}

/// How the list at `names` (the field names from the object's root, list items skipped:
/// `["spec", "template", "spec", "containers", "env"]`) merges in `kind`.
///
/// | field | merge |
/// |---|---|
/// | `metadata.finalizers` | set |
/// | `metadata.ownerReferences` | by `uid` |
/// | `containers`, `initContainers`, `ephemeralContainers` | by `name` |
/// | a container's `ports` | by `containerPort` |
/// | Service `spec.ports` | by `port` |
/// | `env`, `volumes`, `imagePullSecrets`, `schedulingGates`, `resourceClaims` | by `name` |
/// | `volumeMounts` | by `mountPath` |
/// | `volumeDevices` | by `devicePath` |
/// | `hostAliases`, `podIPs`, `hostIPs` | by `ip` |
/// | `topologySpreadConstraints` | by `topologyKey` |
/// | `conditions` | by `type` |
/// | anything else (`tolerations`, `args`, `command`, `envFrom`, …) | atomic |
///
/// Differences: the real SSA keys a container port by `containerPort` and `protocol`, a
/// Service port by `port` and `protocol`; kubesim by the first only (as strategic merge does).
pub fn list_type(kind: &str, names: &[&str]) -> ListType {
    let Some((&last, rest)) = names.split_last() else { return ListType::Atomic };
    let parent = rest.last().copied().unwrap_or("");
    if parent == "metadata" && rest.len() == 1 {
        match last {
            "finalizers" => return ListType::Set,
            "ownerReferences" => return ListType::Map("uid"),
            _ => {}
        }
    }
    if !is_builtin(kind) {
        return ListType::Atomic;
    }
    match last {
        "containers" | "initContainers" | "ephemeralContainers" => ListType::Map("name"),
        "ports" if kind == "Service" && names == ["spec", "ports"] => ListType::Map("port"),
        "ports" if matches!(parent, "containers" | "initContainers" | "ephemeralContainers") => {
            ListType::Map("containerPort")
        }
        "env" | "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims" => ListType::Map("name"),
        "volumeMounts" => ListType::Map("mountPath"),
        "volumeDevices" => ListType::Map("devicePath"),
        "hostAliases" | "podIPs" | "hostIPs" => ListType::Map("ip"),
        "topologySpreadConstraints" => ListType::Map("topologyKey"),
        "conditions" => ListType::Map("type"),
        _ => ListType::Atomic,
    }
}

/// Whether the object at `names` is a map (`map[string]T` in Go) rather than a struct: an
/// `Update` that creates a map owns the map itself too (`".": {}` in fieldsV1), as the real
/// server's managedFields show for `data` or `metadata.labels`; a struct is never owned itself.
pub fn is_map(kind: &str, names: &[&str]) -> bool {
    let Some(&last) = names.last() else { return false };
    match last {
        "labels" | "annotations" => true,
        _ if !is_builtin(kind) => false,
        "data" | "binaryData" | "stringData" | "matchLabels" | "nodeSelector" | "limits" | "requests" => true,
        "selector" => kind == "Service" && names == ["spec", "selector"],
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_merge_by_their_keys() {
        let c = ["spec", "template", "spec", "containers"];
        assert_eq!(list_type("Deployment", &c), ListType::Map("name"));
        assert_eq!(list_type("Pod", &["spec", "containers", "ports"]), ListType::Map("containerPort"));
        assert_eq!(list_type("Service", &["spec", "ports"]), ListType::Map("port"));
        assert_eq!(list_type("Pod", &["spec", "tolerations"]), ListType::Atomic);
        assert_eq!(list_type("Database", &["metadata", "finalizers"]), ListType::Set);
        assert_eq!(list_type("Database", &["spec", "containers"]), ListType::Atomic);
        assert_eq!(list_type("Namespace", &["spec", "finalizers"]), ListType::Atomic);
    }

    #[test]
    fn maps_are_told_from_structs() {
        assert!(is_map("ConfigMap", &["data"]));
        assert!(is_map("Database", &["metadata", "labels"]));
        assert!(!is_map("Deployment", &["spec", "selector"]));
        assert!(is_map("Service", &["spec", "selector"]));
    }
}
