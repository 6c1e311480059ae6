//! The resource types the fake serves: the built-ins (Namespace, ConfigMap, Secret, Pod, Service,
//! Deployment, Lease, Event, CustomResourceDefinition) and the kinds of every
//! CustomResourceDefinition created through the store, served from the moment the CRD commits
//! until it is deleted (as the real server's apiextensions handler does; custom resources are
//! validated and pruned by a subset of their schema: [`crate::schema`]).

use serde_json::Value;

use crate::introspect::ObjectRef;
use crate::status::{ApiError, What};

/// One served resource at one group/version: what discovery lists and what the store keys on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// The API group, `""` for the core group.
    pub group: String,
    /// The version (`v1`, `v1beta1`).
    pub version: String,
    /// The plural resource name used in URLs (`configmaps`).
    pub plural: String,
    /// The singular name (`configmap`).
    pub singular: String,
    /// The kind (`ConfigMap`).
    pub kind: String,
    /// Namespaced (true) or cluster-scoped (false).
    pub namespaced: bool,
    /// Whether `/status` is served; if so the main endpoint keeps the stored status and `/status`
    /// keeps everything but the status.
    pub status_subresource: bool,
    /// Short names for discovery (`cm`).
    pub short_names: Vec<String>,
    /// Whether a PUT without `metadata.resourceVersion` is accepted (the type's strategy
    /// `AllowUnconditionalUpdate`; false for Leases, CRDs and custom resources).
    pub allow_unconditional_update: bool,
    /// Field selector labels beyond `metadata.name` and `metadata.namespace` (`spec.nodeName`).
    pub field_selectors: Vec<String>,
    /// Whether the real server maintains `metadata.generation` for this type (Deployments, Pods,
    /// CRDs and custom resources do; ConfigMaps, Secrets, Leases, Namespaces, Services and Events
    /// carry none).
    pub tracks_generation: bool,
    /// The CustomResourceDefinition serving this type (`None` for built-ins).
    pub crd: Option<String>,
    /// The version's `schema.openAPIV3Schema` (custom resources only): what
    /// [`crate::schema::validate`] checks and prunes by.
    pub schema: Option<Value>,
}

impl ResourceType {
    /// Whether `DELETE` on the collection is served: every type but Namespace (measured on
    /// kube-apiserver v1.37.2: 405 `MethodNotAllowed`, and discovery leaves the verb out).
    pub fn deletecollection(&self) -> bool {
        !(self.group.is_empty() && self.kind == "Namespace")
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `<Kind>List`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// `plural` for the core group, `plural.group` otherwise (`leases.coordination.k8s.io`): the
    /// storage key, version-independent.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// `Kind` for the core group, `Kind.group` otherwise, as `Invalid` messages name kinds.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() { self.kind.clone() } else { format!("{}.{}", self.kind, self.group) }
    }

    /// The object named `name`, for error messages.
    pub fn what<'a>(&'a self, name: &'a str) -> What<'a> {
        What { group: &self.group, resource: &self.plural, name }
    }

    /// The [`ObjectRef`] of an object of this type.
    pub fn object_ref(&self, ns: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef { resource: self.qualified(), namespace: ns.unwrap_or("").to_string(), name: name.to_string() }
    }

    /// Whether this is `customresourcedefinitions.apiextensions.k8s.io`.
    pub fn is_crd(&self) -> bool {
        self.group == "apiextensions.k8s.io" && self.plural == "customresourcedefinitions"
    }

    /// Whether this is `leases.coordination.k8s.io`.
    pub fn is_lease(&self) -> bool {
        self.group == "coordination.k8s.io" && self.plural == "leases"
    }

    /// Whether this is the core `namespaces`.
    pub fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.plural == "namespaces"
    }
}

/// A group for discovery: its versions (preferred first) and each version's resource types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiGroup {
    /// The group name, `""` for the core group.
    pub name: String,
    /// The versions, sorted by Kubernetes version priority (`v2` > `v1` > `v1beta2` > `v1beta1` >
    /// `v1alpha1` > others alphabetically); the first is the preferred version.
    pub versions: Vec<ApiGroupVersion>,
}

impl ApiGroup {
    /// The preferred version (the first).
    pub fn preferred_version(&self) -> &str {
        &self.versions[0].version
    }
}

/// One version of a group and its resource types (sorted by plural).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiGroupVersion {
    /// `v1`.
    pub version: String,
    /// The types served at this version.
    pub resources: Vec<ResourceType>,
}

/// The served types: the built-ins, then CRD kinds in creation order.
#[derive(Clone, Debug)]
pub struct Registry {
    types: Vec<ResourceType>,
}

struct Builtin {
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
    short: &'static [&'static str],
    unconditional: bool,
    fields: &'static [&'static str],
    generation: bool,
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        status: true,
        short: &["ns"],
        unconditional: true,
        fields: &["status.phase"],
        generation: false,
    },
    Builtin {
        group: "",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        status: false,
        short: &["cm"],
        unconditional: true,
        fields: &[],
        generation: false,
    },
    Builtin {
        group: "",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        status: false,
        short: &[],
        unconditional: true,
        fields: &["type"],
        generation: false,
    },
    Builtin {
        group: "",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        status: true,
        short: &["po"],
        unconditional: true,
        fields: POD_FIELDS,
        generation: true,
    },
    Builtin {
        group: "",
        plural: "services",
        kind: "Service",
        namespaced: true,
        status: true,
        short: &["svc"],
        unconditional: true,
        fields: &["spec.clusterIP", "spec.type"],
        generation: false,
    },
    Builtin {
        group: "apps",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
        status: true,
        short: &["deploy"],
        unconditional: true,
        fields: &[],
        generation: true,
    },
    Builtin {
        group: "coordination.k8s.io",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        status: false,
        short: &[],
        unconditional: false,
        fields: &[],
        generation: false,
    },
    Builtin {
        group: "events.k8s.io",
        plural: "events",
        kind: "Event",
        namespaced: true,
        status: false,
        short: &["ev"],
        unconditional: true,
        fields: EVENT_FIELDS,
        generation: false,
    },
    Builtin {
        group: "apiextensions.k8s.io",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        status: true,
        short: &["crd", "crds"],
        unconditional: false,
        fields: &[],
        generation: true,
    },
];

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

impl Builtin {
    fn resource_type(&self) -> ResourceType {
        ResourceType {
            group: self.group.to_string(),
            version: "v1".to_string(),
            plural: self.plural.to_string(),
            singular: self.kind.to_lowercase(),
            kind: self.kind.to_string(),
            namespaced: self.namespaced,
            status_subresource: self.status,
            short_names: strings(self.short),
            allow_unconditional_update: self.unconditional,
            field_selectors: strings(self.fields),
            tracks_generation: self.generation,
            schema: None,
            crd: None,
        }
    }
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::builtin()
    }
}

impl Registry {
    /// The built-in types only.
    pub fn builtin() -> Registry {
        Registry { types: BUILTINS.iter().map(Builtin::resource_type).collect() }
    }

    /// Every served type (built-ins first, then CRD kinds).
    pub fn all(&self) -> &[ResourceType] {
        &self.types
    }

    /// The type served at `/apis/{group}/{version}/{plural}` (`group` `""` for `/api/v1`).
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// The type of a kind at a group/version (`("apps", "v1", "Deployment")`).
    pub fn find_kind(&self, group: &str, version: &str, kind: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.kind == kind)
    }

    /// The groups for discovery, the core group (`""`) first, then named groups in the order
    /// they were first served; versions sorted by Kubernetes version priority.
    pub fn groups(&self) -> Vec<ApiGroup> {
        let mut groups: Vec<ApiGroup> = Vec::new();
        for t in &self.types {
            let group = match groups.iter_mut().find(|g| g.name == t.group) {
                Some(g) => g,
                None => {
                    groups.push(ApiGroup { name: t.group.clone(), versions: Vec::new() });
                    groups.last_mut().expect("just pushed")
                }
            };
            match group.versions.iter_mut().find(|v| v.version == t.version) {
                Some(v) => v.resources.push(t.clone()),
                None => group.versions.push(ApiGroupVersion { version: t.version.clone(), resources: vec![t.clone()] }),
            }
        }
        for g in &mut groups {
            g.versions.sort_by_key(|v| version_priority(&v.version));
            for v in &mut g.versions {
                v.resources.sort_by(|a, b| a.plural.cmp(&b.plural));
            }
        }
        groups
    }

    /// Serves the kinds of a CustomResourceDefinition (the whole object as stored): one type per
    /// served version. Replaces what the same CRD served before (an update). Errors: 422
    /// `Invalid` for a CRD missing `spec.group`, `spec.names.plural`/`kind`, `spec.scope` or
    /// served versions, or whose name is not `plural.group`.
    pub fn add_crd(&mut self, crd: &Value) -> Result<Vec<ResourceType>, ApiError> {
        let types = crd_types(crd)?;
        let name = types[0].crd.clone().unwrap_or_default();
        self.remove_crd(&name);
        self.types.extend(types.iter().cloned());
        Ok(types)
    }

    /// Stops serving the kinds of the CRD named `name`; returns the types removed.
    pub fn remove_crd(&mut self, name: &str) -> Vec<ResourceType> {
        let (gone, kept) = std::mem::take(&mut self.types).into_iter().partition(|t| t.crd.as_deref() == Some(name));
        self.types = kept;
        gone
    }
}

/// A sort key: GA versions first (higher major first), then beta, then alpha (higher first),
/// then non-Kubernetes-looking versions alphabetically (apimachinery's `CompareKubeAwareVersionStrings`).
pub fn version_priority(v: &str) -> (u8, u64, u64, String) {
    let parsed = v.strip_prefix('v').and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((0, major, 0));
        }
        for (level, prefix) in [(1u8, "beta"), (2u8, "alpha")] {
            if let Some(n) = tail.strip_prefix(prefix) {
                let minor: u64 = n.parse().ok()?;
                return Some((level, major, minor));
            }
        }
        None
    });
    match parsed {
        Some((level, major, minor)) => (level, u64::MAX - major, u64::MAX - minor, String::new()),
        None => (3, 0, 0, v.to_string()),
    }
}

fn crd_invalid(name: &str, field: &str, message: &str) -> ApiError {
    let what = What { group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name };
    ApiError::invalid("CustomResourceDefinition.apiextensions.k8s.io", what, field, message)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The types a CRD serves (one per served version), or 422 when it is malformed.
pub fn crd_types(crd: &Value) -> Result<Vec<ResourceType>, ApiError> {
    let name = str_at(crd, &["metadata", "name"]).unwrap_or("");
    let required =
        |path: &[&str], field: &str| str_at(crd, path).ok_or_else(|| crd_invalid(name, field, "Required value"));
    let group = required(&["spec", "group"], "spec.group")?;
    let plural = required(&["spec", "names", "plural"], "spec.names.plural")?;
    let kind = required(&["spec", "names", "kind"], "spec.names.kind")?;
    let scope = required(&["spec", "scope"], "spec.scope")?;
    if name != format!("{plural}.{group}") {
        return Err(crd_invalid(name, "metadata.name", "must be spec.names.plural+\".\"+spec.group"));
    }
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            let msg = format!("Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\"");
            return Err(crd_invalid(name, "spec.scope", &msg));
        }
    };
    let names = &crd["spec"]["names"];
    let singular = str_at(names, &["singular"]).map(str::to_string).unwrap_or_else(|| kind.to_lowercase());
    let short_names: Vec<String> = names["shortNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let versions = crd["spec"]["versions"].as_array().cloned().unwrap_or_default();
    let types: Vec<ResourceType> = versions
        .iter()
        .filter(|v| v["served"].as_bool().unwrap_or(false))
        .filter_map(|v| {
            let version = v["name"].as_str()?.to_string();
            let fields = v["selectableFields"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f["jsonPath"].as_str())
                        .map(|p| p.trim_start_matches('.').to_string())
                        .collect()
                })
                .unwrap_or_default();
            Some(ResourceType {
                group: group.to_string(),
                version,
                plural: plural.to_string(),
                singular: singular.clone(),
                kind: kind.to_string(),
                namespaced,
                status_subresource: v["subresources"].get("status").is_some(),
                short_names: short_names.clone(),
                allow_unconditional_update: false,
                field_selectors: fields,
                tracks_generation: true,
                crd: Some(name.to_string()),
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            })
        })
        .collect();
    if types.is_empty() {
        return Err(crd_invalid(
            name,
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    Ok(types)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "databases.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "databases", "kind": "Database", "shortNames": ["db"]},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                     "selectableFields": [{"jsonPath": ".spec.engine"}]},
                    {"name": "v0", "served": false, "storage": false}]}})
    }

    #[test]
    fn builtins_are_served_with_their_names() {
        let r = Registry::builtin();
        let cm = r.find("", "v1", "configmaps").unwrap();
        assert_eq!(
            (cm.api_version(), cm.list_kind(), cm.qualified()),
            ("v1".into(), "ConfigMapList".into(), "configmaps".into())
        );
        let lease = r.find("coordination.k8s.io", "v1", "leases").unwrap();
        assert_eq!(lease.qualified(), "leases.coordination.k8s.io");
        assert_eq!(lease.api_version(), "coordination.k8s.io/v1");
        assert!(!lease.allow_unconditional_update && lease.is_lease());
        assert!(!r.find("", "v1", "namespaces").unwrap().namespaced);
        assert!(r.find("apps", "v1", "deployments").unwrap().status_subresource);
        assert!(r.find("apps", "v1", "pods").is_none());
        assert_eq!(r.find_kind("", "v1", "Secret").unwrap().plural, "secrets");
    }

    #[test]
    fn groups_list_core_first_and_versions_by_priority() {
        let mut r = Registry::builtin();
        r.add_crd(&crd()).unwrap();
        let groups = r.groups();
        assert_eq!(groups[0].name, "");
        assert!(groups[0].versions[0].resources.iter().any(|t| t.plural == "pods"));
        let ex = groups.iter().find(|g| g.name == "example.com").unwrap();
        let versions: Vec<&str> = ex.versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(versions, ["v1", "v1alpha1"]);
        assert_eq!(ex.preferred_version(), "v1");
    }

    #[test]
    fn a_crd_serves_its_versions_until_removed() {
        let mut r = Registry::builtin();
        let types = r.add_crd(&crd()).unwrap();
        assert_eq!(types.len(), 2);
        let v1 = r.find("example.com", "v1", "databases").unwrap();
        assert!(v1.status_subresource && v1.namespaced && !v1.allow_unconditional_update);
        assert_eq!(v1.field_selectors, ["spec.engine"]);
        assert_eq!(v1.singular, "database");
        assert!(!r.find("example.com", "v1alpha1", "databases").unwrap().status_subresource);
        assert!(r.find("example.com", "v0", "databases").is_none());
        r.add_crd(&crd()).unwrap();
        assert_eq!(r.all().iter().filter(|t| t.plural == "databases").count(), 2);
        assert_eq!(r.remove_crd("databases.example.com").len(), 2);
        assert!(r.find("example.com", "v1", "databases").is_none());
    }

    #[test]
    fn a_malformed_crd_is_invalid() {
        let mut bad = crd();
        bad["metadata"]["name"] = json!("db.example.com");
        let e = Registry::builtin().add_crd(&bad).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("metadata.name"), "{}", e.message);
        let mut bad = crd();
        bad["spec"]["scope"] = json!("Everywhere");
        assert_eq!(crd_types(&bad).unwrap_err().code, 422);
    }

    #[test]
    fn version_priority_orders_like_kubernetes() {
        let mut v = vec!["v1alpha1", "foo", "v1", "v2beta1", "v1beta2", "v2", "v1beta1", "bar"];
        v.sort_by_key(|s| version_priority(s));
        assert_eq!(v, ["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "bar", "foo"]);
    }
}
