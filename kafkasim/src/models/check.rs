//! The models as the run's checks.

use std::fmt;
use std::time::Duration;

use sim::Ctx;
use sim::check::{Check, Verdict};
use sim::history::Entry;

use crate::Cluster;
use crate::models::event::{Event, What};
use crate::models::facts::Facts;
use crate::models::judge::models;
use crate::models::model::{Model, Spec, Violation};

/// Installs the nine models as checks of the run, for `spec`'s group on `cluster`.
pub fn install(ctx: &Ctx, cluster: &Cluster, spec: &Spec) {
    for model in models(spec) {
        ctx.add_check(ModelCheck::boxed(ctx, cluster, spec, model));
    }
}

/// A [`Model`] as a [`sim::check::Check`] (see the module docs).
///
/// It reads the group's consumer events from the history (`kafka.consumer.*`, recorded by a
/// [`Recorder::sim`](crate::models::Recorder::sim)), and `node.crash` of a node as [`What::Crash`] of the member named like the
/// node. At the end it takes [`Facts::of`] the cluster. An unreadable `kafka.consumer.*` entry
/// is a violation. Explained losses are recorded as `kafka.model.explained` entries.
pub struct ModelCheck {
    model: Box<dyn Model>,
    group: String,
    spec: Spec,
    cluster: Cluster,
    /// Run time minus cluster time: histories stamp run time, the models use the cluster's.
    offset: Duration,
}

impl fmt::Debug for ModelCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelCheck").field("model", &self.model.name()).field("group", &self.group).finish()
    }
}

impl ModelCheck {
    /// `model` for `spec`'s group on `cluster`, as a check of the run `ctx`.
    pub fn new(ctx: &Ctx, cluster: &Cluster, spec: &Spec, model: impl Model + 'static) -> ModelCheck {
        ModelCheck::boxed(ctx, cluster, spec, Box::new(model))
    }

    fn boxed(ctx: &Ctx, cluster: &Cluster, spec: &Spec, model: Box<dyn Model>) -> ModelCheck {
        ModelCheck {
            model,
            group: spec.group().to_string(),
            spec: spec.clone(),
            cluster: cluster.clone(),
            offset: ctx.elapsed().saturating_sub(cluster.elapsed()),
        }
    }

    fn verdict(violations: Vec<Violation>) -> Verdict {
        match violations.split_first() {
            None => Verdict::Pass,
            Some((first, [])) => Verdict::Violation(first.to_string()),
            Some((first, rest)) => Verdict::Violation(format!("{first} (and {} more)", rest.len())),
        }
    }
}

impl Check for ModelCheck {
    fn name(&self) -> &str {
        self.model.name()
    }

    fn wants(&self, kind: &str) -> bool {
        kind == "node.crash" || kind.starts_with(crate::models::event::KIND_PREFIX)
    }

    fn on_event(&mut self, entry: &Entry) -> Verdict {
        let at = entry.at().saturating_sub(self.offset);
        let event = if entry.kind == "node.crash" {
            Event { seq: entry.index, at, group: self.group.clone(), member: entry.identity.clone(), what: What::Crash }
        } else {
            match Event::from_history(&entry.kind, &entry.identity, &entry.detail, entry.index, at) {
                Ok(Some(event)) if event.group == self.group => event,
                Ok(_) => return Verdict::Pass,
                Err(e) => return Verdict::Violation(e.to_string()),
            }
        };
        ModelCheck::verdict(self.model.on_event(&event))
    }

    fn finish(&mut self, ctx: &Ctx) -> Verdict {
        let facts = Facts::of_pipeline(&self.cluster, &self.group, self.spec.pipeline());
        let end = ctx.elapsed().saturating_sub(self.offset);
        let violations = self.model.finish(&facts, end);
        for e in self.model.explained() {
            ctx.record("kafka.model.explained", &self.group, e.to_string());
        }
        ModelCheck::verdict(violations)
    }
}
