//! The streams tracker: one task owns the table of open export streams (the actor pattern: the
//! other tasks send it messages). A stream's response body tells it when the client went away;
//! it then fires that stream's `gone` token, which stops the stream's producer between rows.
//! It also counts the open streams for the reporter.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the tracker is told.
#[derive(Debug)]
pub enum Msg {
    /// A stream opened (request id, its `gone` token).
    Open(String, CancellationToken),
    /// Its response body was dropped before the end: the client (or its connection) went away.
    Gone(String),
    /// It ended (completed or failed on the server's side).
    Done(String),
}

/// A handle to the tracker: cheap to clone.
#[derive(Clone, Debug)]
pub struct Tracker {
    tx: mpsc::UnboundedSender<Msg>,
    open: Arc<AtomicUsize>,
}

impl Tracker {
    /// Tells the tracker; a tracker that has stopped is not told.
    pub fn send(&self, msg: Msg) {
        let _ = self.tx.send(msg);
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// Starts the tracker on `node`; it runs until every [`Tracker`] handle is dropped.
pub fn start(node: &sim::node::NodeCtx) -> Tracker {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let open = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&open);
    node.spawn(async move {
        let mut streams: BTreeMap<String, CancellationToken> = BTreeMap::new();
        while let Some(msg) = rx.recv().await {
            match msg {
                Msg::Open(id, gone) => {
                    streams.insert(id, gone);
                }
                Msg::Gone(id) => {
                    if let Some(gone) = streams.remove(&id) {
                        gone.cancel();
                    }
                }
                Msg::Done(id) => {
                    streams.remove(&id);
                }
            }
            count.store(streams.len(), Ordering::Relaxed);
        }
    });
    Tracker { tx, open }
}
