//! A real kube-apiserver as a counterpart, and kubesim as the fake side.
//!
//! Providers, in order:
//! 1. an API server someone runs: `FIDELITY_KUBECONFIG` (a kubeconfig file; its current
//!    context) or `KUBE_APISERVER` (`https://host:port`) with `KUBE_TOKEN` (a bearer token) and
//!    optionally `KUBE_CA_FILE` (the server's CA; without it the certificate is not verified).
//!    Plain `KUBECONFIG` is deliberately not read: it is kubectl's default and may name a
//!    production cluster, and the suite creates and deletes namespaces;
//! 2. k3s in a container (feature `containers`, when a Docker engine answers);
//! 3. the local process started by `fidelity/scripts/kube-local.sh`: kube-apiserver and etcd
//!    built from the Go module proxy into a cache (Go 1.26+, ~15 min cold, seconds after).
//!
//! A counterpart's address is the path of a kubeconfig for it; kubesim's is its `http://` URL.
//! [`client`] builds a kube-rs client from either.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Error;
use crate::counterpart::{Attempt, ExternalServer, Provider, Selection, select};
use crate::local::LocalScript;

/// The environment variable naming a kubeconfig file for a running API server.
pub const KUBECONFIG_ENV: &str = "FIDELITY_KUBECONFIG";
/// The environment variable naming a running API server's URL (`https://host:port`).
pub const APISERVER_ENV: &str = "KUBE_APISERVER";
/// The bearer token for [`APISERVER_ENV`].
pub const TOKEN_ENV: &str = "KUBE_TOKEN";
/// The CA certificate file for [`APISERVER_ENV`] (optional: without it TLS is not verified).
pub const CA_ENV: &str = "KUBE_CA_FILE";
/// The Kubernetes version the script builds unless told otherwise (`KUBE_VERSION`).
pub const VERSION_DEFAULT: &str = "v1.37.2";
/// How long a named API server may take to answer `GET /version`.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The script that builds, starts and stops a local kube-apiserver and etcd.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts").join("kube-local.sh")
}

/// The local-process provider alone (benchmarks use it to time a start).
pub fn local() -> LocalScript {
    LocalScript { script: script(), what: "kube-apiserver", work_dir: crate::local::work_dir() }
}

/// Tries the three providers in order: the environment, a container, a local process.
///
/// # Errors
/// A provider was available but its API server did not come up or did not answer.
pub fn counterpart() -> Result<Selection, Error> {
    let env = FromEnv;
    let local = local();
    #[cfg(feature = "containers")]
    {
        let container = crate::container::K3sContainer { tag: None };
        select(&[&env as &dyn Provider, &container, &local])
    }
    #[cfg(not(feature = "containers"))]
    {
        let container = crate::kafka::NoContainers;
        select(&[&env as &dyn Provider, &container, &local])
    }
}

/// The first provider: [`KUBECONFIG_ENV`], else [`APISERVER_ENV`] with [`TOKEN_ENV`].
struct FromEnv;

impl Provider for FromEnv {
    fn name(&self) -> &'static str {
        "env"
    }

    fn start(&self) -> Result<Attempt, Error> {
        let set = |var: &str| std::env::var(var).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let failed = |reason: String| Error::Start { provider: "env", reason, logs: None };
        let (path, source) = if let Some(path) = set(KUBECONFIG_ENV) {
            if !Path::new(&path).is_file() {
                return Err(failed(format!("${KUBECONFIG_ENV}={path} is not a file")));
            }
            (path, format!("${KUBECONFIG_ENV}"))
        } else if let Some(server) = set(APISERVER_ENV) {
            let token = set(TOKEN_ENV)
                .ok_or_else(|| failed(format!("${APISERVER_ENV} is set but ${TOKEN_ENV} (a bearer token) is not")))?;
            let dir = crate::local::work_dir();
            std::fs::create_dir_all(&dir)
                .map_err(|source| Error::Io { what: format!("creating {}", dir.display()), source })?;
            let path = dir.join(format!("env-kubeconfig-{}", std::process::id()));
            std::fs::write(&path, kubeconfig(&server, &token, set(CA_ENV).as_deref()))
                .map_err(|source| Error::Io { what: format!("writing {}", path.display()), source })?;
            (path.to_string_lossy().to_string(), format!("${APISERVER_ENV}"))
        } else {
            return Ok(Attempt::Unavailable(format!(
                "neither {KUBECONFIG_ENV} nor {APISERVER_ENV} is set (set {KUBECONFIG_ENV} to a kubeconfig of a \
                 cluster the suite may write to)"
            )));
        };
        answers(&path, ANSWER_TIMEOUT).map_err(|e| failed(format!("{source}: {e}")))?;
        let describe = format!("kube-apiserver, external, kubeconfig {path} from {source}");
        Ok(Attempt::Ready(Box::new(ExternalServer::new(path, describe))))
    }
}

/// A kubeconfig for `server` with a bearer `token`; `ca` is the CA file, `None` skips TLS
/// verification.
pub fn kubeconfig(server: &str, token: &str, ca: Option<&str>) -> String {
    let trust = match ca {
        Some(ca) => format!("certificate-authority: {ca}"),
        None => "insecure-skip-tls-verify: true".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fidelity\n  cluster:\n    server: {server}\n    {trust}\n\
         users:\n- name: fidelity\n  user:\n    token: {token}\ncontexts:\n- name: fidelity\n  context:\n    \
         cluster: fidelity\n    user: fidelity\ncurrent-context: fidelity\n"
    )
}

/// A kube-rs client for `address`: an `http://` or `https://` URL (kubesim: no credentials) or
/// the path of a kubeconfig (its current context).
///
/// # Errors
/// The kubeconfig cannot be read or names no usable context, or the client cannot be built.
pub async fn client(address: &str) -> Result<kube::Client, String> {
    let config = config(address).await?;
    kube::Client::try_from(config).map_err(|e| format!("building a client for {address}: {e}"))
}

/// The client configuration [`client`] builds for `address` (a URL or a kubeconfig path), for a
/// scenario that needs another setting (kube-rs's default retries off, say).
///
/// # Errors
/// One line: an unparsable URL, or a kubeconfig that cannot be read or used.
pub async fn config(address: &str) -> Result<kube::Config, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if address.starts_with("http://") || address.starts_with("https://") {
        let url = address.parse().map_err(|e| format!("{address} is not a URL: {e}"))?;
        return Ok(kube::Config::new(url));
    }
    let kubeconfig =
        kube::config::Kubeconfig::read_from(address).map_err(|e| format!("reading kubeconfig {address}: {e}"))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| format!("kubeconfig {address}: {e}"))
}

/// Whether the API server at `address` (see [`client`]) answers `GET /version` within `timeout`.
///
/// # Errors
/// One line: the client could not be built, the request failed, or nothing answered in time.
pub fn answers(address: &str, timeout: Duration) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let probe = async {
            let client = client(address).await?;
            client.apiserver_version().await.map(|_| ()).map_err(|e| format!("GET /version: {e}"))
        };
        tokio::time::timeout(timeout, probe)
            .await
            .unwrap_or_else(|_| Err(format!("the API server did not answer GET /version within {timeout:?}")))
    })
}

/// Where etcd behind a local counterpart answers (`DIR/etcd-url` beside its kubeconfig), for
/// forcing a compaction; `None` for servers this process did not start.
pub fn etcd_url(kubeconfig: &str) -> Option<String> {
    let dir = Path::new(kubeconfig).parent()?;
    let url = std::fs::read_to_string(dir.join("etcd-url")).ok()?;
    Some(url.trim().to_string()).filter(|u| !u.is_empty())
}

/// The kubesim side: a fresh loopback server (see [`kubesim::server::ApiServer::start_local`]).
///
/// # Errors
/// Binding a port or starting its thread.
pub fn start_kubesim() -> std::io::Result<kubesim::server::LocalApiServer> {
    kubesim::server::ApiServer::new().start_local()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubesim_answers_and_a_closed_port_does_not() {
        let server = start_kubesim().expect("kubesim on loopback");
        assert_eq!(answers(server.url(), ANSWER_TIMEOUT), Ok(()));
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = closed.local_addr().expect("addr");
        drop(closed);
        let err = answers(&format!("http://{addr}"), ANSWER_TIMEOUT).expect_err("nothing listens");
        assert!(err.contains("GET /version"), "{err}");
    }

    #[test]
    fn a_written_kubeconfig_reads_back_with_its_server_and_token() {
        let dir = std::env::temp_dir().join(format!("fidelity-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("kubeconfig");
        std::fs::write(&path, kubeconfig("https://127.0.0.1:6443", "t0k3n", None)).expect("write");
        let k = kube::config::Kubeconfig::read_from(&path).expect("parses");
        let cluster = k.clusters[0].cluster.as_ref().expect("a cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
        let user = k.auth_infos[0].auth_info.as_ref().expect("a user");
        assert!(user.token.is_some());
        let _ = std::fs::remove_dir_all(dir);
    }
}
