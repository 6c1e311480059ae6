//! The Kafka differential suite: every scenario runs against kafkasim (a fresh loopback broker
//! each) and against a real Apache Kafka broker (one, shared; names are unique per run), and the
//! normalized observations are compared step by step.
//!
//! The real broker comes from `KAFKA_BOOTSTRAP`, a container (`--features containers`, when a
//! Docker engine answers), or a local process (`fidelity/scripts/kafka-local.sh`: Java 17 and
//! jars fetched once with `mvn`). Without one, the suite prints `skipped: no counterpart (…)` and
//! counts every scenario as skipped; with `FIDELITY_REQUIRE=1` that is a failure.
//!
//! `cargo test -p fidelity --test kafka_differential -- FILTER` runs the scenarios whose names
//! contain FILTER; `--list` lists them. `FIDELITY_JOBS` sets how many run at once (default 6).
//! The main function is `Suite::main`, shared with the Kubernetes suite.

mod clients;
mod compaction;
mod configs;
mod groups;
mod retention;
mod sessions;
mod support;
mod transactions;
mod wire;

use std::process::ExitCode;

use fidelity::runner::{Scenario, Suite};
use fidelity::{Known, scenario};

fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(wire::produce_acks_0_is_unanswered_and_stored),
        scenario!(wire::produce_acks_1_assigns_consecutive_offsets),
        scenario!(wire::produce_acks_all_assigns_consecutive_offsets),
        scenario!(wire::produce_acks_0_with_an_error_closes_the_connection),
        scenario!(wire::fetch_from_mid_batch_returns_the_whole_batch),
        scenario!(wire::fetch_at_and_past_the_high_watermark),
        scenario!(wire::fetch_byte_limits_bound_all_but_the_first_batch),
        scenario!(wire::unknown_topic_and_partition),
        scenario!(wire::list_offsets_earliest_latest_and_by_timestamp),
        scenario!(wire::list_offsets_refuses_max_timestamp_below_v7_and_duplicate_partitions),
        scenario!(wire::idempotent_duplicate_batch_gets_the_original_offset),
        scenario!(wire::idempotent_sequence_gap_is_out_of_order),
        scenario!(wire::idempotent_first_sequence_need_not_be_zero),
        scenario!(wire::idempotent_epochs_fence_older_ones),
        scenario!(wire::idempotent_producer_id_never_allocated),
        scenario!(wire::create_topics_errors),
        scenario!(wire::create_topics_refuses_colliding_and_duplicate_names),
        scenario!(wire::delete_topics_then_recreate),
        scenario!(
            wire::metadata_auto_creates_a_topic,
            Some(Known { id: "auto-created-topic-is-usable-at-once", steps: &["first metadata with auto-creation"] })
        ),
        scenario!(wire::metadata_describes_the_cluster),
        scenario!(wire::too_new_api_versions_is_answered_at_v0),
        scenario!(wire::unsupported_version_of_another_request_closes_the_connection),
        scenario!(wire::produce_with_invalid_acks_or_a_corrupt_batch),
        scenario!(wire::fetch_long_poll_returns_when_data_arrives),
        scenario!(
            wire::delete_records_moves_the_log_start,
            Some(Known {
                id: "delete-records-is-not-served",
                steps: &["delete records below offset 2", "earliest offset"]
            })
        ),
        scenario!(wire::create_topics_with_configs),
        scenario!(configs::create_topics_validates_configs),
        scenario!(configs::describe_configs_of_a_topic),
        scenario!(configs::incremental_alter_configs_operations),
        scenario!(configs::alter_configs_replaces_every_override),
        scenario!(configs::produce_follows_the_topics_max_message_bytes),
        scenario!(configs::consumer_offsets_is_an_internal_topic),
        scenario!(configs::transaction_state_is_an_internal_topic),
        scenario!(wire::api_versions_must_name_the_client_software),
        scenario!(wire::init_producer_id_without_and_with_an_empty_transactional_id),
        scenario!(wire::unknown_api_key_closes_the_connection),
        scenario!(groups::find_coordinator_for_groups_and_transactions),
        scenario!(groups::find_coordinator_for_a_transactional_id),
        scenario!(transactions::transactions_commit_abort_and_read_committed),
        scenario!(transactions::transactions_fence_the_previous_producer),
        scenario!(transactions::txn_offset_commit_applies_on_commit),
        scenario!(transactions::an_open_transaction_times_out),
        scenario!(groups::join_sync_heartbeat_leave),
        scenario!(groups::second_member_triggers_a_rebalance),
        scenario!(groups::commit_during_a_rebalance_is_rebalance_in_progress),
        scenario!(groups::commit_with_a_stale_generation_is_illegal_generation),
        scenario!(groups::commit_from_an_unknown_member_is_unknown_member_id),
        scenario!(groups::commit_from_an_expired_member_is_unknown_member_id),
        scenario!(groups::session_timeout_expiry_rebalances_the_survivor),
        scenario!(groups::static_member_rejoin_fences_the_old_member_id),
        scenario!(groups::heartbeat_and_commit_while_the_leader_has_not_synced),
        scenario!(groups::leader_leaving_makes_the_follower_rejoin),
        scenario!(groups::a_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout),
        scenario!(groups::join_group_v3_needs_no_member_id_round),
        scenario!(groups::describe_group_members_in_detail),
        scenario!(groups::commit_metadata_round_trips),
        scenario!(groups::commit_of_an_unknown_topic_is_refused_before_group_checks),
        scenario!(groups::offset_fetch_of_an_unknown_group),
        scenario!(groups::leave_of_an_unknown_group_answers_each_member),
        scenario!(groups::join_errors),
        scenario!(groups::describe_and_list_groups),
        scenario!(sessions::a_follower_answered_in_sync_group_outlives_the_leader_that_never_synced),
        scenario!(retention::retention_ms_deletes_segments_older_than_it),
        scenario!(retention::retention_bytes_deletes_the_oldest_segments_above_it),
        scenario!(retention::log_append_time_replaces_the_producers_timestamps),
        scenario!(compaction::compaction_keeps_each_keys_last_record_and_tombstones),
        scenario!(compaction::compaction_drops_tombstones_past_delete_retention_ms),
        scenario!(compaction::compaction_keeps_a_producers_last_batch_as_an_empty_header),
        scenario!(clients::rdkafka_produce_acks_0_then_consume),
        scenario!(clients::rdkafka_produce_acks_1_then_consume),
        scenario!(clients::rdkafka_produce_acks_all_then_consume),
        scenario!(clients::rdkafka_idempotent_producer_delivers_in_order_once),
        scenario!(clients::rdkafka_auto_offset_reset_earliest_latest_and_error),
        scenario!(clients::rdkafka_out_of_range_committed_offset_is_reset),
        scenario!(clients::rdkafka_group_commit_and_resume),
        scenario!(clients::rdkafka_commit_metadata_round_trips),
        scenario!(clients::rdkafka_cooperative_sticky_incremental_rebalance),
        scenario!(clients::rdkafka_watermarks_and_offsets_for_times),
        scenario!(clients::rdkafka_admin_creates_and_deletes_topics),
    ]
}

fn start_kafkasim() -> std::io::Result<(Box<dyn std::any::Any + Send>, String)> {
    // As the counterparts are configured (kafka-local.sh, the container): no initial rebalance
    // delay, retention checked every second, the log cleaner looking every second.
    let every_second = std::time::Duration::from_secs(1);
    let builder = kafkasim::Cluster::builder()
        .initial_rebalance_delay(std::time::Duration::ZERO)
        .retention_check(every_second, every_second)
        .log_cleaner_backoff(every_second);
    let broker = kafkasim::Broker::start_local_with(builder)?;
    let address = broker.bootstrap_servers().to_string();
    Ok((Box::new(broker), address))
}

/// The known-differences page.
const KNOWN_PAGE: &str = include_str!("../../../docs/fidelity/kafka.md");

fn main() -> ExitCode {
    // Fixed from the real clock before any scenario runs (a simulation's clock could differ).
    support::ts_base();
    let suite = Suite {
        name: "kafka",
        fake_name: "kafkasim",
        real_name: "kafka",
        start_fake: start_kafkasim,
        fake_on_counterpart: false,
        scenarios: scenarios(),
    };
    suite.main(KNOWN_PAGE, "docs/fidelity/kafka.md", fidelity::kafka::counterpart)
}
