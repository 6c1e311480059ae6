//! Seeds from the build: a seed base derived from what is being built and why, so fresh seeds
//! differ between builds and between the jobs of one build, yet every one replays from its
//! printed line.
//!
//! The base is [`Seed::path`] of a fixed root over the commit, the CI event, the job and a salt:
//! a merge queue's run (`merge_group`) and a push of the same SHA (`push`) draw different
//! seeds, two jobs of one workflow run draw different seeds, and a fleet that sets
//! `SIM_SEED_SALT` to its run id draws new seeds on every scheduled run of an unchanged SHA.
//! Shards of one job share the base and take positions `k ≡ i (mod n)` of `base, base+1, …`
//! (`SIM_SHARD=i/n`), so the shard index enters every seed and the shards' union is the one
//! range an unsharded run covers.
//!
//! | input  | from                                                    | when unset |
//! |--------|---------------------------------------------------------|------------|
//! | commit | `GITHUB_SHA`, else `git rev-parse HEAD`                 | `unknown`  |
//! | event  | `GITHUB_EVENT_NAME` (`push`, `pull_request`, `merge_group`, `schedule`) | `local` |
//! | job    | `GITHUB_JOB`                                            | `local`    |
//! | salt   | `SIM_SEED_SALT` (a fleet sets its run id)               | empty      |
//!
//! `git rev-parse HEAD` runs in `CARGO_MANIFEST_DIR` (set under `cargo run`/`cargo test`), else
//! the working directory: a shipped binary knows its commit only from `GITHUB_SHA` (Actions
//! sets it in every job; `deploy/Dockerfile` bakes it into the image). With neither, the commit
//! is `unknown` and every such build derives one base: [`BuildBase::warning`] says so.

use std::fmt;

use crate::seed::Seed;

/// The commit a base names when neither `GITHUB_SHA` nor git gives one.
pub const UNKNOWN_COMMIT: &str = "unknown";

/// The seed base a build derives, with what it was derived from (printed, so it can be checked
/// and re-derived).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildBase {
    /// The first seed: seeds are `base, base+1, …` (wrapping).
    pub base: u64,
    /// The commit (full SHA, or `unknown`).
    pub commit: String,
    /// The CI event, or `local`.
    pub event: String,
    /// The CI job, or `local`.
    pub job: String,
    /// `SIM_SEED_SALT`, or empty.
    pub salt: String,
}

impl BuildBase {
    /// The base for these inputs (the same inputs give the same base on every machine).
    pub fn derive(commit: &str, event: &str, job: &str, salt: &str) -> BuildBase {
        // One labelled segment per input (`/` escaped), so an empty input is still a segment and
        // the same words split differently are other inputs.
        let labelled = [("commit", commit), ("event", event), ("job", job), ("salt", salt)]
            .map(|(name, value)| format!("{name}={}", value.replace('/', "%2F")))
            .join("/");
        BuildBase {
            base: Seed(0x5eed_ba5e).path(&labelled).0,
            commit: commit.to_string(),
            event: event.to_string(),
            job: job.to_string(),
            salt: salt.to_string(),
        }
    }

    /// What to say when the base cannot tell builds apart: the commit is `unknown` (no
    /// `GITHUB_SHA`, no git checkout around the working directory: a shipped binary run
    /// elsewhere) and no salt is set, so every build run this way draws the same seeds.
    pub fn warning(&self) -> Option<String> {
        (self.commit == UNKNOWN_COMMIT && self.salt.is_empty()).then(|| {
            "the commit is unknown (no GITHUB_SHA, and no git checkout here), so every build run like this \
             derives this same seed base: set GITHUB_SHA to the commit the binary was built from (or \
             SIM_SEED_SALT to a run id)"
                .to_string()
        })
    }

    /// The seeds `base, base+1, …, base+count-1` (wrapping past `u64::MAX`).
    pub fn seeds(&self, count: u64) -> impl Iterator<Item = Seed> + '_ {
        (0..count).map(|k| Seed(self.base.wrapping_add(k)))
    }
}

impl fmt::Display for BuildBase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = self.commit.get(..12).unwrap_or(&self.commit);
        let salt = if self.salt.is_empty() { "-" } else { &self.salt };
        write!(
            f,
            "seed base {:#018x} ({}) from commit {short}, event {}, job {}, salt {salt}",
            self.base, self.base, self.event, self.job
        )
    }
}

/// This build's seed base, from the environment (see the module docs), read each call.
pub fn build_base() -> BuildBase {
    let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let commit = crate::report::commit().0.clone();
    BuildBase::derive(
        &commit,
        &var("GITHUB_EVENT_NAME").unwrap_or_else(|| "local".to_string()),
        &var("GITHUB_JOB").unwrap_or_else(|| "local".to_string()),
        &var("SIM_SEED_SALT").unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_input_changes_the_base_and_equal_inputs_agree() {
        let a = BuildBase::derive("1a2b", "push", "fleet", "");
        assert_eq!(a, BuildBase::derive("1a2b", "push", "fleet", ""));
        let others = [
            BuildBase::derive("1a2c", "push", "fleet", ""),
            BuildBase::derive("1a2b", "merge_group", "fleet", ""),
            BuildBase::derive("1a2b", "push", "gate", ""),
            BuildBase::derive("1a2b", "push", "fleet", "run-7"),
            // The same words split differently are other inputs.
            BuildBase::derive("1a2b/push", "fleet", "", ""),
        ];
        for other in &others {
            assert_ne!(a.base, other.base, "{other}");
        }
    }

    #[test]
    fn seeds_count_up_from_the_base_and_the_line_names_the_inputs() {
        let b = BuildBase::derive("0123456789abcdef", "schedule", "shard", "42");
        let seeds: Vec<u64> = b.seeds(3).map(|s| s.0).collect();
        assert_eq!(seeds, vec![b.base, b.base.wrapping_add(1), b.base.wrapping_add(2)]);
        let line = b.to_string();
        assert!(line.contains("commit 0123456789ab,"), "{line}");
        assert!(line.contains("event schedule, job shard, salt 42"), "{line}");
        assert!(line.contains(&format!("({})", b.base)), "{line}");
    }

    #[test]
    fn an_unknown_commit_without_a_salt_is_warned_about() {
        let unknown = BuildBase::derive(UNKNOWN_COMMIT, "local", "local", "");
        let warning = unknown.warning().expect("an unknown commit is warned about");
        assert!(warning.contains("set GITHUB_SHA"), "{warning}");
        assert_eq!(
            BuildBase::derive(UNKNOWN_COMMIT, "local", "local", "run-7").warning(),
            None,
            "a salt tells runs apart"
        );
        assert_eq!(BuildBase::derive("1a2b", "push", "fleet", "").warning(), None);
    }
}
