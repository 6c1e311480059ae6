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
//! | [`swarm`] | named dimensions drawn per seed, overridable (`SIM_SWARM`) |
//! | [`runtime`] | the run's thread and runtime; [`runtime::interpose`] (libc interposition) |
//! | [`driver`] | the harness event queue |
//! | [`history`] | the event log, its chained hash, and the diff of two histories |
//! | [`net`] | the simulated TCP network: hosts, names, links, streams, faults, adapters |
//! | [`report`] | failure classes, identity, replay lines, traces, JSON summaries |
//! | [`trace`] | the run's `tracing` subscriber on fake time |
//! | [`run`] | [`Simulation`] and the per-run [`Ctx`] |
//!
//! Projects using this crate need `--cfg tokio_unstable` (tokio's `rng_seed` and task hooks) in
//! their `.cargo/config.toml`:
//!
//! ```toml
//! [build]
//! rustflags = ["--cfg", "tokio_unstable"]
//! rustdocflags = ["--cfg", "tokio_unstable"]
//! ```

pub mod driver;
pub mod history;
pub mod net;
pub mod report;
pub mod run;
pub mod runtime;
pub mod seed;
pub mod swarm;
pub mod trace;

pub use driver::{Driver, Event, EventId};
pub use report::{Class, Failure, Outcome, Report};
pub use run::{Ctx, Mode, Seeds, Simulation};
pub use seed::{Seed, Source};
pub use swarm::Swarm;
