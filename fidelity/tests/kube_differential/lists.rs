//! Lists: label and field selectors, paging with `limit`/`continue`, the resourceVersion
//! parameters (`0`, `NotOlderThan`, `Exact`, a future revision), lists across namespaces, and a
//! continue token outliving a compaction.

use fidelity::runner::{Ctx, Scenario};
use fidelity::{Known, scenario};
use serde_json::{Value, json};

use crate::lists;
use crate::support::{Answer, Kube};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(lists::label_selectors_of_every_operator),
        scenario!(lists::field_selectors_on_name_and_namespace),
        scenario!(lists::paging_with_limit_and_continue),
        scenario!(lists::continue_with_an_invalid_token_is_a_bad_request),
        scenario!(lists::resource_version_zero_not_older_than_and_exact),
        scenario!(
            lists::list_at_a_future_resource_version_times_out,
            Some(Known { id: "future-resource-version-answers-at-once", steps: &["answered after 2 s or more"] })
        ),
        scenario!(lists::list_across_all_namespaces_by_label),
        scenario!(lists::continue_token_taken_before_a_compaction_is_expired, None, true),
    ]
}

/// `s` percent-encoded for a query string (everything but unreserved characters).
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Creates ConfigMap `name` with `labels`; the answer.
async fn labelled(k: &Kube<'_>, name: &str, labels: Value) -> Result<Answer, String> {
    let body = json!({"metadata": {"name": name, "labels": labels}, "data": {}});
    let a = k.send("POST", &k.core("configmaps", None), Some(body)).await?;
    if a.code != 201 {
        return Err(format!("creating {name}: {}", a.summary()));
    }
    Ok(a)
}

/// `message` with the decimal numbers in it replaced by `N` (revisions inside messages).
fn numbers_out(message: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in message.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

pub async fn label_selectors_of_every_operator(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    labelled(&k, "a", json!({"app": "web", "tier": "front"})).await?;
    labelled(&k, "b", json!({"app": "web", "tier": "back"})).await?;
    labelled(&k, "c", json!({"app": "db"})).await?;
    labelled(&k, "d", json!({})).await?;
    for selector in [
        "app=web",
        "app==web",
        "app!=web",
        "tier in (front,back)",
        "tier notin (front)",
        "tier",
        "!tier",
        "app=web,tier=back",
        "app in (web),!tier",
        "app=nothing",
        "app in web",
        "tier notin",
        "bad key!=x",
    ] {
        let a = k.send("GET", &format!("{}?labelSelector={}", k.core("configmaps", None), enc(selector)), None).await?;
        k.note(selector, k.list(&a));
    }
    Ok(())
}

pub async fn field_selectors_on_name_and_namespace(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    for name in ["a", "b", "c"] {
        labelled(&k, name, json!({"app": "x"})).await?;
    }
    let ns = k.ns.clone();
    let other = format!("{ns}-other");
    for selector in [
        "metadata.name=b".to_string(),
        "metadata.name==b".to_string(),
        "metadata.name!=b".to_string(),
        format!("metadata.namespace={ns}"),
        format!("metadata.namespace={other}"),
        format!("metadata.namespace={ns},metadata.name!=a"),
        "metadata.name in (a,b)".to_string(),
        "data.key=1".to_string(),
        "spec.nodeName=n1".to_string(),
        "metadata.labels=x".to_string(),
    ] {
        let a =
            k.send("GET", &format!("{}?fieldSelector={}", k.core("configmaps", None), enc(&selector)), None).await?;
        k.note(selector.replace(&ns, "NS"), k.list(&a));
    }
    let a = k
        .send(
            "GET",
            &format!("{}?fieldSelector={}&labelSelector=app%3Dx", k.core("configmaps", None), enc("metadata.name!=c")),
            None,
        )
        .await?;
    k.note("both selectors", k.list(&a));
    Ok(())
}

pub async fn paging_with_limit_and_continue(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        labelled(&k, name, json!({"set": if name == "p5" { "odd" } else { "all" }})).await?;
    }
    let base = k.core("configmaps", None);
    let mut next = String::new();
    let mut list_rvs = Vec::new();
    for page in 1..=3 {
        let path =
            if next.is_empty() { format!("{base}?limit=2") } else { format!("{base}?limit=2&continue={}", enc(&next)) };
        let a = k.send("GET", &path, None).await?;
        k.note(format!("page {page}"), k.list(&a));
        list_rvs.push(a.body.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("").to_string());
        next = a.body.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").to_string();
    }
    k.note(
        "the pages share the first page's resourceVersion",
        (list_rvs.iter().all(|r| *r == list_rvs[0])).to_string(),
    );
    // A write between pages does not show in the later pages (they read the first page's revision).
    let a = k.send("GET", &format!("{base}?limit=2"), None).await?;
    let token = a.body.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").to_string();
    labelled(&k, "p0", json!({})).await?;
    labelled(&k, "p9", json!({})).await?;
    let a = k.send("GET", &format!("{base}?limit=10&continue={}", enc(&token)), None).await?;
    k.note("continue after two creates", k.list(&a));
    let a = k.send("GET", &format!("{base}?limit=2&labelSelector=set%3Dall"), None).await?;
    k.note("a page with a label selector", k.list(&a));
    let a = k.send("GET", &format!("{base}?limit=0"), None).await?;
    k.note("limit 0", k.list(&a));
    let a = k.send("GET", &format!("{base}?limit=-1"), None).await?;
    k.note("limit -1", k.list(&a));
    let a = k.send("GET", &format!("{base}?limit=7"), None).await?;
    k.note("limit above the count", k.list(&a));
    Ok(())
}

pub async fn continue_with_an_invalid_token_is_a_bad_request(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    labelled(&k, "a", json!({})).await?;
    labelled(&k, "b", json!({})).await?;
    let base = k.core("configmaps", None);
    let b64 = |s: &str| base64_url(s.as_bytes());
    for (label, token) in [
        ("not base64", "garbage!".to_string()),
        ("base64 of garbage", "garbage".to_string()),
        ("base64 of {}", b64("{}")),
        ("padded base64", "e30=".to_string()),
        ("a path outside the prefix", b64(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"../x"}"#)),
        ("another version", b64(r#"{"v":"meta.k8s.io/v2","rv":5,"start":"x"}"#)),
        ("no resourceVersion", b64(r#"{"v":"meta.k8s.io/v1","start":"x"}"#)),
        ("no start key", b64(r#"{"v":"meta.k8s.io/v1","rv":5}"#)),
    ] {
        let a = k.send("GET", &format!("{base}?limit=1&continue={}", enc(&token)), None).await?;
        k.note(label, a.summary());
    }
    let a = k.send("GET", &format!("{base}?limit=1"), None).await?;
    let token = a.body.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").to_string();
    let rv = a.rv();
    let a = k.send("GET", &format!("{base}?limit=1&continue={}&resourceVersion={rv}", enc(&token)), None).await?;
    k.note("continue with a resourceVersion", a.summary());
    let a = k.send("GET", &format!("{base}?limit=1&continue={}&resourceVersion=0", enc(&token)), None).await?;
    k.note("continue with resourceVersion 0", k.list(&a));
    let a = k
        .send("GET", &format!("{base}?limit=1&continue={}&resourceVersionMatch=NotOlderThan", enc(&token)), None)
        .await?;
    k.note("continue with resourceVersionMatch", a.summary());
    let a = k.send("GET", &format!("{base}?continue={}", enc(&token)), None).await?;
    k.note("continue without a limit", k.list(&a));
    Ok(())
}

/// URL-safe base64 without padding, as the real server's continue tokens (for hand-made ones).
fn base64_url(bytes: &[u8]) -> String {
    kubesim::meta::base64::encode(bytes).trim_end_matches('=').replace('+', "-").replace('/', "_")
}

pub async fn resource_version_zero_not_older_than_and_exact(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let first = labelled(&k, "a", json!({})).await?.rv();
    let mut cm = labelled(&k, "b", json!({})).await?.body;
    cm["data"] = json!({"v": "2"});
    let a = k.send("PUT", &k.core("configmaps", Some("b")), Some(cm)).await?;
    k.note("update b", format!("{} {}", a.code, k.rv(&a.rv())));
    labelled(&k, "c", json!({})).await?;
    let base = k.core("configmaps", None);
    // kube-apiserver serves resourceVersion=0 and NotOlderThan reads from its watch cache, which
    // can lag etcd by a few milliseconds after a write (this scenario once differed in CI).
    // A consistent list (no resourceVersion) waits until the cache has caught up with etcd's
    // current revision (ConsistentListFromCache, on by default since v1.31), so every read below
    // sees all three writes, as kubesim's reads always do.
    let a = k.send("GET", &base, None).await?;
    k.note("a consistent list", k.list(&a));
    for (label, query) in [
        ("resourceVersion 0", "resourceVersion=0".to_string()),
        ("resourceVersion 0, NotOlderThan", "resourceVersion=0&resourceVersionMatch=NotOlderThan".to_string()),
        ("NotOlderThan the first create", format!("resourceVersion={first}&resourceVersionMatch=NotOlderThan")),
        ("the first create, no match", format!("resourceVersion={first}")),
        ("Exact at the first create", format!("resourceVersion={first}&resourceVersionMatch=Exact")),
        ("the first create with a limit", format!("resourceVersion={first}&limit=5")),
        ("Exact without a resourceVersion", "resourceVersionMatch=Exact".to_string()),
        ("NotOlderThan without a resourceVersion", "resourceVersionMatch=NotOlderThan".to_string()),
        ("Exact at 0", "resourceVersion=0&resourceVersionMatch=Exact".to_string()),
        ("an unknown match", format!("resourceVersion={first}&resourceVersionMatch=Newest")),
        ("an unparsable resourceVersion", "resourceVersion=abc".to_string()),
        ("an unparsable resourceVersion, Exact", "resourceVersion=abc&resourceVersionMatch=Exact".to_string()),
    ] {
        let a = k.send("GET", &format!("{base}?{query}"), None).await?;
        k.note(label, k.list(&a));
        if a.code == 200 {
            k.note(format!("{label}: b"), exact_b(&k, &a));
        }
    }
    Ok(())
}

/// The `data` of item `b` in a list answer (to tell which revision a list read).
fn exact_b(k: &Kube<'_>, a: &Answer) -> String {
    let items = a.body["items"].as_array().cloned().unwrap_or_default();
    match items.iter().find(|i| i.pointer("/metadata/name") == Some(&json!("b"))) {
        Some(b) => format!(
            "{} {}",
            k.rv(b.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("")),
            b["data"]
        ),
        None => "-".into(),
    }
}

pub async fn list_at_a_future_resource_version_times_out(ctx: &Ctx) -> Result<(), String> {
    let mut k = Kube::new(ctx).await?;
    // kube-rs retries a 504 (Retry-After) by default: this list must see the first answer.
    k.client = client_without_retries(&ctx.address).await?;
    let rv: u64 = labelled(&k, "a", json!({})).await?.rv().parse().map_err(|e| format!("rv: {e}"))?;
    let future = rv + 1_000_000;
    let base = k.core("configmaps", None);
    let started = std::time::Instant::now();
    let a = k
        .send(
            "GET",
            &format!("{base}?resourceVersion={future}&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"),
            None,
        )
        .await?;
    let took = started.elapsed();
    k.note("NotOlderThan a future revision", numbers_out(&a.summary()));
    k.note("details", k.object(&a.body["details"]));
    k.note("answered after 2 s or more", (took.as_secs_f64() >= 2.0).to_string());
    Ok(())
}

/// A client as [`fidelity::kube::client`] makes, without kube-rs's default retries of 429, 503
/// and 504.
async fn client_without_retries(address: &str) -> Result<kube::Client, String> {
    let mut config = fidelity::kube::config(address).await?;
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| format!("building a client for {address}: {e}"))
}

pub async fn list_across_all_namespaces_by_label(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let run = k.ns.clone();
    labelled(&k, "z", json!({"run": run})).await?;
    labelled(&k, "y", json!({"run": run, "tier": "t"})).await?;
    labelled(&k, "x", json!({"other": run})).await?;
    let other = format!("{run}-b");
    let a = k.send("POST", "/api/v1/namespaces", Some(json!({"metadata": {"name": other}}))).await?;
    k.note("second namespace", a.summary());
    let body = json!({"metadata": {"name": "w", "labels": {"run": run}}});
    let a = k.send("POST", &format!("/api/v1/namespaces/{other}/configmaps"), Some(body)).await?;
    k.note("create in the second namespace", a.summary());
    let all = format!("/api/v1/configmaps?labelSelector={}", enc(&format!("run={run}")));
    let a = k.send("GET", &all, None).await?;
    k.note("all namespaces", k.list(&a));
    let namespaces: Vec<String> = a.body["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").replace(&run, "NS"))
                .collect()
        })
        .unwrap_or_default();
    k.note("their namespaces", namespaces.join(","));
    let a = k.send("GET", &format!("{all}&limit=1"), None).await?;
    k.note("all namespaces, limit 1", k.list(&a));
    let token = a.body.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").to_string();
    let a = k.send("GET", &format!("{all}&limit=1&continue={}", enc(&token)), None).await?;
    k.note("all namespaces, page 2", k.list(&a));
    let a = k.send("GET", &format!("{all},tier%3Dt"), None).await?;
    k.note("all namespaces, two requirements", k.list(&a));
    let a =
        k.send("GET", &format!("{all}&fieldSelector={}", enc(&format!("metadata.namespace={other}"))), None).await?;
    k.note("all namespaces, the second by field", k.list(&a));
    Ok(())
}

pub async fn continue_token_taken_before_a_compaction_is_expired(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let base = k.core("secrets", None);
    let mut last = String::new();
    for name in ["s1", "s2", "s3"] {
        let body = json!({"metadata": {"name": name}, "stringData": {"k": "v"}});
        let a = k.send("POST", &base, Some(body)).await?;
        k.note(format!("create {name}"), a.summary());
        last = a.rv();
    }
    let a = k.send("GET", &format!("{base}?limit=1"), None).await?;
    k.note("page 1", k.list(&a));
    let token = a.body.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").to_string();
    // A write after the token's revision, then a compaction at it: the token's revision is gone.
    let a = k.send("POST", &base, Some(json!({"metadata": {"name": "s4"}}))).await?;
    k.note("create s4", a.summary());
    let now = a.rv();
    k.compact(&now).await?;
    let a = k.send("GET", &format!("{base}?limit=1&continue={}", enc(&token)), None).await?;
    k.note("page 2 after the compaction", a.summary());
    let fresh = a.body.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or("").to_string();
    k.note("a fresh continue token in the Status", (!fresh.is_empty()).to_string());
    if !fresh.is_empty() {
        let a = k.send("GET", &format!("{base}?limit=5&continue={}", enc(&fresh)), None).await?;
        k.note("the fresh token", k.list(&a));
    }
    let a = k.send("GET", &format!("{base}?resourceVersion={last}&resourceVersionMatch=Exact"), None).await?;
    k.note("Exact at a compacted revision", a.summary());
    let a = k.send("GET", &format!("{base}?resourceVersion={last}&resourceVersionMatch=NotOlderThan"), None).await?;
    k.note("NotOlderThan a compacted revision", k.list(&a));
    Ok(())
}
