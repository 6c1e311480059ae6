//! The client's call log: every gRPC call or stream a client makes, and the one status it ended
//! with, as the application sees it.
//!
//! Wrap a channel (or a [`crate::client::balanced`] transport) in [`CallLog::layer`]:
//!
//! ```ignore
//! let channel = grpcsim::client::channel(&host, "ledger:50051")?;
//! let client = LedgerClient::new(tower::Layer::layer(&CallLog::layer(&ctx), channel));
//! // its type: LedgerClient<grpcsim::calls::Logged<tonic::transport::Channel>>
//! ```
//!
//! Each call records `grpc.call.start` (identity `call#N`, detail: the method path) and, once,
//! `grpc.call.end` with its status: from trailers-only headers, from the trailers after the
//! messages, from tonic's mapping of a transport error (`Status::from_error`), or `ended on the
//! client` when the client dropped the call before the transport ended it — a cancel, or a status
//! tonic made itself (a message too large to decode), which the transport never sees. A response body
//! that ends with neither trailers nor an error ends without a status: gRPC over HTTP/2 requires
//! one ([gRPC over HTTP2](https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md),
//! "Trailers"), so [`OneStatus`] reports it, as it reports a call that ends twice (a frame or an
//! error after its status).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use sim::check::{Check, Verdict};
use sim::history::Entry;
use sim::node::BoxError;
use sim::run::Ctx;

/// The status a call ended with, as recorded in the history (`grpc.call.end`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallEnd {
    /// A gRPC status: its code and message.
    Status(tonic::Code, String),
    /// The client dropped the call before the transport ended it: the application cancelled it,
    /// or tonic ended it with a status of its own making (a message too large to decode, an HTTP
    /// status without `grpc-status`…), which the transport does not see.
    Dropped,
    /// The body ended with neither trailers nor an error (a protocol violation).
    NoStatus,
}

impl std::fmt::Display for CallEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallEnd::Status(code, message) => write!(f, "status {} ({code:?}): {message}", *code as i32),
            CallEnd::Dropped => {
                f.write_str("ended on the client (dropped: a cancel, or a status tonic produced itself)")
            }
            CallEnd::NoStatus => f.write_str("ended without a status"),
        }
    }
}

#[derive(Default, Debug)]
struct LogState {
    next: u64,
    /// Calls started and not ended: id → (path, started at).
    open: BTreeMap<u64, (String, std::time::Duration)>,
    ends: BTreeMap<u64, (String, CallEnd)>,
}

/// The run's call log (a [`Ctx::extension`]).
#[derive(Clone, Default, Debug)]
pub struct CallLog {
    state: Arc<Mutex<LogState>>,
}

impl CallLog {
    /// The run's call log.
    pub fn of(ctx: &Ctx) -> CallLog {
        (*ctx.extension::<CallLog>()).clone()
    }

    /// A tower layer logging every call through the wrapped gRPC transport.
    pub fn layer(ctx: &Ctx) -> CallLogLayer {
        CallLogLayer { ctx: ctx.clone(), log: CallLog::of(ctx) }
    }

    /// The calls that ended, with how: (call id, method path, end).
    pub fn ended(&self) -> Vec<(u64, String, CallEnd)> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.ends.iter().map(|(id, (path, end))| (*id, path.clone(), end.clone())).collect()
    }

    /// The calls still open: (call id, method path, started at).
    pub fn open(&self) -> Vec<(u64, String, std::time::Duration)> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.open.iter().map(|(id, (path, at))| (*id, path.clone(), *at)).collect()
    }

    fn start(&self, ctx: &Ctx, path: &str) -> u64 {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.next += 1;
        let id = st.next;
        st.open.insert(id, (path.to_string(), ctx.elapsed()));
        drop(st);
        ctx.record("grpc.call.start", &format!("call#{id}"), path);
        id
    }

    fn end(&self, ctx: &Ctx, id: u64, path: &str, end: CallEnd) {
        let text = end.to_string();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.open.remove(&id);
        st.ends.insert(id, (path.to_string(), end));
        drop(st);
        ctx.record("grpc.call.end", &format!("call#{id}"), format!("{path} {text}"));
    }
}

/// The layer of [`CallLog::layer`].
#[derive(Clone, Debug)]
pub struct CallLogLayer {
    ctx: Ctx,
    log: CallLog,
}

impl<S> tower::Layer<S> for CallLogLayer {
    type Service = Logged<S>;

    fn layer(&self, inner: S) -> Logged<S> {
        Logged { inner, ctx: self.ctx.clone(), log: self.log.clone() }
    }
}

/// A gRPC transport whose calls are logged (see the module docs).
#[derive(Clone, Debug)]
pub struct Logged<S> {
    inner: S,
    ctx: Ctx,
    log: CallLog,
}

impl<S, B> tower_service::Service<http::Request<tonic::body::Body>> for Logged<S>
where
    S: tower_service::Service<http::Request<tonic::body::Body>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<LoggedBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let path = request.uri().path().to_string();
        let id = self.log.start(&self.ctx, &path);
        let mut guard = EndGuard { ctx: self.ctx.clone(), log: self.log.clone(), id, path, ended: false };
        let future = self.inner.call(request);
        Box::pin(async move {
            match future.await {
                Err(e) => {
                    let e: BoxError = e.into();
                    let status = tonic::Status::from_error(e);
                    guard.end(CallEnd::Status(status.code(), status.message().to_string()));
                    Err(Box::new(status) as BoxError)
                }
                Ok(response) => {
                    let (parts, body) = response.into_parts();
                    if let Some(status) = tonic::Status::from_header_map(&parts.headers) {
                        guard.end(CallEnd::Status(status.code(), status.message().to_string()));
                    }
                    let body = LoggedBody { inner: Box::pin(body.map_err(Into::into)), guard };
                    Ok(http::Response::from_parts(parts, body))
                }
            }
        })
    }
}

use http_body_util::BodyExt as _;

/// Records the end of one call exactly when it happens (or its drop).
struct EndGuard {
    ctx: Ctx,
    log: CallLog,
    id: u64,
    path: String,
    ended: bool,
}

impl EndGuard {
    /// Records an end; a second end is recorded too, for [`OneStatus`] to report.
    fn end(&mut self, end: CallEnd) {
        self.ended = true;
        self.log.end(&self.ctx, self.id, &self.path, end);
    }
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        if !self.ended {
            self.log.end(&self.ctx, self.id, &self.path, CallEnd::Dropped);
        }
    }
}

/// A logged response body.
pub struct LoggedBody {
    inner: Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError> + Send>>,
    guard: EndGuard,
}

impl std::fmt::Debug for LoggedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoggedBody").field("call", &self.guard.id).finish_non_exhaustive()
    }
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        let polled = self.inner.as_mut().poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    let end = match tonic::Status::from_header_map(trailers) {
                        Some(s) => CallEnd::Status(s.code(), s.message().to_string()),
                        None => CallEnd::NoStatus,
                    };
                    self.guard.end(end);
                } else if self.guard.ended {
                    let path = self.guard.path.clone();
                    self.guard.log.end(&self.guard.ctx, self.guard.id, &path, CallEnd::NoStatus);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let status = transport_status(e.as_ref());
                self.guard.end(CallEnd::Status(status.code(), status.message().to_string()));
            }
            Poll::Ready(None) if !self.guard.ended => self.guard.end(CallEnd::NoStatus),
            _ => {}
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

/// The status tonic gives a body error: a `Status` carried as is, an h2 error mapped by its
/// reason (tonic's `Status::from_h2_error`), anything else UNKNOWN.
fn transport_status(e: &(dyn std::error::Error + 'static)) -> tonic::Status {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(status) = err.downcast_ref::<tonic::Status>() {
            return status.clone();
        }
        source = err.source();
    }
    tonic::Status::unknown(e.to_string())
}

/// The oracle "every call ends with exactly one status" over the [`CallLog`]: a call ending
/// twice, or ending without a status, fails at once; a call still open when the run ends fails
/// the final check — unless its method is one you declared may stay open
/// ([`OneStatus::may_stay_open`], e.g. a watch the run ends in the middle of).
#[derive(Debug, Default)]
pub struct OneStatus {
    ends: BTreeMap<String, u32>,
    may_stay_open: std::collections::BTreeSet<String>,
}

impl OneStatus {
    /// Calls of `methods` (paths, `/package.Service/Method`) may still be open when the run ends.
    pub fn may_stay_open<I, S>(mut self, methods: I) -> OneStatus
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.may_stay_open.extend(methods.into_iter().map(Into::into));
        self
    }
}

/// The oracle of [`OneStatus`]: every call ends with exactly one status.
pub const ONE_STATUS: sim::Oracle = sim::Oracle::new("one-status");

impl Check for OneStatus {
    fn name(&self) -> &str {
        "one-status"
    }

    fn wants(&self, kind: &str) -> bool {
        kind == "grpc.call.end"
    }

    fn on_event(&mut self, event: &Entry) -> Verdict {
        if event.kind != "grpc.call.end" {
            return Verdict::Pass;
        }
        if event.detail.ends_with(&CallEnd::NoStatus.to_string()) {
            return Verdict::Violation(format!("{} {}", event.identity, event.detail));
        }
        let n = self.ends.entry(event.identity.clone()).or_default();
        *n += 1;
        if *n > 1 {
            return Verdict::Violation(format!("{} ended {n} times (last: {})", event.identity, event.detail));
        }
        Verdict::Pass
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        let open = CallLog::of(ctx).open();
        match open.iter().find(|(_, path, _)| !self.may_stay_open.contains(path)) {
            None => Verdict::Pass,
            Some((id, path, at)) => {
                Verdict::Violation(format!("call#{id} ({path}, started at {at:?}) never ended: no status, no error"))
            }
        }
    }
}
