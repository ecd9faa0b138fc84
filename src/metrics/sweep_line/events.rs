//! The events each request adds to a curve (`List`), and their merge in time order: the
//! requests are taken in by their first event, each holding a cursor over its events of
//! each list while the sweep passes through it, and a heap holds each cursor's next event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::binary_heap::PeekMut;

use super::{Span, SpanSource, SpanStream};
use crate::stats::total_order_key;

/// The `(time, delta)` events one request adds to a curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum List {
    /// In flight over `[start, end)`.
    Requests,
    /// Decoding over `[first token, end)`.
    Decoding,
    /// Prefilling over `[start, first token)`.
    Prefilling,
    /// Input tokens processed evenly over `[start, first token)`.
    Prefill,
    /// `(OSL - 1)` tokens (the first one came with TTFT) spread over `[first token, end)`.
    Decode,
    /// Decode following the chunks: each gap between two chunks carries
    /// `(OSL - 1) / (number of non-zero gaps)` tokens over its own interval.
    DecodeByChunk,
    /// Tokens held: the input from the start, output tokens as chunks arrive (one at the
    /// first token, the rest spread over the later chunks, or all at the first token
    /// without chunk times), all released at the end.
    Tokens,
}

impl List {
    /// Appends this list's events for one request.
    pub(super) fn of(self, s: &Span, out: &mut Vec<(f64, f64)>) {
        let interval = |out: &mut Vec<(f64, f64)>, a: Option<f64>, b: Option<f64>| {
            if let (Some(a), Some(b)) = (a, b) {
                out.push((a, 1.0));
                out.push((b, -1.0));
            }
        };
        match self {
            List::Requests => interval(out, Some(s.start), Some(s.end)),
            List::Decoding => interval(out, s.generation_start, Some(s.end)),
            List::Prefilling => interval(out, Some(s.start), s.generation_start),
            List::Prefill => {
                if let (Some(g), Some(isl)) = (s.generation_start, s.input_tokens)
                    && g > s.start
                {
                    let rate = isl / (g - s.start);
                    out.push((s.start, rate));
                    out.push((g, -rate));
                }
            }
            List::Decode => {
                if let (Some(g), Some(osl)) = (s.generation_start, s.output_tokens)
                    && s.end > g
                {
                    let rate = (osl - 1.0) / (s.end - g);
                    out.push((g, rate));
                    out.push((s.end, -rate));
                }
            }
            List::DecodeByChunk => {
                let (Some(g), Some(osl)) = (s.generation_start, s.output_tokens) else {
                    return;
                };
                if osl < 1.0 {
                    return;
                }
                // One pass over the gaps: each non-zero gap's interval with the gap, then
                // its rate once their number is known.
                let from = out.len();
                let mut at = g;
                for gap in s.gaps() {
                    let end = at + gap;
                    if gap > 0.0 {
                        out.push((at, gap));
                        out.push((end, gap));
                    }
                    at = end;
                }
                let nonzero = (out.len() - from) / 2;
                let per_gap = (osl - 1.0) / nonzero as f64;
                for pair in out[from..].chunks_exact_mut(2) {
                    let rate = per_gap / pair[0].1;
                    pair[0].1 = rate;
                    pair[1].1 = -rate;
                }
            }
            List::Tokens => tokens_held(s, out),
        }
    }
}

/// How long a chunk stamped at or after its request's end is held before the end: 2^-10 ns.
/// Below 2^43 ns (2.4 hours) from the first start, where whole ns and this are both whole
/// multiples of 2^-10 under 2^53 of them, every duration of the tokens-in-flight curve adds
/// up exactly, so its percentiles are selected rather than sorted (`weighted`); later ends
/// hold the chunk for one ulp instead.
pub(super) const SLIVER: f64 = 1.0 / 1024.0;

/// When a chunk stamped at or after its request's `end` is counted: just before it.
pub(super) fn held_before_end(end: f64) -> f64 {
    (end - SLIVER).min(end.next_down())
}

fn tokens_held(s: &Span, out: &mut Vec<(f64, f64)>) {
    let prefill = match (s.generation_start, s.input_tokens) {
        (Some(g), Some(isl)) if g > s.start => Some(isl),
        _ => None,
    };
    if let Some(isl) = prefill {
        out.push((s.start, isl));
    }
    let mut added_output = None;
    if let (Some(g), Some(osl)) = (s.generation_start, s.output_tokens) {
        if !s.chunk_gaps.is_empty() {
            if osl >= 1.0 {
                out.push((g, 1.0));
            }
            // One pass over the gaps: the chunks' times, then their share of the output
            // once the number of gaps is known.
            let from = out.len();
            let (mut at, mut gaps) = (g, 0usize);
            for gap in s.gaps() {
                at += gap;
                gaps += 1;
                if gap >= 0.0 {
                    // A chunk stamped at or after the end still arrives before it.
                    let t = if at >= s.end {
                        held_before_end(s.end)
                    } else {
                        at
                    };
                    out.push((t, 0.0));
                }
            }
            let per_chunk = (osl - 1.0) / gaps as f64;
            for chunk in &mut out[from..] {
                chunk.1 = per_chunk;
            }
            added_output = Some(osl);
        } else if s.end > g {
            out.push((g, osl));
            added_output = Some(osl);
        }
    }
    let release = prefill.unwrap_or(0.0) + added_output.unwrap_or(0.0);
    if prefill.is_some() || added_output.is_some() {
        out.push((s.end, -release));
    }
}

/// The time of the request's earliest event in any list, or a time before it: the sweep
/// takes a request's events in once it reaches that time.
///
/// Every event is at the start, the first token, the end, a chunk (the first token plus the
/// gaps so far, added in the order `List::of` adds them) or a chunk held back from the end
/// (`held_before_end`), so the least of those bounds it without making the events.
pub(super) fn first_event(s: &Span) -> f64 {
    // `held_before_end(end)` is never after the end.
    let mut first = s.start.min(held_before_end(s.end));
    if let Some(g) = s.generation_start {
        first = first.min(g);
        let mut at = g;
        for gap in s.gaps() {
            at += gap;
            first = first.min(at);
        }
    }
    first
}

/// A cursor's next event as one heap key: its time, then among events at the same time
/// ends (deltas not above 0) before starts, then by list, then by request; the cursor's
/// slot fills the low bits (never decisive, as a list and a request name one cursor). One
/// 128-bit integer compares in two instructions where a tuple takes several branches.
fn heap_key(time: f64, delta: f64, list: usize, span: u32, slot: u32) -> u128 {
    debug_assert!(list < 8 && slot < 1 << SLOT_BITS);
    let tie = u64::from(delta > 0.0) << 63
        | (list as u64) << 60
        | u64::from(span) << SLOT_BITS
        | u64::from(slot);
    u128::from(total_order_key(time)) << 64 | u128::from(tie)
}

/// Bits of a heap key that hold the cursor slot.
const SLOT_BITS: u32 = 28;

/// The cursor slot a heap key carries.
fn slot_of(key: u128) -> u32 {
    (key as u32) & ((1 << SLOT_BITS) - 1)
}

/// One request's events of one list, in sweep order, and how many were taken.
#[derive(Default)]
struct Cursor {
    events: Vec<(f64, f64)>,
    taken: usize,
    /// The list's place in the curve's lists, and the request.
    list: usize,
    span: u32,
}

/// The cursors of the requests taken in, and the heap of their next events.
struct Cursors<'a> {
    lists: &'a [List],
    /// `heap_key` of each cursor's next event; the least comes first.
    heap: BinaryHeap<Reverse<u128>>,
    cursors: Vec<Cursor>,
    /// Cursors whose events were all taken, for reuse.
    free: Vec<u32>,
}

impl Cursors<'_> {
    /// Opens a cursor over each list's events of request `i`.
    fn take_in(&mut self, i: u32, s: &Span) {
        for (l, list) in self.lists.iter().enumerate() {
            let slot = self.free.pop().unwrap_or_else(|| {
                // A heap key has 28 bits for the slot: 268M requests' lists in flight.
                assert!(
                    self.cursors.len() < 1 << SLOT_BITS,
                    "too many requests in flight"
                );
                self.cursors.push(Cursor::default());
                (self.cursors.len() - 1) as u32
            });
            let cursor = &mut self.cursors[slot as usize];
            cursor.events.clear();
            cursor.taken = 0;
            (cursor.list, cursor.span) = (l, i);
            list.of(s, &mut cursor.events);
            if cursor.events.is_empty() {
                self.free.push(slot);
                continue;
            }
            // Stable: events at the same time and sign keep the order they were made in.
            let key = |e: &(f64, f64)| (total_order_key(e.0), e.1 > 0.0);
            if !cursor.events.is_sorted_by_key(key) {
                cursor.events.sort_by_key(key);
            }
            let (time, delta) = cursor.events[0];
            self.heap.push(Reverse(heap_key(time, delta, l, i, slot)));
        }
    }
}

/// The events of `lists` over every request, in sweep order: by time, ends (deltas not
/// above 0) before starts at equal times, then in the order the lists and requests made
/// them (the order a stable sort of all events by time and sign gives). Each request
/// still in flight at the sweep's time holds a cursor over its events of each list, and
/// the heap holds only each cursor's next event, so it stays as small as the concurrency.
pub(super) struct Events<'a> {
    spans: Box<dyn SpanStream + 'a>,
    /// The next request's first event, read once per request rather than once per event.
    next_first: Option<f64>,
    cursors: Cursors<'a>,
}

impl<'a> Events<'a> {
    pub(super) fn new(spans: &'a dyn SpanSource, lists: &'a [List]) -> Self {
        let mut spans = spans.stream();
        Events {
            next_first: spans.peek_first(),
            spans,
            cursors: Cursors {
                lists,
                heap: BinaryHeap::new(),
                cursors: Vec::new(),
                free: Vec::new(),
            },
        }
    }
}

impl Iterator for Events<'_> {
    type Item = (f64, f64);

    fn next(&mut self) -> Option<(f64, f64)> {
        let c = &mut self.cursors;
        // Take in every request that may have an event at or before the earliest waiting.
        while let Some(first) = self.next_first {
            if let Some(Reverse(top)) = c.heap.peek()
                && total_order_key(first) > (top >> 64) as u64
            {
                break;
            }
            let (i, s) = self.spans.take();
            c.take_in(i, &s);
            self.next_first = self.spans.peek_first();
        }
        let mut top = c.heap.peek_mut()?;
        let slot = slot_of(top.0);
        let cursor = &mut c.cursors[slot as usize];
        let event = cursor.events[cursor.taken];
        cursor.taken += 1;
        match cursor.events.get(cursor.taken) {
            Some(&(time, delta)) => {
                *top = Reverse(heap_key(time, delta, cursor.list, cursor.span, slot));
            }
            None => {
                PeekMut::pop(top);
                c.free.push(slot);
            }
        }
        Some(event)
    }
}
