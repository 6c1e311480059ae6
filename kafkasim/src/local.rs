//! The loopback mode: the cluster on real `127.0.0.1` sockets, on its own tokio runtime thread,
//! for clients that bring their own threads (rdkafka/librdkafka).
//!
//! Such tests run in real time and are statistical, like any real-network test: nothing here
//! replays from a seed. Time-based behaviour (session timeouts, fetch max wait, rebalance
//! timeouts) follows the wall clock.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::broker::{Cluster, ClusterBuilder};

/// A cluster serving on loopback; dropping it stops the runtime and closes every socket.
#[derive(Debug)]
pub struct LocalBroker {
    cluster: Cluster,
    bootstrap: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Entry points for the common case: one broker.
#[derive(Debug)]
pub struct Broker;

impl Broker {
    /// One broker with Kafka's defaults except `group.initial.rebalance.delay.ms = 0`, on
    /// loopback.
    ///
    /// # Errors
    /// Binding a loopback port, or starting the runtime thread.
    pub fn start_local() -> io::Result<LocalBroker> {
        Cluster::builder().initial_rebalance_delay(std::time::Duration::ZERO).build().start_local()
    }

    /// A cluster from `builder`, on loopback.
    ///
    /// # Errors
    /// As [`Broker::start_local`].
    pub fn start_local_with(builder: ClusterBuilder) -> io::Result<LocalBroker> {
        builder.build().start_local()
    }
}

impl Cluster {
    /// Serves the cluster on `127.0.0.1`, one ephemeral port per broker, on a fresh
    /// `current_thread` runtime in its own thread. Returns once every listener accepts.
    ///
    /// # Errors
    /// Binding a loopback port, or starting the runtime thread.
    pub fn start_local(self) -> io::Result<LocalBroker> {
        let mut listeners = Vec::new();
        for id in self.broker_ids() {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.set_nonblocking(true)?;
            self.set_advertised(id, "127.0.0.1", l.local_addr()?.port());
            listeners.push((id, l));
        }
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let cluster = self.clone();
        let thread = std::thread::Builder::new().name("kafkasim-local".to_string()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                for (id, std_listener) in listeners {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    tokio::spawn(accept_loop(cluster.clone(), id, listener));
                }
                let _ = ready_tx.send(Ok(()));
                let _ = shutdown_rx.await;
            });
        })?;
        ready_rx.recv().map_err(|_| io::Error::other("the kafkasim runtime thread stopped before it was ready"))??;
        let bootstrap = self.bootstrap_servers();
        Ok(LocalBroker { cluster: self, bootstrap, shutdown: Some(shutdown_tx), thread: Some(thread) })
    }
}

/// Accepts while the broker is up; when it goes down the listener closes, and when it comes
/// back the same port is bound again.
async fn accept_loop(cluster: Cluster, id: i32, first: tokio::net::TcpListener) {
    let Ok(addr) = first.local_addr() else { return };
    let mut up = cluster.inner_up(id);
    let mut listener = Some(first);
    loop {
        let Some(l) = listener.take() else {
            if up.wait_for(|u| *u).await.is_err() {
                return;
            }
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => listener = Some(l),
                Err(_) => return,
            }
            continue;
        };
        loop {
            tokio::select! {
                biased;
                _ = up.wait_for(|u| !*u) => break,
                accepted = l.accept() => match accepted {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        let c = cluster.clone();
                        tokio::spawn(async move { c.serve_connection(id, stream).await });
                    }
                    Err(_) => break,
                },
            }
        }
        drop(l);
        if up.wait_for(|u| !*u).await.is_err() {
            return;
        }
    }
}

impl LocalBroker {
    /// `127.0.0.1:port` of each broker, comma-separated: rdkafka's `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    /// The cluster, for faults, controls and introspection.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for LocalBroker {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
