//! URL paths → what they name: discovery documents, or a resource request (group, version,
//! plural, namespace, name, subresource), as the real server's request-info resolver reads them.

use crate::resource::Registry;

/// What a path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: every named group.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`: the resources of a group version.
    Resources(String, String),
    /// A resource request.
    Resource(ResourcePath),
    /// Anything else (404).
    Unknown,
}

/// A resource request's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    /// `""` for the core group.
    pub group: String,
    /// `v1`.
    pub version: String,
    /// `configmaps`.
    pub plural: String,
    /// From `/namespaces/{ns}/…`.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: Option<String>,
    /// `status`, or another subresource (404).
    pub sub: Option<String>,
    /// Under the legacy `/watch/` prefix.
    pub watch_prefix: bool,
}

/// Resolves `path` (`registry` tells a namespaced plural from a Namespace's subresource:
/// `/api/v1/namespaces/x/status` is the Namespace `x`'s status, `/api/v1/namespaces/x/pods` the
/// Pods in `x`).
pub fn parse(path: &str, registry: &Registry) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", v] => Route::Resources(String::new(), (*v).to_string()),
        ["api", v, rest @ ..] => resource("", v, rest, registry),
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group((*g).to_string()),
        ["apis", g, v] => Route::Resources((*g).to_string(), (*v).to_string()),
        ["apis", g, v, rest @ ..] => resource(g, v, rest, registry),
        _ => Route::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str], registry: &Registry) -> Route {
    let (watch_prefix, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let is_namespaced_plural = |plural: &str| registry.find(group, version, plural).is_some_and(|t| t.namespaced);
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if is_namespaced_plural(plural) => {
            (Some((*ns).to_string()), [&[*plural][..], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let s = |i: usize| rest.get(i).map(|x| (*x).to_string());
    match rest.len() {
        1..=3 => Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            plural: rest[0].to_string(),
            namespace,
            name: s(1),
            sub: s(2),
            watch_prefix,
        }),
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(path: &str) -> Route {
        parse(path, &Registry::builtin())
    }

    #[test]
    fn paths_resolve_as_the_real_server_reads_them() {
        let Route::Resource(p) = r("/api/v1/namespaces/default/configmaps/a") else { panic!() };
        assert_eq!(
            (p.group.as_str(), p.plural.as_str(), p.namespace.as_deref(), p.name.as_deref()),
            ("", "configmaps", Some("default"), Some("a"))
        );
        let Route::Resource(p) = r("/api/v1/namespaces/x/status") else { panic!() };
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref(), p.sub.as_deref(), p.namespace),
            ("namespaces", Some("x"), Some("status"), None)
        );
        let Route::Resource(p) = r("/apis/coordination.k8s.io/v1/watch/namespaces/d/leases") else { panic!() };
        assert!(p.watch_prefix && p.name.is_none() && p.namespace.as_deref() == Some("d"));
        let Route::Resource(p) = r("/api/v1/pods") else { panic!() };
        assert_eq!((p.plural.as_str(), p.namespace), ("pods", None));
        assert_eq!(r("/apis/apps/v1"), Route::Resources("apps".into(), "v1".into()));
        assert_eq!(r("/api"), Route::CoreVersions);
        assert_eq!(r("/nope"), Route::Unknown);
        assert_eq!(r("/api/v1/a/b/c/d/e"), Route::Unknown);
    }
}
