//! Watches: the initial events (synthetic ADDED for the current state, the
//! `k8s.io/initial-events-end` bookmark for `sendInitialEvents`), then the type's events after a
//! resourceVersion, with selector transitions as the real watch cache sends them (an object
//! entering the selector is ADDED, one leaving it DELETED with its previous state at the event's
//! resourceVersion), and 410 `too old resource version` once the history was compacted.

use serde_json::Value;

use crate::meta;
use crate::resource::ResourceType;
use crate::status::ApiError;
use crate::store::list::{OptionCause, list_options_invalid, parse_rv_bare, too_old};
use crate::store::log::LogEvent;
use crate::store::options::{EventKind, WatchEvent, WatchFilter, WatchOptions, WatchStart};
use crate::store::state::{Store, scope};

fn convert(ev: &LogEvent, ty: &ResourceType, filter: &WatchFilter) -> Option<WatchEvent> {
    let now_passes = ev.kind != EventKind::Deleted && filter.matches(&ev.object, ty);
    let before_passed = ev.prev.as_ref().is_some_and(|p| filter.matches(p, ty));
    let (kind, mut object) = match (now_passes, before_passed) {
        (true, false) => (EventKind::Added, ev.object.clone()),
        (true, true) => (EventKind::Modified, ev.object.clone()),
        (false, true) => {
            let mut prev = ev.prev.clone().unwrap_or(Value::Null);
            meta::set_rv(&mut prev, ev.rv);
            (EventKind::Deleted, prev)
        }
        (false, false) => return None,
    };
    meta::set_type(&mut object, ty);
    Some(WatchEvent { kind, object, rv: ev.rv })
}

impl Store {
    /// Starts a watch. `sendInitialEvents=true`, or (when it is not given) resourceVersion unset,
    /// `""` or `"0"`: one ADDED per current object passing the selectors (key order), then, with
    /// `allowWatchBookmarks`, a BOOKMARK annotated `k8s.io/initial-events-end: "true"` at the
    /// current revision (kube-apiserver v1.37 sends it to such legacy watches too, measured);
    /// continue after the current revision. `sendInitialEvents=false`: no initial events.
    /// resourceVersion `n`: the events after `n` (410 when compacted); continue after the later
    /// of `n` and the current revision. Errors: 400 (selectors), 422 (the real server's
    /// `ListOptions` validation of `sendInitialEvents` and `resourceVersionMatch`), 410, 500 for
    /// an unparsable resourceVersion (as the real watch cache answers it).
    pub fn watch_start(
        &self,
        ty: &ResourceType,
        ns: Option<&str>,
        opts: &WatchOptions,
    ) -> Result<WatchStart, ApiError> {
        let causes = validate_watch(opts);
        if !causes.is_empty() {
            return Err(list_options_invalid(&causes));
        }
        let filter = WatchFilter::parse(ty, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let initial = opts.send_initial_events.unwrap_or(rv.is_none_or(|rv| rv == "0"));
        if !initial {
            let n = match rv {
                None | Some("0") => self.rv,
                Some(rv) => parse_rv_bare(rv).map_err(|m| ApiError::new(500, "", m))?,
            };
            let events = self.watch_next(ty, ns, &filter, n)?;
            return Ok(WatchStart { events, after_rv: n.max(self.rv), from_rv: n, filter });
        }
        let mut events = self.initial_events(ty, ns, &filter);
        if opts.allow_bookmarks {
            events.push(WatchEvent::bookmark(ty, self.rv, true));
        }
        Ok(WatchStart { events, after_rv: self.rv, from_rv: self.rv, filter })
    }

    fn initial_events(&self, ty: &ResourceType, ns: Option<&str>, filter: &WatchFilter) -> Vec<WatchEvent> {
        let prefix = scope(ty, ns).map(|n| format!("{n}/"));
        let Some(objects) = self.objects.get(&ty.qualified()) else { return Vec::new() };
        objects
            .iter()
            .filter(|(k, _)| prefix.as_deref().is_none_or(|p| k.starts_with(p)))
            .filter(|(_, v)| filter.matches(v, ty))
            .map(|(_, v)| {
                let mut object = v.clone();
                meta::set_type(&mut object, ty);
                let rv = meta::rv_of(v).and_then(|r| r.parse().ok()).unwrap_or(0);
                WatchEvent { kind: EventKind::Added, object, rv }
            })
            .collect()
    }

    /// The events of `ty` (in `ns`, or all namespaces) after `after_rv` that the filter lets
    /// through, in resourceVersion order, with selector transitions (module docs). Errors: 410
    /// `too old resource version: N (M)` when events after `after_rv` were compacted (`M` is the
    /// oldest resourceVersion still watchable). Every event up to [`Store::rv`] was considered,
    /// so a caller continues after `rv()` read under the same lock, even when the filter let
    /// nothing through (otherwise a quiet selective watch would fall behind the compaction
    /// window and get a spurious 410).
    pub fn watch_next(
        &self,
        ty: &ResourceType,
        ns: Option<&str>,
        filter: &WatchFilter,
        after_rv: u64,
    ) -> Result<Vec<WatchEvent>, ApiError> {
        let Some(log) = self.logs.get(&ty.qualified()) else {
            let floor = self.floor(ty);
            return if after_rv < floor { Err(too_old(after_rv, floor)) } else { Ok(Vec::new()) };
        };
        let ns = scope(ty, ns);
        let events = log.since(after_rv).map_err(|floor| too_old(after_rv, floor))?;
        Ok(events.filter(|e| ns.is_none_or(|n| e.ns == n)).filter_map(|e| convert(e, ty, filter)).collect())
    }

    /// A BOOKMARK at the current revision for `ty` (the HTTP layer sends these on idle watches
    /// with `allowWatchBookmarks`).
    pub fn bookmark(&self, ty: &ResourceType) -> WatchEvent {
        WatchEvent::bookmark(ty, self.rv, false)
    }
}

/// The real server's `ValidateListOptions` for a watch, causes in its order.
fn validate_watch(opts: &WatchOptions) -> Vec<OptionCause> {
    let mut causes = Vec::new();
    let rv_match = opts.resource_version_match.as_deref().filter(|m| !m.is_empty());
    if opts.send_initial_events.is_some() && rv_match != Some("NotOlderThan") {
        let msg = "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan";
        causes.push(("resourceVersionMatch", msg.to_string()));
    }
    if let Some(m) = rv_match {
        if opts.send_initial_events.is_none() {
            let msg = "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided";
            causes.push(("resourceVersionMatch", msg.to_string()));
        }
        if m != "NotOlderThan" {
            causes.push((
                "resourceVersionMatch",
                format!("Unsupported value: \"{m}\": supported values: \"NotOlderThan\""),
            ));
        }
    }
    causes
}
