//! Controller models: oracles over what the fake saw and what the controller did.
//!
//! | model | oracle | rule | input |
//! |---|---|---|---|
//! | [`leader_overlap`] | `kube-leader-overlap` | two replicas believing they lead overlap at most by [`LeaseSettings::overlap_bound`] | the Lease's [`LeaseChange`](crate::introspect::LeaseChange)s |
//! | [`writes_after_expiry`] | `kube-write-after-lease-expiry` | no write by a replica after its lease expired plus the bound | the Lease timeline and every [`Write`](crate::introspect::Write) |
//! | [`FinalizerRule`] | `kube-finalizers` | an object carrying the finalizer leaves storage only after deletion was requested and the finalizer removed; its cleanup ran before the removal, at most once per deletion | the writes and a [`CleanupLedger`] |
//! | `Guard` (feature `kube`) | `kube-one-reconcile`, `kube-reconcile-panic` | one reconcile at a time per object; a panic in reconcile fails the run (overridable) | a wrapper around the reconcile function |
//! | [`check_after_heal`] | `kube-convergence` | after the faults end the store converges within [`ConvergenceSettings::bound`] | a predicate, polled in fake time |
//!
//! The timeline models are plain functions over the server's introspection (`ApiServer::writes`,
//! `ApiServer::lease_timeline`), so they judge synthetic timelines as well; each returns
//! [`Violation`]s, which [`first_failure`] turns into the run's failure (`ctx.fail`).
//! The guide is `docs/src/kubesim.md`.

mod convergence;
mod finalizers;
mod leader;
// The guard names objects with `kube::Resource`: it needs the `kube` feature.
#[cfg(feature = "kube")]
mod reconcile;
mod violation;

pub use convergence::{CONVERGENCE, ConvergenceSettings, POLL_EVERY, check_after_heal};
pub use finalizers::{Cleanup, CleanupLedger, FINALIZERS, FinalizerRule};
pub use leader::{
    Belief, LEADER_OVERLAP, LeaseSettings, WRITE_AFTER_EXPIRY, beliefs, leader_overlap, writes_after_expiry,
};
#[cfg(feature = "kube")]
pub use reconcile::{Guard, Guarded, ONE_RECONCILE, RECONCILE_PANIC, ReconcilePanic, guard, object_ref};
pub use violation::{Violation, first_failure};
