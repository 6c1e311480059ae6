//! `identity`: issues signed tokens from a key set it rotates, and publishes the key set.
//!
//! - `POST /token/{user}` → `{user}.{kid}.{hmac}`: HMAC-SHA256 with key `kid` over `{user}.{kid}`;
//! - `GET /keys` → every key still valid (the current and the previous one), hex-encoded;
//! - `POST /rotate` → a new current key; the oldest key is dropped.
//!
//! Keys live in a [`KeyStore`] that survives restarts (the service's database). New keys come from
//! `rand`, which the simulation answers from the seed.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use hmac::{KeyInit, Mac};
use sim::node::{BoxError, NodeCtx};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The key set: (kid, secret), oldest first; the last is current. Survives restarts.
#[derive(Debug, Default)]
pub struct KeyStore {
    keys: Mutex<Vec<(u32, [u8; 32])>>,
}

impl KeyStore {
    fn current(&self) -> (u32, [u8; 32]) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if keys.is_empty() {
            keys.push((1, rand::random()));
        }
        *keys.last().expect("not empty")
    }

    fn rotate(&self) -> u32 {
        let _ = self.current();
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let next = keys.last().map_or(1, |(kid, _)| kid + 1);
        keys.push((next, rand::random()));
        while keys.len() > 2 {
            keys.remove(0);
        }
        next
    }

    fn all(&self) -> Vec<(u32, [u8; 32])> {
        let _ = self.current();
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The signature of a token's claim under a key.
pub fn sign(secret: &[u8], claim: &str) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(claim.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The key set as published: `{"keys": [{"kid": 1, "secret": "…"}]}`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct KeySet {
    /// The valid keys.
    pub keys: Vec<PublishedKey>,
}

/// One published key.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PublishedKey {
    /// Its id.
    pub kid: u32,
    /// Its secret, hex.
    pub secret: String,
}

/// The identity service's entry point.
///
/// # Errors
/// When it cannot listen.
pub async fn main(node: NodeCtx, store: Arc<KeyStore>) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let app = Router::new()
        .route(
            "/token/{user}",
            post(|State(store): State<Arc<KeyStore>>, Path(user): Path<String>| async move {
                let (kid, secret) = store.current();
                let claim = format!("{user}.{kid}");
                format!("{claim}.{}", sign(&secret, &claim))
            }),
        )
        .route(
            "/keys",
            get(|State(store): State<Arc<KeyStore>>| async move {
                Json(KeySet {
                    keys: store
                        .all()
                        .into_iter()
                        .map(|(kid, s)| PublishedKey { kid, secret: hex::encode(s) })
                        .collect(),
                })
            }),
        )
        .route("/rotate", post(|State(store): State<Arc<KeyStore>>| async move { store.rotate().to_string() }))
        .with_state(store);
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}
