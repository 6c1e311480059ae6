//! Nodes: the user's services as named instances on the simulated network, and their lifecycle.
//!
//! A [`ServiceSpec`] declares a service: an async entry point
//! (`Fn(NodeCtx) -> Future<Output = Result<(), BoxError>>`) with replicas, a termination grace
//! and optional other versions. [`System::start`] starts each replica as a *node* (`cart-0`,
//! `cart-1`, …) on its own host, routes the service's name to its replicas ClusterIP-style, and
//! waits until each says it is ready ([`NodeCtx::set_ready`]; a [`ServiceSpec::finite`] job is
//! not waited for). [`Lifecycle`] events follow Kubernetes: performed now ([`System::apply`]), at
//! a fake time ([`System::at`], a [`crate::fault`] on the [`System`]) or drawn by the swarm
//! ([`System::schedule_lifecycle`]).
//!
//! The node oracles — `exit-cause` ([`ExitCause`]), `drain` ([`serve`] and a serve loop of the
//! node's own), `zombie` and `leak` (a node's tasks die with its incarnation), `readiness`,
//! `lifecycle` (an event naming nothing that exists) — and what each event does are described in
//! the book's page docs/src/nodes.md ("Nodes, lifecycle, workloads and oracles").
//!
//! The module's files, each using only those after it (no cycle):
//!
//! ```text
//! lifecycle  Lifecycle, Restart, Version; System::apply, at, schedule_lifecycle, heal, stop
//!                                                                   -> system, exit
//! system     System: services, instances, an incarnation's start and end
//!                                                                   -> spec, ctx, exit, zombies
//! serve      serve (feature `hyper`): HTTP on a node, in-flight requests for `drain`  -> ctx
//! spec       ServiceSpec: a service's declaration                    -> ctx
//! ctx        NodeCtx, BoxError: what an entry point gets; per-incarnation state
//!                                                                   -> exit, interleave
//! interleave explore mode's seeded yields and scripted holds of a node's task polls
//! exit       ExitCause, ExitRecord, CrashMode
//! zombies    the zombie oracle
//! ```

mod ctx;
mod exit;
mod interleave;
mod lifecycle;
#[cfg(feature = "hyper")]
mod serve;
mod spec;
mod system;
mod zombies;

#[cfg(feature = "hyper")]
pub use ctx::NodeExecutor;
pub use ctx::{BoxError, NodeCtx};
pub use exit::{CrashMode, ExitCause, ExitRecord};
pub use interleave::{TaskSite, hold_polls};
pub use lifecycle::{Lifecycle, Restart, Version};
#[cfg(feature = "hyper")]
pub use serve::serve;
pub use spec::ServiceSpec;
pub use system::System;
