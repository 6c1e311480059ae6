//! tonic #2839 (open: present since tonic PR #458, in every release through 0.14.9; fix PR #2859
//! unmerged).
//!
//! A client balances over the replicas of a service with `Channel::balance_list` (or
//! `Channel::balance_channel`, fed the same list): tower's power-of-two-choices `Balance` over one
//! lazily connecting tonic `Connection` per endpoint. Each connection is tonic's internal
//! `Reconnect`; when its connect fails and it is lazy (the balancer's always are), `poll_ready`
//! stores the error and answers `Ready(Ok(()))`, leaving the error for the next `call`. p2c takes
//! that answer at its word: the dead endpoint sits among the ready ones, is picked like a healthy
//! one, and the call fails with `Unavailable: tcp connect error`. The failed call clears the error,
//! the next readiness check dials again, the dial fails again, the endpoint is "ready" again: as
//! long as a replica is down, a share of the client's calls keep failing although another replica
//! answers every call it is sent. (Answering `Err` instead would make tower's `ReadyCache` evict
//! the endpoint for good, which is why PR #2859 proposes a backoff that stays `Pending`.)
//!
//! Written as a user would have written it before the bug was known: two or three replicas, one
//! of which (drawn) serves throughout; each other replica is down from the start, or is stopped
//! (gracefully) before a drawn call and perhaps started again on its port later. One client makes
//! its calls one after another (`grpc.health.v1.Health/Check`, each with a deadline). Oracle:
//! - `one-failure-per-outage`: while one replica serves, an outage of another may cost the client
//!   at most one call (the call that raced it), so failed calls are at most the number of outages
//!   (replicas down at the start, plus stops).
//!
//! The smallest case: two replicas, one never started, ten calls
//! (`SIM_SWARM='replicas=2,healthy_replica=0,replica-1.outage=from-start,calls=10,api=balance_list'`):
//! 4 of the 10 calls fail with `Unavailable: tcp connect error`, on every seed.
//!
//! tonic's balancer builds every endpoint's connection with its own `HttpConnector`
//! (`Endpoint::http_connector`, crate-private; `DynamicServiceStream` calls it for every
//! `Change::Insert`), and tonic 0.14.9 has no public way to balance over a custom connector, so the
//! simulated network cannot be used here. The replicas are real tonic servers on real loopback
//! sockets (127.0.0.1, ports from the kernel, IP literals so no DNS), inside the run with
//! `Simulation::enable_io(true)`. The run's clock is paused; tokio advances it only when the
//! runtime parks and its zero-timeout poll of the I/O driver wakes no task (a wake, from a socket
//! or a timer, holds the clock). On loopback the kernel has each answer ready by the next park, so
//! the runs measured stay at fake time 0. Should a park find nothing ready, the clock would jump to
//! the next timer, the deadlock watcher's (10 minutes away): a 1 ms ticker bounds that step
//! instead. What the kernel does (ports, when a segment is readable) is outside the
//! simulation: the fresh-process confirmation says how exactly a failing seed replayed.

use std::time::Duration;

use sim::{Ctx, Failure, Oracle, Simulation};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// More calls failed than replicas went down, while another replica served throughout.
const ONE_FAILURE_PER_OUTAGE: Oracle = Oracle::new("one-failure-per-outage");

/// The deadline of each call.
const CALL_DEADLINE: Duration = Duration::from_secs(5);
/// How long a graceful stop of a replica may take.
const STOP_DEADLINE: Duration = Duration::from_secs(30);
/// The step of fake time while every task waits on a real socket.
const TICK: Duration = Duration::from_millis(1);

fn main() {
    let simulation = Simulation::new("tonic-2839").enable_io(true).time_limit(Duration::from_secs(600));
    regression::main(simulation, scenario);
}

/// What happens to a replica during the run.
#[derive(Clone, Copy, Debug)]
enum Plan {
    /// Serves throughout.
    Serves,
    /// Its port refuses from the start (a replica still in the list, never started).
    DownFromStart,
    /// Serves, is stopped before call `stop`, and is started again before call `restart`.
    Stopped { stop: u64, restart: Option<u64> },
}

async fn scenario(ctx: Ctx) -> Result<(), Failure> {
    let swarm = ctx.swarm();
    let replicas = swarm.int("replicas", 2..=3);
    let calls = swarm.int("calls", 10..=40);
    let healthy = swarm.int("healthy_replica", 0..=replicas - 1);
    let api = swarm.choice("api", &["balance_list", "balance_channel"]);
    let plans: Vec<Plan> = (0..replicas)
        .map(|i| {
            if i == healthy {
                return Plan::Serves;
            }
            match swarm.choice(&format!("replica-{i}.outage"), &["from-start", "stop", "stop-restart"]) {
                "from-start" => Plan::DownFromStart,
                kind => {
                    let stop = swarm.int(&format!("replica-{i}.stop_before_call"), 1..=calls / 2);
                    let restart = (kind == "stop-restart")
                        .then(|| stop + swarm.int(&format!("replica-{i}.down_for_calls"), 1..=calls / 2));
                    Plan::Stopped { stop, restart }
                }
            }
        })
        .collect();

    // Fake time moves only in small steps while the run waits on the kernel.
    tokio::spawn(async {
        loop {
            tokio::time::sleep(TICK).await;
        }
    });

    let mut fleet = Vec::new();
    let mut outages = 0u64;
    for (i, plan) in plans.iter().enumerate() {
        let mut replica = Replica::new(format!("replica-{i}"));
        match plan {
            Plan::DownFromStart => {
                replica.reserve_port().map_err(|e| setup(&replica.name, e))?;
                outages += 1;
                ctx.record("replica", &replica.name, "down from the start (its port refuses)");
            }
            _ => {
                replica.start().await.map_err(|e| setup(&replica.name, e))?;
                ctx.record("replica", &replica.name, "serving");
            }
        }
        fleet.push(replica);
    }

    let endpoints: Vec<Endpoint> = fleet
        .iter()
        .map(|r| Endpoint::from_shared(format!("http://127.0.0.1:{}", r.port)).expect("a loopback URI"))
        .collect();
    let (channel, _discovery) = match api {
        "balance_list" => (Channel::balance_list(endpoints.into_iter()), None),
        _ => {
            let (channel, tx) = Channel::balance_channel(16);
            for (i, endpoint) in endpoints.into_iter().enumerate() {
                tx.send(tonic::transport::channel::Change::Insert(i, endpoint))
                    .await
                    .map_err(|_| Failure::correctness("setup", "the balancer's discovery channel closed"))?;
            }
            (channel, Some(tx))
        }
    };
    let mut client = HealthClient::new(channel);

    let mut failed = 0u64;
    let mut first_failure = None;
    for call in 1..=calls {
        for (i, plan) in plans.iter().enumerate() {
            let Plan::Stopped { stop, restart } = *plan else { continue };
            let replica = &mut fleet[i];
            if stop == call {
                replica.stop().await?;
                outages += 1;
                ctx.record("replica", &replica.name, format!("stopped before call {call}"));
            } else if restart == Some(call) {
                match replica.start().await {
                    Ok(()) => ctx.record("replica", &replica.name, format!("serving again before call {call}")),
                    // Another socket took the port meanwhile: the replica stays down.
                    Err(e) => ctx.record("replica", &replica.name, format!("could not start again: {e}")),
                };
            }
        }
        let request = HealthCheckRequest { service: String::new() };
        let outcome = match tokio::time::timeout(CALL_DEADLINE, client.check(request)).await {
            Ok(Ok(_)) => None,
            Ok(Err(status)) => Some(format!("{:?}: {}", status.code(), status.message())),
            Err(_) => Some(format!("no answer within {CALL_DEADLINE:?}")),
        };
        match outcome {
            None => {
                ctx.record("call", "client", format!("call {call}: ok"));
            }
            Some(error) => {
                ctx.record("call", "client", format!("call {call}: failed ({error})"));
                failed += 1;
                first_failure.get_or_insert(format!("call {call}: {error}"));
            }
        }
    }

    if failed > outages {
        return Err(Failure::correctness(
            ONE_FAILURE_PER_OUTAGE,
            format!(
                "{failed} of {calls} calls failed while replica-{healthy} served throughout, but replicas went down \
                 only {outages} times (at most one failed call each); first: {}",
                first_failure.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

fn setup(name: &str, e: std::io::Error) -> Failure {
    Failure::correctness("setup", format!("{name}: cannot listen on loopback: {e}"))
}

/// One replica: a real tonic server (the gRPC health service) on a loopback port.
struct Replica {
    name: String,
    /// 0 until the kernel chose one; kept across a stop so the replica comes back at its address.
    port: u16,
    serving: Option<(oneshot::Sender<()>, JoinHandle<Result<(), tonic::transport::Error>>)>,
}

impl Replica {
    fn new(name: String) -> Replica {
        Replica { name, port: 0, serving: None }
    }

    /// Takes a port from the kernel and lets it go: nothing listens there, dials are refused.
    fn reserve_port(&mut self) -> std::io::Result<()> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        self.port = listener.local_addr()?.port();
        Ok(())
    }

    async fn start(&mut self) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port)).await?;
        self.port = listener.local_addr()?.port();
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let (_reporter, health) = tonic_health::server::health_reporter();
        let (tx, rx) = oneshot::channel::<()>();
        let server = Server::builder().add_service(health).serve_with_incoming_shutdown(incoming, async {
            let _ = rx.await;
        });
        self.serving = Some((tx, tokio::spawn(server)));
        Ok(())
    }

    /// A graceful stop: the listener closes at once (the port refuses), open connections get
    /// GOAWAY and close once their calls are done.
    async fn stop(&mut self) -> Result<(), Failure> {
        let Some((tx, task)) = self.serving.take() else { return Ok(()) };
        let _ = tx.send(());
        match tokio::time::timeout(STOP_DEADLINE, task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(Failure::correctness("server", format!("{}: {e}", self.name))),
            Ok(Err(_)) => Err(Failure::correctness("server", format!("{}: its server task panicked", self.name))),
            Err(_) => {
                Err(Failure::liveness("stop", format!("{}: graceful stop took over {STOP_DEADLINE:?}", self.name)))
            }
        }
    }
}
