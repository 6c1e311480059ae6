//! The store's request and answer types: configuration, the write context, list/watch/delete
//! options (parsed from the query by the HTTP layer) and what lists and watches answer.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::resource::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;

/// How much watch history each type keeps (the real server's watch cache capacity and etcd's
/// compaction window): events beyond `max_events` per type, or older than `max_age`, are
/// dropped; watching or paging from before the newest dropped event answers 410 Gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// Events kept per type (default 1000).
    pub max_events: usize,
    /// Age of the oldest event kept, in the writes' `at` time (default 5 minutes, etcd's
    /// compaction interval).
    pub max_age: Duration,
}

impl Default for Compaction {
    fn default() -> Compaction {
        Compaction { max_events: 1000, max_age: Duration::from_secs(300) }
    }
}

/// The store's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// The watch history window.
    pub compaction: Compaction,
    /// The `creationTimestamp` of the namespaces that exist from the start (`default`,
    /// `kube-system`, `kube-public`, `kube-node-lease`); default the Unix epoch.
    pub boot_time: SystemTime,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig { compaction: Compaction::default(), boot_time: SystemTime::UNIX_EPOCH }
    }
}

/// What a write takes from its caller: time, identity and randomness (so the store is
/// deterministic in a simulation and usable on loopback).
pub struct WriteCtx<'a> {
    /// Wall-clock time of the write (`creationTimestamp`, `deletionTimestamp`, managedFields).
    pub now: SystemTime,
    /// Elapsed time for the history ([`crate::introspect::Write::at`]) and compaction.
    pub at: Duration,
    /// The client (its `User-Agent`).
    pub actor: &'a str,
    /// `?fieldManager=`, if given; the write's actor when set.
    pub field_manager: Option<&'a str>,
    /// `?dryRun=All`: validate and answer, commit nothing.
    pub dry_run: bool,
    /// Randomness for uids and `generateName` suffixes.
    pub rng: &'a mut dyn FnMut() -> u64,
}

/// Which endpoint a write came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// The object.
    Main,
    /// `/status`.
    Status,
}

/// List query parameters, as sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 or missing: no paging).
    pub limit: Option<u64>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` (`Exact`, `NotOlderThan`).
    pub resource_version_match: Option<String>,
    /// `sendInitialEvents`, when given (forbidden for lists, true or false).
    pub send_initial_events: Option<bool>,
}

/// A list answer: the items (with `apiVersion`/`kind`), the list's resourceVersion, and the
/// paging state.
#[derive(Clone, Debug, PartialEq)]
pub struct List {
    /// The objects, in key order (namespace, then name).
    pub items: Vec<Value>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: u64,
    /// `metadata.continue`, when more items follow.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`, when more items follow and no selector was given.
    pub remaining: Option<u64>,
}

/// Watch query parameters, as sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` (only `NotOlderThan`, with `sendInitialEvents`).
    pub resource_version_match: Option<String>,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`, when given: `true` starts with the current state (ending with the
    /// `k8s.io/initial-events-end` bookmark), `false` without it.
    pub send_initial_events: Option<bool>,
}

/// The selectors of one watch, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchFilter {
    /// The label selector, if any.
    pub label: Option<LabelSelector>,
    /// The field selector, if any.
    pub field: Option<FieldSelector>,
}

impl WatchFilter {
    /// Parses the selectors (400 as [`LabelSelector::parse`] / [`FieldSelector::parse`]).
    pub fn parse(ty: &ResourceType, label: Option<&str>, field: Option<&str>) -> Result<WatchFilter, ApiError> {
        Ok(WatchFilter {
            label: label.map(LabelSelector::parse).transpose()?.filter(|s| !s.is_empty()),
            field: field.map(|f| FieldSelector::parse(f, ty)).transpose()?.filter(|s| !s.is_empty()),
        })
    }

    /// Whether the object passes both selectors.
    pub fn matches(&self, obj: &Value, ty: &ResourceType) -> bool {
        self.label.as_ref().is_none_or(|l| l.matches_object(obj))
            && self.field.as_ref().is_none_or(|f| f.matches(obj, ty))
    }

    /// Whether no selector was given.
    pub fn is_empty(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }
}

/// The start of a watch: the initial events (synthetic ADDED, and the end bookmark for
/// `sendInitialEvents`), the resourceVersion to continue after with
/// [`crate::store::Store::watch_next`], and the parsed filter to pass it.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchStart {
    /// Events to send first.
    pub events: Vec<WatchEvent>,
    /// Continue with events after this resourceVersion.
    pub after_rv: u64,
    /// The resourceVersion the watcher is at before its first event (the requested one, or the
    /// current one for a watch starting with the current state): a bookmark is only sent once
    /// the store has moved past it.
    pub from_rv: u64,
    /// The watch's selectors.
    pub filter: WatchFilter,
}

/// A watch event's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
    /// `BOOKMARK`.
    Bookmark,
}

impl EventKind {
    /// The wire name: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
            EventKind::Bookmark => "BOOKMARK",
        }
    }
}

/// One watch event.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchEvent {
    /// The type.
    pub kind: EventKind,
    /// The object (for bookmarks `{kind, apiVersion, metadata: {resourceVersion}}`).
    pub object: Value,
    /// The event's resourceVersion.
    pub rv: u64,
}

impl WatchEvent {
    /// A bookmark at `rv` for type `ty`; `initial_end` adds the annotation
    /// `k8s.io/initial-events-end: "true"` that ends `sendInitialEvents`.
    pub fn bookmark(ty: &ResourceType, rv: u64, initial_end: bool) -> WatchEvent {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": ty.kind, "apiVersion": ty.api_version(), "metadata": metadata});
        WatchEvent { kind: EventKind::Bookmark, object, rv }
    }

    /// The wire form `{"type": "ADDED", "object": …}`.
    pub fn to_json(&self) -> Value {
        json!({"type": self.kind.name(), "object": self.object})
    }
}

/// DELETE options (query and body).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub preconditions_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub preconditions_rv: Option<String>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`: `Background` (default), `Foreground` (adds the
    /// `foregroundDeletion` finalizer), `Orphan` (adds `orphan`). No garbage collector runs, as
    /// with a bare API server, so those finalizers stay until a client removes them.
    pub propagation_policy: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Clone, Debug, PartialEq)]
pub enum Deleted {
    /// The object left storage (the object as it was).
    Gone(Value),
    /// The object stays with `deletionTimestamp` set (finalizers or a grace period pending).
    Marked(Value),
}
