//! A listener closed while a connection to it is half-open (its SYN answered, the dialer's ACK
//! still in flight): the dialer's connect succeeds, and its ACK (with whatever it sends right
//! after) is answered with RST, as Linux's tcp_v4_rcv does — the request sock's listener has
//! left TCP_LISTEN, so it is dropped, and the second lookup finds no socket (`no_tcp_socket:`
//! sends a reset). A listener opened again on the port does not adopt it: the request was the
//! old listener's, and an ACK without a SYN at a listener is answered with RST too.
//!
//! Found by the orderstatus walkthrough (fresh seeds 17532222858353956070 and …6531): a broker
//! that stopped with a handshake in flight left the client waiting on a connection nothing would
//! ever answer. Not in the loopback conformance suite: loopback completes the handshake at once,
//! so the window between SYN-ACK and ACK does not exist there.

use std::io;
use std::time::Duration;

use sim::net::NetConfig;
use sim::{Ctx, Failure, Simulation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{sleep, timeout};

/// One-way latency: SYN at the server at 10 ms, SYN-ACK at the dialer at 20 ms, its ACK at the
/// server at 30 ms.
const LATENCY: Duration = Duration::from_millis(10);

fn check(ok: bool, what: impl Into<String>) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(Failure::correctness("listener-close", what)) }
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::correctness("listener-close", e.to_string())
}

/// Dials `server:80`, closes the listener between the SYN's arrival and the ACK's, optionally
/// listens again at once, then writes a request and reads: the read's outcome (None: nothing
/// came within 5 s).
async fn request_after_close(ctx: &Ctx, listen_again: bool) -> Result<Option<io::Result<usize>>, Failure> {
    let net = ctx.net();
    let listener = net.host("server").listen("80").map_err(fail)?;
    let client = net.host("client");
    let dial = tokio::spawn(async move { client.dial("server:80").await });
    sleep(LATENCY + LATENCY / 2).await;
    drop(listener);
    let again = if listen_again { Some(net.host("server").listen("80").map_err(fail)?) } else { None };
    let mut stream = dial.await.map_err(fail)?.map_err(fail)?;
    stream.write_all(b"request").await.map_err(fail)?;
    let mut buf = [0u8; 64];
    let read = timeout(Duration::from_secs(5), stream.read(&mut buf)).await.ok();
    if let Some(again) = again {
        let accepted = timeout(Duration::from_secs(1), again.accept()).await;
        check(accepted.is_err(), "the listener opened again does not adopt the old listener's half-open connection")?;
    }
    Ok(read)
}

fn is_reset(read: &Option<io::Result<usize>>) -> bool {
    matches!(read, Some(Err(e)) if e.raw_os_error() == Some(104))
}

#[test]
fn a_listener_closed_mid_handshake_resets_the_dialers_connection() {
    Simulation::new("listener_closed_mid_handshake")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            ctx.set_net_config(NetConfig::fixed(LATENCY)).expect("set before the network is made");
            let read = request_after_close(&ctx, false).await?;
            check(is_reset(&read), format!("the dialer's read fails ECONNRESET, not hangs: {read:?}"))
        })
        .assert_passed();
}

#[test]
fn a_listener_reopened_mid_handshake_still_resets_the_old_handshake() {
    Simulation::new("listener_reopened_mid_handshake")
        .seeds(0..4)
        .run(|ctx: Ctx| async move {
            ctx.set_net_config(NetConfig::fixed(LATENCY)).expect("set before the network is made");
            let read = request_after_close(&ctx, true).await?;
            check(is_reset(&read), format!("the dialer's read fails ECONNRESET, not hangs: {read:?}"))
        })
        .assert_passed();
}
