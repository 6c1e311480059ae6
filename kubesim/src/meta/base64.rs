//! Standard base64 (RFC 4648, padded), as Go's `encoding/base64.StdEncoding`: Secret `data` and
//! `continue` tokens.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `bytes`, padded.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Where Go's `base64.StdEncoding.DecodeString` reports `illegal base64 data at input byte N`:
/// the first byte outside the alphabet (`\r` and `\n` are skipped, `=` only as trailing
/// padding), or the length when it is not a multiple of 4; `None` when `s` decodes.
pub fn corrupt_at(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut data = 0usize;
    let mut padding = 0usize;
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'\r' | b'\n' => {}
            b'=' => padding += 1,
            _ if padding > 0 => return Some(i),
            _ if ALPHABET.contains(&c) => data += 1,
            _ => return Some(i),
        }
    }
    let total = data + padding;
    if padding > 2 || !total.is_multiple_of(4) || (padding > 0 && data % 4 < 2) {
        return Some(total - total % 4);
    }
    None
}

/// Decodes a padded or unpadded string; `None` on a character outside the alphabet.
pub fn decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for n in 0..6 {
            let s: Vec<u8> = (0..n).map(|i| i * 37).collect();
            assert_eq!(decode(&encode(&s)).unwrap(), s);
        }
        assert_eq!(encode(b"foob"), "Zm9vYg==");
        assert!(decode("!!").is_none());
    }
}
