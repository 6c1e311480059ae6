//! Writes: create, update (PUT), patch and delete, with the metadata rules of [`crate::meta`],
//! optimistic concurrency, preconditions, namespaces, finalizers, and CRDs serving their kinds.

use std::time::Duration;

use serde_json::{Value, json};

use crate::introspect::Verb;
use crate::meta::{self, CreateCtx, Endpoint};
use crate::patch::{Patch, apply_patch};
use crate::resource::{ResourceType, crd_types};
use crate::status::ApiError;
use crate::store::options::{DeleteOptions, Deleted, ListOptions, Subresource, WriteCtx};
use crate::store::state::{Store, scope};

/// How many names a `generateName` create draws before giving up (the real server retries).
const GENERATE_TRIES: usize = 8;

/// 404 for `/status` on a type without a status subresource, as the real router answers.
fn check_subresource(ty: &ResourceType, sub: Subresource) -> Result<(), ApiError> {
    if sub == Subresource::Status && !ty.status_subresource {
        return Err(ApiError::new(404, "NotFound", "the server could not find the requested resource"));
    }
    Ok(())
}

fn endpoint(sub: Subresource) -> Endpoint {
    match sub {
        Subresource::Main => Endpoint::Main,
        Subresource::Status => Endpoint::Status,
    }
}

fn namespace_forbidden(ty: &ResourceType, name: &str, ns: &str) -> ApiError {
    let message = format!("unable to create new content in namespace {ns} because it is being terminated");
    // The cause words it differently; the group is `omitempty` (measured).
    let mut details = crate::status::details(name, &ty.group, &ty.plural);
    details["causes"] = json!([{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"),
        "field": "metadata.namespace"}]);
    ApiError {
        details,
        ..ApiError::new(403, "Forbidden", format!("{} is forbidden: {message}", ty.what(name).qualified()))
    }
}

/// The conditions and accepted names a CRD gets once its kinds are served.
fn crd_status(crd: &mut Value, now: &str) {
    let names = crd["spec"]["names"].clone();
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| vs.iter().filter(|v| v["storage"].as_bool() == Some(true)).map(|v| v["name"].clone()).collect())
        .unwrap_or_default();
    let condition = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    crd["status"] = json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": names,
        "storedVersions": storage,
    });
}

impl Store {
    /// The single hook where managedFields of creates and PUTs are recorded, as manager
    /// `w.field_manager.unwrap_or(w.actor)`; patches get theirs from `apply_patch`. Empty maps
    /// the store drops (`omitempty`: labels, data, …) are dropped first, so that they own no
    /// field: an object with nothing but its name gets no managedFields entry (measured).
    fn record_manager(&self, old: Option<&Value>, new: &mut Value, w: &WriteCtx<'_>, sub: Subresource) {
        meta::drop_empty(new);
        let manager = w.field_manager.unwrap_or(w.actor);
        let subresource = (sub == Subresource::Status).then_some("status");
        crate::patch::record_update_to(old, new, manager, "Update", &meta::rfc3339(w.now), subresource);
    }

    /// Gives a Service without `spec.clusterIP` the next free address of 10.96.0.0/12 from
    /// 10.96.0.10 on (the real allocator draws at random; headless `None` and `ExternalName` get
    /// none), with `clusterIPs`, `ipFamilies: [IPv4]`, `ipFamilyPolicy: SingleStack`,
    /// `internalTrafficPolicy: Cluster`. A chosen address must be in the range and free: else
    /// 422 as the real allocator words it (`failed to allocate IP …: provided IP is already
    /// allocated` / `the provided network does not match the current range`).
    fn allocate_cluster_ip(&mut self, svc: &mut Value, commit: bool) -> Result<(), ApiError> {
        let taken: std::collections::BTreeSet<String> = self
            .objects
            .get("services")
            .map(|m| m.values().filter_map(|o| o["spec"]["clusterIP"].as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let name = meta::name_of(svc).to_string();
        let spec = &mut svc["spec"];
        if !spec.is_object() || spec["type"] == "ExternalName" {
            return Ok(());
        }
        let ip = match spec["clusterIP"].as_str().filter(|s| !s.is_empty()) {
            Some("None") => "None".to_string(),
            Some(ip) => {
                let octets: Vec<u8> = ip.split('.').filter_map(|o| o.parse().ok()).collect();
                let why = if octets.len() != 4 || !(octets[0] == 10 && (96..112).contains(&octets[1])) {
                    Some("the provided network does not match the current range")
                } else if taken.contains(ip) {
                    Some("provided IP is already allocated")
                } else {
                    None
                };
                if let Some(why) = why {
                    let msg = format!("Invalid value: [{ip:?}]: failed to allocate IP {ip}: {why}");
                    let ty = self.registry.find("", "v1", "services").expect("builtin services");
                    return Err(meta::invalid(ty, &name, &[("FieldValueInvalid", "spec.clusterIPs", msg)]));
                }
                ip.to_string()
            }
            None => {
                let start = self.cluster_ips;
                let ip = loop {
                    let n = self.cluster_ips + 10;
                    self.cluster_ips += 1;
                    let ip = format!("10.{}.{}.{}", 96 + (n >> 16) % 16, (n >> 8) & 255, n & 255);
                    if !taken.contains(&ip) {
                        break ip;
                    }
                };
                if !commit {
                    self.cluster_ips = start;
                }
                ip
            }
        };
        spec["clusterIP"] = json!(ip);
        spec["clusterIPs"] = json!([ip]);
        if ip != "None" {
            spec["ipFamilies"] = json!(["IPv4"]);
            spec["ipFamilyPolicy"] = json!("SingleStack");
        }
        spec["internalTrafficPolicy"] = json!("Cluster");
        Ok(())
    }

    fn check_namespace(&self, ty: &ResourceType, ns: Option<&str>, name: &str) -> Result<(), ApiError> {
        if !ty.namespaced {
            return Ok(());
        }
        let ns = ns.ok_or_else(|| ApiError::bad_request("the server could not find the requested resource"))?;
        let ns_ty = self.registry.find("", "v1", "namespaces").expect("builtin namespaces");
        match self.stored(ns_ty, None, ns) {
            None => Err(ApiError::not_found(ns_ty.what(ns))),
            Some(n) if meta::is_deleting(n) => Err(namespace_forbidden(ty, name, ns)),
            Some(_) => Ok(()),
        }
    }

    /// POST: creates `obj` (rules of [`crate::meta`]); returns it as stored. Errors: 400 (type or
    /// namespace mismatch), 403 (namespace terminating), 404 (namespace missing), 409
    /// `AlreadyExists`, 422 (name), 500 (resourceVersion set). A CRD starts serving its kinds.
    pub fn create(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        w: &mut WriteCtx<'_>,
    ) -> Result<Value, ApiError> {
        self.create_verb(ty, ns, obj, w, Verb::Create)
    }

    fn create_verb(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        w: &mut WriteCtx<'_>,
        verb: Verb,
    ) -> Result<Value, ApiError> {
        if ty.crd.is_some() && self.registry.find(&ty.group, &ty.version, &ty.plural).is_none() {
            return Err(ApiError::not_found(ty.what("")));
        }
        let ns = scope(ty, ns);
        let now = meta::rfc3339(w.now);
        let generated = meta::name_of(&obj).is_empty();
        let mut tries = 0;
        let mut new = loop {
            let cx = CreateCtx { ns, now: &now, rng: &mut *w.rng };
            let new = meta::prepare_create(ty, obj.clone(), cx)?;
            tries += 1;
            if self.stored(ty, ns, meta::name_of(&new)).is_none() {
                break new;
            }
            if !generated || tries >= GENERATE_TRIES {
                return Err(ApiError::already_exists(ty.what(meta::name_of(&new))));
            }
        };
        let name = meta::name_of(&new).to_string();
        self.check_namespace(ty, ns, &name)?;
        crate::schema::validate(ty, &mut new)?;
        if ty.group.is_empty() && ty.kind == "Service" {
            self.allocate_cluster_ip(&mut new, !w.dry_run)?;
        }
        if ty.is_crd() {
            crd_types(&new)?;
            crd_status(&mut new, &now);
        }
        if verb != Verb::Patch {
            // An apply that creates has its managedFields from `apply_patch` already.
            self.record_manager(None, &mut new, w, Subresource::Main);
        }
        if w.dry_run {
            return Ok(new);
        }
        let out = self.commit(ty, ns, &name, None, Some(new), verb, w);
        if ty.is_crd() {
            self.registry.add_crd(&out)?;
        }
        Ok(out)
    }

    /// The stored object served at `ty`'s version (so writes through another version of a CRD
    /// compare like with like).
    fn stored_or_404(&self, ty: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let mut obj = self.stored(ty, ns, name).cloned().ok_or_else(|| ApiError::not_found(ty.what(name)))?;
        meta::set_type(&mut obj, ty);
        Ok(obj)
    }

    /// PUT on the object or `/status`: replaces it (rules of [`crate::meta`]). Errors: 404, 409
    /// `Conflict` for a stale `metadata.resourceVersion`, 422 `Invalid value: 0x0: must be
    /// specified for an update` without one on types that refuse unconditional updates, and the
    /// errors of [`meta::prepare_update`]. An update changing nothing commits nothing (the stored
    /// object is answered); one removing the last finalizer of a deleted object removes it.
    pub fn update(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        sub: Subresource,
        w: &mut WriteCtx<'_>,
    ) -> Result<Value, ApiError> {
        check_subresource(ty, sub)?;
        // The handler compares the names before reading the stored object.
        let body_name = meta::name_of(&obj);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let old = self.stored_or_404(ty, ns, name)?;
        match meta::rv_of(&obj) {
            // The storage layer parses it first: a plain error with an empty reason.
            Some(rv) if rv.parse::<u64>().is_err() => {
                return Err(ApiError::new(500, "", format!("strconv.ParseUint: parsing {rv:?}: invalid syntax")));
            }
            // Custom resources name the resource (`widgets.example.com`) and print 0 plainly.
            None if ty.crd.is_some() => {
                let msg = "Invalid value: 0: must be specified for an update";
                return Err(ApiError::invalid(&ty.qualified(), ty.what(name), "metadata.resourceVersion", msg));
            }
            None if !ty.allow_unconditional_update => {
                let msg = "Invalid value: 0x0: must be specified for an update".to_string();
                return Err(meta::invalid(ty, name, &[("FieldValueInvalid", "metadata.resourceVersion", msg)]));
            }
            Some(rv) if Some(rv) != meta::rv_of(&old) => return Err(ApiError::conflict(ty.what(name))),
            _ => {}
        }
        let mut new = meta::prepare_update(ty, &old, obj, scope(ty, ns), endpoint(sub))?;
        self.record_manager(Some(&old), &mut new, w, sub);
        let verb = if sub == Subresource::Status { Verb::UpdateStatus } else { Verb::Update };
        self.finish_update(ty, ns, name, old, new, verb, w)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        name: &str,
        old: Value,
        mut new: Value,
        verb: Verb,
        w: &mut WriteCtx<'_>,
    ) -> Result<Value, ApiError> {
        if ty.is_crd() {
            crd_types(&new)?;
            if meta::spec_changed(ty, &old, &new) || new.get("status").is_none() {
                crd_status(&mut new, &meta::rfc3339(w.now));
            }
        }
        crate::schema::validate(ty, &mut new)?;
        if meta::is_noop(&old, &new) {
            let mut out = old;
            meta::set_type(&mut out, ty);
            return Ok(out);
        }
        if w.dry_run {
            return Ok(new);
        }
        if meta::should_delete(&new) {
            // The real server answers the object as updated (finalizers gone) at the revision it
            // was stored at before the delete (measured).
            let rv = meta::rv_of(&old).unwrap_or_default().to_string();
            let mut gone = self.remove(ty, ns, name, old, w);
            gone["metadata"]["finalizers"] = new["metadata"]["finalizers"].clone();
            gone["metadata"]["resourceVersion"] = json!(rv);
            meta::drop_empty(&mut gone);
            return Ok(gone);
        }
        let out = self.commit(ty, ns, name, Some(old), Some(new), verb, w);
        if ty.is_crd() {
            self.registry.add_crd(&out)?;
        }
        Ok(out)
    }

    /// Removes a stored object (a `Deleted` write); a CRD takes its custom resources and its
    /// kinds with it.
    fn remove(&mut self, ty: &ResourceType, ns: Option<&str>, name: &str, old: Value, w: &WriteCtx<'_>) -> Value {
        if ty.is_crd() {
            let types = self.registry.remove_crd(name);
            if let Some(cr) = types.first() {
                let keys: Vec<(Option<String>, String)> = self
                    .objects
                    .get(&cr.qualified())
                    .map(|objs| {
                        objs.values()
                            .map(|o| (meta::namespace_of(o).map(str::to_string), meta::name_of(o).to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                for (cr_ns, cr_name) in keys {
                    if let Some(obj) = self.stored(cr, cr_ns.as_deref(), &cr_name).cloned() {
                        self.commit(cr, cr_ns.as_deref(), &cr_name, Some(obj), None, Verb::Deleted, w);
                    }
                }
            }
        }
        self.commit(ty, ns, name, Some(old), None, Verb::Deleted, w)
    }

    /// PATCH on the object or `/status` through [`crate::patch::apply_patch`]; unconditional
    /// unless the patched object carries a resourceVersion (then 409 when stale). Server-side
    /// apply on a missing object creates it; other patches of a missing object are 404.
    pub fn patch(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        name: &str,
        patch: &Patch,
        sub: Subresource,
        w: &mut WriteCtx<'_>,
    ) -> Result<Value, ApiError> {
        check_subresource(ty, sub)?;
        let now = meta::rfc3339(w.now);
        let manager = w.field_manager.unwrap_or(w.actor).to_string();
        let Ok(live) = self.stored_or_404(ty, ns, name) else {
            if let (Patch::Apply { .. }, Subresource::Main) = (patch, sub) {
                let mut obj = apply_patch(None, patch, &ty.kind, &now, None)?;
                if meta::name_of(&obj).is_empty() && obj.is_object() {
                    obj["metadata"]["name"] = json!(name);
                }
                return self.create_verb(ty, ns, obj, w, Verb::Patch);
            }
            return Err(ApiError::not_found(ty.what(name)));
        };
        let subresource = (sub == Subresource::Status).then_some("status");
        // A non-apply patch's managedFields are recorded on the object as stored (after the
        // status reset and the other rules of `prepare_update`), as for an update.
        let apply = matches!(patch, Patch::Apply { .. });
        let update_manager = apply.then_some(manager.as_str());
        let mut new = crate::patch::apply_patch_to(Some(&live), patch, &ty.kind, &now, update_manager, subresource)?;
        match meta::rv_of(&new) {
            // As for an update: the storage layer parses it first (a 500 with no reason).
            Some(rv) if rv.parse::<u64>().is_err() => {
                return Err(ApiError::new(500, "", format!("strconv.ParseUint: parsing {rv:?}: invalid syntax")));
            }
            Some(rv) if Some(rv) != meta::rv_of(&live) => return Err(ApiError::conflict(ty.what(name))),
            Some(_) => {}
            None => meta::set_rv(&mut new, meta::rv_of(&live).and_then(|r| r.parse().ok()).unwrap_or(0)),
        }
        let mut new = meta::prepare_update(ty, &live, new, scope(ty, ns), endpoint(sub))?;
        if !apply {
            self.record_manager(Some(&live), &mut new, w, sub);
        }
        self.finish_update(ty, ns, name, live, new, Verb::Patch, w)
    }

    /// DELETE: checks the preconditions (409 `Precondition failed: …`), then removes the object,
    /// or marks it (`deletionTimestamp`, [`Deleted::Marked`]) when it has finalizers (or gets
    /// some from `propagationPolicy` Foreground/Orphan), is a Namespace (`spec.finalizers`, phase
    /// `Terminating`; no namespace controller runs), or is a Pod bound to a node with a grace
    /// period. Deleting an object already marked commits nothing (a Pod with grace 0 goes).
    pub fn delete(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        w: &mut WriteCtx<'_>,
    ) -> Result<Deleted, ApiError> {
        let old = self.stored_or_404(ty, ns, name)?;
        if ty.group.is_empty() && ty.kind == "Namespace" && ["default", "kube-system", "kube-public"].contains(&name) {
            // The NamespaceLifecycle admission plugin's immortal namespaces.
            let mut e = ApiError::new(
                403,
                "Forbidden",
                format!("{} is forbidden: this namespace may not be deleted", ty.what(name).qualified()),
            );
            e.details = crate::status::details(name, "", "namespaces");
            return Err(e);
        }
        check_preconditions(ty, name, &old, opts)?;
        let extra: &[&str] = match opts.propagation_policy.as_deref() {
            None | Some("Background") => &[],
            Some("Foreground") => &["foregroundDeletion"],
            Some("Orphan") => &["orphan"],
            Some(other) => {
                let msg = format!(
                    "Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                );
                return Err(ApiError::bad_request(format!("propagationPolicy: {msg}")));
            }
        };
        let grace = grace_seconds(ty, &old, opts);
        let dry_run = w.dry_run || opts.dry_run;
        let ns_finalizers = ty.is_namespace() && old["spec"]["finalizers"].as_array().is_some_and(|a| !a.is_empty());
        if meta::is_deleting(&old) {
            if grace == 0 && meta::finalizers_of(&old).is_empty() && !ns_finalizers && !dry_run {
                return Ok(Deleted::Gone(self.remove(ty, ns, name, old, w)));
            }
            return Ok(Deleted::Marked(old));
        }
        if ty.is_crd() && meta::finalizers_of(&old).is_empty() && !dry_run {
            // The real CRD REST Delete marks it with `customresourcecleanup.apiextensions.k8s.io`
            // and answers the marked object; its in-process finalizer then deletes the custom
            // resources and the CRD. kubesim does both at once (MODIFIED, then DELETED).
            let mut new = old.clone();
            meta::mark_deleted(&mut new, &meta::rfc3339(w.now), 0, &["customresourcecleanup.apiextensions.k8s.io"]);
            let marked = self.commit(ty, ns, name, Some(old), Some(new), Verb::DeleteMarked, w);
            self.remove(ty, ns, name, marked.clone(), w);
            return Ok(Deleted::Marked(marked));
        }
        if meta::finalizers_of(&old).is_empty() && extra.is_empty() && !ns_finalizers && grace == 0 {
            if !dry_run {
                self.remove(ty, ns, name, old.clone(), w);
            }
            return Ok(Deleted::Gone(old));
        }
        let mut new = old.clone();
        let at = meta::rfc3339(w.now + Duration::from_secs(grace.max(0) as u64));
        meta::mark_deleted(&mut new, &at, grace, extra);
        if ty.is_namespace() {
            new["status"]["phase"] = json!("Terminating");
        }
        if dry_run {
            return Ok(Deleted::Marked(new));
        }
        Ok(Deleted::Marked(self.commit(ty, ns, name, Some(old), Some(new), Verb::DeleteMarked, w)))
    }
}

impl Store {
    /// DELETE on a collection (`deletecollection`): deletes every object [`Store::list`] selects
    /// with `list` (paging ignored), each as [`Store::delete`] with `opts`, in key order; stops
    /// at the first error.
    pub fn delete_collection(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
        w: &mut WriteCtx<'_>,
    ) -> Result<Vec<Deleted>, ApiError> {
        let all = ListOptions { limit: None, continue_token: None, ..list.clone() };
        let items = self.list(ty, ns, &all)?.items;
        let mut out = Vec::new();
        for item in items {
            let item_ns = meta::namespace_of(&item).map(str::to_string);
            out.push(self.delete(ty, item_ns.as_deref(), meta::name_of(&item), opts, w)?);
        }
        Ok(out)
    }
}

fn check_preconditions(ty: &ResourceType, name: &str, old: &Value, opts: &DeleteOptions) -> Result<(), ApiError> {
    let uid = old["metadata"]["uid"].as_str().unwrap_or("");
    if let Some(want) = opts.preconditions_uid.as_deref()
        && want != uid
    {
        // The generic registry's own wording (not the storage layer's `Precondition failed: …`),
        // naming the object by kind.
        let cause = format!(
            "the UID in the precondition ({want}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        );
        return Err(ApiError::conflict_on_kind(&ty.kind, name, &cause));
    }
    let rv = meta::rv_of(old).unwrap_or("");
    if let Some(want) = opts.preconditions_rv.as_deref()
        && want != rv
    {
        let cause = format!(
            "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        );
        return Err(ApiError::conflict_on_kind(&ty.kind, name, &cause));
    }
    Ok(())
}

/// The grace period a delete waits: Pods bound to a node (`spec.nodeName`) take the request's
/// `gracePeriodSeconds` or their `terminationGracePeriodSeconds` (default 30); everything else 0.
fn grace_seconds(ty: &ResourceType, obj: &Value, opts: &DeleteOptions) -> i64 {
    let bound_pod =
        ty.group.is_empty() && ty.plural == "pods" && obj["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty());
    if !bound_pod {
        return 0;
    }
    opts.grace_period_seconds
        .unwrap_or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64().unwrap_or(30))
        .max(0)
}
