//! Apache Kafka as a counterpart, and kafkasim as the fake side.
//!
//! Providers, in order: `KAFKA_BOOTSTRAP` (a broker someone runs), the `apache/kafka` image
//! (feature `containers`, when a Docker engine answers), and the local process started by
//! `fidelity/scripts/kafka-local.sh` (Java 17+, jars from Maven Central cached on first fetch).

use std::path::PathBuf;

use crate::Error;
use crate::counterpart::{External, Provider, Selection, select};
use crate::local::LocalScript;

/// The environment variable naming a running broker (`host:port[,…]`).
pub const BOOTSTRAP_ENV: &str = "KAFKA_BOOTSTRAP";
/// The Kafka version the container and the script start unless told otherwise (`KAFKA_VERSION`).
pub const VERSION_DEFAULT: &str = "4.2.0";

/// The script that fetches, starts and stops a local broker.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts").join("kafka-local.sh")
}

/// The Kafka version to start: `KAFKA_VERSION`, else [`VERSION_DEFAULT`].
pub fn version() -> String {
    std::env::var("KAFKA_VERSION").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| VERSION_DEFAULT.to_string())
}

/// Where local brokers keep their directories: `FIDELITY_WORK_DIR`, else `target/fidelity` of
/// the workspace (`CARGO_TARGET_DIR` when set).
pub fn work_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FIDELITY_WORK_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
    target.join("fidelity")
}

/// The local-process provider alone (benchmarks use it to time a broker's start).
pub fn local() -> LocalScript {
    LocalScript { script: script(), what: "Apache Kafka", work_dir: work_dir() }
}

/// Tries the three providers in order: [`BOOTSTRAP_ENV`], a container, a local process.
///
/// # Errors
/// A provider was available but its broker did not come up.
pub fn counterpart() -> Result<Selection, Error> {
    let env = External { var: BOOTSTRAP_ENV, what: "Apache Kafka" };
    let local = local();
    #[cfg(feature = "containers")]
    {
        let container = crate::container::KafkaContainer { tag: version() };
        select(&[&env as &dyn Provider, &container, &local])
    }
    #[cfg(not(feature = "containers"))]
    {
        let container = NoContainers;
        select(&[&env as &dyn Provider, &container, &local])
    }
}

/// The container provider when the crate is built without `containers`.
#[cfg(not(feature = "containers"))]
struct NoContainers;

#[cfg(not(feature = "containers"))]
impl Provider for NoContainers {
    fn name(&self) -> &'static str {
        "container"
    }

    fn start(&self) -> Result<crate::Attempt, Error> {
        Ok(crate::Attempt::Unavailable(
            "built without the `containers` feature (cargo test --features containers)".into(),
        ))
    }
}
