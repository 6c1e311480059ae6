//! What oracles read from the fake: every object's timeline of writes, the current watchers, and
//! the Lease holder timeline. Filled by the store (`crate::store`) as it commits each write; read
//! through `ApiServer::timeline`, `ApiServer::writes`, `ApiServer::watchers` and
//! `ApiServer::lease_timeline`.

use std::time::Duration;

use serde_json::Value;

/// The verb of a write, as the API server's audit log names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// POST.
    Create,
    /// PUT on the object.
    Update,
    /// PUT on `/status`.
    UpdateStatus,
    /// PATCH (any patch type) on the object or `/status`.
    Patch,
    /// DELETE that set `deletionTimestamp` (finalizers pending): the object stays.
    DeleteMarked,
    /// The object left storage (a DELETE without finalizers, or the last finalizer removed).
    Deleted,
}

impl Verb {
    /// Lower-case name for the history: `create`, `update`, `update-status`, `patch`,
    /// `delete-marked`, `deleted`.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::UpdateStatus => "update-status",
            Verb::Patch => "patch",
            Verb::DeleteMarked => "delete-marked",
            Verb::Deleted => "deleted",
        }
    }
}

/// Which object: the resource's plural with its group (`configmaps`, `leases.coordination.k8s.io`),
/// the namespace (`""` for cluster-scoped) and the name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// `plural` for the core group, `plural.group` otherwise.
    pub resource: String,
    /// `""` for cluster-scoped objects.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.resource, self.name)
        } else {
            write!(f, "{}/{}/{}", self.resource, self.namespace, self.name)
        }
    }
}

/// One committed write.
#[derive(Clone, Debug)]
pub struct Write {
    /// The resourceVersion the write committed at (the global revision).
    pub rv: u64,
    /// The fake time of the commit (the run's elapsed time; wall time on loopback).
    pub at: Duration,
    /// What was done.
    pub verb: Verb,
    /// The object.
    pub object: ObjectRef,
    /// Who wrote: the field manager when the request named one (`?fieldManager=`, SSA), else the
    /// `User-Agent` header, else `"unknown"`.
    pub actor: String,
    /// The object after the write (`None` for [`Verb::Deleted`]).
    pub after: Option<Value>,
    /// A short, stable description of what changed (`"data.password: \"a\" -> \"b\""`).
    pub diff: String,
}

/// One change of a Lease (`coordination.k8s.io/v1`), from its writes.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseChange {
    /// The write's resourceVersion.
    pub rv: u64,
    /// The fake time of the write.
    pub at: Duration,
    /// Who wrote it (as [`Write::actor`]).
    pub actor: String,
    /// `spec.holderIdentity` after the write.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds` after the write.
    pub duration_s: Option<u64>,
    /// `spec.renewTime` after the write (RFC 3339 MicroTime, as written by the client).
    pub renew_time: Option<String>,
    /// `spec.leaseTransitions` after the write.
    pub transitions: Option<u64>,
}

/// A watch that is open now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watcher {
    /// A number unique within the server.
    pub id: u64,
    /// `plural` or `plural.group`.
    pub resource: String,
    /// The namespace watched, `None` for all.
    pub namespace: Option<String>,
    /// The request's `User-Agent`.
    pub user_agent: String,
    /// The label selector, as sent.
    pub label_selector: String,
    /// The field selector, as sent.
    pub field_selector: String,
    /// The resourceVersion of the last event sent to it.
    pub sent_rv: u64,
}
