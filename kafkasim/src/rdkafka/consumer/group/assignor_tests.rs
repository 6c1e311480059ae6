//! The assignors against hand-computed librdkafka/Kafka results, and the codec round trips.

use super::*;

fn member(id: &str, topics: &[&str], owned: &[(&str, i32)]) -> Member {
    Member {
        id: id.into(),
        instance_id: None,
        topics: topics.iter().map(|t| t.to_string()).collect(),
        owned: owned.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
    }
}

fn parts(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

fn of(a: &BTreeMap<String, Vec<Tp>>, id: &str) -> Vec<String> {
    a[id].iter().map(|(t, p)| format!("{t}{p}")).collect()
}

#[test]
fn range_gives_consecutive_runs_per_topic_extra_to_the_first() {
    let ms = [member("b", &["t", "u"], &[]), member("a", &["t", "u"], &[]), member("c", &["t"], &[])];
    let a = assign(Strategy::Range, &ms, &parts(&[("t", 7), ("u", 3)]));
    // t: 7 over a,b,c -> 3,2,2; u: 3 over a,b -> 2,1.
    assert_eq!(of(&a, "a"), ["t0", "t1", "t2", "u0", "u1"]);
    assert_eq!(of(&a, "b"), ["t3", "t4", "u2"]);
    assert_eq!(of(&a, "c"), ["t5", "t6"]);
}

#[test]
fn static_members_are_ordered_by_instance_id() {
    let mut x = member("zz", &["t"], &[]);
    x.instance_id = Some("i-1".into());
    let mut y = member("aa", &["t"], &[]);
    y.instance_id = Some("i-2".into());
    let a = assign(Strategy::Range, &[y, x], &parts(&[("t", 2)]));
    assert_eq!((of(&a, "zz"), of(&a, "aa")), (vec!["t0".to_string()], vec!["t1".to_string()]));
}

#[test]
fn roundrobin_cycles_members_across_topics() {
    let ms = [member("a", &["t", "u"], &[]), member("b", &["t", "u"], &[]), member("c", &["u"], &[])];
    let a = assign(Strategy::RoundRobin, &ms, &parts(&[("t", 3), ("u", 3)]));
    // t0 a, t1 b, t2 a (c skipped), u0 b, u1 c, u2 a.
    assert_eq!(of(&a, "a"), ["t0", "t2", "u2"]);
    assert_eq!(of(&a, "b"), ["t1", "u0"]);
    assert_eq!(of(&a, "c"), ["u1"]);
}

#[test]
fn sticky_balances_a_fresh_group() {
    let ms = [member("a", &["t"], &[]), member("b", &["t"], &[]), member("c", &["t"], &[])];
    let a = assign(Strategy::CooperativeSticky, &ms, &parts(&[("t", 7)]));
    let counts: Vec<usize> = ["a", "b", "c"].iter().map(|m| a[*m].len()).collect();
    assert_eq!(counts.iter().sum::<usize>(), 7);
    assert!(counts.iter().max().expect("3") - counts.iter().min().expect("3") <= 1, "{counts:?}");
}

#[test]
fn cooperative_sticky_keeps_owners_and_revokes_before_moving() {
    // a owned everything; b joins: a keeps 3 of its 6, the 3 moving to b are withheld from both.
    let owned: Vec<(&str, i32)> = (0..6).map(|p| ("t", p)).collect();
    let ms = [member("a", &["t"], &owned), member("b", &["t"], &[])];
    let g1 = assign(Strategy::CooperativeSticky, &ms, &parts(&[("t", 6)]));
    assert_eq!(g1["a"].len(), 3, "a keeps half: {g1:?}");
    assert!(g1["b"].is_empty(), "b gets nothing while a still owns them: {g1:?}");
    // a revoked them and rejoins owning its 3: now b gets the other 3, a keeps its own.
    let kept: Vec<(&str, i32)> = g1["a"].iter().map(|(t, p)| (t.as_str(), *p)).collect();
    let ms = [member("a", &["t"], &kept), member("b", &["t"], &[])];
    let g2 = assign(Strategy::CooperativeSticky, &ms, &parts(&[("t", 6)]));
    assert_eq!(g2["a"], g1["a"], "a's partitions stay put");
    assert_eq!(g2["b"].len(), 3);
    assert!(g2["b"].iter().all(|tp| !g2["a"].contains(tp)));
}

#[test]
fn cooperative_sticky_gives_a_departed_members_partitions_at_once() {
    // c left: its partitions are owned by nobody present, so they move in one generation.
    let ms = [member("a", &["t"], &[("t", 0), ("t", 1)]), member("b", &["t"], &[("t", 2), ("t", 3)])];
    let a = assign(Strategy::CooperativeSticky, &ms, &parts(&[("t", 6)]));
    assert_eq!((a["a"].len(), a["b"].len()), (3, 3));
    assert!(a["a"].contains(&("t".into(), 0)) && a["b"].contains(&("t".into(), 2)));
}

#[test]
fn subscriptions_and_assignments_round_trip() {
    let owned = vec![("t".to_string(), 1), ("t".to_string(), 3), ("u".to_string(), 0)];
    let bytes = encode_subscription(&["t".into(), "u".into()], &owned);
    assert_eq!(&bytes[..2], &3i16.to_be_bytes());
    assert_eq!(decode_subscription(&bytes), Some((vec!["t".to_string(), "u".to_string()], owned.clone())));
    assert_eq!(decode_assignment(&encode_assignment(&owned)), Some(owned));
    assert_eq!(decode_assignment(&[]), Some(vec![]));
    assert_eq!(decode_subscription(&[0]), None);
    // kafkasim's own decoder (the models') reads what the leader writes.
    let set = crate::models::facts::decode_assignment(&encode_assignment(&[("t".to_string(), 2)]));
    assert_eq!(set.map(|s| s.len()), Some(1));
}
