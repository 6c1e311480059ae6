//! A fake Kafka cluster on the real wire protocol, for deterministic simulation tests and for
//! loopback tests with real clients.
//!
//! - **In a simulation** ([`Cluster::serve_sim`]): brokers listen on the run's simulated
//!   network (`kafka-0:9092`, …); tokio clients on the same run replay exactly from the seed.
//! - **On loopback** ([`Broker::start_local`], [`Cluster::start_local`]): brokers listen on
//!   `127.0.0.1` on their own runtime thread, for clients with their own threads (rdkafka).
//!
//! Every request and response goes through the `kafka-protocol` crate ([`codec`]); what is
//! served, and what is not yet, is in the guide, `docs/src/kafkasim.md`.
//!
//! | module | holds |
//! |---|---|
//! | [`broker`] | [`Cluster`], its builder, faults and controls ([`Control`]), request handlers and the connection loop |
//! | [`codec`] | frames, headers, versions served, decode/encode through `kafka-protocol` |
//! | [`log`] | partitions: batches, offsets, high watermark, log start |
//! | [`groups`] | the classic group coordinator (a type of its own, seeing the cluster through a small trait) and offset commits |
//! | [`producer_ids`] | idempotent producer ids and sequences |
//! | [`faults`] | faults keyed on identity (installed as [`sim::fault`] faults on the [`Cluster`]) |
//! | [`introspect`] | group, commit and partition histories for oracles |
//! | [`local`] | the loopback mode |
//! | [`client`] | a protocol-level client for tests and simulations |
//! | [`requests`] | one-partition requests as clients send them, for that client |
//! | [`models`] | the queue models Q1–Q9: oracles over what consumers did and what the broker saw |
//! | [`rdkafka`] | a client with rdkafka's API shape (the producer): in a simulation node through its host, else real sockets |
//! | [`history`] | partitions as list-append logs for `sim::check::list_append`: recording produces, fetches, consumers and final reads |
//!
//! Layers, each using only those below it (no import cycle; `tests/layers.rs` checks):
//! `error`, `log`, `producer_ids`, `faults`, `introspect` → `codec` → `groups` → `broker` →
//! `client`, `requests`, `local` → `history`, `models`, `rdkafka` (which uses `client` and
//! `requests` only).

pub mod broker;
pub mod client;
pub mod codec;
mod error;
pub mod faults;
pub mod groups;
pub mod history;
pub mod introspect;
pub mod local;
pub mod log;
pub mod models;
pub mod producer_ids;
pub mod rdkafka;
pub mod requests;
pub mod topic_config;
pub(crate) mod transactions;

pub use broker::{Cluster, ClusterBuilder, Control};
pub use client::Client;
pub use error::{Error, check_code};
pub use faults::{Fault, FaultAction};
pub use introspect::{CommitRecord, Generation, GroupView, MemberView, PartitionView};
pub use kafka_protocol;
pub use local::{Broker, LocalBroker};
pub use sim::fault::{FaultGuard, Scheduled};
