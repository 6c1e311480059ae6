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

/// 422 for misused list/watch options, as the real server's `ListOptions` validation:
/// `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: …`. `message` starts
/// with the cause type (`Forbidden: …`, `Unsupported value: …`).
pub(crate) fn list_options_invalid(field: &str, message: &str) -> ApiError {
    let reason =
        if message.starts_with("Unsupported value") { "FieldValueNotSupported" } else { "FieldValueForbidden" };
    ApiError {
        details: json!({"group": "meta.k8s.io", "kind": "ListOptions",
            "causes": [{"reason": reason, "message": message, "field": field}]}),
        ..ApiError::new(422, "Invalid", format!("ListOptions.meta.k8s.io \"\" is invalid: {field}: {message}"))
    }
}

/// Parses a resourceVersion parameter. Errors: 400.
pub fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
}

impl Store {
    /// GET on a collection. resourceVersion: unset/`""` or `"0"` → the current state; `n` with
    /// `resourceVersionMatch=Exact` (or with a `limit` and no match, as the real server) → the
    /// state at `n` (410 when compacted, 504 when newer than the store); `n` otherwise
    /// (`NotOlderThan`) → the current state, 504 `Timeout: Too large resource version` when `n`
    /// is newer. `continue` pages resume at the token's revision (410 when compacted). Errors: 400
    /// (selectors, token, rv with continue), 422 (`resourceVersionMatch` misuse).
    pub fn list(&self, ty: &ResourceType, ns: Option<&str>, opts: &ListOptions) -> Result<List, ApiError> {
        let filter = WatchFilter::parse(ty, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let (target, start) = self.list_target(opts)?;
        let limit = opts.limit.filter(|l| *l > 0);
        self.list_page(ty, ns, &filter, limit, target, start, opts.continue_token.is_some())
    }

    /// A list as of revision `rv` (the stale-read fault: a lagging cache), honouring selectors,
    /// `limit` and `continue` (the token's start key). Errors: 410 when `rv` was compacted, 504
    /// when newer than the store.
    pub fn list_at(&self, ty: &ResourceType, ns: Option<&str>, opts: &ListOptions, rv: u64) -> Result<List, ApiError> {
        let filter = WatchFilter::parse(ty, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let start = opts.continue_token.as_deref().map(token::parse).transpose()?.map(|(_, s)| s);
        let limit = opts.limit.filter(|l| *l > 0);
        self.list_page(ty, ns, &filter, limit, rv, start, false)
    }

    /// The object as of revision `rv` (stale gets). Errors: 404, 410, 504.
    pub fn get_at(&self, ty: &ResourceType, ns: Option<&str>, name: &str, rv: u64) -> Result<Value, ApiError> {
        let state = self.state_at(ty, rv, false)?;
        let mut obj = state
            .get(&crate::store::state::key(scope(ty, ns), name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(ty.what(name)))?;
        meta::set_type(&mut obj, ty);
        Ok(obj)
    }

    fn list_target(&self, opts: &ListOptions) -> Result<(u64, Option<String>), ApiError> {
        let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let rv_match = opts.resource_version_match.as_deref().filter(|s| !s.is_empty());
        if let Some(tok) = opts.continue_token.as_deref().filter(|s| !s.is_empty()) {
            if rv.is_some_and(|rv| rv != "0") {
                return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
            }
            if rv_match.is_some() {
                return Err(list_options_invalid(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            let (rv, start) = token::parse(tok)?;
            return Ok((rv, Some(start)));
        }
        let exact = match (rv, rv_match) {
            (None, Some(_)) => {
                return Err(list_options_invalid(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            (_, Some(m)) if m != "Exact" && m != "NotOlderThan" => {
                let msg = format!("Unsupported value: \"{m}\": supported values: \"Exact\", \"NotOlderThan\"");
                return Err(list_options_invalid("resourceVersionMatch", &msg));
            }
            (Some("0"), Some("Exact")) => {
                return Err(list_options_invalid(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
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
    pub(crate) fn state_at(
        &self,
        ty: &ResourceType,
        rv: u64,
        paging: bool,
    ) -> Result<Cow<'_, BTreeMap<String, Value>>, ApiError> {
        static EMPTY: BTreeMap<String, Value> = BTreeMap::new();
        let current = self.objects.get(&ty.qualified()).unwrap_or(&EMPTY);
        if rv > self.rv {
            return Err(too_large(rv, self.rv));
        }
        let Some(log) = self.logs.get(&ty.qualified()) else {
            return if rv < self.floor(ty) { Err(expired(paging)) } else { Ok(Cow::Borrowed(current)) };
        };
        let later = log.since(rv).map_err(|_| expired(paging))?;
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
        paging: bool,
    ) -> Result<List, ApiError> {
        let state = self.state_at(ty, rv, paging)?;
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

fn expired(paging: bool) -> ApiError {
    ApiError::expired(if paging { CONTINUE_EXPIRED } else { LIST_EXPIRED })
}
