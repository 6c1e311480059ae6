//! `continue` tokens, shaped as the real server's: base64 (standard alphabet, padded) of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`, where the list resumes at `start`.

use serde_json::{Value, json};

use crate::meta::base64::{decode, encode};
use crate::status::ApiError;

/// A token resuming a list at revision `rv` after the key `last`.
pub fn make(rv: u64, last: &str) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last}\u{0}")});
    encode(body.to_string().as_bytes())
}

/// `(rv, start)` from a token: the list resumes at keys `>= start`. Errors: 400 `BadRequest`
/// `continue key is not valid: …`.
pub fn parse(token: &str) -> Result<(u64, String), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = decode(token).ok_or_else(|| bad("illegal base64 data"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
    if v["v"] != "meta.k8s.io/v1" {
        return Err(bad("server does not recognize this encoded version"));
    }
    let rv = v["rv"]
        .as_u64()
        .filter(|rv| *rv > 0)
        .ok_or_else(|| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let start = v["start"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| bad("encoded start key empty"))?;
    Ok((rv, start.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = make(42, "default/b");
        assert_eq!(parse(&t).unwrap(), (42, "default/b\u{0}".to_string()));
        assert_eq!(parse("!!").unwrap_err().code, 400);
        assert_eq!(parse(&encode(b"{}")).unwrap_err().code, 400);
    }
}
