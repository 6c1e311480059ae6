//! Example services with simulation tests; each pins one bug class with a planted bug.
//!
//! | walkthrough | services | planted bugs |
//! |---|---|---|
//! | [`shoppingcart`] | axum: identity, catalog, cart | non-atomic idempotency check at checkout; no drain on SIGTERM |
//! | [`wallet`] | tonic: ledger (2 replicas, server streaming), keyset, wallet | streams cancelled before GOAWAY; a breaker counting rollout stream ends |
//!
//! The binary (`cargo run --release -p walkthroughs -- --seeds 300`) is the main job: it sweeps
//! every walkthrough, correct and planted variants, and prints what it found with replay lines.

pub mod shoppingcart;
pub mod wallet;
