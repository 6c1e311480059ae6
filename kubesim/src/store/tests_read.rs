//! Lists, paging, stale reads and watches.

use std::time::Duration;

use serde_json::{Value, json};

use crate::store::tests::H;
use crate::store::{
    Compaction, DeleteOptions, EventKind, ListOptions, StoreConfig, Subresource, WatchEvent, WatchFilter, WatchOptions,
};

fn names(items: &[Value]) -> Vec<&str> {
    items.iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect()
}

fn opts(label: Option<&str>, limit: Option<u64>, cont: Option<String>) -> ListOptions {
    ListOptions { label_selector: label.map(str::to_string), limit, continue_token: cont, ..Default::default() }
}

fn rv_opts(rv: &str, rv_match: Option<&str>) -> ListOptions {
    ListOptions {
        resource_version: Some(rv.into()),
        resource_version_match: rv_match.map(str::to_string),
        ..Default::default()
    }
}

#[test]
fn lists_filter_by_namespace_and_selectors() {
    let mut h = H::new();
    h.cm("a", json!({"app": "web"}));
    h.cm("b", json!({"app": "db"}));
    h.create("", "namespaces", None, json!({"metadata": {"name": "other"}})).unwrap();
    h.create("", "configmaps", Some("other"), json!({"metadata": {"name": "c", "labels": {"app": "web"}}})).unwrap();
    let cms = h.ty("", "configmaps");
    let all = h.s.list(&cms, None, &ListOptions::default()).unwrap();
    assert_eq!(names(&all.items), ["a", "b", "c"]);
    assert_eq!(all.resource_version, h.s.rv());
    assert_eq!(all.items[0]["kind"], "ConfigMap");
    assert_eq!(names(&h.s.list(&cms, Some("default"), &ListOptions::default()).unwrap().items), ["a", "b"]);
    assert_eq!(names(&h.s.list(&cms, None, &opts(Some("app=web"), None, None)).unwrap().items), ["a", "c"]);
    let field = ListOptions { field_selector: Some("metadata.namespace=other".into()), ..Default::default() };
    assert_eq!(names(&h.s.list(&cms, None, &field).unwrap().items), ["c"]);
    let bad = ListOptions { field_selector: Some("spec.x=1".into()), ..Default::default() };
    assert_eq!(h.s.list(&cms, None, &bad).unwrap_err().code, 400);
}

#[test]
fn paging_continues_at_the_first_pages_revision() {
    let mut h = H::new();
    for n in ["a", "b", "c", "d", "e"] {
        h.cm(n, json!({}));
    }
    let cms = h.ty("", "configmaps");
    let p1 = h.s.list(&cms, Some("default"), &opts(None, Some(2), None)).unwrap();
    assert_eq!((names(&p1.items), p1.remaining), (vec!["a", "b"], Some(3)));
    let rv1 = p1.resource_version;
    h.with(|s, w| s.delete(&cms, Some("default"), "c", &DeleteOptions::default(), w)).unwrap();
    h.cm("bb", json!({}));
    let p2 = h.s.list(&cms, Some("default"), &opts(None, Some(2), p1.continue_token)).unwrap();
    assert_eq!(names(&p2.items), ["c", "d"], "the page is read at the first page's revision");
    assert_eq!(p2.resource_version, rv1);
    let p3 = h.s.list(&cms, Some("default"), &opts(None, Some(2), p2.continue_token)).unwrap();
    assert_eq!((names(&p3.items), p3.continue_token, p3.remaining), (vec!["e"], None, None));
    let sel = h.s.list(&cms, Some("default"), &opts(Some("!x"), Some(1), None)).unwrap();
    assert!(sel.continue_token.is_some() && sel.remaining.is_none(), "no count with a selector");
}

#[test]
fn an_expired_continue_token_is_gone() {
    let config = StoreConfig {
        compaction: Compaction { max_events: 2, max_age: Duration::from_secs(300) },
        ..Default::default()
    };
    let mut h = H::with_config(config);
    for n in ["a", "b", "c"] {
        h.cm(n, json!({}));
    }
    let cms = h.ty("", "configmaps");
    let p1 = h.s.list(&cms, Some("default"), &opts(None, Some(1), None)).unwrap();
    for n in ["d", "e", "f"] {
        h.cm(n, json!({}));
    }
    let e = h.s.list(&cms, Some("default"), &opts(None, Some(1), p1.continue_token)).unwrap_err();
    assert_eq!((e.code, e.reason), (410, "Expired"));
    assert!(e.message.starts_with("The provided continue parameter is too old"));
    assert_eq!(h.s.list(&cms, None, &opts(None, None, Some("garbage".into()))).unwrap_err().code, 400);
}

#[test]
fn resource_version_semantics() {
    let mut h = H::new();
    let a = h.cm("a", json!({}));
    let cms = h.ty("", "configmaps");
    let mut u = a.clone();
    u["data"]["k"] = json!("new");
    h.update("", "configmaps", u, Subresource::Main).unwrap();
    let old_rv = H::rv_of(&a);
    let exact = h.s.list(&cms, None, &rv_opts(&old_rv.to_string(), Some("Exact"))).unwrap();
    assert_eq!((exact.items[0]["data"]["k"].clone(), exact.resource_version), (json!("v"), old_rv));
    let newer = h.s.list(&cms, None, &rv_opts(&old_rv.to_string(), Some("NotOlderThan"))).unwrap();
    assert_eq!(newer.items[0]["data"]["k"], "new");
    assert_eq!(h.s.list(&cms, None, &rv_opts("0", None)).unwrap().resource_version, h.s.rv());
    let e = h.s.list(&cms, None, &rv_opts("999", None)).unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (504, "Timeout: Too large resource version: 999, current: 6"));
    assert_eq!(e.retry_after(), Some(1));
    let e = h.s.list(&cms, None, &ListOptions { resource_version_match: Some("Exact".into()), ..Default::default() });
    assert_eq!(
        e.unwrap_err().message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
    assert_eq!(h.s.list(&cms, None, &rv_opts("0", Some("Exact"))).unwrap_err().code, 422);
    assert_eq!(h.s.list(&cms, None, &rv_opts("x", Some("Exact"))).unwrap_err().code, 400);
    let e = h.s.list(&cms, None, &rv_opts("2", Some("Exact"))).unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (410, "The resourceVersion for the provided list is too old."));
}

#[test]
fn list_at_undoes_later_writes() {
    let mut h = H::new();
    let a = h.cm("a", json!({}));
    h.cm("b", json!({}));
    let cms = h.ty("", "configmaps");
    let at = h.s.rv();
    let mut u = a.clone();
    u["data"]["k"] = json!("new");
    h.update("", "configmaps", u, Subresource::Main).unwrap();
    h.with(|s, w| s.delete(&cms, Some("default"), "b", &DeleteOptions::default(), w)).unwrap();
    h.cm("c", json!({}));
    let stale = h.s.list_at(&cms, Some("default"), &ListOptions::default(), at).unwrap();
    assert_eq!(names(&stale.items), ["a", "b"]);
    assert_eq!(stale.items[0]["data"]["k"], "v");
    assert_eq!(stale.resource_version, at);
    assert_eq!(h.s.get_at(&cms, Some("default"), "b", at).unwrap()["metadata"]["name"], "b");
    assert_eq!(h.s.get_at(&cms, Some("default"), "c", at).unwrap_err().code, 404);
    let before_any = h.s.list_at(&cms, Some("default"), &ListOptions::default(), 4).unwrap();
    assert!(before_any.items.is_empty());
}

fn kinds(events: &[WatchEvent]) -> Vec<(EventKind, String)> {
    events.iter().map(|e| (e.kind, e.object["metadata"]["name"].as_str().unwrap_or("").to_string())).collect()
}

#[test]
fn a_watch_from_zero_starts_with_the_current_state() {
    let mut h = H::new();
    h.cm("a", json!({}));
    h.cm("b", json!({}));
    let cms = h.ty("", "configmaps");
    let start = h.s.watch_start(&cms, Some("default"), &WatchOptions::default()).unwrap();
    assert_eq!(kinds(&start.events), [(EventKind::Added, "a".into()), (EventKind::Added, "b".into())]);
    assert_eq!(start.after_rv, h.s.rv());
    let zero = WatchOptions { resource_version: Some("0".into()), ..Default::default() };
    assert_eq!(h.s.watch_start(&cms, Some("default"), &zero).unwrap().events.len(), 2);
    h.cm("c", json!({}));
    let next = h.s.watch_next(&cms, Some("default"), &start.filter, start.after_rv).unwrap();
    assert_eq!(kinds(&next), [(EventKind::Added, "c".into())]);
    assert_eq!(next[0].rv, h.s.rv());
    assert!(h.s.watch_next(&cms, Some("other"), &start.filter, start.after_rv).unwrap().is_empty());
}

#[test]
fn a_watch_from_a_version_replays_later_events_or_is_gone() {
    let config = StoreConfig {
        compaction: Compaction { max_events: 3, max_age: Duration::from_secs(60) },
        ..Default::default()
    };
    let mut h = H::with_config(config);
    let a = h.cm("a", json!({}));
    let from = WatchOptions {
        resource_version: Some(a["metadata"]["resourceVersion"].as_str().unwrap().into()),
        ..Default::default()
    };
    let cms = h.ty("", "configmaps");
    h.cm("b", json!({}));
    h.with(|s, w| s.delete(&cms, Some("default"), "a", &DeleteOptions::default(), w)).unwrap();
    let start = h.s.watch_start(&cms, None, &from).unwrap();
    assert_eq!(kinds(&start.events), [(EventKind::Added, "b".into()), (EventKind::Deleted, "a".into())]);
    assert_eq!(H::rv_of(&start.events[1].object), h.s.rv(), "DELETED carries the deletion's revision");
    h.cm("c", json!({}));
    h.cm("d", json!({}));
    let e = h.s.watch_start(&cms, None, &from).unwrap_err();
    assert_eq!((e.code, e.reason, e.message.as_str()), (410, "Expired", "too old resource version: 5 (6)"));
    h.secs += 61;
    h.cm("e", json!({}));
    let e = h.s.watch_next(&cms, None, &WatchFilter::default(), 8).unwrap_err();
    assert_eq!(e.code, 410);
    assert_eq!(h.s.watch_next(&cms, None, &WatchFilter::default(), 9).unwrap().len(), 1);
}

#[test]
fn send_initial_events_ends_with_an_annotated_bookmark() {
    let mut h = H::new();
    h.cm("a", json!({}));
    let cms = h.ty("", "configmaps");
    let o = WatchOptions {
        send_initial_events: Some(true),
        allow_bookmarks: true,
        resource_version_match: Some("NotOlderThan".into()),
        ..Default::default()
    };
    let start = h.s.watch_start(&cms, Some("default"), &o).unwrap();
    assert_eq!(start.events.len(), 2);
    let bm = &start.events[1];
    assert_eq!(bm.kind, EventKind::Bookmark);
    assert_eq!(
        bm.object,
        json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": h.s.rv().to_string(),
            "annotations": {"k8s.io/initial-events-end": "true"}}})
    );
    assert_eq!(bm.to_json()["type"], "BOOKMARK");
    let no_bookmarks = WatchOptions { allow_bookmarks: false, ..o.clone() };
    assert_eq!(h.s.watch_start(&cms, None, &no_bookmarks).unwrap().events.len(), 1, "no bookmark unless allowed");
    let exact = WatchOptions { resource_version_match: Some("Exact".into()), ..o.clone() };
    assert_eq!(h.s.watch_start(&cms, None, &exact).unwrap_err().code, 422);
    let unset = WatchOptions { resource_version_match: None, ..o.clone() };
    assert_eq!(h.s.watch_start(&cms, None, &unset).unwrap_err().code, 422);
    let no_initial = WatchOptions { send_initial_events: None, ..o };
    assert_eq!(h.s.watch_start(&cms, None, &no_initial).unwrap_err().code, 422);
    assert_eq!(h.s.bookmark(&cms).object["metadata"], json!({"resourceVersion": h.s.rv().to_string()}));
}

#[test]
fn leaving_a_selector_is_a_delete_to_that_watcher() {
    let mut h = H::new();
    let a = h.cm("a", json!({"app": "web"}));
    let cms = h.ty("", "configmaps");
    let o = WatchOptions { label_selector: Some("app=web".into()), ..Default::default() };
    let start = h.s.watch_start(&cms, Some("default"), &o).unwrap();
    let mut out = a.clone();
    out["metadata"]["labels"] = json!({"app": "db"});
    let out = h.update("", "configmaps", out, Subresource::Main).unwrap();
    let mut back = out.clone();
    back["metadata"]["labels"] = json!({"app": "web"});
    let back = h.update("", "configmaps", back, Subresource::Main).unwrap();
    let mut changed = back.clone();
    changed["data"]["k"] = json!("x");
    h.update("", "configmaps", changed, Subresource::Main).unwrap();
    h.cm("other", json!({"app": "db"}));
    let events = h.s.watch_next(&cms, Some("default"), &start.filter, start.after_rv).unwrap();
    let got: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(got, [EventKind::Deleted, EventKind::Added, EventKind::Modified]);
    assert_eq!(events[0].object["metadata"]["labels"]["app"], "web", "DELETED shows the state that matched");
    assert_eq!(H::rv_of(&events[0].object), H::rv_of(&out));
}

#[test]
fn a_pod_bound_later_enters_a_node_watch() {
    let mut h = H::new();
    let pods = h.ty("", "pods");
    let o = WatchOptions { field_selector: Some("spec.nodeName=n1".into()), ..Default::default() };
    let start = h.s.watch_start(&pods, None, &o).unwrap();
    assert!(start.events.is_empty());
    let pod = h
        .create(
            "",
            "pods",
            Some("default"),
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        )
        .unwrap();
    let mut bound = pod.clone();
    bound["spec"]["nodeName"] = json!("n1");
    h.update("", "pods", bound, Subresource::Main).unwrap();
    let events = h.s.watch_next(&pods, None, &start.filter, start.after_rv).unwrap();
    assert_eq!(kinds(&events), [(EventKind::Added, "p".into())]);
    assert_eq!(events[0].object["spec"]["nodeName"], "n1");
}

#[test]
fn the_store_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<crate::store::Store>();
}
