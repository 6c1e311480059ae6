//! The network's state: every host, name, listener, connection, dial, link and rule of the run,
//! under the network's one mutex ([`Core`]), on the run's thread. Links are drawn here, once per
//! directed pair.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::config::{LinkConfig, NetConfig};
use super::kernel::*;
use super::rules::{Rule, RuleId, View};
use crate::driver::Driver;
use crate::seed::{Source, Tree};

/// Service addresses (`cluster_ip`) a network hands out at most: 10.96.0.1 to 10.96.255.255.
pub const VIPS_MAX: u32 = 65_535;

pub(crate) struct State {
    pub hosts: BTreeMap<String, HostState>,
    pub by_addr: BTreeMap<IpAddr, String>,
    pub names: BTreeMap<String, NameKind>,
    pub listeners: BTreeMap<ListenerId, ListenerState>,
    pub listening: BTreeMap<ListenKey, ListenerId>,
    pub conns: BTreeMap<ConnId, Conn>,
    pub dials: BTreeMap<DialId, Dial>,
    /// Links drawn so far, by source host, then destination host (looked up without allocating).
    pub links: BTreeMap<String, BTreeMap<String, LinkConfig>>,
    pub rules: BTreeMap<RuleId, Rule>,
    pub next_id: u64,
    pub next_host: u32,
    pub next_vip: u32,
    pub config: NetConfig,
    pub tree: Tree,
    pub routes: BTreeMap<String, Source>,
    pub draws: Source,
    /// Operations attempted through a host handle of an ended incarnation (refused).
    pub stale_ops: u64,
    /// Incarnations that ended (host, incarnation).
    pub ended: BTreeSet<(String, u64)>,
    /// Ephemeral ports in use per host: (destination, port).
    pub ports: BTreeMap<String, BTreeSet<(SocketAddr, u16)>>,
    /// Watchers of service endpoints.
    pub endpoint_watches: BTreeMap<String, tokio::sync::watch::Sender<Vec<String>>>,
    /// Incarnations draining after SIGTERM (host, incarnation), with the requests their server
    /// ends left unanswered when they closed (see [`super::exchange`]).
    pub draining: BTreeMap<(String, u64), Vec<String>>,
    /// Hosts whose mode is [`HostMode::Silent`] (kept by [`State::set_host_mode`], so that the
    /// per-segment question "is either end silent" costs nothing when none is).
    pub silent_hosts: usize,
    /// The detail of the delivery being recorded (kept to save an allocation per delivery).
    pub deliver_note: String,
}

/// The shared core of a [`super::network::Network`].
pub(crate) struct Core {
    pub state: Mutex<State>,
    pub driver: Driver,
    pub recorder: Arc<crate::recorder::Recorder>,
    pub tree: Tree,
}

impl Core {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn now(&self) -> Duration {
        self.driver.elapsed()
    }

    /// Records a network event in the run's history at the current fake time.
    pub(crate) fn record(&self, kind: &str, identity: &str, detail: impl AsRef<str>) {
        self.recorder.record_at(self.now(), kind, identity, detail.as_ref());
    }
}

impl State {
    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(crate) fn host_addr(&mut self, name: &str) -> IpAddr {
        if let Some(h) = self.hosts.get(name) {
            return h.addr;
        }
        assert!(!self.names.contains_key(name), "Network::host({name:?}): the name is already a service");
        assert!(self.next_host < HOSTS_MAX, "a network holds at most HOSTS_MAX = {HOSTS_MAX} hosts");
        self.next_host += 1;
        let n = self.next_host;
        let addr = IpAddr::V4(Ipv4Addr::new(10, 0, (n >> 8) as u8, (n & 0xff) as u8));
        self.hosts.insert(
            name.to_string(),
            HostState { addr, mode: HostMode::Up, next_port: *EPHEMERAL.start(), incarnation: 0 },
        );
        self.by_addr.insert(addr, name.to_string());
        self.names.insert(name.to_string(), NameKind::Host(addr));
        addr
    }

    pub(crate) fn new_vip(&mut self) -> IpAddr {
        assert!(
            self.next_vip < VIPS_MAX,
            "a network holds at most VIPS_MAX = {VIPS_MAX} service addresses (10.96.0.0/16)"
        );
        self.next_vip += 1;
        let n = self.next_vip;
        IpAddr::V4(Ipv4Addr::new(10, 96, (n >> 8) as u8, (n & 0xff) as u8))
    }

    /// The link from one host to another, drawn once per directed pair.
    pub(crate) fn link(&mut self, from: &str, to: &str) -> LinkConfig {
        if let Some(l) = self.links.get(from).and_then(|to_map| to_map.get(to)) {
            return *l;
        }
        let link = if from == to {
            LinkConfig { latency: Duration::ZERO, jitter: Duration::ZERO, send_buffer: self.config.send_buffer.1 }
        } else {
            let mut s = self.tree.source(&format!("net/link/{from}->{to}"));
            let latency = s.duration(self.config.latency.0..=self.config.latency.1);
            let jitter = s.duration(Duration::ZERO..=self.config.jitter_max.min(latency));
            let send_buffer = s.range(self.config.send_buffer.0 as u64..=self.config.send_buffer.1 as u64) as usize;
            LinkConfig { latency, jitter, send_buffer }
        };
        self.links.entry(from.to_string()).or_default().insert(to.to_string(), link);
        link
    }

    pub(crate) fn host_mode(&self, name: &str) -> HostMode {
        self.hosts.get(name).map_or(HostMode::Silent, |h| h.mode)
    }

    /// Sets a known host's mode (the one place modes change, so [`State::silent_hosts`] stays
    /// true). Returns whether the host exists.
    pub(crate) fn set_host_mode(&mut self, name: &str, mode: HostMode) -> bool {
        let Some(h) = self.hosts.get_mut(name) else { return false };
        match (h.mode, mode) {
            (HostMode::Up, HostMode::Silent) => self.silent_hosts += 1,
            (HostMode::Silent, HostMode::Up) => {
                self.silent_hosts = self.silent_hosts.checked_sub(1).expect("State::silent_hosts counts silent hosts");
            }
            _ => {}
        }
        h.mode = mode;
        true
    }

    /// What the rules are evaluated against ([`super::rules`]).
    pub(crate) fn view(&self) -> View<'_> {
        View { rules: &self.rules, conns: &self.conns, hosts: &self.hosts, silent_hosts: self.silent_hosts }
    }

    /// An ephemeral port for a connection from `host` to `to`: Linux's `ip_local_port_range`
    /// (32768–60999), unique per destination (the 4-tuple must be), so one destination can use
    /// 28,232 connections and others are unaffected.
    pub(crate) fn alloc_port(&mut self, host: &str, to: SocketAddr) -> io::Result<u16> {
        let used = self.ports.entry(host.to_string()).or_default();
        let h = self.hosts.get_mut(host).ok_or_else(|| os_error(errno::EADDRNOTAVAIL))?;
        for _ in 0..=(EPHEMERAL.end() - EPHEMERAL.start()) {
            let port = h.next_port;
            h.next_port = if h.next_port >= *EPHEMERAL.end() { *EPHEMERAL.start() } else { h.next_port + 1 };
            if !used.contains(&(to, port)) && !used.contains(&(LISTEN_KEY, port)) {
                used.insert((to, port));
                return Ok(port);
            }
        }
        Err(os_error(errno::EADDRNOTAVAIL))
    }

    /// An ephemeral port for a listener (`listen("0")`): one no connection or listener of the
    /// host uses.
    pub(crate) fn alloc_listen_port(&mut self, host: &str) -> io::Result<u16> {
        let used = self.ports.entry(host.to_string()).or_default();
        let taken: BTreeSet<u16> = used.iter().map(|(_, p)| *p).collect();
        let h = self.hosts.get_mut(host).ok_or_else(|| os_error(errno::EADDRNOTAVAIL))?;
        for _ in 0..=(EPHEMERAL.end() - EPHEMERAL.start()) {
            let port = h.next_port;
            h.next_port = if h.next_port >= *EPHEMERAL.end() { *EPHEMERAL.start() } else { h.next_port + 1 };
            let bound = [false, true].map(|v6| ListenKey { host: h.addr, v6, port });
            if !taken.contains(&port) && !bound.iter().any(|k| self.listening.contains_key(k)) {
                used.insert((LISTEN_KEY, port));
                return Ok(port);
            }
        }
        Err(os_error(errno::EADDRNOTAVAIL))
    }

    /// The listener a SYN to `to` on host `host` reaches: one of its address family on that port,
    /// or, for IPv4, a dual-stack `[::]` listener.
    pub(crate) fn find_listener(&self, host: &str, to: SocketAddr) -> Option<ListenerId> {
        let addr = self.hosts.get(host)?.addr;
        let key = |v6| ListenKey { host: addr, v6, port: to.port() };
        if to.is_ipv6() {
            return self.listening.get(&key(true)).copied();
        }
        self.listening.get(&key(false)).copied().or_else(|| {
            self.listening.get(&key(true)).copied().filter(|id| self.listeners.get(id).is_some_and(|l| l.dual))
        })
    }

    /// Forgets a connection and gives its ephemeral port back.
    pub(crate) fn remove_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.free_port(&c.hosts[0], c.addrs[1], c.addrs[0].port());
            if let Some(l) = c.listener.and_then(|lid| self.listeners.get_mut(&lid)) {
                l.handshaking.remove(&conn);
                l.queue.retain(|q| *q != conn);
            }
        }
    }

    /// Gives a connection's ephemeral port back.
    pub(crate) fn free_port(&mut self, host: &str, to: SocketAddr, port: u16) {
        if let Some(used) = self.ports.get_mut(host) {
            used.remove(&(to, port));
        }
    }
}
