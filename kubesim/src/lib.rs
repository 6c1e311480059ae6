//! kubesim: a fake Kubernetes API server speaking the real REST API (JSON over HTTP/1.1), so real
//! kube-rs clients and controllers (`kube::Client`, `Api`, `watcher`, `reflector`, `Controller`,
//! the finalizer helper, leader election over a Lease) run unmodified against it: as nodes of a
//! simulation on the simulated network (replaying exactly from the seed), or on a loopback socket.
//!
//! Semantics follow the Kubernetes API conventions and what a real kube-apiserver answered (see
//! `docs/src/kubesim.md`): a global monotonic resourceVersion, 409 on stale writes, generation,
//! the status subresource, finalizers and deletionTimestamp, label/field selectors, paging with
//! continue tokens, watches with bookmarks, 410 Gone and `sendInitialEvents`, merge/JSON/strategic
//! patches and server-side apply, namespaces, discovery, and CustomResourceDefinitions.
//!
//! Modules: [`status`] (errors as `Status` bodies), [`resource`] (the types served), [`selector`],
//! [`meta`] (object metadata rules), [`store`] (storage, lists, watch history), [`patch`],
//! [`server`] (the HTTP server, in a simulation or on loopback), [`fault`], [`introspect`]
//! (timelines for oracles), [`models`] (controller oracles), `client` (a `kube::Client` over the
//! simulated network).

pub mod fault;
mod http;
pub mod introspect;
pub mod meta;
pub mod models;
pub mod patch;
pub mod resource;
pub mod schema;
pub mod selector;
pub mod server;
pub mod status;
pub mod store;

#[cfg(feature = "kube")]
pub mod client;

pub use status::ApiError;
