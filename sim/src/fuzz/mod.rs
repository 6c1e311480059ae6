//! Fuzzing: a simulation body fed from an input byte slice (a choice sequence) instead of a seed,
//! a corpus of inputs per target that runs as plain `cargo test` cases, an in-process engine, and
//! a shrinker that makes a failing input small.
//!
//! Every choice a run makes comes from a [`crate::Source`]. Fed from fuzz bytes
//! ([`crate::Source::from_bytes`]) every stream of the run reads the one input in draw order, and
//! once it is used up every draw answers its simplest value (the low end of a range, `false`, the
//! first option): a shorter input is a run with fewer faults, fewer nodes and zero delays, so
//! shrinking an input simplifies the run (the "choice sequence" of Hypothesis, MacIver and
//! Donaldson, ECOOP 2020). The runtime's own randomness (`getrandom`, tokio's RNG) stays keyed
//! from the input's root seed ([`Input::root`]), so a run is a function of the bytes and the root.
//!
//! One line makes a target ([`crate::Simulation::fuzz`]):
//!
//! ```no_run
//! # async fn body(_ctx: sim::Ctx) -> Result<(), sim::Failure> { Ok(()) }
//! sim::Simulation::new("checkout").fuzz(body).assert_passed();
//! ```
//!
//! What it does depends on the environment:
//! - nothing set (the deterministic gate): every entry of the target's corpus,
//!   `fuzz/corpus/<simulation>/` under the package ([`corpus`]), runs as one run; none is a pass.
//! - `SIM_FUZZ=30s`: the in-process engine ([`engine`], [`campaign`]) for that long, seeded from
//!   seed tapes and the corpus; each new failure (by class and oracle) is shrunk ([`shrink`]),
//!   saved under `fuzz/artifacts/<simulation>/` and confirmed in fresh processes like a failing
//!   seed, with a replay line `SIM_FUZZ_INPUT=<file> …`.
//! - `SIM_FUZZ_INPUT=<file>`: that input alone (also in [`crate::Simulation::run`]).
//!
//! A failing seed becomes an input with [`crate::Simulation::tape`]: the bytes its run drew,
//! encoded as the byte feed decodes them, so the tape under the same root replays the seed's run
//! exactly; shrinking the tape is how `minimize` shrinks a seed's failure.
//!
//! Coverage-guided engines (libFuzzer through `libfuzzer-sys`) drive [`crate::Simulation::run_fuzz`]
//! from a `fuzz_target!`; see the fuzzing page of the docs for the engines evaluated on the stable
//! toolchain and the commands.

pub mod campaign;
pub mod corpus;
pub mod engine;
mod exec;
pub mod shrink;
mod target;

pub use crate::input::Input;
pub use corpus::Corpus;
pub use engine::{Engine, Mutator};
pub use shrink::{Shrunk, shrink};
