//! `db`: a small database service on HTTP (port [`DB_PORT`]). The operator sets each database's
//! password; clients log in with the password they read from the credentials Secret. Its state
//! survives restarts (it is the database's disk).
//!
//! - `PUT /users/{db}` with `{"password": "…"}` → 204 (the operator sets the password);
//! - `DELETE /users/{db}` → 204;
//! - `POST /login/{db}` with `{"password": "…"}` → 200 when it is the current password, 401 when
//!   not, 404 for an unknown database.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{post, put};
use axum::{Json, Router};
use sim::node::{BoxError, NodeCtx};

/// The database service's port.
pub const DB_PORT: u16 = 5432;

/// A password in a request body.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Password {
    /// The password.
    pub password: String,
}

/// The service's disk: database → its current password.
#[derive(Default, Debug)]
pub struct Users {
    map: Mutex<BTreeMap<String, String>>,
}

impl Users {
    /// The current password of `db`.
    pub fn password(&self, db: &str) -> Option<String> {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).get(db).cloned()
    }
}

async fn set(State(users): State<Arc<Users>>, Path(db): Path<String>, Json(p): Json<Password>) -> StatusCode {
    users.map.lock().unwrap_or_else(|p| p.into_inner()).insert(db, p.password);
    StatusCode::NO_CONTENT
}

async fn drop_user(State(users): State<Arc<Users>>, Path(db): Path<String>) -> StatusCode {
    users.map.lock().unwrap_or_else(|p| p.into_inner()).remove(&db);
    StatusCode::NO_CONTENT
}

async fn login(State(users): State<Arc<Users>>, Path(db): Path<String>, Json(p): Json<Password>) -> StatusCode {
    match users.password(&db) {
        Some(current) if current == p.password => StatusCode::OK,
        Some(_) => StatusCode::UNAUTHORIZED,
        None => StatusCode::NOT_FOUND,
    }
}

/// The database service's entry point.
///
/// # Errors
/// When it cannot listen.
pub async fn main(node: NodeCtx, users: Arc<Users>) -> Result<(), BoxError> {
    let listener = node.host().listen(&DB_PORT.to_string())?;
    let app = Router::new()
        .route("/users/{db}", put(set).delete(drop_user))
        .route("/login/{db}", post(login))
        .with_state(users);
    node.set_ready();
    sim::node::serve(&node, listener, app).await
}

/// The operator's and the users' client of the database service.
#[derive(Clone)]
pub struct DbClient {
    client: hyper_util::client::legacy::Client<sim::net::adapters::Connector, http_body_util::Full<bytes::Bytes>>,
}

/// How long a call to the database service may take.
pub const DB_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl DbClient {
    /// A client dialing from `node`'s host.
    pub fn new(node: &NodeCtx) -> DbClient {
        DbClient { client: node.http_client() }
    }

    /// A client dialing from a harness host (the users).
    pub fn from_host(host: &sim::net::Host) -> DbClient {
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(sim::net::adapters::Connector::new(host.clone()));
        DbClient { client }
    }

    async fn call(&self, method: http::Method, path: &str, body: Option<&Password>) -> Result<StatusCode, String> {
        let bytes = body.map(|b| serde_json::to_vec(b).expect("a password serializes")).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(format!("http://db:{DB_PORT}{path}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(bytes)))
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(DB_TIMEOUT, self.client.request(request)).await {
            Ok(Ok(response)) => Ok(response.status()),
            Ok(Err(e)) => Err(format!("db: {e}")),
            Err(_) => Err("db: no answer within the timeout".into()),
        }
    }

    /// Sets `db`'s password.
    ///
    /// # Errors
    /// A transport error, a timeout, or a status other than 204.
    pub async fn set_password(&self, db: &str, password: &str) -> Result<(), String> {
        let body = Password { password: password.to_string() };
        match self.call(http::Method::PUT, &format!("/users/{db}"), Some(&body)).await? {
            StatusCode::NO_CONTENT => Ok(()),
            other => Err(format!("db: set password answered {other}")),
        }
    }

    /// Drops `db`'s user.
    ///
    /// # Errors
    /// A transport error, a timeout, or a status other than 204.
    pub async fn drop_user(&self, db: &str) -> Result<(), String> {
        match self.call(http::Method::DELETE, &format!("/users/{db}"), None).await? {
            StatusCode::NO_CONTENT => Ok(()),
            other => Err(format!("db: drop user answered {other}")),
        }
    }

    /// Logs in to `db` with `password`: `Ok(true)` when accepted, `Ok(false)` when refused (401 or
    /// 404).
    ///
    /// # Errors
    /// A transport error or a timeout.
    pub async fn login(&self, db: &str, password: &str) -> Result<bool, String> {
        let body = Password { password: password.to_string() };
        Ok(self.call(http::Method::POST, &format!("/login/{db}"), Some(&body)).await? == StatusCode::OK)
    }
}
