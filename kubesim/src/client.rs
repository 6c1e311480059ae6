//! A real [`kube::Client`] pointed at the fake: over the simulated network from a sim
//! [`Host`](sim::net::Host) ([`client`], [`client_as`]), or over a real loopback socket
//! ([`local_client`], [`local_client_as`]).
//!
//! The stack is the one kube-rs builds for a real cluster, minus TLS and auth: a hyper-util
//! legacy client (HTTP/1.1, `TokioTimer` for its timers so they run on fake time) dialing through
//! [`sim::net::adapters::Connector`], kube's [`BaseUriLayer`] to turn the request paths kube-rs
//! makes (`/api/v1/namespaces/default/configmaps`) into full URIs, and a `User-Agent` header naming
//! the caller, so the fake's history names the actor of every write. It is these few lines:
//!
//! ```ignore
//! let service = tower::ServiceBuilder::new()
//!     .layer(kube::client::middleware::BaseUriLayer::new("http://kube-apiserver:6443".parse()?))
//!     .service(
//!         hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
//!             .timer(hyper_util::rt::TokioTimer::new())
//!             .pool_timer(hyper_util::rt::TokioTimer::new())
//!             .build(sim::net::adapters::Connector::new(host.clone())),
//!     );
//! let client = kube::Client::new(service, "default");
//! ```
//!
//! In a simulation (the fake served by `ApiServer::serve_sim`, which returns the URL):
//!
//! ```ignore
//! let url = api.serve_sim(&ctx)?;
//! let host = ctx.net().host("operator-0");
//! let client = kubesim::client::client(&host, &url);
//! let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(client);
//! ```
//!
//! The default namespace of the clients made here is `default`.

use std::time::Duration;

use http::{HeaderValue, Request, Uri, header::USER_AGENT};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::Body;
use kube::client::middleware::BaseUriLayer;

/// The namespace the clients made here use for `Api::default_namespaced`.
pub const DEFAULT_NAMESPACE: &str = "default";

/// How long an idle pooled connection is kept (hyper-util's default is 90 s; the fake's watch
/// connections are long-lived anyway).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A [`kube::Client`] dialing `url` (`"http://kube-apiserver:6443"`, as `ApiServer::serve_sim`
/// returns it) from the simulated `host`, sending the host's name as its `User-Agent`.
///
/// # Panics
/// When `url` is not an absolute URI (`scheme://authority`).
pub fn client(host: &sim::net::Host, url: &str) -> kube::Client {
    client_as(host, url, host.name())
}

/// [`client`] with the `User-Agent` `user_agent` (the actor the fake's history names for
/// writes without a field manager: give each replica of a controller its own).
///
/// # Panics
/// When `url` is not an absolute URI, or `user_agent` is not a valid header value.
pub fn client_as(host: &sim::net::Host, url: &str, user_agent: &str) -> kube::Client {
    let hyper = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build(sim::net::adapters::Connector::new(host.clone()));
    wrap(hyper, url, user_agent)
}

/// A [`kube::Client`] for a fake on a real loopback socket (`"http://127.0.0.1:PORT"`, from
/// `LocalApiServer`), over plain tokio TCP, with the `User-Agent` `kubesim-local`.
///
/// # Panics
/// When `url` is not an absolute URI.
pub fn local_client(url: &str) -> kube::Client {
    local_client_as(url, "kubesim-local")
}

/// [`local_client`] with the `User-Agent` `user_agent`.
///
/// # Panics
/// When `url` is not an absolute URI, or `user_agent` is not a valid header value.
pub fn local_client_as(url: &str, user_agent: &str) -> kube::Client {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let hyper = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build(connector);
    wrap(hyper, url, user_agent)
}

/// The layers every client here has: the base URI, then the `User-Agent`.
fn wrap<C>(hyper: HyperClient<C, Body>, url: &str, user_agent: &str) -> kube::Client
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let base: Uri = url.parse().unwrap_or_else(|e| panic!("kubesim::client: {url:?} is not a URI: {e}"));
    assert!(
        base.scheme().is_some() && base.authority().is_some(),
        "kubesim::client: {url:?} is not an absolute URI (scheme://host:port)"
    );
    let agent = HeaderValue::from_str(user_agent)
        .unwrap_or_else(|e| panic!("kubesim::client: User-Agent {user_agent:?} is not a header value: {e}"));
    let service = tower::ServiceBuilder::new()
        .layer(BaseUriLayer::new(base))
        .map_request(move |mut req: Request<Body>| {
            req.headers_mut().insert(USER_AGENT, agent.clone());
            req
        })
        .service(hyper);
    kube::Client::new(service, DEFAULT_NAMESPACE)
}

/// A [`kube::Client`] for a node: dials `url` from the node's host, spawns its connection tasks
/// on the node (so they end with the incarnation: no zombie tasks after a crash), and sends the
/// node's name (`operator-0`) as its `User-Agent`. What a controller running as a node uses.
///
/// # Panics
/// As [`client`].
pub fn for_node(node: &sim::node::NodeCtx, url: &str) -> kube::Client {
    let hyper = HyperClient::builder(node.executor())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build(sim::net::adapters::Connector::new(node.host().clone()));
    wrap(hyper, url, node.name())
}
