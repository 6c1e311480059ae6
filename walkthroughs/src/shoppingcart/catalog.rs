//! `catalog`: the price of each item. `GET /items/{id}` → `{"id": 3, "price": 1250}` (cents);
//! unknown items are 404.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use sim::node::{BoxError, NodeCtx};

/// The catalog: item id → price in cents.
pub const PRICES: [(u32, u64); 5] = [(1, 300), (2, 150), (3, 1250), (4, 99), (5, 4000)];

/// An item as the catalog returns it.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Item {
    /// The item's id.
    pub id: u32,
    /// Its price in cents.
    pub price: u64,
}

/// The catalog service's entry point.
///
/// # Errors
/// When it cannot listen.
pub async fn main(node: NodeCtx) -> Result<(), BoxError> {
    let listener = node.host().listen("8080")?;
    let app = Router::new().route(
        "/items/{id}",
        get(|Path(id): Path<u32>| async move {
            match PRICES.iter().find(|(i, _)| *i == id) {
                Some(&(id, price)) => Ok(Json(Item { id, price })),
                None => Err(StatusCode::NOT_FOUND),
            }
        }),
    );
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}
