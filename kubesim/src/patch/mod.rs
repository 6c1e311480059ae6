//! Patches, as the real kube-apiserver applies them (`PATCH` with each `Content-Type`), and
//! `metadata.managedFields` maintenance. Pure and synchronous, over `serde_json::Value`; errors
//! are [`ApiError`]s shaped as the real server's `Status` bodies.
//!
//! - [`merge()`]: JSON merge patch (RFC 7386), `application/merge-patch+json` (module
//!   [`mod@merge`]).
//! - [`json()`]: JSON patch (RFC 6902), `application/json-patch+json`, via the `json-patch`
//!   crate; a failed `test` (or any operation that fails on the object) is 422 `Invalid` with
//!   the real server's generic message; a `test` for `null` on a missing key passes, as
//!   the server's `evanphx/json-patch` v4 has it and kube-runtime's finalizer helper needs
//!   (module [`mod@json`]).
//! - [`strategic()`]: strategic merge patch for the built-in kinds served, merge keys from the Go
//!   types' tags (a documented subset: [`schema::list_type`]); custom resources → 415 (module
//!   [`mod@strategic`]).
//! - [`Patch::Apply`]: server-side apply with field managers, conflicts (409 with
//!   `FieldManagerConflict` causes), `force`, and removal of fields no longer applied (module
//!   [`apply`]).
//! - [`record_update`]: managedFields for non-apply writes (module [`managed`]): creates,
//!   updates and merge/JSON/strategic patches own the fields they changed.
//! - [`validate_patch_options`]: the real server's 422s for an apply without `fieldManager` and
//!   `force` on a non-apply patch (module [`options`]; the HTTP layer calls it).
//!
//! Field sets and their `FieldsV1` encoding are in [`fields`].
//!
//! Bodies are decoded by content type, with the real server's 415s and 400s, in [`decode`].
//!
//! For the store: call [`apply_patch`] (or [`apply_patch_to`] for `/status`) with the live
//! object; an apply result already carries its managedFields. For a non-apply write whose
//! result the store still changes (status reset, immutable fields), pass `update_manager`
//! None and call [`record_update`] on the final object, so owners match what is stored. The
//! real server drops empty `finalizers`/`ownerReferences` lists and empty `labels` maps on
//! storage (Go `omitempty`); kube-runtime's finalizer helper relies on that (`test
//! /metadata/finalizers null` when the list is empty).
//!
//! Known differences from the real server (each also in its module's docs):
//! 1. JSON patch: no limit on the number of operations (real: 10 000, then 413).
//! 2. Strategic merge: `$setElementOrder` is accepted and ignored; fewer keyed fields than the
//!    real types declare.
//! 3. Lists of custom resources are atomic (kubesim keeps no CRD schema, so no
//!    `x-kubernetes-list-type`), except `metadata.finalizers` (set) and
//!    `metadata.ownerReferences` (by uid).
//! 4. SSA keys container ports by `containerPort` and Service ports by `port` (real: also
//!    `protocol`).
//! 5. SSA: a manager never conflicts with its own entries under another operation; a keyed item
//!    without its key is appended rather than refused; a no-op apply keeps the entry's time;
//!    emptied, unowned maps are removed after pruning.
//! 6. managedFields: no `ancient-changes` folding of old `Update` entries; a client-supplied
//!    `managedFields` on a non-apply write is ignored (real: a valid one replaces, `[{}]` clears).
//! 7. An `Update` owns a map itself (`".": {}`) only for the map fields [`schema::is_map`] knows
//!    (`data`, `labels`, `annotations`, …); other objects count as structs.
//! 8. Untracked paths: the real server's list (`apiVersion`, `kind`, `metadata.name`, `uid`,
//!    `resourceVersion`, …) plus `metadata.deletionTimestamp` and
//!    `metadata.deletionGracePeriodSeconds` (server-set).
//! 9. `PatchOptions`: `fieldManager` length and characters are not checked.
//! 10. An apply configuration's `null` removes the field and is not owned.
//! 11. Conflicts list each manager's paths in kubesim's sorted order of `FieldsV1` elements
//!     (the real server: structured-merge-diff's path order; the same for plain field names).
//!
//! Sources: the apply conflict message and causes were read in apimachinery's
//! `managedfields/internal/conflict.go` (`printManager`, `getConflictMessage`,
//! `NewConflictError`), the managedFields order in `sortEncodedManagedFields`, the
//! `PatchOptions` 422s in `ValidatePatchOptions` (public copies of the sources); the JSON-patch
//! 422 is kubernetes PR #68346 (`NewGenericServerResponse` in apiserver's `patch.go`) and the
//! body clients report (java-operator-sdk#2759); the CR 415 message as clients log it. From
//! memory of the sources, not re-read here (for the differential suite to confirm):
//! `before-first-apply`, the untracked metadata (`StripMetaManager`), the strategic directives.

pub mod apply;
pub mod decode;
pub mod fields;
pub mod json;
pub mod managed;
pub mod merge;
pub mod options;
pub mod schema;
pub mod strategic;

pub use json::json;
pub use merge::merge;
pub use options::validate_patch_options;
pub use strategic::strategic;

use crate::status::ApiError;
use serde_json::Value;

/// A patch request's body, by `Content-Type`.
#[derive(Clone, Debug, PartialEq)]
pub enum Patch {
    /// `application/merge-patch+json`.
    Merge(Value),
    /// `application/json-patch+json` (an array of operations).
    Json(Value),
    /// `application/strategic-merge-patch+json`.
    Strategic(Value),
    /// `application/apply-patch+yaml` (the configuration, as JSON), with the `fieldManager`
    /// (required by the real server for apply) and `force`.
    Apply {
        /// The applied configuration.
        body: Value,
        /// The field manager.
        manager: String,
        /// Take conflicting fields instead of failing with 409.
        force: bool,
    },
}

/// The object after `patch`, with `metadata.managedFields` maintained: an apply as
/// [`apply::server_side_apply`]; other patches via [`record_update`] as `update_manager` (none:
/// managedFields left as `live` has them). `kind` is the object's kind (`Deployment`), `now` the
/// write's time (RFC 3339, second precision). `live` None: apply creates; other patches → 404.
/// The caller (the store) keeps the rules of storage (immutable fields, status subresource,
/// resourceVersion preconditions).
pub fn apply_patch(
    live: Option<&Value>,
    patch: &Patch,
    kind: &str,
    now: &str,
    update_manager: Option<&str>,
) -> Result<Value, ApiError> {
    apply_patch_to(live, patch, kind, now, update_manager, None)
}

/// [`apply_patch`] for a subresource (`Some("status")`): managedFields entries carry it.
pub fn apply_patch_to(
    live: Option<&Value>,
    patch: &Patch,
    kind: &str,
    now: &str,
    update_manager: Option<&str>,
    subresource: Option<&str>,
) -> Result<Value, ApiError> {
    if let Patch::Apply { body, manager, force } = patch {
        return apply::server_side_apply(live, body, kind, manager, *force, now, subresource);
    }
    let Some(live) = live else {
        return Err(ApiError::new(404, "NotFound", "the object to patch does not exist"));
    };
    let mut new = match patch {
        Patch::Merge(p) => merge(live, p),
        Patch::Json(p) => json(live, p)?,
        Patch::Strategic(p) => strategic(live, p, kind)?,
        Patch::Apply { .. } => unreachable!(),
    };
    let kept = live.pointer("/metadata/managedFields").cloned();
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        match kept {
            Some(m) => meta.insert("managedFields".into(), m),
            None => meta.remove("managedFields"),
        };
    }
    if let Some(manager) = update_manager {
        managed::record_write(Some(live), &mut new, manager, "Update", now, subresource);
    }
    Ok(new)
}

/// Records a non-apply write (`operation` "Update"; a create when `old` is None) by `manager` at
/// `now` (RFC 3339) into `new`'s `metadata.managedFields`: the manager owns the fields it
/// added or changed, other managers lose them, removed fields leave every manager.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, operation: &str, now: &str) {
    managed::record_write(old, new, manager, operation, now, None);
}

/// [`record_update`] for a subresource (`Some("status")`).
pub fn record_update_to(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    now: &str,
    subresource: Option<&str>,
) {
    managed::record_write(old, new, manager, operation, now, subresource);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:00:01Z";

    fn cm() -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        record_update(None, &mut v, "creator", "Update", T0);
        v
    }

    #[test]
    fn a_merge_patch_is_recorded_for_its_manager() {
        let patch = Patch::Merge(json!({"data": {"b": "2"}, "metadata": {"managedFields": null}}));
        let out = apply_patch(Some(&cm()), &patch, "ConfigMap", T1, Some("patcher")).unwrap();
        assert_eq!(out["data"], json!({"a": "1", "b": "2"}));
        let mf = out["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 2, "a patch cannot drop managedFields: {out}");
        assert_eq!(mf[1]["manager"], "patcher");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
        let untracked = apply_patch(Some(&cm()), &patch, "ConfigMap", T1, None).unwrap();
        assert_eq!(untracked["metadata"]["managedFields"], cm()["metadata"]["managedFields"]);
    }

    #[test]
    fn each_patch_type_dispatches() {
        let live = cm();
        let j = Patch::Json(json!([{"op": "test", "path": "/data/a", "value": "2"}]));
        assert_eq!(apply_patch(Some(&live), &j, "ConfigMap", T1, None).unwrap_err().code, 422);
        let s = Patch::Strategic(json!({"data": {"a": null}}));
        let out = apply_patch(Some(&live), &s, "ConfigMap", T1, Some("s")).unwrap();
        assert_eq!(out["data"], json!({}));
        assert_eq!(apply_patch(None, &s, "ConfigMap", T1, None).unwrap_err().code, 404);
        let a = Patch::Apply {
            body: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "9"}}),
            manager: "ssa".into(),
            force: false,
        };
        let e = apply_patch(Some(&live), &a, "ConfigMap", T1, None).unwrap_err();
        assert_eq!(e.message, "Apply failed with 1 conflict: conflict with \"creator\" using v1: .data.a");
        let created = apply_patch(None, &a, "ConfigMap", T1, None).unwrap();
        assert_eq!(created["metadata"]["managedFields"][0]["operation"], "Apply");
        let st = apply_patch_to(
            Some(&live),
            &Patch::Merge(json!({"data": {"c": "3"}})),
            "ConfigMap",
            T1,
            Some("k"),
            Some("status"),
        )
        .unwrap();
        assert_eq!(st["metadata"]["managedFields"][1]["subresource"], "status");
    }
}
