//! The fault → status table: for each transport fault, the status a real tonic client sees, over
//! real loopback sockets and over the simulated network, from the same test body (tonic's own
//! server and client, a proxy in between that injects the fault).
//!
//! The two must be equal, or the scenario is listed in `KNOWN_DIFFERENCES` with its reason (and
//! must still differ, so the list stays true). The table is published in
//! `docs/src/grpc-fault-status.md`; this test fails when the page is stale. Regenerate it with
//! `GRPCSIM_BLESS=1 cargo test -p grpcsim --test fault_status`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grpcsim::probe::{CallReply, CallRequest, Item, Probe, ProbeClient, ProbeServer, StreamRequest};
use sim::{Failure, Simulation};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

type Log = Arc<Mutex<Vec<String>>>;

fn log(log: &Log, line: impl Into<String>) {
    log.lock().unwrap().push(line.into());
}

/// What a scenario needs from a network: the real one or the simulated one.
trait Net: Clone + Send + Sync + 'static {
    type Io: AsyncRead
        + AsyncWrite
        + Unpin
        + Send
        + 'static
        + tonic::transport::server::Connected<ConnectInfo: Clone + Send + Sync + 'static>;
    type Listener: Send + Sync + 'static;

    /// Listens on `host`; returns the listener and the address to dial.
    fn listen(&self, host: &str) -> impl Future<Output = (Self::Listener, String)> + Send;
    fn accept(listener: &Self::Listener) -> impl Future<Output = io::Result<Self::Io>> + Send;
    fn dial(&self, from: &str, addr: &str) -> impl Future<Output = io::Result<Self::Io>> + Send;
    fn set_linger_zero(io: &Self::Io);
    /// An address nothing listens on.
    fn closed_addr(&self) -> String;
    fn incoming(listener: Self::Listener) -> Pin<Box<dyn futures::Stream<Item = io::Result<Self::Io>> + Send>>;
    /// A lazy channel from host `client`.
    fn channel(&self, endpoint: Endpoint) -> Channel;
    /// An eager channel from host `client`.
    fn connect(&self, endpoint: Endpoint) -> impl Future<Output = Result<Channel, tonic::transport::Error>> + Send;
}

#[derive(Clone)]
struct Real;

impl Net for Real {
    type Io = tokio::net::TcpStream;
    type Listener = tokio::net::TcpListener;

    async fn listen(&self, _host: &str) -> (Self::Listener, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        (listener, addr)
    }

    async fn accept(listener: &Self::Listener) -> io::Result<Self::Io> {
        listener.accept().await.map(|(s, _)| s)
    }

    async fn dial(&self, _from: &str, addr: &str) -> io::Result<Self::Io> {
        tokio::net::TcpStream::connect(addr).await
    }

    fn set_linger_zero(io: &Self::Io) {
        socket2::SockRef::from(io).set_linger(Some(Duration::ZERO)).expect("linger");
    }

    fn closed_addr(&self) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    }

    fn incoming(listener: Self::Listener) -> Pin<Box<dyn futures::Stream<Item = io::Result<Self::Io>> + Send>> {
        Box::pin(tokio_stream::wrappers::TcpListenerStream::new(listener))
    }

    fn channel(&self, endpoint: Endpoint) -> Channel {
        endpoint.connect_lazy()
    }

    async fn connect(&self, endpoint: Endpoint) -> Result<Channel, tonic::transport::Error> {
        endpoint.connect().await
    }
}

#[derive(Clone)]
struct Simulated {
    net: sim::net::Network,
}

impl Net for Simulated {
    type Io = sim::net::TcpStream;
    type Listener = sim::net::TcpListener;

    async fn listen(&self, host: &str) -> (Self::Listener, String) {
        let listener = self.net.host(host).listen("0").expect("listen");
        let port = listener.local_addr().expect("addr").port();
        (listener, format!("{host}:{port}"))
    }

    async fn accept(listener: &Self::Listener) -> io::Result<Self::Io> {
        listener.accept().await.map(|(s, _)| s)
    }

    async fn dial(&self, from: &str, addr: &str) -> io::Result<Self::Io> {
        self.net.host(from).dial(addr).await
    }

    fn set_linger_zero(io: &Self::Io) {
        io.set_linger(Some(Duration::ZERO)).expect("linger");
    }

    fn closed_addr(&self) -> String {
        let _ = self.net.host("server");
        "server:9".to_string()
    }

    fn incoming(listener: Self::Listener) -> Pin<Box<dyn futures::Stream<Item = io::Result<Self::Io>> + Send>> {
        Box::pin(sim::net::adapters::Incoming(listener))
    }

    fn channel(&self, endpoint: Endpoint) -> Channel {
        endpoint.connect_with_connector_lazy(sim::net::adapters::Connector::new(self.net.host("client")))
    }

    async fn connect(&self, endpoint: Endpoint) -> Result<Channel, tonic::transport::Error> {
        endpoint.connect_with_connector(sim::net::adapters::Connector::new(self.net.host("client"))).await
    }
}

/// The probe the scenarios call: logs what its handlers see.
#[derive(Clone)]
struct Svc {
    log: Log,
    shutdown: watch::Receiver<bool>,
    end_streams_on_shutdown: bool,
}

struct DropLog {
    log: Log,
    armed: bool,
}

impl Drop for DropLog {
    fn drop(&mut self) {
        if self.armed {
            log(&self.log, "server: the call's handler was dropped before it answered");
        }
    }
}

type ItemStream = Pin<Box<dyn futures::Stream<Item = Result<Item, Status>> + Send>>;

#[tonic::async_trait]
impl Probe for Svc {
    async fn call(&self, request: Request<CallRequest>) -> Result<Response<CallReply>, Status> {
        let mut guard = DropLog { log: self.log.clone(), armed: true };
        let request = request.into_inner();
        tokio::time::sleep(Duration::from_millis(request.delay_ms)).await;
        guard.armed = false;
        Ok(Response::new(CallReply { tag: request.tag, served_by: "server".into() }))
    }

    type StreamStream = ItemStream;

    async fn stream(&self, request: Request<StreamRequest>) -> Result<Response<ItemStream>, Status> {
        let StreamRequest { count, interval_ms } = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let log = self.log.clone();
        let mut shutdown = self.shutdown.clone();
        let end_on_shutdown = self.end_streams_on_shutdown;
        tokio::spawn(async move {
            let mut seq = 0;
            while count == 0 || seq < count {
                tokio::select! {
                    () = wait_true(&mut shutdown), if end_on_shutdown => {
                        // Let the GOAWAY go out first.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        log_line(&log, format!("server: ended the stream after {seq} items on shutdown"));
                        return;
                    }
                    () = tokio::time::sleep(Duration::from_millis(interval_ms)) => {}
                }
                seq += 1;
                if tx.send(Ok(Item { seq, served_by: "server".into() })).await.is_err() {
                    log_line(&log, "server: sending the next item failed: the stream is gone".to_string());
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }
}

async fn wait_true(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn log_line(l: &Log, line: String) {
    log(l, line);
}

/// The fault the proxy injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    /// Closes the client's side with SO_LINGER 0 (RST) and the server's side normally.
    Reset,
    /// Closes both sides normally (FIN): the server process went away.
    Close,
    /// Stops forwarding in both directions; the sockets stay open.
    Silent,
}

/// A TCP proxy on host `proxy` in front of `upstream`; returns the address to dial and the fault
/// switch.
async fn proxy<N: Net>(net: &N, upstream: String) -> (String, watch::Sender<Fault>) {
    let (listener, addr) = net.listen("proxy").await;
    let (tx, rx) = watch::channel(Fault::None);
    let net2 = net.clone();
    tokio::spawn(async move {
        loop {
            let Ok(client) = N::accept(&listener).await else { return };
            let Ok(server) = net2.dial("proxy", &upstream).await else { return };
            tokio::spawn(pipe::<N>(client, server, rx.clone()));
        }
    });
    (addr, tx)
}

async fn pipe<N: Net>(client: N::Io, server: N::Io, mut fault: watch::Receiver<Fault>) {
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut sr, mut sw) = tokio::io::split(server);
    let mut a = vec![0u8; 64 * 1024];
    let mut b = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            Ok(()) = fault.changed() => {
                let f = *fault.borrow();
                match f {
                    Fault::None => {}
                    Fault::Reset => {
                        let client = cr.unsplit(cw);
                        N::set_linger_zero(&client);
                        return;
                    }
                    Fault::Close => return,
                    Fault::Silent => {
                        let _keep = (cr, cw, sr, sw);
                        std::future::pending::<()>().await;
                        return;
                    }
                }
            }
            n = cr.read(&mut a) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => if sw.write_all(&a[..n]).await.is_err() { return },
            },
            n = sr.read(&mut b) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => if cw.write_all(&b[..n]).await.is_err() { return },
            },
        }
    }
}

/// A running scenario's parts.
struct Setup {
    /// The address the client dials (the proxy).
    addr: String,
    fault: watch::Sender<Fault>,
    shutdown: watch::Sender<bool>,
    log: Log,
}

async fn setup<N: Net>(net: &N, end_streams_on_shutdown: bool) -> Setup {
    let log: Log = Arc::default();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let svc = Svc { log: log.clone(), shutdown: shutdown_rx.clone(), end_streams_on_shutdown };
    let (listener, server_addr) = net.listen("server").await;
    let incoming = N::incoming(listener);
    let log2 = log.clone();
    tokio::spawn(async move {
        let mut signal = shutdown_rx;
        let result = tonic::transport::Server::builder()
            .add_service(ProbeServer::new(svc))
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = signal.wait_for(|s| *s).await;
            })
            .await;
        log_line(&log2, format!("server: serve returned {}", if result.is_ok() { "Ok" } else { "Err" }));
    });
    let (addr, fault) = proxy(net, server_addr).await;
    Setup { addr, fault, shutdown: shutdown_tx, log }
}

fn endpoint(addr: &str) -> Endpoint {
    Endpoint::from_shared(format!("http://{addr}")).expect("uri")
}

/// A status as the table shows it: code, message, and the error chain behind it.
fn status(s: &Status) -> String {
    let mut out = format!("{:?}: \"{}\"", s.code(), s.message());
    let mut source = std::error::Error::source(s);
    while let Some(e) = source {
        out.push_str(&format!(" ← {e}"));
        source = e.source();
    }
    out
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(e) = source {
        out.push_str(&format!(" ← {e}"));
        source = e.source();
    }
    out
}

async fn call(client: &mut ProbeClient<Channel>, delay_ms: u64, timeout: Option<Duration>, limit: Duration) -> String {
    let mut request = Request::new(CallRequest { delay_ms, tag: "t".into() });
    if let Some(t) = timeout {
        request.set_timeout(t);
    }
    match tokio::time::timeout(limit, client.call(request)).await {
        Err(_) => format!("no status within {limit:?}"),
        Ok(Ok(_)) => "OK".to_string(),
        Ok(Err(s)) => status(&s),
    }
}

/// Reads a stream until it ends; triggers `on_item(n)` after the nth item.
async fn read_stream(client: &mut ProbeClient<Channel>, mut on_item: impl FnMut(u64), limit: Duration) -> String {
    let opened = match client.stream(StreamRequest { count: 0, interval_ms: 20 }).await {
        Ok(r) => r.into_inner(),
        Err(s) => return format!("open failed: {}", status(&s)),
    };
    let mut stream = opened;
    let mut n = 0;
    loop {
        match tokio::time::timeout(limit, stream.message()).await {
            Err(_) => return format!("{n} items, then no status within {limit:?}"),
            Ok(Ok(Some(_))) => {
                n += 1;
                on_item(n);
            }
            Ok(Ok(None)) => return format!("{n} items, then the end of the stream (OK)"),
            Ok(Err(s)) => return format!("{n} items, then {}", status(&s)),
        }
    }
}

const SCENARIOS: &[(&str, &str)] = &[
    ("refused-eager", "refused dial: `Endpoint::connect` (eager)"),
    ("refused-lazy", "refused dial: first call on a lazy channel"),
    ("reset-call", "reset mid-call (RST while a unary call waits)"),
    ("reset-stream", "reset mid-stream (RST after 2 items)"),
    ("close-stream", "connection closed mid-stream (FIN: the server process went away)"),
    ("silent-call", "silent connection, no deadline (call waited on for 3 s)"),
    ("silent-keepalive", "silent connection, HTTP/2 keepalive 1 s interval + 1 s timeout"),
    ("deadline-server", "deadline expiry: `grpc-timeout` 100 ms, server enforces (call takes 1 s)"),
    ("deadline-client", "deadline expiry: `Endpoint::timeout` 100 ms on the client (call takes 1 s)"),
    ("shutdown-stream", "server shutdown mid-stream: GOAWAY, then the app ends the stream"),
    ("after-goaway", "new call on the same channel after the server's GOAWAY (a stream keeps the connection open)"),
    ("cancel-stream", "client cancel: stream dropped after 2 items"),
    ("cancel-call", "client cancel: unary call dropped after 100 ms"),
];

async fn scenario<N: Net>(net: N, name: &str) -> String {
    let limit = Duration::from_secs(3);
    let settle = || tokio::time::sleep(Duration::from_millis(300));
    match name {
        "refused-eager" => match net.connect(endpoint(&net.closed_addr())).await {
            Ok(_) => "connected".into(),
            Err(e) => format!("Err: {}", error_chain(&e)),
        },
        "refused-lazy" => {
            let mut client = ProbeClient::new(net.channel(endpoint(&net.closed_addr())));
            call(&mut client, 0, None, limit).await
        }
        "reset-call" | "silent-call" => {
            let s = setup(&net, false).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr)));
            let fault = if name == "reset-call" { Fault::Reset } else { Fault::Silent };
            let switch = s.fault.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                switch.send_replace(fault);
            });
            let seen = call(&mut client, 1000, None, limit).await;
            settle().await;
            with_server(seen, &s.log)
        }
        "silent-keepalive" => {
            let s = setup(&net, false).await;
            let ep = endpoint(&s.addr)
                .http2_keep_alive_interval(Duration::from_secs(1))
                .keep_alive_timeout(Duration::from_secs(1));
            let mut client = ProbeClient::new(net.channel(ep));
            let switch = s.fault.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                switch.send_replace(Fault::Silent);
            });
            let seen = call(&mut client, 10_000, None, Duration::from_secs(5)).await;
            settle().await;
            with_server(seen, &s.log)
        }
        "reset-stream" | "close-stream" => {
            let s = setup(&net, false).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr)));
            let fault = if name == "reset-stream" { Fault::Reset } else { Fault::Close };
            let seen = read_stream(
                &mut client,
                |n| {
                    if n == 2 {
                        s.fault.send_replace(fault);
                    }
                },
                limit,
            )
            .await;
            settle().await;
            with_server(seen, &s.log)
        }
        "deadline-server" => {
            let s = setup(&net, false).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr)));
            let seen = call(&mut client, 1000, Some(Duration::from_millis(100)), limit).await;
            settle().await;
            with_server(seen, &s.log)
        }
        "deadline-client" => {
            let s = setup(&net, false).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr).timeout(Duration::from_millis(100))));
            let seen = call(&mut client, 1000, None, limit).await;
            settle().await;
            with_server(seen, &s.log)
        }
        "shutdown-stream" => {
            let s = setup(&net, true).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr)));
            let seen = read_stream(
                &mut client,
                |n| {
                    if n == 2 {
                        s.shutdown.send_replace(true);
                    }
                },
                limit,
            )
            .await;
            settle().await;
            let after = call(&mut client, 0, None, limit).await;
            with_server(format!("{seen}; the next call: {after}"), &s.log)
        }
        "after-goaway" => {
            let s = setup(&net, false).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr)));
            let mut streaming = client.clone();
            let opened = streaming.stream(StreamRequest { count: 0, interval_ms: 20 }).await;
            let mut stream = match opened {
                Ok(r) => r.into_inner(),
                Err(st) => return format!("open failed: {}", status(&st)),
            };
            let _ = stream.message().await;
            s.shutdown.send_replace(true);
            settle().await;
            let seen = call(&mut client, 0, None, limit).await;
            drop(stream);
            settle().await;
            with_server(seen, &s.log)
        }
        "cancel-stream" => {
            let s = setup(&net, false).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr)));
            let mut stream =
                client.stream(StreamRequest { count: 0, interval_ms: 20 }).await.expect("open").into_inner();
            for _ in 0..2 {
                let _ = stream.message().await;
            }
            drop(stream);
            settle().await;
            let after = call(&mut client, 0, None, limit).await;
            with_server(format!("client: dropped; the next call: {after}"), &s.log)
        }
        "cancel-call" => {
            let s = setup(&net, false).await;
            let mut client = ProbeClient::new(net.channel(endpoint(&s.addr)));
            let _ = tokio::time::timeout(
                Duration::from_millis(100),
                client.call(CallRequest { delay_ms: 1000, tag: "t".into() }),
            )
            .await;
            settle().await;
            let after = call(&mut client, 0, None, limit).await;
            with_server(format!("client: dropped; the next call: {after}"), &s.log)
        }
        other => panic!("unknown scenario {other}"),
    }
}

fn with_server(seen: String, log: &Log) -> String {
    let server = log.lock().unwrap().join("; ");
    if server.is_empty() { seen } else { format!("{seen} [{server}]") }
}

/// Addresses differ between the worlds; the rest must not.
fn normalize(s: &str) -> String {
    let mut out = String::new();
    for word in s.split(' ') {
        if !out.is_empty() {
            out.push(' ');
        }
        let looks_like_addr = word.contains(':')
            && word.rsplit(':').next().is_some_and(|p| {
                let p = p.trim_end_matches([',', ')', '"', ';']);
                !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())
            });
        if looks_like_addr { out.push_str("<addr>") } else { out.push_str(word) }
    }
    out
}

/// Scenarios whose statuses differ, and why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

fn real_table() -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    SCENARIOS.iter().map(|(name, _)| normalize(&rt.block_on(scenario(Real, name)))).collect()
}

/// The simulated column: the same under every seed (each draws its own link latencies).
fn sim_table() -> Vec<String> {
    let got: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let got2 = got.clone();
    let report = Simulation::new("grpc_fault_status").seeds(1..4).run(move |ctx| {
        let got = got2.clone();
        async move {
            let mut seen = Vec::new();
            for (name, _) in SCENARIOS {
                let observed = normalize(&scenario(Simulated { net: ctx.net().clone() }, name).await);
                ctx.record("scenario", name, &observed);
                seen.push(observed);
            }
            got.lock().unwrap().push(seen);
            Ok::<(), Failure>(())
        }
    });
    report.assert_passed();
    let tables = got.lock().unwrap().clone();
    assert!(tables.windows(2).all(|w| w[0] == w[1]), "the simulated statuses depend on the seed: {tables:#?}");
    tables[0].clone()
}

fn render(real: &[String], sim: &[String]) -> String {
    let mut out = String::from("| fault | real loopback | simulated network |\n|---|---|---|\n");
    for (((name, what), r), s) in SCENARIOS.iter().zip(real).zip(sim) {
        let sim_cell = if r == s { "same".to_string() } else { format!("`{s}`") };
        let note =
            KNOWN_DIFFERENCES.iter().find(|(n, _)| n == name).map(|(_, why)| format!(" ({why})")).unwrap_or_default();
        out.push_str(&format!("| {what} | `{r}` | {sim_cell}{note} |\n"));
    }
    out
}

#[test]
fn fault_status_table_matches_between_real_loopback_and_the_simulated_network() {
    let real = real_table();
    let sim = sim_table();
    let mut unexplained = Vec::new();
    for (((name, _), r), s) in SCENARIOS.iter().zip(&real).zip(&sim) {
        let known = KNOWN_DIFFERENCES.iter().any(|(n, _)| n == name);
        if (r != s) && !known {
            unexplained.push(format!("{name}:\n  real: {r}\n  sim:  {s}"));
        }
        if r == s && known {
            unexplained.push(format!("{name} is listed as a known difference but is now the same: remove it"));
        }
    }
    let table = render(&real, &sim);
    eprintln!("{table}");
    assert!(unexplained.is_empty(), "statuses differ:\n{}", unexplained.join("\n"));

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/grpc-fault-status.md");
    let page = std::fs::read_to_string(path).unwrap_or_default();
    let (begin, end) = ("<!-- table:begin -->\n", "<!-- table:end -->");
    let current = page.split(begin).nth(1).and_then(|rest| rest.split(end).next()).unwrap_or_default();
    if current != table {
        if std::env::var_os("GRPCSIM_BLESS").is_some() {
            let (head, tail) = match (page.find(begin), page.find(end)) {
                (Some(b), Some(e)) => (page[..b].to_string(), page[e + end.len()..].to_string()),
                _ => (page.clone(), "\n".to_string()),
            };
            std::fs::write(path, format!("{head}{begin}{table}{end}{tail}")).expect("write the page");
        } else {
            panic!("docs/src/grpc-fault-status.md is stale; regenerate it with GRPCSIM_BLESS=1:\n{table}");
        }
    }
}
