//! libFuzzer target: the two-node commit example with its planted bug (a COMMIT sent once),
//! fed from the fuzz input's bytes by `Simulation::run_fuzz`. A failed run panics, which
//! libFuzzer reports as a crash and saves; `fuzz/run.sh` builds and runs it.
#![no_main]

#[path = "../../sim/examples/two_phase_commit/protocol.rs"]
#[allow(dead_code)]
mod protocol;

use libfuzzer_sys::fuzz_target;
use protocol::Variant;
use sim::Simulation;

fuzz_target!(|data: &[u8]| {
    let outcome = Simulation::new("two_phase_commit_buggy").run_fuzz(data, |ctx| protocol::run(ctx, Variant::Buggy));
    if let Some(failure) = outcome.failure.as_ref().filter(|f| f.class.fails()) {
        panic!("two_phase_commit_buggy failed: {failure}");
    }
});
