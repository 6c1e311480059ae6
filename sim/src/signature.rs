//! Failure signatures: the key a fleet merge deduplicates failing seeds by.
//!
//! Two failing seeds are "the same bug" when they fail the same simulation with the same class,
//! the same oracle and a message of the same shape. The shape is the message's first line with
//! what varies from seed to seed taken out:
//! - the contents of double-quoted strings become `"…"` (values, passwords, error texts);
//! - the contents of each outermost `(…)`, `[…]` and `{…}` group become `…` (lists of recent
//!   outcomes, held partitions, operation details: their length and order vary per seed);
//! - a number followed by a time unit (`ns`, `µs`, `us`, `ms`, `s`, `m`, `h`) becomes `T`
//!   (`277ms` and `2.277s` are one shape), other decimal numbers become `N` (`put#3` and
//!   `put#17` are one shape; `1.5` too), `0x` hexadecimal numbers become `0xN`, and a
//!   comma-separated run of `N`s is one `N`;
//! - whitespace is collapsed, and at most [`SHAPE_CHARS_MAX`] characters are kept.
//!
//! A panic's message starts with its location (`panicked at src/cart.rs:41:9: …`), so the
//! panicking file is part of its shape (the line and column are numbers, so an edit above the
//! panic keeps the signature). Measured on the main job's 300 seeds of every variant: 795
//! failing seeds of 8 planted bugs give 26 signatures (87 with digits alone).
//!
//! ```
//! use sim::{Failure, Oracle};
//!
//! let f = Failure::correctness(Oracle::IDEMPOTENCY, "put#3 charged 2 times\nmore detail");
//! assert_eq!(sim::signature::of("cart", &f), "cart · correctness [idempotency] · put#N charged N times");
//! ```
//!
//! The signature is written to each failing seed's `SIM_JSON` line (`signature`); readers of
//! older lines compute it with [`of`].

use crate::report::{Failure, Outcome};

/// The most characters of a message's shape kept in a signature.
pub const SHAPE_CHARS_MAX: usize = 160;

/// The signature of `failure` in `simulation`:
/// `"{simulation} · {class}[ [{oracle}]] · {shape}"`, e.g.
/// `"cart · correctness [idempotency] · put#N charged N times"` (see the module docs for the
/// shape). A message with an empty first line has the empty shape (the signature then ends in
/// `" · "`).
pub fn of(simulation: &str, failure: &Failure) -> String {
    let oracle = failure.oracle.as_ref().map(|o| format!(" [{}]", o.as_str())).unwrap_or_default();
    format!("{simulation} · {}{oracle} · {}", failure.class.name(), shape(&failure.message))
}

/// The shape of a message (see the module docs): its first line with quoted strings and bracket
/// groups emptied, durations as `T`, numbers as `N` (`0xN`), whitespace collapsed (trimmed), cut
/// to [`SHAPE_CHARS_MAX`] characters.
pub fn shape(message: &str) -> String {
    let first: Vec<char> = message.lines().next().unwrap_or("").chars().collect();
    let mut out = String::with_capacity(first.len());
    let mut i = 0;
    while i < first.len() {
        let c = first[i];
        if c.is_whitespace() {
            while i < first.len() && first[i].is_whitespace() {
                i += 1;
            }
            out.push(' ');
            continue;
        }
        if c == '"' {
            match closing_quote(&first, i + 1) {
                Some(end) => {
                    out.push_str("\"…\"");
                    i = end + 1;
                }
                None => {
                    out.push('"');
                    i += 1;
                }
            }
            continue;
        }
        if let Some(close) = closer(c)
            && let Some(end) = matching(&first, i, c, close)
        {
            out.push(c);
            out.push('…');
            out.push(close);
            i = end + 1;
            continue;
        }
        if c.is_ascii_digit() {
            i = number(&first, i, &mut out);
            continue;
        }
        out.push(c);
        i += 1;
    }
    let collapsed = collapse_number_lists(out.trim());
    collapsed.chars().take(SHAPE_CHARS_MAX).collect()
}

fn closer(open: char) -> Option<char> {
    match open {
        '(' => Some(')'),
        '[' => Some(']'),
        '{' => Some('}'),
        _ => None,
    }
}

/// The index of the `"` that closes a string starting at `from` (backslash escapes skipped).
fn closing_quote(chars: &[char], from: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The index closing the group opened at `at` (nesting of the same pair counted, quoted
/// strings skipped); `None` when it is never closed (a cut message keeps its text).
fn matching(chars: &[char], at: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = at;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i = closing_quote(chars, i + 1)? + 1;
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
        i += 1;
    }
    None
}

/// Writes the number starting at `at` as `0xN`, `T` (a duration) or `N`; returns the index after it.
fn number(chars: &[char], at: usize, out: &mut String) -> usize {
    let digit = |i: usize| chars.get(i).is_some_and(char::is_ascii_digit);
    if chars[at] == '0'
        && chars.get(at + 1).is_some_and(|x| *x == 'x' || *x == 'X')
        && chars.get(at + 2).is_some_and(char::is_ascii_hexdigit)
    {
        let mut i = at + 2;
        while chars.get(i).is_some_and(char::is_ascii_hexdigit) {
            i += 1;
        }
        out.push_str("0xN");
        return i;
    }
    let mut i = at;
    while digit(i) {
        i += 1;
    }
    if chars.get(i) == Some(&'.') && digit(i + 1) {
        i += 1;
        while digit(i) {
            i += 1;
        }
    }
    for unit in ["ns", "µs", "us", "ms", "s", "m", "h"] {
        let len = unit.chars().count();
        let matches = unit.chars().enumerate().all(|(k, u)| chars.get(i + k) == Some(&u));
        let ends = !chars.get(i + len).is_some_and(|c| c.is_alphanumeric());
        if matches && ends {
            out.push('T');
            return i + len;
        }
    }
    out.push('N');
    i
}

/// `N, N, N` as one `N`.
fn collapse_number_lists(text: &str) -> String {
    let mut out = text.to_string();
    while out.contains("N, N") {
        let next = out.replace("N, N", "N");
        if next == out {
            break;
        }
        out = next;
    }
    out
}

impl Outcome {
    /// The signature of this seed's failure ([`of`]), or `None` when the seed passed (an excused
    /// violation passes too: [`Outcome::failed`]).
    pub fn signature(&self) -> Option<String> {
        self.failure.as_ref().filter(|_| self.failed()).map(|f| of(&self.simulation, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Class;

    #[test]
    fn digits_and_hex_numbers_become_n_and_whitespace_collapses() {
        assert_eq!(shape("put#3 charged  2 times\tfor key 0x1F3a"), "put#N charged N times for key 0xN");
        assert_eq!(shape("  node12 saw v10.2 "), "nodeN saw vN");
        assert_eq!(shape("0x without digits, 0xg"), "Nx without digits, Nxg");
        assert_eq!(shape("a\nsecond line 42"), "a");
        assert_eq!(shape("offsets 3, 4, 5 of orders-2"), "offsets N of orders-N");
        assert_eq!(shape(""), "");
    }

    #[test]
    fn durations_are_one_shape_whatever_their_unit() {
        assert_eq!(shape("at 277ms: committed"), shape("at 2.277s: committed"));
        assert_eq!(shape("at 277ms: committed"), "at T: committed");
        assert_eq!(shape("for 5ns, 3µs, 4us, 1m and 2h"), "for T, T, T, T and T");
        assert_eq!(shape("3 sets, 4 mins, 10min"), "N sets, N mins, Nmin", "a unit must end the word");
    }

    #[test]
    fn quoted_strings_and_bracket_groups_are_emptied() {
        assert_eq!(shape(r#"password: Some("9ecd4c3") kept"#), r#"password: Some(…) kept"#);
        assert_eq!(shape(r#"said "a \"quoted\" (text)" then"#), r#"said "…" then"#);
        assert_eq!(
            shape("opened below its threshold of 5 (last outcomes: Ok, Ok, stream end Ok)"),
            "opened below its threshold of N (…)"
        );
        assert_eq!(shape("holds [\"orders-1\", \"orders-2\"] and {a: (b)}"), "holds […] and {…}");
        assert_eq!(shape("nested (a (b) c) d"), "nested (…) d");
        assert_eq!(shape("cut (never closed 12"), "cut (never closed N", "an unclosed group keeps its text");
        assert_eq!(shape("ends \"unclosed 12"), "ends \"unclosed N");
    }

    #[test]
    fn a_shape_is_cut_at_160_characters_on_a_character_boundary() {
        let long = "é".repeat(300);
        assert_eq!(shape(&long).chars().count(), SHAPE_CHARS_MAX);
        let digits = format!("{}{}", "x".repeat(159), "12345");
        assert_eq!(shape(&digits), format!("{}N", "x".repeat(159)));
        let hex = format!("{}0xff", "x".repeat(158));
        assert_eq!(shape(&hex), format!("{}0x", "x".repeat(158)));
    }

    #[test]
    fn signatures_name_simulation_class_oracle_and_shape() {
        let f = Failure::correctness("stale-read", "read 3 after 4 was acknowledged");
        assert_eq!(of("kv", &f), "kv · correctness [stale-read] · read N after N was acknowledged");
        let panic = Failure::new(Class::Panic, "panicked at src/cart.rs:41:9: index out of bounds").oracle("panic");
        assert_eq!(of("cart", &panic), "cart · panic [panic] · panicked at src/cart.rs:N:N: index out of bounds");
        let no_oracle = Failure::new(Class::ReplayDiverged, "history differs at event 12");
        assert_eq!(of("cart", &no_oracle), "cart · replay diverged · history differs at event N");
    }

    #[test]
    fn seeds_failing_alike_share_a_signature_and_others_do_not() {
        let a = Failure::correctness("idempotency", "put#3 charged 2 times");
        let b = Failure::correctness("idempotency", "put#17 charged 3 times");
        let c = Failure::correctness("one-response", "put#3 charged 2 times");
        assert_eq!(of("cart", &a), of("cart", &b));
        assert_ne!(of("cart", &a), of("cart", &c));
        assert_ne!(of("cart", &a), of("cart2", &a));
    }

    #[test]
    fn an_outcome_has_a_signature_only_when_it_failed() {
        let mut outcome = Outcome {
            simulation: "cart".into(),
            seed: crate::seed::Seed(7),
            failure: None,
            history_hash: 1,
            events: 0,
            schedule_hash: 2,
            polls: 0,
            fake_nanos: 0,
            wall_nanos: 0,
            swarm: String::new(),
            swarm_simplest: Default::default(),
            faults: Vec::new(),
            operations: 0,
            interposed: crate::report::Interposed::default(),
            replay: "SIM_SEED=7 cargo test".into(),
            replays: None,
            trace: None,
        };
        assert_eq!(outcome.signature(), None);
        outcome.failure = Some(Failure::excused("idempotency", "the store broke its own guarantee"));
        assert_eq!(outcome.signature(), None, "an excused violation passes");
        outcome.failure = Some(Failure::correctness("idempotency", "put#3 charged 2 times"));
        assert_eq!(outcome.signature().as_deref(), Some("cart · correctness [idempotency] · put#N charged N times"));
    }
}
