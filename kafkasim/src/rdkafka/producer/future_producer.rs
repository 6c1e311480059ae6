//! The future producer (rdkafka's `producer::future_producer`): [`FutureProducer`] and
//! [`FutureRecord`]; `send` resolves with the delivery report.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::rdkafka::client::{ClientContext, DefaultClientContext};
use crate::rdkafka::config::{ClientConfig, FromClientConfigAndContext};
use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use crate::rdkafka::message::{OwnedHeaders, OwnedMessage, Timestamp, ToBytes};
use crate::rdkafka::net::Dialer;
use crate::rdkafka::producer::delivery::Pending;
pub use crate::rdkafka::producer::delivery::{Delivery, OwnedDeliveryResult};
use crate::rdkafka::producer::sender::{self, Command, Shared};
use crate::rdkafka::producer::settings::ProducerSettings;
use crate::rdkafka::util::{Timeout, now_millis};

/// A record to send (rdkafka's `FutureRecord`): borrowed key and payload.
///
/// ```
/// use kafkasim::rdkafka::producer::FutureRecord;
/// let r = FutureRecord::to("orders").key("k").payload("v").partition(2);
/// assert_eq!((r.topic, r.partition), ("orders", Some(2)));
/// ```
#[derive(Debug)]
pub struct FutureRecord<'a, K: ToBytes + ?Sized, P: ToBytes + ?Sized> {
    /// The topic.
    pub topic: &'a str,
    /// The partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The payload; `None` is a null value.
    pub payload: Option<&'a P>,
    /// The key; `None` is a null key.
    pub key: Option<&'a K>,
    /// The create time (ms since the epoch); `None` is now.
    pub timestamp: Option<i64>,
    /// The headers.
    pub headers: Option<OwnedHeaders>,
}

impl<'a, K: ToBytes + ?Sized, P: ToBytes + ?Sized> FutureRecord<'a, K, P> {
    /// A record for `topic`, with nothing else set.
    pub fn to(topic: &'a str) -> FutureRecord<'a, K, P> {
        FutureRecord { topic, partition: None, payload: None, key: None, timestamp: None, headers: None }
    }

    /// With this partition.
    #[must_use]
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// With this payload.
    #[must_use]
    pub fn payload(mut self, payload: &'a P) -> Self {
        self.payload = Some(payload);
        self
    }

    /// With this key.
    #[must_use]
    pub fn key(mut self, key: &'a K) -> Self {
        self.key = Some(key);
        self
    }

    /// With this create time (ms since the epoch).
    #[must_use]
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// With these headers.
    #[must_use]
    pub fn headers(mut self, headers: OwnedHeaders) -> Self {
        self.headers = Some(headers);
        self
    }

    fn to_owned_message(&self) -> OwnedMessage {
        OwnedMessage::new(
            self.payload.map(|p| p.to_bytes().to_vec()),
            self.key.map(|k| k.to_bytes().to_vec()),
            self.topic.to_string(),
            Timestamp::CreateTime(self.timestamp.unwrap_or_else(now_millis)),
            self.partition.unwrap_or(-1),
            -1,
            self.headers.clone(),
        )
    }
}

/// The delivery report's future (rdkafka's `DeliveryFuture`): `Err(Canceled)` when the producer
/// was dropped (its task ended) before the report.
#[derive(Debug)]
pub struct DeliveryFuture {
    rx: oneshot::Receiver<OwnedDeliveryResult>,
}

/// The producer went away before reporting (rdkafka's `futures::channel::oneshot::Canceled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Canceled;

impl std::fmt::Display for Canceled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneshot canceled")
    }
}

impl std::error::Error for Canceled {}

impl Future for DeliveryFuture {
    type Output = Result<OwnedDeliveryResult, Canceled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|r| r.map_err(|_| Canceled))
    }
}

/// A producer whose `send` is a future of the delivery report (rdkafka's `FutureProducer`).
/// Cheap to clone: the clones share one background task, which ends when the last clone is
/// dropped (undelivered messages' futures then resolve `Err(Canceled)`).
///
/// Create it with [`ClientConfig::create`] on a task of the node it runs on (inside a
/// simulation) or on a tokio runtime (outside): it dials through that node's host, else real
/// sockets.
pub struct FutureProducer<C: ClientContext = DefaultClientContext> {
    tx: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
    settings: Arc<ProducerSettings>,
    context: Arc<C>,
}

impl<C: ClientContext> Clone for FutureProducer<C> {
    fn clone(&self) -> Self {
        FutureProducer {
            tx: self.tx.clone(),
            shared: Arc::clone(&self.shared),
            settings: Arc::clone(&self.settings),
            context: Arc::clone(&self.context),
        }
    }
}

impl<C: ClientContext> std::fmt::Debug for FutureProducer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FutureProducer").field("client_id", &self.settings.client_id).finish_non_exhaustive()
    }
}

impl<C: ClientContext> FromClientConfigAndContext<C> for FutureProducer<C> {
    /// # Errors
    /// [`KafkaError::ClientConfig`] for a bad property, [`KafkaError::ClientCreation`] for
    /// inconsistent settings, outside a tokio runtime, or inside a simulation run but not on a
    /// node's task.
    fn from_config_and_context(config: &ClientConfig, context: C) -> KafkaResult<FutureProducer<C>> {
        let settings = ProducerSettings::from_config(config)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(KafkaError::ClientCreation("kafkasim::rdkafka needs a tokio runtime".into()));
        }
        let dialer = Dialer::current(crate::rdkafka::net::setup_timeout(config)).map_err(KafkaError::ClientCreation)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        sender::spawn(settings.clone(), dialer, rx, Arc::clone(&shared));
        Ok(FutureProducer { tx, shared, settings: Arc::new(settings), context: Arc::new(context) })
    }
}

impl<C: ClientContext> FutureProducer<C> {
    /// Queues `record` and returns the future of its report (rdkafka's `send_result`).
    ///
    /// # Errors
    /// `(KafkaError::MessageProduction(QueueFull), record)` when `queue.buffering.max.messages`
    /// are waiting; `MessageSizeTooLarge` for a record over `message.max.bytes`; `Fatal` after a
    /// fatal error; `(KafkaError::Canceled, record)` when the background task is gone.
    #[allow(clippy::result_large_err, reason = "rdkafka's signature")]
    pub fn send_result<'a, K: ToBytes + ?Sized, P: ToBytes + ?Sized>(
        &self,
        record: FutureRecord<'a, K, P>,
    ) -> Result<DeliveryFuture, (KafkaError, FutureRecord<'a, K, P>)> {
        if self.fatal_error().is_some() {
            return Err((KafkaError::MessageProduction(RDKafkaErrorCode::Fatal), record));
        }
        let size = record.key.map_or(0, |k| k.to_bytes().len()) + record.payload.map_or(0, |p| p.to_bytes().len());
        if size > self.settings.message_bytes_max {
            return Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), record));
        }
        let max = self.settings.queue_messages_max;
        if max > 0 && self.shared.pending.load(Ordering::SeqCst) >= max {
            return Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), record));
        }
        let (reply, rx) = oneshot::channel();
        let now = Instant::now();
        let pending = Pending {
            message: record.to_owned_message(),
            reply,
            enqueued: now,
            deadline: self.settings.message_timeout.map(|t| now + t),
        };
        self.shared.pending.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(Command::Send(pending)).is_err() {
            self.shared.pending.fetch_sub(1, Ordering::SeqCst);
            return Err((KafkaError::Canceled, record));
        }
        Ok(DeliveryFuture { rx })
    }

    /// Sends `record` and waits for its report (rdkafka's `send`). While the queue is full it
    /// retries every 100 ms for up to `queue_timeout` (as rdkafka does), then reports
    /// `QueueFull`.
    #[allow(clippy::result_large_err, reason = "rdkafka's signature")]
    pub async fn send<K: ToBytes + ?Sized, P: ToBytes + ?Sized, T: Into<Timeout>>(
        &self,
        record: FutureRecord<'_, K, P>,
        queue_timeout: T,
    ) -> OwnedDeliveryResult {
        let give_up = queue_timeout.into().as_duration().map(|d| Instant::now() + d);
        let mut record = record;
        loop {
            match self.send_result(record) {
                Ok(future) => {
                    return future.await.unwrap_or_else(|Canceled| {
                        Err((
                            KafkaError::Canceled,
                            OwnedMessage::new(None, None, String::new(), Timestamp::NotAvailable, -1, -1, None),
                        ))
                    });
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if give_up.is_none_or(|t| Instant::now() < t) =>
                {
                    record = r;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err((e, r)) => return Err((e, r.to_owned_message())),
            }
        }
    }

    /// Waits until every message sent is reported, sending at once what lingers (rdkafka's
    /// `Producer::flush`, async here).
    ///
    /// # Errors
    /// `KafkaError::Flush(OperationTimedOut)` when `timeout` passes first.
    pub async fn flush<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Flush(tx)).is_err() {
            return Ok(());
        }
        let wait = async {
            let _ = rx.await;
        };
        match timeout.into().as_duration() {
            None => {
                wait.await;
                Ok(())
            }
            Some(d) => {
                tokio::time::timeout(d, wait).await.map_err(|_| KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut))
            }
        }
    }

    /// Messages sent and not yet reported (rdkafka's `in_flight_count`).
    pub fn in_flight_count(&self) -> i32 {
        i32::try_from(self.shared.pending.load(Ordering::SeqCst)).unwrap_or(i32::MAX)
    }

    /// The fatal error, if the producer had one: `(code, reason)` (rdkafka's
    /// `client().fatal_error()`). With idempotence, `OutOfOrderSequenceNumber` is fatal.
    pub fn fatal_error(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.shared.fatal.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The context it was created with.
    pub fn context(&self) -> &Arc<C> {
        &self.context
    }
}
