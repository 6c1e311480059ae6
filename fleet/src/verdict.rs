//! What the fleet was told to expect, and the verdict: each signature's [`Status`], the canaries
//! found or missing, and the exit code.
//!
//! - `--expected SIMULATION`: that simulation's failures are planted bugs (listed, not new).
//! - `--known FILE`: one signature per line (blank lines and lines starting with `#` skipped; a
//!   signature itself may contain `#`, so there are no trailing comments): listed as known.
//! - `--canary SIMULATION[:ORACLE]`: that simulation must fail at least once (with that oracle,
//!   when named) or the fleet failed to find its planted bug: exit 2. A canary is expected
//!   ([`crate::canary`]: its syntax, and what is said when it is not found).
//!
//! Exit 1 when any signature is new, 2 when a canary is missing (2 wins over 1), else 0.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use crate::canary::{Canary, CanaryFound};
pub use crate::merge::Status;
use crate::merge::{Signature, SimulationTotals};
use crate::{Error, Exit};

/// What the merge is told to expect.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// `--canary`.
    pub canaries: Vec<Canary>,
    /// `--expected` (canaries' simulations are added).
    pub expected: BTreeSet<String>,
    /// The signatures of `--known` files.
    pub known: BTreeSet<String>,
}

impl Policy {
    /// The policy of these options; `known` files are read.
    ///
    /// Errors: [`Error::Io`] for a `--known` file that cannot be read.
    pub fn new(canaries: Vec<Canary>, expected: Vec<String>, known: &[impl AsRef<Path>]) -> Result<Policy, Error> {
        let mut policy = Policy { expected: expected.into_iter().collect(), ..Policy::default() };
        policy.expected.extend(canaries.iter().map(|c| c.simulation.clone()));
        policy.canaries = canaries;
        for file in known {
            let file = file.as_ref();
            let text = std::fs::read_to_string(file).map_err(Error::io(file))?;
            policy.known.extend(parse_known(&text));
        }
        Ok(policy)
    }

    /// The status of a signature.
    pub fn status(&self, signature: &Signature) -> Status {
        if !signature.diverged && self.canaries.iter().any(|c| c.matches(signature)) {
            Status::Canary
        } else if !signature.diverged && self.expected.contains(&signature.simulation) {
            Status::Expected
        } else if self.known.contains(&signature.signature) {
            Status::Known
        } else {
            Status::New
        }
    }
}

/// The signatures of a `--known` file's text.
pub fn parse_known(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string)
}

/// The merge's verdict.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    /// Signatures with status new.
    pub new: usize,
    /// Each canary, found or not.
    pub canaries: Vec<CanaryFound>,
}

impl Verdict {
    /// The verdict over signatures whose status is already set; `simulations` (the merge's totals
    /// per simulation) explain a canary not found.
    pub fn of(policy: &Policy, signatures: &[Signature], simulations: &BTreeMap<String, SimulationTotals>) -> Verdict {
        let canaries = policy.canaries.iter().map(|c| CanaryFound::of(c, signatures, simulations)).collect();
        Verdict { new: signatures.iter().filter(|s| s.status == Status::New).count(), canaries }
    }

    /// The canaries not found.
    pub fn missing(&self) -> impl Iterator<Item = &CanaryFound> {
        self.canaries.iter().filter(|c| c.failures == 0)
    }

    /// 2 when a canary is missing, else 1 when a signature is new, else 0.
    pub fn exit(&self) -> Exit {
        if self.missing().next().is_some() {
            Exit::CanaryMissing
        } else if self.new > 0 {
            Exit::New
        } else {
            Exit::Clean
        }
    }
}
