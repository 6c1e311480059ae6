//! The REST API over HTTP: routing a request to discovery or to the store, faults, and the JSON
//! answers (objects, lists, `Status` errors, watch streams).

mod discovery;
mod query;
mod route;
mod watch;

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::{Value, json};

use crate::fault::{ApiVerb, Fault, FaultAction, RequestInfo};
use crate::patch::Patch;
use crate::resource::ResourceType;
use crate::server::api::ApiServer;
use crate::status::ApiError;
use crate::store::{Deleted, List, Subresource};

pub use query::Query;
use route::{ResourcePath, Route};

/// A response body: a whole JSON document or a watch stream.
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// The largest request body accepted (the real server's limit is 3 MiB per object in etcd).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

fn json_response(code: StatusCode, v: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(v).expect("JSON values serialize");
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(bytes))
        .expect("a valid response")
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut r =
        json_response(StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &e.to_status());
    if let Some(s) = e.retry_after() {
        r.headers_mut().insert(header::RETRY_AFTER, s.into());
    }
    r
}

fn not_found_path() -> ApiError {
    ApiError {
        details: json!({}),
        ..ApiError::new(404, "NotFound", "the server could not find the requested resource")
    }
}

/// The real server's answer for a path under a group it does not serve: no API handler takes
/// it, so the mux's plain-text 404 (`404 page not found`), not a Status.
fn page_not_found() -> Response<Body> {
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full("404 page not found\n"))
        .expect("a valid response")
}

/// Handles one request.
pub async fn handle<B>(api: ApiServer, req: Request<B>) -> Response<Body>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let ua = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("unknown").to_string();
    let route = api.read(|s| route::parse(req.uri().path(), s.registry()));
    let served = |g: &str| g.is_empty() || api.read(|s| s.registry().groups().iter().any(|x| x.name == g));
    let unserved_group = match &route {
        Route::Group(g) | Route::Resources(g, _) => !served(g),
        Route::Resource(path) => !served(&path.group),
        Route::Unknown => {
            let mut segs = req.uri().path().split('/').filter(|s| !s.is_empty());
            segs.next() == Some("apis") && segs.next().is_some_and(|g| !served(g))
        }
        _ => false,
    };
    if unserved_group {
        return page_not_found();
    }
    let doc =
        |v: Option<Value>| v.map_or_else(|| error_response(&not_found_path()), |v| json_response(StatusCode::OK, &v));
    match route {
        Route::Version => json_response(StatusCode::OK, &discovery::version()),
        Route::Health => Response::builder().status(200).body(full("ok")).expect("a valid response"),
        Route::CoreVersions => json_response(StatusCode::OK, &discovery::core_versions()),
        Route::Groups => json_response(StatusCode::OK, &api.read(|s| discovery::groups(s.registry()))),
        Route::Group(g) => doc(api.read(|s| discovery::group(s.registry(), &g))),
        Route::Resources(g, v) => doc(api.read(|s| discovery::resources(s.registry(), &g, &v))),
        Route::Unknown => error_response(&not_found_path()),
        Route::Resource(path) => match resource(&api, req, path, ua).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        },
    }
}

fn verb_of(method: &Method, path: &ResourcePath, query: &Query) -> Result<ApiVerb, ApiError> {
    let named = path.name.is_some();
    Ok(match (method.as_str(), named) {
        // `?watch=1` on one object's path is a plain GET on the real server (measured).
        ("GET", _) if path.watch_prefix || (query.flag("watch") && !named) => ApiVerb::Watch,
        ("GET", true) => ApiVerb::Get,
        ("GET", false) => ApiVerb::List,
        ("POST", false) => ApiVerb::Create,
        ("PUT", true) => ApiVerb::Update,
        ("PATCH", true) => ApiVerb::Patch,
        ("DELETE", true) => ApiVerb::Delete,
        ("DELETE", false) => ApiVerb::DeleteCollection,
        (m, _) => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({m})"
            )));
        }
    })
}

/// The request's type, checked against the path's scope and subresource.
fn resolve(api: &ApiServer, path: &ResourcePath) -> Result<(ResourceType, Subresource), ApiError> {
    let ty = api
        .read(|s| s.registry().find(&path.group, &path.version, &path.plural).cloned())
        .ok_or_else(not_found_path)?;
    if !ty.namespaced && path.namespace.is_some() {
        return Err(not_found_path());
    }
    if ty.namespaced && path.namespace.is_none() && path.name.is_some() {
        return Err(not_found_path());
    }
    let sub = match path.sub.as_deref() {
        None => Subresource::Main,
        Some("status") if ty.status_subresource => Subresource::Status,
        Some(_) => return Err(not_found_path()),
    };
    Ok((ty, sub))
}

async fn body_bytes<B>(body: B) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(ApiError::new(413, "RequestEntityTooLarge", format!("the request body could not be read: {e}"))),
    }
}

fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the body of the request could not be decoded as JSON: {e}")))
}

/// Slow and status faults; `Ok(stale_lag)` for a read under a stale-read fault.
async fn before(api: &ApiServer, info: &RequestInfo) -> Result<Option<u64>, ApiError> {
    if let Some((label, d)) = api.fault_for(info, |a| if let FaultAction::Slow(d) = a { Some(*d) } else { None }) {
        api.fault_hit(&label, info);
        tokio::time::sleep(d).await;
    }
    let status = |a: &FaultAction| match a {
        FaultAction::Status { code, retry_after_s } => Some((*code, *retry_after_s)),
        _ => None,
    };
    if let Some((label, (code, retry))) = api.fault_for(info, status) {
        api.fault_hit(&label, info);
        return Err(Fault::status_error(code, retry));
    }
    if !info.verb.is_read() {
        return Ok(None);
    }
    let stale = |a: &FaultAction| if let FaultAction::StaleReads { lag } = a { Some(*lag) } else { None };
    Ok(api.fault_for(info, stale).map(|(label, lag)| {
        api.fault_hit(&label, info);
        lag
    }))
}

async fn resource<B>(
    api: &ApiServer,
    req: Request<B>,
    path: ResourcePath,
    ua: String,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let query = Query::parse(req.uri().query());
    let verb = verb_of(req.method(), &path, &query)?;
    let (ty, sub) = resolve(api, &path)?;
    let info = RequestInfo {
        verb,
        plural: ty.plural.clone(),
        group: ty.group.clone(),
        namespace: path.namespace.clone(),
        name: path.name.clone(),
        user_agent: ua.clone(),
    };
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or("").trim().to_string());
    // The whole request is read before anything is answered, so the connection stays usable.
    let body = body_bytes(req.into_body()).await?;
    let stale = before(api, &info).await?;
    let ns = path.namespace.as_deref();
    let name = path.name.as_deref().unwrap_or("");
    let manager = query.get("fieldManager");
    let options = match verb {
        ApiVerb::Create => "CreateOptions",
        ApiVerb::Update => "UpdateOptions",
        ApiVerb::Patch => "PatchOptions",
        _ => "DeleteOptions",
    };
    let dry_run = query.dry_run_of(options)?;
    match verb {
        ApiVerb::Get => {
            let obj = match stale {
                Some(lag) => api.read(|s| s.get_at(&ty, ns, name, stale_rv(s, &ty, lag))),
                None => api.read(|s| s.get(&ty, ns, name)),
            }?;
            Ok(json_response(StatusCode::OK, &obj))
        }
        ApiVerb::List => {
            let opts = query.list_options()?;
            let list = match stale {
                Some(lag) => api.read(|s| s.list_at(&ty, ns, &opts, stale_rv(s, &ty, lag))),
                None => api.read(|s| s.list(&ty, ns, &opts)),
            }?;
            Ok(json_response(StatusCode::OK, &list_json(&ty, list)))
        }
        ApiVerb::Watch => watch(api, ty, path.namespace.clone(), info, &query),
        ApiVerb::Create => {
            let obj = parse_json(&body)?;
            let out = api.write(&ua, manager, dry_run, |s, w| s.create(&ty, ns, obj, w))?;
            Ok(json_response(StatusCode::CREATED, &out))
        }
        ApiVerb::Update => {
            let obj = parse_json(&body)?;
            let out = api.write(&ua, manager, dry_run, |s, w| s.update(&ty, ns, name, obj, sub, w))?;
            Ok(json_response(StatusCode::OK, &out))
        }
        ApiVerb::Patch => {
            let apply = crate::patch::decode::is_apply(content_type.as_deref());
            crate::patch::decode::check_type(content_type.as_deref(), ty.crd.is_some())?;
            crate::patch::validate_patch_options(apply, manager, query.0.contains_key("force"))?;
            let patch = patch_of(&ty, content_type.as_deref(), &body, &query)?;
            let existed = api.read(|s| s.get(&ty, ns, name).is_ok());
            let out = api.write(&ua, manager, dry_run, |s, w| s.patch(&ty, ns, name, &patch, sub, w))?;
            let code = if existed { StatusCode::OK } else { StatusCode::CREATED };
            Ok(json_response(code, &out))
        }
        ApiVerb::Delete => {
            let opts = query.delete_options(&body)?;
            let out = api.write(&ua, manager, dry_run, |s, w| s.delete(&ty, ns, name, &opts, w))?;
            Ok(match out {
                Deleted::Marked(obj) => json_response(StatusCode::OK, &obj),
                Deleted::Gone(obj) => json_response(StatusCode::OK, &success(&ty, name, &obj)),
            })
        }
        ApiVerb::DeleteCollection if !ty.deletecollection() => {
            let mut e = ApiError::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            );
            e.details = serde_json::json!({});
            Err(e)
        }
        ApiVerb::DeleteCollection => {
            let list = query.list_options()?;
            let opts = query.delete_options(&body)?;
            let out = api.write(&ua, manager, dry_run, |s, w| s.delete_collection(&ty, ns, &list, &opts, w))?;
            let items: Vec<Value> = out
                .into_iter()
                .map(|d| match d {
                    Deleted::Marked(o) | Deleted::Gone(o) => o,
                })
                .collect();
            let rv = api.rv();
            Ok(json_response(
                StatusCode::OK,
                &list_json(&ty, List { items, resource_version: rv, continue_token: None, remaining: None }),
            ))
        }
    }
}

/// The revision a lagging cache answers from: `lag` behind, never below the compaction floor.
fn stale_rv(s: &crate::store::Store, ty: &ResourceType, lag: u64) -> u64 {
    s.rv().saturating_sub(lag).max(s.floor(ty))
}

/// The Status a delete that removed the object answers (as the real server's default).
fn success(ty: &ResourceType, name: &str, obj: &Value) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "group": ty.group, "kind": ty.plural, "uid": obj["metadata"]["uid"]},
    })
}

fn list_json(ty: &ResourceType, list: List) -> Value {
    let mut metadata = json!({"resourceVersion": list.resource_version.to_string()});
    if let Some(c) = list.continue_token {
        metadata["continue"] = json!(c);
    }
    if let Some(r) = list.remaining {
        metadata["remainingItemCount"] = json!(r);
    }
    json!({"kind": ty.list_kind(), "apiVersion": ty.api_version(), "metadata": metadata, "items": list.items})
}

fn patch_of(ty: &ResourceType, content_type: Option<&str>, body: &[u8], query: &Query) -> Result<Patch, ApiError> {
    crate::patch::decode::decode(content_type, body, ty, query.get("fieldManager"), query.flag("force"))
}

fn watch(
    api: &ApiServer,
    ty: ResourceType,
    ns: Option<String>,
    info: RequestInfo,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    let opts = query.watch_options();
    let timeout = query
        .int("timeoutSeconds")?
        .filter(|t| *t > 0)
        .map_or(watch::DEFAULT_TIMEOUT, |t| Duration::from_secs(t as u64));
    let start = api.read(|s| s.watch_start(&ty, ns.as_deref(), &opts));
    let body = match start {
        Ok(start) => {
            let stream = watch::WatchStream::new(api.clone(), ty, ns, info, start, query, timeout);
            StreamBody::new(stream.into_stream()).boxed_unsync()
        }
        // A too-old resourceVersion is an ERROR event in a 200 stream, as the real server's
        // watch cache answers it; other errors are plain error responses.
        Err(e) if e.code == 410 => full(watch::gone_event(&e)),
        Err(e) => return Err(e),
    };
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("a valid response"))
}
