//! Where connections come from: the node's simulated [`sim::net::Host`] when the client is
//! created on a task of a simulation node ([`sim::node::NodeCtx::current`]), else a real
//! `tokio::net::TcpStream` (kafkasim on loopback, a real Kafka).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How a client dials: chosen once, when it is created.
#[derive(Clone, Debug)]
pub(crate) struct Dialer {
    transport: Transport,
    /// `socket.connection.setup.timeout.ms`: a dial not connected by then fails.
    setup_timeout: Duration,
}

#[derive(Clone, Debug)]
enum Transport {
    /// Through the node's host (its incarnation: once it ends, dials fail `ENETDOWN`).
    Sim(sim::net::Host),
    /// Real sockets.
    Tokio,
}

/// librdkafka's default `socket.connection.setup.timeout.ms`.
pub(crate) const SETUP_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// `socket.connection.setup.timeout.ms` of `config` (validated by [`crate::rdkafka::ClientConfig`]'s
/// property table; librdkafka's default 30 s).
pub(crate) fn setup_timeout(config: &crate::rdkafka::ClientConfig) -> Duration {
    config
        .get("socket.connection.setup.timeout.ms")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(SETUP_TIMEOUT_DEFAULT, Duration::from_millis)
}

impl Dialer {
    /// The current node's host, or real sockets outside a simulation run; dials give up after
    /// `setup_timeout`.
    ///
    /// # Errors
    /// Inside a run but not on a node's task (the run's body, a harness task): real sockets
    /// would escape the simulation and nothing would replay, so creation fails with why.
    pub(crate) fn current(setup_timeout: Duration) -> Result<Dialer, String> {
        let transport = match (sim::node::NodeCtx::current(), sim::Ctx::try_current()) {
            (Some(node), _) => Transport::Sim(node.host().clone()),
            (None, None) => Transport::Tokio,
            (None, Some(_)) => {
                return Err("kafkasim::rdkafka clients inside a simulation run must be created on a node's \
                 task (in a ServiceSpec's entry point or a task it spawned), so that they dial through the \
                 node's host; this task belongs to no node"
                    .into());
            }
        };
        Ok(Dialer { transport, setup_timeout })
    }

    /// Dials through `host`.
    #[cfg(test)]
    pub(crate) fn sim(host: sim::net::Host, setup_timeout: Duration) -> Dialer {
        Dialer { transport: Transport::Sim(host), setup_timeout }
    }

    /// False once the node's incarnation ended (always true on real sockets).
    pub(crate) fn is_live(&self) -> bool {
        match &self.transport {
            Transport::Sim(host) => host.is_live(),
            Transport::Tokio => true,
        }
    }

    /// Dials `target` (`host:port`), giving up after `socket.connection.setup.timeout.ms`, as
    /// librdkafka closes a connection not set up by then and retries after its reconnect
    /// backoff: a connect begun during a partition otherwise waits for the kernel's next SYN
    /// retransmission (1 s, then doubling: tcp(7) `tcp_syn_retries`), which may come long after
    /// the partition healed. (Here the setup is the TCP connect: no TLS or SASL.)
    ///
    /// # Errors
    /// The transport's (refused, unreachable, host down); `TimedOut` past the setup timeout.
    pub(crate) async fn dial(&self, target: &str) -> io::Result<Stream> {
        let connect = async {
            match &self.transport {
                Transport::Sim(host) => host.dial(target).await.map(Stream::Sim),
                Transport::Tokio => {
                    let s = tokio::net::TcpStream::connect(target).await?;
                    s.set_nodelay(true)?;
                    Ok(Stream::Tokio(s))
                }
            }
        };
        tokio::time::timeout(self.setup_timeout, connect).await.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connection to {target} not set up within socket.connection.setup.timeout.ms"),
            ))
        })
    }
}

/// A connection from a [`Dialer`].
#[derive(Debug)]
pub(crate) enum Stream {
    /// Simulated.
    Sim(sim::net::TcpStream),
    /// Real.
    Tokio(tokio::net::TcpStream),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Sim(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tokio(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Sim(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tokio(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Sim(s) => Pin::new(s).poll_flush(cx),
            Stream::Tokio(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Sim(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tokio(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
