//! The run's [`Network`]: hosts' incarnations, names and services, connection hooks, and the
//! controls installed on it (each a [`crate::fault::Fault`] on the network).

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::config::{ConnInfo, Ending, LOOKUP_FAILED, LinkConfig, NetConfig};
use super::fabric;
use super::kernel::{Conn, HostMode, NameKind};
use super::rules::ConnSel;
use super::state::{Core, State};
use crate::fault::{self, Fault, FaultGuard, Phase, Scheduled, Target};

/// The network's controls are faults: installs are recorded as `net.control`, releases as
/// `net.control.release`, scheduled ones run as the harness events `net.control.at` and
/// `net.control.until`.
impl Target for Network {
    fn event(&self, phase: Phase, label: &str) -> crate::driver::Event {
        match phase {
            Phase::Install => crate::driver::Event::new("net.control.at", "network").detail(label),
            Phase::Release => crate::driver::Event::new("net.control.until", "network"),
        }
    }
    fn installed(&self, label: &str) {
        self.core.record("net.control", "network", label);
    }
    fn released(&self, label: &str) {
        self.core.record("net.control.release", "network", label);
    }
}

type EstablishedHook = Arc<dyn Fn(&Network, &ConnInfo) + Send + Sync>;

/// The run's simulated network. Cheap to clone; get it with [`crate::Ctx::net`].
#[derive(Clone)]
pub struct Network {
    pub(crate) core: Arc<Core>,
    hooks: Arc<Mutex<BTreeMap<u64, EstablishedHook>>>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network").finish_non_exhaustive()
    }
}

impl Network {
    /// A network with links drawn from `config` and the seed's streams of `seed`, jitter drawn
    /// from `jitter` (the run's `net/jitter`), deliveries scheduled on `driver` and recorded by
    /// `recorder`. The run's `Ctx::net` makes the run's own network from its parts.
    pub(crate) fn new(
        config: NetConfig,
        seed: crate::seed::Seed,
        jitter: crate::seed::Source,
        driver: crate::driver::Driver,
        recorder: Arc<crate::recorder::Recorder>,
    ) -> Network {
        let config = config.normalized();
        let tree = crate::seed::Tree::new(seed);
        let state = State {
            hosts: BTreeMap::new(),
            by_addr: BTreeMap::new(),
            names: BTreeMap::new(),
            listeners: BTreeMap::new(),
            listening: BTreeMap::new(),
            conns: BTreeMap::new(),
            dials: BTreeMap::new(),
            links: BTreeMap::new(),
            rules: BTreeMap::new(),
            next_id: 0,
            next_host: 1,
            next_vip: 0,
            draws: jitter,
            config,
            tree,
            routes: BTreeMap::new(),
            stale_ops: 0,
            ended: Default::default(),
            ports: BTreeMap::new(),
            endpoint_watches: BTreeMap::new(),
            draining: BTreeMap::new(),
            silent_hosts: 0,
            deliver_note: String::new(),
        };
        Network {
            core: Arc::new(Core { state: Mutex::new(state), driver, recorder, tree: crate::seed::Tree::new(seed) }),
            hooks: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// Starts the drain watch of an incarnation (it was sent SIGTERM): from now on, a server end
    /// of it that closes with a request it read still unanswered is noted (see the
    /// rules of `net/exchange.rs`: HTTP/1.x and HTTP/2 are followed).
    pub(crate) fn watch_drain(&self, name: &str, incarnation: u64) {
        self.core.lock().draining.entry((name.to_string(), incarnation)).or_default();
    }

    /// Ends the drain watch of an incarnation: the requests its server ends left unanswered when
    /// they closed, one line per connection (`conn#7 from client-0 (…): 1 HTTP/1.1 request(s):
    /// PUT /kv/a`).
    pub(crate) fn take_unanswered(&self, name: &str, incarnation: u64) -> Vec<String> {
        self.core.lock().draining.remove(&(name.to_string(), incarnation)).unwrap_or_default()
    }

    /// Ends an incarnation of a host: its process is gone, and with it its sockets.
    ///
    /// - [`Ending::Exit`]: the process exited; the kernel closes each socket as `close(2)` does
    ///   (FIN, or RST when unread data remains) and drops its listeners (queued connections are
    ///   reset).
    /// - [`Ending::Reset`]: every connection of the incarnation is reset (the peer sees RST) and its
    ///   listeners are dropped: a killed process, as the design's crash model has it.
    /// - [`Ending::Vanish`]: the machine is gone: its connections go silent for good and the host
    ///   answers nothing (dials to it time out) until its next incarnation starts.
    ///
    /// Returns how many connections and listeners were fenced.
    pub fn end_incarnation(&self, name: &str, incarnation: u64, how: Ending) -> (usize, usize) {
        let core = &self.core;
        let mut st = core.lock();
        st.ended.insert((name.to_string(), incarnation));
        let mine = |c: &Conn, i: usize| c.hosts[i] == name && c.incarnations[i] == incarnation;
        let ends: Vec<(u64, usize)> =
            st.conns.values().flat_map(|c| (0..2).filter(move |&i| mine(c, i)).map(move |i| (c.id, i))).collect();
        for &(id, i) in &ends {
            if let Some(c) = st.conns.get_mut(&id) {
                c.ends[i].process_gone = true;
                c.ends[i].wake();
            }
            match how {
                Ending::Exit => fabric::close_end(core, &mut st, id, i),
                Ending::Reset => fabric::abort_end(core, &mut st, id, i),
                Ending::Vanish => {
                    if let Some(c) = st.conns.get_mut(&id) {
                        c.silent = true;
                        c.ends[i].closed = true;
                    }
                }
            }
        }
        let listeners: Vec<u64> = st
            .listeners
            .iter()
            .filter(|(_, l)| l.host == name && l.incarnation == incarnation)
            .map(|(id, _)| *id)
            .collect();
        for id in &listeners {
            fabric::drop_listener(core, &mut st, *id, how != Ending::Vanish);
        }
        if how == Ending::Vanish && st.hosts.get(name).is_some_and(|h| h.incarnation == incarnation) {
            st.set_host_mode(name, HostMode::Silent);
        }
        drop(st);
        core.record(
            "net.incarnation.end",
            name,
            format!("{incarnation} {how:?}: {} connection ends, {} listeners", ends.len(), listeners.len()),
        );
        (ends.len(), listeners.len())
    }

    /// Operations refused because they came through a handle of an ended incarnation (what a
    /// crashed node's leftover tasks tried to do).
    pub fn stale_operations(&self) -> u64 {
        self.core.lock().stale_ops
    }

    /// Declares a ClusterIP service: `name` resolves to one virtual address, and each new
    /// connection to it goes to one backend, chosen by the seed (Kubernetes' kube-proxy picks at
    /// random per connection). Backends are host names; they may change later
    /// ([`Network::set_endpoints`], or the [`Route`] control).
    ///
    /// # Panics
    /// If `name` is a host's name.
    pub fn cluster_ip(&self, name: &str, backends: &[&str]) -> IpAddr {
        let mut st = self.core.lock();
        assert!(
            !matches!(st.names.get(name), Some(NameKind::Host(_)) | Some(NameKind::Headless { .. })),
            "Network::cluster_ip({name:?}): the name is already a host or a headless service"
        );
        if let Some(NameKind::ClusterIp { vip, .. }) = st.names.get(name) {
            let vip = *vip;
            st.names.insert(
                name.to_string(),
                NameKind::ClusterIp { vip, backends: backends.iter().map(|s| s.to_string()).collect() },
            );
            Self::publish_endpoints(&mut st, name);
            return vip;
        }
        let vip = st.new_vip();
        st.names.insert(
            name.to_string(),
            NameKind::ClusterIp { vip, backends: backends.iter().map(|s| s.to_string()).collect() },
        );
        st.by_addr.insert(vip, name.to_string());
        vip
    }

    /// Declares a headless service: `name` resolves to every backend's address.
    ///
    /// # Panics
    /// If `name` is a host's name or a ClusterIP service.
    pub fn headless(&self, name: &str, backends: &[&str]) {
        assert!(
            !matches!(self.core.lock().names.get(name), Some(NameKind::Host(_)) | Some(NameKind::ClusterIp { .. })),
            "Network::headless({name:?}): the name is already a host or a ClusterIP service"
        );
        self.core.lock().names.insert(
            name.to_string(),
            NameKind::Headless { backends: backends.iter().map(|s| s.to_string()).collect() },
        );
    }

    /// Replaces the backends of a service name (existing connections stay where they are).
    /// Returns `false`, changing nothing, when `name` is not a service.
    pub fn set_endpoints(&self, name: &str, backends: &[&str]) -> bool {
        let mut st = self.core.lock();
        let list: Vec<String> = backends.iter().map(|s| s.to_string()).collect();
        match st.names.get_mut(name) {
            Some(NameKind::ClusterIp { backends, .. }) | Some(NameKind::Headless { backends }) => {
                *backends = list.clone()
            }
            _ => return false,
        }
        Self::publish_endpoints(&mut st, name);
        drop(st);
        self.core.record("net.endpoints", name, list.join(","));
        true
    }

    /// Follows the backends of a service name: the receiver sees every change (rollouts, routes).
    /// `None` when `name` is not a service.
    pub fn watch_endpoints(&self, name: &str) -> Option<tokio::sync::watch::Receiver<Vec<String>>> {
        let mut st = self.core.lock();
        let current = match st.names.get(name) {
            Some(NameKind::ClusterIp { backends, .. }) | Some(NameKind::Headless { backends }) => backends.clone(),
            _ => return None,
        };
        let sender =
            st.endpoint_watches.entry(name.to_string()).or_insert_with(|| tokio::sync::watch::channel(current).0);
        Some(sender.subscribe())
    }

    fn publish_endpoints(st: &mut State, name: &str) {
        let current = match st.names.get(name) {
            Some(NameKind::ClusterIp { backends, .. }) | Some(NameKind::Headless { backends }) => backends.clone(),
            _ => return,
        };
        if let Some(sender) = st.endpoint_watches.get(name) {
            sender.send_replace(current);
        }
    }

    /// The backends of a service name, if it is one.
    pub fn endpoints(&self, name: &str) -> Option<Vec<String>> {
        match self.core.lock().names.get(name) {
            Some(NameKind::ClusterIp { backends, .. }) | Some(NameKind::Headless { backends }) => {
                Some(backends.clone())
            }
            _ => None,
        }
    }

    /// Resolves a name: a host's address, a ClusterIP service's virtual address, or every address
    /// of a headless service (in endpoint order). An IP literal resolves to itself; `localhost`
    /// to `127.0.0.1` (the `/etc/hosts` line every image has; glibc adds `::1` only where
    /// `/etc/hosts` lists it too, as this project's measured machine does not).
    ///
    /// # Errors
    /// An unknown name fails as `getaddrinfo` does: `failed to lookup address information: Name
    /// or service not known` (`ErrorKind::Other`; std reports its own kind as `Uncategorized`).
    pub fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        if name == "localhost" {
            return Ok(vec![IpAddr::from([127, 0, 0, 1])]);
        }
        let st = self.core.lock();
        match st.names.get(name) {
            Some(NameKind::Host(addr)) => Ok(vec![*addr]),
            Some(NameKind::ClusterIp { vip, .. }) => Ok(vec![*vip]),
            Some(NameKind::Headless { backends }) => {
                Ok(backends.iter().filter_map(|b| st.hosts.get(b).map(|h| h.addr)).collect())
            }
            None => Err(io::Error::other(LOOKUP_FAILED)),
        }
    }

    /// The drawn parameters of the link from one host to another.
    pub fn link(&self, from: &str, to: &str) -> LinkConfig {
        self.core.lock().link(from, to)
    }

    /// Every open connection's identity, in order of dialing.
    pub fn connections(&self) -> Vec<ConnInfo> {
        self.core.lock().conns.values().filter(|c| c.established).map(|c| c.info()).collect()
    }

    /// Installs a control (a [`Fault`] on the network) until the returned guard is dropped or
    /// released; recorded in the history (see [`crate::fault`]).
    pub fn install(&self, control: impl Fault<Network>) -> FaultGuard {
        fault::install(self, control)
    }

    /// Schedules a control at fake time `at` since the run started; say when it ends with
    /// [`Scheduled::until`] or [`Scheduled::lasting`] (or keep it with [`Scheduled::forever`]).
    pub fn at(&self, at: Duration, control: impl Fault<Network>) -> Scheduled {
        fault::at(&self.core.driver, self, at, control)
    }

    /// Resets every connection `sel` selects (both ends see RST now).
    pub fn reset_where(&self, sel: &ConnSel) {
        let mut st = self.core.lock();
        let ids: Vec<u64> = st.conns.values().filter(|c| sel.matches(&c.info())).map(|c| c.id).collect();
        for id in ids {
            self.core.record("net.reset", &format!("conn#{id}"), "");
            fabric::reset_both(&self.core, &mut st, id);
        }
    }

    /// Silences every connection `sel` selects, for good (see [`Silence`]).
    pub fn silence_where(&self, sel: &ConnSel) {
        let mut st = self.core.lock();
        let ids: Vec<u64> = st.conns.values().filter(|c| sel.matches(&c.info())).map(|c| c.id).collect();
        for id in ids {
            if let Some(c) = st.conns.get_mut(&id) {
                c.silent = true;
            }
            self.core.record("net.silence", &format!("conn#{id}"), "");
        }
    }

    pub(crate) fn add_on_established(&self, hook: EstablishedHook) -> fault::Undo<Network> {
        let id = self.core.lock().next_id();
        self.hooks.lock().unwrap_or_else(|p| p.into_inner()).insert(id, hook);
        Box::new(move |net: &Network| {
            net.hooks.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        })
    }

    /// Drops the connection hooks and every socket's state, at the end of a judged run: a hook
    /// or a socket's waker may hold the run's `Ctx`, which holds this network.
    pub(crate) fn tear_down(&self) {
        let hooks = std::mem::take(&mut *self.hooks.lock().unwrap_or_else(|p| p.into_inner()));
        let parts = {
            let mut st = self.core.lock();
            (
                std::mem::take(&mut st.conns),
                std::mem::take(&mut st.dials),
                std::mem::take(&mut st.listeners),
                std::mem::take(&mut st.listening),
                std::mem::take(&mut st.rules),
                std::mem::take(&mut st.endpoint_watches),
            )
        };
        // Dropped without the lock held: a destructor may reach the network.
        drop((hooks, parts));
    }

    pub(crate) fn run_established_hooks(&self, info: &ConnInfo) {
        // Called without the hooks' lock held: a hook may install or release controls.
        let hooks: Vec<EstablishedHook> =
            self.hooks.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for hook in hooks {
            hook(self, info);
        }
    }

    /// After a rule changed: (re)schedule every pipe with queued segments.
    pub(crate) fn reschedule_all(&self) {
        let mut st = self.core.lock();
        let work: Vec<(u64, usize)> = st
            .conns
            .values()
            .flat_map(|c| (0..2).filter(|&i| !c.pipes[i].queue.is_empty()).map(move |i| (c.id, i)))
            .collect();
        for (id, from) in work {
            // A held pipe keeps no event; a released one may have had its segments overdue.
            let now = self.core.now();
            if let Some(c) = st.conns.get_mut(&id) {
                for seg in c.pipes[from].queue.iter_mut() {
                    if seg.due < now {
                        seg.due = now;
                    }
                }
            }
            fabric::schedule_pipe(&self.core, &mut st, id, from);
        }
    }

    pub(crate) fn wake_listeners(&self) {
        let mut st = self.core.lock();
        for l in st.listeners.values_mut() {
            if let Some(w) = l.waker.take() {
                w.wake();
            }
        }
    }
}
