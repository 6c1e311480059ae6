//! The cluster: brokers, topics, the request handlers, and the connection loop both transports
//! share.
//!
//! A [`Cluster`] is N brokers (ids `0..N`) sharing one state: a partition's log lives once, and
//! "replication" is instant, so every broker sees the same data; what differs per broker is who
//! leads a partition (produce and fetch to another broker are `NOT_LEADER_OR_FOLLOWER`) and who
//! coordinates a group (group requests to another broker are `NOT_COORDINATOR`). Leaders are
//! spread over the brokers at topic creation; a group's coordinator is a stable hash of its id
//! over the brokers (Kafka hashes it to a `__consumer_offsets` partition).
//!
//! [`Cluster::serve_connection`] is the whole broker for one connection, generic over any
//! `AsyncRead + AsyncWrite`: requests are handled one at a time and answered in order, as a
//! Kafka broker mutes a connection while a request is in flight. [`Cluster::serve_sim`] runs it
//! on the simulated network; [`Cluster::start_local`] on real loopback sockets.
//!
//! | module | holds |
//! |---|---|
//! | `cluster` | [`Cluster`], its shared state, placement of leaders and coordinators |
//! | `builder` | [`ClusterBuilder`] |
//! | `control` | faults and controls: [`Control`], the [`sim::fault::Target`] and [`sim::fault::Fault`] impls |
//! | `conn` | serving: the simulated listeners, the connection loop, request dispatch |
//! | `topics` | topics: Metadata, CreateTopics, DeleteTopics |
//! | `produce` | Produce and InitProducerId |
//! | `fetch` | Fetch and ListOffsets |
//! | `cleaner` | the log cleaner: compaction of `cleanup.policy=compact` topics on the cluster's clock |
//! | `retention` | the retention checks: `retention.ms` and `retention.bytes` on the cluster's clock |
//! | `coordination` | FindCoordinator, and the cluster as the group coordinator's env |
//! | `txn` | the transaction coordinator: InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn |
//! | `views` | introspection for oracles |

mod builder;
mod cleaner;
mod cluster;
mod configs;
mod conn;
mod control;
mod coordination;
mod fetch;
mod produce;
mod retention;
mod topics;
mod txn;
mod views;

pub use builder::ClusterBuilder;
pub use cluster::{Cluster, FETCH_WAIT_MAX, PARTITIONS_MAX, SIM_PORT, TOPICS_MAX};
pub use control::Control;
pub use topics::{OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS};
