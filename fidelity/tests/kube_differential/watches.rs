//! Watches: from a resourceVersion, from `0` and without one (synthetic ADDED), with a label
//! selector (objects entering and leaving it), bookmarks, `sendInitialEvents` and its option
//! checks, `timeoutSeconds`, and the 410 after a compaction.

use std::time::Duration;

use fidelity::runner::{Ctx, Scenario};
use fidelity::{Known, scenario};
use serde_json::{Value, json};

use crate::support::{Kube, WatchRead as Read};
use crate::watches;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(watches::watch_from_a_resource_version_sees_later_changes_in_order),
        scenario!(watches::watch_from_zero_sends_synthetic_added_events),
        scenario!(watches::watch_without_a_resource_version_starts_with_the_current_state),
        scenario!(watches::watch_with_a_label_selector_sees_objects_enter_and_leave),
        scenario!(watches::bookmarks_come_before_the_timeout),
        scenario!(watches::send_initial_events_ends_with_an_annotated_bookmark),
        scenario!(watches::send_initial_events_option_checks),
        scenario!(watches::timeout_seconds_ends_the_stream),
        scenario!(
            watches::watch_after_a_compaction_is_gone,
            Some(Known {
                id: "watch-expired-message-is-the-watch-caches",
                steps: &["from the create, after the compaction"]
            }),
            true
        ),
    ]
}

/// The short reads every scenario uses.
const WITHIN: Duration = Duration::from_secs(2);

/// Reads a watch until `count` events arrived (see [`Kube::watch_raw`]).
async fn read(k: &Kube<'_>, path: &str, count: usize, within: Duration) -> Result<Read, String> {
    k.watch_raw(path, within, |events| events.len() >= count).await
}

/// Whether `e` is a plain bookmark: a progress notification the server may send at any time
/// (the real cacher's one-second buckets), unlike the `initial-events-end` one.
fn plain_bookmark(e: &Value) -> bool {
    e["type"] == "BOOKMARK" && e.pointer("/object/metadata/annotations/k8s.io~1initial-events-end").is_none()
}

/// A read as `TYPE name rv#k` lines joined by `; ` (bookmarks: `BOOKMARK at the last write or
/// later`, since the real server's revision moves with the other scenarios' writes), `end` when
/// the server closed the stream.
fn shown(k: &Kube<'_>, r: &Read, last_write: &str) -> String {
    if let Some(refused) = &r.refused {
        return refused.clone();
    }
    let last: u64 = last_write.parse().unwrap_or(0);
    let mut out: Vec<String> = r
        .events
        .iter()
        .map(|e| {
            if e["type"] == "BOOKMARK" {
                let rv: u64 = e
                    .pointer("/object/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let end = e.pointer("/object/metadata/annotations/k8s.io~1initial-events-end").and_then(Value::as_str);
                let at = if rv >= last { "at the last write or later".to_string() } else { k.rv(&rv.to_string()) };
                match end {
                    Some(v) => format!("BOOKMARK {at} initial-events-end={v}"),
                    None => format!("BOOKMARK {at}"),
                }
            } else {
                k.event(e)
            }
        })
        .collect();
    if r.ended {
        out.push("end".into());
    }
    out.join("; ")
}

/// Creates ConfigMap `name` with `labels`; its resourceVersion.
async fn create(k: &Kube<'_>, name: &str, labels: Value) -> Result<String, String> {
    let body = json!({"metadata": {"name": name, "labels": labels}, "data": {}});
    let a = k.send("POST", &k.core("configmaps", None), Some(body)).await?;
    if a.code != 201 {
        return Err(format!("creating {name}: {}", a.summary()));
    }
    Ok(a.rv())
}

/// Merge-patches ConfigMap `name`; its new resourceVersion.
async fn patch(k: &Kube<'_>, name: &str, body: Value) -> Result<String, String> {
    let a = k.patch(&k.core("configmaps", Some(name)), "application/merge-patch+json", body).await?;
    if a.code != 200 {
        return Err(format!("patching {name}: {}", a.summary()));
    }
    Ok(a.rv())
}

/// Deletes ConfigMap `name`; the resourceVersion of its deletion.
async fn delete(k: &Kube<'_>, name: &str) -> Result<String, String> {
    let a = k.send("DELETE", &k.core("configmaps", Some(name)), None).await?;
    if a.code != 200 {
        return Err(format!("deleting {name}: {}", a.summary()));
    }
    Ok(a.rv())
}

/// Waits a moment so that a watch opened concurrently is established first.
async fn pause() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

pub async fn watch_from_a_resource_version_sees_later_changes_in_order(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let start = create(&k, "a", json!({})).await?;
    patch(&k, "a", json!({"data": {"v": "1"}})).await?;
    create(&k, "b", json!({})).await?;
    let last = delete(&k, "a").await?;
    let r = read(&k, &format!("{}?resourceVersion={start}", k.core("configmaps", None)), 3, WITHIN).await?;
    k.note("replayed from the first create", shown(&k, &r, &last));
    let deleted = r.events.get(2).map(|e| k.object(&e["object"]["data"])).unwrap_or_default();
    k.note("the DELETED object's data", deleted);
    let path = format!("{}?resourceVersion={last}", k.core("configmaps", None));
    let (r, writes) = tokio::join!(read(&k, &path, 3, WITHIN), async {
        pause().await;
        create(&k, "c", json!({})).await?;
        patch(&k, "c", json!({"data": {"v": "2"}})).await?;
        delete(&k, "c").await
    });
    let last = writes?;
    k.note("live from the last write", shown(&k, &r?, &last));
    // `?watch=1` on one object's path is a plain GET (only `/watch/…` paths watch one object).
    let a =
        k.send("GET", &format!("{}?watch=1&resourceVersion={start}", k.core("configmaps", Some("b"))), None).await?;
    let shape = format!("{} {} {} {}", a.code, a.body["kind"], a.body["metadata"]["name"], k.rv(&a.rv()));
    k.note("watch=1 on one object's path", shape);
    Ok(())
}

pub async fn watch_from_zero_sends_synthetic_added_events(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    create(&k, "b", json!({})).await?;
    create(&k, "a", json!({})).await?;
    patch(&k, "b", json!({"data": {"v": "1"}})).await?;
    let path = format!("{}?resourceVersion=0", k.core("configmaps", None));
    let (r, last) = tokio::join!(read(&k, &path, 3, WITHIN), async {
        pause().await;
        create(&k, "c", json!({})).await
    });
    let last = last?;
    k.note("from 0, then a create", shown(&k, &r?, &last));
    let r = read(
        &k,
        &format!("{}?resourceVersion=0&fieldSelector=metadata.name%3Db", k.core("configmaps", None)),
        1,
        WITHIN,
    )
    .await?;
    k.note("from 0 with a field selector", shown(&k, &r, &last));
    let r = read(&k, &format!("{}?resourceVersion=0&allowWatchBookmarks=true", k.core("configmaps", None)), 4, WITHIN)
        .await?;
    k.note("from 0 with bookmarks", shown(&k, &r, &last));
    Ok(())
}

pub async fn watch_without_a_resource_version_starts_with_the_current_state(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    create(&k, "a", json!({})).await?;
    create(&k, "b", json!({})).await?;
    let path = k.core("configmaps", None);
    let (r, last) = tokio::join!(read(&k, &path, 3, WITHIN), async {
        pause().await;
        delete(&k, "a").await
    });
    let last = last?;
    k.note("no resourceVersion, then a delete", shown(&k, &r?, &last));
    let r = read(&k, &format!("{path}?allowWatchBookmarks=true"), 2, WITHIN).await?;
    k.note("no resourceVersion, with bookmarks", shown(&k, &r, &last));
    let r = read(&k, &format!("{path}?resourceVersion="), 1, WITHIN).await?;
    k.note("an empty resourceVersion", shown(&k, &r, &last));
    Ok(())
}

pub async fn watch_with_a_label_selector_sees_objects_enter_and_leave(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let start = create(&k, "a", json!({"app": "x"})).await?;
    create(&k, "b", json!({"app": "y"})).await?;
    patch(&k, "a", json!({"metadata": {"labels": {"app": "y"}}})).await?;
    patch(&k, "b", json!({"metadata": {"labels": {"app": "x"}}})).await?;
    patch(&k, "b", json!({"data": {"v": "1"}})).await?;
    patch(&k, "a", json!({"data": {"v": "1"}})).await?;
    let last = delete(&k, "b").await?;
    let base = k.core("configmaps", None);
    let r = read(&k, &format!("{base}?resourceVersion={start}&labelSelector=app%3Dx"), 4, WITHIN).await?;
    k.note("app=x from the first create", shown(&k, &r, &last));
    let labels: Vec<String> = r
        .events
        .iter()
        .map(|e| format!("{} {}", e["type"].as_str().unwrap_or("-"), e["object"]["metadata"]["labels"]))
        .collect();
    k.note("the events' labels", labels.join("; "));
    let r = read(&k, &format!("{base}?resourceVersion={start}&labelSelector=app%21%3Dx"), 4, WITHIN).await?;
    k.note("app!=x from the first create", shown(&k, &r, &last));
    let r = read(&k, &format!("{base}?resourceVersion={start}&fieldSelector=metadata.name%3Da"), 2, WITHIN).await?;
    k.note("metadata.name=a from the first create", shown(&k, &r, &last));
    let r = read(&k, &format!("{base}?resourceVersion=0&labelSelector=app+in+%28x%29"), 1, Duration::from_millis(700))
        .await?;
    k.note("app in (x) from 0", shown(&k, &r, &last));
    let r = read(&k, &format!("{base}?labelSelector=app+in+x"), 1, WITHIN).await?;
    k.note("an invalid selector", shown(&k, &r, &last));
    Ok(())
}

pub async fn bookmarks_come_before_the_timeout(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let start = create(&k, "a", json!({})).await?;
    let other = format!("{}-b", k.ns);
    let a = k.send("POST", "/api/v1/namespaces", Some(json!({"metadata": {"name": other}}))).await?;
    k.note("second namespace", a.summary());
    // A write the watch does not see moves the revision on, so that a bookmark has news. It lands
    // before the watch opens, and a list NotOlderThan it (served by the real server's watch cache
    // once the cache has caught up to it) waits until the cache has it: a bookmark is then at it
    // or later on either server, however busy the machine (a write racing the watch let the real
    // cacher's first bookmark come at the start revision).
    let body = json!({"metadata": {"name": "elsewhere"}});
    let others = format!("/api/v1/namespaces/{other}/configmaps");
    let last = k.send("POST", &others, Some(body)).await?.rv();
    let seen = format!("{others}?resourceVersion={last}&resourceVersionMatch=NotOlderThan");
    k.note("the other write, listed from the cache", k.send("GET", &seen, None).await?.summary());
    let path =
        format!("{}?resourceVersion={start}&allowWatchBookmarks=true&timeoutSeconds=3", k.core("configmaps", None));
    let r = read(&k, &path, 1, Duration::from_millis(3500)).await?;
    // The real cacher may send a second one (its one-second buckets), so only the first counts.
    k.note("the first event of a 3 s watch", shown(&k, &r, &last));
    let path =
        format!("{}?resourceVersion={start}&allowWatchBookmarks=true&timeoutSeconds=1", k.core("configmaps", None));
    let short = read(&k, &path, 2, WITHIN).await?;
    k.note("a 1 s watch (its bookmark time is already past)", shown(&k, &short, &last));
    let shape = r.events.first().map(|e| {
        let mut e = e.clone();
        e["object"]["metadata"]["resourceVersion"] = json!("RV");
        crate::support::canonical(e).to_string()
    });
    k.note("a bookmark's shape", shape.unwrap_or_else(|| "-".into()));
    Ok(())
}

pub async fn send_initial_events_ends_with_an_annotated_bookmark(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    create(&k, "b", json!({"app": "x"})).await?;
    create(&k, "a", json!({"app": "x"})).await?;
    let mid = create(&k, "c", json!({"app": "y"})).await?;
    let base = k.core("configmaps", None);
    let path = format!("{base}?sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan");
    // Until the create's event: plain bookmarks may come before it at any time and are left out.
    let until_d = |events: &[Value]| events.iter().any(|e| e["object"]["metadata"]["name"] == "d");
    let (r, last) = tokio::join!(k.watch_raw(&path, WITHIN, until_d), async {
        pause().await;
        create(&k, "d", json!({})).await
    });
    let mut r = r?;
    let last = last?;
    r.events.retain(|e| !plain_bookmark(e));
    k.note("initial events, the bookmark, then a create", shown(&k, &r, &mid));
    let end = r.events.iter().find(|e| e["type"] == "BOOKMARK").map(|e| {
        let mut e = e.clone();
        e["object"]["metadata"]["resourceVersion"] = json!("RV");
        crate::support::canonical(e).to_string()
    });
    k.note("the end bookmark", end.unwrap_or_else(|| "-".into()));
    let path = format!("{path}&labelSelector=app%3Dx&resourceVersion={mid}");
    let r = read(&k, &path, 3, WITHIN).await?;
    k.note("with a selector, NotOlderThan the third create", shown(&k, &r, &last));
    let path = format!(
        "{base}?sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&fieldSelector=metadata.name%3Dnone"
    );
    let r = read(&k, &path, 1, WITHIN).await?;
    k.note("nothing selected, from 0", shown(&k, &r, &last));
    Ok(())
}

pub async fn send_initial_events_option_checks(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let last = create(&k, "a", json!({})).await?;
    let base = k.core("configmaps", None);
    for (label, query) in [
        ("without allowWatchBookmarks", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"),
        ("without resourceVersionMatch", "sendInitialEvents=true&allowWatchBookmarks=true"),
        (
            "with resourceVersionMatch=Exact",
            "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=Exact",
        ),
        (
            "resourceVersionMatch without sendInitialEvents",
            "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        ),
        ("sendInitialEvents=false without resourceVersionMatch", "sendInitialEvents=false"),
        (
            "sendInitialEvents=false, NotOlderThan",
            "sendInitialEvents=false&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
        ),
        ("an unparsable resourceVersion", "resourceVersion=abc"),
    ] {
        let r = read(&k, &format!("{base}?{query}"), 3, WITHIN).await?;
        k.note(label, shown(&k, &r, &last));
    }
    let a = k.send("GET", &format!("{base}?sendInitialEvents=true"), None).await?;
    k.note("a list with sendInitialEvents", k.list(&a));
    let a = k.send("GET", &format!("{base}?sendInitialEvents=false&resourceVersionMatch=NotOlderThan"), None).await?;
    k.note("a list with sendInitialEvents=false and a match", k.list(&a));
    Ok(())
}

pub async fn timeout_seconds_ends_the_stream(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let last = create(&k, "a", json!({})).await?;
    let base = k.core("configmaps", None);
    let started = std::time::Instant::now();
    let r = read(&k, &format!("{base}?resourceVersion={last}&timeoutSeconds=1"), 5, WITHIN).await?;
    k.note("from the create, 1 s", shown(&k, &r, &last));
    k.note("ended within 1.8 s", (started.elapsed() < Duration::from_millis(1800)).to_string());
    let r = read(&k, &format!("{base}?resourceVersion=0&timeoutSeconds=1"), 5, WITHIN).await?;
    k.note("from 0, 1 s", shown(&k, &r, &last));
    let future = last.parse::<u64>().map_err(|e| format!("rv: {e}"))? + 1_000_000;
    let r = read(&k, &format!("{base}?resourceVersion={future}&timeoutSeconds=1"), 5, WITHIN).await?;
    k.note("from a future revision, 1 s", shown(&k, &r, &last));
    let r = read(&k, &format!("{base}?timeoutSeconds=x"), 5, WITHIN).await?;
    k.note("an unparsable timeout", shown(&k, &r, &last));
    Ok(())
}

pub async fn watch_after_a_compaction_is_gone(ctx: &Ctx) -> Result<(), String> {
    let k = Kube::new(ctx).await?;
    let base = k.core("secrets", None);
    let a = k.send("POST", &base, Some(json!({"metadata": {"name": "s"}, "stringData": {"v": "0"}}))).await?;
    k.note("create", a.summary());
    let first = a.rv();
    let mut last = first.clone();
    for v in ["1", "2"] {
        let a = k
            .patch(&k.core("secrets", Some("s")), "application/merge-patch+json", json!({"stringData": {"v": v}}))
            .await?;
        k.note(format!("update {v}"), a.summary());
        last = a.rv();
    }
    k.compact(&last).await?;
    let r = read(&k, &format!("{base}?resourceVersion={first}"), 2, WITHIN).await?;
    k.note("from the create, after the compaction", shown(&k, &r, &last));
    let r = read(&k, &format!("{base}?resourceVersion={last}&timeoutSeconds=1"), 2, WITHIN).await?;
    k.note("from the last update", shown(&k, &r, &last));
    let r = read(&k, &format!("{base}?resourceVersion=0&timeoutSeconds=1"), 2, WITHIN).await?;
    k.note("from 0", shown(&k, &r, &last));
    Ok(())
}
