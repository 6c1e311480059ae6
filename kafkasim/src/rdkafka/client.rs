//! The client context (rdkafka's `client::ClientContext`): what a user plugs into a client.
//! Here it carries no callbacks yet; it exists so `create_with_context` and
//! `FutureProducer<C>` keep rdkafka's shapes.

/// A user's context for a client (rdkafka's `ClientContext`; its log, error and statistics
/// callbacks are not called by this client).
pub trait ClientContext: Send + Sync + 'static {}

/// The context used by [`crate::rdkafka::config::ClientConfig::create`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClientContext;

impl ClientContext for DefaultClientContext {}
