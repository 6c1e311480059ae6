//! Timestamps and identifiers: RFC 3339 times (`metav1.Time`, second precision, UTC `Z`), uids
//! (UUID v4 text from the caller's randomness) and `generateName` suffixes.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-12-02T07:05:07Z`: `t` in UTC at second precision (times before 1970 clamp to the epoch).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Go's layout for `metav1.MicroTime` (`RFC3339Micro`).
pub const MICRO_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// Why `v` does not decode as a `metav1.MicroTime` (exactly six fractional digits), in the words
/// of Go's `time.Parse` (`parsing time "…" as "…": cannot parse "…" as "…"`); `None` when it does.
/// Only the fractional part and the zone are checked; the date and clock are taken as written.
pub fn micro_time_error(v: &str) -> Option<String> {
    let head_ok = v.len() >= 19 && v.is_char_boundary(19) && v.as_bytes()[10] == b'T';
    if !head_ok {
        return Some(format!("parsing time {v:?} as {MICRO_LAYOUT:?}: cannot parse {v:?} as \"2006\""));
    }
    let rest = &v[19..];
    let digits = rest.strip_prefix('.').map(|r| r.chars().take_while(char::is_ascii_digit).count());
    if digits != Some(6) {
        return Some(format!("parsing time {v:?} as {MICRO_LAYOUT:?}: cannot parse {rest:?} as \".000000\""));
    }
    let zone = &rest[7..];
    let zone_ok = zone == "Z"
        || (zone.len() == 6
            && (zone.starts_with('+') || zone.starts_with('-'))
            && zone.as_bytes()[3] == b':'
            && zone.chars().enumerate().all(|(i, c)| i == 0 || i == 3 || c.is_ascii_digit()));
    if !zone_ok {
        return Some(format!("parsing time {v:?} as {MICRO_LAYOUT:?}: cannot parse {zone:?} as \"Z07:00\""));
    }
    None
}

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A UUID v4 in its text form from two draws of `rng`.
pub fn uid(rng: &mut dyn FnMut() -> u64) -> String {
    let (a, b) = (rng(), rng());
    let a = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// The alphabet of `generateName` suffixes (apimachinery's `utilrand.String`: no vowels, no
/// look-alikes).
pub const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five characters from [`SUFFIX_ALPHABET`], one draw of `rng` each.
pub fn suffix(rng: &mut dyn FnMut() -> u64) -> String {
    (0..5).map(|_| SUFFIX_ALPHABET[(rng() % SUFFIX_ALPHABET.len() as u64) as usize] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_seconds() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_millis(1_764_659_107_900)), "2025-12-02T07:05:07Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn uids_are_v4_and_suffixes_use_the_alphabet() {
        let mut n = 0u64;
        let mut rng = move || {
            n = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
            n
        };
        let u = uid(&mut rng);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!("89ab".contains(&u[19..20]), "{u}");
        let s = suffix(&mut rng);
        assert_eq!(s.len(), 5);
        assert!(s.bytes().all(|c| SUFFIX_ALPHABET.contains(&c)));
    }
}
