//! The export node's entry point: a supervisor that runs the node's services and stops them on
//! SIGTERM, as a hand-written `main` does (humus' `Run`, a tokio app's `select!` over its tasks).
//!
//! A signal task turns the node's SIGTERM into a cancellation token every service watches; the
//! supervisor waits for the first of "a service ended" and "the token fired". A service that
//! ends before the token fired failed on its own (the node exits with an error); one that ends
//! after it is stopping as asked.

use std::future::Future;
use std::pin::Pin;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use sim::node::{BoxError, NodeCtx};
use tokio_util::sync::CancellationToken;

use super::Variant;

/// A service the supervisor runs: its name and its future.
pub type Service = (&'static str, Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>);

/// Runs `services` until SIGTERM (then waits for each to stop) or until one of them ends on its
/// own (then returns its error).
///
/// # Errors
/// A service that ended on its own (or with an error), or, with
/// [`Variant::SigtermAsReturn`], one that ended because the node is stopping.
pub async fn supervise(
    node: &NodeCtx,
    token: CancellationToken,
    services: Vec<Service>,
    variant: Variant,
) -> Result<(), BoxError> {
    let signal = node.shutdown_signal();
    let cancel = token.clone();
    node.spawn(async move {
        signal.await;
        cancel.cancel();
    });
    let mut running = FuturesUnordered::new();
    for (name, service) in services {
        let handle = node.spawn(service);
        running.push(async move { (name, handle.await) });
    }
    let first = tokio::select! {
        // A service's failure wins over a SIGTERM that came at the same time: it is reported.
        biased;
        Some(ended) = running.next() => Some(ended),
        () = token.cancelled() => None,
    };
    if let Some((name, result)) = first {
        let stopping = match variant {
            // The planted bug (humus #959): the branch `select!` took is taken as the reason.
            // When the token fired and a service returned at once, both branches are ready if
            // this task runs after that service, and the services' branch comes first.
            Variant::SigtermAsReturn => false,
            // The fix: a service that ended after the token fired was stopping as asked.
            _ => token.is_cancelled(),
        };
        if !stopping {
            let why = match result {
                Ok(Ok(())) => "returned".to_string(),
                Ok(Err(e)) => format!("failed: {e}"),
                Err(e) => format!("panicked or was aborted: {e}"),
            };
            return Err(format!("service {name} {why} while the node was running").into());
        }
        result??;
    }
    while let Some((_, result)) = running.next().await {
        result??;
    }
    Ok(())
}
