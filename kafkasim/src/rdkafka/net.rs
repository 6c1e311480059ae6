//! Where connections come from: the node's simulated [`sim::net::Host`] when the client is
//! created on a task of a simulation node ([`sim::node::NodeCtx::current`]), else a real
//! `tokio::net::TcpStream` (kafkasim on loopback, a real Kafka).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How a client dials: chosen once, when it is created.
#[derive(Clone, Debug)]
pub(crate) enum Dialer {
    /// Through the node's host (its incarnation: once it ends, dials fail `ENETDOWN`).
    Sim(sim::net::Host),
    /// Real sockets.
    Tokio,
}

impl Dialer {
    /// The current node's host, or real sockets outside a simulation run.
    ///
    /// # Errors
    /// Inside a run but not on a node's task (the run's body, a harness task): real sockets
    /// would escape the simulation and nothing would replay, so creation fails with why.
    pub(crate) fn current() -> Result<Dialer, String> {
        match (sim::node::NodeCtx::current(), sim::Ctx::try_current()) {
            (Some(node), _) => Ok(Dialer::Sim(node.host().clone())),
            (None, None) => Ok(Dialer::Tokio),
            (None, Some(_)) => Err("kafkasim::rdkafka clients inside a simulation run must be created on a node's \
                 task (in a ServiceSpec's entry point or a task it spawned), so that they dial through the \
                 node's host; this task belongs to no node"
                .into()),
        }
    }

    /// Dials `target` (`host:port`).
    ///
    /// # Errors
    /// The transport's (refused, unreachable, host down).
    pub(crate) async fn dial(&self, target: &str) -> io::Result<Stream> {
        match self {
            Dialer::Sim(host) => host.dial(target).await.map(Stream::Sim),
            Dialer::Tokio => {
                let s = tokio::net::TcpStream::connect(target).await?;
                s.set_nodelay(true)?;
                Ok(Stream::Tokio(s))
            }
        }
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
