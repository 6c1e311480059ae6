//! The zombie oracle: tasks of ended incarnations that kept running (see docs/src/nodes.md, "A
//! crash leaves nothing running").

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::check::{Check, Verdict};
use crate::report::{Class, Failure};
use crate::run::Ctx;
use crate::runtime::Owner;

/// The node incarnation each task owner stands for: shared with the end-of-run zombie check.
pub(super) type Owners = Arc<Mutex<BTreeMap<Owner, (String, u64)>>>;

/// Polls of tasks of ended incarnations after they ended, by node and incarnation.
pub(super) fn zombies(ctx: &Ctx, owners: &Owners) -> BTreeMap<(String, u64), u64> {
    let polls = ctx.tasks().zombie_polls();
    let owners = owners.lock().unwrap_or_else(|p| p.into_inner());
    polls.into_iter().filter_map(|(owner, n)| owners.get(&owner).map(|k| (k.clone(), n))).collect()
}

/// Where the first zombie task of each ended incarnation was spawned.
fn zombie_sites(ctx: &Ctx, owners: &Owners) -> BTreeMap<(String, u64), String> {
    let sites = ctx.tasks().zombie_sites();
    let owners = owners.lock().unwrap_or_else(|p| p.into_inner());
    sites.into_iter().filter_map(|(owner, at)| owners.get(&owner).map(|k| (k.clone(), at.to_string()))).collect()
}

pub(super) fn zombie_failure(ctx: &Ctx, owners: &Owners) -> Option<Failure> {
    let zombies = zombies(ctx, owners);
    let ((node, incarnation), polls) = zombies.iter().next()?;
    let site = zombie_sites(ctx, owners)
        .get(&(node.clone(), *incarnation))
        .map(|at| format!(" (the first spawned at {at})"))
        .unwrap_or_default();
    Some(
        Failure::new(
            Class::Leak,
            format!(
                "tasks of {node} (incarnation {incarnation}) kept running after it ended ({polls} poll(s) since){site}: \
                 spawn a node's tasks through its NodeCtx so they die with it (a task of a shared model that serves every \
                 node: sim::spawn_detached)"
            ),
        )
        .oracle(crate::oracle::Oracle::ZOMBIE),
    )
}

/// The zombie oracle at the end of every run that has a [`System`](crate::node::System).
pub(super) struct ZombieCheck {
    pub(super) owners: Owners,
}

impl Check for ZombieCheck {
    fn name(&self) -> &str {
        "zombie"
    }

    fn wants(&self, _kind: &str) -> bool {
        false
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        ctx.tasks().settle_suspects();
        // A leak, not a correctness violation: reported with its own class.
        if let Some(failure) = zombie_failure(ctx, &self.owners) {
            ctx.fail(failure);
        }
        Verdict::Pass
    }
}
