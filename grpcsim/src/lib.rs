//! Real tonic (h2, hyper, tower) over the simulated network: serving on nodes with a modelled
//! graceful shutdown, channels over a node's host with a seeded balancer that follows rollouts,
//! and checks of gRPC's promises.
//!
//! | module | holds |
//! |---|---|
//! | [`server`] | [`Server`]: tonic routes on a node; SIGTERM → NOT_SERVING, GOAWAY, then drain (tonic's unbounded wait, or a drain bound, or max connection age) |
//! | [`client`] | channels over a host ([`client::channel`], lazy or eager) and the seeded balancer over a service's replicas ([`client::balanced`]) |
//! | [`calls`] | the call log: every call and stream ends with exactly one status ([`calls::OneStatus`]) |
//! | [`checks`] | server and rollout models: GOAWAY before cancelling ([`checks::GoawayFirst`]) |
//! | [`breaker`] | a checker for a client-side circuit breaker you implement |
//! | [`probe`] | a small test service (unary `Call`, server-streaming `Stream`) compiled with protox (no protoc) |

pub mod breaker;
pub mod calls;
pub mod checks;
pub mod client;
pub mod probe;
pub mod server;

pub use breaker::BREAKER;
pub use calls::ONE_STATUS;
pub use checks::GOAWAY_FIRST;
pub use server::{Draining, Server};
