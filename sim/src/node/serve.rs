//! HTTP serving on a node ([`serve`]), with the in-flight tracking the `drain` oracle reads (see
//! docs/src/nodes.md, "Drain"). The module exists with sim's `hyper` feature.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::ctx::{BoxError, InFlight, NodeCtx};

/// Serves a tower service (an axum `Router`, a tonic router) over HTTP/1.1 and HTTP/2 on a node:
/// accepts on `listener`, serves each connection on the node's executor with tokio's timers,
/// and on SIGTERM stops accepting and drains: it returns once every open connection has finished
/// its in-flight requests (hyper's graceful shutdown; bounded only by the node's grace).
///
/// For the `drain` oracle a request is in flight from when its handler is called until its
/// response body has been sent to the end (or dropped: the client went away), so a streaming
/// body cut off by a node that returns early is caught like an unanswered request.
///
/// # Errors
/// Never: accept errors end the loop as a closed listener does.
pub async fn serve<S, B>(node: &NodeCtx, listener: crate::net::TcpListener, service: S) -> Result<(), BoxError>
where
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let shutdown = node.shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else { break };
                let tracked = Tracked { inner: service.clone(), inflight: Arc::clone(&node.inner.inflight) };
                let service = hyper_util::service::TowerToHyperService::new(tracked);
                let mut builder = hyper_util::server::conn::auto::Builder::new(node.executor());
                builder.http1().timer(hyper_util::rt::TokioTimer::new());
                builder.http2().timer(hyper_util::rt::TokioTimer::new());
                let connection = builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service).into_owned();
                let watched = graceful.watch(connection);
                node.spawn(async move {
                    let _ = watched.await;
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Keeps a node's in-flight requests, for the drain oracle.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    inflight: Arc<Mutex<InFlight>>,
}

impl<S, B> tower_service::Service<http::Request<hyper::body::Incoming>> for Tracked<S>
where
    S: tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<hyper::body::Incoming>) -> Self::Future {
        let seq = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            inflight.next += 1;
            let seq = inflight.next;
            inflight.open.insert(seq, format!("{} {}", request.method(), request.uri().path()));
            seq
        };
        let future = self.inner.call(request);
        // Removed when the response body has been sent to the end, or when hyper drops the
        // handler's future or the body (its client went away).
        let done = Done { inflight: Arc::clone(&self.inflight), seq };
        Box::pin(async move {
            let response = future.await?;
            Ok(response.map(|body| TrackedBody { inner: Box::pin(body), done: Some(done) }))
        })
    }
}

/// A response body that keeps its request in flight until its last frame was taken.
struct TrackedBody<B> {
    inner: Pin<Box<B>>,
    done: Option<Done>,
}

impl<B: hyper::body::Body> hyper::body::Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        let polled = self.inner.as_mut().poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None | Some(Err(_)))) {
            self.done = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Takes a request out of the in-flight set when dropped.
struct Done {
    inflight: Arc<Mutex<InFlight>>,
    seq: u64,
}

impl Drop for Done {
    fn drop(&mut self) {
        self.inflight.lock().unwrap_or_else(|p| p.into_inner()).open.remove(&self.seq);
    }
}
