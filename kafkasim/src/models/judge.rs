//! Judging a whole history: the nine models, and their report.

use std::fmt;

use crate::models::commit_first::CommitFirst;
use crate::models::drain::ShutdownDrains;
use crate::models::duplicates::NoDuplicates;
use crate::models::error_ends::ErrorEndsConsumer;
use crate::models::exactly_once::ExactlyOnce;
use crate::models::facts::Facts;
use crate::models::history::ConsumerHistory;
use crate::models::loss::LossExplained;
use crate::models::loss_at_commit::NoLossAtCommit;
use crate::models::model::{Explained, Model, Spec, Violation};
use crate::models::monotonic::MonotonicCommits;
use crate::models::order::OrderWithinHold;
use crate::models::progress::ProgressAfterHeal;

/// The ten models for `spec`, Q1 to Q10.
pub fn models(spec: &Spec) -> Vec<Box<dyn Model>> {
    vec![
        Box::new(NoLossAtCommit::new(spec)),
        Box::new(MonotonicCommits::new(spec)),
        Box::new(NoDuplicates::new(spec)),
        Box::new(CommitFirst::new(spec)),
        Box::new(LossExplained::new(spec)),
        Box::new(OrderWithinHold::new(spec)),
        Box::new(ErrorEndsConsumer::new(spec)),
        Box::new(ShutdownDrains::new(spec)),
        Box::new(ProgressAfterHeal::new(spec)),
        Box::new(ExactlyOnce::new(spec)),
    ]
}

/// What the models found over a history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation, model by model (Q1 first), each model's in the order found.
    pub violations: Vec<Violation>,
    /// Losses explained by an allowed cause.
    pub explained: Vec<Explained>,
}

impl Report {
    /// Whether `model` ([`Q1`](crate::models::Q1) … [`Q10`](crate::models::Q10)) found a violation.
    pub fn fired(&self, model: &str) -> bool {
        self.violations.iter().any(|v| v.model == model)
    }

    /// `model`'s violations.
    pub fn of(&self, model: &str) -> Vec<&Violation> {
        self.violations.iter().filter(|v| v.model == model).collect()
    }

    /// The models that found a violation, in order, once each.
    pub fn models_fired(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for v in &self.violations {
            if !out.contains(&v.model) {
                out.push(v.model);
            }
        }
        out
    }

    /// Whether no model found a violation.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.violations.is_empty() {
            writeln!(f, "no violation")?;
        }
        for v in &self.violations {
            writeln!(f, "{v}")?;
        }
        for e in &self.explained {
            writeln!(f, "explained: {e}")?;
        }
        Ok(())
    }
}

/// Runs every model of [`models`] over `history` (its events of `spec`'s group) and `facts`.
///
/// A history that dropped events (more than [`ConsumerHistory::EVENTS_MAX`]) cannot be judged:
/// the report then holds one violation of oracle `kafka-history` saying so.
pub fn judge(history: &ConsumerHistory, facts: &Facts, spec: &Spec) -> Report {
    let mut report = Report::default();
    if history.dropped() > 0 {
        report.violations.push(Violation::new(
            "kafka-history",
            spec.group(),
            format!(
                "the history dropped {} events beyond ConsumerHistory::EVENTS_MAX ({}): too long to judge",
                history.dropped(),
                ConsumerHistory::EVENTS_MAX
            ),
        ));
        return report;
    }
    for mut model in models(spec) {
        for event in history.events().iter().filter(|e| e.group == spec.group()) {
            report.violations.extend(model.on_event(event));
        }
        report.violations.extend(model.finish(facts, history.end()));
        report.explained.extend(model.explained());
    }
    report
}
