//! Differential testing: run one scenario against a fake of this workspace and against the real
//! server, normalize what each side observed, and compare.
//!
//! | module | holds |
//! |---|---|
//! | [`counterpart`] | [`Counterpart`] (a running real server), [`Provider`]s tried in order, [`select`], [`required`] |
//! | [`local`] | the local-process provider: a script that fetches, starts and stops the server |
//! | [`container`] | the container provider (feature `containers`): testcontainers, when a Docker engine answers |
//! | [`observe`] | [`Recorder`]: a scenario's observations, with ids and names normalized |
//! | [`compare`] | step-by-step comparison, known differences, the side-by-side report |
//! | [`runner`] | [`Suite`]: runs scenarios on both sides in parallel, prints the table and the counts |
//! | [`kafka`] | Apache Kafka's counterpart providers and kafkasim as the fake side |
//! | [`kube`] | kube-apiserver's counterpart providers, kube-rs clients for either side, kubesim as the fake side |
//!
//! The guide is `docs/src/fidelity.md`; Kafka's known differences are in `docs/fidelity/kafka.md`,
//! Kubernetes' in `docs/fidelity/kube.md`.

pub mod compare;
pub mod container;
pub mod counterpart;
pub mod kafka;
pub mod kube;
pub mod local;
pub mod observe;
pub mod runner;

pub use compare::{Comparison, Known, Verdict};
pub use counterpart::{Attempt, Counterpart, Provider, Selection, Skip, required, select};
pub use observe::{Observations, Recorder, Step};
pub use runner::{Outcome, Scenario, Side, Suite, SuiteReport};

/// What can go wrong starting a counterpart or running a scenario.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A provider was available but its server did not come up.
    #[error("{provider}: the counterpart did not start: {reason}")]
    Start {
        /// The provider (`local`, `container`).
        provider: &'static str,
        /// What went wrong.
        reason: String,
        /// The server's log, when there is one.
        logs: Option<String>,
    },
    /// An I/O error outside the scenario (spawning a process, reading a log).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}
