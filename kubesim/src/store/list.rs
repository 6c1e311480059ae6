//! Lists: selectors, `limit`/`continue` paging, resourceVersion semantics, and reads of an older
//! revision rebuilt from the type's event log (stale reads, `Exact`, continue pages).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::meta;
use crate::resource::ResourceType;
use crate::status::ApiError;
use crate::store::options::{EventKind, List, ListOptions, WatchFilter};
use crate::store::state::{Store, scope};
use crate::store::token;

/// The real server's 410 for a continue token whose revision was compacted.
pub const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";
/// The real server's 410 for a continue token whose revision was compacted, when it offers a
/// token continuing at the latest revision (`Status.metadata.continue`), as etcd-backed lists do.
pub const CONTINUE_EXPIRED_INCONSISTENT: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";
/// The real server's 410 for an `Exact` list of a compacted revision.
pub const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";

/// 504 `Timeout: Too large resource version: N, current: M` (with `Retry-After: 1`), as the real
/// server answers a read newer than its data.
pub fn too_large(rv: u64, current: u64) -> ApiError {
    ApiError {
        details: json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1}),
        ..ApiError::new(504, "Timeout", format!("Timeout: Too large resource version: {rv}, current: {current}"))
    }
}

/// 410 `too old resource version: N (M)` for a watch from before the floor `M`.
pub fn too_old(rv: u64, floor: u64) -> ApiError {
    ApiError::expired(format!("too old resource version: {rv} ({floor})"))
}

/// One cause of a 422 for list or watch options: `(field, message)`, the message starting with
/// the cause type (`Forbidden: …`, `Unsupported value: …`).
pub(crate) type OptionCause = (&'static str, String);

/// 422 for misused list/watch options, as the real server's `ListOptions` validation:
/// `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: …`, or with several
/// causes `… is invalid: [field: message, field: message]`.
pub(crate) fn list_options_invalid(causes: &[OptionCause]) -> ApiError {
    let reason =
        |m: &str| if m.starts_with("Unsupported value") { "FieldValueNotSupported" } else { "FieldValueForbidden" };
    let lines: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    let joined = if lines.len() == 1 { lines[0].clone() } else { format!("[{}]", lines.join(", ")) };
    let causes: Vec<Value> =
        causes.iter().map(|(f, m)| json!({"reason": reason(m), "message": m, "field": f})).collect();
    ApiError {
        details: json!({"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes}),
        ..ApiError::new(422, "Invalid", format!("ListOptions.meta.k8s.io \"\" is invalid: {joined}"))
    }
}

/// The real server's `ValidateListOptions` for a list (not a watch), causes in its order.
fn validate_list(opts: &ListOptions) -> Vec<OptionCause> {
    let mut causes = Vec::new();
    let forbidden = |m: &str| ("resourceVersionMatch", format!("Forbidden: {m}"));
    if let Some(m) = opts.resource_version_match.as_deref().filter(|m| !m.is_empty()) {
        let rv = opts.resource_version.as_deref().unwrap_or("");
        if rv.is_empty() {
            causes.push(forbidden("resourceVersionMatch is forbidden unless resourceVersion is provided"));
        }
        if opts.continue_token.as_deref().is_some_and(|c| !c.is_empty()) {
            causes.push(forbidden("resourceVersionMatch is forbidden when continue is provided"));
        }
        if m != "Exact" && m != "NotOlderThan" {
            let msg = format!("Unsupported value: \"{m}\": supported values: \"Exact\", \"NotOlderThan\", \"\"");
            causes.push(("resourceVersionMatch", msg));
        }
        if m == "Exact" && rv == "0" {
            causes.push(forbidden("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
        }
    }
    if opts.send_initial_events.is_some() {
        causes.push(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list".into()));
    }
    causes
}

/// Parses a resourceVersion parameter of a list. Errors: 400 `invalid resource version:
/// resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`.
pub fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    parse_rv_bare(rv).map_err(|m| ApiError::bad_request(format!("invalid resource version: {m}")))
}

/// A resourceVersion parse error as the real storage layer words it (Go's `strconv.ParseUint`).
pub(crate) fn parse_rv_bare(rv: &str) -> Result<u64, String> {
    rv.parse().map_err(|_| {
        let why = if !rv.is_empty() && rv.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        format!("resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: {why}")
    })
}

impl Store {
    /// GET on a collection. resourceVersion: unset/`""` or `"0"` → the current state; `n` with
    /// `resourceVersionMatch=Exact` (or with a `limit` and no match, as the real server) → the
    /// state at `n` (410 when compacted, 504 when newer than the store); `n` otherwise
    /// (`NotOlderThan`) → the current state, 504 `Timeout: Too large resource version` when `n`
    /// is newer. `continue` pages resume at the token's revision (410 when compacted). Errors: 400
    /// (selectors, token, rv with continue), 422 (`resourceVersionMatch` misuse).
    pub fn list(&self, ty: &ResourceType, ns: Option<&str>, opts: &ListOptions) -> Result<List, ApiError> {
        let causes = validate_list(opts);
        if !causes.is_empty() {
            return Err(list_options_invalid(&causes));
        }
        let filter = WatchFilter::parse(ty, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let (target, start) = self.list_target(opts)?;
        let limit = opts.limit.filter(|l| *l > 0);
        let paging = start.clone();
        self.list_page(ty, ns, &filter, limit, target, start).map_err(|mut e| {
            // The real server offers a token that continues at the latest revision.
            if let (410, Some(start)) = (e.code, paging) {
                e.message = CONTINUE_EXPIRED_INCONSISTENT.to_string();
                e.continue_token = Some(token::make_latest(&start));
            }
            e
        })
    }

    /// A list as of revision `rv` (the stale-read fault: a lagging cache), honouring selectors,
    /// `limit` and `continue` (the token's start key). Errors: 410 when `rv` was compacted, 504
    /// when newer than the store.
    pub fn list_at(&self, ty: &ResourceType, ns: Option<&str>, opts: &ListOptions, rv: u64) -> Result<List, ApiError> {
        let filter = WatchFilter::parse(ty, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let start = opts.continue_token.as_deref().map(token::parse).transpose()?.map(|(_, s)| s);
        let limit = opts.limit.filter(|l| *l > 0);
        self.list_page(ty, ns, &filter, limit, rv, start)
    }

    /// The object as of revision `rv` (stale gets). Errors: 404, 410, 504.
    pub fn get_at(&self, ty: &ResourceType, ns: Option<&str>, name: &str, rv: u64) -> Result<Value, ApiError> {
        let state = self.state_at(ty, rv)?;
        let mut obj = state
            .get(&crate::store::state::key(scope(ty, ns), name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(ty.what(name)))?;
        meta::set_type(&mut obj, ty);
        Ok(obj)
    }

    /// The revision a (validated) list reads, and the key a continue token resumes at.
    fn list_target(&self, opts: &ListOptions) -> Result<(u64, Option<String>), ApiError> {
        let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let rv_match = opts.resource_version_match.as_deref().filter(|s| !s.is_empty());
        if let Some(tok) = opts.continue_token.as_deref().filter(|s| !s.is_empty()) {
            if rv.is_some_and(|rv| rv != "0") {
                return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
            }
            let (at, start) = token::parse(tok)?;
            let rv = match at {
                token::At::Revision(rv) => rv,
                token::At::Latest => self.rv,
            };
            return Ok((rv, Some(start)));
        }
        let exact = match (rv, rv_match) {
            (None | Some("0"), _) => return Ok((self.rv, None)),
            (Some(_), Some(m)) => m == "Exact",
            (Some(_), None) => opts.limit.is_some_and(|l| l > 0),
        };
        let n = parse_rv(rv.unwrap_or("0"))?;
        if n > self.rv {
            return Err(too_large(n, self.rv));
        }
        Ok((if exact { n } else { self.rv }, None))
    }

    /// The objects of `ty` as of revision `rv`: the current ones with every later event undone.
    /// Errors: 410 [`LIST_EXPIRED`] when `rv` was compacted (the caller rewords it for a continue
    /// page), 504 when `rv` is newer than the store.
    pub(crate) fn state_at(&self, ty: &ResourceType, rv: u64) -> Result<Cow<'_, BTreeMap<String, Value>>, ApiError> {
        static EMPTY: BTreeMap<String, Value> = BTreeMap::new();
        let current = self.objects.get(&ty.qualified()).unwrap_or(&EMPTY);
        if rv > self.rv {
            return Err(too_large(rv, self.rv));
        }
        let Some(log) = self.logs.get(&ty.qualified()) else {
            return if rv < self.floor(ty) { Err(ApiError::expired(LIST_EXPIRED)) } else { Ok(Cow::Borrowed(current)) };
        };
        if rv < log.read_floor() {
            return Err(ApiError::expired(LIST_EXPIRED));
        }
        let later = log.since(rv).map_err(|_| ApiError::expired(LIST_EXPIRED))?;
        let mut state = current.clone();
        for ev in later.rev() {
            match (ev.kind, &ev.prev) {
                (EventKind::Added, _) | (_, None) => state.remove(&ev.key),
                (_, Some(prev)) => state.insert(ev.key.clone(), prev.clone()),
            };
        }
        Ok(Cow::Owned(state))
    }

    #[allow(clippy::too_many_arguments)]
    fn list_page(
        &self,
        ty: &ResourceType,
        ns: Option<&str>,
        filter: &WatchFilter,
        limit: Option<u64>,
        rv: u64,
        start: Option<String>,
    ) -> Result<List, ApiError> {
        let state = self.state_at(ty, rv)?;
        let prefix = scope(ty, ns).map(|n| format!("{n}/"));
        let from = start.unwrap_or_default();
        let matching: Vec<(&String, &Value)> = state
            .range(from..)
            .filter(|(k, _)| prefix.as_deref().is_none_or(|p| k.starts_with(p)))
            .filter(|(_, v)| filter.matches(v, ty))
            .collect();
        let page = limit.map_or(matching.len(), |l| matching.len().min(l as usize));
        let rest = (matching.len() - page) as u64;
        let items = matching[..page]
            .iter()
            .map(|(_, v)| {
                let mut v = (*v).clone();
                meta::set_type(&mut v, ty);
                v
            })
            .collect();
        let last_key = matching[..page].last().map(|(k, _)| k.as_str()).unwrap_or("");
        Ok(List {
            items,
            resource_version: rv,
            continue_token: (rest > 0).then(|| token::make(rv, last_key)),
            remaining: (rest > 0 && filter.is_empty()).then_some(rest),
        })
    }
}
