//! A two-node commit protocol with a planted bug: the toy the harness must catch.
//!
//! A client submits values to a *coordinator*, which replicates each to a *replica*:
//! PREPARE(v) → ACK(v) → the coordinator commits `v` durably → COMMIT(v). Messages travel as
//! harness events with a seeded latency and can be lost while faults are on; nodes crash (their
//! task is dropped with its volatile state) and reboot from their durable state.
//!
//! The guarantee (oracle `commit-reaches-replica`): once the network heals and nodes are up, every
//! value the coordinator committed durably reaches the replica's durable log.
//!
//! - [`Variant::Buggy`] sends COMMIT once and forgets it: a lost COMMIT, or a replica crash before
//!   it arrives, loses the value on the replica forever.
//! - [`Variant::Fixed`] keeps every commit in a durable "unacknowledged" set and resends COMMIT
//!   until the replica acknowledges it, across its own crashes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::{Ctx, Event, Failure, Source};
use tokio::sync::mpsc;

/// Which protocol to run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// COMMIT is sent once (the planted bug).
    Buggy,
    /// COMMIT is resent until acknowledged.
    Fixed,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Coordinator,
    Replica,
}

impl Node {
    fn name(self) -> &'static str {
        match self {
            Node::Coordinator => "coordinator",
            Node::Replica => "replica",
        }
    }
}

#[derive(Copy, Clone, Debug)]
enum Msg {
    Prepare(u64),
    Ack(u64),
    Commit(u64),
    CommitAck(u64),
}

/// What survives a crash.
#[derive(Default)]
struct Durable {
    committed: BTreeMap<u64, Duration>,
    unacked_commits: BTreeSet<u64>,
    replica_log: BTreeSet<u64>,
}

/// The simulated network between the two nodes: seeded latency, seeded loss while faults are on.
struct Net {
    ctx: Ctx,
    draws: Mutex<Source>,
    loss: f64,
    faulty: Mutex<bool>,
    inboxes: Mutex<BTreeMap<Node, mpsc::UnboundedSender<Msg>>>,
}

impl Net {
    fn send(self: &Arc<Self>, from: Node, to: Node, msg: Msg) {
        let link = format!("{}->{}", from.name(), to.name());
        let faulty = *self.faulty.lock().unwrap();
        let (lost, latency) = {
            let mut draws = self.draws.lock().unwrap();
            let lost = faulty && draws.bool(self.loss);
            (lost, draws.duration(Duration::from_millis(1)..=Duration::from_millis(20)))
        };
        if lost {
            self.ctx.driver().after(Duration::ZERO, Event::new("msg.lost", link).detail(format!("{msg:?}")));
            return;
        }
        let net = Arc::clone(self);
        self.ctx.driver().after(
            latency,
            Event::new("msg.deliver", link).detail(format!("{msg:?}")).action(move || {
                let inboxes = net.inboxes.lock().unwrap();
                match inboxes.get(&to) {
                    Some(inbox) if inbox.send(msg).is_ok() => {}
                    _ => {
                        net.ctx.record("msg.dropped", to.name(), format!("{msg:?} (node down)"));
                    }
                }
            }),
        );
    }
}

const RESEND: Duration = Duration::from_millis(30);

async fn coordinator(
    net: Arc<Net>,
    durable: Arc<Mutex<Durable>>,
    queue: Arc<Mutex<VecDeque<u64>>>,
    variant: Variant,
    mut inbox: mpsc::UnboundedReceiver<Msg>,
) {
    let mut resend = tokio::time::interval(RESEND);
    let mut waiting: Option<u64> = None;
    loop {
        if waiting.is_none() {
            waiting = queue.lock().unwrap().front().copied();
            if let Some(v) = waiting {
                net.send(Node::Coordinator, Node::Replica, Msg::Prepare(v));
            }
        }
        tokio::select! {
            msg = inbox.recv() => match msg {
                Some(Msg::Ack(v)) if waiting == Some(v) => {
                    waiting = None;
                    queue.lock().unwrap().pop_front();
                    {
                        let mut d = durable.lock().unwrap();
                        d.committed.insert(v, net.ctx.elapsed());
                        if variant == Variant::Fixed {
                            d.unacked_commits.insert(v);
                        }
                    }
                    net.ctx.record("commit", "coordinator", v.to_string());
                    net.send(Node::Coordinator, Node::Replica, Msg::Commit(v));
                }
                Some(Msg::CommitAck(v)) => {
                    durable.lock().unwrap().unacked_commits.remove(&v);
                }
                Some(_) => {}
                None => return,
            },
            _ = resend.tick() => {
                if let Some(v) = waiting {
                    net.send(Node::Coordinator, Node::Replica, Msg::Prepare(v));
                }
                let unacked: Vec<u64> = durable.lock().unwrap().unacked_commits.iter().copied().collect();
                for v in unacked {
                    net.send(Node::Coordinator, Node::Replica, Msg::Commit(v));
                }
            }
        }
    }
}

async fn replica(
    net: Arc<Net>,
    durable: Arc<Mutex<Durable>>,
    variant: Variant,
    mut inbox: mpsc::UnboundedReceiver<Msg>,
) {
    while let Some(msg) = inbox.recv().await {
        match msg {
            Msg::Prepare(v) => net.send(Node::Replica, Node::Coordinator, Msg::Ack(v)),
            Msg::Commit(v) => {
                durable.lock().unwrap().replica_log.insert(v);
                if variant == Variant::Fixed {
                    net.send(Node::Replica, Node::Coordinator, Msg::CommitAck(v));
                }
            }
            Msg::Ack(_) | Msg::CommitAck(_) => {}
        }
    }
}

/// The nodes' tasks, for crashes and reboots.
struct Cluster {
    net: Arc<Net>,
    durable: Arc<Mutex<Durable>>,
    queue: Arc<Mutex<VecDeque<u64>>>,
    variant: Variant,
    tasks: Mutex<BTreeMap<Node, tokio::task::JoinHandle<()>>>,
}

impl Cluster {
    fn boot(self: &Arc<Self>, node: Node) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.net.inboxes.lock().unwrap().insert(node, tx);
        let handle = match node {
            Node::Coordinator => tokio::spawn(coordinator(
                Arc::clone(&self.net),
                Arc::clone(&self.durable),
                Arc::clone(&self.queue),
                self.variant,
                rx,
            )),
            Node::Replica => tokio::spawn(replica(Arc::clone(&self.net), Arc::clone(&self.durable), self.variant, rx)),
        };
        self.tasks.lock().unwrap().insert(node, handle);
    }

    fn crash(&self, node: Node) {
        self.net.inboxes.lock().unwrap().remove(&node);
        if let Some(task) = self.tasks.lock().unwrap().remove(&node) {
            task.abort();
        }
    }
}

/// Fault phase: loss and crashes happen only before this fake time.
pub const FAULTS_UNTIL: Duration = Duration::from_secs(2);
/// The invariant is checked this long after the faults stop.
pub const SETTLE: Duration = Duration::from_secs(3);

/// One run of the protocol: writes, faults drawn by the swarm, then the check.
pub async fn run(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    let swarm = ctx.swarm().clone();
    let writes = swarm.int("writes", 1..=10);
    let loss = swarm.ratio("loss", 0.0..=0.3);
    let crashes = swarm.int("crashes", 0..=4);
    let net = Arc::new(Net {
        ctx: ctx.clone(),
        draws: Mutex::new(ctx.source("net")),
        loss,
        faulty: Mutex::new(true),
        inboxes: Mutex::new(BTreeMap::new()),
    });
    let cluster = Arc::new(Cluster {
        net: Arc::clone(&net),
        durable: Arc::new(Mutex::new(Durable::default())),
        queue: Arc::new(Mutex::new(VecDeque::new())),
        variant,
        tasks: Mutex::new(BTreeMap::new()),
    });
    cluster.boot(Node::Coordinator);
    cluster.boot(Node::Replica);

    let mut plan = ctx.source("plan");
    for v in 1..=writes {
        let at = plan.duration(Duration::ZERO..=Duration::from_millis(1500));
        let queue = Arc::clone(&cluster.queue);
        ctx.driver().at(
            at,
            Event::new("client.write", "client")
                .detail(v.to_string())
                .action(move || queue.lock().unwrap().push_back(v)),
        );
    }
    for _ in 0..crashes {
        let node = if plan.bool(0.5) { Node::Replica } else { Node::Coordinator };
        let at = plan.duration(Duration::ZERO..=FAULTS_UNTIL - Duration::from_millis(300));
        let down = plan.duration(Duration::from_millis(10)..=Duration::from_millis(300));
        let (c1, c2) = (Arc::clone(&cluster), Arc::clone(&cluster));
        ctx.driver().at(at, Event::new("node.crash", node.name()).action(move || c1.crash(node)));
        ctx.driver().at(
            at + down,
            Event::new("node.reboot", node.name()).action(move || {
                if !c2.tasks.lock().unwrap().contains_key(&node) {
                    c2.boot(node);
                }
            }),
        );
    }
    let heal = Arc::clone(&net);
    ctx.driver()
        .at(FAULTS_UNTIL, Event::new("fault.heal", "network").action(move || *heal.faulty.lock().unwrap() = false));

    tokio::time::sleep(FAULTS_UNTIL + SETTLE).await;

    let durable = cluster.durable.lock().unwrap();
    for (v, at) in &durable.committed {
        if !durable.replica_log.contains(v) {
            return Err(Failure::correctness(
                "commit-reaches-replica",
                format!("value {v}, committed durably by the coordinator at {at:?}, never reached the replica"),
            ));
        }
    }
    if durable.committed.len() as u64 != writes {
        return Err(Failure::liveness(
            "writes-commit",
            format!("{} of {writes} writes committed {SETTLE:?} after the faults stopped", durable.committed.len()),
        ));
    }
    Ok(())
}
