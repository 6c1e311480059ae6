//! Faults: what the API server does wrong on purpose, keyed on identity (verb, resource,
//! namespace, name, client), installable now or at fake times with [`sim::fault`]'s shapes, each
//! install, hit and release recorded in the run's history (`kube.fault`).
//!
//! A [`Fault`] selects requests — never by how many came before — and says what happens to them
//! ([`FaultAction`]). Faults are consulted in install order; the first whose action applies to the
//! request wins. Watch faults ([`FaultAction::WatchGone`], [`FaultAction::WatchCut`],
//! [`FaultAction::DelayWatch`]) act on watches already open when they are installed as well as on
//! new ones. [`Restart`] is a single action: every connection (so every watch and every request in
//! flight) ends at once, and the server listens again after its downtime; storage is kept, as etcd
//! persists it.
//!
//! A fault is a [`sim::fault::Fault`] on the [`crate::server::ApiServer`]:
//! `sim::fault::install(&api, fault)` returns a guard (dropping it removes the fault) and
//! `sim::fault::at(ctx.driver(), &api, t, fault)` schedules it at fake time `t`.
//!
//! ```
//! use std::time::Duration;
//! use kubesim::fault::{ApiVerb, Fault};
//!
//! // 429 with Retry-After: 1 to the operator's lists of Secrets.
//! let f = Fault::throttle(1).verb(ApiVerb::List).resource("secrets").user_agent("operator-0");
//! assert_eq!(f.to_string(), "list secrets by operator-0: 429 Retry-After 1 s");
//! // A lagging cache: gets and lists of Secrets answered 5 revisions behind.
//! let _stale = Fault::stale_reads(5).resource("secrets");
//! let _slow = Fault::slow(Duration::from_secs(2)).verb(ApiVerb::Patch);
//! ```

use std::time::Duration;

use crate::status::ApiError;

/// The verb of a request, as the API server's authorizer names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ApiVerb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch=true` (or under `/watch/`).
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl ApiVerb {
    /// Lower-case name: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`.
    pub fn name(self) -> &'static str {
        match self {
            ApiVerb::Get => "get",
            ApiVerb::List => "list",
            ApiVerb::Watch => "watch",
            ApiVerb::Create => "create",
            ApiVerb::Update => "update",
            ApiVerb::Patch => "patch",
            ApiVerb::Delete => "delete",
            ApiVerb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether it reads (get, list).
    pub fn is_read(self) -> bool {
        matches!(self, ApiVerb::Get | ApiVerb::List)
    }
}

/// What happens to a request a fault selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP status and the real server's Status body, without applying the
    /// request: 429 (`TooManyRequests`, with `Retry-After`), 500 (`InternalError`), 503
    /// (`ServiceUnavailable`), 504 (`Timeout`, what an etcd timeout answers).
    Status {
        /// 429, 500, 503 or 504.
        code: u16,
        /// `Retry-After` seconds (429 only).
        retry_after_s: u64,
    },
    /// Hold the request this long before handling it.
    Slow(Duration),
    /// Answer gets and lists from a cache this many revisions behind (the Sieve bug classes:
    /// stale state, unobserved intermediate state). Never older than the compaction window.
    StaleReads {
        /// Revisions behind the current one.
        lag: u64,
    },
    /// Watches end with an `ERROR` event carrying a 410 Gone Status (`too old resource version`).
    WatchGone,
    /// Watch streams are cut: `silent: false` ends the connection mid-stream (a reset), `silent:
    /// true` keeps it open and sends nothing more until the watch's `timeoutSeconds` (kube-runtime's
    /// watcher asks for 290 s), when the server ends it.
    WatchCut {
        /// Keep the connection open, silent.
        silent: bool,
    },
    /// Events to the selected watches are delivered this much later than they happen.
    DelayWatch(Duration),
}

/// A fault: which requests, and what happens to them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Only this verb.
    pub verb: Option<ApiVerb>,
    /// Only this resource: `plural` (any group) or `plural.group`.
    pub resource: Option<String>,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this object name.
    pub name: Option<String>,
    /// Only requests whose `User-Agent` is this (or starts with it followed by `/`).
    pub user_agent: Option<String>,
    /// What happens.
    pub action: FaultAction,
}

/// The identity of one request, as faults select it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// The verb.
    pub verb: ApiVerb,
    /// `plural`.
    pub plural: String,
    /// The group (`""` for core).
    pub group: String,
    /// The namespace, if namespaced.
    pub namespace: Option<String>,
    /// The object name, if one.
    pub name: Option<String>,
    /// `User-Agent`.
    pub user_agent: String,
}

impl Fault {
    /// A fault with `action` on every request.
    pub fn new(action: FaultAction) -> Fault {
        Fault { verb: None, resource: None, namespace: None, name: None, user_agent: None, action }
    }

    /// 429 Too Many Requests with `Retry-After: retry_after_s`.
    pub fn throttle(retry_after_s: u64) -> Fault {
        Fault::new(FaultAction::Status { code: 429, retry_after_s })
    }

    /// An error status: 500, 503 or 504.
    ///
    /// # Panics
    /// For any other code (a programming error in the test).
    pub fn error(code: u16) -> Fault {
        assert!(matches!(code, 500 | 503 | 504), "kubesim::fault::Fault::error takes 500, 503 or 504, not {code}");
        Fault::new(FaultAction::Status { code, retry_after_s: 0 })
    }

    /// Requests held `delay` before they are handled.
    pub fn slow(delay: Duration) -> Fault {
        Fault::new(FaultAction::Slow(delay))
    }

    /// Reads answered `lag` revisions behind.
    pub fn stale_reads(lag: u64) -> Fault {
        Fault::new(FaultAction::StaleReads { lag })
    }

    /// Watches end with 410 Gone.
    pub fn watch_gone() -> Fault {
        Fault::new(FaultAction::WatchGone).verb(ApiVerb::Watch)
    }

    /// Watch streams cut (reset, or kept open and silent).
    pub fn watch_cut(silent: bool) -> Fault {
        Fault::new(FaultAction::WatchCut { silent }).verb(ApiVerb::Watch)
    }

    /// Watch events delivered `delay` late.
    pub fn delay_watch(delay: Duration) -> Fault {
        Fault::new(FaultAction::DelayWatch(delay)).verb(ApiVerb::Watch)
    }

    /// Only `verb`.
    pub fn verb(mut self, verb: ApiVerb) -> Fault {
        self.verb = Some(verb);
        self
    }

    /// Only `resource` (`secrets`, or `leases.coordination.k8s.io`).
    pub fn resource(mut self, resource: &str) -> Fault {
        self.resource = Some(resource.to_string());
        self
    }

    /// Only namespace `ns`.
    pub fn namespace(mut self, ns: &str) -> Fault {
        self.namespace = Some(ns.to_string());
        self
    }

    /// Only objects named `name`.
    pub fn name(mut self, name: &str) -> Fault {
        self.name = Some(name.to_string());
        self
    }

    /// Only requests from this client (`User-Agent`).
    pub fn user_agent(mut self, ua: &str) -> Fault {
        self.user_agent = Some(ua.to_string());
        self
    }

    /// Whether it selects `req`.
    pub fn selects(&self, req: &RequestInfo) -> bool {
        let resource_ok = self.resource.as_deref().is_none_or(|r| match r.split_once('.') {
            Some((plural, group)) => plural == req.plural && group == req.group,
            None => r == req.plural,
        });
        let ua_ok = self.user_agent.as_deref().is_none_or(|ua| {
            req.user_agent == ua || req.user_agent.strip_prefix(ua).is_some_and(|rest| rest.starts_with('/'))
        });
        self.verb.is_none_or(|v| v == req.verb)
            && resource_ok
            && self.namespace.as_deref().is_none_or(|n| req.namespace.as_deref() == Some(n))
            && self.name.as_deref().is_none_or(|n| req.name.as_deref() == Some(n))
            && ua_ok
    }

    /// The error a [`FaultAction::Status`] answers.
    pub fn status_error(code: u16, retry_after_s: u64) -> ApiError {
        match code {
            429 => ApiError::too_many_requests(retry_after_s),
            500 => ApiError::internal(
                "an error on the server (\"kubesim fault\") has prevented the request from succeeding",
            ),
            503 => ApiError::unavailable("the server is currently unable to handle the request"),
            _ => ApiError::timeout(),
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        parts.push(self.verb.map_or("any", ApiVerb::name).to_string());
        parts.push(self.resource.clone().unwrap_or_else(|| "*".into()));
        if let Some(ns) = &self.namespace {
            parts.push(format!("in {ns}"));
        }
        if let Some(n) = &self.name {
            parts.push(format!("named {n}"));
        }
        if let Some(ua) = &self.user_agent {
            parts.push(format!("by {ua}"));
        }
        write!(f, "{}: ", parts.join(" "))?;
        match &self.action {
            FaultAction::Status { code: 429, retry_after_s } => write!(f, "429 Retry-After {retry_after_s} s"),
            FaultAction::Status { code, .. } => write!(f, "{code}"),
            FaultAction::Slow(d) => write!(f, "slow {d:?}"),
            FaultAction::StaleReads { lag } => write!(f, "stale reads {lag} revisions behind"),
            FaultAction::WatchGone => write!(f, "watch 410 Gone"),
            FaultAction::WatchCut { silent: false } => write!(f, "watch cut (reset)"),
            FaultAction::WatchCut { silent: true } => write!(f, "watch cut (silent)"),
            FaultAction::DelayWatch(d) => write!(f, "watch events delayed {d:?}"),
        }
    }
}

/// An API-server restart: every connection ends (watches end, requests in flight are reset), and
/// the server refuses connections for `down` before it listens again. Storage is kept.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    /// How long it is down.
    pub down: Duration,
}

impl std::fmt::Display for Restart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "restart (down {:?})", self.down)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: ApiVerb, plural: &str, group: &str, ua: &str) -> RequestInfo {
        RequestInfo {
            verb,
            plural: plural.into(),
            group: group.into(),
            namespace: Some("default".into()),
            name: Some("a".into()),
            user_agent: ua.into(),
        }
    }

    #[test]
    fn a_fault_selects_by_identity() {
        let f = Fault::throttle(1).verb(ApiVerb::List).resource("leases.coordination.k8s.io").user_agent("op");
        assert!(f.selects(&req(ApiVerb::List, "leases", "coordination.k8s.io", "op")));
        assert!(f.selects(&req(ApiVerb::List, "leases", "coordination.k8s.io", "op/1.0")));
        assert!(!f.selects(&req(ApiVerb::List, "leases", "coordination.k8s.io", "operator")));
        assert!(!f.selects(&req(ApiVerb::Get, "leases", "coordination.k8s.io", "op")));
        assert!(!f.selects(&req(ApiVerb::List, "leases", "other.io", "op")));
        assert!(Fault::error(503).resource("leases").selects(&req(ApiVerb::Get, "leases", "x", "y")));
        assert!(!Fault::error(503).name("b").selects(&req(ApiVerb::Get, "leases", "x", "y")));
    }

    #[test]
    fn status_faults_answer_the_real_codes() {
        assert_eq!(Fault::status_error(429, 2).retry_after(), Some(2));
        assert_eq!(Fault::status_error(504, 0).code, 504);
        assert_eq!(Fault::status_error(500, 0).code, 500);
        assert_eq!(Fault::status_error(503, 0).code, 503);
    }

    #[test]
    #[should_panic(expected = "500, 503 or 504")]
    fn an_unknown_error_code_is_refused() {
        let _ = Fault::error(418);
    }
}
