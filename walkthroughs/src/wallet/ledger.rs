//! The ledger: transfers with an idempotency key, balances, and a server-streaming `Watch` of
//! balance changes. Its replicas share one store (the database), so either can serve any call.
//!
//! On SIGTERM the correct ledger keeps its `Watch` streams open until the server has sent GOAWAY
//! on every connection ([`grpcsim::Server::draining`]), then ends them with status OK: a wallet
//! that reopens its watch opens it on a new connection, to the other replica. The planted bug
//! ([`super::Variant::CancelBeforeGoaway`]) ends them at SIGTERM with UNAVAILABLE, racing the
//! GOAWAY: the wallet reopens on the connection it has, to the replica that is shutting down,
//! which refuses it with UNAVAILABLE.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use sim::Ctx;
use sim::node::{BoxError, NodeCtx};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use super::pb::keyset_client::KeysetClient;
use super::pb::ledger_server::{Ledger, LedgerServer};
use super::pb::{BalanceReply, BalanceRequest, Change, LookupRequest, TransferReply, TransferRequest, WatchRequest};
use super::{LEDGER_PORT, Variant};

/// The opening balance of every account.
pub const OPENING_BALANCE: u64 = 1_000;

/// The ledger's database: balances, the transfers applied (by idempotency key), and the log of
/// balance changes the `Watch` streams follow. Shared by both replicas.
#[derive(Debug)]
pub struct LedgerStore {
    state: Mutex<StoreState>,
    version: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct StoreState {
    balances: BTreeMap<String, u64>,
    /// Idempotency key → the version its transfer produced.
    applied: BTreeMap<String, u64>,
    log: Vec<Change>,
}

impl LedgerStore {
    /// A store with `accounts`, each at [`OPENING_BALANCE`].
    pub fn new(accounts: &[String]) -> LedgerStore {
        let balances = accounts.iter().map(|a| (a.clone(), OPENING_BALANCE)).collect();
        LedgerStore {
            state: Mutex::new(StoreState { balances, ..StoreState::default() }),
            version: watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StoreState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies a transfer once per key, atomically: a repeated key answers with the version its
    /// first application produced. Records the effect (`transfer`) for the exactly-once oracle.
    ///
    /// # Errors
    /// FAILED_PRECONDITION for insufficient funds, NOT_FOUND for an unknown account.
    pub fn transfer(&self, ctx: &Ctx, key: &str, from: &str, to: &str, amount: u64) -> Result<u64, Status> {
        let mut st = self.lock();
        if let Some(version) = st.applied.get(key) {
            return Ok(*version);
        }
        let (Some(&have), true) = (st.balances.get(from), st.balances.contains_key(to)) else {
            return Err(Status::not_found("unknown account"));
        };
        if from == to {
            return Err(Status::invalid_argument("a transfer to the same account"));
        }
        if have < amount {
            return Err(Status::failed_precondition(format!("insufficient funds: {from} has {have}")));
        }
        let mut version = st.log.len() as u64;
        for (account, delta) in [(from, -(amount as i128)), (to, amount as i128)] {
            let balance = st.balances.get_mut(account).expect("checked above");
            *balance = (*balance as i128 + delta) as u64;
            let balance = *balance;
            version += 1;
            st.log.push(Change { version, account: account.to_string(), balance });
        }
        st.applied.insert(key.to_string(), version);
        drop(st);
        sim::check::effect(ctx, "transfer", key, amount.to_string());
        self.version.send_replace(version);
        Ok(version)
    }

    /// An account's balance and the store's version.
    pub fn balance(&self, account: &str) -> Option<(u64, u64)> {
        let st = self.lock();
        st.balances.get(account).map(|b| (*b, st.log.len() as u64))
    }

    /// Every balance and the version they are at.
    pub fn snapshot(&self) -> (BTreeMap<String, u64>, u64) {
        let st = self.lock();
        (st.balances.clone(), st.log.len() as u64)
    }

    fn changes_after(&self, after: u64) -> Vec<Change> {
        let st = self.lock();
        st.log.iter().skip(after as usize).cloned().collect()
    }
}

/// The signature of a transfer: HMAC-SHA256 over its fields, hex.
pub fn sign(secret: &[u8], t: &TransferRequest) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(format!("{}|{}|{}|{}", t.key, t.from, t.to, t.amount).as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

struct LedgerService {
    node: NodeCtx,
    store: Arc<LedgerStore>,
    variant: Variant,
    draining: grpcsim::Draining,
    keyset: KeysetClient<tonic::transport::Channel>,
    keys: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl LedgerService {
    async fn secret(&self, key_id: &str) -> Result<Vec<u8>, Status> {
        if let Some(secret) = self.keys.lock().unwrap_or_else(|p| p.into_inner()).get(key_id) {
            return Ok(secret.clone());
        }
        let mut keyset = self.keyset.clone();
        let lookup = keyset.lookup(LookupRequest { key_id: key_id.to_string() });
        let key = match tokio::time::timeout(Duration::from_secs(1), lookup).await {
            Ok(Ok(key)) => key.into_inner(),
            Ok(Err(s)) if s.code() == tonic::Code::NotFound => return Err(Status::unauthenticated("unknown key")),
            Ok(Err(s)) => return Err(Status::unavailable(format!("keyset: {}", s.message()))),
            Err(_) => return Err(Status::unavailable("keyset: timed out")),
        };
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).insert(key.key_id.clone(), key.secret.clone());
        Ok(key.secret)
    }
}

type ChangeStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<Change, Status>> + Send>>;

#[tonic::async_trait]
impl Ledger for LedgerService {
    async fn transfer(&self, request: Request<TransferRequest>) -> Result<Response<TransferReply>, Status> {
        let t = request.into_inner();
        let secret = self.secret(&t.key_id).await?;
        if sign(&secret, &t) != t.signature {
            return Err(Status::unauthenticated("bad signature"));
        }
        let version = self.store.transfer(self.node.sim(), &t.key, &t.from, &t.to, t.amount)?;
        Ok(Response::new(TransferReply { version }))
    }

    async fn balance(&self, request: Request<BalanceRequest>) -> Result<Response<BalanceReply>, Status> {
        let account = request.into_inner().account;
        let (balance, version) = self.store.balance(&account).ok_or_else(|| Status::not_found("unknown account"))?;
        Ok(Response::new(BalanceReply { balance, version }))
    }

    type WatchStream = ChangeStream;

    async fn watch(&self, request: Request<WatchRequest>) -> Result<Response<ChangeStream>, Status> {
        if self.variant == Variant::CancelBeforeGoaway && self.node.terminating() {
            return Err(Status::unavailable("shutting down"));
        }
        let mut after = request.into_inner().after;
        let store = Arc::clone(&self.store);
        let mut version = store.version.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        // When the stream ends: after the GOAWAY (correct), or at SIGTERM (the planted bug).
        let end: Pin<Box<dyn std::future::Future<Output = Option<Status>> + Send>> = match self.variant {
            Variant::CancelBeforeGoaway => {
                let signal = self.node.shutdown_signal();
                Box::pin(async move {
                    signal.await;
                    Some(Status::unavailable("shutting down"))
                })
            }
            _ => {
                let draining = self.draining.clone();
                Box::pin(async move {
                    draining.wait().await;
                    None
                })
            }
        };
        self.node.spawn(async move {
            tokio::pin!(end);
            loop {
                for change in store.changes_after(after) {
                    after = change.version;
                    if tx.send(Ok(change)).await.is_err() {
                        return;
                    }
                }
                tokio::select! {
                    biased;
                    status = &mut end => {
                        if let Some(status) = status {
                            let _ = tx.send(Err(status)).await;
                        }
                        return;
                    }
                    () = tx.closed() => return,
                    changed = version.changed() => if changed.is_err() { return },
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }
}

/// A ledger replica.
///
/// # Errors
/// When it cannot listen.
pub async fn main(node: NodeCtx, store: Arc<LedgerStore>, variant: Variant) -> Result<(), BoxError> {
    let listener = node.host().listen(&LEDGER_PORT.to_string())?;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
    let server = grpcsim::Server::new(&node).health(reporter).drain_bound(Duration::from_secs(5));
    let keyset = grpcsim::client::endpoint(&format!("keyset:{}", super::KEYSET_PORT))?
        .connect_timeout(Duration::from_secs(1))
        .executor(node.executor())
        .connect_with_connector_lazy(sim::net::adapters::Connector::new(node.host().clone()));
    let service = LedgerService {
        node: node.clone(),
        store,
        variant,
        draining: server.draining(),
        keyset: KeysetClient::new(keyset),
        keys: Arc::default(),
    };
    let router = server.builder().add_service(health).add_service(LedgerServer::new(service));
    server.serve(listener, router).await
}
