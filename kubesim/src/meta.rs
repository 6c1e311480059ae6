//! Object metadata rules, as functions on `serde_json::Value` objects (the real server's
//! `rest.BeforeCreate` / `rest.BeforeUpdate` / `rest.BeforeDelete` and the types' strategies):
//!
//! - create: the body's `apiVersion`/`kind` must match the URL (400; missing ones are filled in);
//!   `metadata.resourceVersion` must be empty (500 with an empty reason, `resourceVersion should
//!   not be set on objects to be created`, as the real storage layer's plain error comes out); the namespace comes from the URL (400 if
//!   the body names another, cleared for cluster-scoped types); `generateName` + 5 random
//!   characters when the name is empty (422 when both are); the name is validated (422); uid,
//!   `creationTimestamp` (RFC 3339, seconds) and, for types that track it, `generation: 1` are set;
//!   `deletionTimestamp`, `deletionGracePeriodSeconds` are dropped; with a status subresource the
//!   status is reset (Pods: `phase: Pending`); built-in defaults are filled ([`defaults`]).
//! - update: name and namespace must match the URL (400); the uid, if given, must match (409
//!   `Precondition failed: UID in precondition: …`); `creationTimestamp`, `generation` and a set
//!   `deletionTimestamp` are kept from the stored object, a new `deletionTimestamp` is 422 (field is
//!   immutable); no finalizer may be added once `deletionTimestamp` is set (422 Forbidden); on the
//!   main endpoint of a type with a status subresource the stored status is kept; on `/status`
//!   custom resources keep everything but `status` (and `managedFields`) from the stored object,
//!   built-ins everything outside `metadata` and `status` plus a few metadata fields per type
//!   (the real status strategies: Deployment labels; Pod ownerReferences; CRD labels,
//!   annotations, finalizers, ownerReferences);
//!   `generation` increments when anything outside `metadata` (and `status` when it is a
//!   subresource) changed.

pub mod base64;
pub mod defaults;
mod diff;
mod names;
mod time;

use serde_json::{Map, Value, json};

use crate::resource::ResourceType;
use crate::status::ApiError;

pub use diff::describe as diff;
pub use names::{NameRule, validate as validate_name};
pub use time::{SUFFIX_ALPHABET, rfc3339, suffix, uid};

/// A 422 `Invalid` for `name` of type `ty` with causes `(reason, field, message)`, worded as the
/// real server's: `Lease.coordination.k8s.io "x" is invalid: metadata.resourceVersion: Invalid
/// value: 0x0: must be specified for an update`.
pub fn invalid(ty: &ResourceType, name: &str, causes: &[(&str, &str, String)]) -> ApiError {
    let listed: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
    let joined = if listed.len() == 1 { listed[0].clone() } else { format!("[{}]", listed.join(", ")) };
    let causes: Vec<Value> = causes.iter().map(|(r, f, m)| json!({"reason": r, "message": m, "field": f})).collect();
    ApiError {
        details: {
            let mut d = crate::status::details(name, &ty.group, &ty.kind);
            d["causes"] = json!(causes);
            d
        },
        ..ApiError::new(422, "Invalid", format!("{} \"{name}\" is invalid: {joined}", ty.qualified_kind()))
    }
}

/// `metadata.name`, `""` when missing.
pub fn name_of(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or("")
}

/// `metadata.namespace`, `None` when missing or empty.
pub fn namespace_of(obj: &Value) -> Option<&str> {
    obj["metadata"]["namespace"].as_str().filter(|s| !s.is_empty())
}

/// `metadata.resourceVersion`, `None` when missing or empty.
pub fn rv_of(obj: &Value) -> Option<&str> {
    obj["metadata"]["resourceVersion"].as_str().filter(|s| !s.is_empty())
}

/// `metadata.labels` (empty when missing).
pub fn labels_of(obj: &Value) -> Map<String, Value> {
    obj["metadata"]["labels"].as_object().cloned().unwrap_or_default()
}

/// The finalizers (empty when missing).
pub fn finalizers_of(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    !obj["metadata"]["deletionTimestamp"].is_null()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("metadata is an object")
}

/// Sets `metadata.resourceVersion` to `rv` (as a string).
pub fn set_rv(obj: &mut Value, rv: u64) {
    meta_mut(obj).insert("resourceVersion".into(), json!(rv.to_string()));
}

/// Sets `apiVersion` and `kind` to the type's, as the real server serves every version it stores.
pub fn set_type(obj: &mut Value, ty: &ResourceType) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(ty.api_version()));
        map.insert("kind".into(), json!(ty.kind));
    }
}

/// 400 when the body's `apiVersion`/`kind` differ from the URL's type (missing ones pass); a
/// custom resource's wrong kind is 422 (`X.group "n" is invalid: kind: Invalid value: "X": must
/// be Kind`), as the real server's CR handler answers.
pub fn check_type(obj: &Value, ty: &ResourceType) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body of the request must be a JSON object"));
    }
    if let Some(av) = obj["apiVersion"].as_str().filter(|s| !s.is_empty())
        && av != ty.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            ty.api_version()
        )));
    }
    if let Some(kind) = obj["kind"].as_str().filter(|s| !s.is_empty())
        && kind != ty.kind
    {
        if ty.crd.is_some() {
            let name = name_of(obj);
            let msg = format!("Invalid value: \"{kind}\": must be {}", ty.kind);
            let mut e = invalid(ty, name, &[("FieldValueInvalid", "kind", msg.clone())]);
            e.message = format!("{kind}.{} \"{name}\" is invalid: kind: {msg}", ty.group);
            e.details["kind"] = json!(kind);
            return Err(e);
        }
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            ty.kind
        )));
    }
    check_decodes(obj, ty)
}

/// The decoding errors of typed fields the real server reports as 400 `BadRequest`
/// (`Lease in version "v1" cannot be handled as a Lease: parsing time …`): a Lease's
/// `acquireTime` and `renewTime` are `MicroTime`s, which need exactly six fractional digits.
fn check_decodes(obj: &Value, ty: &ResourceType) -> Result<(), ApiError> {
    let cannot = |why: String| {
        ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {why}",
            kind = ty.kind,
            version = ty.version
        ))
    };
    if (ty.group.as_str(), ty.kind.as_str()) == ("", "Secret")
        && let Some(data) = obj["data"].as_object()
    {
        // `data` values are []byte: base64 decoded as Go's StdEncoding does.
        for v in data.values() {
            if let Some(at) = v.as_str().and_then(base64::corrupt_at) {
                return Err(cannot(format!("illegal base64 data at input byte {at}")));
            }
        }
    }
    if (ty.group.as_str(), ty.kind.as_str()) != ("coordination.k8s.io", "Lease") {
        return Ok(());
    }
    for field in ["acquireTime", "renewTime"] {
        if let Some(v) = obj["spec"][field].as_str()
            && let Some(why) = time::micro_time_error(v)
        {
            return Err(cannot(why));
        }
    }
    Ok(())
}

fn check_namespace(obj: &Value, ty: &ResourceType, ns: Option<&str>) -> Result<(), ApiError> {
    if ty.namespaced
        && let Some(body_ns) = namespace_of(obj)
        && Some(body_ns) != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// The naming rule of a type.
pub fn name_rule(ty: &ResourceType) -> NameRule {
    match (ty.group.as_str(), ty.plural.as_str()) {
        ("", "namespaces") => NameRule::Label1123,
        ("", "services") => NameRule::Label1035,
        _ => NameRule::Subdomain,
    }
}

/// Draws a name for a `generateName` object (the prefix cut to 58 characters, then 5 suffix
/// characters); `None` when the object has a name or no `generateName`.
pub fn generated_name(obj: &Value, rng: &mut dyn FnMut() -> u64) -> Option<String> {
    if !name_of(obj).is_empty() {
        return None;
    }
    let prefix = obj["metadata"]["generateName"].as_str().filter(|s| !s.is_empty())?;
    let cut: String = prefix.chars().take(58).collect();
    Some(format!("{cut}{}", suffix(rng)))
}

/// The time and randomness a create uses.
pub struct CreateCtx<'a> {
    /// The namespace from the URL (`None` for cluster-scoped types).
    pub ns: Option<&'a str>,
    /// The commit time, RFC 3339.
    pub now: &'a str,
    /// Randomness (uid, generateName).
    pub rng: &'a mut dyn FnMut() -> u64,
}

/// Applies the create rules (module docs) to `obj`; returns the object to store (without a
/// resourceVersion: the store sets it). The name is final: a `generateName` is resolved here.
pub fn prepare_create(ty: &ResourceType, mut obj: Value, cx: CreateCtx<'_>) -> Result<Value, ApiError> {
    check_type(&obj, ty)?;
    if rv_of(&obj).is_some() {
        // The storage layer's plain error: the real server answers 500 with an empty reason.
        return Err(ApiError::new(500, "", "resourceVersion should not be set on objects to be created"));
    }
    check_namespace(&obj, ty, cx.ns)?;
    set_type(&mut obj, ty);
    if let Some(name) = generated_name(&obj, cx.rng) {
        meta_mut(&mut obj).insert("name".into(), json!(name));
    }
    let name = name_of(&obj).to_string();
    // apimachinery's ValidateObjectMeta: generateName first (validated as a prefix: a trailing
    // '-' is allowed), then the name; every failure is one cause.
    let mut causes: Vec<(&str, String, String)> = Vec::new();
    if let Some(prefix) = obj["metadata"]["generateName"].as_str().filter(|s| !s.is_empty()) {
        let masked = match prefix.strip_suffix('-') {
            Some(head) => format!("{head}a"),
            None => prefix.to_string(),
        };
        if let Err(m) = validate_name(&masked, name_rule(ty)) {
            let m = m.replacen(&format!("{masked:?}"), &format!("{prefix:?}"), 1);
            causes.push(("FieldValueInvalid", "metadata.generateName".into(), m));
        }
    }
    if name.is_empty() {
        let msg = "Required value: name or generateName is required".to_string();
        causes.push(("FieldValueRequired", "metadata.name".into(), msg));
    } else if let Err(m) = validate_name(&name, name_rule(ty)) {
        causes.push(("FieldValueInvalid", "metadata.name".into(), m));
    }
    causes.extend(validate_fields(ty, &obj));
    if !causes.is_empty() {
        let causes: Vec<(&str, &str, String)> = causes.iter().map(|(r, f, m)| (*r, f.as_str(), m.clone())).collect();
        return Err(invalid(ty, &name, &causes));
    }
    let uid = uid(cx.rng);
    let meta = meta_mut(&mut obj);
    match (ty.namespaced, cx.ns) {
        (true, Some(ns)) => meta.insert("namespace".into(), json!(ns)),
        _ => meta.remove("namespace"),
    };
    meta.insert("uid".into(), json!(uid));
    meta.insert("creationTimestamp".into(), json!(cx.now));
    for k in ["deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink"] {
        meta.remove(k);
    }
    if ty.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if ty.status_subresource
        && let Some(map) = obj.as_object_mut()
    {
        map.remove("status");
    }
    create_status(ty, &mut obj);
    defaults::apply(&ty.group, &ty.kind, &mut obj);
    Ok(obj)
}

fn create_status(ty: &ResourceType, obj: &mut Value) {
    match (ty.group.as_str(), ty.kind.as_str()) {
        ("", "Pod") => obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"}),
        ("", "Namespace") => obj["status"] = json!({"phase": "Active"}),
        ("", "Service") => obj["status"] = json!({"loadBalancer": {}}),
        ("apps", "Deployment") => obj["status"] = json!({}),
        _ => {}
    }
}

/// Which endpoint an update came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
}

fn without(obj: &Value, keys: &[&str]) -> Value {
    let mut v = obj.clone();
    if let Some(map) = v.as_object_mut() {
        for k in keys {
            map.remove(*k);
        }
    }
    v
}

/// Whether a write from `old` to `new` bumps `metadata.generation`: anything outside `metadata`,
/// `apiVersion`, `kind` (and `status` when the type has a status subresource) changed.
pub fn spec_changed(ty: &ResourceType, old: &Value, new: &Value) -> bool {
    let keys: &[&str] = if ty.status_subresource {
        &["metadata", "status", "apiVersion", "kind"]
    } else {
        &["metadata", "apiVersion", "kind"]
    };
    without(old, keys) != without(new, keys)
}

/// Whether a write to the main endpoint of a Deployment changed its annotations: the
/// Deployment strategy bumps the generation for that too (`PrepareForUpdate` in
/// pkg/registry/apps/deployment/strategy.go, the legacy rollback annotation; measured). Its
/// status strategy does not.
fn deployment_annotations_changed(ty: &ResourceType, old: &Value, new: &Value, endpoint: Endpoint) -> bool {
    endpoint == Endpoint::Main
        && ty.group == "apps"
        && ty.kind == "Deployment"
        && old.pointer("/metadata/annotations") != new.pointer("/metadata/annotations")
}

fn check_update_identity(ty: &ResourceType, old: &Value, new: &Value, ns: Option<&str>) -> Result<(), ApiError> {
    check_type(new, ty)?;
    let (url_name, body_name) = (name_of(old), name_of(new));
    if body_name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    check_namespace(new, ty, ns)?;
    if let Some(uid) = new["metadata"]["uid"].as_str().filter(|s| !s.is_empty())
        && Some(uid) != old["metadata"]["uid"].as_str()
    {
        let cause = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            old["metadata"]["uid"].as_str().unwrap_or("")
        );
        return Err(ApiError::conflict_because(ty.what(url_name), &cause));
    }
    Ok(())
}

fn check_deletion_fields(ty: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = name_of(old);
    if !is_deleting(old) && is_deleting(new) {
        let msg = format!("Invalid value: {}: field is immutable", new["metadata"]["deletionTimestamp"]);
        return Err(invalid(ty, name, &[("FieldValueInvalid", "metadata.deletionTimestamp", msg)]));
    }
    if is_deleting(old) {
        let before = finalizers_of(old);
        let mut extra: Vec<String> = finalizers_of(new).into_iter().filter(|f| !before.contains(f)).collect();
        extra.sort();
        extra.dedup();
        if !extra.is_empty() {
            let quoted: Vec<String> = extra.iter().map(|f| format!("{f:?}")).collect();
            let msg = format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                quoted.join(", ")
            );
            return Err(invalid(ty, name, &[("FieldValueForbidden", "metadata.finalizers", msg)]));
        }
    }
    Ok(())
}

fn copy_key(from: &Value, to: &mut Value, key: &str) {
    match from.get(key) {
        Some(v) => to[key] = v.clone(),
        None => {
            to.as_object_mut().map(|m| m.remove(key));
        }
    }
}

/// What a write through `/status` keeps from the stored object: custom resources keep
/// everything but `status` and `managedFields`; built-ins keep everything outside `metadata`
/// and `status`, and of the metadata Deployments keep the labels, Pods the ownerReferences,
/// CRDs the labels, annotations, finalizers and ownerReferences (the real status strategies).
fn status_update(ty: &ResourceType, old: &Value, new: Value) -> Value {
    if ty.crd.is_some() {
        let mut kept = old.clone();
        copy_key(&new, &mut kept, "status");
        match new["metadata"].get("managedFields") {
            Some(mf) => meta_mut(&mut kept).insert("managedFields".into(), mf.clone()),
            None => meta_mut(&mut kept).remove("managedFields"),
        };
        return kept;
    }
    let mut out = old.clone();
    out["metadata"] = new["metadata"].clone();
    copy_key(&new, &mut out, "status");
    let meta_keys: &[&str] = match (ty.group.as_str(), ty.kind.as_str()) {
        ("apps", "Deployment") => &["labels"],
        ("", "Pod") => &["ownerReferences"],
        ("apiextensions.k8s.io", _) => &["labels", "annotations", "finalizers", "ownerReferences"],
        _ => &[],
    };
    for k in meta_keys {
        copy_key(&old["metadata"], &mut out["metadata"], k);
    }
    out
}

/// A Service keeps its allocated cluster IPs when an update leaves them out; changing them is
/// 422 (`spec.clusterIPs[0]: Invalid value: …: may not change once set`).
fn keep_cluster_ip(ty: &ResourceType, old: &Value, new: &mut Value) -> Result<(), ApiError> {
    if !(ty.group.is_empty() && ty.kind == "Service" && new["spec"].is_object()) {
        return Ok(());
    }
    let old_ip = &old["spec"]["clusterIP"];
    match new["spec"]["clusterIP"].as_str() {
        None | Some("") => {
            new["spec"]["clusterIP"] = old_ip.clone();
            new["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
            Ok(())
        }
        Some(ip) if old_ip.as_str().is_some_and(|o| o != ip) => {
            let msg = format!("Invalid value: []string{{\"{ip}\"}}: may not change once set");
            Err(invalid(ty, name_of(old), &[("FieldValueInvalid", "spec.clusterIPs[0]", msg)]))
        }
        Some(_) => Ok(()),
    }
}

/// ConfigMaps and Secrets with `immutable: true` refuse changes to their data and to `immutable`.
fn check_immutable_data(ty: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    let data_type = ty.group.is_empty() && (ty.kind == "ConfigMap" || ty.kind == "Secret");
    if !data_type || old["immutable"].as_bool() != Some(true) {
        return Ok(());
    }
    let name = name_of(old);
    if new["immutable"] != old["immutable"] {
        let msg = "Forbidden: field is immutable when `immutable` is set".to_string();
        return Err(invalid(ty, name, &[("FieldValueForbidden", "immutable", msg)]));
    }
    for field in ["data", "binaryData"] {
        if new[field] != old[field] {
            let msg = "Forbidden: field is immutable when `immutable` is set".to_string();
            return Err(invalid(ty, name, &[("FieldValueForbidden", field, msg)]));
        }
    }
    Ok(())
}

/// Type-specific field validation the real server runs on create and update: ConfigMap `data`
/// and `binaryData` keys and Secret `data` and `stringData` keys must match `[-._a-zA-Z0-9]+`
/// (apimachinery `IsConfigMapKey`), at most 253 characters; a `kubernetes.io/tls` Secret needs
/// `tls.crt` and `tls.key`; a Pod needs containers; a Deployment's selector must match its
/// template's labels (measured on kube-apiserver v1.37.2).
///
/// Returns `(reason, field path, message)` per failure.
pub fn validate_fields(ty: &ResourceType, obj: &Value) -> Vec<(&'static str, String, String)> {
    let mut causes = validate_keys(ty, obj);
    match (ty.group.as_str(), ty.kind.as_str()) {
        ("", "Secret") if obj["type"] == "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if obj["data"].get(key).is_none() && obj["stringData"].get(key).is_none() {
                    causes.push(("FieldValueRequired", format!("data[{key}]"), "Required value".to_string()));
                }
            }
        }
        ("", "Pod") if obj["spec"]["containers"].as_array().is_none_or(Vec::is_empty) => {
            causes.push(("FieldValueRequired", "spec.containers".into(), "Required value".into()));
        }
        ("apps", "Deployment") => {
            let wanted = obj["spec"]["selector"]["matchLabels"].as_object();
            let labels = &obj["spec"]["template"]["metadata"]["labels"];
            let matches = wanted.is_none_or(|w| w.iter().all(|(k, v)| labels.get(k) == Some(v)));
            if !matches {
                let shown = sorted_json(labels);
                causes.push((
                    "FieldValueInvalid",
                    "spec.template.metadata.labels".into(),
                    format!("Invalid value: {shown}: `selector` does not match template `labels`"),
                ));
            }
        }
        _ => {}
    }
    causes
}

/// `v` as compact JSON with object keys sorted (Go's encoding of a map).
fn sorted_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys.iter().map(|k| format!("{}:{}", json!(k), sorted_json(&m[*k]))).collect();
            format!("{{{}}}", inner.join(","))
        }
        other => other.to_string(),
    }
}

fn validate_keys(ty: &ResourceType, obj: &Value) -> Vec<(&'static str, String, String)> {
    let maps: &[&str] = match (ty.group.as_str(), ty.kind.as_str()) {
        ("", "ConfigMap") => &["data", "binaryData"],
        ("", "Secret") => &["data", "stringData"],
        _ => return Vec::new(),
    };
    let mut causes = Vec::new();
    for field in maps {
        let Some(map) = obj.get(*field).and_then(Value::as_object) else { continue };
        for key in map.keys() {
            let ok = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
            let msg = if key.len() > 253 {
                format!("Invalid value: {key:?}: must be no more than 253 characters")
            } else if !ok {
                format!(
                    "Invalid value: {key:?}: a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
                     (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                )
            } else {
                continue;
            };
            causes.push(("FieldValueInvalid", format!("{field}[{key}]"), msg));
        }
    }
    causes
}

/// Applies the update rules (module docs) to `new` against the stored `old` (the caller has
/// checked the resourceVersion); returns the object to store (the store sets the new
/// resourceVersion).
pub fn prepare_update(
    ty: &ResourceType,
    old: &Value,
    new: Value,
    ns: Option<&str>,
    endpoint: Endpoint,
) -> Result<Value, ApiError> {
    check_update_identity(ty, old, &new, ns)?;
    let causes = validate_fields(ty, &new);
    if !causes.is_empty() {
        let causes: Vec<(&str, &str, String)> = causes.iter().map(|(r, f, m)| (*r, f.as_str(), m.clone())).collect();
        return Err(invalid(ty, name_of(old), &causes));
    }
    let mut new = match endpoint {
        Endpoint::Main => new,
        Endpoint::Status => status_update(ty, old, new),
    };
    check_deletion_fields(ty, old, &new)?;
    set_type(&mut new, ty);
    defaults::apply(&ty.group, &ty.kind, &mut new);
    check_immutable_data(ty, old, &new)?;
    keep_cluster_ip(ty, old, &mut new)?;
    if endpoint == Endpoint::Main && ty.status_subresource {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                new.as_object_mut().map(|m| m.remove("status"));
            }
        }
    }
    let keep =
        ["uid", "creationTimestamp", "generation", "namespace", "deletionTimestamp", "deletionGracePeriodSeconds"];
    for k in keep {
        let kept = old["metadata"].get(k).cloned();
        let meta = meta_mut(&mut new);
        match kept {
            Some(v) => meta.insert(k.into(), v),
            None => meta.remove(k),
        };
    }
    if ty.tracks_generation && (spec_changed(ty, old, &new) || deployment_annotations_changed(ty, old, &new, endpoint))
    {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        meta_mut(&mut new).insert("generation".into(), json!(g));
    }
    Ok(new)
}

/// Whether a write from `old` to `new` changes nothing but `resourceVersion` and the times of
/// `managedFields` entries (the real storage layer then commits nothing and answers the stored
/// object). Other changes of `managedFields` alone (a new manager's no-op apply) are committed,
/// as the real server does.
pub fn is_noop(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            m.remove("resourceVersion");
            if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
                entries.iter_mut().filter_map(Value::as_object_mut).for_each(|e| {
                    e.remove("time");
                });
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// Whether an object is due to leave storage: `deletionTimestamp` set, no finalizers left and
/// no grace period pending (`deletionGracePeriodSeconds` missing or 0). A Namespace also waits
/// for its `spec.finalizers` (the namespace controller's), so updating a terminating one keeps it.
pub fn should_delete(obj: &Value) -> bool {
    let namespace_finalizers =
        obj["kind"] == "Namespace" && obj["spec"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    is_deleting(obj)
        && !namespace_finalizers
        && finalizers_of(obj).is_empty()
        && obj["metadata"]["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) == 0
}

/// Marks `obj` for deletion (`rest.BeforeDelete`): `deletionTimestamp` = `at` (RFC 3339),
/// `deletionGracePeriodSeconds` = `grace_s`, `generation` + 1 when the object has one, and
/// `extra` finalizers (propagation policy) added.
pub fn mark_deleted(obj: &mut Value, at: &str, grace_s: i64, extra: &[&str]) {
    let generation = obj["metadata"]["generation"].as_i64();
    let mut finalizers = finalizers_of(obj);
    for f in extra {
        if !finalizers.iter().any(|x| x == f) {
            finalizers.push(f.to_string());
        }
    }
    let meta = meta_mut(obj);
    meta.insert("deletionTimestamp".into(), json!(at));
    meta.insert("deletionGracePeriodSeconds".into(), json!(grace_s));
    if !finalizers.is_empty() {
        meta.insert("finalizers".into(), json!(finalizers));
    }
    if let Some(g) = generation.filter(|g| *g > 0) {
        meta.insert("generation".into(), json!(g + 1));
    }
}

#[cfg(test)]
#[path = "meta/tests.rs"]
mod tests;

/// Drops what the real server does not store because Go's `omitempty` leaves it out: empty
/// `metadata.finalizers`, `ownerReferences`, `labels`, `annotations` and `managedFields`, and a
/// ConfigMap's or Secret's empty `data` and `binaryData` (so a
/// JSON patch `test /metadata/finalizers null`, which kube-runtime's finalizer helper sends when
/// it sees none, holds after the last finalizer was removed).
pub fn drop_empty(obj: &mut Value) {
    // ConfigMap and Secret `data`/`binaryData` maps are `omitempty` too (measured).
    if matches!(obj["kind"].as_str(), Some("ConfigMap" | "Secret"))
        && let Some(top) = obj.as_object_mut()
    {
        for key in ["data", "binaryData"] {
            if top.get(key).is_some_and(|v| v.as_object().is_some_and(Map::is_empty) || v.is_null()) {
                top.remove(key);
            }
        }
    }
    let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    for key in ["finalizers", "ownerReferences", "labels", "annotations", "managedFields"] {
        let empty = match m.get(key) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            m.remove(key);
        }
    }
}
