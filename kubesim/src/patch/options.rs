//! The checks the real server makes on `PatchOptions` before it looks at the object
//! (apimachinery `ValidatePatchOptions`), answered as its 422 on `PatchOptions.meta.k8s.io`:
//! - an apply without `fieldManager` → `PatchOptions.meta.k8s.io "" is invalid: fieldManager:
//!   Required value: is required for apply patch`;
//! - `force` (any value) on a non-apply patch → `… force: Forbidden: may not be specified for
//!   non-apply patch`.
//!
//! Known difference: the real server also refuses a `fieldManager` over 128 characters or with
//! non-printable characters; kubesim does not.

use crate::status::ApiError;
use serde_json::json;

fn invalid_options(field: &str, reason: &str, message: &str) -> ApiError {
    ApiError {
        details: json!({"group": "meta.k8s.io", "kind": "PatchOptions",
            "causes": [{"reason": reason, "message": message, "field": field}]}),
        ..ApiError::new(422, "Invalid", format!("PatchOptions.meta.k8s.io \"\" is invalid: {field}: {message}"))
    }
}

/// Checks a patch request's options: `apply` (the content type is apply), the `fieldManager`
/// query parameter, and whether a `force` parameter was given (any value). Errors: 422 as the
/// module docs say.
pub fn validate_patch_options(apply: bool, field_manager: Option<&str>, force_given: bool) -> Result<(), ApiError> {
    if apply && field_manager.is_none_or(str::is_empty) {
        return Err(invalid_options(
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch",
        ));
    }
    if !apply && force_given {
        return Err(invalid_options(
            "force",
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_needs_a_manager_and_force_needs_apply() {
        let e = validate_patch_options(true, None, false).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        assert_eq!(e.details["causes"][0]["field"], "fieldManager");
        let e = validate_patch_options(false, Some("x"), true).unwrap_err();
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        assert!(validate_patch_options(true, Some("x"), true).is_ok());
        assert!(validate_patch_options(false, None, false).is_ok());
    }
}
