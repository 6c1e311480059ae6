//! Deterministic simulation testing for tokio services.
//!
//! A test runs its real service code — hyper/axum, tonic, kube-rs, Kafka clients — inside a
//! *run*: a fresh thread with a paused tokio runtime whose every source of nondeterminism
//! (scheduler RNG, `HashMap` keys, `getrandom`, the clocks) is answered from one [`Seed`]. A seed
//! decides the [`Swarm`] (topology, latencies, fault rates), the schedule of harness events (the
//! [`Driver`]) and every value the code draws; the [`History`](history::History) of a run is
//! exact, so a failing seed replays from one command.
//!
//! Modules, one concept each:
//!
//! | module | holds |
//! |---|---|
//! | [`seed`] | [`Seed`], the seed tree, [`Source`] and its draws |
//! | [`history`] | the event log, its chained hash, the diff of two histories, fake-time formatting |
//! | [`swarm`] | named dimensions drawn per seed, overridable (`SIM_SWARM`) |
//! | [`oracle`] | [`Oracle`]: typed oracle identities (the harness's own as constants) |
//! | [`outcome`] | [`OpOutcome`]: ok / failed / indeterminate, shared by workloads and checkers |
//! | [`report`] | failure classes, identity, replay lines, traces, JSON summaries |
//! | [`signature`] | the signature a fleet merge deduplicates failures by |
//! | [`seed_base`] | seeds from the build: a seed base from the commit, CI event, job and salt |
//! | [`trace`] | the run's `tracing` subscriber on fake time (given its clock) |
//! | `checks` | the registry of a run's checks and their [`Verdict`](check::Verdict)s (private) |
//! | `recorder` | the live history + trace + per-event checks of a run (private) |
//! | [`driver`] | the harness event queue |
//! | [`runtime`] | the run's thread and runtime; task owners ([`spawn_detached`]); [`runtime::interpose`] (libc interposition) |
//! | [`fault`] | one shape for faults on any target: install now (a guard) or at fake times ("at t, for d") |
//! | [`net`] | the simulated TCP network: kernel, fabric, rules, controls, hosts, streams, adapters |
//! | [`run`] | [`Simulation`] and the per-run [`Ctx`] |
//! | [`workload`] | typed operations over a user model; outcomes ok / failed / indeterminate |
//! | [`check`] | oracles: the [`Check`](check::Check) trait, excused violations, idempotency, one response per request, liveness |
//! | [`nemesis`] | a swarm-drawn schedule of network faults |
//! | [`prelude`] | what a first simulation needs: `use sim::prelude::*;` |
//! | [`node`] | services as nodes on the network; lifecycle (SIGTERM, crash, restart, rollout); exit causes; leaks |
//!
//! **Layers.** Each module uses only modules below it (no import cycle between files or
//! top-level modules; `tests/layers.rs` fails on a new one and holds this order as data):
//!
//! ```text
//! node                                  services as nodes, lifecycle
//! nemesis · check (oracles) · workload  take a Ctx
//! run (Ctx, Simulation, once, sweep)    owns the network, the checks, the driver
//! net (network > host, tcp > control > fabric > state > rules > kernel > config)
//! fault                                 Fault<T>, guards, "at t, for d"
//! runtime                               the run's thread, tasks, interposition
//! driver                                harness events
//! recorder                              history + trace + per-event checks
//! checks                                Verdict, the registry (generic over Ctx)
//! trace                                 given its clock
//! seed_base                             seeds from the build (over seed, report)
//! signature                             failure signatures (over report)
//! report                                Failure, Outcome, Report
//! swarm · history · outcome · oracle    leaves (over seed)
//! seed
//! ```
//!
//! A lower module names what it uses by its defining module (`crate::driver::Event`, not the
//! root's re-export `crate::Event`): the root re-exports from the top layer.
//!
//! Projects using this crate need `--cfg tokio_unstable` (tokio's `rng_seed` and task hooks) in
//! their `.cargo/config.toml`:
//!
//! ```toml
//! [build]
//! rustflags = ["--cfg", "tokio_unstable"]
//! rustdocflags = ["--cfg", "tokio_unstable"]
//! ```

#[cfg(not(tokio_unstable))]
compile_error!(
    "sim needs tokio's unstable API (Builder::rng_seed and the task hooks): build with --cfg tokio_unstable. \
     Add to your project's .cargo/config.toml:\n[build]\nrustflags = [\"--cfg\", \"tokio_unstable\"]\nrustdocflags = [\"--cfg\", \"tokio_unstable\"]\n\
     If RUSTFLAGS is set in the environment, cargo ignores the config file's rustflags: add --cfg tokio_unstable to RUSTFLAGS too."
);

// Without tokio_unstable only the error above is reported, not a cascade of missing tokio items.
#[cfg(tokio_unstable)]
pub mod check;
#[cfg(tokio_unstable)]
mod checks;
#[cfg(tokio_unstable)]
pub mod driver;
#[cfg(tokio_unstable)]
pub mod fault;
#[cfg(tokio_unstable)]
pub mod fuzz;
#[cfg(tokio_unstable)]
pub mod history;
#[cfg(tokio_unstable)]
pub mod input;
#[cfg(tokio_unstable)]
pub mod minimize;
#[cfg(tokio_unstable)]
pub mod nemesis;
#[cfg(tokio_unstable)]
pub mod net;
#[cfg(tokio_unstable)]
pub mod node;
#[cfg(tokio_unstable)]
pub mod oracle;
#[cfg(tokio_unstable)]
pub mod outcome;
#[cfg(tokio_unstable)]
pub mod prelude;
#[cfg(tokio_unstable)]
mod recorder;
#[cfg(tokio_unstable)]
pub mod report;
#[cfg(tokio_unstable)]
pub mod run;
#[cfg(tokio_unstable)]
pub mod runtime;
#[cfg(tokio_unstable)]
pub mod seed;
#[cfg(tokio_unstable)]
pub mod seed_base;
#[cfg(tokio_unstable)]
pub mod signature;
#[cfg(tokio_unstable)]
pub mod swarm;
#[cfg(tokio_unstable)]
pub mod trace;
#[cfg(tokio_unstable)]
pub mod workload;

#[cfg(tokio_unstable)]
pub use check::Check;
#[cfg(tokio_unstable)]
pub use driver::{Driver, Event, EventId};
#[cfg(tokio_unstable)]
pub use minimize::Minimized;
#[cfg(tokio_unstable)]
pub use net::Host;
#[cfg(tokio_unstable)]
pub use node::{NodeCtx, ServiceSpec, System};
#[cfg(tokio_unstable)]
pub use oracle::Oracle;
#[cfg(tokio_unstable)]
pub use outcome::OpOutcome;
#[cfg(tokio_unstable)]
pub use report::{Class, Failure, Outcome, Report};
#[cfg(tokio_unstable)]
pub use run::{Ctx, Mode, Seeds, Simulation};
#[cfg(tokio_unstable)]
pub use runtime::spawn_detached;
#[cfg(tokio_unstable)]
pub use seed::{Seed, Source};
#[cfg(tokio_unstable)]
pub use swarm::Swarm;
