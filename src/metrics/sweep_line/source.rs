//! The requests in the order a sweep takes them in: pushed in any order, sorted once by
//! their first event (through a spill when many) into a log that each curve's sweep
//! reads from its start.

use std::sync::Arc;

use super::events::first_event;
use super::{Span, SpanSource, SpanStream};
use crate::spill::sort::{Keyed, RUN_BYTES, Sorter};
use crate::spill::{LARGE_CHUNK, Log, Reader, Spill, get_varint, put_varint};
use crate::stats::{from_total_order_key, total_order_key};

/// Gathers the requests (in the collector's order, which names them in tie-breaks) and
/// orders them by first event.
pub struct SpanOrder {
    sorter: Sorter<Keyed>,
    spill: Arc<Spill>,
    count: u32,
    has_chunks: bool,
}

impl SpanOrder {
    /// Orders spans in a spill of its own.
    pub fn new() -> SpanOrder {
        SpanOrder::with_limit(RUN_BYTES)
    }

    /// Sorting in runs of `limit` bytes.
    pub(super) fn with_limit(limit: usize) -> SpanOrder {
        let spill = Spill::new();
        SpanOrder {
            sorter: Sorter::new(&spill, limit),
            spill,
            count: 0,
            has_chunks: false,
        }
    }

    pub fn push(&mut self, s: &Span) {
        // By first event; among equal ones any order does, as the sweep takes them all in
        // before the first event at that time.
        let key = u128::from(total_order_key(first_event(s))) << 64 | u128::from(self.count);
        let mut bytes = Vec::with_capacity(48 + s.chunk_gaps.len());
        encode_span(s, &mut bytes);
        self.sorter.push(Keyed {
            key,
            bytes: bytes.into(),
        });
        self.count += 1;
        self.has_chunks |= !s.chunk_gaps.is_empty();
    }

    /// The spans in sweep order, merged once into one log.
    pub fn finish(self) -> OrderedSpans {
        let sorted = self.sorter.finish();
        let mut log = Log::with_chunk(&self.spill, LARGE_CHUNK);
        for item in sorted.iter() {
            let out = log.tail();
            let first = from_total_order_key((item.key >> 64) as u64);
            out.extend_from_slice(&first.to_bits().to_le_bytes());
            put_varint(out, item.key & u128::from(u32::MAX));
            out.extend_from_slice(&item.bytes);
            log.end_item();
        }
        log.close();
        OrderedSpans {
            log,
            has_chunks: self.has_chunks,
        }
    }
}

impl Default for SpanOrder {
    fn default() -> Self {
        SpanOrder::new()
    }
}

/// Flags of an encoded span's optional fields.
const GENERATION: u8 = 1;
const INPUT: u8 = 2;
const OUTPUT: u8 = 4;

/// A span's fields as their bits, then its chunk gaps' bytes.
fn encode_span(s: &Span, out: &mut Vec<u8>) {
    let flag = |on: bool, f: u8| if on { f } else { 0 };
    let flags = flag(s.generation_start.is_some(), GENERATION)
        | flag(s.input_tokens.is_some(), INPUT)
        | flag(s.output_tokens.is_some(), OUTPUT);
    out.push(flags);
    for v in [
        Some(s.start),
        s.generation_start,
        Some(s.end),
        s.input_tokens,
        s.output_tokens,
    ]
    .into_iter()
    .flatten()
    {
        out.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    put_varint(out, s.chunk_gaps.len() as u128);
    out.extend_from_slice(s.chunk_gaps);
}

/// The spans in sweep order (see [`SpanOrder`]): each its first event's bits, its place
/// in the push order, then the span.
pub struct OrderedSpans {
    log: Log,
    has_chunks: bool,
}

impl SpanSource for OrderedSpans {
    fn stream(&self) -> Box<dyn SpanStream + '_> {
        Box::new(Stream {
            reader: self.log.reader(),
            gaps: Vec::new(),
        })
    }

    fn has_chunks(&self) -> bool {
        self.has_chunks
    }
}

struct Stream<'a> {
    reader: Reader<'a>,
    /// The chunk gaps of the span last taken.
    gaps: Vec<u8>,
}

fn f64_at(bytes: &[u8], at: &mut usize) -> f64 {
    let v = f64::from_bits(u64::from_le_bytes(
        bytes[*at..*at + 8].try_into().expect("8 bytes"),
    ));
    *at += 8;
    v
}

impl SpanStream for Stream<'_> {
    fn peek_first(&mut self) -> Option<f64> {
        let bytes = self.reader.rest()?;
        Some(f64_at(bytes, &mut 0))
    }

    fn take(&mut self) -> (u32, Span<'_>) {
        let bytes = self.reader.rest().expect("peek_first found a span");
        let mut at = 8;
        let (index, used) = get_varint(&bytes[at..]);
        at += used;
        let flags = bytes[at];
        at += 1;
        let mut field = |on: bool| on.then(|| f64_at(bytes, &mut at));
        let start = field(true).expect("always there");
        let generation_start = field(flags & GENERATION != 0);
        let end = field(true).expect("always there");
        let input_tokens = field(flags & INPUT != 0);
        let output_tokens = field(flags & OUTPUT != 0);
        let (len, used) = get_varint(&bytes[at..]);
        at += used;
        self.gaps.clear();
        self.gaps.extend_from_slice(&bytes[at..at + len as usize]);
        at += len as usize;
        self.reader.advance(at);
        let span = Span {
            start,
            generation_start,
            end,
            input_tokens,
            output_tokens,
            chunk_gaps: &self.gaps,
        };
        (index as u32, span)
    }
}
