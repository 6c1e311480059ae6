//! Offsets: resets, commits (what is committed is the next offset to read), stored offsets,
//! committed offsets read back, watermarks and offsets by time, seek, pause and resume.

per_client! {
    [
        auto_offset_reset_earliest_latest_and_error,
        out_of_range_committed_offset_is_reset,
        group_commit_and_resume,
        commit_metadata_round_trips,
        watermarks_and_offsets_for_times,
        commit_message_store_offset_and_consumer_state,
        commit_of_a_partition_not_assigned,
        seek_pause_and_resume,
    ]

    use std::time::Duration;

    use crate::support::{commit, commit_request, coordinator_ready};

    const TEN_SECONDS: Duration = Duration::from_secs(10);

    pub async fn auto_offset_reset_earliest_latest_and_error(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let producer = producer(ctx, &[])?;
        deliver(&producer, &t, &values(0..5), None).await;
        // Each group's coordinator is ready before its consumer starts: on a broker that has
        // not yet created `__consumer_offsets`, rdkafka's first offset lookup answers
        // NOT_COORDINATOR from `recv` and then reads nothing for a minute, which is the cold
        // broker's story, not the reset's (measured on a fresh Kafka 4.2 broker).
        let mut c = connect(ctx, "warm").await?;
        for group in ["earliest", "latest", "error"] {
            coordinator_ready(&mut c, &ctx.name(group)).await?;
        }
        let earliest: StreamConsumer = consumer_config(ctx, &ctx.name("earliest"), "earliest").create().map_err(err)?;
        earliest.assign(&tpl(&t, &[(0, Offset::Stored)])?).map_err(err)?;
        ctx.note("no committed offset, earliest", read(&earliest, 5, CLIENT_TIMEOUT).await.join(" "));
        let latest: StreamConsumer = consumer_config(ctx, &ctx.name("latest"), "latest").create().map_err(err)?;
        latest.assign(&tpl(&t, &[(0, Offset::Stored)])?).map_err(err)?;
        // Let the reset to the end happen before the next record exists.
        ctx.note(
            "no committed offset, latest: before a new record",
            read(&latest, 1, Duration::from_secs(3)).await.join(" "),
        );
        deliver(&producer, &t, &["v5".to_string()], None).await;
        ctx.note("no committed offset, latest: after a new record", read(&latest, 1, CLIENT_TIMEOUT).await.join(" "));
        let error: StreamConsumer = consumer_config(ctx, &ctx.name("error"), "error").create().map_err(err)?;
        error.assign(&tpl(&t, &[(0, Offset::Offset(100))])?).map_err(err)?;
        ctx.note("offset 100 of 6, reset error", read(&error, 1, CLIENT_TIMEOUT).await.join(" "));
        Ok(())
    }

    pub async fn out_of_range_committed_offset_is_reset(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let producer = producer(ctx, &[])?;
        deliver(&producer, &t, &values(0..5), None).await;
        let mut c = connect(ctx, "committer").await?;
        for (group, reset) in [("earliest", "earliest"), ("latest", "latest")] {
            let g = ctx.name(group);
            coordinator_ready(&mut c, &g).await?;
            ctx.note(
                format!("commit offset 100 for {group}"),
                commit(&mut c, commit_request(&g, -1, "", None, &t, 0, 100, None)).await?,
            );
            let consumer: StreamConsumer = consumer_config(ctx, &g, reset).create().map_err(err)?;
            consumer.assign(&tpl(&t, &[(0, Offset::Stored)])?).map_err(err)?;
            ctx.note(
                format!("committed 100 of 5, reset {reset}"),
                read(&consumer, 1, Duration::from_secs(3)).await.join(" "),
            );
        }
        Ok(())
    }

    pub async fn group_commit_and_resume(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let g = ctx.name("g");
        let producer = producer(ctx, &[])?;
        deliver(&producer, &t, &values(0..5), None).await;
        let consumer: StreamConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
        consumer.subscribe(&[&t]).map_err(err)?;
        ctx.note("first consumer reads", read(&consumer, 5, CLIENT_TIMEOUT).await.join(" "));
        ctx.note(
            "commit the consumer's state",
            render_result(&blocking!(consumer.commit_consumer_state(CommitMode::Sync))),
        );
        let committed = blocking!(consumer.committed(TEN_SECONDS)).map_err(err)?;
        ctx.note("committed", render_tpl(&committed));
        close(consumer).await;
        deliver(&producer, &t, &values(5..8), None).await;
        let consumer: StreamConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
        consumer.subscribe(&[&t]).map_err(err)?;
        ctx.note("second consumer resumes", read(&consumer, 3, CLIENT_TIMEOUT).await.join(" "));
        close(consumer).await;
        Ok(())
    }

    pub async fn commit_metadata_round_trips(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 2).await?;
        let g = ctx.name("g");
        let consumer: StreamConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
        #[allow(unused_mut)]
        let mut list = tpl(&t, &[(0, Offset::Offset(4)), (1, Offset::Offset(7))])?;
        if let Some(mut e) = list.find_partition(&t, 0) {
            e.set_metadata("checkpoint-4");
        }
        ctx.note("commit", render_result(&blocking!(consumer.commit(&list, CommitMode::Sync))));
        let query = tpl(&t, &[(0, Offset::Invalid), (1, Offset::Invalid)])?;
        let committed = blocking!(consumer.committed_offsets(query, TEN_SECONDS)).map_err(err)?;
        let mut rows: Vec<(i32, String)> = committed
            .elements()
            .iter()
            .map(|e| (e.partition(), format!("{:?} metadata={:?}", e.offset(), e.metadata())))
            .collect();
        rows.sort();
        for (p, row) in rows {
            ctx.note(format!("committed partition {p}"), row);
        }
        Ok(())
    }

    pub async fn watermarks_and_offsets_for_times(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let producer = producer(ctx, &[])?;
        for (i, ts) in [1_000_000, 2_000_000, 3_000_000].into_iter().enumerate() {
            deliver(&producer, &t, &[format!("v{i}")], Some(crate::support::ts_base() + ts)).await;
        }
        let consumer: StreamConsumer = config(ctx).set("group.id", ctx.name("g")).create().map_err(err)?;
        let (low, high) = blocking!(consumer.fetch_watermarks(&t, 0, TEN_SECONDS)).map_err(err)?;
        ctx.note("watermarks", format!("low={low} high={high}"));
        for ts in [500_000, 1_500_000, 3_000_000, 4_000_000] {
            let query = tpl(&t, &[(0, Offset::Offset(crate::support::ts_base() + ts))])?;
            let found = blocking!(consumer.offsets_for_times(query, TEN_SECONDS)).map_err(err)?;
            ctx.note(format!("offset for time {ts}"), render_tpl(&found));
        }
        let missing = ctx.name("missing");
        ctx.note(
            "watermarks of a missing topic",
            render_result(&blocking!(consumer.fetch_watermarks(&missing, 0, Duration::from_secs(3)))),
        );
        Ok(())
    }

    pub async fn commit_message_store_offset_and_consumer_state(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let g = ctx.name("g");
        let producer = producer(ctx, &[])?;
        deliver(&producer, &t, &values(0..8), None).await;
        let observer = Observer::default();
        let consumer: StreamConsumer<Observer> = consumer_config(ctx, &g, "earliest")
            .set("enable.auto.offset.store", "false")
            .create_with_context(observer.clone())
            .map_err(err)?;
        consumer.subscribe(&[&t]).map_err(err)?;
        let next = || async {
            tokio::time::timeout(CLIENT_TIMEOUT, consumer.recv())
                .await
                .map_err(|_| format!("no record within {CLIENT_TIMEOUT:?}"))?
                .map_err(|e| render_err(&e))
        };
        let committed = || async {
            blocking!(consumer.committed(TEN_SECONDS)).map(|c| render_tpl(&c)).unwrap_or_else(|e| render_err(&e))
        };
        ctx.note("committed before anything", committed().await);
        ctx.note(
            "commit the state before anything is stored",
            render_result(&blocking!(consumer.commit_consumer_state(CommitMode::Sync))),
        );
        let m0 = next().await?;
        ctx.note("first record", render_message(&m0));
        ctx.note(
            "commit_message of offset 0",
            render_result(&blocking!(consumer.commit_message(&m0, CommitMode::Sync))),
        );
        ctx.note("committed after commit_message", committed().await);
        let m1 = next().await?;
        ctx.note("store_offset_from_message of offset 1", render_result(&consumer.store_offset_from_message(&m1)));
        ctx.note("position", consumer.position().map(|p| render_tpl(&p)).unwrap_or_else(|e| render_err(&e)));
        ctx.note("commit the state", render_result(&blocking!(consumer.commit_consumer_state(CommitMode::Sync))));
        ctx.note("committed after the stored offset", committed().await);
        ctx.note(
            "commit the state again, nothing new stored",
            render_result(&blocking!(consumer.commit_consumer_state(CommitMode::Sync))),
        );
        let m2 = next().await?;
        ctx.note("third record", render_message(&m2));
        ctx.note("store_offset of offset 4", render_result(&consumer.store_offset(&t, 0, 4)));
        ctx.note("commit the state", render_result(&blocking!(consumer.commit_consumer_state(CommitMode::Sync))));
        ctx.note("committed after store_offset", committed().await);
        ctx.note(
            "store_offsets of offset 6 as given",
            render_result(&consumer.store_offsets(&tpl(&t, &[(0, Offset::Offset(6))])?)),
        );
        ctx.note("commit the state", render_result(&blocking!(consumer.commit_consumer_state(CommitMode::Sync))));
        ctx.note("committed after store_offsets", committed().await);
        ctx.note("store_offset of a partition not assigned", render_result(&consumer.store_offset(&t, 5, 1)));
        // Commit callbacks are served from recv, as rebalance callbacks.
        let _ = read(&consumer, 8, Duration::from_secs(2)).await;
        let commits = || std::mem::take(&mut *observer.commits.lock().expect("events lock")).join(", ");
        ctx.note("commit callbacks after the sync commits", commits());
        ctx.note(
            "commit offset 7, async",
            render_result(&blocking!(consumer.commit(&tpl(&t, &[(0, Offset::Offset(7))])?, CommitMode::Async))),
        );
        let _ = read(&consumer, 8, Duration::from_secs(6)).await;
        ctx.note("commit callbacks after the async commit", commits());
        ctx.note("committed after the async commit", committed().await);
        let auto_store: StreamConsumer = consumer_config(ctx, &g, "earliest").create().map_err(err)?;
        auto_store.assign(&tpl(&t, &[(0, Offset::Beginning)])?).map_err(err)?;
        ctx.note(
            "another consumer, automatic offset store: reads",
            read(&auto_store, 1, CLIENT_TIMEOUT).await.join(" "),
        );
        ctx.note("store_offset with enable.auto.offset.store=true", render_result(&auto_store.store_offset(&t, 0, 1)));
        close(consumer).await;
        close(auto_store).await;
        Ok(())
    }

    pub async fn commit_of_a_partition_not_assigned(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let u = created(ctx, "u", 2).await?;
        let g = ctx.name("g");
        let mut m = Member::subscribed(&consumer_config(ctx, &g, "earliest"), &t, false)?;
        pump_until(&mut [&mut m], "assigned", |ms| !ms[0].assigned().is_empty()).await?;
        ctx.note("assignment", format!("{:?}", m.assigned()));
        let other = tpl(&u, &[(1, Offset::Offset(3))])?;
        ctx.note(
            "commit a partition of another topic",
            render_result(&blocking!(m.consumer.commit(&other, CommitMode::Sync))),
        );
        let committed = blocking!(
            m.consumer.committed_offsets(tpl(&u, &[(0, Offset::Invalid), (1, Offset::Invalid)])?, TEN_SECONDS)
        );
        ctx.note("committed of that topic", committed.map(|c| render_tpl(&c)).unwrap_or_else(|e| render_err(&e)));
        let past = tpl(&t, &[(3, Offset::Offset(1))])?;
        ctx.note(
            "commit a partition the topic does not have",
            render_result(&blocking!(m.consumer.commit(&past, CommitMode::Sync))),
        );
        let missing = tpl(&ctx.name("missing"), &[(0, Offset::Offset(1))])?;
        ctx.note("commit a missing topic", render_result(&blocking!(m.consumer.commit(&missing, CommitMode::Sync))));
        ctx.note("assignment after", format!("{:?}", m.assigned()));
        ctx.note("rebalances", m.take_rebalances());
        close(m.consumer).await;
        Ok(())
    }

    pub async fn seek_pause_and_resume(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let producer = producer(ctx, &[])?;
        deliver(&producer, &t, &values(0..10), None).await;
        let consumer: StreamConsumer = consumer_config(ctx, &ctx.name("g"), "earliest").create().map_err(err)?;
        consumer.assign(&tpl(&t, &[(0, Offset::Beginning)])?).map_err(err)?;
        ctx.note("read 3", read(&consumer, 3, CLIENT_TIMEOUT).await.join(" "));
        ctx.note("seek to 7", render_result(&consumer.seek(&t, 0, Offset::Offset(7), TEN_SECONDS)));
        ctx.note("read 1 after the seek", read(&consumer, 1, CLIENT_TIMEOUT).await.join(" "));
        ctx.note("position", consumer.position().map(|p| render_tpl(&p)).unwrap_or_else(|e| render_err(&e)));
        let p0 = tpl(&t, &[(0, Offset::Invalid)])?;
        ctx.note("pause", render_result(&consumer.pause(&p0)));
        ctx.note("read while paused (2 s)", read(&consumer, 1, Duration::from_secs(2)).await.join(" "));
        ctx.note("resume", render_result(&consumer.resume(&p0)));
        ctx.note("read 2 after resuming", read(&consumer, 2, CLIENT_TIMEOUT).await.join(" "));
        ctx.note("seek to the beginning", render_result(&consumer.seek(&t, 0, Offset::Beginning, TEN_SECONDS)));
        ctx.note("read 1 after seeking to the beginning", read(&consumer, 1, CLIENT_TIMEOUT).await.join(" "));
        ctx.note("seek to the end", render_result(&consumer.seek(&t, 0, Offset::End, TEN_SECONDS)));
        ctx.note("read after seeking to the end (2 s)", read(&consumer, 1, Duration::from_secs(2)).await.join(" "));
        ctx.note("seek a partition not assigned", render_result(&consumer.seek(&t, 3, Offset::Offset(1), TEN_SECONDS)));
        Ok(())
    }
}
