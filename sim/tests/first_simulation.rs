//! The docs' first simulation (docs/src/first-simulation.md shows this file's test verbatim).

// --- begin first simulation ---
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sim::{Class, Ctx, Event, Failure, Simulation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The service under test: a counter over TCP. Each client sends one byte; the server answers
/// with the new count. `racy` reads, thinks, then writes: two clients can both see the same count.
async fn counter(ctx: Ctx, racy: bool) -> Result<(), Failure> {
    let net = ctx.net();
    let listener = net.host("counter").listen("9000")?;
    let count = Arc::new(Mutex::new(0u32));
    let think = ctx.swarm().duration("think", Duration::ZERO..=Duration::from_millis(5));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let count = Arc::clone(&count);
            tokio::spawn(async move {
                let mut byte = [0u8; 1];
                if stream.read_exact(&mut byte).await.is_err() {
                    return;
                }
                let seen = *count.lock().unwrap();
                if racy {
                    tokio::time::sleep(think).await; // the bug: an await between read and write
                }
                *count.lock().unwrap() = seen + 1;
                let _ = stream.write_all(&(seen + 1).to_be_bytes()).await;
            });
        }
    });

    // The workload: clients start at seeded times, as harness events.
    let clients = ctx.swarm().int("clients", 1..=5);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut starts = ctx.source("workload");
    for i in 0..clients {
        let (ctx2, done) = (ctx.clone(), done_tx.clone());
        let at = starts.duration(Duration::ZERO..=Duration::from_millis(10));
        ctx.driver().at(
            at,
            Event::new("client.start", format!("client-{i}")).action(move || {
                tokio::spawn(async move {
                    let result = async {
                        let mut stream = ctx2.net().host(&format!("client-{i}")).dial("counter:9000").await?;
                        stream.write_all(&[1]).await?;
                        let mut answer = [0u8; 4];
                        stream.read_exact(&mut answer).await?;
                        Ok::<u32, std::io::Error>(u32::from_be_bytes(answer))
                    }
                    .await;
                    ctx2.record("client.answer", &format!("client-{i}"), format!("{result:?}"));
                    let _ = done.send(result);
                });
            }),
        );
    }
    drop(done_tx);

    // The oracle: every increment is counted once — the answers are 1..=clients.
    let mut answers = Vec::new();
    while let Some(answer) = done_rx.recv().await {
        answers.push(answer?);
    }
    answers.sort();
    let expected: Vec<u32> = (1..=clients as u32).collect();
    if answers != expected {
        return Err(Failure::correctness("no-lost-increments", format!("answers {answers:?}, expected {expected:?}")));
    }
    Ok(())
}

#[test]
fn the_atomic_counter_passes() {
    Simulation::new("counter_atomic").seeds(0..100).run(|ctx| counter(ctx, false)).assert_passed();
}

#[test]
fn the_racy_counter_is_caught_and_replays() {
    let report = Simulation::new("counter_racy").seeds(0..100).run(|ctx| counter(ctx, true));
    let found = report.first_failure().expect("the race is found");
    let failure = found.failure.as_ref().expect("failure");
    assert_eq!(failure.class, Class::Correctness);
    assert_eq!(failure.oracle.as_deref(), Some("no-lost-increments"));
    assert_eq!(found.replays.as_ref().map(|r| (r.matched, r.of)), Some((3, 3)));
}
// --- end first simulation ---

#[test]
fn the_docs_show_this_file_verbatim() {
    let file = include_str!("first_simulation.rs");
    let start =
        file.find("// --- begin first simulation ---\n").expect("marker") + "// --- begin first simulation ---\n".len();
    let end = file.find("// --- end first simulation ---").expect("marker");
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/first-simulation.md"))
        .expect("the page exists");
    assert!(
        page.contains(&file[start..end]),
        "docs/src/first-simulation.md must contain the code of tests/first_simulation.rs verbatim"
    );
}
