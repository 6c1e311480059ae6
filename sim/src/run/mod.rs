//! The public entry: a [`Simulation`] run over seeds, and the [`Ctx`] each run's body gets.
//!
//! A test calls [`Simulation::run`] once with an async body. For each seed:
//! 1. one unbuffered stderr line gives the seed, the commit and the command that replays it —
//!    before the run, so it survives an abort (the full build identity is printed once per sweep);
//! 2. a fresh OS thread arms the interposition, builds a paused `current_thread` runtime seeded
//!    from the seed, and runs the body next to the harness tasks (the [`crate::Driver`] and the
//!    deadlock watcher);
//! 3. the run ends when the body returns (at the end of that fake instant: the tasks already
//!    woken at it run first, without fake time advancing; then the final checks), an oracle calls
//!    [`Ctx::fail`], nothing runs for the horizon (*deadlock*), the fake-time limit passes
//!    (*liveness*), code panics (*panic*), or the wall-clock watchdog fires (*inconclusive*,
//!    saying whether the thread was busy, blocked, or still advancing fake time);
//! 4. the outcome carries the history hash, the schedule hash and what the interposition answered.
//!
//! Panics are caught per run, so a sweep reports every failing seed. Each failing seed is then
//! re-run in fresh processes (default 3, `SIM_CONFIRM`) and labelled "replays exactly" or
//! "replays k of n". `SIM_REPEAT=k` runs each seed k times in-process and `SIM_REPEAT_PROCESSES=n`
//! runs the whole sweep again in n fresh processes; any difference in history or schedule is a
//! *replay diverged* failure naming the first divergent event (a failing seed that a confirming
//! process did not reproduce too). Every fresh process first makes its own number of throw-away
//! runs, so process-wide state (a counter in a static) cannot make a leaky seed look exact.
//!
//! Environment (each overrides the builder; a value that does not parse is an error, never
//! ignored):
//!
//! | variable | meaning |
//! |---|---|
//! | `SIM_SEED` | one seed (decimal or `0x` hex); wins over `SIM_SEEDS` |
//! | `SIM_SEEDS` | `0..500`, `0..=9`, `random:200`, or a list `1,5,9` (at most [`SEEDS_MAX`]) |
//! | `SIM_SHARD` | `i/n`: run only the seeds whose position is `i` modulo `n` |
//! | `SIM_MODE` | `replay` (default) or `explore` |
//! | `SIM_SWARM` | pinned swarm dimensions: `latency=0ms,replicas=1` |
//! | `SIM_DROP_FAULTS` | fault numbers `2,5`: those faults fire and do nothing ([`crate::fault`]) |
//! | `SIM_MAX_OPS` | each workload run starts at most this many operations ([`crate::workload`]) |
//! | `SIM_REPEAT` | runs per seed in this process (self-check) |
//! | `SIM_REPEAT_PROCESSES` | fresh processes re-running the sweep (self-check) |
//! | `SIM_CONFIRM` | fresh processes re-running each failing seed (default 3); one that does not reproduce it makes the seed *replay diverged* |
//! | `SIM_JOBS` | seeds run in parallel (default: available cores) |
//! | `SIM_WATCHDOG` | wall-clock bound per run (default 60s) |
//! | `SIM_SEED_LINES` | `0`/`off`: print neither the sweep's first line (name, seed count, identity) nor the line before each seed |
//! | `SIM_JSON` | append one JSON line per seed to this file (relative to the working directory: cargo runs tests in the package's directory) |
//! | `SIM_TRACE` | `all`: write the trace of every seed, not only failures |
//! | `SIM_LOG` | the trace's `tracing` filter (default `info`) |
//! | `SIM_ONLY` | run only the simulation with this name (others in the binary say they were skipped and return empty reports) |

mod config;
mod ctx;
pub(crate) mod once;
pub(crate) mod simulation;
pub(crate) mod sweep;

pub use config::{ConfigError, Mode, SEEDS_MAX, Seeds, parse_shard, seeds_from_env, shard_from_env};
pub(crate) use config::{parse_drop_faults, parse_max_ops};
#[cfg(test)]
pub(crate) use ctx::Shared;
pub use ctx::{Ctx, NetConfigTooLate};
pub use simulation::Simulation;
