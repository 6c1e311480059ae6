//! The query string: decoding (`application/x-www-form-urlencoded`, as kube-rs and client-go
//! encode it) and the list, watch and delete options it carries.

use std::collections::BTreeMap;

use crate::status::ApiError;
use crate::store::{DeleteOptions, ListOptions, WatchOptions};

/// The decoded parameters (the last value wins for a repeated key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query(pub BTreeMap<String, String>);

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes `s` (`+` is a space); invalid escapes are kept as written.
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> Query {
        let mut map = BTreeMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            map.insert(decode(k), decode(v));
        }
        Query(map)
    }

    /// The value of `key`, if given and not empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// A boolean parameter (`true`/`1`; anything else is false).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True"))
    }

    /// A boolean parameter that matters when given at all (`sendInitialEvents`): `None` when
    /// absent or empty, else whether it is `true`/`1`.
    pub fn given_flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(|_| self.flag(key))
    }

    /// An integer parameter.
    ///
    /// # Errors
    /// 400 when it is not an integer, worded as the real server's (Go's `strconv.ParseInt`):
    /// `strconv.ParseInt: parsing "x": invalid syntax`.
    pub fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
                    let why = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                        "value out of range"
                    } else {
                        "invalid syntax"
                    };
                    ApiError::bad_request(format!("strconv.ParseInt: parsing {v:?}: {why}"))
                })
            })
            .transpose()
    }

    /// `dryRun=All`.
    ///
    /// # Errors
    /// 422 for another value, worded for the verb's options (`CreateOptions`, `UpdateOptions`,
    /// `PatchOptions`, `DeleteOptions`) as kube-apiserver v1.37.2 answers.
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        self.dry_run_of("DeleteOptions")
    }

    /// [`Query::dry_run`] for the options kind `options` (`CreateOptions`, …).
    ///
    /// # Errors
    /// 422 `Invalid` for a value other than `All`.
    pub fn dry_run_of(&self, options: &str) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => {
                let cause = format!("Unsupported value: [{other:?}]: supported values: \"All\"");
                let mut e =
                    ApiError::new(422, "Invalid", format!("{options}.meta.k8s.io \"\" is invalid: dryRun: {cause}"));
                e.details = serde_json::json!({"group": "meta.k8s.io", "kind": options,
                    "causes": [{"reason": "FieldValueNotSupported", "message": cause, "field": "dryRun"}]});
                Err(e)
            }
        }
    }

    /// The list options.
    ///
    /// # Errors
    /// 400 for a `limit` that is not a number.
    pub fn list_options(&self) -> Result<ListOptions, ApiError> {
        Ok(ListOptions {
            label_selector: self.get("labelSelector").map(str::to_string),
            field_selector: self.get("fieldSelector").map(str::to_string),
            limit: self.int("limit")?.filter(|l| *l > 0).map(|l| l as u64),
            continue_token: self.get("continue").map(str::to_string),
            resource_version: self.get("resourceVersion").map(str::to_string),
            resource_version_match: self.get("resourceVersionMatch").map(str::to_string),
            send_initial_events: self.given_flag("sendInitialEvents"),
        })
    }

    /// The watch options.
    pub fn watch_options(&self) -> WatchOptions {
        WatchOptions {
            label_selector: self.get("labelSelector").map(str::to_string),
            field_selector: self.get("fieldSelector").map(str::to_string),
            resource_version: self.get("resourceVersion").map(str::to_string),
            resource_version_match: self.get("resourceVersionMatch").map(str::to_string),
            allow_bookmarks: self.flag("allowWatchBookmarks"),
            send_initial_events: self.given_flag("sendInitialEvents"),
        }
    }

    /// The delete options: the query's, overridden by a `DeleteOptions` body when one is sent.
    ///
    /// # Errors
    /// 400 for a body that is not a DeleteOptions object, or a bad `gracePeriodSeconds`.
    pub fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let mut opts = DeleteOptions {
            preconditions_uid: None,
            preconditions_rv: None,
            grace_period_seconds: self.int("gracePeriodSeconds")?,
            propagation_policy: self.get("propagationPolicy").map(str::to_string),
            dry_run: self.dry_run()?,
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(opts);
        }
        let v: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
        if !v.is_object() {
            return Err(ApiError::bad_request("error decoding DeleteOptions: not an object"));
        }
        let s = |p: &str| v.pointer(p).and_then(|x| x.as_str()).map(str::to_string);
        opts.preconditions_uid = s("/preconditions/uid");
        opts.preconditions_rv = s("/preconditions/resourceVersion");
        if let Some(g) = v.get("gracePeriodSeconds").and_then(serde_json::Value::as_i64) {
            opts.grace_period_seconds = Some(g);
        }
        if let Some(p) = s("/propagationPolicy") {
            opts.propagation_policy = Some(p);
        }
        if v.get("dryRun").and_then(|d| d.as_array()).is_some_and(|a| a.iter().any(|x| x == "All")) {
            opts.dry_run = true;
        }
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_decoded() {
        let q = Query::parse(Some("labelSelector=app%3Ddb%2Ctier+in+%28a%2Cb%29&limit=5&watch=true&x=%zz"));
        assert_eq!(q.get("labelSelector"), Some("app=db,tier in (a,b)"));
        assert_eq!(q.list_options().unwrap().limit, Some(5));
        assert!(q.flag("watch"));
        assert_eq!(q.get("x"), Some("%zz"));
    }

    #[test]
    fn a_delete_body_overrides_the_query() {
        let q = Query::parse(Some("gracePeriodSeconds=30"));
        let body = br#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"7"},"propagationPolicy":"Foreground"}"#;
        let o = q.delete_options(body).unwrap();
        assert_eq!(o.grace_period_seconds, Some(30));
        assert_eq!(o.preconditions_rv.as_deref(), Some("7"));
        assert_eq!(o.propagation_policy.as_deref(), Some("Foreground"));
        assert_eq!(q.delete_options(b"[1]").unwrap_err().code, 400);
        assert_eq!(Query::parse(Some("limit=x")).list_options().unwrap_err().code, 400);
        assert_eq!(Query::parse(Some("dryRun=Some")).dry_run().unwrap_err().code, 422);
    }
}
