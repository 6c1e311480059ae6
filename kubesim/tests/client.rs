//! `kubesim::client` against a tiny handler server (not the fake): the request path, the
//! User-Agent and the JSON round trip, in a simulation and on loopback.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use sim::Simulation;

/// Answers every GET with a ConfigMap named after the last path segment, whose data holds the
/// request's path and User-Agent.
async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    let agent = req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let name = path.rsplit('/').next().unwrap_or("").to_string();
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "7"},
        "data": {"path": path, "agent": agent},
    });
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    Ok(resp)
}

fn serve<S>(stream: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let _ = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .serve_connection(TokioIo::new(stream), hyper::service::service_fn(handle))
            .await;
    });
}

#[test]
fn a_client_over_the_simulated_network_names_its_host() {
    let report = Simulation::new("kubesim_client").seeds(0..3).run(|ctx| async move {
        let listener = ctx.net().host("kube-apiserver").listen("6443")?;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                serve(stream);
            }
        });
        let host = ctx.net().host("operator-0");
        let api: Api<ConfigMap> = Api::default_namespaced(kubesim::client::client(&host, "http://kube-apiserver:6443"));
        let cm = api.get("x").await.map_err(|e| sim::Failure::correctness("client", e.to_string()))?;
        let data = cm.data.unwrap_or_default();
        assert_eq!(data["path"], "/api/v1/namespaces/default/configmaps/x");
        assert_eq!(data["agent"], "operator-0");
        let other = Api::<ConfigMap>::namespaced(
            kubesim::client::client_as(&host, "http://kube-apiserver:6443", "replica-b"),
            "default",
        );
        let cm = other.get("y").await.map_err(|e| sim::Failure::correctness("client", e.to_string()))?;
        assert_eq!(cm.data.unwrap_or_default()["agent"], "replica-b");
        ctx.record("client.ok", "operator-0", "");
        Ok(())
    });
    report.assert_passed();
}

#[test]
fn a_local_client_dials_loopback() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                serve(stream);
            }
        });
        let api: Api<ConfigMap> = Api::default_namespaced(kubesim::client::local_client(&url));
        let cm = api.get("z").await.expect("get");
        let data = cm.data.unwrap_or_default();
        assert_eq!(data["path"], "/api/v1/namespaces/default/configmaps/z");
        assert_eq!(data["agent"], "kubesim-local");
    });
}
