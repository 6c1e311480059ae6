//! The Kafka client differential suite: every scenario runs through rdkafka (librdkafka) and
//! through kafkasim::rdkafka, both against the same real Apache Kafka broker, and what the
//! application observed (deliveries, records read, assignments per generation, rebalance and
//! commit callbacks, commit results, errors) is compared step by step.
//!
//! Each scenario is written once and expanded once per client (`per_client!`): a module with
//! `use rdkafka as kafka;` and one with `use kafkasim::rdkafka as kafka;`, which is how a
//! service switches. Where rdkafka blocks and ours is `async` the scenario writes
//! `blocking!(call)` (see `kit`). Scenarios pick their client by `Ctx::side`: `Real` is rdkafka,
//! `Fake` is kafkasim::rdkafka.
//!
//! The broker comes from `KAFKA_BOOTSTRAP`, a container or a local process, as for the Kafka
//! suite (`fidelity::kafka::counterpart`). `cargo test -p fidelity --test
//! kafka_client_differential -- FILTER` runs the scenarios whose names contain FILTER; `--list`
//! lists them. Known differences are on `docs/fidelity/kafka-client.md`.

#[path = "../kafka_differential/support.rs"]
#[allow(dead_code, unused_imports)]
mod support;

mod kit;

/// Expands a scenario module's items once per client, and for each scenario named in the list a
/// function that runs it through the client `ctx.side` names.
macro_rules! per_client {
    ([$($name:ident),* $(,)?] $($body:tt)*) => {
        /// Through rdkafka (librdkafka).
        pub mod real {
            #[allow(unused_imports)]
            use rdkafka as kafka;
            #[allow(unused_imports)]
            use crate::kit::real::*;
            #[allow(unused_imports)]
            use crate::kit::in_place as blocking;
            $($body)*
        }
        /// Through kafkasim::rdkafka.
        pub mod sim {
            #[allow(unused_imports)]
            use kafkasim::rdkafka as kafka;
            #[allow(unused_imports)]
            use crate::kit::sim::*;
            #[allow(unused_imports)]
            use crate::kit::awaited as blocking;
            $($body)*
        }
        $(
            pub async fn $name(ctx: &fidelity::runner::Ctx) -> Result<(), String> {
                match ctx.side {
                    fidelity::runner::Side::Real => real::$name(ctx).await,
                    fidelity::runner::Side::Fake => sim::$name(ctx).await,
                }
            }
        )*
    };
}

mod groups;
mod offsets;
mod producing;
mod sessions;

use std::process::ExitCode;

use fidelity::runner::{Scenario, Suite};
use fidelity::{Known, scenario};

fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(producing::produce_acks_0_then_consume),
        scenario!(producing::produce_acks_1_then_consume),
        scenario!(producing::produce_acks_all_then_consume),
        scenario!(producing::idempotent_producer_delivers_in_order_once),
        scenario!(producing::message_accessors_round_trip),
        scenario!(offsets::auto_offset_reset_earliest_latest_and_error),
        scenario!(offsets::out_of_range_committed_offset_is_reset),
        scenario!(offsets::group_commit_and_resume),
        scenario!(offsets::commit_metadata_round_trips),
        scenario!(offsets::watermarks_and_offsets_for_times),
        scenario!(
            offsets::commit_message_store_offset_and_consumer_state,
            Some(Known {
                id: "async-commit-callback-is-served-by-recv",
                steps: &["commit callbacks after the async commit"]
            })
        ),
        scenario!(offsets::commit_of_a_partition_not_assigned),
        scenario!(offsets::seek_pause_and_resume),
        scenario!(groups::cooperative_sticky_incremental_rebalance),
        scenario!(groups::eager_range_rebalance_two_then_three),
        scenario!(groups::roundrobin_assignment),
        scenario!(groups::auto_commit_on_close_and_by_interval),
        scenario!(groups::member_leaving_gives_the_other_everything),
        scenario!(groups::static_member_restart_keeps_its_assignment),
        scenario!(groups::max_poll_interval_exceeded_loses_the_assignment),
        scenario!(groups::late_commit_of_a_member_that_left_is_refused),
        scenario!(groups::unsubscribe_revokes_and_subscribe_rejoins),
        scenario!(groups::subscribe_to_a_missing_topic),
        scenario!(sessions::a_sync_group_answered_after_the_session_timeout_keeps_the_member_id),
    ]
}

/// Unused: both sides run against the counterpart (`fake_on_counterpart`).
fn no_fake() -> std::io::Result<(Box<dyn std::any::Any + Send>, String)> {
    Err(std::io::Error::other("the client suite runs both clients against the counterpart"))
}

/// The known-differences page.
const KNOWN_PAGE: &str = include_str!("../../../docs/fidelity/kafka-client.md");

fn main() -> ExitCode {
    // Fixed from the real clock before any scenario runs (a simulation's clock could differ).
    support::ts_base();
    let suite = Suite {
        name: "kafka-client",
        fake_name: "kafkasim::rdkafka",
        real_name: "rdkafka",
        start_fake: no_fake,
        fake_on_counterpart: true,
        scenarios: scenarios(),
    };
    suite.main(KNOWN_PAGE, "docs/fidelity/kafka-client.md", fidelity::kafka::counterpart)
}
