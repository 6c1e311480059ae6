//! Comparing the fake's observations with the real server's, step by step, and deciding what a
//! difference means.
//!
//! Steps are aligned by position: both sides run the same scenario code, so the i-th step is the
//! same operation on both. A step differs when its label or its value differs, or when one side
//! has it and the other does not (a side that ended early). A scenario whose steps all agree is
//! [`Verdict::Equal`]. One that carries a [`Known`] difference must differ at exactly the steps
//! it names: then it is [`Verdict::KnownDifference`]; if it no longer differs at all the
//! difference has disappeared, which fails too, so that its entry in the known-differences list
//! is removed rather than left to rot.

use std::fmt::Write;

use crate::observe::Observations;

/// A documented difference between the fake and the real server that a scenario pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// Its id in the known-differences page (`docs/fidelity/kafka.md`: a heading `` ### `id` ``).
    pub id: &'static str,
    /// The labels of the steps that differ, exactly (after normalization).
    pub steps: &'static [&'static str],
}

/// What a scenario's comparison means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every step agrees.
    Equal,
    /// The steps differ exactly where the named known difference says.
    KnownDifference(&'static str),
    /// Anything else, with the reason.
    Failed(String),
}

/// One aligned row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The step's label (`fake label ≠ real label` when even the labels differ).
    pub label: String,
    /// The fake's value; `None` when the fake did not get this far.
    pub fake: Option<String>,
    /// The real server's value; `None` when it did not get this far.
    pub real: Option<String>,
    /// Whether the row differs.
    pub differs: bool,
}

/// Both sides' observations, aligned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// One row per step.
    pub rows: Vec<Row>,
    /// Each side's early end, if any: `(fake, real)`.
    pub ended_early: (Option<String>, Option<String>),
}

/// Aligns `fake` and `real` step by step.
pub fn compare(fake: &Observations, real: &Observations) -> Comparison {
    let n = fake.steps.len().max(real.steps.len());
    let mut rows = Vec::with_capacity(n + 1);
    for i in 0..n {
        let (f, r) = (fake.steps.get(i), real.steps.get(i));
        let label = match (f, r) {
            (Some(f), Some(r)) if f.label == r.label => f.label.clone(),
            (Some(f), Some(r)) => format!("{} ≠ {}", f.label, r.label),
            (Some(s), None) | (None, Some(s)) => s.label.clone(),
            (None, None) => unreachable!("i is below the longer side's length"),
        };
        let differs = f != r;
        rows.push(Row { label, fake: f.map(|s| s.value.clone()), real: r.map(|s| s.value.clone()), differs });
    }
    if fake.ended_early.is_some() || real.ended_early.is_some() {
        rows.push(Row {
            label: "ended early".into(),
            fake: fake.ended_early.clone(),
            real: real.ended_early.clone(),
            differs: fake.ended_early != real.ended_early,
        });
    }
    Comparison { rows, ended_early: (fake.ended_early.clone(), real.ended_early.clone()) }
}

impl Comparison {
    /// The labels of the rows that differ, in order.
    pub fn differing(&self) -> Vec<&str> {
        self.rows.iter().filter(|r| r.differs).map(|r| r.label.as_str()).collect()
    }

    /// The verdict, given the scenario's known difference if it has one.
    pub fn verdict(&self, known: Option<&Known>) -> Verdict {
        if let (Some(f), Some(r)) = &self.ended_early {
            return Verdict::Failed(format!("both sides ended early (fake: {f}; real: {r})"));
        }
        let differing = self.differing();
        match known {
            None if differing.is_empty() => Verdict::Equal,
            None => Verdict::Failed(format!("{} step(s) differ: {}", differing.len(), differing.join(", "))),
            Some(k) if differing.is_empty() => Verdict::Failed(format!(
                "known difference `{}` no longer shows: both sides agree now; remove it from the known differences \
                 and make the scenario an equal one",
                k.id
            )),
            Some(k) if differing == k.steps => Verdict::KnownDifference(k.id),
            Some(k) => Verdict::Failed(format!(
                "known difference `{}` expects differences at [{}], got [{}]",
                k.id,
                k.steps.join(", "),
                differing.join(", ")
            )),
        }
    }

    /// The rows side by side, differing rows marked `!`: `fake_name` and `real_name` head the
    /// columns.
    pub fn side_by_side(&self, fake_name: &str, real_name: &str) -> String {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".into());
        let lw = self.rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(0).max(4);
        let fw = self.rows.iter().map(|r| shown(&r.fake).chars().count()).max().unwrap_or(0).max(fake_name.len());
        let mut out = String::new();
        let _ = writeln!(out, "    {:lw$}  {:fw$}  {}", "step", fake_name, real_name);
        for r in &self.rows {
            let mark = if r.differs { "!" } else { " " };
            let _ = writeln!(out, "  {mark} {:lw$}  {:fw$}  {}", r.label, shown(&r.fake), shown(&r.real));
        }
        out
    }
}

/// Checks that the known-differences page lists exactly the ids in `known` (each as a heading
/// `` ### `id` ``), so that the page and the tests that pin it cannot drift apart.
///
/// # Errors
/// The ids the page lacks and the ids it lists that no scenario pins.
pub fn check_documented(page: &str, known: &[&str]) -> Result<(), String> {
    let listed: Vec<&str> =
        page.lines().filter_map(|l| l.trim().strip_prefix("### `")).filter_map(|l| l.split('`').next()).collect();
    let missing: Vec<&str> = known.iter().copied().filter(|k| !listed.contains(k)).collect();
    let stale: Vec<&str> = listed.iter().copied().filter(|l| !known.contains(l)).collect();
    if missing.is_empty() && stale.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the known-differences page lacks [{}] and lists [{}] that no scenario pins",
        missing.join(", "),
        stale.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Step;

    fn obs(steps: &[(&str, &str)], ended: Option<&str>) -> Observations {
        Observations {
            steps: steps.iter().map(|(l, v)| Step { label: l.to_string(), value: v.to_string() }).collect(),
            ended_early: ended.map(str::to_string),
        }
    }

    #[test]
    fn equal_steps_are_equal() {
        let a = obs(&[("join", "NONE gen=1"), ("commit", "NONE")], None);
        assert_eq!(compare(&a, &a.clone()).verdict(None), Verdict::Equal);
    }

    #[test]
    fn a_differing_value_fails_and_is_shown_side_by_side() {
        let fake = obs(&[("join", "NONE gen=1"), ("commit stale", "ILLEGAL_GENERATION")], None);
        let real = obs(&[("join", "NONE gen=1"), ("commit stale", "UNKNOWN_MEMBER_ID")], None);
        let c = compare(&fake, &real);
        assert_eq!(c.verdict(None), Verdict::Failed("1 step(s) differ: commit stale".into()));
        let table = c.side_by_side("kafkasim", "kafka");
        assert!(table.contains("! commit stale  ILLEGAL_GENERATION  UNKNOWN_MEMBER_ID"), "{table}");
        assert!(table.contains("  join          NONE gen=1          NONE gen=1"), "{table}");
    }

    #[test]
    fn a_side_that_ended_early_differs_at_the_missing_steps_and_the_end() {
        let fake = obs(&[("join", "NONE")], Some("timed out"));
        let real = obs(&[("join", "NONE"), ("sync", "NONE")], None);
        let c = compare(&fake, &real);
        assert_eq!(c.differing(), vec!["sync", "ended early"]);
    }

    #[test]
    fn both_sides_ending_early_is_a_broken_scenario_even_when_they_agree() {
        let a = obs(&[("join", "NONE")], Some("timed out"));
        assert!(matches!(compare(&a, &a.clone()).verdict(None), Verdict::Failed(m) if m.contains("both sides")));
    }

    #[test]
    fn a_known_difference_must_differ_exactly_where_it_says_and_fails_when_it_disappears() {
        let known = Known { id: "auto-create-is-immediate", steps: &["first metadata"] };
        let fake = obs(&[("first metadata", "NONE"), ("later", "NONE")], None);
        let real = obs(&[("first metadata", "LEADER_NOT_AVAILABLE"), ("later", "NONE")], None);
        assert_eq!(compare(&fake, &real).verdict(Some(&known)), Verdict::KnownDifference("auto-create-is-immediate"));
        let gone = compare(&fake, &fake.clone()).verdict(Some(&known));
        assert!(matches!(gone, Verdict::Failed(m) if m.contains("no longer shows")));
        let elsewhere = obs(&[("first metadata", "LEADER_NOT_AVAILABLE"), ("later", "ERROR")], None);
        let moved = compare(&fake, &elsewhere).verdict(Some(&known));
        assert!(matches!(moved, Verdict::Failed(m) if m.contains("expects differences at [first metadata]")));
    }

    #[test]
    fn the_page_must_list_exactly_the_pinned_ids() {
        let page = "# Known differences\n\n### `a`\ntext\n\n### `b`\n";
        assert_eq!(check_documented(page, &["a", "b"]), Ok(()));
        let err = check_documented(page, &["a", "c"]).expect_err("drifted");
        assert!(err.contains("lacks [c]") && err.contains("lists [b]"), "{err}");
    }
}
