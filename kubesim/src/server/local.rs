//! The loopback mode: the server on a real `127.0.0.1` socket, on its own tokio runtime thread,
//! for clients that bring their own threads and for the differential suite. Real time: nothing
//! here replays from a seed.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::api::ApiServer;
use super::serve::serve_connection;

/// A server on loopback; dropping it stops the runtime and closes every socket.
#[derive(Debug)]
pub struct LocalApiServer {
    api: ApiServer,
    url: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LocalApiServer {
    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server, for faults and introspection.
    pub fn api(&self) -> &ApiServer {
        &self.api
    }
}

impl Drop for LocalApiServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl ApiServer {
    /// Serves on `127.0.0.1` on an ephemeral port, on a fresh `current_thread` runtime in its own
    /// thread. Returns once the listener accepts.
    ///
    /// # Errors
    /// Binding the port, or starting the runtime thread.
    pub fn start_local(self) -> io::Result<LocalApiServer> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let url = format!("http://{}", std_listener.local_addr()?);
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let api = self.clone();
        let thread = std::thread::Builder::new().name("kubesim-local".to_string()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let accept = async {
                    while let Ok((stream, _)) = listener.accept().await {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(serve_connection(api.clone(), stream));
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = shutdown_rx => {}
                }
            });
        })?;
        ready_rx.recv().map_err(|_| io::Error::other("the kubesim runtime thread stopped before it was ready"))??;
        Ok(LocalApiServer { api: self, url, shutdown: Some(shutdown_tx), thread: Some(thread) })
    }
}
