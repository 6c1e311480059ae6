//! What the kube-rs tests share: running a body against kubesim in a simulation and on loopback.

#![allow(dead_code)]

use std::future::Future;

use kubesim::server::ApiServer;
use sim::{Failure, Simulation};

/// A failure from any error.
pub fn fail(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::correctness("kube-test", format!("{what}: {e}"))
}

/// Runs `body(client, api)` in a simulation (seeds 0..3) against a fake served on the simulated
/// network, the client dialing from host `tester`.
pub fn in_sim<F, Fut>(name: &str, body: F)
where
    F: Fn(kube::Client, ApiServer) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    let body = std::sync::Arc::new(body);
    Simulation::new(name)
        .seeds(0..3)
        .run(move |ctx| {
            let body = std::sync::Arc::clone(&body);
            async move {
                let api = ApiServer::new();
                let url = api.serve_sim(&ctx)?;
                let client = kubesim::client::client(&ctx.net().host("tester"), &url);
                body(client, api).await
            }
        })
        .assert_passed();
}

/// Runs `body(client, api)` against a fake on loopback (real time).
pub fn on_loopback<F, Fut>(body: F)
where
    F: FnOnce(kube::Client, ApiServer) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    let local = ApiServer::new().start_local().expect("loopback server");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let client = rt.block_on(async { kubesim::client::local_client(local.url()) });
    let api = local.api().clone();
    rt.block_on(body(client, api)).expect("the body passes on loopback");
}
