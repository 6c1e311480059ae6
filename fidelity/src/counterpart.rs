//! Counterparts: real dependencies (an Apache Kafka broker, …) that a differential test runs
//! against, and the providers that start them.
//!
//! Providers are tried in order; the first that has a counterpart wins:
//!
//! 1. an external address from the environment ([`External`], e.g. `KAFKA_BOOTSTRAP`): someone
//!    else runs the server and keeps it running;
//! 2. a container ([`crate::container`], feature `containers`), when a Docker engine answers;
//! 3. a local process ([`crate::local`]), when what it needs is installed.
//!
//! A provider answers [`Attempt::Unavailable`] with the reason and how to make it available, or
//! fails with an [`Error`] when it was available but the server did not come up (that is a
//! failure, not a skip). When none has a counterpart, [`select`] gives [`Selection::Skipped`]:
//! the test prints `skipped: no counterpart (…)` and counts as skipped, never as passed, and
//! with `FIDELITY_REQUIRE=1` ([`required`]) it fails instead.

use std::fmt;

use crate::Error;

/// The environment variable that turns a missing counterpart into a failure (CI sets it).
pub const REQUIRE_ENV: &str = "FIDELITY_REQUIRE";

/// A running real server. Dropping it stops the server if this process started it.
pub trait Counterpart: fmt::Debug + Send + Sync {
    /// The address clients connect to (Kafka: the bootstrap servers, `host:port[,…]`).
    fn address(&self) -> &str;
    /// One line saying what it is and where it came from, for reports
    /// (`Apache Kafka 4.2.0, local process 1234, 127.0.0.1:23456`).
    fn describe(&self) -> String;
    /// The server's own log, or its last lines, when this process can read it (to print beside
    /// a failure); `None` for servers someone else runs.
    fn logs(&self) -> Option<String>;
}

/// What a provider found.
#[derive(Debug)]
pub enum Attempt {
    /// A counterpart, ready for clients.
    Ready(Box<dyn Counterpart>),
    /// This provider has none here: why, and how to get one (one line).
    Unavailable(String),
}

/// A way to get a counterpart.
pub trait Provider {
    /// A short name for reports: `env`, `container`, `local`.
    fn name(&self) -> &'static str;
    /// Starts (or finds) a counterpart.
    ///
    /// # Errors
    /// The provider was available but the server did not come up or did not answer.
    fn start(&self) -> Result<Attempt, Error>;
}

/// The outcome of trying every provider.
#[derive(Debug)]
pub enum Selection {
    /// The first provider that had a counterpart gave this one.
    Ready(Box<dyn Counterpart>),
    /// No provider had one; each reason, in the order tried.
    Skipped(Skip),
}

/// Why no counterpart is available: one `(provider, reason and remedy)` per provider tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// `(provider name, why it had none and how to get one)`, in the order tried.
    pub reasons: Vec<(&'static str, String)>,
}

impl fmt::Display for Skip {
    /// `skipped: no counterpart (env: …; container: …; local: …)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "skipped: no counterpart (")?;
        for (i, (name, reason)) in self.reasons.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{name}: {reason}")?;
        }
        write!(f, ")")
    }
}

/// Tries `providers` in order and returns the first counterpart.
///
/// # Errors
/// The first provider that was available but failed to start its server: a broken counterpart is
/// a failure, never a reason to fall through to the next provider or to skip.
pub fn select(providers: &[&dyn Provider]) -> Result<Selection, Error> {
    let mut reasons = Vec::new();
    for provider in providers {
        match provider.start()? {
            Attempt::Ready(c) => return Ok(Selection::Ready(c)),
            Attempt::Unavailable(why) => reasons.push((provider.name(), why)),
        }
    }
    Ok(Selection::Skipped(Skip { reasons }))
}

/// Whether a missing counterpart must fail the test: `FIDELITY_REQUIRE` set to anything but
/// empty, `0` or `false`.
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The provider of a server someone else runs, named by an environment variable.
#[derive(Debug, Clone)]
pub struct External {
    /// The variable holding the address (`KAFKA_BOOTSTRAP`).
    pub var: &'static str,
    /// What the server is, for reports (`Apache Kafka`).
    pub what: &'static str,
}

/// A server someone else runs; dropping it does nothing.
#[derive(Debug, Clone)]
pub struct ExternalServer {
    address: String,
    describe: String,
}

impl ExternalServer {
    /// A server at `address` that someone else runs, described by `describe` in reports.
    pub fn new(address: impl Into<String>, describe: impl Into<String>) -> ExternalServer {
        ExternalServer { address: address.into(), describe: describe.into() }
    }
}

impl Provider for External {
    fn name(&self) -> &'static str {
        "env"
    }

    fn start(&self) -> Result<Attempt, Error> {
        match std::env::var(self.var) {
            Ok(address) if !address.trim().is_empty() => {
                let address = address.trim().to_string();
                reachable(&address).map_err(|reason| Error::Start {
                    provider: "env",
                    reason: format!("${}={address}: {reason}", self.var),
                    logs: None,
                })?;
                let describe = format!("{}, external, {} from ${}", self.what, address, self.var);
                Ok(Attempt::Ready(Box::new(ExternalServer { address, describe })))
            }
            _ => Ok(Attempt::Unavailable(format!("{} is not set (set it to a running server's address)", self.var))),
        }
    }
}

/// How long connecting to an external server's first address may take.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether a TCP connection to the first `host:port` of a comma-separated list succeeds.
fn reachable(address: &str) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let first = address.split(',').next().unwrap_or_default().trim();
    let addrs: Vec<_> = first.to_socket_addrs().map_err(|e| format!("cannot resolve {first}: {e}"))?.collect();
    let mut last = format!("{first} resolves to no address");
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("nothing answers at {a}: {e}"),
        }
    }
    Err(last)
}

impl Counterpart for ExternalServer {
    fn address(&self) -> &str {
        &self.address
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn logs(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Never(&'static str);
    impl Provider for Never {
        fn name(&self) -> &'static str {
            self.0
        }
        fn start(&self) -> Result<Attempt, Error> {
            Ok(Attempt::Unavailable(format!("{} is not here", self.0)))
        }
    }

    struct Broken;
    impl Provider for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }
        fn start(&self) -> Result<Attempt, Error> {
            Err(Error::Start { provider: "broken", reason: "exited at once".into(), logs: None })
        }
    }

    struct Fixed;
    impl Provider for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn start(&self) -> Result<Attempt, Error> {
            Ok(Attempt::Ready(Box::new(ExternalServer { address: "127.0.0.1:1".into(), describe: "fixed".into() })))
        }
    }

    #[test]
    fn the_first_provider_with_a_counterpart_wins_and_later_ones_are_not_started() {
        let selection = select(&[&Never("a"), &Fixed, &Broken]).expect("Broken is never reached");
        let Selection::Ready(c) = selection else { panic!("Fixed had one") };
        assert_eq!(c.address(), "127.0.0.1:1");
    }

    #[test]
    fn no_counterpart_is_a_skip_naming_every_provider_and_its_remedy() {
        let Selection::Skipped(skip) = select(&[&Never("a"), &Never("b")]).expect("no error") else {
            panic!("nobody had one")
        };
        assert_eq!(skip.to_string(), "skipped: no counterpart (a: a is not here; b: b is not here)");
    }

    #[test]
    fn an_external_address_nobody_listens_on_is_a_failure_not_a_skip() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        assert!(reachable(&format!("127.0.0.1:{port}")).is_err());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        assert_eq!(reachable(&format!("{addr},127.0.0.1:1")), Ok(()), "the first address answers");
    }

    #[test]
    fn a_provider_that_fails_to_start_its_server_is_a_failure_not_a_skip() {
        let err = select(&[&Never("a"), &Broken, &Fixed]).expect_err("a broken counterpart fails");
        assert!(err.to_string().contains("exited at once"), "{err}");
    }
}
