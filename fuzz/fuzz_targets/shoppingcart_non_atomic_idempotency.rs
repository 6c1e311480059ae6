//! libFuzzer target: the shopping-cart walkthrough with its planted non-atomic idempotency check,
//! fed from the fuzz input's bytes by `Simulation::run_fuzz`. A failed run panics (a crash).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sim::Simulation;
use walkthroughs::shoppingcart::{self, Variant};

fuzz_target!(|data: &[u8]| {
    let variant = Variant::NonAtomicIdempotency;
    let outcome = Simulation::new(variant.simulation()).run_fuzz(data, move |ctx| shoppingcart::run(ctx, variant));
    if let Some(failure) = outcome.failure.as_ref().filter(|f| f.class.fails()) {
        panic!("{} failed: {failure}", variant.simulation());
    }
});
