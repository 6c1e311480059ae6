//! Every fault and scripted control takes effect (a control that silently did nothing fails its
//! test), is recorded in the history, and is undone when released.

use std::future::Future;
use std::io;
use std::time::Duration;

use sim::nemesis::Nemesis;
use sim::net::{
    BlackholeDials, Clog, ConnSel, DialOptions, Direction, Hold, HoldAfterBytes, NetConfig, PartialWrite, Partition,
    PauseListener, RefuseDials, Reset, Route, ShortReads, Side, Silence, SilentHost, TcpStream, ThrottleReader,
};
use sim::{Ctx, Failure, Simulation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, sleep, timeout};

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("control", what)) }
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("control", e.to_string())
}

/// Runs `body` over a few seeds with 1 ms links and requires every seed to pass.
fn scenario<F, Fut>(name: &str, body: F)
where
    F: Fn(Ctx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + 'static,
{
    Simulation::new(name)
        .seeds(0..4)
        .run(move |ctx: Ctx| {
            ctx.set_net_config(NetConfig::fixed(Duration::from_millis(1))).expect("set before the network is made");
            body(ctx)
        })
        .assert_passed();
}

/// A connected pair: (client stream, server stream). The listener stays open for the run.
async fn pair(ctx: &Ctx, port: u16) -> Result<(TcpStream, TcpStream), Failure> {
    let net = ctx.net();
    let listener = net.host("server").listen(&port.to_string()).map_err(fail)?;
    let client = net.host("client").dial(&format!("server:{port}")).await.map_err(fail)?;
    let (server, _) = listener.accept().await.map_err(fail)?;
    tokio::spawn(async move { while listener.accept().await.is_ok() {} });
    Ok((client, server))
}

/// Reads what arrives within `wait` (fake time): `Some(bytes)` or `None` if nothing came.
async fn read_within(stream: &mut TcpStream, wait: Duration) -> Option<io::Result<Vec<u8>>> {
    let mut buf = vec![0u8; 64 * 1024];
    match timeout(wait, stream.read(&mut buf)).await {
        Err(_) => None,
        Ok(Ok(n)) => Some(Ok(buf[..n].to_vec())),
        Ok(Err(e)) => Some(Err(e)),
    }
}

fn history_has(ctx: &Ctx, kind: &str, detail: &str) -> bool {
    ctx.history().entries().any(|e| e.kind == kind && e.detail.contains(detail))
}

#[test]
fn a_clog_holds_bytes_one_way_and_delivers_them_in_order_when_released() {
    scenario("clog", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let guard = ctx.net().install(Clog::link("client", "server"));
        client.write_all(b"one").await.map_err(fail)?;
        client.write_all(b"two").await.map_err(fail)?;
        check(read_within(&mut server, Duration::from_secs(5)).await.is_none(), "clogged bytes must not arrive")?;
        // The other direction is not clogged.
        server.write_all(b"back").await.map_err(fail)?;
        let back = read_within(&mut client, Duration::from_millis(50)).await;
        check(matches!(&back, Some(Ok(b)) if b == b"back"), format!("the reverse direction flows: {back:?}"))?;
        guard.release();
        let mut got = vec![0u8; 6];
        timeout(Duration::from_millis(50), server.read_exact(&mut got)).await.map_err(fail)?.map_err(fail)?;
        check(&got == b"onetwo", format!("bytes in order, none lost: {got:?}"))?;
        check(history_has(&ctx, "net.control", "clog") && history_has(&ctx, "net.control.release", "clog"), "recorded")
    });
}

#[test]
fn a_partition_holds_both_ways_and_blocks_new_handshakes() {
    scenario("partition", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let guard = ctx.net().install(Partition::between(&["client"], &["server"]));
        client.write_all(b"ping").await.map_err(fail)?;
        server.write_all(b"pong").await.map_err(fail)?;
        check(read_within(&mut server, Duration::from_secs(2)).await.is_none(), "held toward the server")?;
        check(read_within(&mut client, Duration::from_secs(2)).await.is_none(), "held toward the client")?;
        let dial = timeout(Duration::from_millis(900), ctx.net().host("client").dial("server:80")).await;
        check(dial.is_err(), "a handshake across the partition gets no answer")?;
        guard.release();
        check(
            matches!(read_within(&mut server, Duration::from_millis(50)).await, Some(Ok(b)) if b == b"ping"),
            "released",
        )?;
        check(
            matches!(read_within(&mut client, Duration::from_millis(50)).await, Some(Ok(b)) if b == b"pong"),
            "released",
        )
    });
}

#[test]
fn hold_after_bytes_delivers_the_request_and_loses_the_response() {
    scenario("hold_after_bytes", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let guard = ctx.net().install(HoldAfterBytes {
            conn: ConnSel::Between("client".into(), "server".into()),
            direction: Direction::ToClient,
            bytes: 3,
        });
        client.write_all(b"request").await.map_err(fail)?;
        let request = read_within(&mut server, Duration::from_millis(50)).await;
        check(matches!(&request, Some(Ok(b)) if b == b"request"), format!("the request is processed: {request:?}"))?;
        server.write_all(b"response").await.map_err(fail)?;
        let first = read_within(&mut client, Duration::from_millis(50)).await;
        check(matches!(&first, Some(Ok(b)) if b == b"res"), format!("only the first 3 bytes: {first:?}"))?;
        check(read_within(&mut client, Duration::from_secs(5)).await.is_none(), "the rest is held")?;
        guard.release();
        let rest = read_within(&mut client, Duration::from_millis(50)).await;
        check(matches!(&rest, Some(Ok(b)) if b == b"ponse"), format!("the rest after release: {rest:?}"))
    });
}

#[test]
fn hold_one_direction_of_selected_connections() {
    scenario("hold", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let id = client.id();
        let guard = ctx.net().install(Hold { conn: ConnSel::Id(id), direction: Direction::ToServer });
        client.write_all(b"up").await.map_err(fail)?;
        server.write_all(b"down").await.map_err(fail)?;
        check(read_within(&mut server, Duration::from_secs(1)).await.is_none(), "to the server is held")?;
        check(
            matches!(read_within(&mut client, Duration::from_millis(50)).await, Some(Ok(b)) if b == b"down"),
            "to the client flows",
        )?;
        drop(guard);
        check(
            matches!(read_within(&mut server, Duration::from_millis(50)).await, Some(Ok(b)) if b == b"up"),
            "dropping the guard releases",
        )
    });
}

#[test]
fn reset_resets_both_ends() {
    scenario("reset", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        ctx.net().install(Reset { conn: ConnSel::Port(80) }).release();
        let c = client.write(b"x").await;
        let s = read_within(&mut server, Duration::from_millis(10)).await;
        check(c.as_ref().err().and_then(io::Error::raw_os_error) == Some(104), format!("client write: {c:?}"))?;
        check(matches!(&s, Some(Err(e)) if e.raw_os_error() == Some(104)), format!("server read: {s:?}"))?;
        check(history_has(&ctx, "net.reset", ""), "recorded")
    });
}

#[test]
fn a_silenced_connection_delivers_nothing_and_writers_block_at_the_bound() {
    scenario("silence", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        ctx.net().install(Silence { conn: ConnSel::Any }).release();
        client.write_all(b"lost").await.map_err(fail)?;
        check(read_within(&mut server, Duration::from_secs(60)).await.is_none(), "nothing arrives, no FIN, no RST")?;
        // Writes are accepted until the send bound, then block (no acknowledgements come back).
        let chunk = vec![0u8; 256 * 1024];
        let mut written = 0usize;
        while let Ok(Ok(n)) = timeout(Duration::from_secs(1), client.write(&chunk)).await {
            written += n;
            if written > 64 << 20 {
                break;
            }
        }
        check((3 << 20..=4 << 20).contains(&written), format!("blocked after {written} bytes"))?;
        // Released or not, a silenced connection stays silent: its bytes are gone.
        check(read_within(&mut server, Duration::from_secs(1)).await.is_none(), "still silent after release")?;
        // New connections are not silenced once the control is released.
        let (mut c2, mut s2) = pair(&ctx, 81).await?;
        c2.write_all(b"fresh").await.map_err(fail)?;
        check(
            matches!(read_within(&mut s2, Duration::from_millis(50)).await, Some(Ok(b)) if b == b"fresh"),
            "new connections flow",
        )
    });
}

#[test]
fn refused_and_black_holed_dials() {
    scenario("dials", |ctx| async move {
        let net = ctx.net();
        let _listener = net.host("server").listen("80").map_err(fail)?;
        let client = net.host("client");
        let refuse = net.install(RefuseDials { target: "server".into() });
        let refused = client.dial("server:80").await;
        check(refused.as_ref().err().and_then(io::Error::raw_os_error) == Some(111), format!("refused: {refused:?}"))?;
        refuse.release();
        let hole = net.install(BlackholeDials { target: "server:80".into() });
        let start = Instant::now();
        let holed = client.dial_with("server:80", DialOptions { syn_retries: Some(1) }).await;
        check(holed.as_ref().err().and_then(io::Error::raw_os_error) == Some(110), format!("black-holed: {holed:?}"))?;
        check(start.elapsed() == Duration::from_secs(3), format!("after its SYN retries: {:?}", start.elapsed()))?;
        hole.release();
        client.dial("server:80").await.map_err(fail)?;
        Ok(())
    });
}

#[test]
fn a_paused_listener_does_not_accept_but_the_kernel_queues() {
    scenario("pause", |ctx| async move {
        let net = ctx.net();
        let listener = net.host("server").listen("80").map_err(fail)?;
        let addr = listener.local_addr().map_err(fail)?;
        let guard = net.install(PauseListener { addr });
        let _client = net.host("client").dial("server:80").await.map_err(fail)?;
        check(timeout(Duration::from_secs(10), listener.accept()).await.is_err(), "accept waits while paused")?;
        guard.release();
        check(timeout(Duration::from_millis(5), listener.accept()).await.is_ok(), "accept returns once released")
    });
}

#[test]
fn a_throttled_reader_gets_its_bytes_slowly() {
    scenario("throttle", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let _throttle = ctx.net().install(ThrottleReader {
            conn: ConnSel::Any,
            side: Side::Server,
            bytes: 100,
            every: Duration::from_millis(100),
        });
        client.write_all(&[9u8; 1000]).await.map_err(fail)?;
        let start = Instant::now();
        let mut got = vec![0u8; 1000];
        server.read_exact(&mut got).await.map_err(fail)?;
        let took = start.elapsed();
        check(
            (Duration::from_millis(900)..Duration::from_millis(1000)).contains(&took),
            format!("1000 bytes at 100 per 100 ms took {took:?}"),
        )
    });
}

#[test]
fn short_reads_return_at_most_the_limit() {
    scenario("short_reads", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let _short = ctx.net().install(ShortReads { conn: ConnSel::Any, side: Side::Client, bytes: 7 });
        server.write_all(&[1u8; 50]).await.map_err(fail)?;
        sleep(Duration::from_millis(10)).await;
        let mut sizes = Vec::new();
        let mut total = 0;
        while total < 50 {
            let mut buf = [0u8; 64];
            let n = client.read(&mut buf).await.map_err(fail)?;
            sizes.push(n);
            total += n;
        }
        check(sizes.iter().all(|&n| n <= 7) && sizes.len() == 8, format!("read sizes {sizes:?}"))
    });
}

#[test]
fn a_partial_write_is_followed_by_a_reset() {
    scenario("partial_write", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        ctx.net().install(PartialWrite { conn: ConnSel::Any, side: Side::Client, bytes: 100 }).forever();
        let first = client.write(&[5u8; 1000]).await;
        check(matches!(first, Ok(100)), format!("the write is cut short: {first:?}"))?;
        let second = client.write(&[5u8; 10]).await;
        check(
            second.as_ref().err().and_then(io::Error::raw_os_error) == Some(104),
            format!("then ECONNRESET: {second:?}"),
        )?;
        let mut got = vec![0u8; 100];
        server.read_exact(&mut got).await.map_err(fail)?;
        let after = read_within(&mut server, Duration::from_millis(50)).await;
        check(
            matches!(&after, Some(Err(e)) if e.raw_os_error() == Some(104)),
            format!("the peer reads the 100 bytes, then the reset: {after:?}"),
        )
    });
}

#[test]
fn a_silent_host_answers_nothing_until_it_comes_back() {
    scenario("silent_host", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let gone = ctx.net().install(SilentHost { host: "server".into() });
        client.write_all(b"anyone?").await.map_err(fail)?;
        check(read_within(&mut server, Duration::from_secs(30)).await.is_none(), "nothing reaches the gone machine")?;
        let dial = ctx.net().host("client").dial_with("server:80", DialOptions { syn_retries: Some(0) }).await;
        check(dial.as_ref().err().and_then(io::Error::raw_os_error) == Some(110), format!("dials time out: {dial:?}"))?;
        gone.release();
        ctx.net().host("client").dial("server:80").await.map_err(fail)?;
        Ok(())
    });
}

#[test]
fn cluster_ip_routes_each_connection_to_a_seeded_backend_and_follows_route_changes() {
    let report = Simulation::new("cluster_ip").seeds(0..16).run(|ctx: Ctx| async move {
        ctx.set_net_config(NetConfig::fixed(Duration::from_millis(1))).expect("set before the network is made");
        let net = ctx.net();
        for name in ["cart-0", "cart-1", "cart-2"] {
            let listener = net.host(name).listen("8080").map_err(fail)?;
            let ctx2 = ctx.clone();
            tokio::spawn(async move {
                while let Ok((_stream, _)) = listener.accept().await {
                    ctx2.record("accepted", name, "");
                }
            });
        }
        let vip = net.cluster_ip("cart", &["cart-0", "cart-1", "cart-2"]);
        let client = net.host("web");
        let accepted_by = |ctx: &Ctx| -> Vec<String> {
            ctx.history().entries().filter(|e| e.kind == "accepted").map(|e| e.identity.clone()).collect()
        };
        let mut streams = Vec::new();
        for _ in 0..6 {
            let stream = client.dial("cart:8080").await.map_err(fail)?;
            // The client sees the virtual address, as kube-proxy's DNAT shows it.
            check(stream.peer_addr().map_err(fail)?.ip() == vip, "peer_addr is the ClusterIP")?;
            streams.push(stream);
        }
        sleep(Duration::from_millis(5)).await;
        ctx.record("backends", "web", accepted_by(&ctx).join(","));
        let only_two = net.install(Route { name: "cart".into(), backends: vec!["cart-2".into()] });
        let before = accepted_by(&ctx).len();
        for _ in 0..3 {
            streams.push(client.dial("cart:8080").await.map_err(fail)?);
        }
        sleep(Duration::from_millis(5)).await;
        let after = accepted_by(&ctx);
        check(after[before..].iter().all(|b| b == "cart-2"), format!("routed to cart-2 only: {:?}", &after[before..]))?;
        drop(only_two);
        check(net.endpoints("cart").map(|e| e.len()) == Some(3), "the route is restored")?;
        check(net.resolve("cart").map_err(fail)?.len() == 1, "a ClusterIP name resolves to one virtual address")?;
        net.headless("cart-headless", &["cart-0", "cart-1", "cart-2"]);
        check(net.resolve("cart-headless").map_err(fail)?.len() == 3, "a headless name resolves to every backend")
    });
    report.assert_passed();
    let spreads: std::collections::BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert!(spreads.len() > 4, "the seed picks the backends");
}

#[test]
fn controls_scheduled_at_fake_times_install_and_release_on_time() {
    scenario("scheduled", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let start = ctx.elapsed();
        ctx.net().at(start + Duration::from_secs(1), Clog::link("client", "server")).lasting(Duration::from_secs(2));
        sleep(Duration::from_millis(1500)).await;
        client.write_all(b"late").await.map_err(fail)?;
        let got = timeout(Duration::from_secs(10), async {
            let mut buf = [0u8; 4];
            server.read_exact(&mut buf).await.map(|_| buf)
        })
        .await
        .map_err(fail)?
        .map_err(fail)?;
        let arrived = ctx.elapsed() - start;
        check(&got == b"late", "delivered after the clog")?;
        check(
            arrived >= Duration::from_secs(3) && arrived < Duration::from_millis(3010),
            format!("arrived at {arrived:?}"),
        )
    });
}

#[test]
fn the_nemesis_draws_faults_from_the_swarm() {
    let report = Simulation::new("nemesis").seeds(0..24).run(|ctx: Ctx| async move {
        let hosts = ["a", "b", "c"];
        for h in hosts {
            let _ = ctx.net().host(h);
        }
        let scheduled = Nemesis::new(&hosts, Duration::ZERO..Duration::from_secs(10)).schedule(&ctx);
        sleep(Duration::from_secs(20)).await;
        let installs = ctx.history().entries().filter(|e| e.kind == "net.control").count();
        check(installs == scheduled, format!("{scheduled} scheduled, {installs} installed"))?;
        ctx.record("nemesis", "faults", scheduled.to_string());
        Ok(())
    });
    report.assert_passed();
    let counts: std::collections::BTreeSet<&str> = report.outcomes.iter().map(|o| o.swarm.as_str()).collect();
    assert!(counts.len() > 5, "the swarm varies the nemesis: {counts:?}");
    assert!(report.outcomes.iter().any(|o| o.swarm.contains("nemesis.count=0")), "some runs have no faults");
    // A run with no faults names no fault kinds: `nemesis.partitions=true` beside
    // `nemesis.count=0` would read as partitions that never come.
    for o in report.outcomes.iter().filter(|o| o.swarm.contains("nemesis.count=0")) {
        assert!(!o.swarm.contains("nemesis.partitions"), "count 0 draws no kinds: {}", o.swarm);
    }
    assert!(
        report.outcomes.iter().any(|o| o.swarm.contains("nemesis.partitions")),
        "a run with faults draws the kinds"
    );
}

#[test]
fn the_nemesis_refuses_a_routing_name() {
    let report = Simulation::new("nemesis_routing_name").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        let _ = ctx.net().host("kv-0");
        let _ = ctx.net().host("kv-1");
        let _ = ctx.net().cluster_ip("kv", &["kv-0", "kv-1"]);
        Nemesis::new(&["kv", "kv-0"], Duration::ZERO..Duration::from_secs(1)).schedule(&ctx);
        Ok(())
    });
    let failure = report.failures().next().and_then(|o| o.failure.clone()).expect("a routing name fails the run");
    assert!(failure.message.contains("\"kv\" is a service's routing name"), "{failure}");
}

#[test]
fn misuse_returns_linux_errors_and_never_panics() {
    scenario("misuse", |ctx| async move {
        let net = ctx.net();
        let host = net.host("solo");
        let unknown = host.dial("nobody:80").await;
        check(
            unknown.as_ref().err().is_some_and(|e| e.to_string().contains("Name or service not known")),
            format!("{unknown:?}"),
        )?;
        let no_port = host.dial("nobody").await;
        check(
            no_port.as_ref().err().map(io::Error::kind) == Some(io::ErrorKind::InvalidInput),
            format!("{no_port:?}"),
        )?;
        let other = net.host("other").addr();
        let foreign = host.listen(&format!("{other}:80"));
        check(foreign.as_ref().err().and_then(io::Error::raw_os_error) == Some(99), format!("{foreign:?}"))?;
        let bad = host.listen("not an address");
        check(bad.as_ref().err().map(io::Error::kind) == Some(io::ErrorKind::InvalidInput), format!("{bad:?}"))?;
        let nowhere = host.dial_with("10.9.9.9:80", DialOptions { syn_retries: Some(0) }).await;
        check(nowhere.as_ref().err().and_then(io::Error::raw_os_error) == Some(110), format!("{nowhere:?}"))
    });
}

#[test]
fn links_are_drawn_per_seed_and_include_zero_latency() {
    let report = Simulation::new("links").seeds(0..40).run(|ctx: Ctx| async move {
        let link = ctx.net().link("a", "b");
        ctx.record("link", "a->b", format!("{:?} {:?} {}", link.latency, link.jitter, link.send_buffer));
        check(link.jitter <= link.latency, "jitter at most the latency")?;
        check((64 << 10..=4 << 20).contains(&link.send_buffer), "the send bound is in range")
    });
    report.assert_passed();
    assert!(report.outcomes.iter().any(|o| o.swarm.contains("net.latency_max=0ms")), "zero latency is drawn");
    let links: std::collections::BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert!(links.len() > 20);
}

#[test]
fn a_control_scheduled_forever_stays_and_a_pending_release_does_not_hang_the_end_of_a_run() {
    scenario("forever", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let start = ctx.elapsed();
        ctx.net().at(start + Duration::from_millis(10), Clog::link("client", "server")).forever();
        // A release far beyond the end of the run: dropped with the run, without hanging it.
        ctx.net()
            .at(start + Duration::from_millis(10), Clog::link("server", "client"))
            .until(start + Duration::from_secs(1000));
        sleep(Duration::from_millis(20)).await;
        client.write_all(b"held").await.map_err(fail)?;
        server.write_all(b"held").await.map_err(fail)?;
        check(read_within(&mut server, Duration::from_secs(30)).await.is_none(), "forever means forever")?;
        check(read_within(&mut client, Duration::from_secs(30)).await.is_none(), "until(1000 s) still holds")
    });
}

#[test]
fn a_handshake_needs_both_directions() {
    scenario("handshake_paths", |ctx| async move {
        let net = ctx.net();
        let _listener = net.host("server").listen("80").map_err(fail)?;
        let _back = net.install(Clog::link("server", "client"));
        let dial = net.host("client").dial_with("server:80", DialOptions { syn_retries: Some(1) }).await;
        check(
            dial.as_ref().err().and_then(io::Error::raw_os_error) == Some(110),
            format!("the SYN-ACK is lost: {dial:?}"),
        )
    });
}

#[test]
fn a_dial_dropped_mid_handshake_never_reaches_accept() {
    Simulation::new("dropped_dial")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            ctx.set_net_config(NetConfig::fixed(Duration::from_millis(10))).expect("set before the network is made");
            let net = ctx.net();
            let listener = net.host("server").listen("80").map_err(fail)?;
            let dial = timeout(Duration::from_millis(15), net.host("client").dial("server:80")).await;
            check(dial.is_err(), "gave up before the SYN-ACK")?;
            check(timeout(Duration::from_secs(5), listener.accept()).await.is_err(), "nothing to accept")
        })
        .assert_passed();
}

#[test]
fn bytes_held_back_are_discarded_when_their_writer_aborts() {
    scenario("held_then_abort", |ctx| async move {
        let (mut client, mut server) = pair(&ctx, 80).await?;
        let hold = ctx.net().install(HoldAfterBytes { conn: ConnSel::Any, direction: Direction::ToClient, bytes: 0 });
        server.write_all(b"resp").await.map_err(fail)?;
        server.set_linger(Some(Duration::ZERO)).map_err(fail)?;
        drop(server);
        sleep(Duration::from_millis(10)).await;
        hold.release();
        let first = read_within(&mut client, Duration::from_millis(50)).await;
        check(
            matches!(&first, Some(Err(e)) if e.raw_os_error() == Some(104)),
            format!("the lost response stays lost: {first:?}"),
        )
    });
}

#[test]
fn misconfigured_controls_and_configs_change_nothing_and_never_panic() {
    Simulation::new("misconfig")
        .seeds(0..2)
        .run(|ctx: Ctx| async move {
            let mut config = NetConfig::fixed(Duration::from_millis(1));
            config.latency = (Duration::from_millis(5), Duration::from_millis(1));
            config.send_buffer = (0, 0);
            ctx.set_net_config(config).expect("set before the network is made");
            let (mut client, mut server) = pair(&ctx, 80).await?;
            // Route on a host name, and a partition with an empty side: ignored, recorded.
            ctx.net().install(Route { name: "server".into(), backends: vec![] }).forever();
            ctx.net().install(Partition::between(&["client"], &[] as &[&str])).forever();
            check(history_has(&ctx, "net.control.ignored", "not a service name"), "route ignored")?;
            check(history_has(&ctx, "net.control.ignored", "empty side"), "partition ignored")?;
            client.write_all(b"x").await.map_err(fail)?;
            check(
                matches!(read_within(&mut server, Duration::from_millis(50)).await, Some(Ok(b)) if b == b"x"),
                "still connected",
            )?;
            let _ = ctx.net().host("client").dial("server:80").await.map_err(fail)?;
            Nemesis::new(&["client", "server"], Duration::ZERO..Duration::from_secs(1))
                .longest(Duration::ZERO)
                .schedule(&ctx);
            Ok(())
        })
        .assert_passed();
}

// Issue 11: the SYN retransmission timer stops when the dial is answered (Linux stops it at the
// SYN-ACK), so an answered dial leaves no `net.syn.timer` entry in the history; a dial whose SYN
// was lost records the retry that brought it through, and nothing after.
#[test]
fn an_answered_dial_cancels_its_syn_timer() {
    scenario("syn_timer", |ctx| async move {
        let net = ctx.net();
        let _listener = net.host("server").listen("80").map_err(fail)?;
        let client = net.host("client");
        let _first = client.dial("server:80").await.map_err(fail)?;
        let clog = net.install(Clog::link("client", "server"));
        let lifted = tokio::spawn(async move {
            sleep(Duration::from_millis(1500)).await;
            clog.release();
        });
        let start = Instant::now();
        let second = client.dial("server:80").await.map_err(fail)?;
        check(
            start.elapsed() >= Duration::from_secs(3),
            format!("the second dial needed its retries: {:?}", start.elapsed()),
        )?;
        lifted.await.map_err(fail)?;
        sleep(Duration::from_secs(130)).await; // past every timer the dials would have had
        let timers: Vec<String> =
            ctx.history().entries().filter(|e| e.kind == "net.syn.timer").map(|e| e.identity.clone()).collect();
        let expected = [1, 2].map(|n| format!("conn#{} SYN retry {n}", second.id()));
        check(timers == expected, format!("only the lost SYN's retries are recorded: {timers:?}"))
    });
}
