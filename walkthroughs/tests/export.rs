//! The export walkthrough: the correct service passes in both modes; each planted bug is found in
//! explore mode by its oracle and replays exactly in fresh processes; and a scripted hold pins
//! each bug's interleaving in replay mode (the regression tests beside the sweep).

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use sim::node::{ExitCause, Lifecycle, ServiceSpec, System, TaskSite, hold_polls};
use sim::{Ctx, Failure, Mode, Oracle, Simulation};
use walkthroughs::export::server::{Outcome, Outcomes, RowSource};
use walkthroughs::export::{self, Variant};

const SEEDS: std::ops::Range<u64> = 0..40;

#[test]
fn the_correct_export_passes_in_both_modes() {
    for mode in [Mode::Replay, Mode::Explore] {
        Simulation::new(Variant::Correct.simulation())
            .mode(mode)
            .seeds(SEEDS)
            .run(|ctx| export::run(ctx, Variant::Correct))
            .assert_passed();
    }
}

fn found_in_explore_mode(variant: Variant) {
    let simulation = Simulation::new(variant.simulation()).mode(Mode::Explore);
    support::found(simulation, variant.name(), variant.oracle(), SEEDS, move |ctx| export::run(ctx, variant));
}

#[test]
fn the_sigterm_reported_as_a_return_is_found_in_explore_mode() {
    found_in_explore_mode(Variant::SigtermAsReturn);
}

#[test]
fn the_client_gone_logged_as_a_failure_is_found_in_explore_mode() {
    found_in_explore_mode(Variant::ClientGoneAsFailure);
}

/// One export node (`export-0`) on a source that never fails and never waits.
async fn one_node(ctx: &Ctx, variant: Variant) -> Result<System, Failure> {
    let source = Arc::new(RowSource::new(ctx.source("export/source"), 0.0, Duration::ZERO));
    let system = System::new(ctx);
    system.add(
        ServiceSpec::new("export", move |node| export::main(node, Arc::clone(&source), variant))
            .replicas(1..=1)
            .grace(Duration::from_secs(10)),
    );
    system.start().await?;
    Ok(system)
}

/// #959 pinned: the supervisor's first poll after SIGTERM yields, so the reporter it cancelled
/// has returned by the time it looks.
async fn sigterm_with_the_supervisor_held(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    let system = one_node(&ctx, variant).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    hold_polls(&ctx, "export-0", TaskSite::Entry, 1);
    system.apply(Lifecycle::Sigterm { node: "export-0".into() }).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let exits = system.exits();
    let cause = exits.iter().find(|e| e.node == "export-0").map(|e| e.cause.clone());
    if cause != Some(ExitCause::Signal(Ok(()))) {
        return Err(Failure::correctness("pinned", format!("export-0 ended as {cause:?}")));
    }
    Ok(())
}

#[test]
fn a_held_supervisor_pins_the_sigterm_reported_as_a_return() {
    let report = Simulation::new("export_pinned_sigterm_as_return")
        .seeds(0..4)
        .run(|ctx| sigterm_with_the_supervisor_held(ctx, Variant::SigtermAsReturn));
    assert_eq!(report.failures().count(), 4, "every seed fails:\n{report}");
    for outcome in report.failures() {
        let failure = outcome.failure.as_ref().expect("failure");
        assert!(failure.is(&Oracle::EXIT_CAUSE), "{failure}");
        assert!(failure.message.contains("returned while the node was running"), "{failure}");
    }
    Simulation::new("export_pinned_correct_supervisor")
        .seeds(0..4)
        .run(|ctx| sigterm_with_the_supervisor_held(ctx, Variant::Correct))
        .assert_passed();
}

/// #1144 pinned: a client stops reading (the producer waits on its write), then cancels the stream
/// while the tracker's next poll is held, so the producer sees its write fail first.
async fn cancel_with_the_tracker_held(ctx: Ctx, variant: Variant) -> Result<(), Failure> {
    let _system = one_node(&ctx, variant).await?;
    let stream = ctx
        .net()
        .host("client-0")
        .dial("export:8080")
        .await
        .map_err(|e| Failure::new(sim::Class::Liveness, format!("dial: {e}")))?;
    let (mut send, connection) = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .initial_stream_window_size(export::WINDOW)
        .initial_connection_window_size(export::WINDOW)
        .handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| Failure::new(sim::Class::Liveness, format!("handshake: {e}")))?;
    let connection = tokio::spawn(connection);
    let request =
        http::Request::get("http://export/export/40").header("x-request-id", "pinned").body(Empty::<Bytes>::new());
    let response = send
        .send_request(request.expect("request"))
        .await
        .map_err(|e| Failure::new(sim::Class::Liveness, format!("headers: {e}")))?;
    let mut body = response.into_body();
    for _ in 0..2 {
        body.frame()
            .await
            .ok_or_else(|| Failure::new(sim::Class::Liveness, "stream ended early"))?
            .map_err(|e| Failure::new(sim::Class::Liveness, e.to_string()))?;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    hold_polls(&ctx, "export-0", TaskSite::SpawnedIn("export/tracker.rs".into()), 1);
    drop(body);
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(send);
    connection.abort();
    let outcomes = ctx.extension::<Outcomes>().all();
    let served = outcomes.iter().find(|s| s.request == "pinned").map(|s| s.outcome.clone());
    match (variant, served) {
        (Variant::ClientGoneAsFailure, Some(Outcome::WriteFailed(_)))
        | (Variant::Correct, Some(Outcome::ClientWentAway)) => Ok(()),
        (_, served) => Err(Failure::correctness("pinned", format!("the cancelled stream ended as {served:?}"))),
    }
}

#[test]
fn a_held_tracker_pins_the_client_gone_logged_as_a_failure() {
    for variant in [Variant::ClientGoneAsFailure, Variant::Correct] {
        Simulation::new("export_pinned_client_gone")
            .seeds(0..4)
            .run(move |ctx| cancel_with_the_tracker_held(ctx, variant))
            .assert_passed();
    }
}
