//! The fake API server: the store behind a mutex, served over HTTP/1.1 by hyper on a sim `Host`
//! ([`ApiServer::serve_sim`], exact replay) or on a loopback socket ([`ApiServer::start_local`],
//! real time, for clients with their own threads and for differential tests).
//!
//! ```no_run
//! # async fn demo(ctx: sim::Ctx) -> std::io::Result<()> {
//! let api = kubesim::server::ApiServer::new();
//! let url = api.serve_sim(&ctx)?; // "http://kube-apiserver:6443"
//! # let _ = url; Ok(()) }
//! ```
//!
//! Every committed write is recorded in the run's history as `kube.write <objectref> <verb>
//! rv=<n> by <actor>`; faults as `kube.fault`; restarts as `kube.restart`.

pub(crate) mod api;
mod local;
mod serve;

pub use api::{ApiServer, ApiServerBuilder, DEFAULT_HOST, DEFAULT_PORT};
pub use local::LocalApiServer;
