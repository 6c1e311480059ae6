//! libFuzzer target: the two-node commit example without its bug (COMMIT resent until
//! acknowledged), the control for `two_phase_commit_buggy`: a crash here is a false alarm of the
//! harness or a bug in the fix.
#![no_main]

#[path = "../../sim/examples/two_phase_commit/protocol.rs"]
#[allow(dead_code)]
mod protocol;

use libfuzzer_sys::fuzz_target;
use protocol::Variant;
use sim::Simulation;

fuzz_target!(|data: &[u8]| {
    let outcome = Simulation::new("two_phase_commit_fixed").run_fuzz(data, |ctx| protocol::run(ctx, Variant::Fixed));
    if let Some(failure) = outcome.failure.as_ref().filter(|f| f.class.fails()) {
        panic!("two_phase_commit_fixed failed: {failure}");
    }
});
