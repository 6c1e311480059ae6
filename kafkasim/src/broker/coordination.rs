//! FindCoordinator, and the cluster as its group coordinator's [`Env`].

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;

use super::cluster::{BrokerInfo, Cluster, State, Topic, coordinator_of, has_partition, s};
use crate::faults::{FaultSet, Part};
use crate::groups::{Coordinator, Env, GroupConfig, Handle};
use crate::introspect::{CommitRecord, Generation};

impl Cluster {
    pub(super) fn find_coordinator(
        &self,
        broker: i32,
        version: i16,
        req: &FindCoordinatorRequest,
    ) -> FindCoordinatorResponse {
        let mut st = self.lock();
        match req.key_type {
            0 => self.ensure_offsets_topic(&mut st),
            1 => self.ensure_transaction_state_topic(&mut st),
            _ => {}
        }
        let st = st;
        let keys: Vec<String> = if version >= 4 {
            req.coordinator_keys.iter().map(|k| k.to_string()).collect()
        } else {
            vec![req.key.to_string()]
        };
        let answer = |key: &str| -> Result<(i32, String, i32), E> {
            match req.key_type {
                0 | 1 => {}
                // Share coordinators (KIP-932) are not modelled.
                2 => return Err(E::CoordinatorNotAvailable),
                // Kafka's CoordinatorType.forId refuses any other key type.
                _ => return Err(E::InvalidRequest),
            }
            if let Some(code) =
                st.faults.error_for(ApiKey::FindCoordinator, broker, Part { group: Some(key), ..Part::default() })
            {
                return Err(E::try_from_code(code).unwrap_or(E::UnknownServerError));
            }
            let id = self.coordinator_of(&st, key);
            let b = st.brokers.get(&id).ok_or(E::CoordinatorNotAvailable)?;
            Ok((id, b.host.clone(), b.port))
        };
        if version >= 4 {
            let coordinators = keys
                .iter()
                .map(|k| {
                    let c = find_coordinator_response::Coordinator::default().with_key(s(k));
                    match answer(k) {
                        Ok((id, host, port)) => c.with_node_id(BrokerId(id)).with_host(s(&host)).with_port(port),
                        Err(e) => c.with_error_code(e.code()).with_node_id(BrokerId(-1)),
                    }
                })
                .collect();
            return FindCoordinatorResponse::default().with_coordinators(coordinators);
        }
        match answer(&keys[0]) {
            Ok((id, host, port)) => {
                FindCoordinatorResponse::default().with_node_id(BrokerId(id)).with_host(s(&host)).with_port(port)
            }
            Err(e) => FindCoordinatorResponse::default().with_error_code(e.code()).with_node_id(BrokerId(-1)),
        }
    }
}

/// The cluster as the group coordinator sees it, borrowed from the locked state.
pub(super) struct GroupEnv<'a> {
    cluster: &'a Cluster,
    brokers: &'a BTreeMap<i32, BrokerInfo>,
    coordinators: &'a BTreeMap<String, i32>,
    faults: &'a FaultSet,
    topics: &'a BTreeMap<String, Topic>,
}

impl Cluster {
    /// Splits the locked state into the coordinator and the rest of the cluster as its env.
    pub(super) fn split<'a>(&'a self, st: &'a mut State) -> (&'a mut Coordinator, GroupEnv<'a>) {
        let State { brokers, topics, groups, faults, coordinators, .. } = st;
        (groups, GroupEnv { cluster: self, brokers, coordinators, faults, topics })
    }

    /// Runs `f` on the group coordinator, with the state locked.
    pub(super) fn groups<R>(&self, f: impl FnOnce(&mut Coordinator, &GroupEnv<'_>) -> R) -> R {
        let mut st = self.lock();
        let (groups, env) = self.split(&mut st);
        f(groups, &env)
    }
}

impl Handle for Cluster {
    fn with(&self, f: &mut dyn FnMut(&mut Coordinator, &dyn Env)) {
        self.groups(|groups, env| f(groups, env));
    }
}

impl Env for GroupEnv<'_> {
    fn coordinator_of(&self, group: &str) -> i32 {
        coordinator_of(self.brokers, self.coordinators, self.cluster.config().brokers, group)
    }

    fn fault_error(&self, api: ApiKey, broker: i32, part: Part<'_>) -> Option<i16> {
        self.faults.error_for(api, broker, part)
    }

    fn has_partition(&self, topic: &str, partition: i32) -> bool {
        has_partition(self.topics, topic, partition)
    }

    fn config(&self) -> GroupConfig {
        let c = self.cluster.config();
        GroupConfig {
            initial_rebalance_delay: c.initial_rebalance_delay,
            session_timeout_min: c.session_timeout_min,
            session_timeout_max: c.session_timeout_max,
        }
    }

    fn record(&self, kind: &str, group: &str, detail: &str) {
        self.cluster.record(kind, group, detail);
    }

    fn elapsed(&self) -> Duration {
        self.cluster.elapsed()
    }

    fn journal_generation(&self, group: &str, generation: Generation) {
        self.cluster.journal(|j| j.generation(group, generation));
    }

    fn journal_assignments(&self, group: &str, generation: i32, assignments: BTreeMap<String, Bytes>) {
        self.cluster.journal(|j| j.assignments(group, generation, assignments));
    }

    fn journal_commits(&self, commits: Vec<CommitRecord>) {
        self.cluster.journal(|j| commits.into_iter().for_each(|r| j.commit(r)));
    }

    fn handle(&self) -> Box<dyn Handle> {
        Box::new(self.cluster.clone())
    }
}
