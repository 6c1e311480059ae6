//! Failure signatures: the key a fleet merge deduplicates failing seeds by.
//!
//! Two failing seeds are "the same bug" when they fail the same simulation with the same class,
//! the same oracle and a message of the same shape. The shape is the message's first line with
//! what varies from seed to seed taken out: runs of decimal digits become `N` (`put#3` and
//! `put#17` are one shape), `0x` hexadecimal numbers become `0xN`, whitespace is collapsed, and
//! at most [`SHAPE_CHARS_MAX`] characters are kept. A panic's message starts with its location
//! (`panicked at src/cart.rs:41:9: …`), so the panicking file is part of its shape (the line and
//! column are numbers, so an edit above the panic keeps the signature).
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

/// The shape of a message: its first line with digit runs as `N`, `0x` numbers as `0xN`,
/// whitespace collapsed to single spaces (trimmed), cut to [`SHAPE_CHARS_MAX`] characters.
pub fn shape(message: &str) -> String {
    let first = message.lines().next().unwrap_or("");
    let mut out = String::with_capacity(first.len());
    let mut rest = first.chars().peekable();
    while let Some(c) = rest.next() {
        if c.is_whitespace() {
            while rest.peek().is_some_and(|n| n.is_whitespace()) {
                rest.next();
            }
            out.push(' ');
        } else if c.is_ascii_digit() {
            // `0x` followed by a hex digit is a hex number; a bare `0x` is `N` then `x`.
            let mut ahead = rest.clone();
            let hex = c == '0'
                && ahead.next().is_some_and(|x| x == 'x' || x == 'X')
                && ahead.peek().is_some_and(char::is_ascii_hexdigit);
            if hex {
                rest.next();
                while rest.peek().is_some_and(char::is_ascii_hexdigit) {
                    rest.next();
                }
                out.push_str("0xN");
            } else {
                while rest.peek().is_some_and(char::is_ascii_digit) {
                    rest.next();
                }
                out.push('N');
            }
        } else {
            out.push(c);
        }
    }
    out.trim().chars().take(SHAPE_CHARS_MAX).collect()
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
        assert_eq!(shape("  node12 saw v10.2 "), "nodeN saw vN.N");
        assert_eq!(shape("0x without digits, 0xg"), "Nx without digits, Nxg");
        assert_eq!(shape("a\nsecond line 42"), "a");
        assert_eq!(shape(""), "");
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
