//! The defaults the real server fills in on every write for the built-in kinds (a subset of
//! `pkg/apis/*/v1/defaults.go`): Secret `type: Opaque` and `stringData` merged into `data`; Namespace label
//! `kubernetes.io/metadata.name`, `spec.finalizers: ["kubernetes"]`; Deployment `replicas: 1`,
//! `RollingUpdate` 25%/25%, `revisionHistoryLimit: 10`, `progressDeadlineSeconds: 600`; Service
//! `type: ClusterIP`, `sessionAffinity: None`, port `protocol: TCP` and `targetPort` = `port`;
//! Pod `restartPolicy: Always`, `dnsPolicy: ClusterFirst`, `schedulerName: default-scheduler`,
//! `terminationGracePeriodSeconds: 30`, container `terminationMessagePath`/`Policy`,
//! `imagePullPolicy` (`Always` for `:latest` or untagged images, else `IfNotPresent`), port
//! `protocol: TCP`; CRD `names.singular`/`listKind`, `conversion.strategy: None`. No cluster IPs are
//! allocated here (the store hands them out).

use serde_json::{Value, json};

use crate::meta::base64::encode;

fn default(obj: &mut Value, key: &str, v: Value) {
    if let Some(map) = obj.as_object_mut() {
        map.entry(key.to_string()).or_insert(v);
    }
}

fn each(obj: &mut Value, key: &str, f: impl Fn(&mut Value)) {
    if let Some(items) = obj.get_mut(key).and_then(Value::as_array_mut) {
        items.iter_mut().for_each(f);
    }
}

fn pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    let tag = if last.contains('@') { Some("digest") } else { last.split_once(':').map(|(_, t)| t) };
    match tag {
        None | Some("latest") => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn container(c: &mut Value) {
    default(c, "resources", json!({}));
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    let policy = pull_policy(c["image"].as_str().unwrap_or(""));
    default(c, "imagePullPolicy", json!(policy));
    each(c, "ports", |p| default(p, "protocol", json!("TCP")));
}

fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "securityContext", json!({}));
    each(spec, "containers", container);
    each(spec, "initContainers", container);
}

/// What a Pod (not a template) gets beside its spec's defaults: `enableServiceLinks`
/// (SetDefaults_Pod), `priority` and `preemptionPolicy` (the Priority admission plugin) and the
/// not-ready/unreachable tolerations of 300 s (DefaultTolerationSeconds).
fn pod_only(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "enableServiceLinks", json!(true));
    default(spec, "priority", json!(0));
    default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    default(spec, "tolerations", json!([]));
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let Some(list) = spec["tolerations"].as_array_mut() else { return };
        if !list.iter().any(|t| t["key"] == key && t["effect"] == "NoExecute") {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

fn deployment(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    default(
        spec,
        "strategy",
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
    );
    if let Some(template_spec) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        pod_spec(template_spec);
    }
}

fn service(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    each(spec, "ports", |p| {
        default(p, "protocol", json!("TCP"));
        let port = p["port"].clone();
        default(p, "targetPort", port);
    });
}

/// Secret `stringData` is write-only: merged into `data` (base64), then dropped.
fn string_data(obj: &mut Value) {
    let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else { return };
    default(obj, "data", json!({}));
    for (k, v) in strings {
        obj["data"][k.as_str()] = json!(encode(v.as_str().unwrap_or("").as_bytes()));
    }
}

/// Fills the defaults of `kind` (group `group`) into `obj` in place; keys already set are kept.
pub fn apply(group: &str, kind: &str, obj: &mut Value) {
    match (group, kind) {
        ("", "Secret") => {
            default(obj, "type", json!("Opaque"));
            string_data(obj);
        }
        ("", "Namespace") => {
            let name = obj["metadata"]["name"].clone();
            if let Some(meta) = obj.get_mut("metadata") {
                default(meta, "labels", json!({}));
                meta["labels"]["kubernetes.io/metadata.name"] = name;
            }
            default(obj, "spec", json!({}));
            default(&mut obj["spec"], "finalizers", json!(["kubernetes"]));
        }
        ("", "Pod") => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec(spec);
                pod_only(spec);
            }
        }
        ("", "Service") => service(obj.get_mut("spec").unwrap_or(&mut Value::Null)),
        ("apps", "Deployment") => deployment(obj.get_mut("spec").unwrap_or(&mut Value::Null)),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let names = &mut obj["spec"]["names"];
            let kind = names["kind"].as_str().unwrap_or("").to_string();
            default(names, "singular", json!(kind.to_lowercase()));
            default(names, "listKind", json!(format!("{kind}List")));
            default(&mut obj["spec"], "conversion", json!({"strategy": "None"}));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_get_their_defaults() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"p": "foob"}});
        apply("", "Secret", &mut s);
        assert_eq!(s["type"], "Opaque");
        assert_eq!(s["data"], json!({"a": "eA==", "p": "Zm9vYg=="}));
        assert!(s.get("stringData").is_none());
        let mut ns = json!({"metadata": {"name": "team"}});
        apply("", "Namespace", &mut ns);
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "team");
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        let mut d = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.2"}]}}}});
        apply("apps", "Deployment", &mut d);
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
        let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
        apply("", "Service", &mut svc);
        assert_eq!(svc["spec"]["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("localhost:5000/nginx"), "Always");
    }
}
