//! Models of a gRPC server's shutdown, checked over the history the [`crate::server`] records.
//!
//! [`GoawayFirst`]: on SIGTERM a server sends GOAWAY on its connections *before* it ends its
//! long-lived streams. A client learns from the GOAWAY that the connection takes no new streams,
//! so the stream it reopens when the old one ends goes to a new connection — to another replica
//! behind the service. Ending the streams first (tonic issue class: "streams cancelled before
//! GOAWAY on shutdown") makes the client reopen on the same connection, on the replica that is
//! shutting down, and the reopened stream fails with UNAVAILABLE moments later.
//! ([RFC 9113 §6.8](https://www.rfc-editor.org/rfc/rfc9113#section-6.8): GOAWAY lets a server
//! stop accepting streams "while still finishing processing of previously established streams".)

use std::collections::{BTreeMap, BTreeSet};

use sim::check::{Check, Verdict};
use sim::history::Entry;

/// The oracle "GOAWAY before ending long-lived streams" (see the module docs): between a node's
/// `node.sigterm` and the `grpc.draining` of the server a stream belongs to (GOAWAY sent on every
/// connection of that server, told apart by port), no stream of the given long-lived methods may
/// be ended by the server.
#[derive(Debug)]
pub struct GoawayFirst {
    methods: BTreeSet<String>,
    /// Nodes between SIGTERM and their servers' GOAWAY: the ports that already drained.
    terminating: BTreeMap<String, BTreeSet<String>>,
}

impl GoawayFirst {
    /// Checks the streams of `methods` — paths as on the wire, `/package.Service/Method` (the
    /// `Watch` method of service `Ledger` in proto package `wallet` is `/wallet.Ledger/Watch`) —
    /// the ones that only end when the server ends them.
    pub fn long_lived<I, S>(methods: I) -> GoawayFirst
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        GoawayFirst { methods: methods.into_iter().map(Into::into).collect(), terminating: BTreeMap::new() }
    }
}

/// The `:PORT` a server's record names (`on :PORT` at the end, or `:PORT` first).
fn port_of(detail: &str, last: bool) -> String {
    let token = if last { detail.rsplit(' ').next() } else { detail.split(' ').next() };
    token.unwrap_or_default().to_string()
}

/// The oracle of [`GoawayFirst`]: no stream is cancelled before the server's GOAWAY.
pub const GOAWAY_FIRST: sim::Oracle = sim::Oracle::new("goaway-first");

impl Check for GoawayFirst {
    fn name(&self) -> &str {
        "goaway-first"
    }

    fn wants(&self, kind: &str) -> bool {
        matches!(kind, "node.sigterm" | "grpc.draining" | "node.start" | "node.exit" | "node.crash" | "grpc.stream.end")
    }

    fn on_event(&mut self, event: &Entry) -> Verdict {
        match event.kind.as_str() {
            "node.sigterm" => {
                self.terminating.insert(event.identity.clone(), BTreeSet::new());
            }
            "grpc.draining" => {
                if let Some(drained) = self.terminating.get_mut(&event.identity) {
                    drained.insert(port_of(&event.detail, false));
                }
            }
            "node.start" | "node.exit" | "node.crash" => {
                self.terminating.remove(&event.identity);
            }
            "grpc.stream.end" => {
                let Some(drained) = self.terminating.get(&event.identity) else { return Verdict::Pass };
                let path = event.detail.split(' ').next().unwrap_or_default();
                let by_server = !event.detail.contains("cancelled (dropped unfinished)");
                if self.methods.contains(path) && by_server && !drained.contains(&port_of(&event.detail, true)) {
                    return Verdict::Violation(format!(
                        "{} ended a {path} stream after SIGTERM but before sending GOAWAY ({}): its client reopens on \
                         the connection it has, to the replica that is shutting down",
                        event.identity, event.detail
                    ));
                }
            }
            _ => {}
        }
        Verdict::Pass
    }
}
