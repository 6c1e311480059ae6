//! `cart`: carts and checkout, with tokens verified against identity's key set.
//!
//! - `POST /cart/{user}/items` `{"item": 3, "qty": 2}` — the price comes from `catalog`;
//! - `DELETE /cart/{user}/items/{item}`;
//! - `GET /cart/{user}` → `{"items": {"3": 2}, "total": 2500}`;
//! - `POST /cart/{user}/checkout` with `Idempotency-Key` → `{"order": "…", "total": 2500}`: charges
//!   the cart's total once per key (a retry with the same key gets the same order) and empties it;
//!   an empty cart is 409.
//!
//! Every request needs `Authorization: Bearer <token>` for the same user; the cart verifies the
//! token's HMAC with identity's key set, fetched over HTTP and refetched when a token names a key
//! it does not know (after a rotation).
//!
//! The store ([`CartStore`]) is behind a trait, with an in-memory model ([`MemoryStore`]) shared
//! by every replica and surviving restarts, whose operations take a seeded time (sometimes
//! seconds: a slow database).
//!
//! Planted bugs ([`super::Variant`]):
//! - *non-atomic idempotency*: checkout looks the key up, then charges and inserts the order in a
//!   later store call — a retry arriving in between charges twice;
//! - *no drain*: on SIGTERM the service returns at once instead of awaiting hyper's graceful
//!   shutdown, dropping requests in flight.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use sim::node::{BoxError, NodeCtx};
use sim::{Ctx, Source};

use super::Variant;
use super::catalog::Item;
use super::identity::{KeySet, sign};

/// A cart: item → quantity, and the prices it was added at.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cart {
    /// Quantities by item.
    pub items: BTreeMap<u32, u64>,
    /// The total in cents.
    pub total: u64,
}

/// An order made by a checkout.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Order {
    /// The order's id (the idempotency key's).
    pub order: String,
    /// What was charged, in cents.
    pub total: u64,
}

/// The cart's database.
pub trait CartStore: Send + Sync + 'static {
    /// A user's cart.
    fn cart(&self, user: &str) -> impl Future<Output = Cart> + Send;
    /// Adds items at a price.
    fn add(&self, user: &str, item: u32, qty: u64, price: u64) -> impl Future<Output = Cart> + Send;
    /// Removes an item.
    fn remove(&self, user: &str, item: u32) -> impl Future<Output = Cart> + Send;
    /// The order made under an idempotency key, if any.
    fn order(&self, key: &str) -> impl Future<Output = Option<Order>> + Send;
    /// Records an order under a key and empties the user's cart.
    fn insert_order(&self, key: &str, user: &str, order: Order) -> impl Future<Output = ()> + Send;
    /// Atomically: the order under `key`, or else `charge` the cart's total, record the order and
    /// empty the cart. `None` when there is no order under `key` and the cart is empty.
    fn checkout_once(
        &self,
        key: &str,
        user: &str,
        charge: &(dyn Fn(u64) + Sync),
    ) -> impl Future<Output = Option<Order>> + Send;
}

#[derive(Default)]
struct Tables {
    carts: BTreeMap<String, Cart>,
    orders: BTreeMap<String, Order>,
}

/// The in-memory model of the store: one database for every replica, surviving restarts. Each
/// operation first takes a seeded latency (1–5 ms; with probability `slow` 0.5–3 s).
pub struct MemoryStore {
    tables: Mutex<Tables>,
    latency: Mutex<Source>,
    slow: f64,
}

impl MemoryStore {
    /// A store drawing latencies from `source`, slow with probability `slow`.
    pub fn new(source: Source, slow: f64) -> MemoryStore {
        MemoryStore { tables: Mutex::new(Tables::default()), latency: Mutex::new(source), slow }
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn delay(&self) {
        let d = {
            let mut s = self.latency.lock().unwrap_or_else(|p| p.into_inner());
            if s.bool(self.slow) {
                s.duration(Duration::from_millis(500)..=Duration::from_secs(3))
            } else {
                s.duration(Duration::from_millis(1)..=Duration::from_millis(5))
            }
        };
        tokio::time::sleep(d).await;
    }
}

impl CartStore for MemoryStore {
    async fn cart(&self, user: &str) -> Cart {
        self.delay().await;
        self.tables().carts.get(user).cloned().unwrap_or_default()
    }

    async fn add(&self, user: &str, item: u32, qty: u64, price: u64) -> Cart {
        self.delay().await;
        let mut t = self.tables();
        let cart = t.carts.entry(user.to_string()).or_default();
        *cart.items.entry(item).or_default() += qty;
        cart.total += qty * price;
        cart.clone()
    }

    async fn remove(&self, user: &str, item: u32) -> Cart {
        self.delay().await;
        let mut t = self.tables();
        let cart = t.carts.entry(user.to_string()).or_default();
        if let Some(qty) = cart.items.remove(&item) {
            let price = super::catalog::PRICES.iter().find(|(i, _)| *i == item).map_or(0, |(_, p)| *p);
            cart.total = cart.total.saturating_sub(qty * price);
        }
        cart.clone()
    }

    async fn order(&self, key: &str) -> Option<Order> {
        self.delay().await;
        self.tables().orders.get(key).cloned()
    }

    async fn insert_order(&self, key: &str, user: &str, order: Order) {
        self.delay().await;
        let mut t = self.tables();
        t.orders.insert(key.to_string(), order);
        t.carts.remove(user);
    }

    async fn checkout_once(&self, key: &str, user: &str, charge: &(dyn Fn(u64) + Sync)) -> Option<Order> {
        self.delay().await;
        let mut t = self.tables();
        if let Some(order) = t.orders.get(key) {
            return Some(order.clone());
        }
        let total = t.carts.get(user).map_or(0, |c| c.total);
        if total == 0 {
            return None;
        }
        t.carts.remove(user);
        charge(total);
        let order = Order { order: key.to_string(), total };
        t.orders.insert(key.to_string(), order.clone());
        Some(order)
    }
}

/// Identity's keys, cached.
#[derive(Default)]
struct KeyCache {
    keys: Mutex<BTreeMap<u32, Vec<u8>>>,
}

struct App<S> {
    node: NodeCtx,
    store: Arc<S>,
    keys: KeyCache,
    variant: Variant,
    client: hyper_util::client::legacy::Client<sim::net::adapters::Connector, Empty<Bytes>>,
}

type Shared<S> = Arc<App<S>>;

async fn fetch_json<T: serde::de::DeserializeOwned, S>(app: &App<S>, url: &str) -> Result<T, StatusCode> {
    let uri: http::Uri = url.parse().map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    let call = app.client.get(uri);
    let response = tokio::time::timeout(Duration::from_secs(1), call)
        .await
        .map_err(|_| StatusCode::GATEWAY_TIMEOUT)?
        .map_err(|_| StatusCode::BAD_GATEWAY)?;
    if !response.status().is_success() {
        return Err(if response.status() == StatusCode::NOT_FOUND {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::BAD_GATEWAY
        });
    }
    let body = response.into_body().collect().await.map_err(|_| StatusCode::BAD_GATEWAY)?.to_bytes();
    serde_json::from_slice(&body).map_err(|_| StatusCode::BAD_GATEWAY)
}

/// Checks `Authorization: Bearer {user}.{kid}.{sig}` for `user`.
async fn authorize<S>(app: &App<S>, headers: &HeaderMap, user: &str) -> Result<(), StatusCode> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(StatusCode::UNAUTHORIZED)?;
    let mut parts = token.rsplitn(2, '.');
    let signature = parts.next().ok_or(StatusCode::UNAUTHORIZED)?;
    let claim = parts.next().ok_or(StatusCode::UNAUTHORIZED)?;
    let (who, kid) = claim.rsplit_once('.').ok_or(StatusCode::UNAUTHORIZED)?;
    let kid: u32 = kid.parse().map_err(|_| StatusCode::UNAUTHORIZED)?;
    if who != user {
        return Err(StatusCode::FORBIDDEN);
    }
    let known = app.keys.keys.lock().unwrap_or_else(|p| p.into_inner()).get(&kid).cloned();
    let secret = match known {
        Some(secret) => secret,
        None => {
            // A key we have not seen: identity rotated. Refetch the key set.
            let set: KeySet =
                fetch_json(app, "http://identity:8080/keys").await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
            let mut keys = app.keys.keys.lock().unwrap_or_else(|p| p.into_inner());
            for k in set.keys {
                if let Ok(bytes) = hex::decode(&k.secret) {
                    keys.insert(k.kid, bytes);
                }
            }
            keys.get(&kid).cloned().ok_or(StatusCode::UNAUTHORIZED)?
        }
    };
    if sign(&secret, claim) == signature { Ok(()) } else { Err(StatusCode::UNAUTHORIZED) }
}

/// The body of `POST /cart/{user}/items`.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct AddItem {
    /// The item.
    pub item: u32,
    /// How many.
    pub qty: u64,
}

async fn add_item<S: CartStore>(
    State(app): State<Shared<S>>,
    Path(user): Path<String>,
    headers: HeaderMap,
    Json(body): Json<AddItem>,
) -> Result<Json<Cart>, StatusCode> {
    authorize(&app, &headers, &user).await?;
    let item: Item = fetch_json(&app, &format!("http://catalog:8080/items/{}", body.item)).await?;
    Ok(Json(app.store.add(&user, item.id, body.qty, item.price).await))
}

async fn remove_item<S: CartStore>(
    State(app): State<Shared<S>>,
    Path((user, item)): Path<(String, u32)>,
    headers: HeaderMap,
) -> Result<Json<Cart>, StatusCode> {
    authorize(&app, &headers, &user).await?;
    Ok(Json(app.store.remove(&user, item).await))
}

async fn get_cart<S: CartStore>(
    State(app): State<Shared<S>>,
    Path(user): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Cart>, StatusCode> {
    authorize(&app, &headers, &user).await?;
    Ok(Json(app.store.cart(&user).await))
}

async fn checkout<S: CartStore>(
    State(app): State<Shared<S>>,
    Path(user): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Order>, StatusCode> {
    authorize(&app, &headers, &user).await?;
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).ok_or(StatusCode::BAD_REQUEST)?.to_string();
    let ctx: &Ctx = app.node.sim();
    if app.variant == Variant::NonAtomicIdempotency {
        // The planted bug: the check and the insert are separate store calls, with an await
        // between them.
        if let Some(order) = app.store.order(&key).await {
            return Ok(Json(order));
        }
        let total = app.store.cart(&user).await.total;
        if total == 0 {
            return Err(StatusCode::CONFLICT);
        }
        sim::check::effect(ctx, "charge", &key, total.to_string());
        let order = Order { order: key.clone(), total };
        app.store.insert_order(&key, &user, order.clone()).await;
        return Ok(Json(order));
    }
    match app
        .store
        .checkout_once(&key, &user, &|total| sim::check::effect(ctx, "charge", &key, total.to_string()))
        .await
    {
        Some(order) => Ok(Json(order)),
        None => Err(StatusCode::CONFLICT),
    }
}

/// The cart service's entry point.
///
/// # Errors
/// When it cannot listen.
pub async fn main<S: CartStore>(node: NodeCtx, store: Arc<S>, variant: Variant) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let client = node.http_client::<Empty<Bytes>>();
    let app = Arc::new(App { node: node.clone(), store, keys: KeyCache::default(), variant, client });
    let router = Router::new()
        .route("/cart/{user}", get(get_cart::<S>))
        .route("/cart/{user}/items", post(add_item::<S>))
        .route("/cart/{user}/items/{item}", delete(remove_item::<S>))
        .route("/cart/{user}/checkout", post(checkout::<S>))
        .with_state(app);
    node.set_ready();
    let serving = sim::node::serve(&node, listener, router);
    if variant == Variant::NoDrain {
        // The planted bug: on SIGTERM, return without awaiting the graceful shutdown.
        return tokio::select! {
            result = serving => result,
            () = node.shutdown_signal() => Ok(()),
        };
    }
    serving.await
}
