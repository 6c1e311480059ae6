#![allow(dead_code)]
//! What the Kubernetes scenarios share: a client per side, raw requests, and observations
//! normalized so that two correct API servers record the same text.
//!
//! Normalization: uids and resourceVersions become aliases in order of first appearance
//! (`uid#1`, `rv#3`: "the same as before" stays visible, values do not); timestamps become `T`;
//! the run's suffix in names becomes `N` (the recorder does that); `managedFields` are shown as
//! `manager/operation` pairs (and their field sets where a scenario asks for them).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use fidelity::runner::Ctx;
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};

/// The longest Kubernetes name (a DNS label: namespaces, most names).
const NAME_MAX: usize = 63;

/// kubesim servers started for scenarios, by URL (to force a compaction on the fake side).
fn fakes() -> &'static Mutex<HashMap<String, kubesim::server::ApiServer>> {
    static FAKES: OnceLock<Mutex<HashMap<String, kubesim::server::ApiServer>>> = OnceLock::new();
    FAKES.get_or_init(Default::default)
}

/// A guard that forgets the fake when dropped.
struct FakeGuard(#[allow(dead_code)] kubesim::server::LocalApiServer, String);

impl Drop for FakeGuard {
    fn drop(&mut self) {
        fakes().lock().expect("fakes lock").remove(&self.1);
    }
}

/// The suite's `start_fake`: a fresh kubesim on loopback.
pub fn start_kubesim() -> std::io::Result<(Box<dyn std::any::Any + Send>, String)> {
    let server = fidelity::kube::start_kubesim()?;
    let url = server.url().to_string();
    fakes().lock().expect("fakes lock").insert(url.clone(), server.api().clone());
    Ok((Box::new(FakeGuard(server, url.clone())), url))
}

/// A scenario's session: a client for its side and the namespace it works in.
pub struct Kube<'a> {
    pub ctx: &'a Ctx,
    pub client: kube::Client,
    /// The scenario's namespace (created by [`Kube::new`]).
    pub ns: String,
}

/// What a watch read: the events as sent; `refused` (the status line) when the server answered
/// with an error instead of a stream; `ended` when it closed the stream.
pub struct WatchRead {
    pub refused: Option<String>,
    pub events: Vec<Value>,
    pub ended: bool,
}

/// One answer: status code and JSON body (`Value::Null` when empty or not JSON).
pub struct Answer {
    pub code: u16,
    pub body: Value,
}

impl Answer {
    /// `201`, or `409 Conflict: <message>` for a Status.
    pub fn summary(&self) -> String {
        if self.body.get("kind").and_then(Value::as_str) == Some("Status") {
            status_line(self.code, &self.body)
        } else {
            self.code.to_string()
        }
    }

    /// The body's `metadata.resourceVersion`.
    pub fn rv(&self) -> String {
        self.body.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_string()
    }
}

/// `409 Conflict: <message>` (a Status body's reason and message).
pub fn status_line(code: u16, status: &Value) -> String {
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or("-");
    let message = status.get("message").and_then(Value::as_str).unwrap_or("-");
    format!("{code} {reason}: {message}")
}

impl<'a> Kube<'a> {
    /// A client for `ctx`'s side and a fresh namespace `{scenario}-N` (63 characters at most).
    pub async fn new(ctx: &'a Ctx) -> Result<Kube<'a>, String> {
        let client = fidelity::kube::client(&ctx.address).await?;
        let ns = short_name(ctx, "");
        let k = Kube { ctx, client, ns };
        let a = k.send("POST", "/api/v1/namespaces", Some(json!({"metadata": {"name": k.ns}}))).await?;
        if a.code != 201 {
            return Err(format!("creating namespace {}: {}", k.ns, a.summary()));
        }
        Ok(k)
    }

    /// Records a step.
    pub fn note(&self, label: impl AsRef<str>, value: impl AsRef<str>) {
        self.ctx.note(label, value);
    }

    /// Sends `method path` with a JSON body (content type `application/json`, or the patch type
    /// for PATCH: see [`Kube::patch`]).
    pub async fn send(&self, method: &str, path: &str, body: Option<Value>) -> Result<Answer, String> {
        self.send_typed(method, path, "application/json", body.map(|b| b.to_string())).await
    }

    /// Sends a PATCH of `content_type` (`application/merge-patch+json`, `application/json-patch+json`,
    /// `application/strategic-merge-patch+json`, `application/apply-patch+yaml`).
    pub async fn patch(&self, path: &str, content_type: &str, body: Value) -> Result<Answer, String> {
        self.send_typed("PATCH", path, content_type, Some(body.to_string())).await
    }

    async fn send_typed(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<String>,
    ) -> Result<Answer, String> {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(body.unwrap_or_default().into_bytes())
            .map_err(|e| format!("building {method} {path}: {e}"))?;
        let resp =
            self.client.send(req.map(kube::client::Body::from)).await.map_err(|e| format!("{method} {path}: {e}"))?;
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.map_err(|e| format!("{method} {path}: reading: {e}"))?.to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Answer { code, body })
    }

    /// `/api/v1/namespaces/{ns}/{resource}` (core) with an optional `/name`.
    pub fn core(&self, resource: &str, name: Option<&str>) -> String {
        match name {
            Some(n) => format!("/api/v1/namespaces/{}/{resource}/{n}", self.ns),
            None => format!("/api/v1/namespaces/{}/{resource}", self.ns),
        }
    }

    /// `/apis/{group_version}/namespaces/{ns}/{resource}` with an optional `/name`.
    pub fn group(&self, group_version: &str, resource: &str, name: Option<&str>) -> String {
        match name {
            Some(n) => format!("/apis/{group_version}/namespaces/{}/{resource}/{n}", self.ns),
            None => format!("/apis/{group_version}/namespaces/{}/{resource}", self.ns),
        }
    }

    /// The alias of a resourceVersion.
    pub fn rv(&self, raw: &str) -> String {
        self.ctx.alias("rv", raw)
    }

    /// An object, normalized (see the module docs), as one line of JSON.
    pub fn object(&self, v: &Value) -> String {
        canonical(normalize(self.ctx, v.clone())).to_string()
    }

    /// An answer: its status line, or `code object`.
    pub fn answer(&self, a: &Answer) -> String {
        if a.body.get("kind").and_then(Value::as_str) == Some("Status") {
            a.summary()
        } else {
            format!("{} {}", a.code, self.object(&a.body))
        }
    }

    /// A list answer: code, the names in order, the list's rv alias, whether a continue token
    /// and a remaining count came back.
    pub fn list(&self, a: &Answer) -> String {
        if a.code != 200 {
            return a.summary();
        }
        let names: Vec<&str> = a.body["items"]
            .as_array()
            .map(|items| items.iter().filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str)).collect())
            .unwrap_or_default();
        let cont = a.body.pointer("/metadata/continue").and_then(Value::as_str).is_some_and(|c| !c.is_empty());
        let remaining = a.body.pointer("/metadata/remainingItemCount").map(Value::to_string);
        format!(
            "200 kind={} items=[{}] continue={cont} remaining={}",
            a.body["kind"].as_str().unwrap_or("-"),
            names.join(","),
            remaining.unwrap_or_else(|| "-".into())
        )
    }

    /// Opens a watch on `path` (with `watch=1` added) and reads events until `count` arrived or
    /// `within` passed: each as `TYPE name rv#k` (`BOOKMARK rv#k initial-events-end` for the end
    /// bookmark, `ERROR 410 Expired: …` for an error event), then `end` if the server closed it.
    pub async fn watch(&self, path: &str, count: usize, within: Duration) -> Result<Vec<String>, String> {
        let r = self.watch_raw(path, within, |events| events.len() >= count).await?;
        if let Some(refused) = r.refused {
            return Ok(vec![refused]);
        }
        let mut shown: Vec<String> = r.events.iter().map(|e| self.event(e)).collect();
        if r.ended {
            shown.push("end".into());
        }
        Ok(shown)
    }

    /// Opens a watch on `path` (`watch=1` added) and reads until `done(events so far)` holds,
    /// `within` passed, or the server ended the stream; the events as sent (for what
    /// [`Kube::watch`] does not show: bookmark shapes, the objects of DELETED events).
    pub async fn watch_raw(
        &self,
        path: &str,
        within: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Result<WatchRead, String> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let path = format!("{path}{sep}watch=1");
        let req = http::Request::builder()
            .method("GET")
            .uri(&path)
            .header("accept", "application/json")
            .body(Vec::new())
            .map_err(|e| format!("building GET {path}: {e}"))?;
        let resp = self.client.send(req.map(kube::client::Body::from)).await.map_err(|e| format!("GET {path}: {e}"))?;
        let code = resp.status().as_u16();
        if code != 200 {
            let bytes = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Ok(WatchRead { refused: Some(status_line(code, &body)), events: Vec::new(), ended: true });
        }
        let mut body = resp.into_body().into_data_stream();
        let (mut buf, mut events, mut ended) = (Vec::new(), Vec::new(), false);
        let deadline = tokio::time::Instant::now() + within;
        while !done(&events) {
            match tokio::time::timeout_at(deadline, body.next()).await {
                Err(_) => break,
                Ok(None) => {
                    ended = true;
                    break;
                }
                Ok(Some(Err(e))) => return Err(format!("reading {path}: {e}")),
                Ok(Some(Ok(chunk))) => buf.extend_from_slice(&chunk),
            }
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                    events.push(event);
                }
            }
        }
        Ok(WatchRead { refused: None, events, ended })
    }

    /// One watch event, as [`Kube::watch`] shows it.
    pub fn event(&self, e: &Value) -> String {
        let ty = e["type"].as_str().unwrap_or("?");
        let o = &e["object"];
        match ty {
            "ERROR" => format!("ERROR {}", status_line(o["code"].as_u64().unwrap_or(0) as u16, o)),
            "BOOKMARK" => {
                let end = o.pointer("/metadata/annotations/k8s.io~1initial-events-end").and_then(Value::as_str);
                let rv = o.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
                match end {
                    Some(v) => format!("BOOKMARK {} initial-events-end={v}", self.rv(rv)),
                    None => format!("BOOKMARK {}", self.rv(rv)),
                }
            }
            _ => {
                let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("-");
                let rv = o.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
                format!("{ty} {name} {}", self.rv(rv))
            }
        }
    }

    /// Forces a compaction of the server's history at its current revision: on kubesim through
    /// [`kubesim::server::ApiServer::compact`], on the local process through etcd's compaction API
    /// (`DIR/etcd-url`).
    pub async fn compact(&self, revision: &str) -> Result<(), String> {
        let revision: u64 = revision.parse().map_err(|e| format!("revision {revision}: {e}"))?;
        if let Some(api) = fakes().lock().expect("fakes lock").get(&self.ctx.address) {
            api.compact(revision);
            return Ok(());
        }
        let etcd = fidelity::kube::etcd_url(&self.ctx.address)
            .ok_or("no etcd to compact: the counterpart was not started by kube-local.sh")?;
        etcd_compact(&etcd, revision).await
    }
}

/// `POST {etcd}/v3/kv/compaction` (etcd's gRPC gateway) with `physical: true`.
async fn etcd_compact(etcd: &str, revision: u64) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = etcd.trim_start_matches("http://");
    let body = json!({"revision": revision.to_string(), "physical": true}).to_string();
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connecting to etcd {addr}: {e}"))?;
    let req = format!(
        "POST /v3/kv/compaction HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.map_err(|e| e.to_string())?;
    if out.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!("etcd compaction: {}", out.lines().next().unwrap_or("")))
    }
}

/// `text` with every `prefix` followed by a generated 5-character suffix (generateName) written
/// as `prefixXXXXX`.
pub fn mask_generated(text: &str, prefix: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        out.push_str(&rest[..i + prefix.len()]);
        let n = after.chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit()).count();
        if n == 5 {
            out.push_str("XXXXX");
            rest = &after[5..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `{scenario}-{base}-{suffix}`, the scenario part shortened so that the whole fits in 63
/// characters (an empty `base` is left out).
pub fn short_name(ctx: &Ctx, base: &str) -> String {
    let tail = if base.is_empty() { format!("-{}", ctx.suffix()) } else { format!("-{base}-{}", ctx.suffix()) };
    let mut head: String = ctx.scenario.replace('_', "-");
    head.truncate(NAME_MAX.saturating_sub(tail.len()));
    let head = head.trim_end_matches('-');
    format!("{head}{tail}")
}

/// Replaces what differs between two correct servers (see the module docs).
pub fn normalize(ctx: &Ctx, mut v: Value) -> Value {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        normalize_meta(ctx, meta);
    }
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                normalize_meta(ctx, meta);
            }
        }
    }
    v
}

fn normalize_meta(ctx: &Ctx, meta: &mut Map<String, Value>) {
    for (key, kind) in [("uid", "uid"), ("resourceVersion", "rv")] {
        if let Some(Value::String(s)) = meta.get_mut(key) {
            *s = ctx.alias(kind, s.as_str());
        }
    }
    for key in ["creationTimestamp", "deletionTimestamp"] {
        if let Some(t) = meta.get_mut(key)
            && !t.is_null()
        {
            *t = json!("T");
        }
    }
    if let Some(Value::Array(fields)) = meta.get_mut("managedFields") {
        let managers: Vec<Value> = fields
            .iter()
            .map(|f| {
                let m = f["manager"].as_str().unwrap_or("-");
                let op = f["operation"].as_str().unwrap_or("-");
                let sub = f.get("subresource").and_then(Value::as_str).map(|s| format!("/{s}")).unwrap_or_default();
                json!(format!("{m}/{op}{sub}"))
            })
            .collect();
        meta.insert("managedFields".into(), Value::Array(managers));
    }
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        for r in refs {
            if let Some(Value::String(s)) = r.get_mut("uid") {
                *s = ctx.alias("uid", s.as_str());
            }
        }
    }
}

/// `v` with every object's keys in sorted order (servers order fields differently).
pub fn canonical(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// The field sets of `object`'s managedFields by `manager/operation`, sorted keys (for
/// server-side apply scenarios).
pub fn field_sets(object: &Value) -> String {
    let Some(fields) = object.pointer("/metadata/managedFields").and_then(Value::as_array) else {
        return "-".into();
    };
    fields
        .iter()
        .map(|f| {
            let m = f["manager"].as_str().unwrap_or("-");
            format!("{m}/{}={}", f["operation"].as_str().unwrap_or("-"), canonical(f["fieldsV1"].clone()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `cm` ConfigMap `name` with `data`.
pub fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// Deployment `name` (one replica, selector `app: name`) with `containers` (each at least a name
/// and an image).
pub fn deployment(name: &str, containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}}}})
}

/// A namespaced CustomResourceDefinition of kind `Widget` in a group unique to the run and the
/// scenario (`{tag}.{suffix}.fidelity.example.com`: CRDs are cluster-scoped), version `v1`, with
/// a structural schema (`spec.size`: an integer 1..=10, `spec.color`: a string; a `status`
/// object) and the status subresource. Returns the CRD and its group.
pub fn widget_crd(ctx: &Ctx, tag: &str) -> (Value, String) {
    let group = format!("{tag}.{}.fidelity.example.com", ctx.suffix());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}});
    (crd, group)
}

impl Kube<'_> {
    /// Creates `crd` and polls it (every 100 ms, 10 s at most) until its `Established`
    /// condition is `True`. Returns the create's summary and `established` or `not established`.
    pub async fn create_crd(&self, crd: &Value) -> Result<(String, String), String> {
        let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let a = self.send("POST", path, Some(crd.clone())).await?;
        let created = a.summary();
        if a.code != 201 {
            return Ok((created, "not established".into()));
        }
        for _ in 0..100 {
            let a = self.send("GET", &format!("{path}/{name}"), None).await?;
            let established = a
                .body
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
            if established {
                // Discovery and the CR endpoint follow a moment later on the real server.
                for _ in 0..50 {
                    let g = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
                    let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default();
                    let list = self.send("GET", &self.group(&format!("{g}/v1"), plural, None), None).await?;
                    if list.code == 200 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                return Ok((created, "established".into()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok((created, "not established".into()))
    }

    /// Deletes the CustomResourceDefinition `name` (cluster-scoped: scenarios clean theirs up).
    pub async fn delete_crd(&self, name: &str) -> Result<Answer, String> {
        self.send("DELETE", &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"), None).await
    }
}

impl Kube<'_> {
    /// A PATCH of `content_type` with `body` sent as is (for malformed bodies).
    pub async fn send_raw_patch(&self, path: &str, content_type: &str, body: &str) -> Result<Answer, String> {
        self.send_typed("PATCH", path, content_type, Some(body.to_string())).await
    }
}

/// A CRD delete's answer: the code, the kind answered, whether a deletionTimestamp is set, the
/// finalizers.
pub fn deleted_crd(a: &Answer) -> String {
    format!(
        "{} kind={} deletionTimestamp={} finalizers={}",
        a.code,
        a.body["kind"].as_str().unwrap_or("-"),
        a.body.pointer("/metadata/deletionTimestamp").is_some(),
        a.body.pointer("/metadata/finalizers").cloned().unwrap_or(Value::Null)
    )
}

impl Kube<'_> {
    /// Polls the CRD `name` (every 100 ms, 10 s at most) until it is gone: `gone` or `still
    /// there`.
    pub async fn crd_gone(&self, name: &str) -> Result<String, String> {
        for _ in 0..100 {
            let a = self
                .send("GET", &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"), None)
                .await?;
            if a.code == 404 {
                return Ok("gone".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok("still there".into())
    }
}
