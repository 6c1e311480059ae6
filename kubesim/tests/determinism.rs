//! Determinism canary for kube-rs' own randomness: kube-runtime's watcher backoff
//! (`DefaultBackoff`, backon's jitter from `fastrand::Rng::new()`) drawn inside a simulation gives
//! one history per seed, repeated in this process and in three fresh processes, and different
//! seeds give different histories.
//!
//! (The Controller-against-kubesim canary joins this file once `ApiServer` is served.)

use std::collections::BTreeSet;

use kube::runtime::watcher::DefaultBackoff;
use sim::Simulation;

#[test]
fn watcher_backoff_jitter_replays_exactly_across_processes() {
    let report =
        Simulation::new("kube_backoff_canary").seeds(0..20).repeat(2).repeat_processes(3).run(|ctx| async move {
            // As a watcher does: a fresh backoff per stream, its delays slept in fake time.
            for stream in 0..3 {
                let mut backoff = DefaultBackoff::default();
                for _ in 0..4 {
                    let delay = backoff.next().expect("the default backoff never ends");
                    tokio::time::sleep(delay).await;
                    ctx.record("kube.backoff", &format!("watcher-{stream}"), format!("{delay:?}"));
                }
            }
            Ok(())
        });
    report.assert_passed();
    let hashes: BTreeSet<u64> = report.outcomes.iter().map(|o| o.history_hash).collect();
    assert_eq!(hashes.len(), report.outcomes.len(), "different seeds must draw different jitter");
}

/// The known leak, pinned: kube-runtime's reflector `Store` is an `ahash` map whose keys come from
/// a per-process seed and a counter advanced by heap addresses, so `Store::state()` lists the same
/// objects in another order from run to run (and so does `Controller::reconcile_all_on`, which
/// schedules in that order). The self-check reports it; sort `state()` before acting on it.
#[test]
fn reflector_store_state_order_is_reported_as_replay_diverged() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::{reflector, watcher};

    let report = Simulation::new("kube_store_order").seeds(0..3).repeat(2).confirm(0).run(|ctx| async move {
        let (reader, mut writer) = reflector::store::<ConfigMap>();
        for i in 0..8 {
            let meta = ObjectMeta {
                name: Some(format!("cm-{i}")),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            };
            writer.apply_watcher_event(&watcher::Event::Apply(ConfigMap { metadata: meta, ..ConfigMap::default() }));
        }
        let order: Vec<String> = reader.state().iter().filter_map(|cm| cm.metadata.name.clone()).collect();
        ctx.record("kube.store.state", "configmaps", order.join(","));
        let mut sorted = order.clone();
        sorted.sort();
        ctx.record("kube.store.sorted", "configmaps", sorted.join(","));
        Ok(())
    });
    assert_eq!(report.failures().count(), report.outcomes.len(), "{report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("a failed outcome has a failure");
        assert_eq!(failure.class, sim::Class::ReplayDiverged, "{failure}");
        assert!(failure.message.contains("kube.store.state"), "{}", failure.message);
    }
}
