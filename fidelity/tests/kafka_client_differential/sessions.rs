//! The client's own session timer: when a consumer gives up its member id.
//!
//! librdkafka checks its session timeout (`rd_kafka_cgrp_session_timeout_check`: no successful
//! Heartbeat or SyncGroup for `session.timeout.ms`, then the member id is dropped and the
//! assignment lost) from `rd_kafka_cgrp_serve` in join state STEADY only. A member waiting in
//! SyncGroup longer than its session (the leader never syncs) and then told
//! `REBALANCE_IN_PROGRESS` rejoins with the member id it has, so its LeaveGroup at close names
//! the id the coordinator knows.

use kafkasim::kafka_protocol::messages::{DescribeGroupsRequest, GroupId};

use crate::support::{Conn, DESCRIBE_V, R, s, send};

/// The member id the group lists for `client`, if any.
async fn member_id_of(c: &mut Conn, group: &str, client: &str) -> R<Option<String>> {
    let r = send(c, DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]), DESCRIBE_V).await?;
    Ok(r.groups[0].members.iter().find(|m| m.client_id.as_str() == client).map(|m| m.member_id.to_string()))
}

per_client! {
    [
        a_sync_group_answered_after_the_session_timeout_keeps_the_member_id,
    ]

    use std::time::Duration;

    use crate::support::{
        JOIN_V, coordinator_ready, describe, join, join_request, render_join, send, sync, sync_request, wait_state,
    };

    /// The raw leader's session: longer than the client's (6 s), so the client's SyncGroup
    /// waits past its own session timeout before the leader expires.
    const LEADER_SESSION_MS: i32 = 9_000;

    pub async fn a_sync_group_answered_after_the_session_timeout_keeps_the_member_id(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let g = ctx.name("g");
        let mut leader = connect(ctx, "leader").await?;
        let mut watcher = connect(ctx, "watcher").await?;
        coordinator_ready(&mut leader, &g).await?;
        let leader_join = |id: &str| {
            join_request(&g, id, None, "consumer")
                .with_session_timeout_ms(LEADER_SESSION_MS)
                .with_rebalance_timeout_ms(LEADER_SESSION_MS)
        };
        let j = join(ctx, &mut leader, "the raw leader joins", leader_join("")).await?;
        let leader_id = j.member_id.to_string();
        ctx.note(
            "the raw leader syncs",
            sync(&mut leader, sync_request(&g, j.generation_id, &leader_id, &[(&leader_id, &[0])])).await?,
        );
        let mut config = consumer_config(ctx, &g, "earliest");
        config.set("client.id", "c").set("partition.assignment.strategy", "range");
        let mut c = Member::subscribed(&config, &t, false)?;
        // c's JoinGroup starts a rebalance; the leader rejoins, then goes silent (no SyncGroup,
        // no heartbeat): c's SyncGroup waits until the leader's session expires.
        let rejoined = {
            let rejoin = async {
                wait_state(&mut watcher, &g, "PreparingRebalance").await?;
                send(&mut leader, leader_join(&leader_id), JOIN_V).await
            };
            tokio::pin!(rejoin);
            loop {
                let mut members = [&mut c];
                tokio::select! {
                    r = &mut rejoin => break r?,
                    () = pump(&mut members, Duration::from_millis(100)) => {}
                }
            }
        };
        ctx.note("the raw leader rejoins", render_join(ctx, &rejoined));
        let first = super::member_id_of(&mut watcher, &g, "c").await?.ok_or("c is not in the group")?;
        pump_until(&mut [&mut c], "c assigned after the leader expired", |ms| ms[0].assigned() == vec![0]).await?;
        let now = super::member_id_of(&mut watcher, &g, "c").await?;
        ctx.note("c's member id is the one it waited in SyncGroup with", format!("{}", now.as_deref() == Some(first.as_str())));
        ctx.note("c's callbacks", c.take_rebalances());
        ctx.note("describe", describe(ctx, &mut watcher, &g).await?);
        close(c.consumer).await;
        ctx.note("describe after c closed", describe(ctx, &mut watcher, &g).await?);
        Ok(())
    }
}
