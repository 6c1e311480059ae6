//! Producer scenarios: deliveries with each `acks`, the idempotent producer, and what a message
//! read back carries. Read back through the same client's consumer.

per_client! {
    [
        produce_acks_0_then_consume,
        produce_acks_1_then_consume,
        produce_acks_all_then_consume,
        idempotent_producer_delivers_in_order_once,
        message_accessors_round_trip,
    ]

    use std::time::Duration;

    async fn produce_and_consume(ctx: &Ctx, acks: &str) -> R {
        let t = created(ctx, "t", 1).await?;
        let producer = producer(ctx, &[("acks", acks), ("linger.ms", "0")])?;
        ctx.note(format!("deliveries with acks={acks}"), deliver(&producer, &t, &values(0..10), None).await.join(" "));
        let consumer: StreamConsumer = config(ctx).set("group.id", ctx.name("reader")).create().map_err(err)?;
        consumer.assign(&tpl(&t, &[(0, Offset::Beginning)])?).map_err(err)?;
        ctx.note("read from the beginning", read(&consumer, 10, CLIENT_TIMEOUT).await.join(" "));
        Ok(())
    }

    pub async fn produce_acks_0_then_consume(ctx: &Ctx) -> R {
        produce_and_consume(ctx, "0").await
    }

    pub async fn produce_acks_1_then_consume(ctx: &Ctx) -> R {
        produce_and_consume(ctx, "1").await
    }

    pub async fn produce_acks_all_then_consume(ctx: &Ctx) -> R {
        produce_and_consume(ctx, "all").await
    }

    pub async fn idempotent_producer_delivers_in_order_once(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 1).await?;
        let producer = producer(
            ctx,
            &[("enable.idempotence", "true"), ("linger.ms", "5"), ("max.in.flight.requests.per.connection", "5")],
        )?;
        let values = values(0..50);
        let sends = values
            .iter()
            .map(|v| producer.send(FutureRecord::to(&t).partition(0).key(v).payload(v), Duration::from_secs(30)));
        let offsets: Vec<String> = futures::future::join_all(sends)
            .await
            .into_iter()
            .map(|r| match r {
                Ok(d) => d.offset.to_string(),
                Err((e, _)) => format!("error {}", render_err(&e)),
            })
            .collect();
        ctx.note("delivered offsets", offsets.join(" "));
        let consumer: StreamConsumer = config(ctx).set("group.id", ctx.name("reader")).create().map_err(err)?;
        consumer.assign(&tpl(&t, &[(0, Offset::Beginning)])?).map_err(err)?;
        let read = read(&consumer, 50, CLIENT_TIMEOUT).await;
        let in_order = read.iter().enumerate().all(|(i, r)| *r == format!("{i}:v{i}"));
        ctx.note("read back", format!("{} records, in order once: {in_order}", read.len()));
        Ok(())
    }

    pub async fn message_accessors_round_trip(ctx: &Ctx) -> R {
        let t = created(ctx, "t", 2).await?;
        let producer = producer(ctx, &[])?;
        let headers = OwnedHeaders::new()
            .insert(Header { key: "h1", value: Some("one") })
            .insert(Header { key: "h2", value: None::<&str> });
        let record =
            FutureRecord::to(&t).partition(1).key("k").payload("p").timestamp(crate::support::ts_base()).headers(headers);
        let d = producer.send(record, Duration::from_secs(30)).await.map_err(|(e, _)| render_err(&e))?;
        ctx.note("delivery", format!("partition={} offset={}", d.partition, d.offset));
        let no_key = FutureRecord::<str, str>::to(&t).partition(1).payload("");
        let d = producer.send(no_key, Duration::from_secs(30)).await.map_err(|(e, _)| render_err(&e))?;
        ctx.note("delivery without a key, empty payload", format!("partition={} offset={}", d.partition, d.offset));
        let consumer: StreamConsumer = config(ctx).set("group.id", ctx.name("reader")).create().map_err(err)?;
        consumer.assign(&tpl(&t, &[(1, Offset::Beginning)])?).map_err(err)?;
        for label in ["first record", "second record"] {
            let m = tokio::time::timeout(CLIENT_TIMEOUT, consumer.recv())
                .await
                .map_err(|_| format!("{label}: nothing within {CLIENT_TIMEOUT:?}"))?
                .map_err(|e| render_err(&e))?;
            let headers: Vec<String> = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| format!("{}={:?}", h.key, h.value.map(|v| String::from_utf8_lossy(v).to_string())))
                        .collect()
                })
                .unwrap_or_default();
            let timestamp = match m.timestamp() {
                kafka::message::Timestamp::CreateTime(ms) if ms == crate::support::ts_base() => {
                    "CreateTime(as sent)".to_string()
                }
                kafka::message::Timestamp::CreateTime(ms) => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_millis() as i64)
                        .unwrap_or_default();
                    format!("CreateTime(within a minute of now: {})", (now - ms).abs() < 60_000)
                }
                other => format!("{:?}", other.to_millis().map(|_| "a time other than the create time")),
            };
            ctx.note(
                label,
                format!(
                    "topic={} partition={} offset={} key={:?} payload={:?} timestamp={timestamp} headers=[{}]",
                    m.topic(),
                    m.partition(),
                    m.offset(),
                    m.key().map(|k| String::from_utf8_lossy(k).to_string()),
                    m.payload().map(|p| String::from_utf8_lossy(p).to_string()),
                    headers.join(" ")
                ),
            );
        }
        Ok(())
    }
}
