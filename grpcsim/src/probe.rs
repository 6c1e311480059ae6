//! The probe service (`proto/probe.proto`): a unary `Call` that answers after a delay and a
//! server-streaming `Stream` — what the differential tests, examples and benches call.
//!
//! Generated at build time by protox (a pure-Rust .proto compiler) and tonic-prost-build: no
//! system `protoc` is needed.

use std::pin::Pin;
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
#[derive(Clone, Debug)]
pub struct ProbeService {
    served_by: String,
    draining: Option<Draining>,
}

impl ProbeService {
    /// A probe answering as `served_by`, with streams that never end on shutdown.
    pub fn new(served_by: &str) -> ProbeService {
        ProbeService { served_by: served_by.to_string(), draining: None }
    }

    /// Ends open streams (status OK) once `draining` resolves.
    pub fn ending_on(mut self, draining: Draining) -> ProbeService {
        self.draining = Some(draining);
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
        let draining = self.draining.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut seq = 0u64;
            let drained = async {
                match draining {
                    Some(d) => d.wait().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(drained);
            while count == 0 || seq < count {
                tokio::select! {
                    biased;
                    () = &mut drained => return,
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
