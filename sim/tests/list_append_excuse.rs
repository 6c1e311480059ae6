//! The [`ListAppend`] check's excuses: a rule-2 violation whose every copy after the first is
//! excused for its value ends the run excused (reported, not failed); a copy left unexcused, an
//! excuse for another value, or a violation of another rule still fails; a malformed excuse is an
//! event violation.

use sim::check::list_append::{ListAppend, Record, Recorder};
use sim::{Class, Ctx, Failure, Simulation};

/// What the run excuses: (offset, value) excuses on key `k`.
type Excuses = &'static [(u64, &'static str)];

/// One append of `a`, acknowledged at 2; the final log holds `x`, `a` and `a` at 0, 1 and 2
/// (rule 2 twice: the log holds `a` twice, and the append was acknowledged where it is not first).
async fn duplicated(ctx: Ctx, excuses: Excuses, lose_x: bool) -> Result<(), Failure> {
    ctx.add_check(ListAppend::new());
    let recorder = Recorder::of(&ctx);
    recorder.append("p", "k", "x").ok(Some(0));
    recorder.append("p", "k", "a").ok(Some(2));
    let records = [(0, "x"), (1, "a"), (2, "a")];
    let records = records.iter().filter(|(o, _)| !(lose_x && *o == 0)).map(|(o, v)| Record::new(*o, *v)).collect();
    recorder.final_log("k", 0, records);
    for (offset, value) in excuses {
        ListAppend::excuse(&ctx, "k", *offset, value, "a documented retry");
    }
    Ok(())
}

/// The one seed's failure (excused or not).
fn outcome(name: &str, excuses: Excuses, lose_x: bool) -> (Option<Failure>, bool) {
    let report = Simulation::new(name).seeds(0..1).confirm(0).run(move |ctx| duplicated(ctx, excuses, lose_x));
    let passed = report.passed();
    (report.outcomes[0].failure.clone(), passed)
}

#[test]
fn a_duplicate_whose_later_copy_is_excused_ends_the_run_excused() {
    let (failure, passed) = outcome("list_append_excused", &[(2, "a")], false);
    let failure = failure.expect("reported as excused");
    assert!(passed, "an excused violation does not fail the seed: {failure}");
    assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Excused, Some("list-append")), "{failure}");
    assert!(failure.message.contains("rule 2 value-at-two-offsets: key k value a"), "{failure}");
    assert!(failure.message.contains("excused: a documented retry"), "{failure}");
}

#[test]
fn a_duplicate_without_an_excuse_or_excused_for_another_value_or_offset_fails_rule_2() {
    for (name, excuses) in [
        ("list_append_unexcused", &[][..]),
        ("list_append_excuse_other_value", &[(2, "b")][..]),
        ("list_append_excuse_first_copy", &[(1, "a")][..]),
    ] {
        let (failure, passed) = outcome(name, excuses, false);
        let failure = failure.expect("fails");
        assert!(!passed, "{name}: {failure}");
        assert_eq!((failure.class, failure.oracle.as_deref()), (Class::Correctness, Some("list-append")), "{name}");
        assert!(failure.message.starts_with("rule 2 value-at-two-offsets: key k value a"), "{name}: {failure}");
    }
}

#[test]
fn an_excuse_leaves_the_other_rules_standing() {
    let (failure, passed) = outcome("list_append_excuse_and_loss", &[(2, "a")], true);
    let failure = failure.expect("fails");
    assert!(!passed, "{failure}");
    assert_eq!(failure.class, Class::Correctness, "{failure}");
    assert!(failure.message.starts_with("rule 1 acknowledged-lost: key k value x"), "{failure}");
    assert!(!failure.message.contains("value-at-two-offsets"), "the rule-2 violation is excused: {failure}");
}

#[test]
fn a_malformed_excuse_is_a_violation_of_the_event_precondition() {
    let report = Simulation::new("list_append_bad_excuse").seeds(0..1).confirm(0).run(|ctx: Ctx| async move {
        ctx.add_check(ListAppend::new());
        ctx.record(ListAppend::KIND_EXCUSE, "k", "offset=two value=a reason=r");
        Ok(())
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.oracle.as_deref(), Some("list-append"));
    assert!(failure.message.starts_with("precondition event: key k"), "{failure}");
}
