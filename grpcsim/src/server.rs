//! Serving tonic on a node: tonic's own server (`tonic::transport::Server`) over the node's
//! listener, SIGTERM wired to its graceful shutdown, and the drain bound tonic lacks.
//!
//! The server is tonic's: its accept loop, HTTP/2 settings, `grpc-timeout` enforcement,
//! keepalive, `max_connection_age` and `request.remote_addr()` behave as in production. What
//! [`Server`] adds is around it:
//!
//! - **Readiness**: without a health service the node is ready once serving; with one
//!   ([`Server::health`]), once the health service answers SERVING to a probe over the network,
//!   as a kubelet's gRPC readiness probe would ask it.
//! - **SIGTERM** (the node's shutdown signal): the health service (if given) reports
//!   NOT_SERVING, then tonic's shutdown signal fires: tonic closes the listener and calls hyper's
//!   graceful shutdown on every connection, which sends GOAWAY. Each connection's outgoing HTTP/2
//!   frames are read as they are written, so the GOAWAY is recorded (`grpc.goaway`) when it
//!   really goes out. Once every connection has sent it (or closed), `grpc.draining` is recorded
//!   and [`Server::draining`] resolves: end long-lived streams then, not before (see
//!   [`crate::checks::GoawayFirst`]).
//! - **Draining** waits, as tonic does, for every connection to close — and tonic waits forever
//!   while a stream stays open. tonic's only bound is per connection, set on [`Server::builder`]:
//!   `max_connection_age` alone sends GOAWAY when a connection reaches the age (and still waits
//!   for its streams); with `max_connection_age_grace` as well, tonic 0.14 sends *no* GOAWAY and
//!   closes the connection at age + grace (read from tonic's `serve_connection`, checked by the
//!   test `max_connection_age_goaway_or_close_as_tonic_does`). [`Server::drain_bound`] adds the
//!   bound tonic lacks: connections still open that long after SIGTERM are closed (their streams
//!   fail on the client), and [`Server::serve`] returns. Without a bound, the node's grace (its
//!   `terminationGracePeriod`) decides, and the node is killed when it runs out.
//! - **Streams** are recorded on the server by a layer [`Server::builder`] installs:
//!   `grpc.stream.open` (the method path, then `on :PORT`) and `grpc.stream.end` (the path, then
//!   `status N by the server`, `ended without trailers`, or `cancelled (dropped unfinished)`, then
//!   `on :PORT`); `grpc.draining` and `grpc.stopped` start with `:PORT`, so that several servers
//!   on one node are told apart.
//!
//! tonic spawns a task per connection; spawned from the node's task, each belongs to the node and
//! is aborted when the node crashes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use sim::net::TcpStream;
use sim::node::{BoxError, NodeCtx};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

/// The layers [`Server::builder`] installs on tonic's builder.
pub type Layers = tower::layer::util::Stack<RecordLayer, tower::layer::util::Identity>;

/// The router [`Server::serve`] takes: [`Server::builder`] plus your services.
pub type Router = tonic::transport::server::Router<Layers>;

/// A tonic server on a node (see the module docs).
pub struct Server {
    node: NodeCtx,
    /// The port served, once `serve` knows it: stream records name it.
    port: Arc<std::sync::OnceLock<u16>>,
    drain: Option<Duration>,
    health: Option<tonic_health::server::HealthReporter>,
    draining: watch::Sender<bool>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("node", &self.node.name()).field("drain", &self.drain).finish_non_exhaustive()
    }
}

/// Resolves once the server has sent GOAWAY on every connection after SIGTERM.
#[derive(Clone, Debug)]
pub struct Draining {
    rx: watch::Receiver<bool>,
}

impl Draining {
    /// Resolves once GOAWAY went out on every connection (at once if it already did; never if
    /// the server is dropped without draining).
    pub async fn wait(mut self) {
        if self.rx.wait_for(|d| *d).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Whether GOAWAY went out.
    pub fn is_draining(&self) -> bool {
        *self.rx.borrow()
    }
}

impl Server {
    /// A server for `node`: no drain bound, no health service.
    pub fn new(node: &NodeCtx) -> Server {
        Server {
            node: node.clone(),
            port: Arc::default(),
            drain: None,
            health: None,
            draining: watch::channel(false).0,
        }
    }

    /// tonic's server builder with the stream-recording layer installed: configure it (timeouts,
    /// keepalive, `max_connection_age`…) and add your services.
    pub fn builder(&self) -> tonic::transport::Server<Layers> {
        tonic::transport::Server::builder().layer(RecordLayer { node: self.node.clone(), port: Arc::clone(&self.port) })
    }

    /// Closes connections still open `bound` after SIGTERM (their streams fail on the client with
    /// the status of a closed connection), so that [`Server::serve`] returns within it.
    pub fn drain_bound(mut self, bound: Duration) -> Server {
        self.drain = Some(bound);
        self
    }

    /// Readiness from tonic-health, as a kubelet gRPC probe reads it: the node becomes ready when
    /// the health service, asked over the network (`grpc.health.v1.Health/Check`, service `""`,
    /// through the node's loopback every [`READINESS_PERIOD`]), answers SERVING. tonic-health
    /// starts `""` at SERVING: to warm up first, set it NOT_SERVING before serving and SERVING when
    /// ready. The probe stops once the node is ready (a later NOT_SERVING does not take the node
    /// out of routing). On SIGTERM the server reports NOT_SERVING. Add the health service to the
    /// router yourself.
    pub fn health(mut self, reporter: tonic_health::server::HealthReporter) -> Server {
        self.health = Some(reporter);
        self
    }

    /// Resolves after SIGTERM once GOAWAY went out on every connection: end long-lived streams
    /// then, not before.
    pub fn draining(&self) -> Draining {
        Draining { rx: self.draining.subscribe() }
    }

    /// Serves `router` on `listener` until SIGTERM, then drains (see the module docs). Sets the
    /// node ready once serving — or, with [`Server::health`], once its health service answers
    /// SERVING.
    ///
    /// # Errors
    /// tonic's transport error if serving fails.
    pub async fn serve(self, listener: sim::net::TcpListener, router: Router) -> Result<(), BoxError> {
        let node = self.node.clone();
        let ctx = node.sim().clone();
        let port = listener.local_addr()?.port();
        let _ = self.port.set(port);
        let conns = Conns::default();
        let incoming = TappedIncoming { listener, node: node.clone(), conns: conns.clone() };
        let (signal_tx, signal_rx) = tokio::sync::oneshot::channel::<()>();
        let serving = router.serve_with_incoming_shutdown(incoming, async {
            let _ = signal_rx.await;
        });
        tokio::pin!(serving);
        if self.health.is_some() {
            node.spawn(readiness_probe(node.clone(), port));
        } else {
            node.set_ready();
        }
        let shutdown = node.shutdown_signal();
        tokio::pin!(shutdown);
        tokio::select! {
            result = &mut serving => return result.map_err(Into::into),
            () = &mut shutdown => {}
        }
        let sigterm_at = tokio::time::Instant::now();
        let deadline = self.drain.map(|bound| sigterm_at + bound);
        if let Some(h) = &self.health {
            h.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        }
        let _ = signal_tx.send(());
        // Drive tonic until GOAWAY went out on every open connection (or it closed), or the drain
        // bound ran out (a connection that cannot write — its peer reads nothing — never sends it) …
        let goaway_everywhere = conns.wait(|c| c.open.iter().all(|(_, s)| s.goaway.load(Ordering::SeqCst)));
        let bounded = async {
            match deadline {
                Some(at) => tokio::time::timeout_at(at, goaway_everywhere).await.is_ok(),
                None => {
                    goaway_everywhere.await;
                    true
                }
            }
        };
        let mut result = None;
        let mut bound_hit = false;
        tokio::select! {
            done = &mut serving => result = Some(done),
            sent = bounded => bound_hit = !sent,
        }
        ctx.record(
            "grpc.draining",
            node.name(),
            format!(":{port} GOAWAY sent on {} of {} open connections", conns.with_goaway(), conns.count()),
        );
        // … then the application may end its streams.
        self.draining.send_replace(true);
        let result = match (result, deadline) {
            (Some(done), _) => done,
            (None, None) => serving.await,
            (None, Some(at)) => {
                let done = if bound_hit { None } else { tokio::time::timeout_at(at, &mut serving).await.ok() };
                match done {
                    Some(done) => done,
                    None => {
                        ctx.record(
                            "grpc.drain.bound",
                            node.name(),
                            format!(
                                ":{port} closing {} connections still open {:?} after SIGTERM",
                                conns.count(),
                                at - sigterm_at
                            ),
                        );
                        conns.kill_all();
                        serving.await
                    }
                }
            }
        };
        ctx.record("grpc.stopped", node.name(), format!(":{port} drained in {:?}", sigterm_at.elapsed()));
        result.map_err(Into::into)
    }
}

/// How often the readiness probe asks the health service (kubelet's `periodSeconds` is 10 s by
/// default; a simulation may as well ask often).
pub const READINESS_PERIOD: Duration = Duration::from_millis(100);

/// Asks the node's own health service, over its loopback, until it answers SERVING; then sets the
/// node ready.
async fn readiness_probe(node: NodeCtx, port: u16) {
    let Ok(endpoint) = crate::client::endpoint(&format!("127.0.0.1:{port}")) else { return };
    let channel = endpoint.connect_with_connector_lazy(sim::net::adapters::Connector::new(node.host().clone()));
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    loop {
        let asked = health.check(tonic_health::pb::HealthCheckRequest { service: String::new() });
        if let Ok(Ok(answer)) = tokio::time::timeout(READINESS_PERIOD, asked).await
            && answer.into_inner().status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        {
            node.set_ready();
            return;
        }
        tokio::time::sleep(READINESS_PERIOD).await;
    }
}

/// The connections a server has open.
#[derive(Clone, Default)]
struct Conns {
    inner: Arc<Mutex<ConnsState>>,
    changed: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct ConnsState {
    open: Vec<(u64, Arc<ConnShared>)>,
}

impl Conns {
    fn lock(&self) -> std::sync::MutexGuard<'_, ConnsState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self) -> usize {
        self.lock().open.len()
    }

    fn with_goaway(&self) -> usize {
        self.lock().open.iter().filter(|(_, s)| s.goaway.load(Ordering::SeqCst)).count()
    }

    fn kill_all(&self) {
        for (_, shared) in &self.lock().open {
            shared.kill();
        }
    }

    async fn wait(&self, ready: impl Fn(&ConnsState) -> bool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready(&self.lock()) {
                return;
            }
            notified.await;
        }
    }
}

/// What a tapped connection shares with its server.
#[derive(Default)]
struct ConnShared {
    goaway: AtomicBool,
    killed: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl ConnShared {
    fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        for w in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            w.wake();
        }
    }

    fn park(&self, cx: &Context<'_>) {
        let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
    }
}

/// The listener's connections, each tapped.
struct TappedIncoming {
    listener: sim::net::TcpListener,
    node: NodeCtx,
    conns: Conns,
}

impl futures_core::Stream for TappedIncoming {
    type Item = std::io::Result<Tapped>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.listener.poll_accept(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok((stream, peer))) => {
                let shared = Arc::new(ConnShared::default());
                let id = stream.id();
                this.conns.lock().open.push((id, Arc::clone(&shared)));
                this.conns.changed.notify_waiters();
                Poll::Ready(Some(Ok(Tapped {
                    inner: stream,
                    label: format!("conn#{id} {peer}"),
                    id,
                    node: this.node.clone(),
                    conns: this.conns.clone(),
                    shared,
                    frames: FrameReader::default(),
                })))
            }
        }
    }
}

/// A served connection whose outgoing HTTP/2 frames are read as they are written (to see the
/// GOAWAY go out), and which can be closed from outside (the drain bound).
struct Tapped {
    inner: TcpStream,
    label: String,
    id: u64,
    node: NodeCtx,
    conns: Conns,
    shared: Arc<ConnShared>,
    frames: FrameReader,
}

impl Drop for Tapped {
    fn drop(&mut self) {
        self.conns.lock().open.retain(|(id, _)| *id != self.id);
        self.conns.changed.notify_waiters();
    }
}

fn killed_error() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "closed by the server's drain bound")
}

impl AsyncRead for Tapped {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.shared.killed.load(Ordering::SeqCst) {
            return Poll::Ready(Err(killed_error()));
        }
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if polled.is_pending() {
            this.shared.park(cx);
        }
        polled
    }
}

impl AsyncWrite for Tapped {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.shared.killed.load(Ordering::SeqCst) {
            return Poll::Ready(Err(killed_error()));
        }
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if polled.is_pending() {
            this.shared.park(cx);
        }
        if let Poll::Ready(Ok(n)) = &polled {
            for frame in this.frames.feed(&buf[..*n]) {
                if frame == FRAME_GOAWAY && !this.shared.goaway.swap(true, Ordering::SeqCst) {
                    this.node.sim().record("grpc.goaway", this.node.name(), &this.label);
                    this.conns.changed.notify_waiters();
                }
            }
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Tapped {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// The HTTP/2 frame type of GOAWAY (RFC 9113 §6.8).
const FRAME_GOAWAY: u8 = 0x7;

/// Splits a server's outgoing HTTP/2 byte stream into frames (RFC 9113 §4.1: a 9-octet header,
/// its first 3 octets the payload length, the 4th the type). A server sends no connection preface
/// of its own beyond its SETTINGS frame, so the stream is frames from its first byte.
#[derive(Default)]
struct FrameReader {
    header: Vec<u8>,
    skip: usize,
}

impl FrameReader {
    /// Feeds written bytes; returns the types of the frames whose headers they completed.
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<u8> {
        let mut types = Vec::new();
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let want = 9 - self.header.len();
            let n = want.min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() == 9 {
                let len = (usize::from(self.header[0]) << 16)
                    | (usize::from(self.header[1]) << 8)
                    | usize::from(self.header[2]);
                types.push(self.header[3]);
                self.skip = len;
                self.header.clear();
            }
        }
        types
    }
}

/// The layer that records each stream's start and end on the server (see the module docs).
#[derive(Clone)]
pub struct RecordLayer {
    node: NodeCtx,
    port: Arc<std::sync::OnceLock<u16>>,
}

impl std::fmt::Debug for RecordLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordLayer").field("node", &self.node.name()).finish()
    }
}

impl<S> tower::Layer<S> for RecordLayer {
    type Service = Recorded<S>;

    fn layer(&self, inner: S) -> Recorded<S> {
        Recorded { inner, node: self.node.clone(), port: Arc::clone(&self.port) }
    }
}

/// A service whose streams are recorded.
#[derive(Clone)]
pub struct Recorded<S> {
    inner: S,
    node: NodeCtx,
    port: Arc<std::sync::OnceLock<u16>>,
}

impl<S> std::fmt::Debug for Recorded<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded").field("node", &self.node.name()).finish_non_exhaustive()
    }
}

impl<S, B> tower_service::Service<http::Request<tonic::body::Body>> for Recorded<S>
where
    S: tower_service::Service<http::Request<tonic::body::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<EndWatch<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let path = request.uri().path().to_string();
        let on = format!("on :{}", self.port.get().copied().unwrap_or(0));
        let node = self.node.clone();
        node.sim().record("grpc.stream.open", node.name(), format!("{path} {on}"));
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            let (parts, body) = response.into_parts();
            let trailers_only = parts.headers.get("grpc-status").and_then(|v| v.to_str().ok()).map(str::to_string);
            if let Some(status) = &trailers_only {
                node.sim().record("grpc.stream.end", node.name(), format!("{path} status {status} by the server {on}"));
            }
            let body = EndWatch { inner: body, node, path, on, ended: trailers_only.is_some() };
            Ok(http::Response::from_parts(parts, body))
        })
    }
}

/// A response body that records how its stream ended: trailers sent (the server ended it) or
/// dropped unfinished (the client went away, or the connection closed).
pub struct EndWatch<B> {
    inner: B,
    node: NodeCtx,
    path: String,
    /// `on :PORT`, the server's port.
    on: String,
    ended: bool,
}

impl<B> std::fmt::Debug for EndWatch<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndWatch").field("path", &self.path).field("ended", &self.ended).finish_non_exhaustive()
    }
}

impl<B: http_body::Body<Data = Bytes> + Unpin> http_body::Body for EndWatch<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let end = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame.trailers_ref().map(|trailers| {
                let status = trailers.get("grpc-status").and_then(|v| v.to_str().ok()).unwrap_or("?");
                format!("status {status} by the server")
            }),
            Poll::Ready(None) => Some("ended without trailers".to_string()),
            _ => None,
        };
        if let Some(end) = end
            && !self.ended
        {
            self.ended = true;
            let node = self.node.clone();
            node.sim().record("grpc.stream.end", node.name(), format!("{} {end} {}", self.path, self.on));
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for EndWatch<B> {
    fn drop(&mut self) {
        if !self.ended {
            self.node.sim().record(
                "grpc.stream.end",
                self.node.name(),
                format!("{} cancelled (dropped unfinished) {}", self.path, self.on),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_reader_finds_frame_types_across_split_writes() {
        // SETTINGS (len 6), then GOAWAY (len 8), fed in awkward pieces.
        let mut bytes = vec![0, 0, 6, 0x4, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&[0; 6]);
        bytes.extend_from_slice(&[0, 0, 8, 0x7, 0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        for split in 0..bytes.len() {
            let mut reader = FrameReader::default();
            let mut types = reader.feed(&bytes[..split]);
            types.extend(reader.feed(&bytes[split..]));
            assert_eq!(types, vec![0x4, 0x7], "split at {split}");
        }
    }
}
