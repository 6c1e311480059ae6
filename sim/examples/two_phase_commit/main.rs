//! The main job for now: sweep the two-node commit protocol, buggy and fixed, and print the
//! seeds that break it with the command that replays each.
//!
//! ```text
//! cargo run --release -p sim --example two_phase_commit            # 200 seeds each
//! SIM_SEEDS=0..1000 cargo run --release -p sim --example two_phase_commit
//! ```
//!
//! Exits non-zero if the fixed protocol fails any seed or the planted bug is not found.

mod protocol;

use protocol::Variant;
use sim::{Class, Simulation};

fn main() {
    let buggy = Simulation::new("two_phase_commit_buggy").seeds(0..200).run(|ctx| protocol::run(ctx, Variant::Buggy));
    let fixed = Simulation::new("two_phase_commit_fixed").seeds(0..200).run(|ctx| protocol::run(ctx, Variant::Fixed));

    println!("{:<24} {:>6} {:>9} {:>12}  class", "variant", "seeds", "failures", "first seed");
    for (label, report) in [("buggy (planted bug)", &buggy), ("fixed", &fixed)] {
        let first = report.first_failure();
        println!(
            "{:<24} {:>6} {:>9} {:>12}  {}",
            label,
            report.outcomes.len(),
            report.failures().count(),
            first.map_or("-".to_string(), |o| o.seed.to_string()),
            first.and_then(|o| o.failure.as_ref()).map_or("-".to_string(), |f| f.to_string()),
        );
    }
    for outcome in buggy.failures().take(5) {
        println!("  seed {:>4}: {}", outcome.seed, outcome.replay);
    }

    let found = buggy.failures().any(|o| {
        o.failure
            .as_ref()
            .is_some_and(|f| f.class == Class::Correctness && f.oracle.as_deref() == Some("commit-reaches-replica"))
    });
    // Under SIM_ONLY (a replay of one simulation) the other report is empty.
    let ran_both = !buggy.outcomes.is_empty() && !fixed.outcomes.is_empty();
    if !fixed.passed() || (ran_both && !found) {
        eprintln!("two_phase_commit: the fixed protocol failed or the planted bug was not found");
        std::process::exit(1);
    }
}
