//! Raw-protocol scenarios about the classic consumer group protocol and offset commits.

use std::time::Duration;

use fidelity::runner::Ctx;
use kafkasim::kafka_protocol::messages::*;

use crate::support::*;

/// A topic to commit offsets of: Kafka refuses commits of topics it does not know before the
/// group coordinator sees them.
async fn commit_topic(ctx: &Ctx) -> R<String> {
    let t = ctx.name("t");
    let mut c = connect(ctx, "setup").await?;
    create_ready_topic(&mut c, &t, 1).await?;
    Ok(t)
}

pub async fn commit_of_an_unknown_topic_is_refused_before_group_checks(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let missing = ctx.name("missing");
    let mut c = connect(ctx, "member").await?;
    coordinator_ready(&mut c, &g).await?;
    let (member, generation) = join_alone(ctx, &mut c, &g, None, "a").await?;
    ctx.note(
        "member commits an unknown topic",
        commit(&mut c, commit_request(&g, generation, &member, None, &missing, 0, 1, None)).await?,
    );
    ctx.note(
        "a stranger commits an unknown topic",
        commit(&mut c, commit_request(&g, generation + 5, "ghost", None, &missing, 0, 1, None)).await?,
    );
    let both = commit_request(&g, generation + 5, "ghost", None, &t, 0, 1, None);
    let mut topics = both.topics.clone();
    topics.extend(commit_request(&g, generation + 5, "ghost", None, &missing, 0, 1, None).topics);
    let r = send(&mut c, both.with_topics(topics), COMMIT_V).await?;
    // Kafka lists the unknown topics first; clients match answers by name.
    let mut codes: Vec<String> = r
        .topics
        .iter()
        .map(|x| {
            format!(
                "{}: {}",
                if x.name.0.as_str() == t { "known" } else { "unknown" },
                code(x.partitions[0].error_code)
            )
        })
        .collect();
    codes.sort();
    ctx.note("a stranger commits a known and an unknown topic", codes.join(" / "));
    ctx.note(
        "member commits partition 9 of a 1-partition topic",
        commit(&mut c, commit_request(&g, generation, &member, None, &t, 9, 1, None)).await?,
    );
    ctx.note("fetch partition 9", offset_fetch(&mut c, &g, &t, 9).await?);
    ctx.note("fetch the unknown topic", offset_fetch(&mut c, &g, &missing, 0).await?);
    Ok(())
}

pub async fn find_coordinator_for_groups_and_transactions(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut c = connect(ctx, "c").await?;
    let (found, node) = find_coordinator(&mut c, &g, 0, READY_TIMEOUT).await?;
    ctx.note("group coordinator", format!("{found} node={}", ctx.alias("node", node.to_string())));
    let r = send(&mut c, MetadataRequest::default().with_topics(Some(vec![])), METADATA_V).await?;
    ctx.note("metadata's broker", ctx.alias("node", r.brokers[0].node_id.0.to_string()));
    let q = FindCoordinatorRequest::default().with_key_type(5).with_coordinator_keys(vec![s(&g)]);
    let r = send(&mut c, q, FIND_COORDINATOR_V).await?;
    ctx.note(
        "key type 5 (none such)",
        format!("{} / {}", code(r.error_code), r.coordinators.first().map(|k| code(k.error_code)).unwrap_or_default()),
    );
    Ok(())
}

pub async fn find_coordinator_for_a_transactional_id(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "c").await?;
    let (found, node) = find_coordinator(&mut c, &ctx.name("txn"), 1, Duration::from_secs(10)).await?;
    ctx.note("transaction coordinator", format!("{found} node={}", ctx.alias("node", node.to_string())));
    Ok(())
}

pub async fn join_sync_heartbeat_leave(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut c = connect(ctx, "member").await?;
    coordinator_ready(&mut c, &g).await?;
    let (member, generation) = join_alone(ctx, &mut c, &g, None, "a").await?;
    ctx.note("heartbeat", heartbeat(&mut c, &g, generation, &member, None).await?);
    ctx.note("describe", describe(ctx, &mut c, &g).await?);
    ctx.note("leave", leave(&mut c, &g, &member, None).await?);
    ctx.note("describe after leave", describe(ctx, &mut c, &g).await?);
    ctx.note("heartbeat after leave", heartbeat(&mut c, &g, generation, &member, None).await?);
    ctx.note("leave again", leave(&mut c, &g, &member, None).await?);
    Ok(())
}

/// A and B in one group: A alone at generation 1, then B joins; while B's join waits, `during`
/// runs with A's connection; then A rejoins and both sync. Returns `(a, b, generation 2)`.
async fn second_member_joins<F>(ctx: &Ctx, g: &str, during: F) -> R<(Conn, String, Conn, String, i32)>
where
    F: for<'c> AsyncFnOnce(&'c mut Conn, &'c str, i32) -> R,
{
    let mut a = connect(ctx, "a").await?;
    let mut b = connect(ctx, "b").await?;
    let mut watcher = connect(ctx, "watcher").await?;
    coordinator_ready(&mut a, g).await?;
    let (a_id, gen1) = join_alone(ctx, &mut a, g, None, "a").await?;
    let first = send(&mut b, join_request(g, "", None, "consumer"), JOIN_V).await?;
    ctx.note("b: first join", render_join(ctx, &first));
    let b_id = first.member_id.to_string();
    let b_join = async { send(&mut b, join_request(g, &b_id, None, "consumer"), JOIN_V).await };
    let a_side = async {
        wait_state(&mut watcher, g, "PreparingRebalance").await?;
        during(&mut a, &a_id, gen1).await?;
        send(&mut a, join_request(g, &a_id, None, "consumer"), JOIN_V).await
    };
    let (b_joined, a_joined) = tokio::join!(b_join, a_side);
    let (b_joined, a_joined) = (b_joined?, a_joined?);
    ctx.note("a rejoins", render_join(ctx, &a_joined));
    ctx.note("b joins", render_join(ctx, &b_joined));
    let generation = a_joined.generation_id;
    let a_sync = sync(&mut a, sync_request(g, generation, &a_id, &[(&a_id, &[0]), (&b_id, &[1])]));
    let b_sync = sync(&mut b, sync_request(g, generation, &b_id, &[]));
    let (a_sync, b_sync) = tokio::join!(a_sync, b_sync);
    ctx.note("a sync (leader)", a_sync?);
    ctx.note("b sync", b_sync?);
    ctx.note("describe", describe(ctx, &mut watcher, g).await?);
    Ok((a, a_id, b, b_id, generation))
}

pub async fn second_member_triggers_a_rebalance(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let (mut a, a_id, mut b, b_id, generation) = second_member_joins(ctx, &g, async |a, a_id, gen1| {
        ctx.note("a heartbeat during the rebalance", heartbeat(a, &g, gen1, a_id, None).await?);
        Ok(())
    })
    .await?;
    ctx.note("a heartbeat", heartbeat(&mut a, &g, generation, &a_id, None).await?);
    ctx.note("b heartbeat", heartbeat(&mut b, &g, generation, &b_id, None).await?);
    Ok(())
}

pub async fn commit_during_a_rebalance_is_rebalance_in_progress(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let (mut a, a_id, _b, _b_id, generation) = second_member_joins(ctx, &g, async |a, a_id, gen1| {
        let q = commit_request(&g, gen1, a_id, None, &t, 0, 5, None);
        ctx.note("a commits during the rebalance", commit(a, q).await?);
        Ok(())
    })
    .await?;
    ctx.note(
        "a commits at the new generation",
        commit(&mut a, commit_request(&g, generation, &a_id, None, &t, 0, 5, None)).await?,
    );
    ctx.note(
        "a commits at the old generation",
        commit(&mut a, commit_request(&g, generation - 1, &a_id, None, &t, 0, 6, None)).await?,
    );
    ctx.note("committed", offset_fetch(&mut a, &g, &t, 0).await?);
    Ok(())
}

pub async fn commit_with_a_stale_generation_is_illegal_generation(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let mut c = connect(ctx, "member").await?;
    coordinator_ready(&mut c, &g).await?;
    let (member, generation) = join_alone(ctx, &mut c, &g, None, "a").await?;
    for (label, generation) in
        [("generation - 1", generation - 1), ("generation + 1", generation + 1), ("generation", generation)]
    {
        ctx.note(
            format!("commit at {label}"),
            commit(&mut c, commit_request(&g, generation, &member, None, &t, 0, 7, None)).await?,
        );
    }
    ctx.note("heartbeat at generation + 1", heartbeat(&mut c, &g, generation + 1, &member, None).await?);
    ctx.note("sync at generation + 1", sync(&mut c, sync_request(&g, generation + 1, &member, &[])).await?);
    ctx.note("committed", offset_fetch(&mut c, &g, &t, 0).await?);
    Ok(())
}

pub async fn commit_from_an_unknown_member_is_unknown_member_id(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let mut c = connect(ctx, "member").await?;
    coordinator_ready(&mut c, &g).await?;
    let (_, generation) = join_alone(ctx, &mut c, &g, None, "a").await?;
    ctx.note(
        "commit from a member id nobody has",
        commit(&mut c, commit_request(&g, generation, "ghost", None, &t, 0, 1, None)).await?,
    );
    ctx.note(
        "commit without member id or generation",
        commit(&mut c, commit_request(&g, -1, "", None, &t, 0, 1, None)).await?,
    );
    ctx.note("heartbeat from a member id nobody has", heartbeat(&mut c, &g, generation, "ghost", None).await?);
    ctx.note(
        "join with a member id nobody has",
        render_join(ctx, &send(&mut c, join_request(&g, "ghost", None, "consumer"), JOIN_V).await?),
    );
    ctx.note("leave of a member id nobody has", leave(&mut c, &g, "ghost", None).await?);
    Ok(())
}

pub async fn commit_from_an_expired_member_is_unknown_member_id(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let mut c = connect(ctx, "member").await?;
    coordinator_ready(&mut c, &g).await?;
    let (member, generation) = join_alone(ctx, &mut c, &g, None, "a").await?;
    // No heartbeat for longer than the session timeout.
    tokio::time::sleep(Duration::from_millis(SESSION_MS as u64 + 2500)).await;
    ctx.note(
        "commit after the session expired",
        commit(&mut c, commit_request(&g, generation, &member, None, &t, 0, 3, None)).await?,
    );
    ctx.note("heartbeat after the session expired", heartbeat(&mut c, &g, generation, &member, None).await?);
    ctx.note("describe", describe(ctx, &mut c, &g).await?);
    Ok(())
}

pub async fn session_timeout_expiry_rebalances_the_survivor(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let (mut a, a_id, _b, _b_id, generation) = second_member_joins(ctx, &g, async |_, _, _| Ok(())).await?;
    // B goes silent; A heartbeats every second until told to rejoin (bounded).
    let mut told = String::from("never told");
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let hb = heartbeat(&mut a, &g, generation, &a_id, None).await?;
        if hb != "NONE" {
            told = hb;
            break;
        }
    }
    ctx.note("a heartbeat once b's session expired", told);
    let j = join(ctx, &mut a, "a rejoins", join_request(&g, &a_id, None, "consumer")).await?;
    ctx.note("a sync", sync(&mut a, sync_request(&g, j.generation_id, &a_id, &[(&a_id, &[0, 1])])).await?);
    ctx.note("describe", describe(ctx, &mut a, &g).await?);
    Ok(())
}

pub async fn static_member_rejoin_fences_the_old_member_id(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let mut old = connect(ctx, "old").await?;
    let mut new = connect(ctx, "new").await?;
    coordinator_ready(&mut old, &g).await?;
    let (old_id, generation) = join_alone(ctx, &mut old, &g, Some("instance-1"), "old").await?;
    let j =
        join(ctx, &mut new, "same instance joins again", join_request(&g, "", Some("instance-1"), "consumer")).await?;
    let new_id = j.member_id.to_string();
    ctx.note("new sync", sync(&mut new, sync_request(&g, j.generation_id, &new_id, &[])).await?);
    ctx.note("old heartbeat", heartbeat(&mut old, &g, generation, &old_id, Some("instance-1")).await?);
    ctx.note(
        "old commit",
        commit(&mut old, commit_request(&g, generation, &old_id, Some("instance-1"), &t, 0, 1, None)).await?,
    );
    ctx.note("old leaves", leave(&mut old, &g, &old_id, Some("instance-1")).await?);
    ctx.note("new heartbeat", heartbeat(&mut new, &g, j.generation_id, &new_id, Some("instance-1")).await?);
    ctx.note(
        "new commit",
        commit(&mut new, commit_request(&g, j.generation_id, &new_id, Some("instance-1"), &t, 0, 1, None)).await?,
    );
    ctx.note("describe", describe(ctx, &mut new, &g).await?);
    ctx.note("new leaves", leave(&mut new, &g, &new_id, Some("instance-1")).await?);
    ctx.note("describe after leave", describe(ctx, &mut new, &g).await?);
    Ok(())
}

pub async fn commit_metadata_round_trips(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = ctx.name("t");
    let mut c = connect(ctx, "c").await?;
    create_ready_topic(&mut c, &t, 3).await?;
    coordinator_ready(&mut c, &g).await?;
    let cases = [(0, 10, Some("hello")), (1, 20, None), (2, 30, Some(""))];
    for (p, offset, metadata) in cases {
        let q = commit_request(&g, -1, "", None, &t, p, offset, metadata);
        ctx.note(format!("commit partition {p} metadata {metadata:?}"), commit(&mut c, q).await?);
    }
    for p in 0..3 {
        ctx.note(format!("fetch partition {p}"), offset_fetch(&mut c, &g, &t, p).await?);
    }
    ctx.note("fetch a partition never committed", offset_fetch(&mut c, &g, &ctx.name("other"), 0).await?);
    let q = commit_request(&g, -1, "", None, &t, 0, 11, Some("second"));
    ctx.note("commit partition 0 again", commit(&mut c, q).await?);
    ctx.note("fetch partition 0 again", offset_fetch(&mut c, &g, &t, 0).await?);
    ctx.note("describe", describe(ctx, &mut c, &g).await?);
    Ok(())
}

pub async fn offset_fetch_of_an_unknown_group(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut c = connect(ctx, "c").await?;
    coordinator_ready(&mut c, &g).await?;
    ctx.note("fetch", offset_fetch(&mut c, &g, &ctx.name("t"), 0).await?);
    ctx.note("describe", describe(ctx, &mut c, &g).await?);
    Ok(())
}

pub async fn join_errors(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut c = connect(ctx, "c").await?;
    coordinator_ready(&mut c, &g).await?;
    let short = join_request(&g, "", None, "consumer").with_session_timeout_ms(1000);
    ctx.note("session timeout 1 s", render_join(ctx, &send(&mut c, short, JOIN_V).await?));
    let long = join_request(&g, "", None, "consumer").with_session_timeout_ms(3_600_000);
    ctx.note("session timeout 1 h", render_join(ctx, &send(&mut c, long, JOIN_V).await?));
    let empty_type = join_request(&g, "", None, "");
    ctx.note("empty protocol type", render_join(ctx, &send(&mut c, empty_type, JOIN_V).await?));
    let (member, _) = join_alone(ctx, &mut c, &g, None, "a").await?;
    let mut other = connect(ctx, "other").await?;
    let connect_type = join_request(&g, "", None, "connect");
    ctx.note("another protocol type", render_join(ctx, &send(&mut other, connect_type, JOIN_V).await?));
    let no_common = join_request(&g, "", None, "consumer").with_protocols(vec![
        join_group_request::JoinGroupRequestProtocol::default()
            .with_name(s("roundrobin"))
            .with_metadata(bytes::Bytes::new()),
    ]);
    ctx.note("no protocol in common", render_join(ctx, &send(&mut other, no_common, JOIN_V).await?));
    ctx.note("leave", leave(&mut c, &g, &member, None).await?);
    Ok(())
}

pub async fn describe_and_list_groups(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut c = connect(ctx, "c").await?;
    coordinator_ready(&mut c, &g).await?;
    ctx.note("describe a group that never existed", describe(ctx, &mut c, &ctx.name("none")).await?);
    let (member, _) = join_alone(ctx, &mut c, &g, None, "a").await?;
    let list = async |c: &mut Conn, states: Vec<&str>| -> R<String> {
        let q = ListGroupsRequest::default().with_states_filter(states.into_iter().map(s).collect());
        let r = send(c, q, LIST_GROUPS_V).await?;
        let ours: Vec<String> = r
            .groups
            .iter()
            .filter(|x| x.group_id.as_str() == g)
            .map(|x| format!("{} {}", x.protocol_type.as_str(), x.group_state.as_str()))
            .collect();
        Ok(format!("{} ours=[{}]", code(r.error_code), ours.join(", ")))
    };
    ctx.note("list all", list(&mut c, vec![]).await?);
    ctx.note("list Stable", list(&mut c, vec!["Stable"]).await?);
    ctx.note("list Empty", list(&mut c, vec!["Empty"]).await?);
    ctx.note("leave", leave(&mut c, &g, &member, None).await?);
    ctx.note("list Empty after leave", list(&mut c, vec!["Empty"]).await?);
    Ok(())
}

pub async fn heartbeat_and_commit_while_the_leader_has_not_synced(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let mut a = connect(ctx, "a").await?;
    let mut b = connect(ctx, "b").await?;
    let mut b2 = connect(ctx, "b-side").await?;
    let mut watcher = connect(ctx, "watcher").await?;
    coordinator_ready(&mut a, &g).await?;
    let (a_id, _) = join_alone(ctx, &mut a, &g, None, "a").await?;
    let first = send(&mut b, join_request(&g, "", None, "consumer"), JOIN_V).await?;
    let b_id = first.member_id.to_string();
    let b_join = async { send(&mut b, join_request(&g, &b_id, None, "consumer"), JOIN_V).await };
    let a_join = async {
        wait_state(&mut watcher, &g, "PreparingRebalance").await?;
        send(&mut a, join_request(&g, &a_id, None, "consumer"), JOIN_V).await
    };
    let (b_joined, a_joined) = tokio::join!(b_join, a_join);
    let (b_joined, a_joined) = (b_joined?, a_joined?);
    let generation = a_joined.generation_id;
    ctx.note("joined", format!("a: {} / b: {}", render_join(ctx, &a_joined), render_join(ctx, &b_joined)));
    ctx.note("state before the leader syncs", group_state(&mut watcher, &g).await?);
    ctx.note("b heartbeat", heartbeat(&mut b2, &g, generation, &b_id, None).await?);
    ctx.note("b commit", commit(&mut b2, commit_request(&g, generation, &b_id, None, &t, 0, 4, None)).await?);
    // b's SyncGroup waits for the leader's.
    let b_sync = sync(&mut b, sync_request(&g, generation, &b_id, &[]));
    let a_sync = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        sync(&mut a, sync_request(&g, generation, &a_id, &[(&a_id, &[0]), (&b_id, &[1])])).await
    };
    let (b_synced, a_synced) = tokio::join!(b_sync, a_sync);
    ctx.note("syncs", format!("a: {} / b: {}", a_synced?, b_synced?));
    ctx.note(
        "b commit after the sync",
        commit(&mut b2, commit_request(&g, generation, &b_id, None, &t, 0, 4, None)).await?,
    );
    Ok(())
}

pub async fn leader_leaving_makes_the_follower_rejoin(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let (mut a, a_id, mut b, b_id, generation) = second_member_joins(ctx, &g, async |_, _, _| Ok(())).await?;
    ctx.note("a (leader) leaves", leave(&mut a, &g, &a_id, None).await?);
    ctx.note("b heartbeat", heartbeat(&mut b, &g, generation, &b_id, None).await?);
    let j = join(ctx, &mut b, "b rejoins", join_request(&g, &b_id, None, "consumer")).await?;
    ctx.note("b sync", sync(&mut b, sync_request(&g, j.generation_id, &b_id, &[(&b_id, &[0, 1])])).await?);
    ctx.note("describe", describe(ctx, &mut b, &g).await?);
    Ok(())
}

pub async fn a_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let (mut a, a_id, mut b, b_id, generation) = second_member_joins(ctx, &g, async |_, _, _| Ok(())).await?;
    let mut c = connect(ctx, "c").await?;
    let mut watcher = connect(ctx, "watcher").await?;
    let first = send(&mut c, join_request(&g, "", None, "consumer"), JOIN_V).await?;
    let c_id = first.member_id.to_string();
    // c's join starts a rebalance; a rejoins, b never does (nor heartbeats).
    let c_join = async { send(&mut c, join_request(&g, &c_id, None, "consumer"), JOIN_V).await };
    let a_join = async {
        wait_state(&mut watcher, &g, "PreparingRebalance").await?;
        send(&mut a, join_request(&g, &a_id, None, "consumer"), JOIN_V).await
    };
    let (c_joined, a_joined) = tokio::join!(c_join, a_join);
    let (c_joined, a_joined) = (c_joined?, a_joined?);
    ctx.note("a rejoins", render_join(ctx, &a_joined));
    ctx.note("c joins", render_join(ctx, &c_joined));
    ctx.note("b heartbeat after the rebalance", heartbeat(&mut b, &g, generation, &b_id, None).await?);
    Ok(())
}

pub async fn join_group_v3_needs_no_member_id_round(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut c = connect(ctx, "c").await?;
    coordinator_ready(&mut c, &g).await?;
    let r = send(&mut c, join_request(&g, "", None, "consumer"), 3).await?;
    ctx.note("join v3 with no member id", render_join(ctx, &r));
    let member = r.member_id.to_string();
    ctx.note("sync v2", {
        let s = send(&mut c, sync_request(&g, r.generation_id, &member, &[(&member, &[0])]), 2).await?;
        format!("{} assignment={}", code(s.error_code), render_assignment(&s.assignment))
    });
    Ok(())
}

pub async fn describe_group_members_in_detail(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let t = commit_topic(ctx).await?;
    let mut c = connect(ctx, "client-7").await?;
    coordinator_ready(&mut c, &g).await?;
    let (member, generation) = join_alone(ctx, &mut c, &g, Some("instance-7"), "a").await?;
    let r = send(&mut c, DescribeGroupsRequest::default().with_groups(vec![GroupId(s(&g))]), DESCRIBE_V).await?;
    for m in &r.groups[0].members {
        ctx.note(
            "member",
            format!(
                "{} instance={:?} client_id={} client_host={} metadata is the subscription: {} assignment={}",
                ctx.alias("member", m.member_id.as_str()),
                m.group_instance_id.as_ref().map(|i| i.to_string()),
                m.client_id.as_str(),
                m.client_host.as_str(),
                m.member_metadata == subscription(),
                render_assignment(&m.member_assignment)
            ),
        );
    }
    commit(&mut c, commit_request(&g, generation, &member, Some("instance-7"), &t, 0, 9, Some("m"))).await?;
    let all =
        send(&mut c, OffsetFetchRequest::default().with_group_id(GroupId(s(&g))).with_topics(None), OFFSET_FETCH_V)
            .await?;
    let committed: Vec<String> = all
        .topics
        .iter()
        .flat_map(|x| {
            let ours = x.name.0.as_str() == t;
            x.partitions.iter().map(move |p| (ours, p))
        })
        .map(|(ours, p)| {
            format!(
                "{}-{} offset={} metadata={:?}",
                if ours { "t" } else { "other" },
                p.partition_index,
                p.committed_offset,
                p.metadata.as_ref().map(|m| m.to_string())
            )
        })
        .collect();
    ctx.note("offset fetch of every partition", format!("{} [{}]", code(all.error_code), committed.join(", ")));
    Ok(())
}

pub async fn leave_of_an_unknown_group_answers_each_member(ctx: &Ctx) -> R {
    let g = ctx.name("g");
    let mut c = connect(ctx, "c").await?;
    coordinator_ready(&mut c, &g).await?;
    ctx.note("leave v5 of a member id", leave(&mut c, &g, "ghost", None).await?);
    ctx.note("leave v5 of an instance id", leave(&mut c, &g, "", Some("instance-1")).await?);
    let q = LeaveGroupRequest::default().with_group_id(GroupId(s(&g))).with_member_id(s("ghost"));
    ctx.note("leave v2", code(send(&mut c, q, 2).await?.error_code));
    ctx.note("describe", describe(ctx, &mut c, &g).await?);
    Ok(())
}
