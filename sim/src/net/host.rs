//! A node's view of the network: listen, dial, resolve.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::config::LOOKUP_FAILED;
use super::fabric;
use super::kernel::{
    self, Conn, Dial, DialId, DialState, End, HostMode, ListenKey, ListenerState, NameKind, Pipe, SegKind, errno,
    os_error,
};
use super::network::Network;
use super::rules;
use super::state::{self, Core};
use super::tcp::{TcpListener, TcpStream};
use crate::driver::Event;

/// Hosts and their incarnations, as the network hands them out.
impl Network {
    /// The host named `name`, created on first use with the next address in 10.0.0.0/16. Its
    /// name resolves to its address.
    ///
    /// # Panics
    /// If `name` is already a service name ([`Network::cluster_ip`], [`Network::headless`]).
    pub fn host(&self, name: &str) -> Host {
        let addr = self.core.lock().host_addr(name);
        Host::new(self.clone(), name.to_string(), addr, None)
    }

    /// Starts a new incarnation of a host — a process starting on it — and returns a handle bound
    /// to it. The host is up (a silent host answers again). Once the incarnation ends
    /// ([`Network::end_incarnation`]), every operation through this handle fails `ENETDOWN`.
    pub fn start_incarnation(&self, name: &str) -> Host {
        let mut st = self.core.lock();
        let addr = st.host_addr(name);
        st.set_host_mode(name, HostMode::Up);
        let host = st.hosts.get_mut(name).expect("the host was just made");
        host.incarnation += 1;
        let incarnation = host.incarnation;
        drop(st);
        self.core.record("net.incarnation", name, incarnation.to_string());
        Host::new(self.clone(), name.to_string(), addr, Some(incarnation))
    }
}

/// Where a dial goes: the address connected to, its host, and what the dialer sees as its peer.
struct Route {
    to: SocketAddr,
    host: Option<String>,
    dialed: SocketAddr,
    /// The dialer's own address when it is not the host's (a loopback dial: `127.0.0.1`, `::1`).
    local: Option<IpAddr>,
    /// An IPv6 socket carrying IPv4 (a v4-mapped target): its addresses show v4-mapped.
    mapped: bool,
}

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

/// Where a listen address binds (see [`Host::listen`]).
struct Bind {
    port: u16,
    /// An IPv6 socket.
    v6: bool,
    /// `[::]`: IPv6 and IPv4 (dual stack).
    dual: bool,
    /// An IPv6 socket that carries IPv4 (`[::]` or `[::ffff:a.b.c.d]`).
    maps_v4: bool,
    /// The address the listener reports; `None`: the host's own address.
    shown: Option<IpAddr>,
}

/// Parses a listen address: a port (`8080`), `:8080`, `0.0.0.0:8080`, this host's own `ip:port`,
/// a loopback `127.x.y.z:port`, `[::1]:port`, `[::]:port` (dual stack) or a v4-mapped
/// `[::ffff:a.b.c.d]:port` of one of those IPv4 addresses.
fn parse_bind(host_addr: IpAddr, text: &str) -> io::Result<Bind> {
    // (Port 0 asks for an ephemeral port: see `listen_with_backlog`.)
    let t = text.trim();
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid listen address {text:?}: expected a port, :port or ip:port"),
        )
    };
    let v4 = |port| Bind { port, v6: false, dual: false, maps_v4: false, shown: None };
    if let Ok(port) = t.trim_start_matches(':').parse::<u16>() {
        return Ok(v4(port));
    }
    let addr: SocketAddr = t.parse().map_err(|_| invalid())?;
    let port = addr.port();
    match addr.ip() {
        // The host's address and the wildcard: the listener reports the host's address (what
        // other hosts dial). Loopback addresses are this host too, reported as bound (the model
        // has one interface per host: a listener there also answers the host's address).
        IpAddr::V4(ip) if ip.is_unspecified() || IpAddr::V4(ip) == host_addr => Ok(v4(port)),
        IpAddr::V4(ip) if ip.is_loopback() => Ok(Bind { shown: Some(IpAddr::V4(ip)), ..v4(port) }),
        IpAddr::V6(ip) if ip.is_loopback() => {
            Ok(Bind { port, v6: true, dual: false, maps_v4: false, shown: Some(IpAddr::V6(ip)) })
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            Ok(Bind { port, v6: true, dual: true, maps_v4: true, shown: Some(IpAddr::V6(ip)) })
        }
        IpAddr::V6(ip) if ip.to_ipv4_mapped().is_some() => {
            let inner = ip.to_ipv4_mapped().map(|v4| SocketAddr::new(IpAddr::V4(v4), port)).ok_or_else(invalid)?;
            let bind = parse_bind(host_addr, &inner.to_string())?;
            let shown = kernel::v4_mapped(SocketAddr::new(bind.shown.unwrap_or(host_addr), port)).ip();
            Ok(Bind { maps_v4: true, shown: Some(shown), ..bind })
        }
        // bind(2) to an address the host does not have (hosts have no IPv6 address but `::1`).
        _ => Err(os_error(errno::EADDRNOTAVAIL)),
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

    /// Whether this handle's incarnation still runs (a handle of no node's: always): false once
    /// it crashed or exited, as a client's drop asks before acting as a live process would.
    pub fn is_live(&self) -> bool {
        let st = self.net.core.lock();
        let current = st.hosts.get(&self.name).map_or(0, |h| h.incarnation);
        self.incarnation.is_none_or(|mine| mine == current && !st.ended.contains(&(self.name.clone(), mine)))
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

    /// Listens on `addr` with the network's default backlog (1024, tokio's). `addr` is a port,
    /// `:port`, `0.0.0.0:port` or this host's `ip:port` (the listener reports the host's address,
    /// what other hosts dial); a loopback `127.x.y.z:port` (reported as bound; it also answers the
    /// host's address: one interface per host); `[::1]:port`, the host's IPv6 loopback, a port
    /// space of its own; `[::]:port`, dual stack (IPv6 and IPv4, Linux's `bindv6only = 0`;
    /// connections over IPv4 show v4-mapped addresses); or `[::ffff:a.b.c.d]:port`, an IPv4
    /// address of those through an IPv6 socket. Port 0 picks an ephemeral port. Measured on Linux
    /// 6.x (the conformance suite's `ipv6_loopback_and_dual_stack_listeners_as_linux`).
    ///
    /// # Errors
    /// `EADDRINUSE` when a listener of the same family already has the port (a `[::]` listener
    /// and an IPv4 one conflict either way; `127.0.0.1:P` and `[::1]:P` do not); `EADDRNOTAVAIL`
    /// for an address the host does not have (another host's, any IPv6 address but `::1`, `::`
    /// and v4-mapped ones); `InvalidInput` for an address that does not parse.
    pub fn listen(&self, addr: &str) -> io::Result<TcpListener> {
        let backlog = self.net.core.lock().config.backlog;
        self.listen_with_backlog(addr, backlog)
    }

    /// Listens with an explicit backlog: the accept queue holds `backlog + 1` connections (Linux).
    ///
    /// # Errors
    /// As [`Host::listen`].
    pub fn listen_with_backlog(&self, addr: &str, backlog: usize) -> io::Result<TcpListener> {
        let bind = parse_bind(self.addr, addr)?;
        let mut st = self.net.core.lock();
        let incarnation = self.check_live(&mut st)?;
        let port = if bind.port == 0 { st.alloc_listen_port(&self.name)? } else { bind.port };
        let sock = SocketAddr::new(bind.shown.unwrap_or(self.addr), port);
        let key = ListenKey { host: self.addr, v6: bind.v6, port };
        let other = ListenKey { v6: !bind.v6, ..key };
        // Linux's bind conflicts: one listener per family and port; a dual-stack `[::]` one takes
        // the IPv4 port too (bindv6only = 0), so it conflicts with an IPv4 listener either way.
        let dual_other = st.listening.get(&other).is_some_and(|id| st.listeners.get(id).is_some_and(|l| l.dual));
        if st.listening.contains_key(&key) || (bind.dual && st.listening.contains_key(&other)) || dual_other {
            return Err(os_error(errno::EADDRINUSE));
        }
        let id = st.next_id();
        st.listeners.insert(
            id,
            ListenerState {
                host: self.name.clone(),
                dual: bind.dual,
                maps_v4: bind.maps_v4,
                incarnation,
                backlog,
                queue: Default::default(),
                handshaking: Default::default(),
                waker: None,
            },
        );
        st.listening.insert(key, id);
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
    /// address. The handshake takes a round trip on the links. `localhost`, 127.0.0.0/8,
    /// `0.0.0.0`, `[::1]` and `[::]` are this host (its loopback: the connection's addresses are
    /// loopback ones, as on Linux); `[::ffff:a.b.c.d]` dials `a.b.c.d` through an IPv6 socket.
    ///
    /// # Errors
    /// `InvalidInput` for a target without a port; a lookup error for an unknown name;
    /// `ENETUNREACH` at once for an IPv6 address other than `::1`, `::` and v4-mapped ones (the
    /// network's hosts have IPv4 addresses only);
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
        let route = self.route(&name, port)?;
        self.connect(target, &name, route, options).await
    }

    /// Dials an address directly.
    ///
    /// # Errors
    /// As [`Host::dial`].
    pub async fn dial_addr(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let target = addr.to_string();
        let route = self.route(&addr.ip().to_string(), addr.port())?;
        self.connect(&target, &target, route, DialOptions::default()).await
    }

    /// Picks the destination of a new connection to `name:port`.
    fn route(&self, name: &str, port: u16) -> io::Result<Route> {
        let ip = name.parse::<IpAddr>().ok();
        // A v4-mapped IPv6 address is its IPv4 address, reached through an IPv6 socket (tokio's
        // connect opens an AF_INET6 socket for it): the dialer sees its addresses v4-mapped.
        if let Some(v4) = ip.and_then(|ip| match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped(),
            IpAddr::V4(_) => None,
        }) {
            let route = self.route(&v4.to_string(), port)?;
            return Ok(Route { dialed: kernel::v4_mapped(route.dialed), mapped: true, ..route });
        }
        // Loopback: `localhost`, 127.0.0.0/8 and `::1` are this host, and so is the wildcard
        // address (Linux connects `0.0.0.0` to 127.0.0.1 and `::` to ::1). The dialer's address is
        // the loopback one; IPv4 and IPv6 reach listeners of their own family (or `[::]`).
        let loopback = match ip {
            _ if name == "localhost" => Some(IpAddr::from([127, 0, 0, 1])),
            Some(IpAddr::V4(v4)) if v4.is_unspecified() => Some(IpAddr::from([127, 0, 0, 1])),
            Some(IpAddr::V6(v6)) if v6.is_unspecified() => Some(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)),
            Some(ip) if ip.is_loopback() => Some(ip),
            _ => None,
        };
        if let Some(to_ip) = loopback {
            let local =
                if to_ip.is_ipv4() { IpAddr::from([127, 0, 0, 1]) } else { IpAddr::V6(std::net::Ipv6Addr::LOCALHOST) };
            let to = SocketAddr::new(to_ip, port);
            return Ok(Route { to, host: Some(self.name.clone()), dialed: to, local: Some(local), mapped: false });
        }
        if ip.is_some_and(|ip| ip.is_ipv6()) {
            // Hosts have IPv4 addresses only (and `::1`): no route to any other IPv6 address, as
            // Linux answers connect(2) on a host without an IPv6 route.
            return Err(os_error(errno::ENETUNREACH));
        }
        let mut st = self.net.core.lock();
        let kind = match name.parse::<IpAddr>() {
            Ok(ip) => match st.by_addr.get(&ip).cloned() {
                Some(n) => st.names.get(&n).cloned().map(|k| (n, k)),
                None => None,
            },
            Err(_) => st.names.get(name).cloned().map(|k| (name.to_string(), k)),
        };
        let not_found = || io::Error::other(LOOKUP_FAILED);
        match kind {
            Some((_, NameKind::Host(ip))) => {
                let host = st.by_addr.get(&ip).cloned();
                let to = SocketAddr::new(ip, port);
                Ok(Route { to, host, dialed: to, local: None, mapped: false })
            }
            Some((svc, NameKind::ClusterIp { vip, backends })) => {
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
                let (to, dialed) = (SocketAddr::new(ip, port), SocketAddr::new(vip, port));
                Ok(Route { to, host: Some(host), dialed, local: None, mapped: false })
            }
            Some((_, NameKind::Headless { backends })) => {
                let first = backends.iter().find_map(|b| st.hosts.get(b).map(|h| (h.addr, b.clone())));
                let (ip, host) = first.ok_or_else(not_found)?;
                let to = SocketAddr::new(ip, port);
                Ok(Route { to, host: Some(host), dialed: to, local: None, mapped: false })
            }
            None if name.parse::<IpAddr>().is_ok() => {
                // An address no host has: nothing answers.
                let to = SocketAddr::new(name.parse().expect("checked"), port);
                Ok(Route { to, host: None, dialed: to, local: None, mapped: false })
            }
            None => Err(not_found()),
        }
    }

    async fn connect(&self, target: &str, name: &str, route: Route, options: DialOptions) -> io::Result<TcpStream> {
        let Route { to: addr, host: server_host, dialed, local: local_ip, mapped } = route;
        let core = Arc::clone(&self.net.core);
        let dial_id = {
            let mut st = core.lock();
            let incarnation = self.check_live(&mut st)?;
            if st.host_mode(&self.name) == HostMode::Silent {
                return Err(os_error(errno::ENETUNREACH));
            }
            let names =
                vec![target.to_string(), name.to_string(), addr.to_string(), server_host.clone().unwrap_or_default()];
            let verdict = rules::dial_verdict(&st.view(), &names);
            let port = st.alloc_port(&self.name, addr)?;
            let conn_id = st.next_id();
            let local = SocketAddr::new(local_ip.unwrap_or(self.addr), port);
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
                    labels: kernel::conn_labels(conn_id, &[local, addr]),
                    incarnations: [incarnation, 0],
                    listener: None,
                    dialed,
                    mapped: [mapped, false],
                    exchange: Default::default(),
                },
            );
            let dial_id = st.next_id();
            st.dials.insert(
                dial_id,
                Dial {
                    state: DialState::Pending { waker: None },
                    conn: conn_id,
                    attempts: 0,
                    syn_retries,
                    syn_timer: None,
                },
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
    // The retransmission timer (or the final timeout) runs whatever happens to this SYN, until
    // the dial ends (`finish_dial` and an abandoned dial cancel it).
    let core3 = Arc::clone(core);
    let wait = syn_backoff(attempt);
    let label = if attempt < retries {
        format!("conn#{conn} SYN retry {}", attempt + 1)
    } else {
        format!("conn#{conn} SYN timeout")
    };
    let timer = core.driver.after(
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
    if let Some(d) = st.dials.get_mut(&dial) {
        d.syn_timer = Some(timer);
    }
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
    if rules::link_clogged(&st.view(), &client, &server)
        || st.host_mode(&server) == HostMode::Silent
        || !st.hosts.contains_key(&server)
    {
        return; // lost: the retransmission timer will try again
    }
    let latency_back = st.link(&server, &client).latency;
    let listener = st.find_listener(&server, server_addr);
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
            let already = l.handshaking.contains(&conn);
            // The accept queue holds backlog + 1 connections; a SYN that finds it full (counting
            // handshakes under way, which loopback completes at once) is dropped silently.
            if !already && l.queue.len() + l.handshaking.len() > l.backlog {
                return;
            }
            let server_incarnation = l.incarnation;
            let maps_v4 = l.maps_v4 && server_addr.is_ipv4();
            if let Some(l) = st.listeners.get_mut(&lid) {
                l.handshaking.insert(conn);
            }
            if let Some(c) = st.conns.get_mut(&conn) {
                c.mapped[1] = maps_v4;
                c.ends[1].handles = 0;
                c.incarnations[1] = server_incarnation;
                c.listener = Some(lid);
            }
            drop(st);
            core.driver.after(
                latency_back,
                Event::new("net.synack", format!("conn#{conn}")).action(move || synack_arrives(&core2, dial, conn)),
            );
        }
    }
}

/// The server's SYN-ACK reaches the dialer: the dial completes, and the dialer's ACK (sent on its
/// pipe, ahead of any data) will put the connection in the accept queue.
fn synack_arrives(core: &Arc<Core>, dial: DialId, conn: u64) {
    let mut st = core.lock();
    let Some(c) = st.conns.get(&conn) else { return };
    let (client, server) = (c.hosts[0].clone(), c.hosts[1].clone());
    if rules::link_clogged(&st.view(), &server, &client)
        || st.host_mode(&client) == HostMode::Silent
        || st.host_mode(&server) == HostMode::Silent
    {
        return; // lost: the dialer's SYN retry brings another
    }
    let pending = st.dials.get(&dial).is_some_and(|d| matches!(d.state, DialState::Pending { .. }));
    if !pending {
        // The dialer gave up: the SYN-ACK meets a closed port; the dialer's RST removes the
        // half-open connection from the listener (it never reaches accept).
        if let Some(lid) = st.conns.get(&conn).and_then(|c| c.listener)
            && let Some(l) = st.listeners.get_mut(&lid)
        {
            l.handshaking.remove(&conn);
        }
        st.remove_conn(conn);
        return;
    }
    if let Some(c) = st.conns.get_mut(&conn) {
        c.established = true;
    }
    fabric::send_segment(core, &mut st, conn, 0, SegKind::Ack);
    drop(st);
    finish_dial(core, dial, Ok(conn));
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
    if let Some(timer) = d.syn_timer.take() {
        core.driver.cancel(timer);
    }
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
        st.remove_conn(conn);
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
        let Some(d) = st.dials.remove(&self.dial) else { return };
        if let Some(timer) = d.syn_timer {
            self.core.driver.cancel(timer);
        }
        match d.state {
            // Abandoned mid-handshake: the socket closes in SYN_SENT; the server's half-open
            // connection is discarded by the RST its SYN-ACK meets. Nothing reaches `accept`.
            DialState::Pending { .. } => st.remove_conn(d.conn),
            // Completed but never returned (the future was dropped right after): the socket is
            // closed as dropping a stream closes it.
            DialState::Done(Ok(conn)) => {
                if let Some(c) = st.conns.get_mut(&conn) {
                    c.ends[0].handles = 0;
                }
                fabric::close_end(&self.core, &mut st, conn, 0);
            }
            _ => {}
        }
    }
}
