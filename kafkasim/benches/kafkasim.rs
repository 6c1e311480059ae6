//! kafkasim's simulated-time benchmark (a bench binary: `cargo bench -p kafkasim --bench
//! kafkasim`, add `-- --quick` for a short run): a 3-member group through 100 rebalances inside
//! a simulation, driven by protocol-level clients over the simulated network.
//!
//! Broker start-to-ready and rdkafka produce/fetch throughput over loopback are measured side by
//! side with a real Apache Kafka broker, with ratios, by `cargo bench -p fidelity --bench kafka`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafkasim::kafka_protocol::ResponseError as E;
use kafkasim::kafka_protocol::messages::*;
use kafkasim::kafka_protocol::protocol::StrBytes;
use kafkasim::{Client, Cluster};
use sim::net::{NetConfig, TcpStream};
use sim::{Failure, Simulation};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("bench", e.to_string())
}

fn join_request(member_id: &str, round: u32) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from(round.to_be_bytes().to_vec())),
        ])
}

/// A member: joins, syncs, and — member 0 — rejoins with new metadata one second after each
/// sync (forcing a rebalance), or — the others — heartbeats every 500 ms and rejoins when told,
/// until the group reaches generation `target`.
async fn member(ctx: sim::Ctx, i: usize, target: i32) -> Result<(), Failure> {
    let stream: TcpStream = ctx.net().host(&format!("member-{i}")).dial("kafka-0:9092").await?;
    let mut c = Client::new(stream, &format!("member-{i}"));
    let mut member_id = String::new();
    let mut round = 0;
    'rejoin: loop {
        let mut j = c.send(join_request(&member_id, round), 7).await.map_err(fail)?;
        if j.error_code == E::MemberIdRequired.code() {
            member_id = j.member_id.to_string();
            j = c.send(join_request(&member_id, round), 7).await.map_err(fail)?;
        }
        if j.error_code != 0 {
            return Err(fail(format!("member-{i} join answered {}", j.error_code)));
        }
        member_id = j.member_id.to_string();
        let assignments = if j.leader == j.member_id {
            j.members
                .iter()
                .map(|m| sync_group_request::SyncGroupRequestAssignment::default().with_member_id(m.member_id.clone()))
                .collect()
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_generation_id(j.generation_id)
            .with_member_id(s(&member_id))
            .with_assignments(assignments);
        let synced = c.send(sync, 3).await.map_err(fail)?;
        if synced.error_code == E::RebalanceInProgress.code() {
            continue;
        }
        if j.generation_id >= target {
            return Ok(());
        }
        if i == 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            round += 1;
            continue;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let hb = HeartbeatRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_generation_id(j.generation_id)
                .with_member_id(s(&member_id));
            let code = c.send(hb, 3).await.map_err(fail)?.error_code;
            if code != 0 {
                continue 'rejoin;
            }
        }
    }
}

/// A 3-member group through `rebalances` rebalances in one simulation run.
fn simulated_rebalances(rebalances: i32, seeds: u64) {
    let fake = std::sync::Arc::new(std::sync::Mutex::new(Duration::ZERO));
    let fake2 = std::sync::Arc::clone(&fake);
    let t = Instant::now();
    let report = Simulation::new("kafkasim_bench_rebalances")
        .test_name("bench")
        .seeds(0..seeds)
        .jobs(1)
        .confirm(0)
        .seed_lines(false)
        .time_limit(Duration::from_secs(3600))
        .run(move |ctx| {
            let fake = std::sync::Arc::clone(&fake2);
            async move {
                ctx.set_net_config(NetConfig::fixed(Duration::from_millis(1))).expect("set before the network is made");
                let cluster = Cluster::builder().build();
                cluster.serve_sim(&ctx)?;
                let target = rebalances + 1;
                let mut members = tokio::task::JoinSet::new();
                for i in 0..3 {
                    members.spawn(member(ctx.clone(), i, target));
                }
                while let Some(done) = members.join_next().await {
                    done.map_err(fail)??;
                }
                let generations = cluster.generations("g");
                let full = generations.iter().filter(|g| g.members.len() == 3).count();
                if full < rebalances as usize {
                    return Err(fail(format!("{full} three-member generations")));
                }
                *fake.lock().expect("not poisoned") += ctx.elapsed();
                Ok(())
            }
        });
    let wall = t.elapsed();
    report.assert_passed();
    let fake = *fake.lock().expect("not poisoned");
    let total = rebalances as f64 * seeds as f64;
    println!(
        "simulated 3-member group, {rebalances} rebalances x {seeds} seeds   wall {:>9.1?}  fake {:>8.1?}  {:>7.0} fake s per wall s  {:>7.0} rebalances/s",
        wall,
        fake,
        fake.as_secs_f64() / wall.as_secs_f64(),
        total / wall.as_secs_f64()
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    println!("kafkasim benchmarks ({})", if quick { "quick" } else { "full" });
    simulated_rebalances(100, if quick { 1 } else { 10 });
}
