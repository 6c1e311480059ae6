//! Faults and controls on the cluster, as [`sim::fault`] faults on a [`Target`]: installed now
//! ([`Cluster::install`]) or at a fake time ([`Cluster::at`]).

use std::time::Duration;

use sim::fault::{FaultGuard, Phase, Scheduled, Target, Undo};

use super::cluster::Cluster;
use crate::faults::Fault;

/// Something the harness does to the cluster: now ([`Cluster::apply`], for good), or as a fault
/// ([`Cluster::install`], [`Cluster::at`]) undone by its inverse: `BrokerDown` by bringing the
/// broker back up (if it was up), `BrokerUp` by taking it down again (if it was down), a moved
/// leader or coordinator by moving it back to where it was.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// The broker stops: its listener closes, its connections close, its partitions and groups
    /// move to the next live broker.
    BrokerDown(i32),
    /// The broker comes back (it leads nothing until something moves to it).
    BrokerUp(i32),
    /// A partition's leadership moves to a broker (its leader epoch is bumped).
    MoveLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The new leader.
        to: i32,
    },
    /// A group's coordinator moves to a broker (its state moves with it, as Kafka reloads it
    /// from `__consumer_offsets`).
    MoveCoordinator {
        /// The group.
        group: String,
        /// The new coordinator.
        to: i32,
    },
}

impl Cluster {
    /// Installs a fault or control now, until the guard is dropped or released
    /// ([`sim::fault::install`]). A [`Fault`]'s install and removal are recorded in the history as
    /// `kafka.fault.install` / `kafka.fault.remove` (identity `fault#<id>`).
    pub fn install(&self, fault: impl sim::fault::Fault<Cluster>) -> FaultGuard {
        sim::fault::install(self, fault)
    }

    /// Schedules a fault or control at fake time `at`, as a harness event of the run
    /// (`kafka.fault.at`, and `kafka.fault.until` for its release); say when it ends with
    /// [`Scheduled::lasting`], [`Scheduled::until`] or [`Scheduled::forever`]
    /// ([`sim::fault::at`]).
    pub fn at(&self, ctx: &sim::Ctx, at: Duration, fault: impl sim::fault::Fault<Cluster>) -> Scheduled {
        sim::fault::at(ctx.driver(), self, at, fault)
    }

    fn install_fault(&self, fault: Fault) -> u64 {
        let text = fault.to_string();
        let id = self.lock().faults.install(fault);
        self.record("kafka.fault.install", &format!("fault#{id}"), text);
        id
    }

    fn remove_fault(&self, id: u64) {
        let removed = self.lock().faults.remove(id);
        if let Some(f) = removed {
            self.record("kafka.fault.remove", &format!("fault#{id}"), f.to_string());
        }
    }

    /// Applies a control now.
    pub fn apply(&self, control: Control) {
        match control {
            Control::BrokerDown(id) => self.broker_down(id),
            Control::BrokerUp(id) => self.broker_up(id),
            Control::MoveLeader { topic, partition, to } => self.move_leader(&topic, partition, to),
            Control::MoveCoordinator { group, to } => self.move_coordinator(&group, to),
        }
    }

    /// Takes broker `id` down: its listener and connections close; the partitions it led move
    /// to the next live broker (or have no leader, `LEADER_NOT_AVAILABLE`, when none is up).
    pub fn broker_down(&self, id: i32) {
        let mut moved = Vec::new();
        {
            let mut st = self.lock();
            let Some(b) = st.brokers.get_mut(&id) else { return };
            if !b.up {
                return;
            }
            b.up = false;
            let live = Self::live(&st);
            for (name, topic) in st.topics.iter_mut() {
                for (p, part) in topic.partitions.iter_mut().enumerate() {
                    if part.leader == id {
                        part.leader = live.iter().copied().find(|b| *b > id).or(live.first().copied()).unwrap_or(-1);
                        part.leader_epoch += 1;
                        moved.push(format!("{name}-{p}->{}", part.leader));
                    }
                }
            }
        }
        if let Some(tx) = self.inner.up.get(id as usize) {
            tx.send_replace(false);
        }
        self.inner.log_changed.send_modify(|v| *v += 1);
        self.record("kafka.broker.down", &format!("broker-{id}"), format!("leaders moved: {moved:?}"));
    }

    /// Brings broker `id` back up.
    pub fn broker_up(&self, id: i32) {
        {
            let mut st = self.lock();
            let Some(b) = st.brokers.get_mut(&id) else { return };
            if b.up {
                return;
            }
            b.up = true;
            // Partitions left without a leader get this one.
            for topic in st.topics.values_mut() {
                for part in topic.partitions.iter_mut().filter(|p| p.leader < 0) {
                    part.leader = id;
                    part.leader_epoch += 1;
                }
            }
        }
        if let Some(tx) = self.inner.up.get(id as usize) {
            tx.send_replace(true);
        }
        self.record("kafka.broker.up", &format!("broker-{id}"), "");
    }

    /// Whether broker `id` is up.
    pub fn is_up(&self, id: i32) -> bool {
        self.lock().brokers.get(&id).is_some_and(|b| b.up)
    }

    /// Moves a partition's leadership to broker `to`, bumping its leader epoch.
    pub fn move_leader(&self, topic: &str, partition: i32, to: i32) {
        let epoch = {
            let mut st = self.lock();
            let Some(p) = st.topics.get_mut(topic).and_then(|t| t.partitions.get_mut(partition as usize)) else {
                return;
            };
            p.leader = to;
            p.leader_epoch += 1;
            p.leader_epoch
        };
        self.inner.log_changed.send_modify(|v| *v += 1);
        self.record("kafka.leader.move", &format!("{topic}-{partition}"), format!("to broker {to}, epoch {epoch}"));
    }

    /// Moves a group's coordinator to broker `to`.
    pub fn move_coordinator(&self, group: &str, to: i32) {
        self.lock().coordinators.insert(group.to_string(), to);
        self.record("kafka.coordinator.move", group, format!("to broker {to}"));
    }
}

impl Cluster {
    /// The leader of a partition, if the partition exists.
    fn leader_of(&self, topic: &str, partition: i32) -> Option<i32> {
        let st = self.lock();
        st.topics.get(topic).and_then(|t| t.partitions.get(usize::try_from(partition).ok()?)).map(|p| p.leader)
    }
}

/// Faults on the cluster go by `kafka.fault.at` / `kafka.fault.until` as harness events; a
/// [`Fault`] records its own install and removal.
impl Target for Cluster {
    fn event(&self, phase: Phase, label: &str) -> sim::Event {
        match phase {
            Phase::Install => sim::Event::new("kafka.fault.at", label.to_string()),
            Phase::Release => sim::Event::new("kafka.fault.until", label.to_string()),
        }
    }

    fn installed(&self, _label: &str) {}

    fn released(&self, _label: &str) {}
}

impl sim::fault::Fault<Cluster> for Fault {
    fn describe(&self) -> String {
        self.to_string()
    }

    fn install(&self, cluster: &Cluster) -> Undo<Cluster> {
        let id = cluster.install_fault(self.clone());
        Box::new(move |cluster: &Cluster| cluster.remove_fault(id))
    }
}

impl sim::fault::Fault<Cluster> for Control {
    fn describe(&self) -> String {
        format!("{self:?}")
    }

    fn install(&self, cluster: &Cluster) -> Undo<Cluster> {
        match self.clone() {
            Control::BrokerDown(id) => {
                let was_up = cluster.is_up(id);
                cluster.broker_down(id);
                Box::new(move |cluster: &Cluster| {
                    if was_up {
                        cluster.broker_up(id);
                    }
                })
            }
            Control::BrokerUp(id) => {
                let was_down = cluster.broker_ids().contains(&id) && !cluster.is_up(id);
                cluster.broker_up(id);
                Box::new(move |cluster: &Cluster| {
                    if was_down {
                        cluster.broker_down(id);
                    }
                })
            }
            Control::MoveLeader { topic, partition, to } => {
                let from = cluster.leader_of(&topic, partition);
                cluster.move_leader(&topic, partition, to);
                Box::new(move |cluster: &Cluster| {
                    if let Some(from) = from {
                        cluster.move_leader(&topic, partition, from);
                    }
                })
            }
            Control::MoveCoordinator { group, to } => {
                let from = {
                    let st = cluster.lock();
                    cluster.coordinator_of(&st, &group)
                };
                cluster.move_coordinator(&group, to);
                Box::new(move |cluster: &Cluster| {
                    if from >= 0 {
                        cluster.move_coordinator(&group, from);
                    }
                })
            }
        }
    }
}
