//! `continue` tokens, shaped as the real server's (`storage.EncodeContinue`): base64 (URL-safe
//! alphabet, unpadded: Go's `base64.RawURLEncoding`) of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`, where the list resumes at `start`.
//! `rv` -1 (the token a 410 for a compacted token carries) resumes at the latest revision.

use serde_json::{Value, json};

use crate::status::ApiError;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Where a token resumes: at a revision, or (`rv` -1 in the token) at the latest one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// The revision of the first page.
    Revision(u64),
    /// The store's current revision.
    Latest,
}

/// A token resuming a list at revision `rv` after the key `last`.
pub fn make(rv: u64, last: &str) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last}\u{0}")});
    encode(body.to_string().as_bytes())
}

/// A token resuming at the latest revision at key `start` (the one a 410 for a compacted token
/// carries).
pub fn make_latest(start: &str) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": -1, "start": start});
    encode(body.to_string().as_bytes())
}

/// `(at, start)` from a token: the list resumes at keys `>= start`. Errors: 400 `BadRequest`
/// `invalid continue token: continue key is not valid: …`, worded as `storage.DecodeContinue`
/// (Go's base64 and JSON errors included, for the common cases).
pub fn parse(token: &str) -> Result<(At, String), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("invalid continue token: continue key is not valid: {why}"));
    let bytes = decode(token).map_err(|at| bad(&format!("illegal base64 data at input byte {at}")))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(&go_json_error(&bytes, &e)))?;
    if !v.is_object() {
        return Err(bad(&format!(
            "json: cannot unmarshal {} into Go value of type storage.continueToken",
            go_kind(&v)
        )));
    }
    let version = v["v"].as_str().unwrap_or("");
    if version != "meta.k8s.io/v1" {
        return Err(bad(&format!("server does not recognize this encoded version {version}")));
    }
    let at = match v["rv"].as_i64().unwrap_or(0) {
        0 => return Err(bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")),
        rv if rv < 0 => At::Latest,
        rv => At::Revision(rv as u64),
    };
    let start = v["start"].as_str().unwrap_or("");
    if start.is_empty() {
        return Err(bad("encoded start key empty (version meta.k8s.io/v1)"));
    }
    // As the real server: a key that `path.Clean` would change could climb out of the prefix.
    let rooted = if start.starts_with('/') { start.to_string() } else { format!("/{start}") };
    if !is_clean(&rooted) {
        return Err(bad(start));
    }
    Ok((at, rooted[1..].to_string()))
}

/// Whether `path.Clean` leaves the rooted path `p` as it is.
fn is_clean(p: &str) -> bool {
    p == "/" || (!p.ends_with('/') && p[1..].split('/').all(|seg| !seg.is_empty() && seg != "." && seg != ".."))
}

fn encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Go's `RawURLEncoding.DecodeString`: `Err(n)` for `illegal base64 data at input byte n` (a
/// byte outside the alphabet, `=` included, or a lone trailing character).
fn decode(s: &str) -> Result<Vec<u8>, usize> {
    let mut out = Vec::new();
    let (mut acc, mut bits, mut count, mut last) = (0u32, 0u32, 0usize, 0usize);
    for (i, c) in s.bytes().enumerate() {
        if c == b'\r' || c == b'\n' {
            continue;
        }
        let v = ALPHABET.iter().position(|&a| a == c).ok_or(i)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        count += 1;
        last = i;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if count % 4 == 1 {
        return Err(last);
    }
    Ok(out)
}

/// Go's `encoding/json` wording for the common errors: nothing, or a first character that
/// cannot start a value; serde's wording otherwise.
fn go_json_error(bytes: &[u8], e: &serde_json::Error) -> String {
    let first = bytes.iter().position(|b| !b" \t\r\n".contains(b));
    let Some(i) = first else { return "unexpected end of JSON input".into() };
    if e.is_eof() {
        return "unexpected end of JSON input".into();
    }
    // Go's scanner quotes the byte as a rune (`string(byte)`), not the UTF-8 character.
    let c = bytes[i] as char;
    if !"{[\"-0123456789tfn".contains(c) {
        return format!("invalid character {} looking for beginning of value", go_quote_char(c));
    }
    e.to_string()
}

/// Go's `quoteChar`: `'x'`, with `\u0081`-style escapes for what `strconv.Quote` escapes.
fn go_quote_char(c: char) -> String {
    match c {
        '\'' => r"'\''".into(),
        '"' => "'\"'".into(),
        c if c.is_control() || (c as u32) >= 0x7f && (c as u32) < 0xa0 => format!("'\\u{:04x}'", c as u32),
        c => format!("'{c}'"),
    }
}

fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        _ => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = make(42, "default/b");
        assert!(!t.contains('=') && !t.contains('+') && !t.contains('/'));
        assert_eq!(parse(&t).unwrap(), (At::Revision(42), "default/b\u{0}".to_string()));
        assert_eq!(parse(&make_latest("default/c")).unwrap(), (At::Latest, "default/c".to_string()));
    }

    /// Messages measured on kube-apiserver v1.37.
    #[test]
    fn bad_tokens_are_worded_as_the_real_server() {
        let msg = |t: &str| parse(t).unwrap_err().message;
        let p = "invalid continue token: continue key is not valid: ";
        assert_eq!(msg("garbage!"), format!("{p}illegal base64 data at input byte 7"));
        assert_eq!(msg("e30="), format!("{p}illegal base64 data at input byte 3"));
        assert_eq!(msg("garbage"), format!("{p}invalid character '\\u0081' looking for beginning of value"));
        assert_eq!(msg(&encode(b"{}")), format!("{p}server does not recognize this encoded version "));
        let no_start = encode(br#"{"v":"meta.k8s.io/v1","rv":5}"#);
        assert_eq!(msg(&no_start), format!("{p}encoded start key empty (version meta.k8s.io/v1)"));
        let climbing = encode(br#"{"v":"meta.k8s.io/v1","rv":5,"start":"../x"}"#);
        assert_eq!(msg(&climbing), format!("{p}../x"));
    }
}
