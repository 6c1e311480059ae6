//! The probe service (`proto/probe.proto`): a unary `Call` that answers after a delay and a
//! server-streaming `Stream` — what the differential tests, examples and benches call.
//!
//! Generated at build time by protox (a pure-Rust .proto compiler) and tonic-prost-build: no
//! system `protoc` is needed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};

use crate::server::Draining;

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    tonic::include_proto!("grpcsim.probe");
}

pub use generated::probe_client::ProbeClient;
pub use generated::probe_server::{Probe, ProbeServer};
pub use generated::{CallReply, CallRequest, Item, StreamRequest};

/// The probe service: answers with its `served_by` name; streams end when their count is reached
/// or, once the server drains, with status OK (after the GOAWAY, see [`crate::server`]).
#[derive(Clone)]
pub struct ProbeService {
    served_by: String,
    end: Option<EndSignal>,
}

type EndSignal = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

impl std::fmt::Debug for ProbeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeService").field("served_by", &self.served_by).finish_non_exhaustive()
    }
}

impl ProbeService {
    /// A probe answering as `served_by`, with streams that never end on shutdown.
    pub fn new(served_by: &str) -> ProbeService {
        ProbeService { served_by: served_by.to_string(), end: None }
    }

    /// Ends open streams (status OK) once `draining` resolves: after the GOAWAY.
    pub fn ending_on(mut self, draining: Draining) -> ProbeService {
        self.end = Some(Arc::new(move || Box::pin(draining.clone().wait())));
        self
    }

    /// Ends open streams (status OK) as soon as the node gets SIGTERM, racing the server's
    /// GOAWAY: the bug class [`crate::checks::GoawayFirst`] reports (for demonstrations).
    pub fn ending_at_sigterm(mut self, node: &sim::node::NodeCtx) -> ProbeService {
        let node = node.clone();
        self.end = Some(Arc::new(move || Box::pin(node.shutdown_signal())));
        self
    }

    /// The service wrapped for a tonic router.
    pub fn into_server(self) -> ProbeServer<ProbeService> {
        ProbeServer::new(self)
    }
}

/// The item stream of `Probe/Stream`.
pub type ItemStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<Item, Status>> + Send>>;

#[tonic::async_trait]
impl Probe for ProbeService {
    async fn call(&self, request: Request<CallRequest>) -> Result<Response<CallReply>, Status> {
        let request = request.into_inner();
        tokio::time::sleep(Duration::from_millis(request.delay_ms)).await;
        Ok(Response::new(CallReply { tag: request.tag, served_by: self.served_by.clone() }))
    }

    type StreamStream = ItemStream;

    async fn stream(&self, request: Request<StreamRequest>) -> Result<Response<ItemStream>, Status> {
        let StreamRequest { count, interval_ms } = request.into_inner();
        let served_by = self.served_by.clone();
        let end = self.end.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut seq = 0u64;
            let drained = async {
                match end {
                    Some(end) => end().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(drained);
            while count == 0 || seq < count {
                tokio::select! {
                    biased;
                    () = &mut drained => return,
                    () = tx.closed() => return,
                    () = tokio::time::sleep(Duration::from_millis(interval_ms)) => {}
                }
                seq += 1;
                if tx.send(Ok(Item { seq, served_by: served_by.clone() })).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }
}
