//! What a delivery report says (rdkafka 0.39's `Delivery` and `OwnedDeliveryResult`), and a
//! message waiting for one.

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::rdkafka::error::KafkaError;
use crate::rdkafka::message::{OwnedMessage, Timestamp};

/// Where a message was delivered (rdkafka 0.39's `Delivery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// The partition.
    pub partition: i32,
    /// Its offset there; -1001 with `acks=0` (librdkafka's `RD_KAFKA_OFFSET_INVALID`).
    pub offset: i64,
    /// Its timestamp: the create time sent (or `LogAppendTime` when the broker set it).
    pub timestamp: Timestamp,
}

/// A delivery report: the delivery, or the error and the message back.
pub type OwnedDeliveryResult = Result<Delivery, (KafkaError, OwnedMessage)>;

/// A message in the producer, from `send` to its report.
#[derive(Debug)]
pub struct Pending {
    /// The message (partition -1 until one is chosen).
    pub message: OwnedMessage,
    /// Where its report goes.
    pub reply: oneshot::Sender<OwnedDeliveryResult>,
    /// When it was sent to the producer.
    pub enqueued: Instant,
    /// When it expires (`message.timeout.ms` after `enqueued`), if ever.
    pub deadline: Option<Instant>,
}

impl Pending {
    /// Reports `result` (nobody may be waiting any more: then nothing happens).
    pub fn report(self, result: Result<Delivery, KafkaError>) {
        let out = result.map_err(|e| (e, self.message));
        let _ = self.reply.send(out);
    }
}
