//! What a first simulation needs, in one import: `use sim::prelude::*;`.
//!
//! The run ([`Simulation`], [`Ctx`], [`Failure`], [`Report`]), the seed's draws ([`Seed`],
//! [`Source`]), nodes and their lifecycle ([`System`], [`ServiceSpec`], [`NodeCtx`],
//! [`Lifecycle`], [`Restart`], [`BoxError`]), the network ([`Host`], [`Nemesis`] and the most used
//! controls), workloads ([`Workload`], [`Operation`], [`OpCtx`], [`OpOutcome`], [`Budget`]) and
//! oracles ([`Check`], [`Verdict`], [`Oracle`]). Modules stay the home of everything else
//! (`sim::check::idempotency`, `sim::net::HoldAfterBytes`, `sim::fault`); see
//! docs/src/first-simulation.md.
//!
//! ```
//! use sim::prelude::*;
//!
//! let report = Simulation::new("prelude").seeds(0..2).run(|ctx: Ctx| async move {
//!     let server: Host = ctx.net().host("server");
//!     let _listener = server.listen("80").map_err(|e| Failure::correctness(Oracle::named("doc"), e.to_string()))?;
//!     ctx.net().host("client").dial("server:80").await.map_err(|e| Failure::correctness("doc", e.to_string()))?;
//!     Ok(())
//! });
//! report.assert_passed();
//! ```

pub use crate::check::{Check, Verdict};
pub use crate::fault::{FaultGuard, Scheduled};
pub use crate::nemesis::Nemesis;
pub use crate::net::{Clog, Host, Partition, Reset, TcpListener, TcpStream};
pub use crate::node::{BoxError, Lifecycle, NodeCtx, Restart, ServiceSpec, System};
pub use crate::oracle::Oracle;
pub use crate::outcome::OpOutcome;
pub use crate::report::{Failure, Report};
pub use crate::run::{Ctx, Simulation};
pub use crate::seed::{Seed, Source};
pub use crate::workload::{Budget, OpCtx, Operation, Workload};
