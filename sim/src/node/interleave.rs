//! Interleavings inside a node: the order in which one node's ready tasks are polled.
//!
//! A node's tasks run on the run's single-threaded runtime, which polls ready tasks in the order
//! they were woken: in replay mode that order is fixed by the code, so a bug that needs another
//! order (a supervisor polled after the service it cancelled had already returned; a write error
//! handled before the task that would have said "the client went away") never shows. Two things
//! change it, both exact per seed:
//!
//! - **explore mode** (`SIM_MODE=explore`): before a poll of a node task, the seed may make the task
//!   *yield* instead — wake itself and return `Pending`, so every task woken before its next turn
//!   runs first (a Go scheduler's preemption at an await point). The rate is drawn once per run
//!   (1 poll in 32, 16, 8 or 4, stream `node/interleave`), the draws from the same stream; a task
//!   never yields twice in a row.
//! - a **scripted hold** ([`hold_polls`]): the next polls of the tasks a [`TaskSite`] names
//!   yield, in either mode: a scenario test pins one interleaving with it.
//!
//! Which tasks: a node's entry point, the tasks it spawns with
//! [`NodeCtx::spawn`](crate::node::NodeCtx::spawn) and those its
//! [`NodeCtx::executor`](crate::node::NodeCtx::executor) spawns for hyper (connections, HTTP/2
//! streams). A task spawned with plain `tokio::spawn` runs in wake order. Each yield is recorded
//! as a `node.yield` history event naming the task's site.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use crate::run::{Ctx, Mode};
use crate::seed::Source;

/// Which of a node's tasks a scripted hold applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskSite {
    /// The node's entry point (its root task).
    Entry,
    /// The tasks hyper spawns through [`NodeCtx::executor`](crate::node::NodeCtx::executor):
    /// connections and HTTP/2 streams.
    Executor,
    /// Tasks spawned with [`NodeCtx::spawn`](crate::node::NodeCtx::spawn) from a source file
    /// whose path ends with this, on a `/` boundary (`"tracker.rs"`, `"src/export/tracker.rs"`;
    /// not empty).
    SpawnedIn(String),
}

/// Where a wrapped task was spawned.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Site {
    Entry,
    Executor,
    Spawned(&'static Location<'static>),
}

impl Site {
    fn matches(self, site: &TaskSite) -> bool {
        match (self, site) {
            (Site::Entry, TaskSite::Entry) | (Site::Executor, TaskSite::Executor) => true,
            (Site::Spawned(at), TaskSite::SpawnedIn(file)) => {
                // On a path boundary: "tracker.rs" is not "subtracker.rs".
                let path = at.file();
                path == file || path.strip_suffix(file.as_str()).is_some_and(|head| head.ends_with('/'))
            }
            _ => false,
        }
    }

    fn describe(self) -> String {
        match self {
            Site::Entry => "entry".to_string(),
            Site::Executor => "executor".to_string(),
            Site::Spawned(at) => format!("spawned at {}:{}", at.file(), at.line()),
        }
    }
}

/// One scripted hold.
struct Hold {
    node: String,
    site: TaskSite,
    polls: u32,
}

/// The run's interleaving state (a [`Ctx`] extension).
#[derive(Default)]
pub(crate) struct Interleave {
    /// Explore mode, or a hold was ever set: polls consult `state`.
    active: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Explore mode's yield rate (1 in this many polls) and its draws; drawn at the first poll.
    explore: Option<Option<(u64, Source)>>,
    holds: Vec<Hold>,
}

impl Interleave {
    /// The run's state, armed for explore mode (once per incarnation: its tasks share it).
    pub(crate) fn of(ctx: &Ctx) -> std::sync::Arc<Interleave> {
        let interleave = ctx.extension::<Interleave>();
        if ctx.mode() == Mode::Explore {
            interleave.active.store(true, Ordering::Relaxed);
        }
        interleave
    }

    /// Whether this poll of a task of `node` at `site` yields; records it if so.
    fn should_yield(&self, ctx: &Ctx, node: &str, site: Site) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let held = state.holds.iter_mut().find(|h| h.polls > 0 && h.node == node && site.matches(&h.site));
        let why = if let Some(hold) = held {
            hold.polls -= 1;
            "held"
        } else {
            let explore = state.explore.get_or_insert_with(|| {
                (ctx.mode() == Mode::Explore).then(|| {
                    let mut source = ctx.source("node/interleave");
                    let one_in = [32, 16, 8, 4][source.below(4) as usize];
                    (one_in, source)
                })
            });
            let drawn = match explore {
                Some((one_in, source)) => source.ratio(1, *one_in),
                None => false,
            };
            if !drawn {
                return false;
            }
            "explore"
        };
        drop(state);
        ctx.record("node.yield", node, format!("{} ({why})", site.describe()));
        true
    }
}

/// Makes the next `polls` polls of `node`'s tasks at `site` yield first (see the module's
/// docs): a scripted interleaving for a scenario test, recorded as a `node.hold` history event.
///
/// A hold is keyed by the node's name, so one left unused carries over to the node's next
/// incarnation; it is used up only by polls of matching tasks, one per poll, each recorded as a
/// `node.yield` event. A hold that names no task of a running node does nothing: the trace's
/// `node.hold` line without `node.yield (held)` lines after it shows that.
///
/// # Panics
/// If `site` is `SpawnedIn("")` (it would name every spawned task).
pub fn hold_polls(ctx: &Ctx, node: &str, site: TaskSite, polls: u32) {
    assert!(
        site != TaskSite::SpawnedIn(String::new()),
        "hold_polls: TaskSite::SpawnedIn needs a file name (\"tracker.rs\", \"src/export/tracker.rs\")"
    );
    ctx.record("node.hold", node, format!("{site:?}: the next {polls} polls yield"));
    let interleave = ctx.extension::<Interleave>();
    interleave.active.store(true, Ordering::Relaxed);
    interleave.state.lock().unwrap_or_else(|p| p.into_inner()).holds.push(Hold { node: node.to_string(), site, polls });
}

pin_project_lite::pin_project! {
    /// A node task's future, polled through the run's [`Interleave`].
    pub(crate) struct Perturbed<F> {
        #[pin]
        inner: F,
        ctx: Ctx,
        interleave: std::sync::Arc<Interleave>,
        node: std::sync::Arc<str>,
        site: Site,
        yielded: bool,
    }
}

impl<F> Perturbed<F> {
    pub(crate) fn new(
        inner: F,
        ctx: &Ctx,
        interleave: std::sync::Arc<Interleave>,
        node: std::sync::Arc<str>,
        site: Site,
    ) -> Perturbed<F> {
        Perturbed { inner, ctx: ctx.clone(), interleave, node, site, yielded: false }
    }
}

impl<F: Future> Future for Perturbed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if !*this.yielded
            && this.interleave.active.load(Ordering::Relaxed)
            && this.interleave.should_yield(this.ctx, this.node, *this.site)
        {
            *this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        *this.yielded = false;
        this.inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{Site, TaskSite};

    #[test]
    fn a_spawn_site_matches_a_file_on_a_path_boundary() {
        let here = Site::Spawned(std::panic::Location::caller());
        let named = |f: &str| TaskSite::SpawnedIn(f.to_string());
        assert!(here.matches(&named("interleave.rs")));
        assert!(here.matches(&named("node/interleave.rs")));
        assert!(here.matches(&named("sim/src/node/interleave.rs")));
        assert!(!here.matches(&named("leave.rs")));
        assert!(!here.matches(&named("tracker.rs")));
        assert!(!here.matches(&TaskSite::Entry));
        assert!(Site::Entry.matches(&TaskSite::Entry));
        assert!(!Site::Entry.matches(&TaskSite::Executor));
    }
}
