//! Raw-protocol scenarios about when a member's session runs: what restarts it besides a
//! heartbeat.
//!
//! Kafka's classic group coordinator (`GroupMetadataManager.propagateAssignment`) reschedules the
//! heartbeat expiration of every member it answers in SyncGroup — with the assignment, or with
//! `REBALANCE_IN_PROGRESS` when a rebalance starts — because expirations are ignored while a
//! member waits in SyncGroup. A follower waiting for a leader that never syncs therefore outlives
//! that leader by a full session from the answer, and can still leave by LeaveGroup.

use std::time::Duration;

use fidelity::runner::Ctx;

use crate::support::*;

/// The leader's session: the shortest a group accepts.
const LEADER_SESSION_MS: i32 = SESSION_MS;
/// The follower's session: longer than the leader's, shorter than the two together.
const FOLLOWER_SESSION_MS: i32 = 8_000;
/// Both members' rebalance timeout: the SyncGroup deadline comes after the leader's expiry, and
/// the next round waits for the follower past the check below.
const REBALANCE_MS: i32 = 10_000;

pub async fn a_follower_answered_in_sync_group_outlives_the_leader_that_never_synced(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut a = connect(ctx, "a").await?;
    let mut b = connect(ctx, "b").await?;
    let mut watcher = connect(ctx, "watcher").await?;
    coordinator_ready(&mut a, &g).await?;
    let (a_id, _) = join_alone(ctx, &mut a, &g, None, "a").await?;
    let with_timeouts = |q: kafkasim::kafka_protocol::messages::JoinGroupRequest, session| {
        q.with_session_timeout_ms(session).with_rebalance_timeout_ms(REBALANCE_MS)
    };
    let first =
        send(&mut b, with_timeouts(join_request(&g, "", None, "consumer"), FOLLOWER_SESSION_MS), JOIN_V).await?;
    ctx.note("b: first join", render_join(ctx, &first));
    let b_id = first.member_id.to_string();
    let b_join = async {
        send(&mut b, with_timeouts(join_request(&g, &b_id, None, "consumer"), FOLLOWER_SESSION_MS), JOIN_V).await
    };
    let a_join = async {
        wait_state(&mut watcher, &g, "PreparingRebalance").await?;
        send(&mut a, with_timeouts(join_request(&g, &a_id, None, "consumer"), LEADER_SESSION_MS), JOIN_V).await
    };
    let (b_joined, a_joined) = tokio::join!(b_join, a_join);
    let (b_joined, a_joined) = (b_joined?, a_joined?);
    let joined = tokio::time::Instant::now();
    ctx.note("a rejoins (leader)", render_join(ctx, &a_joined));
    ctx.note("b joins", render_join(ctx, &b_joined));
    // The leader goes silent: no SyncGroup, no heartbeat. b's SyncGroup waits until a's session
    // expires (6 s after the join), then is told to rejoin.
    let generation = b_joined.generation_id;
    ctx.note("b sync, the leader silent", sync(&mut b, sync_request(&g, generation, &b_id, &[])).await?);
    ctx.note("state after b's answer", group_state(&mut watcher, &g).await?);
    // 11 s after the join: past b's session counted from the join (8 s), within the one counted
    // from its answer (6 + 8 s) and within the next round's wait for it (6 + 10 s).
    tokio::time::sleep_until(joined + Duration::from_secs(11)).await;
    ctx.note("describe, 11 s after the join", describe(ctx, &mut watcher, &g).await?);
    ctx.note("b leaves", leave(&mut b, &g, &b_id, None).await?);
    ctx.note("describe after b left", describe(ctx, &mut watcher, &g).await?);
    Ok(())
}
