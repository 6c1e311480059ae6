//! Consumer groups: assignments per generation and the rebalance callbacks each member sees,
//! eager (range, roundrobin) and cooperative (KIP-429), members leaving, static members
//! (KIP-345), auto-commit, and max.poll.interval.ms.
//!
//! Members join one at a time, each generation waited out until stable (`settle`), so the
//! number of generations does not depend on timing. Which member gets which partitions depends
//! on the member ids the broker hands out (random), so assignments are recorded as a sorted set
//! and callbacks with partition counts, except where static members make them deterministic.

per_client! {
    [
        cooperative_sticky_incremental_rebalance,
        eager_range_rebalance_two_then_three,
        roundrobin_assignment,
        auto_commit_on_close_and_by_interval,
        member_leaving_gives_the_other_everything,
        static_member_restart_keeps_its_assignment,
        max_poll_interval_exceeded_loses_the_assignment,
        late_commit_of_a_member_that_left_is_refused,
        unsubscribe_revokes_and_subscribe_rejoins,
        subscribe_to_a_missing_topic,
    ]

    use std::time::Duration;

    use crate::support::group_state;

    fn member_config(ctx: &Ctx, group: &str, strategy: &str, name: &str) -> ClientConfig {
        let mut c = consumer_config(ctx, group, "earliest");
        c.set("client.id", name).set("partition.assignment.strategy", strategy);
        c
    }

    pub async fn cooperative_sticky_incremental_rebalance(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 4).await?;
        let g = ctx.name("g");
        let mut a = Member::subscribed(&member_config(ctx, &g, "cooperative-sticky", "a"), &t, true)?;
        settle(&mut [&mut a], 4, "a alone").await?;
        let before = a.assigned();
        ctx.note("a alone", format!("{before:?}"));
        ctx.note("a's protocol", render_protocol(a.consumer.rebalance_protocol()));
        ctx.note("a's callbacks", a.take_rebalances());
        let mut b = Member::subscribed(&member_config(ctx, &g, "cooperative-sticky", "b"), &t, true)?;
        settle(&mut [&mut a, &mut b], 4, "a and b").await?;
        let (after_a, after_b) = (a.assigned(), b.assigned());
        ctx.note("a and b", format!("a has {}, b has {}", after_a.len(), after_b.len()));
        ctx.note("a kept a subset of what it had", format!("{}", after_a.iter().all(|p| before.contains(p))));
        ctx.note("a's callbacks", a.take_rebalance_counts());
        ctx.note("b's callbacks", b.take_rebalance_counts());
        let b_observer = b.observer.clone();
        close(b.consumer).await;
        ctx.note("b's callbacks while closing", with_counts(&b_observer.rebalances.lock().expect("events lock")));
        settle(&mut [&mut a], 4, "a alone again").await?;
        ctx.note("a alone again", format!("{:?}", a.assigned()));
        ctx.note("a's callbacks", a.take_rebalance_counts());
        close(a.consumer).await;
        Ok(())
    }

    /// Eager rebalances with `strategy`: a, then b, then c join, then c leaves; per generation
    /// the set of assignments and each member's callbacks.
    async fn eager_generations(ctx: &Ctx, strategy: &str, partitions: i32) -> R {
        let t = created(ctx, "t", partitions).await?;
        let g = ctx.name("g");
        let mut a = Member::subscribed(&member_config(ctx, &g, strategy, "a"), &t, false)?;
        settle(&mut [&mut a], partitions, "generation 1").await?;
        ctx.note("generation 1: assignments", assignment_set(&[&mut a]));
        ctx.note("generation 1: a's callbacks", a.take_rebalance_counts());
        ctx.note("a's protocol", render_protocol(a.consumer.rebalance_protocol()));
        let mut b = Member::subscribed(&member_config(ctx, &g, strategy, "b"), &t, false)?;
        settle(&mut [&mut a, &mut b], partitions, "generation 2").await?;
        ctx.note("generation 2: assignments", assignment_set(&[&mut a, &mut b]));
        ctx.note("generation 2: a's callbacks", a.take_rebalance_counts());
        ctx.note("generation 2: b's callbacks", b.take_rebalance_counts());
        let mut c = Member::subscribed(&member_config(ctx, &g, strategy, "c"), &t, false)?;
        settle(&mut [&mut a, &mut b, &mut c], partitions, "generation 3").await?;
        ctx.note("generation 3: assignments", assignment_set(&[&mut a, &mut b, &mut c]));
        ctx.note("generation 3: a's callbacks", a.take_rebalance_counts());
        ctx.note("generation 3: b's callbacks", b.take_rebalance_counts());
        ctx.note("generation 3: c's callbacks", c.take_rebalance_counts());
        let c_observer = c.observer.clone();
        close(c.consumer).await;
        ctx.note("c's callbacks while closing", with_counts(&c_observer.rebalances.lock().expect("events lock")));
        settle(&mut [&mut a, &mut b], partitions, "generation 4").await?;
        ctx.note("generation 4: assignments", assignment_set(&[&mut a, &mut b]));
        ctx.note("generation 4: a's callbacks", a.take_rebalance_counts());
        ctx.note("generation 4: b's callbacks", b.take_rebalance_counts());
        close(a.consumer).await;
        close(b.consumer).await;
        Ok(())
    }

    pub async fn eager_range_rebalance_two_then_three(ctx: &Ctx) -> R {
        eager_generations(ctx, "range", 6).await
    }

    pub async fn roundrobin_assignment(ctx: &Ctx) -> R {
        eager_generations(ctx, "roundrobin", 5).await
    }

    pub async fn auto_commit_on_close_and_by_interval(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let g = ctx.name("g");
        let producer = producer(ctx, &[])?;
        deliver(&producer, &t, &values(0..5), None).await;
        let checker: StreamConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
        let committed = || async {
            blocking!(checker.committed_offsets(tpl(&t, &[(0, Offset::Invalid)])?, Duration::from_secs(10)))
                .map(|c| render_tpl(&c))
                .map_err(err)
        };
        let mut auto = consumer_config(ctx, &g, "earliest");
        auto.set("enable.auto.commit", "true").set("auto.commit.interval.ms", "60000");
        let first: StreamConsumer = auto.create().map_err(err)?;
        first.subscribe(&[&t]).map_err(err)?;
        ctx.note("first consumer reads", read(&first, 5, CLIENT_TIMEOUT).await.join(" "));
        ctx.note("committed before closing (interval 60 s)", committed().await?);
        close(first).await;
        ctx.note("committed after closing", committed().await?);
        deliver(&producer, &t, &values(5..7), None).await;
        auto.set("auto.commit.interval.ms", "500");
        let second: StreamConsumer = auto.create().map_err(err)?;
        second.subscribe(&[&t]).map_err(err)?;
        ctx.note("second consumer reads", read(&second, 2, CLIENT_TIMEOUT).await.join(" "));
        ctx.note("more within 2 s", read(&second, 1, Duration::from_secs(2)).await.join(" "));
        ctx.note("committed by the interval (500 ms), still open", committed().await?);
        close(second).await;
        close(checker).await;
        Ok(())
    }

    pub async fn member_leaving_gives_the_other_everything(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 4).await?;
        let g = ctx.name("g");
        let mut a = Member::subscribed(&member_config(ctx, &g, "range", "a"), &t, false)?;
        settle(&mut [&mut a], 4, "a alone").await?;
        let mut b = Member::subscribed(&member_config(ctx, &g, "range", "b"), &t, false)?;
        settle(&mut [&mut a, &mut b], 4, "a and b").await?;
        ctx.note("a and b", assignment_set(&[&mut a, &mut b]));
        let producer = producer(ctx, &[])?;
        for p in 0..4 {
            deliver_to(&producer, &t, p, &[format!("p{p}-0"), format!("p{p}-1")], None).await;
        }
        pump_until(&mut [&mut a, &mut b], "8 records read", |ms| ms.iter().map(|m| m.got.len()).sum::<usize>() >= 8)
            .await?;
        let (a_parts, b_parts) = (a.assigned(), b.assigned());
        let owned = |got: &str, parts: &[i32]| {
            got.split(' ').filter(|r| !r.is_empty()).all(|r| parts.iter().any(|p| r.starts_with(&format!("{p}:"))))
        };
        let (a_got, b_got) = (a.take_got(), b.take_got());
        ctx.note("each read only its partitions", format!("{} {}", owned(&a_got, &a_parts), owned(&b_got, &b_parts)));
        let mut all: Vec<&str> = a_got.split(' ').chain(b_got.split(' ')).filter(|r| !r.is_empty()).collect();
        all.sort();
        ctx.note("read together", all.join(" "));
        ctx.note("a commits its state", render_result(&blocking!(a.consumer.commit_consumer_state(CommitMode::Sync))));
        ctx.note("b commits its state", render_result(&blocking!(b.consumer.commit_consumer_state(CommitMode::Sync))));
        a.take_rebalances();
        b.take_rebalances();
        for p in 0..4 {
            deliver_to(&producer, &t, p, &[format!("p{p}-2")], None).await;
        }
        // Each reads its new record and commits nothing: after the rebalance the survivor
        // starts over from the committed offsets (redelivery, at least once).
        pump_until(&mut [&mut a, &mut b], "the new records read", |ms| ms.iter().all(|m| m.got.len() >= 2)).await?;
        ctx.note("a reads, not committed", a.take_got().split(' ').count().to_string());
        ctx.note("b reads, not committed", b.take_got().split(' ').count().to_string());
        let a_observer = a.observer.clone();
        close(a.consumer).await;
        ctx.note("a's callbacks while closing", with_counts(&a_observer.rebalances.lock().expect("events lock")));
        settle(&mut [&mut b], 4, "b alone").await?;
        pump_until(&mut [&mut b], "4 more records read", |ms| ms[0].got.len() >= 4).await?;
        pump(&mut [&mut b], Duration::from_millis(500)).await;
        ctx.note("b alone", format!("{:?}", b.assigned()));
        ctx.note("b's callbacks", b.take_rebalance_counts());
        ctx.note("b reads", b.take_got());
        close(b.consumer).await;
        Ok(())
    }

    pub async fn static_member_restart_keeps_its_assignment(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 4).await?;
        let g = ctx.name("g");
        let static_config = |name: &str| {
            let mut c = member_config(ctx, &g, "range", name);
            c.set("group.instance.id", name);
            c
        };
        let mut conn = connect(ctx, "observer").await?;
        let mut a = Member::subscribed(&static_config("a"), &t, false)?;
        settle(&mut [&mut a], 4, "a alone").await?;
        let mut b = Member::subscribed(&static_config("b"), &t, false)?;
        settle(&mut [&mut a, &mut b], 4, "a and b").await?;
        ctx.note("a and b", format!("a={:?} b={:?}", a.assigned(), b.assigned()));
        ctx.note("a's callbacks", a.take_rebalances());
        ctx.note("b's callbacks", b.take_rebalances());
        for (restarted, label) in [("b", "the follower"), ("a", "the leader")] {
            let (gone, stays) = if restarted == "b" { (b, a) } else { (a, b) };
            let gone_observer = gone.observer.clone();
            close(gone.consumer).await;
            ctx.note(
                format!("{restarted}'s callbacks while closing"),
                gone_observer.rebalances.lock().expect("events lock").join(", "),
            );
            ctx.note(format!("group state after {label} closed"), group_state(&mut conn, &g).await?);
            let mut back = Member::subscribed(&static_config(restarted), &t, false)?;
            let mut stays = stays;
            settle(&mut [&mut back, &mut stays], 4, "restarted").await?;
            ctx.note(format!("{label} restarted"), format!("{restarted}={:?}", back.assigned()));
            ctx.note(format!("{restarted}'s callbacks after restarting"), back.take_rebalances());
            ctx.note("the other's callbacks meanwhile", stays.take_rebalances());
            if restarted == "b" {
                (a, b) = (stays, back);
            } else {
                (a, b) = (back, stays);
            }
        }
        close(a.consumer).await;
        close(b.consumer).await;
        Ok(())
    }

    pub async fn max_poll_interval_exceeded_loses_the_assignment(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let g = ctx.name("g");
        let mut config = member_config(ctx, &g, "range", "a");
        config.set("max.poll.interval.ms", "6000");
        let mut a = Member::subscribed(&config, &t, false)?;
        settle(&mut [&mut a], 1, "assigned").await?;
        ctx.note("assigned", format!("{:?}", a.assigned()));
        ctx.note("callbacks", a.take_rebalances());
        // No recv for longer than max.poll.interval.ms.
        tokio::time::sleep(Duration::from_secs(9)).await;
        pump_until(&mut [&mut a], "an error, then the assignment back", |ms| {
            !ms[0].errors.is_empty() && !ms[0].assigned().is_empty()
        })
        .await?;
        pump(&mut [&mut a], Duration::from_secs(1)).await;
        ctx.note("errors from recv", a.errors.join(", "));
        ctx.note("callbacks after polling again", a.take_rebalances());
        ctx.note("assigned again", format!("{:?}", a.assigned()));
        close(a.consumer).await;
        Ok(())
    }

    /// humus #757's class: a member that stopped polling loses its partition to another; its
    /// late commit (sent without polling again) must not move the new owner's committed offset.
    pub async fn late_commit_of_a_member_that_left_is_refused(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let g = ctx.name("g");
        let mut config = member_config(ctx, &g, "range", "a");
        config.set("max.poll.interval.ms", "6000");
        let mut a = Member::subscribed(&config, &t, false)?;
        settle(&mut [&mut a], 1, "a assigned").await?;
        let producer = producer(ctx, &[])?;
        deliver(&producer, &t, &values(0..4), None).await;
        pump_until(&mut [&mut a], "a reads 4", |ms| ms[0].got.len() >= 4).await?;
        ctx.note("a reads", a.take_got());
        ctx.note("a's callbacks", a.take_rebalances());
        // a stops polling; b joins and, once a is out (max.poll.interval.ms), gets the partition.
        let mut b = Member::subscribed(&member_config(ctx, &g, "range", "b"), &t, false)?;
        pump_until(&mut [&mut b], "b assigned and reads 4", |ms| ms[0].assigned() == [0] && ms[0].got.len() >= 4)
            .await?;
        ctx.note("b reads", b.take_got());
        ctx.note("b commits its state", render_result(&blocking!(b.consumer.commit_consumer_state(CommitMode::Sync))));
        let late = tpl(&t, &[(0, Offset::Offset(2))])?;
        ctx.note("a's late commit of offset 2", render_result(&blocking!(a.consumer.commit(&late, CommitMode::Sync))));
        let committed = blocking!(b.consumer.committed(Duration::from_secs(10))).map_err(err)?;
        ctx.note("committed, as b sees it", render_tpl(&committed));
        ctx.note("b's callbacks", b.take_rebalances());
        pump_until(&mut [&mut a], "a's error", |ms| !ms[0].errors.is_empty()).await?;
        ctx.note("a's errors when polling again", a.errors.join(", "));
        close(a.consumer).await;
        close(b.consumer).await;
        Ok(())
    }

    pub async fn unsubscribe_revokes_and_subscribe_rejoins(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 2).await?;
        let g = ctx.name("g");
        let mut a = Member::subscribed(&member_config(ctx, &g, "range", "a"), &t, false)?;
        settle(&mut [&mut a], 2, "a assigned").await?;
        ctx.note(
            "subscription",
            a.consumer.subscription().map(|s| s.count().to_string()).unwrap_or_else(|e| render_err(&e)),
        );
        ctx.note("callbacks", a.take_rebalances());
        a.consumer.unsubscribe();
        pump_until(&mut [&mut a], "unassigned", |ms| ms[0].assigned().is_empty()).await?;
        pump(&mut [&mut a], Duration::from_secs(1)).await;
        ctx.note(
            "subscription after unsubscribe",
            a.consumer.subscription().map(|s| s.count().to_string()).unwrap_or_else(|e| render_err(&e)),
        );
        ctx.note("callbacks after unsubscribe", a.take_rebalances());
        let mut conn = connect(ctx, "observer").await?;
        ctx.note("group state after unsubscribe", group_state(&mut conn, &g).await?);
        a.consumer.subscribe(&[&t]).map_err(err)?;
        settle(&mut [&mut a], 2, "a assigned again").await?;
        ctx.note("callbacks after subscribing again", a.take_rebalances());
        ctx.note("errors", a.errors.join(", "));
        close(a.consumer).await;
        Ok(())
    }

    pub async fn subscribe_to_a_missing_topic(ctx: &Ctx) -> R {
        let missing = ctx.name("missing");
        let g = ctx.name("g");
        let mut config = member_config(ctx, &g, "range", "a");
        config.set("allow.auto.create.topics", "false");
        let mut a = Member::subscribed(&config, &missing, false)?;
        pump_until(&mut [&mut a], "an error", |ms| !ms[0].errors.is_empty()).await?;
        pump(&mut [&mut a], Duration::from_secs(5)).await;
        let mut errors = a.errors.clone();
        errors.dedup();
        ctx.note("errors from recv (repeats folded)", errors.join(", "));
        ctx.note("assignment", format!("{:?}", a.assigned()));
        ctx.note("callbacks", a.take_rebalances());
        close(a.consumer).await;
        Ok(())
    }
}
