//! Messages as rdkafka shapes them: the [`Message`] trait, [`OwnedMessage`],
//! [`BorrowedMessage`] (what a consumer returns), headers
//! ([`Headers`], [`OwnedHeaders`], [`Header`]), [`Timestamp`], and [`ToBytes`] / [`FromBytes`]
//! for keys and payloads.

use crate::rdkafka::util::now_millis;

/// A record's timestamp (rdkafka's `Timestamp`): milliseconds since the Unix epoch, and which
/// kind (Kafka's record batch attribute: the producer's create time or the broker's append time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timestamp {
    /// No timestamp.
    NotAvailable,
    /// Set by the producer (milliseconds since the epoch).
    CreateTime(i64),
    /// Set by the broker on append (milliseconds since the epoch).
    LogAppendTime(i64),
}

impl Timestamp {
    /// The milliseconds, `None` when not available (or negative, as rdkafka reads -1).
    pub fn to_millis(self) -> Option<i64> {
        match self {
            Timestamp::NotAvailable => None,
            Timestamp::CreateTime(-1) | Timestamp::LogAppendTime(-1) => None,
            Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => Some(t),
        }
    }

    /// A create time of now (the run's wall clock inside a simulation).
    pub fn now() -> Timestamp {
        Timestamp::CreateTime(now_millis())
    }
}

impl From<i64> for Timestamp {
    fn from(millis: i64) -> Timestamp {
        Timestamp::CreateTime(millis)
    }
}

/// What can be a key or payload: viewed as bytes (rdkafka's `ToBytes`).
pub trait ToBytes {
    /// The bytes.
    fn to_bytes(&self) -> &[u8];
}

impl ToBytes for [u8] {
    fn to_bytes(&self) -> &[u8] {
        self
    }
}

impl ToBytes for str {
    fn to_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl ToBytes for Vec<u8> {
    fn to_bytes(&self) -> &[u8] {
        self.as_slice()
    }
}

impl ToBytes for String {
    fn to_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl<const N: usize> ToBytes for [u8; N] {
    fn to_bytes(&self) -> &[u8] {
        self
    }
}

impl<T: ToBytes + ?Sized> ToBytes for &T {
    fn to_bytes(&self) -> &[u8] {
        (*self).to_bytes()
    }
}

impl ToBytes for () {
    fn to_bytes(&self) -> &[u8] {
        &[]
    }
}

/// What a key or payload can be viewed as (rdkafka's `FromBytes`).
pub trait FromBytes {
    /// Why the bytes are not one.
    type Error;
    /// The bytes viewed as `Self`.
    ///
    /// # Errors
    /// When they are not one (`str`: not UTF-8).
    fn from_bytes(bytes: &[u8]) -> Result<&Self, Self::Error>;
}

impl FromBytes for [u8] {
    type Error = ();
    fn from_bytes(bytes: &[u8]) -> Result<&[u8], ()> {
        Ok(bytes)
    }
}

impl FromBytes for str {
    type Error = std::str::Utf8Error;
    fn from_bytes(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(bytes)
    }
}

/// One record header: a key and an optional value (rdkafka's `Header`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a, V> {
    /// The header's key.
    pub key: &'a str,
    /// The header's value; `None` is a null value (not an empty one).
    pub value: Option<V>,
}

/// A record's headers, in order, duplicates kept (rdkafka's `Headers`).
pub trait Headers {
    /// How many.
    fn count(&self) -> usize;

    /// The header at `idx`, `None` past the end.
    fn try_get(&self, idx: usize) -> Option<Header<'_, &[u8]>>;

    /// The header at `idx`.
    ///
    /// # Panics
    /// When `idx >= self.count()`, as rdkafka's does.
    fn get(&self, idx: usize) -> Header<'_, &[u8]> {
        self.try_get(idx).unwrap_or_else(|| panic!("header index {idx} out of bounds ({})", self.count()))
    }

    /// The headers in order.
    fn iter(&self) -> HeadersIter<'_, Self>
    where
        Self: Sized,
    {
        HeadersIter { headers: self, index: 0 }
    }
}

/// An iterator over [`Headers`].
#[derive(Debug)]
pub struct HeadersIter<'a, H> {
    headers: &'a H,
    index: usize,
}

impl<'a, H: Headers> Iterator for HeadersIter<'a, H> {
    type Item = Header<'a, &'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        let h = self.headers.try_get(self.index)?;
        self.index += 1;
        Some(h)
    }
}

/// Owned headers, built by chaining [`OwnedHeaders::insert`] (rdkafka's `OwnedHeaders`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnedHeaders {
    headers: Vec<(String, Option<Vec<u8>>)>,
}

impl OwnedHeaders {
    /// No headers.
    pub fn new() -> OwnedHeaders {
        OwnedHeaders::default()
    }

    /// No headers, with room for `capacity`.
    pub fn new_with_capacity(capacity: usize) -> OwnedHeaders {
        OwnedHeaders { headers: Vec::with_capacity(capacity) }
    }

    /// These headers and `header` after them.
    #[must_use]
    pub fn insert<V: ToBytes + ?Sized>(mut self, header: Header<'_, &V>) -> OwnedHeaders {
        self.headers.push((header.key.to_string(), header.value.map(|v| v.to_bytes().to_vec())));
        self
    }
}

impl Headers for OwnedHeaders {
    fn count(&self) -> usize {
        self.headers.len()
    }

    fn try_get(&self, idx: usize) -> Option<Header<'_, &[u8]>> {
        self.headers.get(idx).map(|(k, v)| Header { key: k.as_str(), value: v.as_deref() })
    }
}

/// A message: a record with where it is (rdkafka's `Message`).
pub trait Message {
    /// The headers' type.
    type Headers: Headers;

    /// The key; `None` for a null key.
    fn key(&self) -> Option<&[u8]>;
    /// The payload (value); `None` for a null one (a tombstone).
    fn payload(&self) -> Option<&[u8]>;
    /// The topic.
    fn topic(&self) -> &str;
    /// The partition (-1, rdkafka's `RD_KAFKA_PARTITION_UA`, before one is chosen).
    fn partition(&self) -> i32;
    /// The offset (-1, `RD_KAFKA_OFFSET_INVALID`, when not known).
    fn offset(&self) -> i64;
    /// The timestamp.
    fn timestamp(&self) -> Timestamp;
    /// The headers, `None` when there are none.
    fn headers(&self) -> Option<&Self::Headers>;

    /// The payload viewed as `P` (`str`, `[u8]`).
    fn payload_view<P: ?Sized + FromBytes>(&self) -> Option<Result<&P, P::Error>> {
        self.payload().map(P::from_bytes)
    }

    /// The key viewed as `K`.
    fn key_view<K: ?Sized + FromBytes>(&self) -> Option<Result<&K, K::Error>> {
        self.key().map(K::from_bytes)
    }

    /// An owned copy (rdkafka has this on `BorrowedMessage`).
    fn detach(&self) -> OwnedMessage {
        let headers = self.headers().map(|h| {
            (0..h.count()).filter_map(|i| h.try_get(i)).fold(OwnedHeaders::new_with_capacity(h.count()), |o, hd| {
                o.insert(Header { key: hd.key, value: hd.value })
            })
        });
        OwnedMessage::new(
            self.payload().map(<[u8]>::to_vec),
            self.key().map(<[u8]>::to_vec),
            self.topic().to_string(),
            self.timestamp(),
            self.partition(),
            self.offset(),
            headers,
        )
    }
}

/// A message that owns its data (rdkafka's `OwnedMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedMessage {
    payload: Option<Vec<u8>>,
    key: Option<Vec<u8>>,
    topic: String,
    timestamp: Timestamp,
    partition: i32,
    offset: i64,
    headers: Option<OwnedHeaders>,
}

impl OwnedMessage {
    /// A message of these parts (rdkafka's argument order).
    pub fn new(
        payload: Option<Vec<u8>>,
        key: Option<Vec<u8>>,
        topic: String,
        timestamp: Timestamp,
        partition: i32,
        offset: i64,
        headers: Option<OwnedHeaders>,
    ) -> OwnedMessage {
        OwnedMessage { payload, key, topic, timestamp, partition, offset, headers }
    }

    /// Takes the headers out.
    pub fn detach_headers(&mut self) -> Option<OwnedHeaders> {
        self.headers.take()
    }

    /// With these headers.
    #[must_use]
    pub fn replace_headers(mut self, headers: Option<OwnedHeaders>) -> OwnedMessage {
        self.headers = headers;
        self
    }

    /// With this partition.
    #[must_use]
    pub fn set_partition(mut self, partition: i32) -> OwnedMessage {
        self.partition = partition;
        self
    }

    /// With this offset.
    #[must_use]
    pub fn set_offset(mut self, offset: i64) -> OwnedMessage {
        self.offset = offset;
        self
    }

    /// With this timestamp.
    #[must_use]
    pub fn set_timestamp(mut self, timestamp: Timestamp) -> OwnedMessage {
        self.timestamp = timestamp;
        self
    }
}

impl Message for OwnedMessage {
    type Headers = OwnedHeaders;

    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn payload(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }
    fn topic(&self) -> &str {
        &self.topic
    }
    fn partition(&self) -> i32 {
        self.partition
    }
    fn offset(&self) -> i64 {
        self.offset
    }
    fn timestamp(&self) -> Timestamp {
        self.timestamp
    }
    fn headers(&self) -> Option<&OwnedHeaders> {
        self.headers.as_ref()
    }
}

/// Headers of a [`BorrowedMessage`] (rdkafka's `BorrowedHeaders`; here the owned type).
pub type BorrowedHeaders = OwnedHeaders;

/// A message as a consumer returns it (rdkafka's `BorrowedMessage`): it borrows the consumer
/// (so it cannot outlive it, as rdkafka's), and owns its data here — [`BorrowedMessage::detach`]
/// copies it out as an [`OwnedMessage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BorrowedMessage<'a> {
    message: OwnedMessage,
    _owner: std::marker::PhantomData<&'a u8>,
}

impl BorrowedMessage<'_> {
    /// A message borrowing its consumer.
    pub(crate) fn new(message: OwnedMessage) -> BorrowedMessage<'static> {
        BorrowedMessage { message, _owner: std::marker::PhantomData }
    }

    /// An owned copy.
    pub fn detach(&self) -> OwnedMessage {
        self.message.clone()
    }
}

impl Message for BorrowedMessage<'_> {
    type Headers = BorrowedHeaders;

    fn key(&self) -> Option<&[u8]> {
        self.message.key()
    }
    fn payload(&self) -> Option<&[u8]> {
        self.message.payload()
    }
    fn topic(&self) -> &str {
        self.message.topic()
    }
    fn partition(&self) -> i32 {
        self.message.partition()
    }
    fn offset(&self) -> i64 {
        self.message.offset()
    }
    fn timestamp(&self) -> Timestamp {
        self.message.timestamp()
    }
    fn headers(&self) -> Option<&OwnedHeaders> {
        self.message.headers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_keep_order_duplicates_and_null_values() {
        let h = OwnedHeaders::new()
            .insert(Header { key: "a", value: Some("1") })
            .insert(Header { key: "a", value: None::<&str> })
            .insert(Header { key: "b", value: Some(&b"\x00"[..]) });
        let got: Vec<(&str, Option<&[u8]>)> = h.iter().map(|h| (h.key, h.value)).collect();
        assert_eq!(got, vec![("a", Some(&b"1"[..])), ("a", None), ("b", Some(&b"\x00"[..]))]);
        let m = OwnedMessage::new(Some(b"v".to_vec()), None, "t".into(), Timestamp::CreateTime(5), 2, 9, Some(h));
        assert_eq!(m.detach(), m);
        assert_eq!(m.payload_view::<str>(), Some(Ok("v")));
        assert_eq!((m.timestamp().to_millis(), Timestamp::NotAvailable.to_millis()), (Some(5), None));
    }
}
