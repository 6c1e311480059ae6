//! tonic channels over the simulated network, and a seeded balancer over a service's replicas.
//!
//! [`channel`] and [`connect`] make a tonic `Channel` to `name:port` that dials through a sim
//! [`Host`] (lazily or eagerly). tonic's channel already uses hyper-util's `TokioTimer`; given a
//! node's executor ([`node_channel`]) its connection and buffer tasks belong to the node.
//!
//! tonic's own balancing (`Channel::balance_list`) cannot take a custom connector and picks with
//! its own randomness. [`balanced`] builds tower's power-of-two-choices balancer instead, over one
//! channel per replica of a service, following the service's endpoints as they change (a rollout
//! takes a replica out of routing and puts it back), with its random picks drawn from the run's
//! seed (stream `grpc/balance/<service>`).

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

use sim::net::Host;
use sim::net::adapters::Connector;
use sim::node::{BoxError, NodeCtx};
use tonic::transport::{Channel, Endpoint};

/// The endpoint for `target` (`name:port`), as tonic would make it from `http://name:port`.
///
/// # Errors
/// When `target` does not make a valid URI.
pub fn endpoint(target: &str) -> Result<Endpoint, tonic::transport::Error> {
    Endpoint::from_shared(format!("http://{target}"))
}

/// A lazy channel to `target` through `host` (connects on the first call).
///
/// # Errors
/// When `target` does not make a valid URI.
pub fn channel(host: &Host, target: &str) -> Result<Channel, tonic::transport::Error> {
    Ok(endpoint(target)?.connect_with_connector_lazy(Connector::new(host.clone())))
}

/// An eager channel: connects now.
///
/// # Errors
/// tonic's transport error when the connection cannot be made (its source is the dial's
/// `io::Error`: `Connection refused (os error 111)` …).
pub async fn connect(host: &Host, target: &str) -> Result<Channel, tonic::transport::Error> {
    endpoint(target)?.connect_with_connector(Connector::new(host.clone())).await
}

/// A lazy channel from a node: dials through its host, spawns on its executor.
///
/// # Errors
/// When `target` does not make a valid URI.
pub fn node_channel(node: &NodeCtx, target: &str) -> Result<Channel, tonic::transport::Error> {
    Ok(endpoint(target)?.executor(node.executor()).connect_with_connector_lazy(Connector::new(node.host().clone())))
}

/// tower's random source, drawn from the run's seed.
struct SeededRng(sim::Source);

impl tower::util::rng::Rng for SeededRng {
    fn next_u64(&mut self) -> u64 {
        self.0.u64()
    }
}

/// The discovery of a service's replicas: a stream of insertions and removals.
struct Replicas {
    node: NodeCtx,
    port: u16,
    /// The service's endpoints: the current list first, then each change.
    endpoints: tokio_stream::wrappers::WatchStream<Vec<String>>,
    current: BTreeMap<String, ()>,
    pending: VecDeque<tower::discover::Change<String, Channel>>,
}

impl Replicas {
    fn diff(&mut self, wanted: Vec<String>) {
        let wanted: BTreeMap<String, ()> = wanted.into_iter().map(|w| (w, ())).collect();
        for gone in self.current.keys().filter(|k| !wanted.contains_key(*k)) {
            self.pending.push_back(tower::discover::Change::Remove(gone.clone()));
        }
        for new in wanted.keys().filter(|k| !self.current.contains_key(*k)) {
            if let Ok(ch) = node_channel(&self.node, &format!("{new}:{}", self.port)) {
                self.pending.push_back(tower::discover::Change::Insert(new.clone(), ch));
            }
        }
        self.current = wanted;
    }
}

impl futures_core::Stream for Replicas {
    type Item = Result<tower::discover::Change<String, Channel>, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Poll::Ready(Some(Ok(change)));
            }
            // The stream keeps its own wait registered between polls: a balancer left with no
            // replica is woken when one comes back.
            match Pin::new(&mut self.endpoints).poll_next(cx) {
                Poll::Ready(Some(now)) => self.diff(now),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The balanced client transport: clone it into tonic generated clients
/// (`ProbeClient::new(transport)`). Its errors are already gRPC statuses (tonic's
/// `Status::from_error` of the transport's error), so generated clients over it can be used in
/// spawned tasks.
#[derive(Clone)]
pub struct Balanced {
    inner:
        tower::util::BoxCloneSyncService<http::Request<tonic::body::Body>, http::Response<tonic::body::Body>, BoxError>,
}

impl std::fmt::Debug for Balanced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balanced").finish_non_exhaustive()
    }
}

impl tower_service::Service<http::Request<tonic::body::Body>> for Balanced {
    type Response = http::Response<tonic::body::Body>;
    type Error = tonic::Status;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Self::Response, tonic::Status>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), tonic::Status>> {
        self.inner.poll_ready(cx).map_err(tonic::Status::from_error)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let future = self.inner.call(request);
        Box::pin(async move { future.await.map_err(tonic::Status::from_error) })
    }
}

/// A seeded power-of-two-choices balancer over the replicas of `service` (a ClusterIP or headless
/// name of the network), each reached on `port` through its own channel from `node`; it follows the
/// service's endpoints. Usable as the transport of a tonic generated client.
///
/// # Errors
/// When `service` is not a service name of the network.
pub fn balanced(node: &NodeCtx, service: &str, port: u16) -> Result<Balanced, String> {
    let endpoints =
        node.sim().net().watch_endpoints(service).ok_or_else(|| format!("{service} is not a service name"))?;
    let replicas = Replicas {
        node: node.clone(),
        port,
        endpoints: tokio_stream::wrappers::WatchStream::new(endpoints),
        current: BTreeMap::new(),
        pending: VecDeque::new(),
    };
    let rng = SeededRng(node.sim().source(&format!("grpc/balance/{service}")));
    let loaded = tower::load::PendingRequestsDiscover::new(replicas, tower::load::CompleteOnResponse::default());
    let balance = tower::balance::p2c::Balance::from_rng(loaded, rng);
    let (buffer, worker) = tower::buffer::Buffer::pair(balance, 1024);
    node.spawn(worker);
    Ok(Balanced { inner: tower::util::BoxCloneSyncService::new(buffer) })
}
