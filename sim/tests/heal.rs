//! `System::heal` is a true heal point: once it returns, no fault of the harness's schedules is in
//! force or still to come. A lifecycle partition that would outlast the heal is lifted at it (it
//! was left in force, so a bound measured from the heal started while the node was cut off:
//! orderstatus_churn seed 13760669910876886148, Q9); the nemesis's faults end at it too; faults a
//! test schedules itself end at it only when handed to `System::end_at_heal`.

use std::time::Duration;

use sim::nemesis::Nemesis;
use sim::net::{Clog, NetConfig, Partition};
use sim::node::{BoxError, Lifecycle, NodeCtx, ServiceSpec, System};
use sim::{Ctx, Failure, Simulation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{sleep, timeout};

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("heal-test", what)) }
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("heal-test", e.to_string())
}

/// Echoes the first 4 bytes of each connection, until SIGTERM.
async fn echo(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("7000")?;
    node.set_ready();
    let shutdown = node.shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => {
                let (mut stream, _) = accepted?;
                node.spawn(async move {
                    let mut buf = [0u8; 4];
                    if stream.read_exact(&mut buf).await.is_ok() {
                        let _ = stream.write_all(&buf).await;
                    }
                });
            }
        }
    }
}

/// A round trip from `from` to the echo node within 1 s of fake time (links are 1 ms).
async fn round_trip(ctx: &Ctx, from: &str) -> Result<(), Failure> {
    let exchange = async {
        let mut stream = ctx.net().host(from).dial("echo-0:7000").await?;
        stream.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        stream.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let got = timeout(Duration::from_secs(1), exchange)
        .await
        .map_err(|_| fail(format!("no round trip from {from} to echo-0 within 1s of the heal")))?
        .map_err(fail)?;
    check(&got == b"ping", format!("echoed {got:?}"))
}

fn entries_after(ctx: &Ctx, kind: &str, after: Duration) -> Vec<String> {
    ctx.history()
        .entries()
        .filter(|e| e.kind == kind && Duration::from_nanos(e.at_nanos) > after)
        .map(|e| e.detail.clone())
        .collect()
}

fn with_fixed_links(ctx: &Ctx) {
    ctx.set_net_config(NetConfig::fixed(Duration::from_millis(1))).expect("set before the network is made");
}

#[test]
fn a_lifecycle_partition_that_outlasts_the_window_ends_at_heal() {
    Simulation::new("heal_lifecycle_partition")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            with_fixed_links(&ctx);
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("echo", echo));
            system.start().await?;
            round_trip(&ctx, "client").await?;
            // Cut off at 1 s for 30 s: far past the heal at 2 s.
            system.at(
                Duration::from_secs(1),
                Lifecycle::Partition { node: "echo-0".into(), lasting: Duration::from_secs(30) },
            );
            sleep(Duration::from_secs(2).saturating_sub(ctx.elapsed())).await;
            check(
                timeout(Duration::from_millis(500), round_trip(&ctx, "client")).await.is_err(),
                "cut off before the heal",
            )?;
            system.heal().await?;
            let healed = ctx.elapsed();
            check(healed < Duration::from_secs(4), format!("the heal did not wait out the partition: {healed:?}"))?;
            round_trip(&ctx, "client").await?;
            check(
                ctx.history().entries().any(|e| e.kind == "net.control.release" && e.detail.contains("echo-0")),
                "the partition's release is recorded at the heal",
            )?;
            // Its scheduled release at 31 s is cancelled: nothing more happens to it.
            sleep(Duration::from_secs(40)).await;
            check(entries_after(&ctx, "net.control.release", healed).is_empty(), "released once, at the heal")?;
            system.stop().await
        })
        .assert_passed();
}

#[test]
fn the_nemesis_faults_end_at_heal_and_those_to_come_never_happen() {
    Simulation::new("heal_nemesis")
        .seeds(0..8)
        .swarm("nemesis.count", "6")
        .swarm("nemesis.partitions", "true")
        .swarm("nemesis.lost_responses", "true")
        .run(|ctx: Ctx| async move {
            with_fixed_links(&ctx);
            let system = System::new(&ctx);
            system.add(ServiceSpec::new("echo", echo));
            system.start().await?;
            let _ = ctx.net().host("client");
            // Twelve faults over a minute; the heal comes at 5 s.
            Nemesis::new(&["client", "echo-0"], Duration::from_secs(1)..Duration::from_secs(60)).schedule(&ctx);
            sleep(Duration::from_secs(5).saturating_sub(ctx.elapsed())).await;
            system.heal().await?;
            let healed = ctx.elapsed();
            let count = |kind: &str| ctx.history().entries().filter(|e| e.kind == kind).count();
            check(
                count("net.control") == count("net.control.release"),
                format!("{} installed, {} released by the heal", count("net.control"), count("net.control.release")),
            )?;
            round_trip(&ctx, "client").await?;
            sleep(Duration::from_secs(70)).await;
            let later = entries_after(&ctx, "net.control", healed);
            check(later.is_empty(), format!("faults installed after the heal: {later:?}"))?;
            system.stop().await
        })
        .assert_passed();
}

#[test]
fn a_tests_own_fault_ends_at_heal_only_when_handed_to_it() {
    Simulation::new("heal_own_faults")
        .seeds(0..2)
        .run(|ctx: Ctx| async move {
            with_fixed_links(&ctx);
            let system = System::new(&ctx);
            let _ = (ctx.net().host("a"), ctx.net().host("b"));
            let own = Partition::between(&["a"], &["b"]);
            let own_label = "partition [\"a\"] | [\"b\"]";
            ctx.net().at(Duration::from_secs(1), own).lasting(Duration::from_secs(30));
            let handed =
                ctx.net().at(Duration::from_secs(1), Clog::link("b", "a")).lasting_releasable(Duration::from_secs(30));
            system.end_at_heal(handed);
            // Not installed yet at the heal: cancelled, never installed.
            let early =
                ctx.net().at(Duration::from_secs(3), Clog::link("a", "b")).lasting_releasable(Duration::from_secs(1));
            system.end_at_heal(early);
            sleep(Duration::from_secs(2)).await;
            system.heal().await?;
            let released: Vec<String> = entries_after(&ctx, "net.control.release", Duration::ZERO);
            check(released == ["clog [\"b\"] -> [\"a\"]"], format!("released at the heal: {released:?}"))?;
            sleep(Duration::from_secs(40)).await;
            let installed: Vec<String> = entries_after(&ctx, "net.control", Duration::ZERO);
            check(
                !installed.iter().any(|l| l.contains("[\"a\"] -> [\"b\"]")),
                format!("cancelled yet installed: {installed:?}"),
            )?;
            let released: Vec<String> = entries_after(&ctx, "net.control.release", Duration::ZERO);
            check(
                released.iter().filter(|l| *l == own_label).count() == 1 && released.len() == 2,
                format!("the test's own partition ends when it said, not at the heal: {released:?}"),
            )?;
            system.stop().await
        })
        .assert_passed();
}
