//! A stored batch read record by record and written again without some of them, as Kafka's log
//! cleaner does (`MemoryRecords.filterTo`, `buildRetainedRecordsInto`,
//! `DefaultRecordBatch.writeEmptyHeader`; record format v2 from
//! <https://kafka.apache.org/documentation/#recordbatch>):
//! - a batch keeping every record and needing no delete horizon is kept byte for byte;
//! - otherwise the kept records are written into a batch with the same base offset, last offset
//!   delta (so the producer's last sequence survives), producer id, epoch, base sequence,
//!   attributes and compression; its first timestamp is the delete horizon when one is set
//!   (attribute bit 6, KIP-534) or else the first kept record's timestamp, and each record's
//!   timestamp delta is rewritten against it;
//! - a batch that must stay for its producer's state but keeps no record becomes an empty
//!   header: 61 bytes, no records, uncompressed, its max timestamp as both timestamps.
//!
//! Records are kept as their bytes (only the timestamp delta is re-encoded), so duplicate header
//! keys and every field a decoder would normalise survive.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Decompressor, Gzip, Lz4, None as Plain, Snappy, Zstd};

use super::batch::{ATTRIBUTES, BATCH_HEADER_BYTES, CRC, LAST_OFFSET_DELTA, MAX_TIMESTAMP};

const BATCH_LENGTH: std::ops::Range<usize> = 8..12;
const BASE_TIMESTAMP: std::ops::Range<usize> = 27..35;
const RECORD_COUNT: std::ops::Range<usize> = 57..61;
const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE: i16 = 1 << 3;
const TRANSACTIONAL: i16 = 1 << 4;
const CONTROL: i16 = 1 << 5;
const DELETE_HORIZON: i16 = 1 << 6;

/// One record of a stored batch.
#[derive(Debug, Clone)]
pub(super) struct RawRecord {
    /// Its offset (the batch's base offset plus its offset delta).
    pub offset: i64,
    /// Its timestamp (the batch's first timestamp plus its delta), milliseconds since the epoch.
    pub timestamp: i64,
    /// Its key, if any.
    pub key: Option<Bytes>,
    /// Whether it has a value (a record without one is a tombstone).
    pub has_value: bool,
    attributes: u8,
    offset_delta: i32,
    /// From the key length to the end of the headers.
    rest: Bytes,
}

/// A stored batch's header fields the cleaner reads, and its records.
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    /// Attributes bit 5: a control batch (an EndTxn marker).
    pub control: bool,
    /// Attributes bit 4.
    pub transactional: bool,
    /// The delete horizon (the first timestamp when attribute bit 6 is set), milliseconds.
    pub delete_horizon: Option<i64>,
    /// The records, in offset order.
    pub records: Vec<RawRecord>,
}

fn attributes(batch: &[u8]) -> i16 {
    i16::from_be_bytes(batch[ATTRIBUTES].try_into().expect("2 bytes"))
}

fn i64_at(batch: &[u8], at: std::ops::Range<usize>) -> i64 {
    i64::from_be_bytes(batch[at].try_into().expect("8 bytes"))
}

/// Reads a stored batch's records (decompressing them). `None` for bytes that do not parse —
/// never for a batch the broker validated and stored.
pub(super) fn parse(batch: &Bytes) -> Option<Parsed> {
    if batch.len() < BATCH_HEADER_BYTES {
        return None;
    }
    let attrs = attributes(batch);
    let base_offset = i64_at(batch, 0..8);
    let base_timestamp = i64_at(batch, BASE_TIMESTAMP);
    let count = i32::from_be_bytes(batch[RECORD_COUNT].try_into().expect("4 bytes"));
    let mut section = batch.slice(BATCH_HEADER_BYTES..);
    let mut body = match attrs & COMPRESSION_MASK {
        0 => section,
        1 => Gzip::decompress(&mut section, |b: &mut Bytes| Ok(b.split_off(0))).ok()?,
        2 => Snappy::decompress(&mut section, |b: &mut Bytes| Ok(b.split_off(0))).ok()?,
        3 => Lz4::decompress(&mut section, |b: &mut Bytes| Ok(b.split_off(0))).ok()?,
        4 => Zstd::decompress(&mut section, |b: &mut Bytes| Ok(b.split_off(0))).ok()?,
        _ => return None,
    };
    let mut records = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(body.len()));
    for _ in 0..count {
        let len = usize::try_from(read_varint(&mut body)?).ok()?;
        if body.len() < len || len == 0 {
            return None;
        }
        let mut record = body.split_to(len);
        let attributes = record.get_u8();
        let timestamp_delta = read_varlong(&mut record)?;
        let offset_delta = read_varint(&mut record)?;
        let rest = record.clone();
        let key_len = read_varint(&mut record)?;
        let key = match usize::try_from(key_len) {
            Ok(n) if n <= record.len() => Some(record.split_to(n)),
            Ok(_) => return None,
            Err(_) => None,
        };
        let value_len = read_varint(&mut record)?;
        records.push(RawRecord {
            offset: base_offset + i64::from(offset_delta),
            timestamp: base_timestamp.saturating_add(timestamp_delta),
            key,
            has_value: value_len >= 0,
            attributes,
            offset_delta,
            rest,
        });
    }
    Some(Parsed {
        control: attrs & CONTROL != 0,
        transactional: attrs & TRANSACTIONAL != 0,
        delete_horizon: (attrs & DELETE_HORIZON != 0).then_some(base_timestamp),
        records,
    })
}

/// The batch `original` rewritten with only `kept` (non-empty, in offset order), and the new
/// batch's max timestamp; `delete_horizon` is set in it when given (the module doc's rules).
pub(super) fn rebuild(original: &Bytes, kept: &[&RawRecord], delete_horizon: Option<i64>) -> (Bytes, i64) {
    let attrs = attributes(original);
    let base_timestamp = delete_horizon.unwrap_or_else(|| kept.first().map_or(-1, |r| r.timestamp));
    let mut section = BytesMut::new();
    for r in kept {
        let mut body = BytesMut::with_capacity(r.rest.len() + 16);
        body.put_u8(r.attributes);
        put_varlong(&mut body, r.timestamp - base_timestamp);
        put_varlong(&mut body, i64::from(r.offset_delta));
        body.extend_from_slice(&r.rest);
        put_varlong(&mut section, i64::try_from(body.len()).expect("a record fits in a batch"));
        section.extend_from_slice(&body);
    }
    let mut out = BytesMut::from(&original[..BATCH_HEADER_BYTES]);
    let compressed = match attrs & COMPRESSION_MASK {
        1 => Gzip::compress(&mut out, |b: &mut BytesMut| {
            b.put_slice(&section);
            Ok(())
        }),
        2 => Snappy::compress(&mut out, |b: &mut BytesMut| {
            b.put_slice(&section);
            Ok(())
        }),
        3 => Lz4::compress(&mut out, |b: &mut BytesMut| {
            b.put_slice(&section);
            Ok(())
        }),
        4 => Zstd::compress(&mut out, |b: &mut BytesMut| {
            b.put_slice(&section);
            Ok(())
        }),
        _ => Plain::compress(&mut out, |b: &mut BytesMut| {
            b.put_slice(&section);
            Ok(())
        }),
    };
    compressed.expect("the codec the producer used compresses again");
    let max_timestamp = if attrs & TIMESTAMP_TYPE != 0 {
        i64_at(original, MAX_TIMESTAMP)
    } else {
        kept.iter().map(|r| r.timestamp).max().unwrap_or(-1)
    };
    let attrs = if delete_horizon.is_some() { attrs | DELETE_HORIZON } else { attrs };
    out[ATTRIBUTES].copy_from_slice(&attrs.to_be_bytes());
    out[BASE_TIMESTAMP].copy_from_slice(&base_timestamp.to_be_bytes());
    out[MAX_TIMESTAMP].copy_from_slice(&max_timestamp.to_be_bytes());
    let count = i32::try_from(kept.len()).expect("fewer records than the original");
    out[RECORD_COUNT].copy_from_slice(&count.to_be_bytes());
    (seal(out), max_timestamp)
}

/// The 61-byte empty header `original` leaves when it must stay but keeps no record.
pub(super) fn empty_header(original: &Bytes) -> Bytes {
    let attrs = attributes(original) & (TIMESTAMP_TYPE | TRANSACTIONAL | CONTROL);
    let max_timestamp = i64_at(original, MAX_TIMESTAMP);
    let mut out = BytesMut::from(&original[..BATCH_HEADER_BYTES]);
    out[ATTRIBUTES].copy_from_slice(&attrs.to_be_bytes());
    out[BASE_TIMESTAMP].copy_from_slice(&max_timestamp.to_be_bytes());
    out[RECORD_COUNT].copy_from_slice(&0i32.to_be_bytes());
    debug_assert_eq!(out[LAST_OFFSET_DELTA], original[LAST_OFFSET_DELTA]);
    seal(out)
}

/// Sets the batch length and the CRC (attributes onward).
fn seal(mut out: BytesMut) -> Bytes {
    let length = i32::try_from(out.len() - BATCH_LENGTH.end).expect("a batch fits in i32");
    out[BATCH_LENGTH].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES.start..]);
    out[CRC].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// A zigzag varlong (the record format's varint and varlong: the same bytes for values that
/// fit in 32 bits).
fn put_varlong(out: &mut BytesMut, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn read_varlong(buf: &mut Bytes) -> Option<i64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        if !buf.has_remaining() {
            return None;
        }
        let byte = buf.get_u8();
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    None
}

fn read_varint(buf: &mut Bytes) -> Option<i32> {
    read_varlong(buf).and_then(|v| i32::try_from(v).ok())
}
