//! A value the broker appended twice, and whether the list-append check excuses it
//! (`kafkasim::history::epoch_bump`): a retry re-stamped under a higher epoch of the same
//! producer id is excused (librdkafka#4953: an idempotent producer's epoch bump after a message
//! timeout); a copy under the same epoch, or by another producer id, still fails rule 2. The
//! broker keeps each batch's producer epoch (`BatchView::producer_epoch`).

use kafkasim::history::epoch_bump::record_final_logs_excusing;
use kafkasim::history::{PRODUCE_VERSION, Recording, produce_partition, produce_request};
use kafkasim::kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
use kafkasim::{Client, Cluster};
use sim::check::list_append::{ListAppend, Recorder};
use sim::net::TcpStream;
use sim::{Class, Ctx, Failure, Simulation};

const TOPIC: &str = "orders";

/// How the second copy of the value is stamped.
#[derive(Clone, Copy, Debug)]
enum Copy {
    /// The same producer id under a bumped epoch, sequence 0: what librdkafka does.
    HigherEpoch,
    /// The same producer id and epoch, the next sequence: a deduplication bug.
    SameEpoch,
    /// Another producer id (bumped once so that its epoch is higher too).
    OtherProducer,
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("kafka", e.to_string())
}

/// `InitProducerId`: a new producer id, or `existing` with its epoch bumped.
async fn init(client: &mut Client<TcpStream>, existing: Option<(i64, i16)>) -> Result<(i64, i16), Failure> {
    let (id, epoch) = existing.unwrap_or((-1, -1));
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch);
    let r = client.send(request, 4).await.map_err(fail)?;
    if r.error_code != 0 {
        return Err(fail(format!("InitProducerId answered {}", r.error_code)));
    }
    Ok((r.producer_id.0, r.producer_epoch))
}

/// Sends `value` as one batch stamped `producer`; the partition's base offset.
async fn send(client: &mut Client<TcpStream>, value: &str, producer: (i64, i16, i32)) -> Result<i64, Failure> {
    let request = produce_request(TOPIC, 0, &[value], -1, Some(producer)).map_err(fail)?;
    let response = client.send(request, PRODUCE_VERSION).await.map_err(fail)?;
    let p = produce_partition(&response, TOPIC, 0).ok_or_else(|| fail("no partition in the response"))?;
    if p.error_code != 0 {
        return Err(fail(format!("{value} {producer:?}: produce answered {}", p.error_code)));
    }
    Ok(p.base_offset)
}

/// `x`, then `a` recorded once but appended twice: its first attempt persisted with its response
/// lost, its retry stamped as `copy` says and acknowledged at offset 2.
async fn twice(ctx: Ctx, copy: Copy) -> Result<(), Failure> {
    let cluster = Cluster::builder().brokers(1).build();
    cluster.serve_sim(&ctx).map_err(fail)?;
    cluster.create_topic(TOPIC, 1).map_err(|e| fail(format!("{e:?}")))?;
    ctx.add_check(ListAppend::new());
    let recording = Recording::new(&Recorder::of(&ctx), "api");
    let stream = ctx.net().host("api").dial("kafka-0:9092").await.map_err(fail)?;
    let mut client = Client::new(stream, "api");
    let (pid, epoch) = init(&mut client, None).await?;

    let x = recording.appends(TOPIC, 0, &["x"]);
    let response =
        client.send(produce_request(TOPIC, 0, &["x"], -1, Some((pid, epoch, 0))).map_err(fail)?, PRODUCE_VERSION);
    x.finish(produce_partition(&response.await.map_err(fail)?, TOPIC, 0).ok_or_else(|| fail("no partition"))?);

    let a = recording.appends(TOPIC, 0, &["a"]);
    send(&mut client, "a", (pid, epoch, 1)).await?; // persisted; the client never learns it
    let (retry, expected_epoch) = match copy {
        Copy::HigherEpoch => {
            let (id, bumped) = init(&mut client, Some((pid, epoch))).await?;
            ((id, bumped, 0), bumped)
        }
        Copy::SameEpoch => ((pid, epoch, 2), epoch),
        Copy::OtherProducer => {
            let other = init(&mut client, None).await?;
            let (id, bumped) = init(&mut client, Some(other)).await?;
            ((id, bumped, 0), bumped)
        }
    };
    let request = produce_request(TOPIC, 0, &["a"], -1, Some(retry)).map_err(fail)?;
    let response = client.send(request, PRODUCE_VERSION).await.map_err(fail)?;
    a.finish(produce_partition(&response, TOPIC, 0).ok_or_else(|| fail("no partition"))?);

    let view = cluster.partition(TOPIC, 0).ok_or_else(|| fail("no partition"))?;
    let stamps: Vec<(i64, i64, i16)> =
        view.batches.iter().map(|b| (b.base_offset, b.producer_id, b.producer_epoch)).collect();
    if stamps != [(0, pid, epoch), (1, pid, epoch), (2, retry.0, expected_epoch)] {
        return Err(fail(format!("the batches' producer stamps are {stamps:?}")));
    }
    let copies = record_final_logs_excusing(&ctx, &cluster, TOPIC).await.map_err(fail)?;
    let offsets: Vec<u64> = copies.iter().map(|c| c.offset).collect();
    let expected: &[u64] = if matches!(copy, Copy::HigherEpoch) { &[2] } else { &[] };
    if offsets != expected {
        return Err(fail(format!("{copy:?}: excused copies at {offsets:?}, expected {expected:?}")));
    }
    Ok(())
}

fn failure(name: &str, copy: Copy) -> (Failure, bool) {
    let report = Simulation::new(name).seeds(0..1).confirm(0).run(move |ctx| twice(ctx, copy));
    let passed = report.passed();
    (report.outcomes[0].failure.clone().expect("the value is in the log twice"), passed)
}

#[test]
fn a_retry_re_stamped_under_a_higher_epoch_of_the_same_producer_id_is_excused() {
    let (f, passed) = failure("epoch_bump_higher_epoch", Copy::HigherEpoch);
    assert!(passed, "{f}");
    assert_eq!((f.class, f.oracle.as_deref()), (Class::Excused, Some("list-append")), "{f}");
    assert!(f.message.starts_with("rule 2 value-at-two-offsets: key orders-0 value a offsets [1, 2]"), "{f}");
    assert!(f.message.contains("under epoch 1 after its epoch-0 copy at 1"), "{f}");
}

#[test]
fn a_duplicate_under_the_same_epoch_fails_rule_2() {
    let (f, passed) = failure("epoch_bump_same_epoch", Copy::SameEpoch);
    assert!(!passed, "{f}");
    assert_eq!((f.class, f.oracle.as_deref()), (Class::Correctness, Some("list-append")), "{f}");
    assert!(f.message.starts_with("rule 2 value-at-two-offsets: key orders-0 value a"), "{f}");
}

#[test]
fn a_copy_by_another_producer_id_fails_rule_2_even_under_a_higher_epoch() {
    let (f, passed) = failure("epoch_bump_other_producer", Copy::OtherProducer);
    assert!(!passed, "{f}");
    assert_eq!((f.class, f.oracle.as_deref()), (Class::Correctness, Some("list-append")), "{f}");
    assert!(f.message.starts_with("rule 2 value-at-two-offsets: key orders-0 value a"), "{f}");
}
