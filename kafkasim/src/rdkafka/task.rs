//! Where a client's background tasks run: on a simulation node through its `NodeCtx`, so they
//! die with the incarnation (a killed process's librdkafka threads die with it), else on the
//! tokio runtime.

use std::future::Future;

/// Spawns one of a client's background tasks: on a simulation node through its `NodeCtx`, so it is
/// aborted when the incarnation ends (a crashed process's librdkafka threads die with it), else
/// on the tokio runtime.
pub(crate) fn spawn_task<F>(task: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match sim::node::NodeCtx::current() {
        Some(node) => drop(node.spawn(task)),
        None => {
            // Outside a runtime (a consumer dropped on a plain thread) there is nothing to run
            // it on: the task (a commit answer's bookkeeping) is dropped rather than panicking.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                drop(rt.spawn(task));
            }
        }
    }
}
