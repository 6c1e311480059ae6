//! Topics, partitions and offsets as rdkafka shapes them (rdkafka 0.39's
//! `topic_partition_list`): [`Offset`] with librdkafka's raw encoding (`RD_KAFKA_OFFSET_*`),
//! [`TopicPartitionList`] and its elements [`TopicPartitionListElem`].
//!
//! As in rdkafka, an element got from a shared list can still set its offset and metadata
//! (librdkafka's list is one C array the elements point into); here each entry's offset is an
//! atomic and its metadata behind a mutex, so the list stays `Send + Sync`; an element reads
//! the metadata as it was when the element was taken.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use crate::rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};

const OFFSET_BEGINNING: i64 = -2;
const OFFSET_END: i64 = -1;
const OFFSET_STORED: i64 = -1000;
const OFFSET_INVALID: i64 = -1001;
const OFFSET_TAIL_BASE: i64 = -2000;

/// A Kafka offset (rdkafka's `Offset`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Offset {
    /// The beginning of the partition.
    Beginning,
    /// The end of the partition.
    End,
    /// The offset stored (committed) for the group.
    Stored,
    /// Not assigned or invalid.
    Invalid,
    /// A specific offset (negative ones are rejected where librdkafka rejects them).
    Offset(i64),
    /// This many records before the end.
    OffsetTail(i64),
}

impl Offset {
    /// The offset librdkafka's integer stands for.
    pub fn from_raw(raw_offset: i64) -> Offset {
        match raw_offset {
            OFFSET_BEGINNING => Offset::Beginning,
            OFFSET_END => Offset::End,
            OFFSET_STORED => Offset::Stored,
            OFFSET_INVALID => Offset::Invalid,
            n if n <= OFFSET_TAIL_BASE => Offset::OffsetTail(-(n - OFFSET_TAIL_BASE)),
            n => Offset::Offset(n),
        }
    }

    /// librdkafka's integer for the offset; `None` when it has none (a negative
    /// `Offset`/`OffsetTail`).
    pub fn to_raw(self) -> Option<i64> {
        match self {
            Offset::Beginning => Some(OFFSET_BEGINNING),
            Offset::End => Some(OFFSET_END),
            Offset::Stored => Some(OFFSET_STORED),
            Offset::Invalid => Some(OFFSET_INVALID),
            Offset::Offset(n) if n >= 0 => Some(n),
            Offset::OffsetTail(n) if n > 0 => Some(OFFSET_TAIL_BASE - n),
            Offset::Offset(_) | Offset::OffsetTail(_) => None,
        }
    }
}

#[derive(Debug)]
struct Entry {
    topic: String,
    partition: i32,
    offset: AtomicI64,
    metadata: Mutex<Arc<str>>,
    error: AtomicI32,
}

impl Clone for Entry {
    fn clone(&self) -> Entry {
        Entry {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: AtomicI64::new(self.offset.load(Ordering::SeqCst)),
            metadata: Mutex::new(Arc::clone(&self.metadata.lock().unwrap_or_else(|p| p.into_inner()))),
            error: AtomicI32::new(self.error.load(Ordering::SeqCst)),
        }
    }
}

/// One element of a [`TopicPartitionList`] (rdkafka's `TopicPartitionListElem`).
pub struct TopicPartitionListElem<'a> {
    entry: &'a Entry,
    /// The metadata when the element was taken (and as this element set it).
    metadata: Arc<str>,
}

impl<'a> TopicPartitionListElem<'a> {
    fn of(entry: &'a Entry) -> TopicPartitionListElem<'a> {
        let metadata = Arc::clone(&entry.metadata.lock().unwrap_or_else(|p| p.into_inner()));
        TopicPartitionListElem { entry, metadata }
    }
}

impl TopicPartitionListElem<'_> {
    /// The topic.
    pub fn topic(&self) -> &str {
        &self.entry.topic
    }

    /// The error the element carries (a committed-offset lookup's, a commit's, a pause's), as
    /// `KafkaError::OffsetFetch` as rdkafka reports it.
    ///
    /// # Errors
    /// That error.
    pub fn error(&self) -> KafkaResult<()> {
        match self.entry.error.load(Ordering::SeqCst) {
            0 => Ok(()),
            code => Err(KafkaError::OffsetFetch(RDKafkaErrorCode::from_code(code))),
        }
    }

    /// The partition (-1: unassigned).
    pub fn partition(&self) -> i32 {
        self.entry.partition
    }

    /// The offset.
    pub fn offset(&self) -> Offset {
        Offset::from_raw(self.entry.offset.load(Ordering::SeqCst))
    }

    /// Sets the offset.
    ///
    /// # Errors
    /// `SetPartitionOffset(InvalidArgument)` for an offset with no raw form.
    pub fn set_offset(&mut self, offset: Offset) -> KafkaResult<()> {
        let raw = offset.to_raw().ok_or(KafkaError::SetPartitionOffset(RDKafkaErrorCode::InvalidArgument))?;
        self.entry.offset.store(raw, Ordering::SeqCst);
        Ok(())
    }

    /// The metadata string ("" when none).
    pub fn metadata(&self) -> &str {
        &self.metadata
    }

    /// Sets the metadata string.
    pub fn set_metadata<M: AsRef<str>>(&mut self, metadata: M) {
        let m: Arc<str> = Arc::from(metadata.as_ref());
        *self.entry.metadata.lock().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&m);
        self.metadata = m;
    }
}

impl PartialEq for TopicPartitionListElem<'_> {
    fn eq(&self, other: &TopicPartitionListElem<'_>) -> bool {
        self.topic() == other.topic()
            && self.partition() == other.partition()
            && self.offset() == other.offset()
            && self.metadata() == other.metadata()
    }
}

impl fmt::Debug for TopicPartitionListElem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicPartitionListElem")
            .field("topic", &self.topic())
            .field("partition", &self.partition())
            .field("offset", &self.offset())
            .field("metadata", &self.metadata())
            .field("error", &self.error())
            .finish()
    }
}

/// A list of topic partitions with offsets and metadata (rdkafka's `TopicPartitionList`).
/// Adding a partition already in the list adds it again, as librdkafka does.
#[derive(Clone, Default)]
pub struct TopicPartitionList {
    entries: Vec<Entry>,
}

impl TopicPartitionList {
    /// An empty list.
    pub fn new() -> TopicPartitionList {
        TopicPartitionList::with_capacity(5)
    }

    /// An empty list with room for `capacity`.
    pub fn with_capacity(capacity: usize) -> TopicPartitionList {
        TopicPartitionList { entries: Vec::with_capacity(capacity) }
    }

    /// A list of the map's partitions and offsets, sorted by topic and partition.
    ///
    /// rdkafka keeps the map's iteration order, which `std`'s per-process random hasher makes
    /// differ from one process to the next; sorted, a list built from a map and then committed or
    /// assigned sends the same requests in every process, so a simulation replays.
    ///
    /// # Errors
    /// An offset with no raw form.
    pub fn from_topic_map(topic_map: &HashMap<(String, i32), Offset>) -> KafkaResult<TopicPartitionList> {
        let mut tpl = TopicPartitionList::with_capacity(topic_map.len());
        let sorted: std::collections::BTreeMap<_, _> = topic_map.iter().collect();
        for ((topic, partition), offset) in sorted {
            tpl.add_partition_offset(topic, *partition, *offset)?;
        }
        Ok(tpl)
    }

    /// How many elements.
    pub fn count(&self) -> usize {
        self.entries.len()
    }

    /// The room allocated.
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Adds `topic` with partition -1 (unassigned).
    pub fn add_topic_unassigned<'a>(&'a mut self, topic: &str) -> TopicPartitionListElem<'a> {
        self.add_partition(topic, -1)
    }

    /// Adds `topic`-`partition` (offset [`Offset::Invalid`]).
    pub fn add_partition<'a>(&'a mut self, topic: &str, partition: i32) -> TopicPartitionListElem<'a> {
        self.entries.push(Entry {
            topic: topic.to_string(),
            partition,
            offset: AtomicI64::new(OFFSET_INVALID),
            metadata: Mutex::new(Arc::from("")),
            error: AtomicI32::new(0),
        });
        TopicPartitionListElem::of(self.entries.last().expect("just pushed"))
    }

    /// Adds partitions `start_partition..=stop_partition` of `topic`.
    pub fn add_partition_range(&mut self, topic: &str, start_partition: i32, stop_partition: i32) {
        for p in start_partition..=stop_partition {
            self.add_partition(topic, p);
        }
    }

    /// Sets the offset of `topic`-`partition`, which must be in the list.
    ///
    /// # Errors
    /// `SetPartitionOffset(UnknownPartition)` when it is not; `InvalidArgument` for an offset
    /// with no raw form.
    pub fn set_partition_offset(&mut self, topic: &str, partition: i32, offset: Offset) -> KafkaResult<()> {
        let raw = offset.to_raw().ok_or(KafkaError::SetPartitionOffset(RDKafkaErrorCode::InvalidArgument))?;
        let entry = self
            .entries
            .iter()
            .find(|e| e.topic == topic && e.partition == partition)
            .ok_or(KafkaError::SetPartitionOffset(RDKafkaErrorCode::UnknownPartition))?;
        entry.offset.store(raw, Ordering::SeqCst);
        Ok(())
    }

    /// Adds `topic`-`partition` with `offset`.
    ///
    /// # Errors
    /// As [`TopicPartitionList::set_partition_offset`].
    pub fn add_partition_offset(&mut self, topic: &str, partition: i32, offset: Offset) -> KafkaResult<()> {
        self.add_partition(topic, partition);
        self.set_partition_offset(topic, partition, offset)
    }

    /// The element of `topic`-`partition`, if any.
    pub fn find_partition(&self, topic: &str, partition: i32) -> Option<TopicPartitionListElem<'_>> {
        self.entries.iter().find(|e| e.topic == topic && e.partition == partition).map(TopicPartitionListElem::of)
    }

    /// Sets every element's offset.
    ///
    /// # Errors
    /// An offset with no raw form.
    pub fn set_all_offsets(&mut self, offset: Offset) -> Result<(), KafkaError> {
        let raw = offset.to_raw().ok_or(KafkaError::SetPartitionOffset(RDKafkaErrorCode::InvalidArgument))?;
        for e in &self.entries {
            e.offset.store(raw, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Every element, in order.
    pub fn elements(&self) -> Vec<TopicPartitionListElem<'_>> {
        self.entries.iter().map(TopicPartitionListElem::of).collect()
    }

    /// The elements of `topic`, in order.
    pub fn elements_for_topic<'a>(&'a self, topic: &str) -> Vec<TopicPartitionListElem<'a>> {
        self.entries.iter().filter(|e| e.topic == topic).map(TopicPartitionListElem::of).collect()
    }

    /// The partitions and their offsets, as a map.
    pub fn to_topic_map(&self) -> HashMap<(String, i32), Offset> {
        self.elements().iter().map(|e| ((e.topic().to_owned(), e.partition()), e.offset())).collect()
    }

    /// Sets the error carried by `topic`-`partition` (the client's: a commit's or an offset
    /// fetch's per-partition result; a pause's, through the shared list librdkafka writes to).
    pub(crate) fn set_error(&self, topic: &str, partition: i32, code: RDKafkaErrorCode) {
        for e in self.entries.iter().filter(|e| e.topic == topic && e.partition == partition) {
            e.error.store(code.code(), Ordering::SeqCst);
        }
    }

    /// `(topic, partition, raw offset)` of each element.
    pub(crate) fn raw(&self) -> Vec<(String, i32, i64)> {
        self.entries.iter().map(|e| (e.topic.clone(), e.partition, e.offset.load(Ordering::SeqCst))).collect()
    }
}

impl PartialEq for TopicPartitionList {
    fn eq(&self, other: &TopicPartitionList) -> bool {
        self.count() == other.count()
            && self.elements().iter().all(|e| other.find_partition(e.topic(), e.partition()).is_some_and(|o| *e == o))
    }
}

impl FromIterator<(String, i32, Offset)> for TopicPartitionList {
    fn from_iter<I: IntoIterator<Item = (String, i32, Offset)>>(iter: I) -> Self {
        let mut tpl = TopicPartitionList::new();
        for (topic, partition, offset) in iter {
            let mut elem = tpl.add_partition(&topic, partition);
            elem.set_offset(offset).unwrap_or_else(|err| {
                panic!("failed to set offset via collect() for {topic}:{partition} (offset: {offset:?}): {err:?}")
            });
        }
        tpl
    }
}

impl FromIterator<((String, i32), Offset)> for TopicPartitionList {
    fn from_iter<I: IntoIterator<Item = ((String, i32), Offset)>>(iter: I) -> Self {
        iter.into_iter().map(|((t, p), o)| (t, p, o)).collect()
    }
}

impl fmt::Debug for TopicPartitionList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.elements()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_librdkafkas_raw_values_and_lists_behave_as_rdkafkas() {
        for o in
            [Offset::Beginning, Offset::End, Offset::Stored, Offset::Invalid, Offset::Offset(7), Offset::OffsetTail(3)]
        {
            assert_eq!(Offset::from_raw(o.to_raw().expect("raw")), o);
        }
        assert_eq!((Offset::Offset(-5).to_raw(), Offset::OffsetTail(0).to_raw()), (None, None));
        assert_eq!(Offset::OffsetTail(3).to_raw(), Some(-2003));
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_range("a", 0, 2);
        tpl.add_partition_offset("b", 1, Offset::Offset(9)).expect("settable");
        assert_eq!(tpl.count(), 4);
        assert_eq!(tpl.find_partition("a", 1).map(|e| e.offset()), Some(Offset::Invalid));
        assert!(tpl.set_partition_offset("c", 0, Offset::End).is_err());
        for mut e in tpl.elements_for_topic("a") {
            e.set_offset(Offset::Beginning).expect("settable");
            e.set_metadata("m");
        }
        assert_eq!(
            tpl.find_partition("a", 2).map(|e| (e.offset(), e.metadata().to_string())),
            Some((Offset::Beginning, "m".into()))
        );
        let copy: TopicPartitionList = tpl.to_topic_map().into_iter().collect();
        assert_eq!(copy.count(), 4);
        assert_eq!(copy.find_partition("b", 1).map(|e| e.offset()), Some(Offset::Offset(9)));
        assert_eq!(tpl.clone(), tpl);
    }
}
