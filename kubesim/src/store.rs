//! The fake's storage: objects per type under one global, monotonic resourceVersion (etcd's
//! revision), a per-type event log with a compaction window (count and age), and the history
//! oracles read (every write, each object's timeline, the Lease timeline).
//!
//! Sync and pure: time, identity and randomness come from the caller in a [`WriteCtx`]; the
//! HTTP server wraps the [`Store`] in a mutex.
//!
//! - Revisions: the namespaces `default`, `kube-system`, `kube-public`, `kube-node-lease` exist
//!   from the start at resourceVersions 1–4; each committed write takes the next revision. A
//!   write that changes nothing (but `resourceVersion`/`managedFields`) commits nothing.
//! - Writes: [`Store::create`], [`Store::update`], [`Store::patch`], [`Store::delete`] with the
//!   rules of [`crate::meta`]; namespaced objects need an existing, non-terminating namespace
//!   (404 / 403); a CRD serves its kinds from its create to its removal (which removes its
//!   custom resources too); no garbage collector or namespace controller runs (as with a bare
//!   kube-apiserver: a deleted Namespace stays `Terminating`).
//! - Reads: [`Store::get`], [`Store::list`] (selectors, paging, resourceVersion semantics),
//!   [`Store::list_at`] / [`Store::get_at`] (older revisions), [`Store::watch_start`] /
//!   [`Store::watch_next`].
//! - History: [`Store::writes`], [`Store::timeline`], [`Store::lease_timeline`].

mod list;
mod log;
mod options;
mod state;
mod token;
mod watch;
mod write;

pub use self::list::{CONTINUE_EXPIRED, LIST_EXPIRED, parse_rv, too_large, too_old};
pub use self::options::{
    Compaction, DeleteOptions, Deleted, EventKind, List, ListOptions, StoreConfig, Subresource, WatchEvent,
    WatchFilter, WatchOptions, WatchStart, WriteCtx,
};
pub use self::state::{BOOT_NAMESPACES, Store, key};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_read;
