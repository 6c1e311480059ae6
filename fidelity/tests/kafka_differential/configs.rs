//! Raw-protocol scenarios about topic configs (CreateTopics' configs, DescribeConfigs,
//! IncrementalAlterConfigs, AlterConfigs, per-topic limits) and the internal topics
//! `__consumer_offsets` and `__transaction_state`.

use std::time::Duration;

use fidelity::runner::Ctx;
use kafkasim::kafka_protocol::messages::*;

use crate::support::*;

const DESCRIBE_CONFIGS_V: i16 = 4;
const ALTER_CONFIGS_V: i16 = 2;
const INCREMENTAL_ALTER_CONFIGS_V: i16 = 1;
/// ConfigResource type TOPIC.
const TOPIC: i8 = 2;

fn with_configs(mut q: CreateTopicsRequest, configs: &[(&str, Option<&str>)]) -> CreateTopicsRequest {
    q.topics[0].configs = configs
        .iter()
        .map(|(n, v)| create_topics_request::CreatableTopicConfig::default().with_name(s(n)).with_value(v.map(s)))
        .collect();
    q
}

fn message(m: &Option<kafkasim::kafka_protocol::protocol::StrBytes>) -> String {
    m.as_ref().map_or("null".to_string(), |m| format!("{:?}", m.as_str()))
}

/// Creates `topic` with `configs` and waits until it is usable.
pub async fn create_with(c: &mut Conn, topic: &str, configs: &[(&str, Option<&str>)]) -> R {
    let r = send(c, with_configs(create_topics_request(topic, 1, 1, false), configs), CREATE_TOPICS_V).await?;
    if r.topics[0].error_code != 0 {
        return Err(format!(
            "creating {topic}: {} {}",
            code(r.topics[0].error_code),
            message(&r.topics[0].error_message)
        ));
    }
    wait_topic_ready(c, topic, 1).await
}

/// DescribeConfigs of one topic: the code and message, and each config rendered as
/// `name=value source type [synonym …]`, sorted by name.
async fn describe(
    c: &mut Conn,
    topic: &str,
    keys: Option<&[&str]>,
    synonyms: bool,
    v: i16,
) -> R<(String, Vec<String>)> {
    let q = DescribeConfigsRequest::default().with_include_synonyms(synonyms).with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s(topic))
            .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect())),
    ]);
    let r = send(c, q, v).await?;
    let result = &r.results[0];
    let mut configs: Vec<String> = result
        .configs
        .iter()
        .map(|e| {
            let syn: Vec<String> = e
                .synonyms
                .iter()
                .map(|y| format!("{}={}/{}", y.name.as_str(), y.value.as_deref().unwrap_or("null"), y.source))
                .collect();
            format!(
                "{}={} source={} type={} read_only={} sensitive={} [{}]",
                e.name.as_str(),
                e.value.as_deref().unwrap_or("null"),
                e.config_source,
                e.config_type,
                e.read_only,
                e.is_sensitive,
                syn.join(" ")
            )
        })
        .collect();
    configs.sort();
    Ok((format!("{} {}", code(result.error_code), message(&result.error_message)), configs))
}

/// Bad values are refused as Kafka refuses them: `INVALID_CONFIG` with the same message; names
/// and partitions are checked before configs.
pub async fn create_topics_validates_configs(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "admin").await?;
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("max.message.bytes=-1", "max.message.bytes", Some("-1")),
        ("max.message.bytes=abc", "max.message.bytes", Some("abc")),
        ("max.message.bytes=' 100 '", "max.message.bytes", Some(" 100 ")),
        ("retention.ms=-2", "retention.ms", Some("-2")),
        ("retention.ms=-1", "retention.ms", Some("-1")),
        ("retention.bytes=-5", "retention.bytes", Some("-5")),
        ("cleanup.policy=compact, delete", "cleanup.policy", Some("compact, delete")),
        ("cleanup.policy=COMPACT", "cleanup.policy", Some("COMPACT")),
        ("min.insync.replicas=0", "min.insync.replicas", Some("0")),
        ("min.insync.replicas=2", "min.insync.replicas", Some("2")),
        ("message.timestamp.type=createtime", "message.timestamp.type", Some("createtime")),
        ("segment.bytes=1048575", "segment.bytes", Some("1048575")),
        ("delete.retention.ms=-1", "delete.retention.ms", Some("-1")),
        ("min.cleanable.dirty.ratio=2", "min.cleanable.dirty.ratio", Some("2")),
        ("remote.storage.enable=true", "remote.storage.enable", Some("true")),
        ("a broker config name", "message.max.bytes", Some("100")),
        ("a null value", "retention.ms", None),
        ("kfake's is_internal", "kfake.is_internal", Some("true")),
    ];
    for (label, name, value) in cases {
        let topic = ctx.name("cfg");
        let q = with_configs(create_topics_request(&topic, 1, 1, true), &[(name, *value)]);
        let r = send(&mut c, q, CREATE_TOPICS_V).await?;
        let t = &r.topics[0];
        ctx.note(format!("validate only, {label}"), format!("{} {}", code(t.error_code), message(&t.error_message)));
    }
    let conflict = [("min.compaction.lag.ms", Some("10")), ("max.compaction.lag.ms", Some("5"))];
    let r = send(&mut c, with_configs(create_topics_request(&ctx.name("lag"), 1, 1, true), &conflict), CREATE_TOPICS_V)
        .await?;
    ctx.note(
        "min.compaction.lag.ms above max",
        format!("{} {}", code(r.topics[0].error_code), message(&r.topics[0].error_message)),
    );
    let bad = [("no.such.config", Some("1"))];
    let r =
        send(&mut c, with_configs(create_topics_request(&ctx.name("p0"), 0, 1, true), &bad), CREATE_TOPICS_V).await?;
    ctx.note("zero partitions and an unknown config", code(r.topics[0].error_code));
    let existing = ctx.name("existing");
    create_ready_topic(&mut c, &existing, 1).await?;
    let r = send(&mut c, with_configs(create_topics_request(&existing, 1, 1, true), &bad), CREATE_TOPICS_V).await?;
    ctx.note("an existing topic and an unknown config", code(r.topics[0].error_code));
    Ok(())
}

/// CreateTopics v5+ answers the new topic's configs; DescribeConfigs lists all 33 with sources,
/// types and synonyms, or the keys asked for; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
pub async fn describe_configs_of_a_topic(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "admin").await?;
    let topic = ctx.name("t");
    let configs = [
        ("max.message.bytes", Some("51200")),
        ("retention.ms", Some("60000")),
        ("cleanup.policy", Some("compact, delete")),
    ];
    let r = send(&mut c, with_configs(create_topics_request(&topic, 1, 1, false), &configs), CREATE_TOPICS_V).await?;
    let t = &r.topics[0];
    let mut created: Vec<String> = t
        .configs
        .iter()
        .flatten()
        .map(|e| format!("{}={} source={}", e.name.as_str(), e.value.as_deref().unwrap_or("null"), e.config_source))
        .collect();
    created.sort();
    ctx.note("create with three configs", format!("{} configs: {}", code(t.error_code), created.join(", ")));
    wait_topic_ready(&mut c, &topic, 1).await?;
    let (result, all) = describe(&mut c, &topic, None, true, DESCRIBE_CONFIGS_V).await?;
    ctx.note("describe all, with synonyms", result);
    for line in all {
        let name = line.split('=').next().unwrap_or_default().to_string();
        ctx.note(format!("config {name}"), line);
    }
    let keys = ["retention.ms", "segment.bytes", "no.such.config"];
    let (result, some) = describe(&mut c, &topic, Some(&keys), false, DESCRIBE_CONFIGS_V).await?;
    ctx.note("describe three keys, no synonyms", format!("{result}: {}", some.join(" | ")));
    let (result, v1) = describe(&mut c, &topic, Some(&["max.message.bytes"]), true, 1).await?;
    ctx.note("describe at v1", format!("{result}: {}", v1.join(" | ")));
    let (result, none) = describe(&mut c, &ctx.name("missing"), None, false, DESCRIBE_CONFIGS_V).await?;
    ctx.note("describe an unknown topic", format!("{result}: {} configs", none.len()));
    Ok(())
}

fn alterable(name: &str, op: i8, value: Option<&str>) -> incremental_alter_configs_request::AlterableConfig {
    incremental_alter_configs_request::AlterableConfig::default()
        .with_name(s(name))
        .with_config_operation(op)
        .with_value(value.map(s))
}

async fn incremental(
    c: &mut Conn,
    topic: &str,
    ops: Vec<incremental_alter_configs_request::AlterableConfig>,
    validate_only: bool,
) -> R<String> {
    let q = IncrementalAlterConfigsRequest::default().with_validate_only(validate_only).with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s(topic))
            .with_configs(ops),
    ]);
    let r = send(c, q, INCREMENTAL_ALTER_CONFIGS_V).await?;
    Ok(format!("{} {}", code(r.responses[0].error_code), message(&r.responses[0].error_message)))
}

/// Waits until the broker has applied every metadata change made so far: Kafka applies a config
/// change from its metadata log after answering the alter, in log order, so once a topic
/// created afterwards is usable the change is visible to DescribeConfigs (kafkasim applies both
/// at once). `n` names the barrier topic.
async fn applied(c: &mut Conn, ctx: &Ctx, n: usize) -> R {
    let barrier = ctx.name(&format!("barrier{n}"));
    let created = create_topic(c, &barrier, 1).await?;
    if created != "NONE" {
        return Err(format!("creating {barrier}: {created}"));
    }
    wait_topic_ready(c, &barrier, 1).await
}

async fn overrides(c: &mut Conn, topic: &str) -> R<String> {
    let keys = ["cleanup.policy", "max.message.bytes", "retention.ms", "segment.ms"];
    let (_, lines) = describe(c, topic, Some(&keys), false, DESCRIBE_CONFIGS_V).await?;
    Ok(lines.iter().map(|l| l.split(" type=").next().unwrap_or_default()).collect::<Vec<_>>().join(", "))
}

/// IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT, their errors, validate_only, and
/// what DescribeConfigs shows after each.
pub async fn incremental_alter_configs_operations(ctx: &Ctx) -> R {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;
    let mut c = connect(ctx, "admin").await?;
    let topic = ctx.name("t");
    create_with(&mut c, &topic, &[("retention.ms", Some("60000"))]).await?;
    let steps: Vec<(&str, Vec<_>, bool)> = vec![
        ("set max.message.bytes", vec![alterable("max.message.bytes", SET, Some("2000"))], false),
        ("set an invalid value", vec![alterable("retention.ms", SET, Some("-5"))], false),
        ("set an unknown name", vec![alterable("no.such", SET, Some("1"))], false),
        ("set null", vec![alterable("retention.ms", SET, None)], false),
        ("validate only, set segment.ms", vec![alterable("segment.ms", SET, Some("1000"))], true),
        ("append compact", vec![alterable("cleanup.policy", APPEND, Some("compact"))], false),
        ("append delete again", vec![alterable("cleanup.policy", APPEND, Some("delete"))], false),
        ("subtract delete", vec![alterable("cleanup.policy", SUBTRACT, Some("delete"))], false),
        ("append an invalid element", vec![alterable("cleanup.policy", APPEND, Some("bogus"))], false),
        ("append to a non-list", vec![alterable("retention.ms", APPEND, Some("5"))], false),
        ("subtract from a non-list", vec![alterable("retention.ms", SUBTRACT, Some("5"))], false),
        (
            "two ops on one key",
            vec![alterable("retention.ms", SET, Some("5")), alterable("retention.ms", SET, Some("6"))],
            false,
        ),
        (
            "a valid and an invalid op",
            vec![alterable("segment.ms", SET, Some("1000")), alterable("retention.ms", SET, Some("-9"))],
            false,
        ),
        ("delete retention.ms", vec![alterable("retention.ms", DELETE, None)], false),
        ("delete an unset config", vec![alterable("segment.ms", DELETE, None)], false),
        ("delete an unknown name", vec![alterable("no.such", DELETE, None)], false),
        ("an unknown operation", vec![alterable("segment.ms", 9, Some("1000"))], false),
    ];
    for (n, (label, ops, validate_only)) in steps.into_iter().enumerate() {
        let result = incremental(&mut c, &topic, ops, validate_only).await?;
        applied(&mut c, ctx, n).await?;
        ctx.note(label, format!("{result} -> {}", overrides(&mut c, &topic).await?));
    }
    let result =
        incremental(&mut c, &ctx.name("missing"), vec![alterable("retention.ms", SET, Some("5"))], false).await?;
    ctx.note("an unknown topic", result);
    Ok(())
}

/// The legacy AlterConfigs replaces every override of the topic with the ones sent.
pub async fn alter_configs_replaces_every_override(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "admin").await?;
    let topic = ctx.name("t");
    create_with(&mut c, &topic, &[("retention.ms", Some("60000")), ("cleanup.policy", Some("compact"))]).await?;
    for (n, (label, configs, validate_only)) in [
        ("validate only, segment.ms", vec![("segment.ms", Some("1000"))], true),
        ("replace with segment.ms", vec![("segment.ms", Some("1000"))], false),
        ("an invalid value", vec![("segment.ms", Some("0"))], false),
        ("an unknown name", vec![("no.such", Some("1"))], false),
        ("nothing", vec![], false),
    ]
    .into_iter()
    .enumerate()
    {
        let q = AlterConfigsRequest::default().with_validate_only(validate_only).with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(s(&topic))
                .with_configs(
                    configs
                        .iter()
                        .map(|(n, v)| {
                            alter_configs_request::AlterableConfig::default().with_name(s(n)).with_value(v.map(s))
                        })
                        .collect(),
                ),
        ]);
        let r = send(&mut c, q, ALTER_CONFIGS_V).await?;
        let result = format!("{} {}", code(r.responses[0].error_code), message(&r.responses[0].error_message));
        applied(&mut c, ctx, n).await?;
        ctx.note(label, format!("{result} -> {}", overrides(&mut c, &topic).await?));
    }
    Ok(())
}

/// A topic's `max.message.bytes` bounds its batches (MESSAGE_TOO_LARGE), below or above the
/// broker's `message.max.bytes`, and follows IncrementalAlterConfigs.
pub async fn produce_follows_the_topics_max_message_bytes(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "producer").await?;
    let topic = ctx.name("t");
    create_with(&mut c, &topic, &[("max.message.bytes", Some("300"))]).await?;
    let small = batch(&["a"], 1000, None)?;
    let big_value = "x".repeat(400);
    let big = batch(&[big_value.as_str()], 1000, None)?;
    ctx.note("a 1-byte record", produce(&mut c, &topic, 0, small, 1).await?.0);
    ctx.note("a 400-byte record", produce(&mut c, &topic, 0, big.clone(), 1).await?.0);
    let raised = incremental(&mut c, &topic, vec![alterable("max.message.bytes", 0, Some("2000000"))], false).await?;
    ctx.note("raise max.message.bytes to 2000000", raised);
    // Kafka applies a config change asynchronously (the metadata log): wait for it.
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    let mut result = produce(&mut c, &topic, 0, big.clone(), 1).await?.0;
    while result != "NONE" && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        result = produce(&mut c, &topic, 0, big.clone(), 1).await?.0;
    }
    ctx.note("the 400-byte record after the raise", result);
    let huge_value = "y".repeat(1_500_000);
    let huge = batch(&[huge_value.as_str()], 1000, None)?;
    ctx.note("a 1.5 MB record, above the broker's default", produce(&mut c, &topic, 0, huge, 1).await?.0);
    Ok(())
}

/// After a group's FindCoordinator, `__consumer_offsets` is in Metadata as internal with 50
/// partitions and its own configs; producing to it is refused.
pub async fn consumer_offsets_is_an_internal_topic(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "admin").await?;
    coordinator_ready(&mut c, &ctx.name("g")).await?;
    internal_topic(ctx, &mut c, "__consumer_offsets").await
}

/// After a transactional id's FindCoordinator, `__transaction_state` is in Metadata as internal
/// with 50 partitions and its own configs; producing to it is refused.
pub async fn transaction_state_is_an_internal_topic(ctx: &Ctx) -> R {
    let mut c = connect(ctx, "admin").await?;
    find_coordinator(&mut c, &ctx.name("txn"), 1, Duration::from_secs(10)).await?;
    internal_topic(ctx, &mut c, "__transaction_state").await
}

/// Notes what Metadata, DescribeConfigs (the topic's own overrides) and Produce say of the
/// internal topic `name`.
async fn internal_topic(ctx: &Ctx, c: &mut Conn, name: &str) -> R {
    let m = send(c, metadata_request(&[name], false), METADATA_V).await?;
    let t = &m.topics[0];
    let led = t.partitions.iter().filter(|p| p.leader_id.0 >= 0).count();
    ctx.note(
        format!("metadata of {name}"),
        format!("{} internal={} partitions={} led={led}", code(t.error_code), t.is_internal, t.partitions.len()),
    );
    let all = send(c, MetadataRequest::default().with_topics(None), METADATA_V).await?;
    let listed = all.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name));
    ctx.note("metadata of all topics lists it", format!("{:?}", listed.map(|t| t.is_internal)));
    let (_, lines) = describe(c, name, None, false, DESCRIBE_CONFIGS_V).await?;
    let own: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains(" source=1 "))
        .map(|l| l.split(" source=").next().unwrap_or_default())
        .collect();
    ctx.note("its own configs", own.join(", "));
    let (produced, _) = produce(c, name, 0, batch(&["a"], 1000, None)?, 1).await?;
    ctx.note("produce to it", produced);
    Ok(())
}
