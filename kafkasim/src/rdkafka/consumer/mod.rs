//! Consumers (rdkafka's `consumer`): [`StreamConsumer`] (created from a `ClientConfig`),
//! [`BaseConsumer`] (the handle rebalance callbacks get), the [`Consumer`] trait both implement,
//! and the [`ConsumerContext`] callbacks.
//!
//! Semantics are librdkafka 2.12's (`INTRODUCTION.md`, "Consumer groups" and "Offset
//! management"; `CONFIGURATION.md`): offsets stored and committed are the next offset to read;
//! with `enable.auto.offset.store` (default true) a message's offset + 1 is stored as `recv()`
//! returns it; with `enable.auto.commit` (default true) stored offsets are committed every
//! `auto.commit.interval.ms`, before partitions are revoked and when the consumer is dropped.
//! A newly assigned partition starts at its committed offset, else where `auto.offset.reset`
//! says. Rebalance callbacks and commit callbacks run from `recv()`.
//!
//! Dropping a `StreamConsumer` closes it as librdkafka's `rd_kafka_consumer_close` does (the
//! group assignment revoked through the rebalance callbacks, stored offsets committed,
//! LeaveGroup); rdkafka's drop waits for that, ours cannot, so `StreamConsumer::close().await`
//! (not in rdkafka) waits for it. On a simulation node every task of the consumer is spawned
//! through the node's `NodeCtx`: a crash ends them with the incarnation, as a process's
//! librdkafka threads die with it.
//!
//! Where rdkafka blocks the calling thread (a `CommitMode::Sync` commit, `committed`,
//! `committed_offsets`, `offsets_for_times`, `fetch_watermarks`) this client cannot — a
//! simulation runs on one thread — so those methods return futures, as madsim-rdkafka's do. A
//! commit is queued when the method is called, so a `CommitMode::Async` commit needs no
//! `.await` (its future is ready at once; the result goes to `commit_callback`).
//!
//! Files, one concept each, each using only those before it: `settings` (configuration read),
//! `positions` (per-partition state and the consumer queue), `wire` (requests, record decoding,
//! one-shot offset lookups), `fetcher` (the fetch task), `group` (the group membership; its
//! `assignor` also defines [`RebalanceProtocol`]), `inner` (what a consumer's handles share),
//! `context` (the callbacks and the [`BaseConsumer`] handle they get), `api` (the [`Consumer`]
//! trait, [`CommitMode`]), `commit` (commits and their callbacks), `rebalance` (group events
//! applied with the callbacks; the close), `lookups` (committed/offset lookups),
//! `base_consumer` (the consumer itself), `stream_consumer` (`recv`, `stream`).

mod api;
pub mod base_consumer;
pub(crate) mod commit;
pub mod context;
pub(crate) mod fetcher;
pub(crate) mod group;
pub(crate) mod inner;
pub(crate) mod lookups;
pub(crate) mod positions;
pub(crate) mod rebalance;
pub mod settings;
pub mod stream_consumer;
pub(crate) mod wire;

pub use api::{CommitMode, Consumer};
pub use base_consumer::BaseConsumer;
pub use context::{ConsumerContext, DefaultConsumerContext, Rebalance};
pub use group::assignor::RebalanceProtocol;
pub use stream_consumer::{MessageStream, StreamConsumer};
