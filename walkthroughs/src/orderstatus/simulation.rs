//! The simulation: a kafkasim cluster on the simulated network, the API (`api-N`), the projector
//! group (`projector-N`, 1–3 replicas, two versions for rollouts), customers placing and
//! advancing orders over HTTP, and the swarm's faults; then the oracles.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kafkasim::kafka_protocol::ResponseError as E;
use kafkasim::kafka_protocol::messages::ApiKey;
use kafkasim::models::{ConsumerSettings, Recorder, Spec};
use kafkasim::{Cluster, Control, Fault, FaultAction};
use sim::check::LivenessBound;
use sim::check::list_append::{self, ListAppend};
use sim::node::{CrashMode, Lifecycle, Version};
use sim::prelude::*;

use super::model::{Advance, MemoryStore, Observer, ProjectorConfig, Served, Status, Store};
use super::observe::{AppendObserver, MemberObserver};
use super::{GROUP, ORDER_SERVED, STATUS_MONOTONIC, TOPIC, Variant, service};

/// The orders topic's partitions.
pub const PARTITIONS: i32 = 3;
/// The API's port.
pub const API_PORT: u16 = 8080;
/// How long a customer waits for the API.
const CALL_TIMEOUT: Duration = Duration::from_secs(8);
/// How long the API's producer tries to deliver a record.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(5);

/// The projectors' `socket.connection.setup.timeout.ms`: a connect begun during a partition is
/// given up this soon after it (else it waits for its next SYN retransmission, up to librdkafka's
/// default 30 s), and Q9's bound counts it.
const CONNECTION_SETUP_TIMEOUT: Duration = Duration::from_secs(2);

/// The consumer timings of a swarm.
#[derive(Clone, Copy, Debug)]
struct Timings {
    session: Duration,
    heartbeat: Duration,
    max_poll: Duration,
    processing: Duration,
}

impl Timings {
    fn of(ctx: &Ctx, churn: bool) -> Timings {
        let swarm = ctx.swarm();
        if churn {
            Timings {
                session: swarm
                    .duration("orderstatus.session", Duration::from_millis(600)..=Duration::from_millis(1500)),
                heartbeat: Duration::from_millis(150),
                max_poll: Duration::from_secs(3),
                processing: swarm
                    .duration("orderstatus.processing", Duration::from_millis(40)..=Duration::from_millis(150)),
            }
        } else {
            Timings {
                session: swarm.duration("orderstatus.session", Duration::from_secs(3)..=Duration::from_secs(10)),
                heartbeat: Duration::from_millis(500),
                max_poll: Duration::from_secs(20),
                processing: swarm
                    .duration("orderstatus.processing", Duration::from_millis(5)..=Duration::from_millis(40)),
            }
        }
    }

    /// A projector's grace after SIGTERM: the drain (5 s), then a close whose LeaveGroup may
    /// queue behind a JoinGroup the coordinator holds until a crashed member's session expires
    /// (Kafka answers a connection's requests in order), and a margin — as a deployment sets
    /// its termination grace above `session.timeout.ms`.
    fn grace(&self) -> Duration {
        Duration::from_secs(5) + self.session + Duration::from_secs(3)
    }

    fn settings(&self) -> ConsumerSettings {
        ConsumerSettings {
            session_timeout: self.session,
            heartbeat_interval: self.heartbeat,
            max_poll_interval: self.max_poll,
            reconnect_backoff_max: Duration::from_secs(1),
            retry_backoff_max: Duration::from_secs(1),
            fetch_wait_max: Duration::from_millis(100),
            connection_setup_timeout: CONNECTION_SETUP_TIMEOUT,
            initial_rebalance_delay: Duration::ZERO,
            processing_max: self.processing * 4,
        }
    }
}

fn projector_config(bootstrap: &str, name: &str, t: Timings, fence: bool) -> ProjectorConfig {
    ProjectorConfig {
        bootstrap: bootstrap.to_string(),
        group: GROUP.to_string(),
        topic: TOPIC.to_string(),
        client_id: name.to_string(),
        session_timeout: t.session,
        heartbeat_interval: t.heartbeat,
        max_poll_interval: t.max_poll,
        processing: t.processing,
        fence,
        // The drain leaves the close the rest of the grace, but for 0.5 s.
        drain_timeout: Duration::from_secs(5),
        shutdown_timeout: t.grace() - Duration::from_millis(500),
        extra: vec![
            ("fetch.wait.max.ms".into(), "100".into()),
            ("socket.connection.setup.timeout.ms".into(), CONNECTION_SETUP_TIMEOUT.as_millis().to_string()),
            ("reconnect.backoff.max.ms".into(), "1000".into()),
            ("retry.backoff.max.ms".into(), "1000".into()),
        ],
    }
}

async fn projector_main(
    node: NodeCtx,
    bootstrap: String,
    timings: Timings,
    fence: bool,
    store: Arc<dyn Store>,
    rec: Recorder,
) -> Result<(), BoxError> {
    let config = projector_config(&bootstrap, node.name(), timings, fence);
    let observer: Arc<dyn Observer> = Arc::new(MemberObserver::new(rec.member(GROUP, node.name())));
    node.set_ready();
    service::projector(config, store, observer, node.shutdown_signal()).await?;
    Ok(())
}

async fn api_main(node: NodeCtx, bootstrap: String, store: Arc<dyn Store>) -> Result<(), BoxError> {
    let producer = service::api_producer(&bootstrap, node.name(), MESSAGE_TIMEOUT)?;
    let observer = AppendObserver::new(list_append::Recorder::of(node.sim()), node.name(), TOPIC, PARTITIONS);
    let router = service::api(producer, TOPIC, store, Arc::new(observer));
    let listener = node.host().listen(&API_PORT.to_string())?;
    node.set_ready();
    sim::node::serve(&node, listener, router).await
}

/// What the customers did and saw.
#[derive(Default, Debug)]
struct Ledger {
    /// order → the highest status acknowledged (200) and the highest attempted.
    orders: BTreeMap<String, (Option<Status>, Status)>,
    /// Every status served: (order, asked at, answered at, status).
    served: Vec<(String, Duration, Duration, Status)>,
}

type HttpClient = hyper_util::client::legacy::Client<sim::net::adapters::Connector, Full<Bytes>>;

fn http_client(host: &Host) -> HttpClient {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(sim::net::adapters::Connector::new(host.clone()))
}

async fn call(
    client: &HttpClient,
    method: http::Method,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String), String> {
    let request = http::Request::builder()
        .method(method)
        .uri(format!("http://api:{API_PORT}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| e.to_string())?;
    let answer = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok::<_, String>((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(CALL_TIMEOUT, answer).await.map_err(|_| "no answer".to_string())?
}

async fn get_status(client: &HttpClient, order: &str) -> Result<Option<Status>, String> {
    match call(client, http::Method::GET, &format!("/orders/{order}"), None).await? {
        (200, body) => serde_json::from_str::<Served>(&body).map(|s| Some(s.status)).map_err(|e| e.to_string()),
        (404, _) => Ok(None),
        (code, body) => Err(format!("{code} {body}")),
    }
}

/// The next status of an order at `current`, or `None` when it is final.
fn next_status(current: Option<Status>, cancel: bool) -> Option<Status> {
    match current {
        None => Some(Status::Placed),
        Some(Status::Placed | Status::Paid) if cancel => Some(Status::Cancelled),
        Some(Status::Placed) => Some(Status::Paid),
        Some(Status::Paid) => Some(Status::Shipped),
        Some(Status::Shipped) => Some(Status::Delivered),
        Some(Status::Delivered | Status::Cancelled) => None,
    }
}

/// One customer: places orders and advances them one acknowledged step at a time; reads its
/// orders' statuses in between.
async fn customer(ctx: Ctx, index: usize, ops: u64, ledger: Arc<Mutex<Ledger>>) {
    let name = format!("customer-{index}");
    let client = http_client(&ctx.net().host(&name));
    let mut source = ctx.source(&format!("orderstatus/{name}"));
    let mut mine: Vec<(String, Option<Status>)> = Vec::new();
    for op in 0..ops {
        tokio::time::sleep(source.duration(Duration::from_millis(50)..=Duration::from_millis(400))).await;
        let open: Vec<usize> = (0..mine.len()).filter(|&i| mine[i].1.is_none_or(|s| !s.is_final())).collect();
        if source.ratio(1, 4) && !mine.is_empty() {
            let (order, _) = &mine[source.below(mine.len() as u64) as usize];
            let asked = ctx.elapsed();
            if let Ok(Some(status)) = get_status(&client, order).await {
                let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
                l.served.push((order.clone(), asked, ctx.elapsed(), status));
            }
            continue;
        }
        let slot = if open.is_empty() || (mine.len() < 6 && source.ratio(1, 3)) {
            mine.push((format!("{name}-order-{}", mine.len()), None));
            mine.len() - 1
        } else {
            open[source.below(open.len() as u64) as usize]
        };
        let (order, current) = mine[slot].clone();
        let Some(next) = next_status(current, source.ratio(1, 5)) else { continue };
        {
            let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
            let entry = l.orders.entry(order.clone()).or_insert((None, next));
            entry.1 = entry.1.max(next);
        }
        let body = serde_json::to_string(&Advance { request: format!("{order}-{}-{op}", next.name()) })
            .expect("a request serializes");
        let answer = call(&client, http::Method::POST, &format!("/orders/{order}/{}", next.name()), Some(body)).await;
        ctx.record("orderstatus.advance", &name, format!("{order} → {}: {answer:?}", next.name()));
        if matches!(answer, Ok((200, _))) {
            mine[slot].1 = Some(next);
            let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
            let entry = l.orders.entry(order).or_insert((None, next));
            entry.0 = entry.0.max(Some(next));
        }
    }
}

/// Broker faults drawn from the swarm (`orderstatus.broker_faults`): a broker down for a while,
/// produces applied with their responses lost, commits refused as from a coordinator moving. A
/// fault drawn near the window's end may outlast it: the heal ends it (`System::end_at_heal`), so
/// Q9 and order-served measure from a heal with no fault in force.
fn broker_faults(ctx: &Ctx, system: &System, cluster: &Cluster, window: std::ops::Range<Duration>) {
    let count = ctx.swarm().int("orderstatus.broker_faults", 0..=3);
    let mut source = ctx.source("orderstatus/broker-faults");
    let brokers = cluster.broker_ids();
    for _ in 0..count {
        let at = source.duration(window.start..=window.end);
        let lasting = source.duration(Duration::from_millis(200)..=Duration::from_secs(3));
        match source.below(3) {
            0 if brokers.len() > 1 => {
                let id = brokers[source.below(brokers.len() as u64) as usize];
                system.end_at_heal(cluster.at(ctx, at, Control::BrokerDown(id)).lasting_releasable(lasting));
            }
            1 => {
                let fault = Fault::new(ApiKey::Produce, FaultAction::ApplyThenDrop).topic(TOPIC);
                system.end_at_heal(cluster.at(ctx, at, fault).lasting_releasable(lasting));
            }
            _ => {
                let refused = FaultAction::Error(E::NotCoordinator);
                system.end_at_heal(
                    cluster.at(ctx, at, Fault::new(ApiKey::OffsetCommit, refused)).lasting_releasable(lasting),
                );
            }
        }
    }
}

/// The churn swarm's extra projector restarts, crashes and rollouts: frequent rebalances.
fn churn(ctx: &Ctx, system: &System, window: std::ops::Range<Duration>) {
    let projectors = system.replicas("projector");
    let mut source = ctx.source("orderstatus/churn");
    let events = ctx.swarm().int("orderstatus.churn_events", 4..=10);
    for _ in 0..events {
        let at = source.duration(window.start..=window.end);
        let node = projectors[source.below(projectors.len() as u64) as usize].clone();
        let event = match source.below(4) {
            0 => Lifecycle::Restart { node, how: sim::node::Restart::Graceful },
            1 => {
                let down = source.duration(Duration::from_millis(100)..=Duration::from_secs(2));
                system.at(at + down, Lifecycle::Start { node: node.clone() });
                Lifecycle::Crash { node, mode: CrashMode::Seeded }
            }
            2 => Lifecycle::Rollout {
                service: "projector".into(),
                version: Version::named(if source.bool(0.5) { "v2" } else { "v1" }),
            },
            _ => Lifecycle::Partition {
                node,
                lasting: source.duration(Duration::from_millis(200)..=Duration::from_secs(3)),
            },
        };
        system.at(at, event);
    }
}

/// One run of the order-status system with `variant`.
///
/// # Errors
/// The first oracle that fired.
pub async fn run(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    let churn_swarm = variant.churn();
    let setup = |e: String| Failure::liveness("setup", e);
    let cluster = Cluster::builder()
        .brokers(if churn_swarm { 1 } else { ctx.swarm().int("orderstatus.brokers", 1..=3) as i32 })
        .initial_rebalance_delay(Duration::ZERO)
        .session_timeouts(Duration::from_millis(100), Duration::from_secs(1800))
        .build();
    let bootstrap = cluster.serve_sim(&ctx).map_err(|e| setup(e.to_string()))?;
    cluster.create_topic(TOPIC, PARTITIONS).map_err(|e| setup(format!("{e:?}")))?;
    let timings = Timings::of(&ctx, churn_swarm);
    let spec = Spec::at_least_once(GROUP).settings(&timings.settings());
    kafkasim::models::install(&ctx, &cluster, &spec);
    ctx.add_check(ListAppend::new());
    let rec = Recorder::sim(&ctx, &cluster);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());

    let system = System::new(&ctx);
    let (b, s) = (bootstrap.clone(), Arc::clone(&store));
    system.add(
        ServiceSpec::new("api", move |node| api_main(node, b.clone(), Arc::clone(&s))).grace(Duration::from_secs(5)),
    );
    let fence = !variant.planted();
    let projector = |bootstrap: String, store: Arc<dyn Store>, rec: Recorder| {
        move |node| projector_main(node, bootstrap.clone(), timings, fence, Arc::clone(&store), rec.clone())
    };
    system.add(
        ServiceSpec::new("projector", projector(bootstrap.clone(), Arc::clone(&store), rec.clone()))
            .version("v2", projector(bootstrap.clone(), Arc::clone(&store), rec.clone()))
            .replicas(1..=3)
            .grace(timings.grace()),
    );
    system.start().await?;

    let window = Duration::from_secs(if churn_swarm { 15 } else { 20 });
    let start = ctx.elapsed();
    let faults = start + Duration::from_millis(500)..start + window;
    system.schedule_lifecycle(faults.clone());
    if churn_swarm {
        churn(&ctx, &system, faults.clone());
    }
    let mut hosts = system.replicas("projector");
    hosts.extend(system.replicas("api"));
    Nemesis::new(&hosts, faults.clone()).max_faults(2).longest(Duration::from_secs(2)).schedule(&ctx);
    broker_faults(&ctx, &system, &cluster, faults);

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let customers = ctx.swarm().int("orderstatus.customers", 2..=3) as usize;
    let ops = ctx.swarm().int("orderstatus.ops", 15..=30);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..customers {
        tasks.spawn(customer(ctx.clone(), i, ops, Arc::clone(&ledger)));
    }
    while tasks.join_next().await.is_some() {}
    let left = (start + window).saturating_sub(ctx.elapsed());
    tokio::time::sleep(left).await;

    system.heal().await?;
    rec.heal(GROUP);
    served_once_healed(&ctx, &ledger, &timings).await?;
    // Every acknowledged order is served, but a record whose produce was not acknowledged may
    // still wait for the group: Q9 judges from the heal, so the run goes on until the group
    // caught up or Q9's bound passed.
    rec.settle(GROUP, spec.bound().total()).await;
    system.stop().await?;
    // The idempotent producer may append a record again after a message timeout (its epoch
    // bump re-stamps a possibly persisted retry, librdkafka#4953): the list-append check excuses
    // exactly those copies, same producer id under a higher epoch.
    kafkasim::history::epoch_bump::record_final_logs_excusing(&ctx, &cluster, TOPIC)
        .await
        .map_err(|e| Failure::liveness("final-read", e.to_string()))?;
    never_backwards(&ledger.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Liveness: once faults heal, every placed order is served with its final status — at least the
/// highest acknowledged, at most the highest attempted (an unacknowledged advance may have been
/// produced).
async fn served_once_healed(ctx: &Ctx, ledger: &Arc<Mutex<Ledger>>, t: &Timings) -> Result<(), Failure> {
    let client = http_client(&ctx.net().host("checker"));
    let bound = LivenessBound::new()
        .plus("session expiry of a member that did not come back", t.session)
        .plus("rebalance (max.poll.interval.ms)", t.max_poll)
        .plus("reconnect and retry backoffs", Duration::from_secs(2))
        .plus("a producer's delivery timeout (message.timeout.ms)", MESSAGE_TIMEOUT)
        .plus("processing what waited", Duration::from_secs(10));
    let orders = ledger.lock().unwrap_or_else(|p| p.into_inner()).orders.clone();
    sim::check::liveness(ctx, &bound, || {
        let (client, orders, ledger) = (client.clone(), orders.clone(), Arc::clone(ledger));
        async move {
            for (order, (acked, attempted)) in &orders {
                let Some(acked) = acked else { continue };
                let asked = ctx.elapsed();
                let served = match get_status(&client, order).await {
                    Ok(s) => s,
                    Err(e) => return OpOutcome::Failed(format!("{order}: {e}")),
                };
                if let Some(s) = served {
                    ledger.lock().unwrap_or_else(|p| p.into_inner()).served.push((
                        order.clone(),
                        asked,
                        ctx.elapsed(),
                        s,
                    ));
                }
                match served {
                    Some(s) if s.rank() >= acked.rank() && s.rank() <= attempted.rank() => {}
                    other => {
                        return OpOutcome::Failed(format!(
                            "{order}: served {other:?}, acknowledged {acked:?}, attempted up to {attempted:?}"
                        ));
                    }
                }
            }
            OpOutcome::Ok(format!("{} orders served", orders.len()))
        }
    })
    .await
    .map_err(|f| Failure { oracle: Some(ORDER_SERVED), ..f })
}

/// No served status goes backwards: a status served after another was answered (in real time)
/// is not of a lower rank.
fn never_backwards(ledger: &Ledger) -> Result<(), Failure> {
    let mut by_order: BTreeMap<&str, Vec<(Duration, Duration, Status)>> = BTreeMap::new();
    for (order, asked, answered, status) in &ledger.served {
        by_order.entry(order).or_default().push((*asked, *answered, *status));
    }
    for (order, reads) in by_order {
        for a in &reads {
            for b in &reads {
                if a.1 < b.0 && b.2.rank() < a.2.rank() {
                    return Err(Failure::correctness(
                        STATUS_MONOTONIC,
                        format!("{order}: served {:?} at {:?}, then {:?} at {:?}", a.2, a.1, b.2, b.1),
                    ));
                }
            }
        }
    }
    Ok(())
}
