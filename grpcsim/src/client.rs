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
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use sim::net::Host;
use sim::net::adapters::Connector;
use sim::node::NodeCtx;
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
    endpoints: tokio::sync::watch::Receiver<Vec<String>>,
    current: BTreeMap<String, ()>,
    pending: VecDeque<tower::discover::Change<String, Channel>>,
    first: bool,
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
        if self.first {
            self.first = false;
            let now = self.endpoints.borrow_and_update().clone();
            self.diff(now);
        }
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Poll::Ready(Some(Ok(change)));
            }
            let changed = {
                let fut = self.endpoints.changed();
                tokio::pin!(fut);
                fut.poll(cx)
            };
            match changed {
                Poll::Ready(Ok(())) => {
                    let now = self.endpoints.borrow_and_update().clone();
                    self.diff(now);
                }
                Poll::Ready(Err(_)) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The balanced client transport: clone it into tonic generated clients
/// (`ProbeClient::new(transport)`).
pub type Balanced =
    tower::util::BoxCloneSyncService<http::Request<tonic::body::Body>, http::Response<tonic::body::Body>, BoxError>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
        endpoints,
        current: BTreeMap::new(),
        pending: VecDeque::new(),
        first: true,
    };
    let rng = SeededRng(node.sim().source(&format!("grpc/balance/{service}")));
    let loaded = tower::load::PendingRequestsDiscover::new(replicas, tower::load::CompleteOnResponse::default());
    let balance = tower::balance::p2c::Balance::from_rng(loaded, rng);
    let (buffer, worker) = tower::buffer::Buffer::pair(balance, 1024);
    node.spawn(worker);
    Ok(tower::util::BoxCloneSyncService::new(buffer))
}
