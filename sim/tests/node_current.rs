//! `NodeCtx::current`: a library finds the node whose task runs it (as an rdkafka-shaped client's
//! `ClientConfig::create` must), from the entry point, from tasks it spawns (and their children),
//! per incarnation; and nothing from the run's body.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::net::Ending;
use sim::node::{BoxError, CrashMode, Lifecycle, NodeCtx, ServiceSpec, System};
use sim::{Ctx, Failure, Simulation};

/// What each lookup found: `(where, node name and incarnation)`.
type Seen = Arc<Mutex<Vec<(String, Option<(String, u64)>)>>>;

fn found() -> Option<(String, u64)> {
    NodeCtx::current().map(|n| (n.name().to_string(), n.incarnation()))
}

async fn looks(node: NodeCtx, seen: Seen) -> Result<(), BoxError> {
    seen.lock().expect("seen").push(("entry".into(), found()));
    node.set_ready();
    // An entry point that lets go of its NodeCtx: its tasks still find their node.
    drop(node);
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        s.lock().expect("seen").push(("child".into(), found()));
        let s2 = Arc::clone(&s);
        tokio::spawn(async move { s2.lock().expect("seen").push(("grandchild".into(), found())) }).await.ok();
    })
    .await?;
    std::future::pending::<()>().await;
    Ok(())
}

#[test]
fn each_incarnation_finds_itself_and_the_body_finds_none() {
    let report = Simulation::new("node-current").seeds(0..3).confirm(0).run(|ctx: Ctx| async move {
        let seen: Seen = Arc::default();
        let system = System::new(&ctx);
        let s = Arc::clone(&seen);
        system.add(ServiceSpec::new("svc", move |node| looks(node, Arc::clone(&s))));
        system.start().await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
        system.crash("svc-0", CrashMode::Fixed(Ending::Reset)).await?;
        system.apply(Lifecycle::Start { node: "svc-0".into() }).await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
        let body = found();
        let got = seen.lock().expect("seen").clone();
        let one = Some(("svc-0".to_string(), 1));
        let two = Some(("svc-0".to_string(), 2));
        let want = vec![
            ("entry".to_string(), one.clone()),
            ("child".to_string(), one.clone()),
            ("grandchild".to_string(), one),
            ("entry".to_string(), two.clone()),
            ("child".to_string(), two.clone()),
            ("grandchild".to_string(), two),
        ];
        if body.is_some() || got != want {
            return Err(Failure::correctness("node-current", format!("body found {body:?}; nodes found {got:?}")));
        }
        Ok(())
    });
    report.assert_passed();
}

#[test]
fn outside_a_run_there_is_no_current_node() {
    assert!(NodeCtx::current().is_none());
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    rt.block_on(async { assert!(tokio::spawn(async { NodeCtx::current().is_none() }).await.expect("joins")) });
}
