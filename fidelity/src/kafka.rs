//! Apache Kafka as a counterpart, and kafkasim as the fake side.
//!
//! Providers, in order: `KAFKA_BOOTSTRAP` (a broker someone runs), the `apache/kafka` image
//! (feature `containers`, when a Docker engine answers), and the local process started by
//! `fidelity/scripts/kafka-local.sh` (Java 17+, jars from Maven Central cached on first fetch).

use std::path::PathBuf;
use std::time::Duration;

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

pub use crate::local::work_dir;

/// The local-process provider alone (benchmarks use it to time a broker's start).
pub fn local() -> LocalScript {
    LocalScript { script: script(), what: "Apache Kafka", work_dir: work_dir() }
}

/// Tries the three providers in order: [`BOOTSTRAP_ENV`], a container, a local process.
///
/// # Errors
/// A provider was available but its broker did not come up.
pub fn counterpart() -> Result<Selection, Error> {
    let env = Bootstrap(External { var: BOOTSTRAP_ENV, what: "Apache Kafka" });
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

/// How long a broker named by [`BOOTSTRAP_ENV`] may take to answer the first ApiVersions request.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// [`BOOTSTRAP_ENV`], checked to answer ApiVersions: a port that accepts connections and never
/// answers would otherwise make every scenario wait out its limit before failing.
struct Bootstrap(External);

impl Provider for Bootstrap {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn start(&self) -> Result<crate::Attempt, Error> {
        let attempt = self.0.start()?;
        if let crate::Attempt::Ready(server) = &attempt {
            answers(server.address(), ANSWER_TIMEOUT).map_err(|reason| Error::Start {
                provider: "env",
                reason: format!("${BOOTSTRAP_ENV}={}: {reason}", server.address()),
                logs: None,
            })?;
        }
        Ok(attempt)
    }
}

/// Whether the first broker of `address` (`host:port[,…]`) answers an ApiVersions request (v2)
/// without an error within `timeout`.
///
/// # Errors
/// What went wrong, in one line: it refused the connection, closed it, answered with an error
/// code, or accepted and said nothing for `timeout`.
pub fn answers(address: &str, timeout: Duration) -> Result<(), String> {
    use kafkasim::kafka_protocol::messages::ApiVersionsRequest;
    let first = address.split(',').next().unwrap_or_default().trim().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let probe = async {
            let stream =
                tokio::net::TcpStream::connect(&first).await.map_err(|e| format!("connecting to {first}: {e}"))?;
            let mut client = kafkasim::client::Client::new(stream, "fidelity-probe");
            let response = client
                .send(ApiVersionsRequest::default(), 2)
                .await
                .map_err(|e| format!("{first} did not answer ApiVersions: {e}"))?;
            match response.error_code {
                0 => Ok(()),
                code => Err(format!("{first} answered ApiVersions with error code {code}")),
            }
        };
        tokio::time::timeout(timeout, probe).await.unwrap_or_else(|_| {
            Err(format!("{first} accepted a connection but did not answer ApiVersions within {timeout:?}"))
        })
    })
}

/// The container provider when the crate is built without `containers`.
#[cfg(not(feature = "containers"))]
pub(crate) struct NoContainers;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_answers_and_a_silent_or_closed_port_does_not() {
        let broker = kafkasim::Broker::start_local().expect("kafkasim on loopback");
        assert_eq!(answers(broker.bootstrap_servers(), ANSWER_TIMEOUT), Ok(()));

        // Accepts (the kernel completes the handshake into the backlog) and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = silent.local_addr().expect("addr");
        let err = answers(&addr.to_string(), Duration::from_millis(200)).expect_err("a silent port");
        assert!(err.contains("did not answer ApiVersions within"), "{err}");

        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = closed.local_addr().expect("addr");
        drop(closed);
        let err = answers(&addr.to_string(), ANSWER_TIMEOUT).expect_err("nothing listens");
        assert!(err.starts_with(&format!("connecting to {addr}")), "{err}");
    }
}
