//! The linearizability checker: fires on histories that are not linearizable (naming the key and
//! the operation that cannot be placed), quiet on ones that are — with concurrency, indeterminate
//! operations and compare-and-set — and agrees with a brute-force checker on small random
//! histories.

use std::time::Duration;

use proptest::prelude::*;
use sim::check::linearizable::{
    self, Inconclusive, KvMap, KvOp, KvOut, Limits, MalformedHistory, Model, Op, Register, RegisterOp, RegisterOut,
    Return, Validity,
};
use sim::{Class, Ctx, Simulation};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

type RegOp = Op<RegisterOp<i64>, RegisterOut<i64>>;

fn write(client: &str, call: u64, ret: u64, v: i64) -> RegOp {
    Op::ok(client, ms(call), ms(ret), RegisterOp::Write(v), RegisterOut::Written)
}

fn read(client: &str, call: u64, ret: u64, v: i64) -> RegOp {
    Op::ok(client, ms(call), ms(ret), RegisterOp::Read, RegisterOut::Read(v))
}

fn cas(client: &str, call: u64, ret: u64, expected: i64, new: i64, wrote: bool) -> RegOp {
    Op::ok(client, ms(call), ms(ret), RegisterOp::Cas { expected, new }, RegisterOut::Cas(wrote))
}

fn register() -> Register<i64> {
    Register { initial: 0 }
}

fn validity(history: &[RegOp]) -> Validity {
    linearizable::check(&register(), history).expect("well-formed")
}

#[test]
fn a_stale_read_after_a_completed_write_is_not_linearizable_and_names_the_read() {
    let history = vec![write("a", 0, 10, 1), read("b", 20, 30, 0)];
    let Validity::NotLinearizable(c) = validity(&history) else { panic!("a stale read must not pass") };
    assert_eq!(c.blocked, 1, "{c}");
    assert_eq!(c.prefix, vec![0], "{c}");
    assert_eq!(c.state, "1", "{c}");
    assert!(c.explanation.contains("operation #1 (b Read -> Read(0)"), "{c}");
}

#[test]
fn concurrent_operations_may_take_effect_in_either_order() {
    // The read overlaps the write: it may see the old or the new value.
    assert!(validity(&[write("a", 0, 10, 1), read("b", 5, 15, 0)]).is_linearizable());
    assert!(validity(&[write("a", 0, 10, 1), read("b", 5, 15, 1)]).is_linearizable());
    // Two reads inside one write: the first sees new, the later old — impossible.
    let history = [write("a", 0, 100, 1), read("b", 10, 20, 1), read("c", 30, 40, 0)];
    assert!(matches!(validity(&history), Validity::NotLinearizable(_)));
    // Touching intervals are concurrent (closed intervals).
    assert!(validity(&[write("a", 0, 10, 1), read("b", 10, 20, 0)]).is_linearizable());
}

#[test]
fn compare_and_set_must_agree_with_the_value_it_saw() {
    let ok = [write("a", 0, 10, 1), cas("b", 20, 30, 1, 2, true), read("c", 40, 50, 2), cas("d", 60, 70, 1, 3, false)];
    assert!(validity(&ok).is_linearizable());
    // Two successful CASes from the same expected value cannot both win.
    let both_won = [write("a", 0, 10, 1), cas("b", 20, 30, 1, 2, true), cas("c", 20, 30, 1, 3, true)];
    let Validity::NotLinearizable(c) = validity(&both_won) else { panic!("two winners") };
    assert_eq!(c.prefix.len(), 2, "{c}");
    // A CAS that reports failure while the value was what it expected.
    assert!(matches!(validity(&[cas("b", 0, 10, 0, 5, false)]), Validity::NotLinearizable(_)));
}

#[test]
fn an_indeterminate_write_may_take_effect_late_or_never() {
    let lost = Op::unknown("a", ms(0), RegisterOp::Write(1));
    // Never took effect.
    assert!(validity(&[lost.clone(), read("b", 100, 110, 0)]).is_linearizable());
    // Took effect long after its client gave up.
    assert!(validity(&[lost.clone(), read("b", 100, 110, 0), read("c", 200, 210, 1)]).is_linearizable());
    // But at one instant: once seen, it cannot be unseen.
    let flicker = [lost, read("b", 100, 110, 1), read("c", 200, 210, 0)];
    assert!(matches!(validity(&flicker), Validity::NotLinearizable(_)));
    // Not before its call.
    let early = [read("b", 0, 10, 1), Op::unknown("a", ms(20), RegisterOp::Write(1))];
    assert!(matches!(validity(&early), Validity::NotLinearizable(_)));
}

#[test]
fn an_indeterminate_cas_takes_effect_only_if_its_expectation_held() {
    let maybe = Op::unknown("a", ms(0), RegisterOp::Cas { expected: 0, new: 7 });
    assert!(validity(&[maybe.clone(), read("b", 50, 60, 7)]).is_linearizable());
    let blocked = [write("w", 0, 1, 3), Op::unknown("a", ms(2), RegisterOp::Cas { expected: 0, new: 7 })];
    let mut history = blocked.to_vec();
    history.push(read("b", 50, 60, 7));
    assert!(matches!(validity(&history), Validity::NotLinearizable(_)));
}

#[test]
fn a_failed_operation_took_no_effect() {
    let history = [Op::failed("a", ms(0), RegisterOp::Write(1)), read("b", 50, 60, 0)];
    assert!(validity(&history).is_linearizable());
    let history = [Op::failed("a", ms(0), RegisterOp::Write(1)), read("b", 50, 60, 1)];
    assert!(matches!(validity(&history), Validity::NotLinearizable(_)));
}

#[test]
fn a_key_value_map_is_checked_per_key_and_names_the_key() {
    let kv = |client: &str, call: u64, ret: u64, op: KvOp, out: KvOut| Op::ok(client, ms(call), ms(ret), op, out);
    let mut history = vec![
        kv("a", 0, 10, KvOp::put("x", "1"), KvOut::Done),
        kv("b", 0, 10, KvOp::put("y", "1"), KvOut::Done),
        kv("a", 20, 30, KvOp::append("x", "2"), KvOut::Done),
        kv("b", 20, 30, KvOp::get("x"), KvOut::value(Some("1"))),
        kv("c", 40, 50, KvOp::get("x"), KvOut::value(Some("12"))),
        kv("c", 60, 70, KvOp::cas("y", Some("1"), "3"), KvOut::Cas(true)),
        kv("d", 60, 70, KvOp::get("z"), KvOut::value(None)),
    ];
    assert!(linearizable::check(&KvMap, &history).expect("well-formed").is_linearizable());
    // y was overwritten by the CAS: reading the old value later is stale.
    history.push(kv("d", 80, 90, KvOp::get("y"), KvOut::value(Some("1"))));
    let Validity::NotLinearizable(c) = linearizable::check(&KvMap, &history).expect("well-formed") else {
        panic!("stale read of y")
    };
    assert_eq!(c.partition.as_deref(), Some("y"), "{c}");
    assert_eq!(c.blocked, 7, "{c}");
    assert!(c.explanation.starts_with("not linearizable for key \"y\": operation #7"), "{c}");
}

#[test]
fn a_search_that_reaches_its_limit_is_unknown_not_a_pass() {
    // Many concurrent writes and a read no order explains: the search must try them all.
    let mut history: Vec<RegOp> = (0..12).map(|i| write(&format!("c{i}"), 0, 100, i + 1)).collect();
    history.push(read("r", 200, 210, 99));
    let limits = Limits { steps_max: 50, ..Limits::default() };
    let validity = linearizable::check_with(&register(), &history, &limits).expect("well-formed");
    let Validity::Unknown(Inconclusive { limit, steps, .. }) = &validity else { panic!("{validity:?}") };
    assert_eq!((*limit, *steps), ("steps_max", 50));
    let failure = validity.into_result().expect_err("unknown is not a pass");
    assert_eq!(failure.class, Class::Inconclusive, "{failure}");
    assert_eq!(failure.oracle.as_deref(), Some("linearizable"), "{failure}");
    // With the default limits the same history is decided.
    assert!(matches!(self::validity(&history), Validity::NotLinearizable(_)));
}

#[test]
fn a_return_before_its_call_is_a_malformed_history() {
    let history = [write("a", 10, 5, 1)];
    assert!(matches!(
        linearizable::check(&register(), &history),
        Err(MalformedHistory::ReturnBeforeCall { index: 0, .. })
    ));
}

#[test]
fn a_simulation_fails_with_the_linearizable_oracle() {
    let report = Simulation::new("linearizable_oracle").seeds(0..1).confirm(0).run(|_ctx: Ctx| async move {
        linearizable::verify(&register(), &[write("a", 0, 10, 1), read("b", 20, 30, 0)])
    });
    let failure = report.first_failure().and_then(|o| o.failure.clone()).expect("caught");
    assert_eq!(failure.class, Class::Correctness, "{failure}");
    assert_eq!(failure.oracle.as_deref(), Some("linearizable"), "{failure}");
    Simulation::new("linearizable_quiet")
        .seeds(0..1)
        .run(|_ctx: Ctx| async move { linearizable::verify(&register(), &[write("a", 0, 10, 1), read("b", 5, 30, 0)]) })
        .assert_passed();
}

/// The definition, searched directly: some order of the operations that respects real time
/// (an operation that returned before another was called comes first), includes every
/// operation with a known return and any subset of the indeterminate ones, and is a legal run
/// of the model. No cache, no pruning.
fn brute_force<M: Model>(model: &M, history: &[Op<M::Input, M::Output>]) -> bool {
    let ops: Vec<&Op<M::Input, M::Output>> = history.iter().filter(|o| !matches!(o.ret, Return::Failed)).collect();
    fn ret<I, O>(o: &Op<I, O>) -> Option<Duration> {
        match o.ret {
            Return::Ok { at, .. } => Some(at),
            _ => None,
        }
    }
    fn go<M: Model>(model: &M, ops: &[&Op<M::Input, M::Output>], done: &mut Vec<bool>, state: &M::State) -> bool {
        let pending: Vec<usize> = (0..ops.len()).filter(|&i| !done[i]).collect();
        if pending.iter().all(|&i| ret(ops[i]).is_none()) {
            return true;
        }
        for &i in &pending {
            // Every pending operation that returned before i's call must come before i.
            if pending.iter().any(|&j| ret(ops[j]).is_some_and(|r| r < ops[i].call)) {
                continue;
            }
            let output = match &ops[i].ret {
                Return::Ok { output, .. } => Some(output),
                _ => None,
            };
            if let Some(next) = model.step(state, &ops[i].input, output) {
                done[i] = true;
                let found = go(model, ops, done, &next);
                done[i] = false;
                if found {
                    return true;
                }
            }
        }
        false
    }
    go(model, &ops, &mut vec![false; ops.len()], &model.init())
}

fn arb_register_op() -> impl Strategy<Value = RegOp> {
    let input = prop_oneof![
        2 => Just(RegisterOp::Read),
        2 => (0..3i64).prop_map(RegisterOp::Write),
        1 => (0..3i64, 0..3i64).prop_map(|(expected, new)| RegisterOp::Cas { expected, new }),
    ];
    (0..4u8, 0..40u64, 0..15u64, 0..10u8, 0..3i64, any::<bool>(), input).prop_map(
        |(client, call, length, fate, value, wrote, input)| {
            let output = match &input {
                RegisterOp::Read => RegisterOut::Read(value),
                RegisterOp::Write(_) => RegisterOut::Written,
                RegisterOp::Cas { .. } => RegisterOut::Cas(wrote),
            };
            let ret = match fate {
                0 => Return::Unknown,
                1 => Return::Failed,
                _ => Return::Ok { at: ms(call + length), output },
            };
            Op { client: format!("c{client}"), call: ms(call), input, ret }
        },
    )
}

fn arb_kv_op() -> impl Strategy<Value = Op<KvOp, KvOut>> {
    let values = ["a", "b", "ab"];
    (0..2usize, 0..4u8, 0..3usize, 0..30u64, 0..12u64, 0..8u8, 0..4usize, any::<bool>()).prop_map(
        move |(key, kind, v, call, length, fate, seen, wrote)| {
            let key = ["x", "y"][key];
            let (input, output) = match kind {
                0 => (KvOp::get(key), KvOut::value([None, Some("a"), Some("b"), Some("ab")][seen])),
                1 => (KvOp::put(key, values[v]), KvOut::Done),
                2 => (KvOp::append(key, values[v]), KvOut::Done),
                _ => (KvOp::cas(key, [None, Some("a"), Some("b"), Some("ab")][seen], values[v]), KvOut::Cas(wrote)),
            };
            let ret = match fate {
                0 => Return::Unknown,
                _ => Return::Ok { at: ms(call + length), output },
            };
            Op { client: "c".into(), call: ms(call), input, ret }
        },
    )
}

/// The key-value map as one object (a map from key to value), with no partitioning: what the
/// brute force checks the per-key checker against (locality, Herlihy & Wing's theorem 1).
struct WholeMap;

impl Model for WholeMap {
    type State = std::collections::BTreeMap<String, std::sync::Arc<str>>;
    type Input = KvOp;
    type Output = KvOut;

    fn init(&self) -> Self::State {
        Self::State::new()
    }

    fn step(&self, state: &Self::State, input: &KvOp, output: Option<&KvOut>) -> Option<Self::State> {
        let value = KvMap.step(&state.get(&input.key).cloned(), input, output)?;
        let mut next = state.clone();
        match value {
            Some(v) => next.insert(input.key.clone(), v),
            None => next.remove(&input.key),
        };
        Some(next)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_register_checker_agrees_with_brute_force(history in prop::collection::vec(arb_register_op(), 0..7)) {
        let fast = linearizable::check(&register(), &history).expect("well-formed");
        prop_assert!(!matches!(fast, Validity::Unknown(_)));
        prop_assert_eq!(fast.is_linearizable(), brute_force(&register(), &history), "{:?}", fast);
    }

    #[test]
    fn the_key_value_checker_agrees_with_brute_force(history in prop::collection::vec(arb_kv_op(), 0..8)) {
        let fast = linearizable::check(&KvMap, &history).expect("well-formed");
        prop_assert_eq!(fast.is_linearizable(), brute_force(&WholeMap, &history), "{:?}", fast);
    }
}

#[test]
fn the_random_histories_include_both_verdicts() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop::collection::vec(arb_register_op(), 0..7);
    let (mut yes, mut no) = (0, 0);
    for _ in 0..500 {
        let history = strategy.new_tree(&mut runner).expect("a history").current();
        if brute_force(&register(), &history) { yes += 1 } else { no += 1 }
    }
    assert!(yes > 100 && no > 100, "{yes} linearizable, {no} not: the property tests would check one side only");
}

#[test]
fn the_docs_example_names_the_key_and_the_read_that_cannot_be_placed() {
    // docs/src/linearizability.md
    let history = vec![
        Op::ok("c1", ms(0), ms(10), KvOp::put("x", "1"), KvOut::Done),
        Op::ok("c2", ms(5), ms(15), KvOp::get("x"), KvOut::value(None)),
        Op::unknown("c3", ms(20), KvOp::append("x", "2")),
        Op::ok("c2", ms(30), ms(40), KvOp::get("x"), KvOut::value(Some("12"))),
        Op::ok("c1", ms(50), ms(60), KvOp::get("x"), KvOut::value(Some("1"))),
    ];
    let Validity::NotLinearizable(why) = linearizable::check(&KvMap, &history).expect("well-formed") else {
        panic!("an append seen, then unseen")
    };
    assert_eq!(
        (why.partition.as_deref(), why.blocked, why.prefix.as_slice()),
        (Some("x"), 4, &[1, 0, 2, 3][..]),
        "{why}"
    );
    assert_eq!(why.state, "Some(\"12\")", "{why}");
    eprintln!("{why}");
}
