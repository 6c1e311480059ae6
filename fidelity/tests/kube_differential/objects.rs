//! (scenarios to come)

use fidelity::runner::Scenario;

pub fn scenarios() -> Vec<Scenario> {
    vec![]
}
