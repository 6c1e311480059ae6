//! Example services with simulation tests; each pins one bug class with a planted bug.
//!
//! | walkthrough | services | planted bugs |
//! |---|---|---|
//! | [`shoppingcart`] | axum: identity, catalog, cart | non-atomic idempotency check at checkout; no drain on SIGTERM |
//! | [`databases`] | kube-rs operator (2 replicas, Lease election) on kubesim, database service | Secret re-created from a stale read (rotation lost); Lease merge-patched without resourceVersion (split brain) |
//! | [`orderstatus`] | axum + Kafka (rdkafka-shaped client): order events produced by the API, a consumer group (1–3 replicas) projecting them into a store | a late commit after a rebalance, unfenced (humus #757) |
//! | [`export`] | axum over HTTP/2 streaming rows, a hand-written supervisor, a streams tracker | SIGTERM reported as a service returning (humus #959); a client going away logged as a failed response (humus #1144) — both found in explore mode |
//! | [`wallet`] | tonic: ledger (2 replicas, server streaming), keyset, wallet | streams cancelled before GOAWAY; a breaker counting rollout stream ends |
//!
//! The binary (`cargo run --release -p walkthroughs -- --seeds 300`) is the main job: it sweeps
//! every walkthrough, correct and planted variants, and prints what it found with replay lines.

pub mod databases;
pub mod export;
pub mod orderstatus;
pub mod shoppingcart;
pub mod wallet;
