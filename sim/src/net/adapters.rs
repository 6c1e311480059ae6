//! Adapters so real libraries use the simulated network with no forks:
//!
//! - `Connector`: a hyper-util client connector (a tower `Service<Uri>`) dialing through a
//!   [`Host`](super::Host); use it with `hyper_util::client::legacy::Client::builder(..).build(connector)`
//!   (feature `hyper`);
//! - `ServeListener`: `axum::serve::Listener` for a [`TcpListener`] (feature `axum`), so
//!   `axum::serve(listener, router)` serves on the simulated network;
//! - `tonic::transport::server::Connected` for [`TcpStream`] and [`Incoming`], a stream of
//!   accepted connections for `Server::serve_with_incoming` (feature `tonic`);
//! - [`serve`]: a plain accept loop spawning one task per connection.
//!
//! hyper builders need `hyper_util::rt::TokioTimer` (see `docs/src/rules.md`).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

#[cfg(feature = "hyper")]
use hyper_util::rt::TokioIo;

#[cfg(feature = "hyper")]
use super::host::Host;
use super::tcp::{TcpListener, TcpStream};

#[cfg(feature = "hyper")]
/// A hyper-util client connector that dials `host:port` of each request's URI through a
/// simulated [`Host`] (port 80 when the URI has none, 443 for `https`).
#[derive(Clone, Debug)]
pub struct Connector {
    host: Host,
}

#[cfg(feature = "hyper")]
impl Connector {
    /// A connector dialing from `host`.
    pub fn new(host: Host) -> Connector {
        Connector { host }
    }
}

#[cfg(feature = "hyper")]
/// A connector's error, worded as hyper-util's `HttpConnector` words its own: `dns error` when the
/// name does not resolve, `tcp connect error` when the dial fails, the `io::Error` as its source —
/// so that the status a tonic client shows for a refused dial reads the same as over real TCP.
#[derive(Debug)]
pub struct ConnectError {
    msg: &'static str,
    cause: io::Error,
}

#[cfg(feature = "hyper")]
impl ConnectError {
    /// The dial's error.
    pub fn io(&self) -> &io::Error {
        &self.cause
    }
}

#[cfg(feature = "hyper")]
impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.msg)
    }
}

#[cfg(feature = "hyper")]
impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

#[cfg(feature = "hyper")]
impl From<ConnectError> for io::Error {
    fn from(e: ConnectError) -> io::Error {
        e.cause
    }
}

#[cfg(feature = "hyper")]
impl tower_service::Service<http::Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<TokioIo<TcpStream>, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let host = self.host.clone();
        Box::pin(async move {
            let name = uri
                .host()
                .ok_or_else(|| ConnectError {
                    msg: "invalid URL, missing host",
                    cause: io::Error::new(io::ErrorKind::InvalidInput, format!("URI without a host: {uri}")),
                })?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
            let stream = host.dial(&format!("{name}:{port}")).await.map_err(|cause| {
                let msg =
                    if cause.to_string() == super::config::LOOKUP_FAILED { "dns error" } else { "tcp connect error" };
                ConnectError { msg, cause }
            })?;
            Ok(TokioIo::new(stream))
        })
    }
}

#[cfg(feature = "hyper")]
impl hyper_util::client::legacy::connect::Connection for TcpStream {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        hyper_util::client::legacy::connect::Connected::new()
    }
}

/// Runs an accept loop on `listener`, spawning `handle(stream, peer)` as a task per connection,
/// until the listener's owner drops this future.
pub async fn serve<F, Fut>(listener: TcpListener, handle: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    while let Ok((stream, peer)) = listener.accept().await {
        tokio::spawn(handle(stream, peer));
    }
}

/// `axum::serve::Listener` for the simulated [`TcpListener`].
#[cfg(feature = "axum")]
#[derive(Debug)]
pub struct ServeListener(pub TcpListener);

#[cfg(feature = "axum")]
impl axum::serve::Listener for ServeListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok(pair) = self.0.accept().await {
                return pair;
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// tonic's own connection info, so that `Request::remote_addr` and `local_addr` work in handlers
/// as they do over real TCP.
#[cfg(feature = "tonic")]
impl tonic::transport::server::Connected for TcpStream {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::TcpConnectInfo {
            local_addr: self.local_addr().ok(),
            remote_addr: self.peer_addr().ok(),
        }
    }
}

/// The accepted connections of a listener as a `Stream` (for tonic's `serve_with_incoming`).
#[derive(Debug)]
pub struct Incoming(pub TcpListener);

impl futures_core::Stream for Incoming {
    type Item = io::Result<TcpStream>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_accept(cx).map(|r| Some(r.map(|(s, _)| s)))
    }
}
