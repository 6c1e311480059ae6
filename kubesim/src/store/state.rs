//! The store's state and its one commit path: objects per type, the global revision, per-type
//! event logs, the write history and the Lease timeline.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::introspect::{LeaseChange, ObjectRef, Verb, Write};
use crate::meta;
use crate::resource::{Registry, ResourceType};
use crate::status::ApiError;
use crate::store::log::{LogEvent, TypeLog};
use crate::store::options::{EventKind, StoreConfig, WriteCtx};

/// The namespaces every cluster starts with.
pub const BOOT_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The fake's storage (sync; the server wraps it in a mutex). See the module docs of
/// [`crate::store`].
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) config: StoreConfig,
    pub(crate) registry: Registry,
    pub(crate) rv: u64,
    /// Per qualified type (`configmaps`, `leases.coordination.k8s.io`): key (`ns/name` or
    /// `name`) → object.
    pub(crate) objects: BTreeMap<String, BTreeMap<String, Value>>,
    pub(crate) logs: BTreeMap<String, TypeLog>,
    pub(crate) writes: Vec<Write>,
    pub(crate) leases: Vec<(ObjectRef, LeaseChange)>,
    /// Service cluster IPs handed out so far.
    pub(crate) cluster_ips: u64,
}

/// The storage key of an object: `ns/name`, or `name` for cluster-scoped objects.
pub fn key(ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

impl Store {
    /// A store with the built-in types and the namespaces `default`, `kube-system`,
    /// `kube-public`, `kube-node-lease` (resourceVersions 1–4, not in [`Store::writes`]); the
    /// first write commits at resourceVersion 5.
    pub fn new(config: StoreConfig) -> Store {
        let mut store = Store {
            registry: Registry::builtin(),
            rv: 0,
            objects: BTreeMap::new(),
            logs: BTreeMap::new(),
            writes: Vec::new(),
            leases: Vec::new(),
            cluster_ips: 0,
            config,
        };
        let ns_type = store.registry.find("", "v1", "namespaces").expect("builtin").clone();
        let now = meta::rfc3339(store.config.boot_time);
        for (i, name) in BOOT_NAMESPACES.iter().enumerate() {
            let mut n = 0x5eed_0000 + i as u64;
            let mut rng = move || {
                n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                n
            };
            let cx = meta::CreateCtx { ns: None, now: &now, rng: &mut rng };
            let mut obj =
                meta::prepare_create(&ns_type, json!({"metadata": {"name": name}}), cx).expect("boot namespace");
            store.rv += 1;
            meta::set_rv(&mut obj, store.rv);
            store.objects.entry(ns_type.qualified()).or_default().insert(name.to_string(), obj);
        }
        store
    }

    /// The served types.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The current global revision (the resourceVersion of the last commit).
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The store's configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    pub(crate) fn stored(&self, ty: &ResourceType, ns: Option<&str>, name: &str) -> Option<&Value> {
        self.objects.get(&ty.qualified())?.get(&key(scope(ty, ns), name))
    }

    /// The object, with `apiVersion` of `ty`'s version. Errors: 404 `NotFound`.
    pub fn get(&self, ty: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let mut obj = self.stored(ty, ns, name).cloned().ok_or_else(|| ApiError::not_found(ty.what(name)))?;
        meta::set_type(&mut obj, ty);
        Ok(obj)
    }

    /// Every committed write, in commit order.
    pub fn writes(&self) -> &[Write] {
        &self.writes
    }

    /// The writes of one object, in commit order (across deletions and re-creations).
    pub fn timeline(&self, obj: &ObjectRef) -> Vec<Write> {
        self.writes.iter().filter(|w| w.object == *obj).cloned().collect()
    }

    /// The changes of the Lease `ns/name`, in commit order.
    pub fn lease_timeline(&self, ns: &str, name: &str) -> Vec<LeaseChange> {
        self.leases.iter().filter(|(o, _)| o.namespace == ns && o.name == name).map(|(_, c)| c.clone()).collect()
    }

    /// Drops watch history older than the window ([`crate::store::Compaction`]) at elapsed time
    /// `now_at`; every commit calls it.
    pub fn compact(&mut self, now_at: std::time::Duration) {
        let c = self.config.compaction.clone();
        for log in self.logs.values_mut() {
            log.compact(&c, now_at);
        }
    }

    /// Drops every type's history at or below `rv` (see [`TypeLog::compact_to`]).
    pub fn compact_to(&mut self, rv: u64) {
        for log in self.logs.values_mut() {
            log.compact_to(rv);
        }
    }

    /// The oldest resourceVersion `ty`'s history can be read from.
    pub fn floor(&self, ty: &ResourceType) -> u64 {
        self.logs.get(&ty.qualified()).map_or(BOOT_NAMESPACES.len() as u64, TypeLog::floor)
    }

    /// Commits a change of one object: `new` `Some` stores it (created or modified), `None`
    /// removes the stored `old`. Sets the new resourceVersion, appends the event, the write and
    /// (for Leases) the Lease change, compacts; returns the object as stored (for a removal:
    /// `old` at the new resourceVersion).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit(
        &mut self,
        ty: &ResourceType,
        ns: Option<&str>,
        name: &str,
        old: Option<Value>,
        mut new: Option<Value>,
        verb: Verb,
        w: &WriteCtx<'_>,
    ) -> Value {
        if let Some(n) = new.as_mut() {
            meta::drop_empty(n);
        }
        let ns = scope(ty, ns);
        self.rv += 1;
        let rv = self.rv;
        let k = key(ns, name);
        let qualified = ty.qualified();
        let objects = self.objects.entry(qualified.clone()).or_default();
        let (kind, object) = match new {
            Some(mut obj) => {
                meta::set_rv(&mut obj, rv);
                objects.insert(k.clone(), obj.clone());
                (if old.is_some() { EventKind::Modified } else { EventKind::Added }, obj)
            }
            None => {
                objects.remove(&k);
                let mut obj = old.clone().unwrap_or(Value::Null);
                meta::set_rv(&mut obj, rv);
                (EventKind::Deleted, obj)
            }
        };
        let after = (kind != EventKind::Deleted).then(|| object.clone());
        let floor = BOOT_NAMESPACES.len() as u64;
        let ns_s = ns.unwrap_or("").to_string();
        let log = self.logs.entry(qualified).or_insert_with(|| TypeLog::new(floor));
        log.push(LogEvent { rv, at: w.at, kind, key: k, ns: ns_s, object: object.clone(), prev: old.clone() });
        let actor = match w.field_manager.filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None if w.actor.is_empty() => "unknown".to_string(),
            None => w.actor.to_string(),
        };
        if ty.is_lease() {
            self.leases.push((ty.object_ref(ns, name), lease_change(rv, w.at, &actor, after.as_ref())));
        }
        let diff = meta::diff(old.as_ref(), after.as_ref());
        self.writes.push(Write { rv, at: w.at, verb, object: ty.object_ref(ns, name), actor, after, diff });
        self.compact(w.at);
        object
    }
}

/// The namespace as stored: `None` for cluster-scoped types whatever the caller passed.
pub fn scope<'a>(ty: &ResourceType, ns: Option<&'a str>) -> Option<&'a str> {
    if ty.namespaced { ns.filter(|n| !n.is_empty()) } else { None }
}

fn lease_change(rv: u64, at: std::time::Duration, actor: &str, obj: Option<&Value>) -> LeaseChange {
    let spec = obj.map(|o| &o["spec"]).unwrap_or(&Value::Null);
    LeaseChange {
        rv,
        at,
        actor: actor.to_string(),
        holder: spec["holderIdentity"].as_str().map(str::to_string),
        duration_s: spec["leaseDurationSeconds"].as_u64(),
        renew_time: spec["renewTime"].as_str().map(str::to_string),
        transitions: spec["leaseTransitions"].as_u64(),
    }
}
