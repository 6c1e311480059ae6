//! A node's view of the network: listen, dial, resolve.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::state::{
    self, Conn, Core, Dial, DialId, DialState, End, ListenerState, NameKind, Pipe, SegKind, errno, os_error,
};
use super::{Network, TcpListener, TcpStream, control};
use crate::Event;

/// Options for one dial.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DialOptions {
    /// SYN retries before `ETIMEDOUT` (Linux `TCP_SYNCNT`); `None` uses the network's.
    pub syn_retries: Option<u32>,
}

/// A host on the simulated network: a name, an address, and the only way node code reaches the
/// network. Cheap to clone.
#[derive(Clone)]
pub struct Host {
    net: Network,
    name: String,
    addr: IpAddr,
    /// The incarnation this handle belongs to (`None`: whatever is current).
    incarnation: Option<u64>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("name", &self.name).field("addr", &self.addr).finish()
    }
}

/// Parses a listen address: a port (`8080`), `:8080`, `0.0.0.0:8080`, or this host's own
/// `ip:port`.
fn listen_port(host_addr: IpAddr, text: &str) -> io::Result<u16> {
    let t = text.trim();
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid listen address {text:?}: expected a port, :port or ip:port"),
        )
    };
    if let Ok(port) = t.trim_start_matches(':').parse::<u16>() {
        return Ok(port);
    }
    let addr: SocketAddr = t.parse().map_err(|_| invalid())?;
    if addr.ip().is_unspecified() || addr.ip() == host_addr {
        Ok(addr.port())
    } else {
        // bind(2) to an address the host does not have.
        Err(os_error(errno::EADDRNOTAVAIL))
    }
}

impl Host {
    pub(crate) fn new(net: Network, name: String, addr: IpAddr, incarnation: Option<u64>) -> Host {
        Host { net, name, addr, incarnation }
    }

    /// The incarnation this handle belongs to, if it is a node's.
    pub fn incarnation(&self) -> Option<u64> {
        self.incarnation
    }

    /// Refuses an operation from a handle whose incarnation has ended (a crashed or exited
    /// process): `ENETDOWN`, counted as a stale operation.
    fn check_live(&self, st: &mut state::State) -> io::Result<u64> {
        let current = st.hosts.get(&self.name).map_or(0, |h| h.incarnation);
        match self.incarnation {
            Some(mine) if mine != current || st.ended.contains(&(self.name.clone(), mine)) => {
                st.stale_ops += 1;
                Err(os_error(errno::ENETDOWN))
            }
            _ => Ok(current),
        }
    }

    /// The host's name (what other hosts dial).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host's address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The network the host is on.
    pub fn network(&self) -> &Network {
        &self.net
    }

    /// Listens on `addr` (a port, `:port`, `0.0.0.0:port` or this host's `ip:port`) with the
    /// network's default backlog (1024, tokio's).
    ///
    /// # Errors
    /// `EADDRINUSE` when a listener already has the address; `EADDRNOTAVAIL` for another host's
    /// address; `InvalidInput` for an address that does not parse.
    pub fn listen(&self, addr: &str) -> io::Result<TcpListener> {
        let backlog = self.net.core.lock().config.backlog;
        self.listen_with_backlog(addr, backlog)
    }

    /// Listens with an explicit backlog: the accept queue holds `backlog + 1` connections (Linux).
    ///
    /// # Errors
    /// As [`Host::listen`].
    pub fn listen_with_backlog(&self, addr: &str, backlog: usize) -> io::Result<TcpListener> {
        let port = listen_port(self.addr, addr)?;
        let sock = SocketAddr::new(self.addr, port);
        let mut st = self.net.core.lock();
        let incarnation = self.check_live(&mut st)?;
        if st.listening.contains_key(&sock) {
            return Err(os_error(errno::EADDRINUSE));
        }
        let id = st.next_id();
        st.listeners.insert(
            id,
            ListenerState { host: self.name.clone(), incarnation, backlog, queue: Default::default(), waker: None },
        );
        st.listening.insert(sock, id);
        drop(st);
        self.net.core.record("net.listen", &self.name, sock.to_string());
        Ok(TcpListener::new(self.net.clone(), id, sock))
    }

    /// Resolves a name (see [`Network::resolve`]).
    ///
    /// # Errors
    /// As [`Network::resolve`].
    pub fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        self.net.resolve(name)
    }

    /// Dials `target` — `name:port` or `ip:port` — like `tokio::net::TcpStream::connect`. A
    /// ClusterIP name goes to one backend chosen by the seed; a headless name to its first
    /// address. The handshake takes a round trip on the links.
    ///
    /// # Errors
    /// `InvalidInput` for a target without a port; a lookup error for an unknown name;
    /// `ECONNREFUSED` when nothing listens (or a [`super::RefuseDials`] control); `ETIMEDOUT`
    /// after the SYN retries when nothing answers (a full accept queue, a silent host, a
    /// [`super::BlackholeDials`] control).
    pub async fn dial(&self, target: &str) -> io::Result<TcpStream> {
        self.dial_with(target, DialOptions::default()).await
    }

    /// Dials with options (see [`Host::dial`]).
    ///
    /// # Errors
    /// As [`Host::dial`].
    pub async fn dial_with(&self, target: &str, options: DialOptions) -> io::Result<TcpStream> {
        let (name, port) = split_target(target)?;
        let (addr, server_host) = self.route(&name, port)?;
        self.connect(target, &name, addr, server_host, options).await
    }

    /// Dials an address directly.
    ///
    /// # Errors
    /// As [`Host::dial`].
    pub async fn dial_addr(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let target = addr.to_string();
        let (addr, server_host) = self.route(&addr.ip().to_string(), addr.port())?;
        self.connect(&target, &target, addr, server_host, DialOptions::default()).await
    }

    /// Picks the destination of a new connection to `name:port`: `(address, host name)`.
    fn route(&self, name: &str, port: u16) -> io::Result<(SocketAddr, Option<String>)> {
        let mut st = self.net.core.lock();
        let kind = match name.parse::<IpAddr>() {
            Ok(ip) => match st.by_addr.get(&ip).cloned() {
                Some(n) => st.names.get(&n).cloned().map(|k| (n, k)),
                None => None,
            },
            Err(_) => st.names.get(name).cloned().map(|k| (name.to_string(), k)),
        };
        match kind {
            Some((_, NameKind::Host(ip))) => {
                let host = st.by_addr.get(&ip).cloned();
                Ok((SocketAddr::new(ip, port), host))
            }
            Some((svc, NameKind::ClusterIp { backends, .. })) => {
                let live: Vec<String> = backends.into_iter().filter(|b| st.hosts.contains_key(b)).collect();
                if live.is_empty() {
                    // kube-proxy with no endpoints rejects the connection.
                    return Err(os_error(errno::ECONNREFUSED));
                }
                let source = st
                    .routes
                    .entry(svc.clone())
                    .or_insert_with(|| self.net.core.tree.source(&format!("net/route/{svc}")));
                let pick = source.below(live.len() as u64) as usize;
                let host = live[pick].clone();
                let ip = st.hosts.get(&host).map(|h| h.addr).ok_or_else(|| os_error(errno::ECONNREFUSED))?;
                Ok((SocketAddr::new(ip, port), Some(host)))
            }
            Some((_, NameKind::Headless { backends })) => {
                let first = backends.iter().find_map(|b| st.hosts.get(b).map(|h| (h.addr, b.clone())));
                match first {
                    Some((ip, host)) => Ok((SocketAddr::new(ip, port), Some(host))),
                    None => Err(io::Error::other("failed to lookup address information: Name or service not known")),
                }
            }
            None if name.parse::<IpAddr>().is_ok() => {
                // An address no host has: nothing answers.
                Ok((SocketAddr::new(name.parse().expect("checked"), port), None))
            }
            None => Err(io::Error::other("failed to lookup address information: Name or service not known")),
        }
    }

    async fn connect(
        &self,
        target: &str,
        name: &str,
        addr: SocketAddr,
        server_host: Option<String>,
        options: DialOptions,
    ) -> io::Result<TcpStream> {
        let core = Arc::clone(&self.net.core);
        let dial_id = {
            let mut st = core.lock();
            let incarnation = self.check_live(&mut st)?;
            if st.host_mode(&self.name) == state::HostMode::Silent {
                return Err(os_error(errno::ENETUNREACH));
            }
            let names =
                vec![target.to_string(), name.to_string(), addr.to_string(), server_host.clone().unwrap_or_default()];
            let verdict = control::dial_verdict(&st, &names);
            let port = st.alloc_port(&self.name)?;
            let conn_id = st.next_id();
            let local = SocketAddr::new(self.addr, port);
            let syn_retries = options.syn_retries.unwrap_or(st.config.syn_retries);
            let server_name = server_host.clone().unwrap_or_else(|| format!("({})", addr.ip()));
            let links = [st.link(&self.name, &server_name), st.link(&server_name, &self.name)];
            st.conns.insert(
                conn_id,
                Conn {
                    id: conn_id,
                    addrs: [local, addr],
                    hosts: [self.name.clone(), server_name],
                    pipes: [Pipe::default(), Pipe::default()],
                    ends: [End { handles: 1, ..End::default() }, End::default()],
                    established: false,
                    silent: false,
                    send_bound: [links[0].send_buffer, links[1].send_buffer],
                    links,
                    labels: state::conn_labels(conn_id, &[local, addr]),
                    incarnations: [incarnation, 0],
                },
            );
            let dial_id = st.next_id();
            st.dials.insert(
                dial_id,
                Dial { state: DialState::Pending { waker: None }, conn: conn_id, attempts: 0, syn_retries },
            );
            drop(st);
            core.record("net.dial", &self.name, format!("conn#{conn_id} {local} -> {target} ({addr})"));
            match verdict {
                Some(true) => finish_dial(&core, dial_id, Err(os_error(errno::ECONNREFUSED))),
                _ => send_syn(&core, dial_id, verdict == Some(false)),
            }
            dial_id
        };
        let conn = DialFuture { core: Arc::clone(&core), dial: dial_id }.await?;
        let info = core.lock().conns.get(&conn).map(|c| c.info());
        if let Some(info) = info {
            self.net.run_established_hooks(&info);
        }
        Ok(TcpStream::new(self.net.clone(), conn, 0))
    }
}

fn split_target(target: &str) -> io::Result<(String, u16)> {
    if let Ok(addr) = target.parse::<SocketAddr>() {
        return Ok((addr.ip().to_string(), addr.port()));
    }
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid socket address {target:?}: expected name:port or ip:port"),
        )
    };
    let (name, port) = target.rsplit_once(':').ok_or_else(invalid)?;
    let port: u16 = port.parse().map_err(|_| invalid())?;
    if name.is_empty() {
        return Err(invalid());
    }
    Ok((name.to_string(), port))
}

/// Linux's SYN retransmission schedule: 1 s, then doubling (1, 3, 7, 15, … seconds after the
/// first SYN); the dial fails when the last retry's timeout runs out.
fn syn_backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.min(16))
}

/// Sends (or re-sends) the SYN of a dial.
fn send_syn(core: &Arc<Core>, dial: DialId, blackholed: bool) {
    let mut st = core.lock();
    let Some(d) = st.dials.get_mut(&dial) else {
        return;
    };
    if !matches!(d.state, DialState::Pending { .. }) {
        return;
    }
    let attempt = d.attempts;
    d.attempts += 1;
    let (conn, retries) = (d.conn, d.syn_retries);
    let Some(c) = st.conns.get(&conn) else { return };
    let (client, server) = (c.hosts[0].clone(), c.hosts[1].clone());
    let latency = st.link(&client, &server).latency;
    let core2 = Arc::clone(core);
    if !blackholed {
        let label = format!("conn#{conn} SYN#{attempt}");
        core.driver.after(latency, Event::new("net.syn", label).action(move || syn_arrives(&core2, dial)));
    }
    // The retransmission timer (or the final timeout) runs whatever happens to this SYN.
    let core3 = Arc::clone(core);
    let wait = syn_backoff(attempt);
    let label = if attempt < retries {
        format!("conn#{conn} SYN retry {}", attempt + 1)
    } else {
        format!("conn#{conn} SYN timeout")
    };
    core.driver.after(
        wait,
        Event::new("net.syn.timer", label).action(move || {
            let pending = core3.lock().dials.get(&dial).is_some_and(|d| matches!(d.state, DialState::Pending { .. }));
            if !pending {
                return;
            }
            if attempt < retries {
                send_syn(&core3, dial, blackholed);
            } else {
                finish_dial(&core3, dial, Err(os_error(errno::ETIMEDOUT)));
            }
        }),
    );
}

/// A SYN reaches the server side.
fn syn_arrives(core: &Arc<Core>, dial: DialId) {
    let mut st = core.lock();
    let Some(d) = st.dials.get(&dial) else { return };
    if !matches!(d.state, DialState::Pending { .. }) {
        return;
    }
    let conn = d.conn;
    let Some(c) = st.conns.get(&conn) else { return };
    let (client, server, server_addr) = (c.hosts[0].clone(), c.hosts[1].clone(), c.addrs[1]);
    if control::link_clogged(&st, &client, &server)
        || st.host_mode(&server) == state::HostMode::Silent
        || !st.hosts.contains_key(&server)
    {
        return; // lost: the retransmission timer will try again
    }
    let latency_back = st.link(&server, &client).latency;
    let listener = st.listening.get(&server_addr).copied();
    let core2 = Arc::clone(core);
    match listener {
        None => {
            drop(st);
            core.driver.after(
                latency_back,
                Event::new("net.rst", format!("conn#{conn}"))
                    .detail("connection refused")
                    .action(move || finish_dial(&core2, dial, Err(os_error(errno::ECONNREFUSED)))),
            );
        }
        Some(lid) => {
            let Some(l) = st.listeners.get(&lid) else {
                return;
            };
            if l.queue.len() > l.backlog {
                return; // accept queue full (backlog + 1): the SYN is dropped silently
            }
            if l.queue.contains(&conn) {
                return; // a retransmitted SYN for a connection already queued
            }
            let l = st.listeners.get_mut(&lid).expect("listener exists");
            l.queue.push_back(conn);
            if let Some(w) = l.waker.take() {
                w.wake();
            }
            let server_incarnation = st.listeners.get(&lid).map_or(0, |l| l.incarnation);
            if let Some(c) = st.conns.get_mut(&conn) {
                c.ends[1].handles = 0;
                c.incarnations[1] = server_incarnation;
            }
            drop(st);
            core.driver.after(
                latency_back,
                Event::new("net.synack", format!("conn#{conn}")).action(move || {
                    let established = {
                        let mut st = core2.lock();
                        let pending = st.dials.get(&dial).is_some_and(|d| matches!(d.state, DialState::Pending { .. }));
                        if pending && let Some(c) = st.conns.get_mut(&conn) {
                            c.established = true;
                        }
                        pending
                    };
                    if established {
                        finish_dial(&core2, dial, Ok(conn));
                    } else {
                        // The dialer gave up: its SYN-ACK meets a closed port and the server end is reset.
                        let mut st = core2.lock();
                        state::send_segment(&core2, &mut st, conn, 0, SegKind::Rst);
                    }
                }),
            );
        }
    }
}

fn finish_dial(core: &Arc<Core>, dial: DialId, result: io::Result<u64>) {
    let mut st = core.lock();
    let Some(d) = st.dials.get_mut(&dial) else {
        return;
    };
    let conn = d.conn;
    let waker = match std::mem::replace(&mut d.state, DialState::Abandoned) {
        DialState::Pending { waker } => waker,
        other => {
            d.state = other;
            return;
        }
    };
    let ok = result.is_ok();
    let detail = match &result {
        Ok(_) => "connected".to_string(),
        Err(e) => e.to_string(),
    };
    d.state = DialState::Done(result);
    if !ok {
        if let Some(c) = st.conns.get_mut(&conn) {
            c.ends[0].closed = true;
            c.ends[0].handles = 0;
        }
        st.conns.remove(&conn);
    }
    drop(st);
    core.record("net.dial.done", &format!("conn#{conn}"), detail);
    if let Some(w) = waker {
        w.wake();
    }
}

struct DialFuture {
    core: Arc<Core>,
    dial: DialId,
}

impl Future for DialFuture {
    type Output = io::Result<u64>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.core.lock();
        let Some(d) = st.dials.get_mut(&self.dial) else {
            return Poll::Ready(Err(os_error(errno::ENOTCONN)));
        };
        match &mut d.state {
            DialState::Pending { waker } => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            DialState::Done(_) => {
                let d = st.dials.remove(&self.dial).expect("present");
                match d.state {
                    DialState::Done(r) => Poll::Ready(r),
                    _ => unreachable!("checked Done"),
                }
            }
            DialState::Abandoned => Poll::Ready(Err(os_error(errno::ENOTCONN))),
        }
    }
}

impl Drop for DialFuture {
    fn drop(&mut self) {
        let mut st = self.core.lock();
        if let Some(d) = st.dials.remove(&self.dial) {
            let conn = d.conn;
            if matches!(d.state, DialState::Pending { .. }) {
                // Abandoned mid-handshake: the client socket is closed. A later SYN-ACK meets a
                // closed port (see syn_arrives); a connection never queued is simply forgotten.
                let queued = st.listeners.values().any(|l| l.queue.contains(&conn));
                if let Some(c) = st.conns.get_mut(&conn) {
                    c.ends[0].closed = true;
                    c.ends[0].handles = 0;
                    if queued {
                        c.ends[0].reset = true;
                    }
                }
                if !queued {
                    st.conns.remove(&conn);
                }
            }
        }
    }
}
