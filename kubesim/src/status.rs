//! The API server's errors, as the `Status` objects the real server answers with
//! (`metav1.Status`: the Kubernetes API conventions, "Response Status Kind").
//!
//! Every refusal in kubesim is an [`ApiError`]; the HTTP layer writes it as a JSON body
//! `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":…,"reason":…,
//! "details":{…},"code":…}` with the same HTTP status code, so `kube::Error::Api` carries the same
//! `reason` and `code` a client sees from a real kube-apiserver.

use serde_json::{Value, json};

/// A refused request: the HTTP status code, the `reason` (`NotFound`, `AlreadyExists`,
/// `Conflict`, `Invalid`, `BadRequest`, `Expired`, `Gone`, `MethodNotAllowed`, `TooManyRequests`,
/// `InternalError`, `ServiceUnavailable`, `Timeout`, `UnsupportedMediaType`, `Forbidden`), the
/// message, and the details (`name`, `group`, `kind`, causes).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// The HTTP status code (404, 409, 410, 422, 429, 500, 503, 504, …).
    pub code: u16,
    /// `Status.reason`.
    pub reason: &'static str,
    /// `Status.message`, worded as the real server words it where known.
    pub message: String,
    /// `Status.details` (`name`, `group`, `kind`, `causes`, `retryAfterSeconds`); `Value::Null`
    /// for none.
    pub details: Value,
    /// `Status.metadata.continue`: the token a 410 for a compacted continue token offers.
    pub continue_token: Option<String>,
}

/// What an object is, for error messages and `Status.details`: the group (`""` for the core
/// group), the resource's plural (`configmaps`) and the object's name.
#[derive(Clone, Copy, Debug)]
pub struct What<'a> {
    /// The API group, `""` for core.
    pub group: &'a str,
    /// The resource's plural name (`configmaps`, `leases`).
    pub resource: &'a str,
    /// The object's name.
    pub name: &'a str,
}

impl What<'_> {
    /// `configmaps "x"` or `leases.coordination.k8s.io "x"`, as the real server names objects.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            format!("{} \"{}\"", self.resource, self.name)
        } else {
            format!("{}.{} \"{}\"", self.resource, self.group, self.name)
        }
    }

    /// `{"name", "group", "kind"}`; the group is left out for the core group (`omitempty`).
    fn details(&self) -> Value {
        details(self.name, self.group, self.resource)
    }
}

/// `Status.details` as the real server writes it: `group` omitted when empty.
pub(crate) fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = json!({"name": name, "kind": kind});
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    /// An error with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: Value::Null, continue_token: None }
    }

    /// 404 `NotFound`: `configmaps "x" not found`.
    pub fn not_found(what: What<'_>) -> ApiError {
        ApiError {
            details: what.details(),
            ..ApiError::new(404, "NotFound", format!("{} not found", what.qualified()))
        }
    }

    /// 409 `AlreadyExists`: `configmaps "x" already exists`.
    pub fn already_exists(what: What<'_>) -> ApiError {
        ApiError {
            details: what.details(),
            ..ApiError::new(409, "AlreadyExists", format!("{} already exists", what.qualified()))
        }
    }

    /// 409 `Conflict` for a stale resourceVersion, worded as the real server's:
    /// `Operation cannot be fulfilled on configmaps "x": the object has been modified; please
    /// apply your changes to the latest version and try again`.
    pub fn conflict(what: What<'_>) -> ApiError {
        ApiError::conflict_because(
            what,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 `Conflict` with another cause (a failed precondition, an SSA field conflict).
    pub fn conflict_because(what: What<'_>, cause: &str) -> ApiError {
        ApiError {
            details: what.details(),
            ..ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on {}: {cause}", what.qualified()))
        }
    }

    /// 409 `Conflict` naming the object by kind (`Operation cannot be fulfilled on ConfigMap
    /// "x": …`), as the generic registry's delete preconditions do; details name the kind too.
    pub fn conflict_on_kind(kind: &str, name: &str, cause: &str) -> ApiError {
        ApiError {
            details: json!({"name": name, "kind": kind}),
            ..ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on {kind} \"{name}\": {cause}"))
        }
    }

    /// 422 `Invalid`: `ConfigMap "x" is invalid: metadata.resourceVersion: Invalid value: …`.
    pub fn invalid(kind: &str, what: What<'_>, field: &str, message: &str) -> ApiError {
        ApiError {
            details: {
                let mut d = details(what.name, what.group, kind);
                d["causes"] = json!([{"reason": "FieldValueInvalid", "message": message, "field": field}]);
                d
            },
            ..ApiError::new(422, "Invalid", format!("{kind} \"{}\" is invalid: {field}: {message}", what.name))
        }
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 410 `Expired`, for a compacted watch resourceVersion or an expired `continue` token:
    /// `too old resource version: 5 (120)`.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml; got {content_type:?}"
            ),
        )
    }

    /// 429 `TooManyRequests` with `Retry-After` (seconds) in the details.
    pub fn too_many_requests(retry_after_s: u64) -> ApiError {
        ApiError {
            details: json!({"retryAfterSeconds": retry_after_s}),
            ..ApiError::new(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            )
        }
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// 503 `ServiceUnavailable`.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// 504 `Timeout` (an etcd request timing out): `The request did not complete within the
    /// allotted timeout`... worded as the real server's `etcdserver: request timed out`.
    pub fn timeout() -> ApiError {
        ApiError::new(504, "Timeout", "etcdserver: request timed out")
    }

    /// `Retry-After` seconds to send as a header, if any.
    pub fn retry_after(&self) -> Option<u64> {
        self.details.get("retryAfterSeconds").and_then(Value::as_u64)
    }

    /// The `Status` object (JSON) the real server sends for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty()
            && let Some(map) = status.as_object_mut()
        {
            // `reason` is `omitempty`: plain storage errors carry none.
            map.remove("reason");
        }
        if !self.details.is_null() {
            status["details"] = self.details.clone();
        }
        if let Some(c) = &self.continue_token {
            status["metadata"]["continue"] = json!(c);
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_reads_as_the_real_servers() {
        let e = ApiError::conflict(What { group: "", resource: "configmaps", name: "x" });
        let s = e.to_status();
        assert_eq!(s["code"], 409);
        assert_eq!(s["reason"], "Conflict");
        assert_eq!(
            s["message"],
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(s["details"]["kind"], "configmaps");
    }

    #[test]
    fn a_grouped_resource_is_qualified_by_its_group() {
        let e = ApiError::not_found(What { group: "coordination.k8s.io", resource: "leases", name: "l" });
        assert_eq!(e.message, "leases.coordination.k8s.io \"l\" not found");
        assert_eq!(ApiError::too_many_requests(3).retry_after(), Some(3));
    }
}
