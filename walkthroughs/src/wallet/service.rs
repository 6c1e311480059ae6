//! The wallet: what users call. It forwards transfers to the ledger (signed with the keyset's
//! key, retried with the same idempotency key), and answers balances from its own view, kept by
//! one `Watch` stream it reopens whenever it ends.
//!
//! Its ledger channel goes to the ClusterIP name `ledger` (each new connection lands on a
//! replica), with HTTP/2 keepalive so that a silent connection ends the watch, and a call log
//! ([`grpcsim::calls::CallLog`]) for the one-status oracle. Every ledger call goes through the
//! breaker ([`super::breaker`]), checked by [`grpcsim::breaker::Checked`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grpcsim::breaker::{Breaker, Checked, Outcome};
use grpcsim::calls::{CallLog, Logged};
use sim::node::{BoxError, NodeCtx};
use tokio::sync::watch;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};

use super::breaker::{SPEC, WalletBreaker};
use super::pb::keyset_client::KeysetClient;
use super::pb::ledger_client::LedgerClient;
use super::pb::wallet_server::{Wallet, WalletServer};
use super::pb::{BalanceReply, BalanceRequest, CurrentRequest, Key, TransferReply, TransferRequest, WatchRequest};
use super::{KEYSET_PORT, LEDGER_PORT, Variant, WALLET_PORT};

/// Attempts per transfer to the ledger.
pub const LEDGER_ATTEMPTS: u32 = 3;
/// The first backoff between them (doubling).
pub const LEDGER_BACKOFF: Duration = Duration::from_millis(100);
/// The deadline of one unary ledger call.
pub const LEDGER_DEADLINE: Duration = Duration::from_secs(1);
/// HTTP/2 keepalive interval and timeout on the ledger channel.
pub const KEEPALIVE: Duration = Duration::from_secs(1);
/// The longest backoff between watch reopen attempts.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_millis(400);
/// How long a balance read waits for the watch to be open.
pub const VIEW_WAIT: Duration = Duration::from_millis(300);

/// The wallet's view of the ledger: balances as of `version`, and whether its watch is open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Balances by account.
    pub balances: BTreeMap<String, u64>,
    /// The version of the last change applied.
    pub version: u64,
    /// Whether the watch stream is open.
    pub live: bool,
    /// How the last watch attempt or stream ended.
    pub last_error: Option<String>,
}

/// The views of the wallet's incarnations, for the convergence oracle (the current one last).
#[derive(Default)]
pub struct Views {
    current: Mutex<Option<watch::Receiver<View>>>,
}

impl Views {
    /// The current incarnation's view, if one started.
    pub fn current(&self) -> Option<View> {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|rx| rx.borrow().clone())
    }
}

type Ledger = LedgerClient<Logged<Channel>>;

#[derive(Clone)]
struct WalletService {
    node: NodeCtx,
    ledger: Ledger,
    keyset: KeysetClient<Channel>,
    key: Arc<tokio::sync::Mutex<Option<Key>>>,
    breaker: Arc<Mutex<Checked<WalletBreaker>>>,
    view: watch::Receiver<View>,
}

impl WalletService {
    fn allow(&self) -> bool {
        let now = self.node.sim().elapsed();
        self.breaker.lock().unwrap_or_else(|p| p.into_inner()).allow(now)
    }

    fn feed(&self, outcome: Outcome) {
        let now = self.node.sim().elapsed();
        self.breaker.lock().unwrap_or_else(|p| p.into_inner()).record(&outcome, now);
    }

    async fn key(&self) -> Result<Key, Status> {
        let mut key = self.key.lock().await;
        if let Some(k) = key.as_ref() {
            return Ok(k.clone());
        }
        let mut keyset = self.keyset.clone();
        match tokio::time::timeout(LEDGER_DEADLINE, keyset.current(CurrentRequest {})).await {
            Ok(Ok(k)) => {
                *key = Some(k.get_ref().clone());
                Ok(k.into_inner())
            }
            Ok(Err(s)) => Err(Status::unavailable(format!("keyset: {}", s.message()))),
            Err(_) => Err(Status::unavailable("keyset: timed out")),
        }
    }
}

/// Whether a ledger call that ended with `code` may be tried again (the idempotency key makes a
/// repeat safe).
fn retryable(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded)
}

#[tonic::async_trait]
impl Wallet for WalletService {
    async fn transfer(&self, request: Request<TransferRequest>) -> Result<Response<TransferReply>, Status> {
        let mut t = request.into_inner();
        let key = self.key().await?;
        t.key_id = key.key_id.clone();
        t.signature = super::ledger::sign(&key.secret, &t);
        let mut last = Status::unavailable("no attempt");
        for attempt in 0..LEDGER_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(LEDGER_BACKOFF * 2u32.pow(attempt - 1)).await;
            }
            if !self.allow() {
                return Err(Status::unavailable("circuit open: the ledger is failing"));
            }
            let mut ledger = self.ledger.clone();
            let status = match tokio::time::timeout(LEDGER_DEADLINE, ledger.transfer(t.clone())).await {
                Ok(Ok(reply)) => {
                    self.feed(Outcome::call(Code::Ok));
                    return Ok(reply);
                }
                Ok(Err(s)) => s,
                Err(_) => Status::deadline_exceeded("ledger: timed out"),
            };
            self.feed(Outcome::call_status(&status));
            if !retryable(status.code()) {
                return Err(status);
            }
            last = status;
        }
        Err(last)
    }

    async fn balance(&self, request: Request<BalanceRequest>) -> Result<Response<BalanceReply>, Status> {
        let account = request.into_inner().account;
        let mut view = self.view.clone();
        let live = tokio::time::timeout(VIEW_WAIT, view.wait_for(|v| v.live)).await.map(|_| ());
        let v = view.borrow().clone();
        if live.is_err() {
            return Err(Status::unavailable(format!(
                "the balance view is not live: {}",
                v.last_error.as_deref().unwrap_or("the watch is not open")
            )));
        }
        let balance = v.balances.get(&account).copied().ok_or_else(|| Status::not_found("unknown account"))?;
        Ok(Response::new(BalanceReply { balance, version: v.version }))
    }
}

/// Keeps one `Watch` open, reopening it whenever it ends (at once after a clean end, with a
/// growing backoff after a failure), and applies each change to the view.
async fn keep_watching(service: WalletService, view: watch::Sender<View>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if !service.allow() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let after = view.borrow().version;
        let mut ledger = service.ledger.clone();
        let opened = tokio::time::timeout(LEDGER_DEADLINE, ledger.watch(WatchRequest { after })).await;
        let mut stream = match opened {
            Ok(Ok(stream)) => stream.into_inner(),
            Ok(Err(status)) => {
                service.feed(Outcome::call_status(&status));
                view.send_modify(|v| v.last_error = Some(format!("{:?}: {}", status.code(), status.message())));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(WATCH_BACKOFF_MAX);
                continue;
            }
            Err(_) => {
                service.feed(Outcome::call(Code::DeadlineExceeded));
                view.send_modify(|v| v.last_error = Some("watch: timed out opening".into()));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(WATCH_BACKOFF_MAX);
                continue;
            }
        };
        view.send_modify(|v| v.live = true);
        backoff = Duration::from_millis(50);
        let ended = loop {
            match stream.message().await {
                Ok(Some(change)) => view.send_modify(|v| {
                    if change.version > v.version {
                        v.version = change.version;
                        v.balances.insert(change.account, change.balance);
                    }
                }),
                Ok(None) => break None,
                Err(status) => {
                    view.send_modify(|v| v.last_error = Some(format!("{:?}: {}", status.code(), status.message())));
                    break Some(status);
                }
            }
        };
        view.send_modify(|v| v.live = false);
        service.feed(Outcome::stream_end_status(ended.as_ref()));
        if ended.is_some() {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(WATCH_BACKOFF_MAX);
        }
    }
}

/// The wallet node.
///
/// # Errors
/// When it cannot listen.
pub async fn main(node: NodeCtx, accounts: Vec<String>, views: Arc<Views>, variant: Variant) -> Result<(), BoxError> {
    let listener = node.host().listen(&WALLET_PORT.to_string())?;
    let connector = || sim::net::adapters::Connector::new(node.host().clone());
    let ledger = grpcsim::client::endpoint(&format!("ledger:{LEDGER_PORT}"))?
        .connect_timeout(Duration::from_secs(1))
        .http2_keep_alive_interval(KEEPALIVE)
        .keep_alive_timeout(KEEPALIVE)
        .executor(node.executor())
        .connect_with_connector_lazy(connector());
    let ledger = LedgerClient::new(tower::Layer::layer(&CallLog::layer(node.sim()), ledger));
    let keyset = grpcsim::client::endpoint(&format!("keyset:{KEYSET_PORT}"))?
        .connect_timeout(Duration::from_secs(1))
        .executor(node.executor())
        .connect_with_connector_lazy(connector());
    let breaker = Checked::new(
        node.sim(),
        &format!("{}→ledger", node.name()),
        SPEC,
        WalletBreaker::new(variant == Variant::BreakerCountsRolloutEnds),
    );
    let initial = View {
        balances: accounts.iter().map(|a| (a.clone(), super::ledger::OPENING_BALANCE)).collect(),
        ..View::default()
    };
    let (view_tx, view_rx) = watch::channel(initial);
    *views.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(view_rx.clone());
    let service = WalletService {
        node: node.clone(),
        ledger,
        keyset: KeysetClient::new(keyset),
        key: Arc::default(),
        breaker: Arc::new(Mutex::new(breaker)),
        view: view_rx,
    };
    node.spawn(keep_watching(service.clone(), view_tx));
    let server = grpcsim::Server::new(&node).drain_bound(Duration::from_secs(3));
    let router = server.builder().add_service(WalletServer::new(service));
    server.serve(listener, router).await
}
