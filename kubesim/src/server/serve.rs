//! Serving on the simulated network, and one connection's HTTP/1.1 loop (shared with the
//! loopback mode).

use std::convert::Infallible;
use std::io;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::api::ApiServer;

impl ApiServer {
    /// Serves on the run's simulated network: host [`ApiServer::host`] listens on its port, and
    /// the server records into the run's history and draws its randomness (uids, `generateName`
    /// suffixes) from the run's seed (stream `kubesim/<host>`). Returns the URL
    /// (`http://kube-apiserver:6443`).
    ///
    /// # Errors
    /// The listen error of the host (`EADDRINUSE` if something listens there already).
    pub fn serve_sim(&self, ctx: &sim::Ctx) -> io::Result<String> {
        self.set_ctx(ctx);
        let host = ctx.net().host(&self.inner.host);
        let port = self.inner.port.to_string();
        let first = host.listen(&port)?;
        let api = self.clone();
        tokio::spawn(async move {
            let mut restarts = api.inner.restarts.subscribe();
            let mut listener = Some(first);
            loop {
                let l = match listener.take() {
                    Some(l) => l,
                    None => {
                        let until = api.inner.down.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or_default();
                        let wait = until.saturating_sub(api.elapsed());
                        tokio::time::sleep(wait).await;
                        match host.listen(&port) {
                            Ok(l) => l,
                            Err(e) => {
                                api.record("kube.listen", &api.inner.host, e.to_string());
                                return;
                            }
                        }
                    }
                };
                loop {
                    tokio::select! {
                        biased;
                        _ = restarts.changed() => break,
                        accepted = l.accept() => match accepted {
                            Ok((stream, _)) => {
                                tokio::spawn(serve_connection(api.clone(), stream));
                            }
                            Err(e) => {
                                api.record("kube.listen", &api.inner.host, e.to_string());
                                return;
                            }
                        },
                    }
                }
                // Down: the listener closes, connections are refused until it listens again.
                drop(l);
            }
        });
        Ok(self.url())
    }
}

/// One connection: HTTP/1.1 with keep-alive until the client closes it or the server restarts
/// (then the connection is dropped: requests in flight and watches end without an answer).
pub(crate) async fn serve_connection<IO>(api: ApiServer, io: IO)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut restarts = api.inner.restarts.subscribe();
    let service = hyper::service::service_fn(move |req| {
        let api = api.clone();
        async move { Ok::<_, Infallible>(crate::http::handle(api, req).await) }
    });
    let conn =
        hyper::server::conn::http1::Builder::new().timer(TokioTimer::new()).serve_connection(TokioIo::new(io), service);
    tokio::select! {
        _ = conn => {}
        _ = restarts.changed() => {}
    }
}
