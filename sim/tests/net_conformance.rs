//! The network's conformance suite: each test body runs against real loopback sockets (tokio)
//! and against the simulated network (several seeds), and both must observe exactly what Linux
//! was measured to do (`../shared/data/linux-tcp-loopback.txt`, kernel 6.x): the bytes read, the
//! error and its errno, and their order.

#[path = "support/stack.rs"]
mod stack;

use std::future::Future;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;

use sim::net::NetConfig;
use sim::{Failure, Simulation};
use stack::{Real, Sim, Stack, err, obs, read, settle, write};
use tokio::io::AsyncWriteExt;

fn run_real<F, Fut>(body: F) -> Vec<String>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(body())
}

macro_rules! conformance {
    ($name:ident, $body:ident, $expected:expr) => {
        conformance!($name, $body, $expected, requires: None);
    };
    // `requires`: `None`, or `Some(reason)` when this machine lacks what the real side needs
    // (then only the simulated side is checked against the measurement, and the skip is said).
    ($name:ident, $body:ident, $expected:expr, requires: $missing:expr) => {
        #[test]
        fn $name() {
            let expected: Vec<String> = $expected.iter().map(|s: &&str| s.to_string()).collect();
            let missing: Option<String> = $missing;
            match missing {
                Some(reason) => eprintln!("{}: real loopback side skipped: {reason}", stringify!($name)),
                None => {
                    let real = run_real(|| async { $body(&Real).await });
                    assert_eq!(real, expected, "real loopback differs from the Linux measurement");
                }
            }
            let report = Simulation::new(stringify!($name)).seeds(0..6).run(move |ctx| {
                let expected = expected.clone();
                async move {
                    ctx.set_net_config(NetConfig::fixed(Duration::from_micros(100))).expect("set before the network is made");
                    let got = $body(&Sim::new(&ctx)).await;
                    ctx.record("observations", "body", got.join(" | "));
                    if got != expected {
                        return Err(Failure::correctness(
                            "conformance",
                            format!("the simulated network observed\n{got:#?}\nLinux observed\n{expected:#?}"),
                        ));
                    }
                    Ok(())
                }
            });
            report.assert_passed();
        }
    };
}

// 1. After the peer's FIN, the first write succeeds, later writes fail EPIPE; reads give EOF.
async fn fin_then_write<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    let client = s.connect(&addr).await.unwrap();
    let mut server = s.accept(&listener).await.unwrap();
    drop(client);
    settle().await;
    out.push(format!("write#1 after peer FIN: {}", write(&mut server, b"hello").await));
    settle().await;
    out.push(format!("write#2: {}", write(&mut server, b"hello").await));
    out.push(format!("write#3: {}", write(&mut server, b"hello").await));
    out.push(format!("read after writes: {}", read(&mut server).await));
    out.push(format!("read again: {}", read(&mut server).await));

    let client = s.connect(&addr).await.unwrap();
    let mut server = s.accept(&listener).await.unwrap();
    drop(client);
    settle().await;
    out.push(format!("[variant] read after FIN: {}", read(&mut server).await));
    out.push(format!("[variant] write#1: {}", write(&mut server, b"x").await));
    settle().await;
    out.push(format!("[variant] read after RST-in-CLOSE_WAIT: {}", read(&mut server).await));
    out.push(format!("[variant] write#2: {}", write(&mut server, b"x").await));
    out.push(format!("[variant] write_all(1MiB) after FIN: {}", obs(&server.write_all(&vec![7u8; 1 << 20]).await)));
    out
}

conformance!(
    fin_then_first_write_succeeds_then_epipe,
    fin_then_write,
    [
        "write#1 after peer FIN: Ok(5)",
        "write#2: Err(EPIPE)",
        "write#3: Err(EPIPE)",
        "read after writes: Ok(0) [EOF]",
        "read again: Ok(0) [EOF]",
        "[variant] read after FIN: Ok(0) [EOF]",
        "[variant] write#1: Ok(1)",
        "[variant] read after RST-in-CLOSE_WAIT: Ok(0) [EOF]",
        "[variant] write#2: Err(EPIPE)",
        "[variant] write_all(1MiB) after FIN: Err(EPIPE)",
    ]
);

// 2. Closing with unread data sends RST: the peer reads what arrived, then ECONNRESET once, then
// EOF; its writes fail EPIPE. A write that comes first gets the ECONNRESET.
async fn close_with_unread<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    for variant in ["", "[write-first] ", "[no server data] ", "[FIN then close-with-unread] "] {
        let mut client = s.connect(&addr).await.unwrap();
        let mut server = s.accept(&listener).await.unwrap();
        client.write_all(b"from-client").await.unwrap();
        if variant.is_empty() || variant == "[write-first] " {
            server.write_all(b"from-server").await.unwrap();
        }
        if variant == "[FIN then close-with-unread] " {
            s.shutdown(&server, Shutdown::Write).unwrap();
        }
        settle().await;
        drop(server);
        settle().await;
        match variant {
            "" => {
                out.push(format!("read#1 (server data queued before RST): {}", read(&mut client).await));
                out.push(format!("read#2: {}", read(&mut client).await));
                out.push(format!("read#3: {}", read(&mut client).await));
                out.push(format!("write#1: {}", write(&mut client, b"x").await));
                out.push(format!("write#2: {}", write(&mut client, b"x").await));
            }
            "[write-first] " => {
                out.push(format!("{variant}write#1: {}", write(&mut client, b"x").await));
                out.push(format!("{variant}write#2: {}", write(&mut client, b"x").await));
                out.push(format!("{variant}read#1: {}", read(&mut client).await));
                out.push(format!("{variant}read#2: {}", read(&mut client).await));
            }
            "[no server data] " => {
                out.push(format!("{variant}read#1: {}", read(&mut client).await));
                out.push(format!("{variant}read#2: {}", read(&mut client).await));
            }
            _ => {
                out.push(format!("{variant}read#1: {}", read(&mut client).await));
                out.push(format!("{variant}write#1: {}", write(&mut client, b"x").await));
                out.push(format!("{variant}write#2: {}", write(&mut client, b"x").await));
            }
        }
    }
    out
}

conformance!(
    close_with_unread_data_sends_rst_and_the_peer_sees_reset_once,
    close_with_unread,
    [
        "read#1 (server data queued before RST): Ok(11) \"from-server\"",
        "read#2: Err(ECONNRESET)",
        "read#3: Ok(0) [EOF]",
        "write#1: Err(EPIPE)",
        "write#2: Err(EPIPE)",
        "[write-first] write#1: Err(ECONNRESET)",
        "[write-first] write#2: Err(EPIPE)",
        "[write-first] read#1: Ok(11) \"from-server\"",
        "[write-first] read#2: Ok(0) [EOF]",
        "[no server data] read#1: Err(ECONNRESET)",
        "[no server data] read#2: Ok(0) [EOF]",
        "[FIN then close-with-unread] read#1: Ok(0) [EOF]",
        "[FIN then close-with-unread] write#1: Err(EPIPE)",
        "[FIN then close-with-unread] write#2: Err(EPIPE)",
    ]
);

// 3. Connect completes into the accept queue before accept; the queue holds backlog + 1; when
// full the SYN is dropped and retried after ~1 s.
async fn backlog<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    for backlog in [0u32, 1, 4] {
        let (listener, addr) = s.listen(backlog).await.unwrap();
        let mut held = Vec::new();
        let mut results = Vec::new();
        for i in 0..backlog + 3 {
            match tokio::time::timeout(Duration::from_millis(500), s.connect(&addr)).await {
                Ok(Ok(stream)) => {
                    results.push(format!("#{i}:Ok"));
                    held.push(stream);
                }
                Ok(Err(e)) => results.push(format!("#{i}:{}", err(&e))),
                Err(_) => results.push(format!("#{i}:timed out")),
            }
        }
        out.push(format!("listen({backlog}) connects without accept: {}", results.join(" ")));
        out.push(format!("write before accept: {}", write(&mut held[0], b"early").await));
        let mut first = s.accept(&listener).await.unwrap();
        out.push(format!("accepted#0 reads: {}", read(&mut first).await));
        // tokio's Instant is the real clock on the real runtime and the fake one in a simulation.
        let started = Instant::now();
        let again = tokio::time::timeout(Duration::from_secs(5), s.connect(&addr)).await;
        let waited = started.elapsed();
        out.push(format!(
            "connect after 1 accept: {} in {}s",
            if matches!(again, Ok(Ok(_))) { "Ok" } else { "failed" },
            waited.as_millis() / 1000
        ));
        // The queue is full again: a connect now waits for its SYN retry, after an accept at +300ms.
        let pending = s.connect(&addr);
        let accept_later = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            s.accept(&listener).await.unwrap()
        };
        let start = Instant::now();
        let (connected, _accepted) = tokio::join!(tokio::time::timeout(Duration::from_secs(5), pending), accept_later);
        let took = start.elapsed();
        out.push(format!(
            "connect pending while queue full, accept at +300ms: {} after ~{}s",
            if matches!(connected, Ok(Ok(_))) { "Ok" } else { "failed" },
            (took.as_millis() + 500) / 1000
        ));
    }
    out
}

conformance!(
    accept_queue_holds_backlog_plus_one_then_syns_are_retried,
    backlog,
    [
        "listen(0) connects without accept: #0:Ok #1:timed out #2:timed out",
        "write before accept: Ok(5)",
        "accepted#0 reads: Ok(5) \"early\"",
        "connect after 1 accept: Ok in 0s",
        "connect pending while queue full, accept at +300ms: Ok after ~1s",
        "listen(1) connects without accept: #0:Ok #1:Ok #2:timed out #3:timed out",
        "write before accept: Ok(5)",
        "accepted#0 reads: Ok(5) \"early\"",
        "connect after 1 accept: Ok in 0s",
        "connect pending while queue full, accept at +300ms: Ok after ~1s",
        "listen(4) connects without accept: #0:Ok #1:Ok #2:Ok #3:Ok #4:Ok #5:timed out #6:timed out",
        "write before accept: Ok(5)",
        "accepted#0 reads: Ok(5) \"early\"",
        "connect after 1 accept: Ok in 0s",
        "connect pending while queue full, accept at +300ms: Ok after ~1s",
    ]
);

// 3b. With the queue full and TCP_SYNCNT=1, the connect fails ETIMEDOUT after ~3 s (1 s + 2 s).
async fn backlog_full_timeout<S: Stack>(s: &S) -> Vec<String> {
    let (_listener, addr) = s.listen(0).await.unwrap();
    let _first = s.connect(&addr).await.unwrap();
    let start = Instant::now();
    let result = s.connect_with_syn_retries(&addr, 1).await;
    let took = start.elapsed();
    vec![format!(
        "connect with queue full, TCP_SYNCNT=1: {} after ~{}s",
        obs(&result.map(|_| ())),
        (took.as_millis() + 500) / 1000
    )]
}

conformance!(
    full_queue_connect_times_out_after_its_syn_retries,
    backlog_full_timeout,
    ["connect with queue full, TCP_SYNCNT=1: Err(ETIMEDOUT) after ~3s"]
);

// 4. Nothing listening: ECONNREFUSED.
async fn refused<S: Stack>(s: &S) -> Vec<String> {
    vec![format!("connect: {}", obs(&s.connect(&s.closed_addr()).await.map(|_| ())))]
}

conformance!(no_listener_refuses, refused, ["connect: Err(ECONNREFUSED)"]);

// 5. shutdown(Write): the peer reads the data then EOF and can still write back; our write after
// it fails EPIPE.
async fn half_close<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    let mut client = s.connect(&addr).await.unwrap();
    let mut server = s.accept(&listener).await.unwrap();
    client.write_all(b"req").await.unwrap();
    s.shutdown(&client, Shutdown::Write).unwrap();
    settle().await;
    out.push(format!("server read#1: {}", read(&mut server).await));
    out.push(format!("server read#2 (after client shutdown(Write)): {}", read(&mut server).await));
    out.push(format!("server read#3: {}", read(&mut server).await));
    out.push(format!("server write back: {}", write(&mut server, b"resp").await));
    settle().await;
    out.push(format!("client read: {}", read(&mut client).await));
    out.push(format!("client write after own shutdown(Write): {}", write(&mut client, b"x").await));
    out.push(format!("client shutdown(Write) again: {}", obs(&s.shutdown(&client, Shutdown::Write))));
    drop(server);
    settle().await;
    out.push(format!("client read after server close: {}", read(&mut client).await));
    out.push(format!("client shutdown(Both) after peer closed: {}", obs(&s.shutdown(&client, Shutdown::Both))));
    out
}

conformance!(
    shutdown_write_half_closes_and_the_peer_can_still_write,
    half_close,
    [
        "server read#1: Ok(3) \"req\"",
        "server read#2 (after client shutdown(Write)): Ok(0) [EOF]",
        "server read#3: Ok(0) [EOF]",
        "server write back: Ok(4)",
        "client read: Ok(4) \"resp\"",
        "client write after own shutdown(Write): Err(EPIPE)",
        "client shutdown(Write) again: Ok(())",
        "client read after server close: Ok(0) [EOF]",
        "client shutdown(Both) after peer closed: Err(ENOTCONN)",
    ]
);

// 6. Our shutdown(Read): queued data, then EOF; data arriving later is still readable; nothing is
// sent to the peer.
async fn shutdown_read<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    let mut client = s.connect(&addr).await.unwrap();
    let mut server = s.accept(&listener).await.unwrap();
    server.write_all(b"before").await.unwrap();
    settle().await;
    s.shutdown(&client, Shutdown::Read).unwrap();
    out.push(format!("read (data queued before shutdown): {}", read(&mut client).await));
    out.push(format!("read again (queue empty): {}", read(&mut client).await));
    out.push(format!("peer write after our shutdown(Read): {}", write(&mut server, b"after").await));
    settle().await;
    out.push(format!("read (data arrived after shutdown): {}", read(&mut client).await));
    out.push(format!("our write after own shutdown(Read): {}", write(&mut client, b"up").await));
    settle().await;
    out.push(format!("peer read: {}", read(&mut server).await));
    drop(client);
    settle().await;
    out.push(format!("peer read after our close: {}", read(&mut server).await));
    out
}

conformance!(
    shutdown_read_gives_queued_data_then_eof,
    shutdown_read,
    [
        "read (data queued before shutdown): Ok(6) \"before\"",
        "read again (queue empty): Ok(0) [EOF]",
        "peer write after our shutdown(Read): Ok(5)",
        "read (data arrived after shutdown): Ok(5) \"after\"",
        "our write after own shutdown(Read): Ok(2)",
        "peer read: Ok(2) \"up\"",
        "peer read after our close: Ok(0) [EOF]",
    ]
);

// 7. Dropping a listener resets its queued, unaccepted connections; new connects are refused. A
// connection reset while queued is still returned by accept, and its read fails.
async fn drop_listener<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    let mut c1 = s.connect(&addr).await.unwrap();
    let mut c2 = s.connect(&addr).await.unwrap();
    let mut c3 = s.connect(&addr).await.unwrap();
    c2.write_all(b"data").await.unwrap();
    settle().await;
    drop(listener);
    settle().await;
    out.push(format!("client1 read: {}", read(&mut c1).await));
    out.push(format!("client1 read again: {}", read(&mut c1).await));
    out.push(format!("client2(wrote data) read: {}", read(&mut c2).await));
    out.push(format!("client3 write#1: {}", write(&mut c3, b"x").await));
    out.push(format!("client3 write#2: {}", write(&mut c3, b"x").await));
    out.push(format!("client3 read: {}", read(&mut c3).await));
    out.push(format!("connect after listener drop: {}", obs(&s.connect(&addr).await.map(|_| ()))));

    let (listener, addr) = s.listen(128).await.unwrap();
    let client = s.connect(&addr).await.unwrap();
    s.set_linger_zero(&client).unwrap();
    drop(client);
    settle().await;
    let accepted = s.accept(&listener).await;
    out.push(format!(
        "accept of connection reset while queued: {}",
        match &accepted {
            Ok(_) => "Ok".to_string(),
            Err(e) => err(e),
        }
    ));
    if let Ok(mut stream) = accepted {
        out.push(format!("  its read: {}", read(&mut stream).await));
    }
    out
}

conformance!(
    dropping_a_listener_resets_queued_connections,
    drop_listener,
    [
        "client1 read: Err(ECONNRESET)",
        "client1 read again: Ok(0) [EOF]",
        "client2(wrote data) read: Err(ECONNRESET)",
        "client3 write#1: Err(ECONNRESET)",
        "client3 write#2: Err(EPIPE)",
        "client3 read: Ok(0) [EOF]",
        "connect after listener drop: Err(ECONNREFUSED)",
        "accept of connection reset while queued: Ok",
        "  its read: Err(ECONNRESET)",
    ]
);

// 8. An RST in ESTABLISHED: the first write or read reports ECONNRESET, then EPIPE/EOF. An RST
// after the peer's FIN gives EPIPE, not ECONNRESET. peer_addr then fails ENOTCONN; take_error
// reports the reset once.
async fn after_rst<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    for variant in ["[RST in ESTABLISHED]", "[FIN then RST (CLOSE_WAIT)]", "[RST, read first]", "[take_error]"] {
        let mut client = s.connect(&addr).await.unwrap();
        let server = s.accept(&listener).await.unwrap();
        if variant == "[FIN then RST (CLOSE_WAIT)]" {
            s.shutdown(&server, Shutdown::Write).unwrap();
            settle().await;
        }
        s.set_linger_zero(&server).unwrap();
        drop(server);
        settle().await;
        match variant {
            "[RST, read first]" => {
                out.push(format!("{variant} read#1: {}", read(&mut client).await));
                out.push(format!("{variant} read#2: {}", read(&mut client).await));
                out.push(format!("{variant} write#1: {}", write(&mut client, b"x").await));
            }
            "[take_error]" => {
                out.push(format!("{variant} peer_addr() after RST: {}", obs(&s.peer_addr(&client).map(|_| ()))));
                let first = s.take_error(&client).unwrap();
                out.push(format!(
                    "{variant} take_error() after RST: {}",
                    first.map_or("None".to_string(), |e| err(&e))
                ));
                let second = s.take_error(&client).unwrap();
                out.push(format!("{variant} take_error() again: {}", second.map_or("None".to_string(), |e| err(&e))));
                out.push(format!("{variant} read after take_error: {}", read(&mut client).await));
            }
            _ => {
                out.push(format!("{variant} write#1: {}", write(&mut client, b"x").await));
                out.push(format!("{variant} write#2: {}", write(&mut client, b"x").await));
                out.push(format!("{variant} read: {}", read(&mut client).await));
            }
        }
    }
    out
}

conformance!(
    rst_is_reported_once_and_rst_after_fin_is_epipe,
    after_rst,
    [
        "[RST in ESTABLISHED] write#1: Err(ECONNRESET)",
        "[RST in ESTABLISHED] write#2: Err(EPIPE)",
        "[RST in ESTABLISHED] read: Ok(0) [EOF]",
        "[FIN then RST (CLOSE_WAIT)] write#1: Err(EPIPE)",
        "[FIN then RST (CLOSE_WAIT)] write#2: Err(EPIPE)",
        "[FIN then RST (CLOSE_WAIT)] read: Ok(0) [EOF]",
        "[RST, read first] read#1: Err(ECONNRESET)",
        "[RST, read first] read#2: Ok(0) [EOF]",
        "[RST, read first] write#1: Err(EPIPE)",
        "[take_error] peer_addr() after RST: Err(ENOTCONN)",
        "[take_error] take_error() after RST: Err(ECONNRESET)",
        "[take_error] take_error() again: None",
        "[take_error] read after take_error: Ok(0) [EOF]",
    ]
);

// 9. SO_LINGER 0 then close sends RST (after the data already sent).
async fn linger_zero<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    for variant in ["", "[no data] ", "[shutdown(W) then linger0 close] "] {
        let mut client = s.connect(&addr).await.unwrap();
        let mut server = s.accept(&listener).await.unwrap();
        if variant.is_empty() {
            server.write_all(b"bye").await.unwrap();
        }
        if variant == "[shutdown(W) then linger0 close] " {
            s.shutdown(&server, Shutdown::Write).unwrap();
            settle().await;
        }
        s.set_linger_zero(&server).unwrap();
        drop(server);
        settle().await;
        if variant.is_empty() {
            out.push(format!("client read#1 (data sent before linger0 close): {}", read(&mut client).await));
            out.push(format!("client read#2: {}", read(&mut client).await));
            out.push(format!("client read#3: {}", read(&mut client).await));
            out.push(format!("client write: {}", write(&mut client, b"x").await));
        } else {
            out.push(format!("{variant}client read#1: {}", read(&mut client).await));
            out.push(format!("{variant}client read#2: {}", read(&mut client).await));
        }
    }
    out
}

conformance!(
    linger_zero_close_sends_rst,
    linger_zero,
    [
        "client read#1 (data sent before linger0 close): Ok(3) \"bye\"",
        "client read#2: Err(ECONNRESET)",
        "client read#3: Ok(0) [EOF]",
        "client write: Err(EPIPE)",
        "[no data] client read#1: Err(ECONNRESET)",
        "[no data] client read#2: Ok(0) [EOF]",
        "[shutdown(W) then linger0 close] client read#1: Ok(0) [EOF]",
        "[shutdown(W) then linger0 close] client read#2: Ok(0) [EOF]",
    ]
);

// 10. A peer that never reads: writes are accepted up to a bound in the megabytes, then block.
async fn fill_buffers<S: Stack>(s: &S) -> Vec<String> {
    let (listener, addr) = s.listen(128).await.unwrap();
    let mut client = s.connect(&addr).await.unwrap();
    let _server = s.accept(&listener).await.unwrap();
    let chunk = vec![1u8; 64 * 1024];
    let mut accepted = 0usize;
    loop {
        match tokio::time::timeout(Duration::from_millis(200), client.write(&chunk)).await {
            Ok(Ok(n)) => accepted += n,
            Ok(Err(e)) => return vec![format!("write failed: {}", err(&e))],
            Err(_) => break,
        }
        if accepted > 64 << 20 {
            return vec!["never blocked".to_string()];
        }
    }
    let mib = accepted as f64 / f64::from(1 << 20);
    vec![format!(
        "bytes accepted before writes block: {}",
        if (3.0..=5.0).contains(&mib) { "3–5 MiB" } else { "outside 3–5 MiB" }
    )]
}

conformance!(
    writes_block_after_megabytes_when_the_peer_never_reads,
    fill_buffers,
    ["bytes accepted before writes block: 3–5 MiB"]
);

// 11/12. Listening twice on an address fails EADDRINUSE; after our own shutdown(Both) reads give
// EOF and writes fail EPIPE.
async fn misc<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    out.push(format!("listen on the same address while listening: {}", obs(&s.listen_on(&addr).await.map(|_| ()))));
    let mut client = s.connect(&addr).await.unwrap();
    let _server = s.accept(&listener).await.unwrap();
    s.shutdown(&client, Shutdown::Both).unwrap();
    out.push(format!("read after own shutdown(Both): {}", read(&mut client).await));
    out.push(format!("write after own shutdown(Both): {}", write(&mut client, b"x").await));
    out
}

conformance!(
    listen_twice_is_addr_in_use_and_shutdown_both_closes_both_ways,
    misc,
    [
        "listen on the same address while listening: Err(EADDRINUSE)",
        "read after own shutdown(Both): Ok(0) [EOF]",
        "write after own shutdown(Both): Err(EPIPE)",
    ]
);

// Found by review: a write blocked on a full send buffer when the peer aborts fails with the
// reset (EPIPE when the peer's FIN came first), then EPIPE; reads give EOF.
async fn blocked_write_then_abort<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    for variant in ["", "[FIN first] "] {
        let mut client = s.connect(&addr).await.unwrap();
        let server = s.accept(&listener).await.unwrap();
        let chunk = vec![1u8; 256 * 1024];
        let mut total = 0usize;
        while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(200), client.write(&chunk)).await {
            total += n;
            if total > 64 << 20 {
                break;
            }
        }
        if variant == "[FIN first] " {
            s.shutdown(&server, Shutdown::Write).unwrap();
            settle().await;
        }
        drop(server);
        settle().await;
        out.push(format!("{variant}write after the peer aborted: {}", write(&mut client, &chunk).await));
        out.push(format!("{variant}write again: {}", write(&mut client, b"x").await));
    }
    out
}

conformance!(
    a_blocked_writer_sees_the_peers_abort,
    blocked_write_then_abort,
    [
        "write after the peer aborted: Err(ECONNRESET)",
        "write again: Err(EPIPE)",
        "[FIN first] write after the peer aborted: Err(EPIPE)",
        "[FIN first] write again: Err(EPIPE)",
    ]
);

// Found by review: after both FINs peer_addr fails ENOTCONN; an RST after the peer's FIN leaves
// EPIPE for take_error; a dial dropped after it completed closes its socket; ephemeral listen
// ports differ; the loopback address reaches the host's own listener.
async fn after_close<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    let client = s.connect(&addr).await.unwrap();
    let server = s.accept(&listener).await.unwrap();
    s.shutdown(&client, Shutdown::Write).unwrap();
    s.shutdown(&server, Shutdown::Write).unwrap();
    settle().await;
    out.push(format!("client peer_addr after both FINs: {}", obs(&s.peer_addr(&client).map(|_| ()))));
    out.push(format!("server peer_addr after both FINs: {}", obs(&s.peer_addr(&server).map(|_| ()))));

    let client = s.connect(&addr).await.unwrap();
    let server = s.accept(&listener).await.unwrap();
    s.shutdown(&server, Shutdown::Write).unwrap();
    settle().await;
    s.set_linger_zero(&server).unwrap();
    drop(server);
    settle().await;
    let first = s.take_error(&client).unwrap();
    out.push(format!("take_error after FIN then RST: {}", first.map_or("None".to_string(), |e| err(&e))));
    let second = s.take_error(&client).unwrap();
    out.push(format!("take_error again: {}", second.map_or("None".to_string(), |e| err(&e))));

    let mut dial = Box::pin(s.connect(&addr));
    let _ = futures::poll!(dial.as_mut());
    settle().await;
    let _ = futures::poll!(dial.as_mut());
    drop(dial);
    settle().await;
    let mut dropped = s.accept(&listener).await.unwrap();
    out.push(format!("read from a dial dropped after it completed: {}", read(&mut dropped).await));

    let (_l1, p1) = s.listen_ephemeral().await.unwrap();
    let (l2, p2) = s.listen_ephemeral().await.unwrap();
    out.push(format!("two port-0 listeners get different ephemeral ports: {}", p1 != p2 && p1 >= 32768 && p2 >= 32768));
    let looped = s.connect_loopback(p2).await.map(|_| ());
    out.push(format!("dial the host's own port through 127.0.0.1: {}", obs(&looped)));
    let accepted = s.accept(&l2).await.map(|_| ());
    out.push(format!("  accepted: {}", obs(&accepted)));
    out
}

conformance!(
    closed_sockets_dropped_dials_ephemeral_ports_and_loopback,
    after_close,
    [
        "client peer_addr after both FINs: Err(ENOTCONN)",
        "server peer_addr after both FINs: Err(ENOTCONN)",
        "take_error after FIN then RST: Err(EPIPE)",
        "take_error again: None",
        "read from a dial dropped after it completed: Ok(0) [EOF]",
        "two port-0 listeners get different ephemeral ports: true",
        "dial the host's own port through 127.0.0.1: Ok(())",
        "  accepted: Ok(())",
    ]
);

// Issue 11, point 1: `AsyncWriteExt::shutdown` on a connection the peer reset succeeds (tokio's
// `shutdown_std` maps shutdown(2)'s ENOTCONN to Ok), and so after both FINs; shutdown(2) itself
// fails ENOTCONN; the reset is still reported to the next read.
async fn shutdown_after_reset<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    let mut client = s.connect(&addr).await.unwrap();
    let server = s.accept(&listener).await.unwrap();
    s.set_linger_zero(&server).unwrap();
    drop(server);
    settle().await;
    out.push(format!("AsyncWriteExt::shutdown after the peer's RST: {}", obs(&client.shutdown().await)));
    out.push(format!("  again: {}", obs(&client.shutdown().await)));
    out.push(format!("  shutdown(2) Write: {}", obs(&s.shutdown(&client, Shutdown::Write))));
    out.push(format!("  read: {}", read(&mut client).await));
    out.push(format!("  write: {}", write(&mut client, b"x").await));

    let mut client = s.connect(&addr).await.unwrap();
    let mut server = s.accept(&listener).await.unwrap();
    s.shutdown(&server, Shutdown::Write).unwrap();
    s.shutdown(&client, Shutdown::Write).unwrap();
    settle().await;
    out.push(format!("[after both FINs] AsyncWriteExt::shutdown: {}", obs(&client.shutdown().await)));
    out.push(format!("[after both FINs] shutdown(2) Both: {}", obs(&s.shutdown(&server, Shutdown::Both))));
    out.push(format!("[after both FINs] AsyncWriteExt::shutdown (server): {}", obs(&server.shutdown().await)));
    out
}

conformance!(
    async_shutdown_after_the_peers_reset_is_ok_as_tokio_maps_enotconn,
    shutdown_after_reset,
    [
        "AsyncWriteExt::shutdown after the peer's RST: Ok(())",
        "  again: Ok(())",
        "  shutdown(2) Write: Err(ENOTCONN)",
        "  read: Err(ECONNRESET)",
        "  write: Err(EPIPE)",
        "[after both FINs] AsyncWriteExt::shutdown: Ok(())",
        "[after both FINs] shutdown(2) Both: Err(ENOTCONN)",
        "[after both FINs] AsyncWriteExt::shutdown (server): Ok(())",
    ]
);

// Issue 11, point 2: data reaching a socket that shut reading after it sent its FIN (FIN_WAIT
// with RCV_SHUTDOWN) resets it (RFC 1122; Linux tcp_rcv_state_process): it answers RST. The
// writer, in CLOSE_WAIT, gets EPIPE (its first write is accepted, as after any FIN) and reads
// EOF; the socket itself reports ECONNRESET once, after what it had queued.
async fn data_after_read_shutdown<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    for variant in ["[Both] ", "[Write, then Read] ", "[Read, data, then Write] ", "[Both, our write first] "] {
        let mut client = s.connect(&addr).await.unwrap();
        let mut server = s.accept(&listener).await.unwrap();
        match variant {
            "[Write, then Read] " => {
                s.shutdown(&server, Shutdown::Write).unwrap();
                s.shutdown(&server, Shutdown::Read).unwrap();
            }
            "[Read, data, then Write] " => {
                s.shutdown(&server, Shutdown::Read).unwrap();
                out.push(format!("{variant}peer write before our FIN: {}", write(&mut client, b"early").await));
                settle().await;
                s.shutdown(&server, Shutdown::Write).unwrap();
            }
            _ => s.shutdown(&server, Shutdown::Both).unwrap(),
        }
        settle().await;
        out.push(format!("{variant}peer read (our FIN): {}", read(&mut client).await));
        out.push(format!("{variant}peer write#1: {}", write(&mut client, b"hello").await));
        settle().await;
        if variant == "[Read, data, then Write] " {
            let first = s.take_error(&client).unwrap();
            out.push(format!("{variant}peer take_error: {}", first.map_or("None".to_string(), |e| err(&e))));
        }
        out.push(format!("{variant}peer write#2: {}", write(&mut client, b"hello").await));
        out.push(format!("{variant}peer read: {}", read(&mut client).await));
        if variant == "[Both, our write first] " {
            out.push(format!("{variant}our write: {}", write(&mut server, b"x").await));
            out.push(format!("{variant}our write again: {}", write(&mut server, b"x").await));
            out.push(format!("{variant}our read: {}", read(&mut server).await));
        } else {
            out.push(format!("{variant}our read: {}", read(&mut server).await));
            out.push(format!("{variant}our read again: {}", read(&mut server).await));
            out.push(format!("{variant}our write: {}", write(&mut server, b"x").await));
        }
        out.push(format!("{variant}our peer_addr: {}", obs(&s.peer_addr(&server).map(|_| ()))));
    }
    out
}

conformance!(
    data_after_our_fin_and_read_shutdown_is_answered_with_rst,
    data_after_read_shutdown,
    [
        "[Both] peer read (our FIN): Ok(0) [EOF]",
        "[Both] peer write#1: Ok(5)",
        "[Both] peer write#2: Err(EPIPE)",
        "[Both] peer read: Ok(0) [EOF]",
        "[Both] our read: Err(ECONNRESET)",
        "[Both] our read again: Ok(0) [EOF]",
        "[Both] our write: Err(EPIPE)",
        "[Both] our peer_addr: Err(ENOTCONN)",
        "[Write, then Read] peer read (our FIN): Ok(0) [EOF]",
        "[Write, then Read] peer write#1: Ok(5)",
        "[Write, then Read] peer write#2: Err(EPIPE)",
        "[Write, then Read] peer read: Ok(0) [EOF]",
        "[Write, then Read] our read: Err(ECONNRESET)",
        "[Write, then Read] our read again: Ok(0) [EOF]",
        "[Write, then Read] our write: Err(EPIPE)",
        "[Write, then Read] our peer_addr: Err(ENOTCONN)",
        "[Read, data, then Write] peer write before our FIN: Ok(5)",
        "[Read, data, then Write] peer read (our FIN): Ok(0) [EOF]",
        "[Read, data, then Write] peer write#1: Ok(5)",
        "[Read, data, then Write] peer take_error: Err(EPIPE)",
        "[Read, data, then Write] peer write#2: Err(EPIPE)",
        "[Read, data, then Write] peer read: Ok(0) [EOF]",
        "[Read, data, then Write] our read: Ok(5) \"early\"",
        "[Read, data, then Write] our read again: Err(ECONNRESET)",
        "[Read, data, then Write] our write: Err(EPIPE)",
        "[Read, data, then Write] our peer_addr: Err(ENOTCONN)",
        "[Both, our write first] peer read (our FIN): Ok(0) [EOF]",
        "[Both, our write first] peer write#1: Ok(5)",
        "[Both, our write first] peer write#2: Err(EPIPE)",
        "[Both, our write first] peer read: Ok(0) [EOF]",
        "[Both, our write first] our write: Err(ECONNRESET)",
        "[Both, our write first] our write again: Err(EPIPE)",
        "[Both, our write first] our read: Ok(0) [EOF]",
        "[Both, our write first] our peer_addr: Err(ENOTCONN)",
    ]
);

// Issue 11, point 4: IPv6 loopback and dual stack. `[::1]` is the host's own IPv6 loopback, with
// its own port space; `[::]` is dual stack (bindv6only = 0) and shows IPv4 peers v4-mapped; a
// v4-mapped address is its IPv4 address through an IPv6 socket; dialing `0.0.0.0` or `[::]`
// reaches the host itself; `localhost` resolves to 127.0.0.1.
async fn ipv6_dual_stack<S: Stack>(s: &S) -> Vec<String> {
    let mut out = Vec::new();
    let ip = |a: io::Result<SocketAddr>| a.map_or_else(|e| err(&e), |a| a.ip().to_string());
    for bind in ["[::1]:0", "[::]:0", "[::ffff:127.0.0.1]:0", "127.0.0.1:0"] {
        let listener = s.listen_local(bind).await.unwrap();
        let port = s.listener_addr(&listener).unwrap().port();
        out.push(format!("listen {bind}: reports {}", ip(s.listener_addr(&listener))));
        for target in ["127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "[::]", "0.0.0.0"] {
            let dial = tokio::time::timeout(Duration::from_secs(1), s.connect_local(&format!("{target}:{port}"))).await;
            out.push(match dial {
                Err(_) => format!("  dial {target}: timed out"),
                Ok(Err(e)) => format!("  dial {target}: {}", err(&e)),
                Ok(Ok(c)) => {
                    let a = s.accept(&listener).await.unwrap();
                    format!(
                        "  dial {target}: Ok; dialer {} -> {}; server {} <- {}",
                        ip(s.local_addr(&c)),
                        ip(s.peer_addr(&c)),
                        ip(s.local_addr(&a)),
                        ip(s.peer_addr(&a))
                    )
                }
            });
        }
    }
    let pairs = [
        ("127.0.0.1", "[::1]"),
        ("[::1]", "127.0.0.1"),
        ("0.0.0.0", "[::1]"),
        ("127.0.0.1", "[::]"),
        ("[::]", "0.0.0.0"),
        ("[::1]", "[::]"),
        ("[::]", "[::1]"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "[::1]"),
    ];
    for (first, second) in pairs {
        let l1 = s.listen_local(&format!("{first}:0")).await.unwrap();
        let port = s.listener_addr(&l1).unwrap().port();
        let l2 = s.listen_local(&format!("{second}:{port}")).await;
        out.push(format!(
            "listen {first}:P then {second}:P: {}",
            ip(l2.as_ref().map_err(clone_err).and_then(|l| s.listener_addr(l)))
        ));
    }
    // (Where /etc/hosts also maps localhost to ::1, glibc returns it too; the simulation does not.)
    let resolved = s.resolve("localhost").await.map(|ips| ips.contains(&std::net::IpAddr::from([127, 0, 0, 1])));
    out.push(format!("resolve localhost includes 127.0.0.1: {}", obs(&resolved)));
    out
}

fn clone_err(e: &io::Error) -> io::Error {
    e.raw_os_error().map_or_else(|| io::Error::new(e.kind(), e.to_string()), io::Error::from_raw_os_error)
}

conformance!(
    ipv6_loopback_and_dual_stack_listeners_as_linux,
    ipv6_dual_stack,
    [
        "listen [::1]:0: reports ::1",
        "  dial 127.0.0.1: Err(ECONNREFUSED)",
        "  dial [::1]: Ok; dialer ::1 -> ::1; server ::1 <- ::1",
        "  dial [::ffff:127.0.0.1]: Err(ECONNREFUSED)",
        "  dial [::]: Ok; dialer ::1 -> ::1; server ::1 <- ::1",
        "  dial 0.0.0.0: Err(ECONNREFUSED)",
        "listen [::]:0: reports ::",
        "  dial 127.0.0.1: Ok; dialer 127.0.0.1 -> 127.0.0.1; server ::ffff:127.0.0.1 <- ::ffff:127.0.0.1",
        "  dial [::1]: Ok; dialer ::1 -> ::1; server ::1 <- ::1",
        "  dial [::ffff:127.0.0.1]: Ok; dialer ::ffff:127.0.0.1 -> ::ffff:127.0.0.1; server ::ffff:127.0.0.1 <- ::ffff:127.0.0.1",
        "  dial [::]: Ok; dialer ::1 -> ::1; server ::1 <- ::1",
        "  dial 0.0.0.0: Ok; dialer 127.0.0.1 -> 127.0.0.1; server ::ffff:127.0.0.1 <- ::ffff:127.0.0.1",
        "listen [::ffff:127.0.0.1]:0: reports ::ffff:127.0.0.1",
        "  dial 127.0.0.1: Ok; dialer 127.0.0.1 -> 127.0.0.1; server ::ffff:127.0.0.1 <- ::ffff:127.0.0.1",
        "  dial [::1]: Err(ECONNREFUSED)",
        "  dial [::ffff:127.0.0.1]: Ok; dialer ::ffff:127.0.0.1 -> ::ffff:127.0.0.1; server ::ffff:127.0.0.1 <- ::ffff:127.0.0.1",
        "  dial [::]: Err(ECONNREFUSED)",
        "  dial 0.0.0.0: Ok; dialer 127.0.0.1 -> 127.0.0.1; server ::ffff:127.0.0.1 <- ::ffff:127.0.0.1",
        "listen 127.0.0.1:0: reports 127.0.0.1",
        "  dial 127.0.0.1: Ok; dialer 127.0.0.1 -> 127.0.0.1; server 127.0.0.1 <- 127.0.0.1",
        "  dial [::1]: Err(ECONNREFUSED)",
        "  dial [::ffff:127.0.0.1]: Ok; dialer ::ffff:127.0.0.1 -> ::ffff:127.0.0.1; server 127.0.0.1 <- 127.0.0.1",
        "  dial [::]: Err(ECONNREFUSED)",
        "  dial 0.0.0.0: Ok; dialer 127.0.0.1 -> 127.0.0.1; server 127.0.0.1 <- 127.0.0.1",
        "listen 127.0.0.1:P then [::1]:P: ::1",
        "listen [::1]:P then 127.0.0.1:P: 127.0.0.1",
        "listen 0.0.0.0:P then [::1]:P: ::1",
        "listen 127.0.0.1:P then [::]:P: Err(EADDRINUSE)",
        "listen [::]:P then 0.0.0.0:P: Err(EADDRINUSE)",
        "listen [::1]:P then [::]:P: Err(EADDRINUSE)",
        "listen [::]:P then [::1]:P: Err(EADDRINUSE)",
        "listen [::ffff:127.0.0.1]:P then 127.0.0.1:P: Err(EADDRINUSE)",
        "listen [::ffff:127.0.0.1]:P then [::1]:P: ::1",
        "resolve localhost includes 127.0.0.1: Ok(true)",
    ],
    requires: no_ipv6_loopback()
);

/// Why this machine cannot run the IPv6 body on real sockets, if it cannot: no `::1`
/// (containers often run with IPv6 disabled).
fn no_ipv6_loopback() -> Option<String> {
    std::net::TcpListener::bind("[::1]:0").err().map(|e| format!("no IPv6 loopback here (bind [::1]:0: {e})"))
}

/// Writes `chunk` again and again for `during`; returns the bytes accepted.
async fn write_during<W: tokio::io::AsyncWrite + Unpin>(stream: &mut W, chunk: &[u8], during: Duration) -> usize {
    let deadline = Instant::now() + during;
    let mut total = 0;
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.write(chunk)).await {
        total += n;
    }
    total
}

/// Writes `chunk` until nothing is accepted for `idle`; returns the bytes accepted.
async fn write_until_blocked<W: tokio::io::AsyncWrite + Unpin>(stream: &mut W, chunk: &[u8], idle: Duration) -> usize {
    let mut total = 0;
    while let Ok(Ok(n)) = tokio::time::timeout(idle, stream.write(chunk)).await {
        total += n;
        if total > 64 << 20 {
            break;
        }
    }
    total
}

// Issue 11, point 3: a slow reader. A writer that blocked on a full send bound is woken only
// when a third of it is free (Linux's sk_stream_write_space: free >= queued / 2), so a reader
// that reads a little does not wake it; once the reader has drained everything, it resumes and
// gets at least what was read (Linux, with receive-buffer autotuning, more: see
// `slow_reader_refill_is_what_was_read_a_documented_difference`).
async fn slow_reader<S: Stack>(s: &S) -> Vec<String> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let (listener, addr) = s.listen(128).await.unwrap();
    let mut client = s.connect(&addr).await.unwrap();
    let mut server = s.accept(&listener).await.unwrap();
    let chunk = vec![1u8; 64 * 1024];
    let filled = write_until_blocked(&mut client, &chunk, Duration::from_millis(200)).await;
    let mut buf = vec![0u8; 64 << 10];
    server.read_exact(&mut buf).await.unwrap();
    let soon = write_during(&mut client, &chunk, Duration::from_millis(100)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = write_during(&mut client, &chunk, Duration::from_millis(100)).await;
    out.push(format!(
        "after a 64 KiB read, the blocked writer writes within 100 ms: {soon} bytes; 300 ms later: {later}"
    ));
    let mut rest = vec![0u8; filled + soon + later - (64 << 10)];
    server.read_exact(&mut rest).await.unwrap();
    let resumed = write_during(&mut client, &chunk, Duration::from_millis(100)).await;
    out.push(format!(
        "after the reader drained everything, the writer resumes with at least what was read: {}",
        resumed >= filled
    ));
    out
}

conformance!(
    a_slow_readers_small_read_does_not_wake_a_blocked_writer,
    slow_reader,
    [
        "after a 64 KiB read, the blocked writer writes within 100 ms: 0 bytes; 300 ms later: 0",
        "after the reader drained everything, the writer resumes with at least what was read: true",
    ]
);

// The known difference behind point 3, pinned: Linux grows the receive window as the reader
// reads (receive-buffer autotuning, tcp_rcv_space_adjust), so after a 1 MiB read a blocked tokio
// writer resumes and gets more than was read (measured: 1.5–5.3 MB in 100 ms; 4.3–5.8 MB after a
// full 3.9 MB drain). The simulated bound is fixed: the writer stays blocked until a third of the
// bound is free, then gets exactly what was read.
#[test]
fn slow_reader_refill_is_what_was_read_a_documented_difference() {
    use tokio::io::AsyncReadExt;
    Simulation::new("slow_reader_refill")
        .seeds(0..3)
        .run(|ctx| async move {
            ctx.set_net_config(NetConfig::fixed(Duration::from_micros(100))).expect("set before the network is made");
            let s = Sim::new(&ctx);
            let (listener, addr) = s.listen(128).await.unwrap();
            let mut client = s.connect(&addr).await.unwrap();
            let mut server = s.accept(&listener).await.unwrap();
            let chunk = vec![1u8; 64 * 1024];
            let filled = write_until_blocked(&mut client, &chunk, Duration::from_millis(200)).await;
            let check = |what: &str, ok: bool| {
                if ok { Ok(()) } else { Err(Failure::correctness("slow-reader", what.to_string())) }
            };
            check("the bound is Linux's", filled == sim::net::LINUX_SEND_BOUND)?;
            let mut buf = vec![0u8; 1 << 20];
            server.read_exact(&mut buf).await.unwrap();
            let after_1mib = write_during(&mut client, &chunk, Duration::from_millis(100)).await;
            check("a 1 MiB read leaves the writer blocked (under a third of the bound)", after_1mib == 0)?;
            let third = filled / 3 + 1 - (1 << 20);
            let mut buf = vec![0u8; third];
            server.read_exact(&mut buf).await.unwrap();
            let refill = write_during(&mut client, &chunk, Duration::from_millis(100)).await;
            check("once a third is free the writer gets exactly what was read", refill == filled / 3 + 1)?;
            Ok(())
        })
        .assert_passed();
}

// Issue 11, point 4, beyond one host's loopback (no loopback counterpart: the machine's own
// network is not the simulated one). Hosts have IPv4 addresses only, plus `::1`: a `[::]`
// listener answers other hosts over IPv4 and shows them v4-mapped; a `[::1]` one is the host's
// own; any other IPv6 address fails at once (ENETUNREACH to dial, EADDRNOTAVAIL to listen).
#[test]
fn ipv6_beyond_loopback_fails_at_once_and_dual_stack_serves_other_hosts() {
    Simulation::new("ipv6_hosts")
        .seeds(0..3)
        .run(|ctx| async move {
            let check = |what: String, ok: bool| if ok { Ok(()) } else { Err(Failure::correctness("ipv6", what)) };
            let net = ctx.net();
            let (server, client) = (net.host("server"), net.host("client"));
            let start = Instant::now();
            let dial = client.dial("[fd00::1]:80").await.map(|_| ());
            check(format!("dial [fd00::1]:80: {dial:?}"), obs(&dial) == "Err(ENETUNREACH)")?;
            check("it fails at once".into(), start.elapsed().is_zero())?;
            let listen = server.listen("[fd00::1]:80").map(|_| ());
            check(format!("listen [fd00::1]:80: {listen:?}"), obs(&listen) == "Err(EADDRNOTAVAIL)")?;
            let any = server.listen("[::]:80").map_err(|e| Failure::correctness("ipv6", e.to_string()))?;
            let stream = client.dial("server:80").await.map_err(|e| Failure::correctness("ipv6", e.to_string()))?;
            let (accepted, peer) = any.accept().await.map_err(|e| Failure::correctness("ipv6", e.to_string()))?;
            let mapped = |a: SocketAddr| {
                SocketAddr::new(
                    std::net::IpAddr::V6(match a.ip() {
                        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                        std::net::IpAddr::V6(v6) => v6,
                    }),
                    a.port(),
                )
            };
            let (client_local, server_ip) = (stream.local_addr().unwrap(), server.addr());
            check(format!("[::] shows the IPv4 peer v4-mapped: {peer}"), peer == mapped(client_local))?;
            check(
                format!("and itself: {:?}", accepted.local_addr()),
                accepted.local_addr().ok() == Some(mapped(SocketAddr::new(server_ip, 80))),
            )?;
            check(
                format!("the dialer sees plain IPv4: {:?}", stream.peer_addr()),
                stream.peer_addr().ok() == Some(SocketAddr::new(server_ip, 80)),
            )?;
            let localhost = client.resolve("localhost").ok();
            check(
                format!("localhost resolves to 127.0.0.1 only: {localhost:?}"),
                localhost == Some(vec![[127, 0, 0, 1].into()]),
            )?;
            let _own = server.listen("[::1]:81").map_err(|e| Failure::correctness("ipv6", e.to_string()))?;
            let other = client.dial("server:81").await.map(|_| ());
            check(format!("[::1] is not reachable from another host: {other:?}"), obs(&other) == "Err(ECONNREFUSED)")?;
            Ok(())
        })
        .assert_passed();
}
