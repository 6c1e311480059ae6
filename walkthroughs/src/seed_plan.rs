//! Where the main job's seeds come from, checked before any sweep and printed as its header.
//!
//! - `--base-seed N` or `--base-seed build` ([`sim::seed_base`]: from the commit, CI event, CI
//!   job and `SIM_SEED_SALT`), `--seeds` per variant and round, `--budget` rounds; a build base
//!   goes into every JSON line as `seed_base` ([`sim::Simulation::seed_base`]).
//! - `SIM_SEED` (a replay line), `SIM_SEEDS` (a list or range; the harness's own fresh
//!   processes re-run failing seeds this way) or `SIM_FUZZ_INPUT`: as in every sweep (the
//!   environment table of `sim::run`), they choose the seeds and win over the builder, here over
//!   `--seeds`, `--base-seed`, `--budget` and `--rounds`. The job runs them once and says so.
//! - `SIM_SHARD=i/n`: each sweep runs its share (positions `i` mod `n`); ignored under `SIM_SEED`
//!   (a replay runs its seed in any shell).
//!
//! A bad `SIM_SHARD`, `SIM_SEEDS` or `SIM_SEED` is one line and exit 2 here, before anything
//! runs; a `cargo test` simulation given one panics with the same message (how a test fails).

use sim::seed_base::BuildBase;

/// `--base-seed`: a number or the build's seed base.
#[derive(Clone, Debug)]
pub enum Base {
    Seed(u64),
    Build,
}

/// Parses `--base-seed`.
pub fn parse_base(text: &str) -> Result<Base, String> {
    match text.trim() {
        "build" => Ok(Base::Build),
        t => t.parse::<sim::Seed>().map(|s| Base::Seed(s.0)).map_err(|e| format!("{e} (or `build`)")),
    }
}

/// Parses `--seeds` and `--rounds`: a count of at least 1 (0 would run nothing and pass).
pub fn parse_count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("0 runs nothing: give 1 or more".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a count: give 1 or more")),
    }
}

/// What chose the seeds.
#[derive(Clone, Debug)]
pub enum Source {
    /// `--base-seed`: round `r` of `--seeds` seeds starts at `base + r·seeds`.
    Base {
        base: u64,
        /// The build's inputs, for `--base-seed build`.
        build: Option<BuildBase>,
    },
    /// A variable that wins over the arguments (`SIM_SEED`, `SIM_SEEDS`, `SIM_FUZZ_INPUT`).
    Env { var: &'static str, value: String },
}

/// The main job's seeds and shard.
#[derive(Clone, Debug)]
pub struct Plan {
    pub source: Source,
    /// `SIM_SHARD`'s `(i, n)`, when it applies.
    pub shard: Option<(usize, usize)>,
    /// `SIM_SHARD`'s text when `SIM_SEED` makes the sweeps ignore it.
    pub shard_ignored: Option<String>,
}

fn env_text(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

impl Plan {
    /// Reads the environment (checking what the sweeps would refuse) and `--base-seed`.
    ///
    /// # Errors
    /// One line naming the variable and its value.
    pub fn new(base: &Base) -> Result<Plan, String> {
        let shard = sim::run::shard_from_env().map_err(|e| e.to_string())?;
        let seed = env_text("SIM_SEED");
        if let Some(text) = &seed {
            text.parse::<sim::Seed>().map_err(|e| format!("SIM_SEED={text:?}: {e}"))?;
        }
        let seeds = sim::run::seeds_from_env().map_err(|e| e.to_string())?;
        let source = match (seed, seeds, env_text("SIM_FUZZ_INPUT")) {
            (Some(value), _, _) => Source::Env { var: "SIM_SEED", value },
            (None, Some(_), _) => Source::Env { var: "SIM_SEEDS", value: env_text("SIM_SEEDS").unwrap_or_default() },
            (None, None, Some(value)) => Source::Env { var: "SIM_FUZZ_INPUT", value },
            (None, None, None) => match base {
                Base::Seed(seed) => Source::Base { base: *seed, build: None },
                Base::Build => {
                    let build = sim::seed_base::build_base();
                    Source::Base { base: build.base, build: Some(build) }
                }
            },
        };
        let replay = matches!(&source, Source::Env { var: "SIM_SEED", .. });
        let shard_ignored = env_text("SIM_SHARD").filter(|_| replay);
        Ok(Plan { source, shard, shard_ignored })
    }

    /// Whether a variable chose the seeds: each variant runs them once, whatever the arguments.
    pub fn seeds_from_env(&self) -> bool {
        matches!(self.source, Source::Env { .. })
    }

    /// The first seed of round 0 (`--base-seed`'s; unused when a variable chose the seeds).
    pub fn base(&self) -> u64 {
        match &self.source {
            Source::Base { base, .. } => *base,
            Source::Env { .. } => 0,
        }
    }

    /// The build base each JSON line names, under `--base-seed build`.
    pub fn line_seed_base(&self) -> Option<u64> {
        match &self.source {
            Source::Base { build: Some(b), .. } => Some(b.base),
            _ => None,
        }
    }

    /// The header's lines: where the seeds come from, a warning when the build base cannot tell
    /// builds apart, the shard.
    pub fn header(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.source {
            Source::Base { base, build: None } => lines.push(format!("seed base {base} (--base-seed)")),
            Source::Base { build: Some(build), .. } => {
                lines.push(build.to_string());
                if let Some(warning) = build.warning() {
                    lines.push(format!("warning: {warning}"));
                }
            }
            Source::Env { var, value } => {
                let what = match *var {
                    "SIM_SEED" => "this seed (a replay line)",
                    "SIM_FUZZ_INPUT" => "this fuzz input",
                    _ => "these seeds",
                };
                lines.push(format!(
                    "{var}={value}: each variant runs {what} once; it wins over --seeds, --base-seed, --budget and \
                     --rounds"
                ));
            }
        }
        if let Some((i, n)) = self.shard {
            let of = if self.seeds_from_env() { "these seeds" } else { "each round's seeds" };
            lines.push(format!("shard {i}/{n} (SIM_SHARD): of {of}, those at positions {i} mod {n}"));
        }
        if let Some(text) = &self.shard_ignored {
            lines.push(format!("SIM_SHARD={text} is not applied: SIM_SEED runs its one seed"));
        }
        lines
    }
}
