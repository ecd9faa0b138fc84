//! AIPerf's sweep-line metrics: step functions over the run built from every request's
//! start, first token and end (concurrency, decode / prefill / total token rates, tokens in
//! flight), summarized by time-weighted statistics.
//!
//! "Effective" metrics weigh each value by how long it was held over the whole window;
//! "Active" ones only over the time the matching phase had a request in flight.
//!
//! A long run has tens of events per request (two per chunk for the decode rate). Events
//! are merged in time order from the requests as the sweep reaches them, through a heap
//! of one cursor per request in flight. A curve of up to `HOLD_EVENTS` events is swept
//! once and its points held; a larger one is never held whole but swept again for each
//! figure, so memory stays flat however long the run.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::collections::binary_heap::PeekMut;

use super::catalog::MetricId;
use super::column;
use crate::stats::{from_total_order_key, total_order_key};

/// One profiling request's interval, in ns relative to an anchor (the run's first start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span<'a> {
    pub start: f64,
    /// First content response; `None` for failed or non-streamed requests.
    pub generation_start: Option<f64>,
    pub end: f64,
    /// Input tokens (valid requests only).
    pub input_tokens: Option<f64>,
    /// Output tokens (OSL, valid requests only).
    pub output_tokens: Option<f64>,
    /// Gaps between consecutive content responses (ns), when streamed, as
    /// [`column::encode`] stores them.
    pub chunk_gaps: &'a [u8],
}

impl Span<'_> {
    fn gaps(&self) -> column::Decode<'_> {
        column::decode(self.chunk_gaps)
    }
}

/// The requests a sweep reads, by index (the collector builds each from its compact record).
pub trait SpanSource {
    fn count(&self) -> usize;
    fn span(&self, i: usize) -> Span<'_>;
}

impl SpanSource for [Span<'_>] {
    fn count(&self) -> usize {
        self.len()
    }
    fn span(&self, i: usize) -> Span<'_> {
        self[i]
    }
}

/// Time-weighted statistics of a step function (AIPerf's `SweepLineStats`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WeightedStats {
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub std: f64,
}

/// The `(time, delta)` events one request adds to a curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
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

const ALL_LISTS: [List; 7] = [
    List::Requests,
    List::Decoding,
    List::Prefilling,
    List::Prefill,
    List::Decode,
    List::DecodeByChunk,
    List::Tokens,
];

impl List {
    /// Appends this list's events for one request.
    fn of(self, s: &Span, out: &mut Vec<(f64, f64)>) {
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
const SLIVER: f64 = 1.0 / 1024.0;

/// When a chunk stamped at or after its request's `end` is counted: just before it.
fn held_before_end(end: f64) -> f64 {
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

/// Every request's index with a time no later than its earliest event in any list, by that
/// time: the sweep takes a request's events in once it reaches that time. Also at most how
/// many events each list has over all requests (in `ALL_LISTS` order).
///
/// Every event is at the start, the first token, the end, a chunk (the first token plus the
/// gaps so far, added in the order `List::of` adds them) or a chunk held back from the end
/// (`held_before_end`), so the least of those bounds it without making the events.
fn by_first_event<S: SpanSource + ?Sized>(spans: &S) -> (Vec<(f64, u32)>, [usize; 7]) {
    let mut counts = [0; ALL_LISTS.len()];
    let mut order: Vec<(f64, u32)> = (0..spans.count())
        .map(|i| {
            let s = spans.span(i);
            // `held_before_end(end)` is never after the end.
            let mut first = s.start.min(held_before_end(s.end));
            let mut gaps = 0;
            if let Some(g) = s.generation_start {
                first = first.min(g);
                let mut at = g;
                for gap in s.gaps() {
                    at += gap;
                    first = first.min(at);
                    gaps += 1;
                }
            }
            // Two events for each interval list, two per chunk gap for the decode by
            // chunk, and for the tokens held: the input, the first token, one per chunk
            // and the release.
            for (list, count) in ALL_LISTS.into_iter().zip(&mut counts) {
                *count += match list {
                    List::DecodeByChunk => 2 * gaps,
                    List::Tokens => gaps + 3,
                    _ => 2,
                };
            }
            (first, i as u32)
        })
        .collect();
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    (order, counts)
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

/// The events of `lists` over every request, in sweep order: by time, ends (deltas not
/// above 0) before starts at equal times, then in the order the lists and requests made
/// them (the order a stable sort of all events by time and sign gives). Each request
/// still in flight at the sweep's time holds a cursor over its events of each list, and
/// the heap holds only each cursor's next event, so it stays as small as the concurrency.
struct Events<'a, S: ?Sized> {
    spans: &'a S,
    order: &'a [(f64, u32)],
    lists: &'a [List],
    next: usize,
    /// `heap_key` of each cursor's next event; the least comes first.
    heap: BinaryHeap<Reverse<u128>>,
    cursors: Vec<Cursor>,
    /// Cursors whose events were all taken, for reuse.
    free: Vec<u32>,
}

impl<'a, S: SpanSource + ?Sized> Events<'a, S> {
    fn new(spans: &'a S, order: &'a [(f64, u32)], lists: &'a [List]) -> Self {
        Events {
            spans,
            order,
            lists,
            next: 0,
            heap: BinaryHeap::new(),
            cursors: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Opens a cursor over each list's events of request `i`.
    fn take_in(&mut self, i: u32) {
        let s = self.spans.span(i as usize);
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
            list.of(&s, &mut cursor.events);
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

impl<S: SpanSource + ?Sized> Iterator for Events<'_, S> {
    type Item = (f64, f64);

    fn next(&mut self) -> Option<(f64, f64)> {
        // Take in every request that may have an event at or before the earliest waiting.
        while let Some(&(first, i)) = self.order.get(self.next) {
            if let Some(Reverse(top)) = self.heap.peek()
                && total_order_key(first) > (top >> 64) as u64
            {
                break;
            }
            self.next += 1;
            self.take_in(i);
        }
        let mut top = self.heap.peek_mut()?;
        let slot = slot_of(top.0);
        let cursor = &mut self.cursors[slot as usize];
        let event = cursor.events[cursor.taken];
        cursor.taken += 1;
        match cursor.events.get(cursor.taken) {
            Some(&(time, delta)) => {
                *top = Reverse(heap_key(time, delta, cursor.list, cursor.span, slot));
            }
            None => {
                PeekMut::pop(top);
                self.free.push(slot);
            }
        }
        Some(event)
    }
}

/// Curves of at most this many events are swept once and held (16 bytes a point, 16 MiB
/// at most); larger ones are swept again for each figure, so a long run's memory stays flat.
const HOLD_EVENTS: usize = 1 << 20;

/// A right-continuous step function summed from event lists: the level after the last
/// event at each time, 0 before the first. Only the value after the last event at a time
/// is kept, since the ones before it are held for no time. Levels below a billionth of
/// the largest one are rounding residue (large +/- pairs do not cancel exactly) and read 0.
enum Curve<'a, S: ?Sized> {
    /// Swept once, its points kept.
    Held(Step),
    /// Swept again each time its points are read.
    Swept {
        spans: &'a S,
        order: &'a [(f64, u32)],
        lists: &'a [List],
        floor: f64,
    },
}

impl<'a, S: SpanSource + ?Sized> Curve<'a, S> {
    /// One sweep, which finds the largest level (the residue floor) and, when `hold`,
    /// keeps the points. `events` is at most how many events the lists have (`by_first_event`'s
    /// counts): room for the points.
    fn new(
        spans: &'a S,
        order: &'a [(f64, u32)],
        lists: &'a [List],
        events: usize,
        hold: bool,
    ) -> Self {
        let mut level = 0.0;
        let mut peak = 0.0f64;
        let mut held = Step::default();
        if hold {
            held.times.reserve_exact(events);
            held.values.reserve_exact(events);
        }
        for (t, delta) in Events::new(spans, order, lists) {
            level += delta;
            peak = peak.max(level.abs());
            if !hold {
                continue;
            }
            if held.times.last() == Some(&t) {
                *held.values.last_mut().expect("as many values as times") = level;
            } else {
                held.times.push(t);
                held.values.push(level);
            }
        }
        let floor = 1e-9 * peak;
        if hold {
            for v in &mut held.values {
                if v.abs() < floor {
                    *v = 0.0;
                }
            }
            return Curve::Held(held);
        }
        Curve::Swept {
            spans,
            order,
            lists,
            floor,
        }
    }

    /// `(time, value)` points in time order (times distinct).
    fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        match self {
            Curve::Held(step) => Points::Held(step.points()),
            Curve::Swept {
                spans,
                order,
                lists,
                floor,
            } => Points::Swept(swept_points(*spans, order, lists, *floor)),
        }
    }

    /// The curve held whole.
    fn into_step(self) -> Step {
        match self {
            Curve::Held(step) => step,
            swept => Step::collect(swept.points()),
        }
    }
}

/// A held or a swept curve's points: one match a point, where chaining two optional
/// iterators checked both (2% of a sweep's instructions by callgrind).
enum Points<H, W> {
    Held(H),
    Swept(W),
}

impl<H, W> Iterator for Points<H, W>
where
    H: Iterator<Item = (f64, f64)>,
    W: Iterator<Item = (f64, f64)>,
{
    type Item = (f64, f64);

    fn next(&mut self) -> Option<(f64, f64)> {
        match self {
            Points::Held(points) => points.next(),
            Points::Swept(points) => points.next(),
        }
    }
}

/// A curve's points, summed from its events as the sweep goes.
fn swept_points<'a, S: SpanSource + ?Sized>(
    spans: &'a S,
    order: &'a [(f64, u32)],
    lists: &'a [List],
    floor: f64,
) -> impl Iterator<Item = (f64, f64)> + 'a {
    let mut events = Events::new(spans, order, lists).peekable();
    let mut level = 0.0;
    std::iter::from_fn(move || {
        let (t, delta) = events.next()?;
        level += delta;
        while let Some(&(t2, d2)) = events.peek()
            && t2 == t
        {
            level += d2;
            events.next();
        }
        Some((t, if level.abs() < floor { 0.0 } else { level }))
    })
}

/// A step function held whole (the concurrencies: two events per request).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    pub times: Vec<f64>,
    pub values: Vec<f64>,
}

impl Step {
    fn collect(points: impl Iterator<Item = (f64, f64)>) -> Step {
        let (times, values) = points.unzip();
        Step { times, values }
    }

    fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.times.iter().copied().zip(self.values.iter().copied())
    }
}

/// The curve's value at `t`: moves `points` past every point at or before `t` and returns
/// the last one's value (`value`, the value so far, when there is none).
fn value_at<I: Iterator<Item = (f64, f64)>>(
    points: &mut std::iter::Peekable<I>,
    t: f64,
    mut value: f64,
) -> f64 {
    while let Some(&(x, v)) = points.peek()
        && x <= t
    {
        value = v;
        points.next();
    }
    value
}

/// Point-wise quotient on the merged times; 0 where the divisor is not positive; nothing
/// when either is empty.
fn divide(
    a: impl Iterator<Item = (f64, f64)>,
    b: impl Iterator<Item = (f64, f64)>,
) -> impl Iterator<Item = (f64, f64)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let mut done = a.peek().is_none() || b.peek().is_none();
    let (mut av, mut bv) = (0.0, 0.0);
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let t = match (a.peek(), b.peek()) {
            (Some(&(x, _)), Some(&(y, _))) => {
                if x.total_cmp(&y).is_le() {
                    x
                } else {
                    y
                }
            }
            (Some(&(x, _)), None) => x,
            (None, Some(&(y, _))) => y,
            (None, None) => {
                done = true;
                return None;
            }
        };
        av = value_at(&mut a, t, av);
        bv = value_at(&mut b, t, bv);
        Some((t, if bv > 0.0 { av / bv } else { 0.0 }))
    })
}

/// Whether every partial sum of `count` durations, in any order, is exact: each is a whole
/// multiple of 2^`unit` (`None`: one is not a normal number) and all of them, `covered` in
/// floating point, add up to fewer than 2^53 units. Adding n positive numbers loses less
/// than n x 2^-53 of the sum, so `covered` a little enlarged bounds the exact total: near
/// the limit this answers no where the sums were exact, never the other way, and the
/// sorted walk it then takes gives the same figures.
fn sums_are_exact(covered: f64, count: usize, unit: Option<i32>) -> bool {
    unit.is_some_and(|u| covered * (1.0 + count as f64 * 2f64.powi(-51)) < 2f64.powi(53 + u))
}

/// For a positive normal number, the exponent of its lowest set bit: the largest power
/// of two it is a whole multiple of.
fn lowest_bit_exponent(d: f64) -> Option<i32> {
    if !d.is_normal() {
        return None;
    }
    let bits = d.to_bits();
    let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    Some(((bits >> 52) & 0x7ff) as i32 - 1075 + mantissa.trailing_zeros() as i32)
}

/// Weighted statistics of `(value, duration)` segments; `total` is the time the average
/// is taken over. Percentiles are the first value whose cumulative time share reaches q.
/// Two passes gather the sums (each in time order, as `Iterator::sum` adds) and extremes
/// before the percentiles are selected.
fn weighted(mut segments: Vec<(f64, f64)>, total: f64) -> WeightedStats {
    // Drops the segments held for no time; the sum of value x duration, the extremes (as
    // `total_order_key`s: one integer compare each) and the smallest power of two any
    // duration is a whole multiple of.
    let zero: f64 = std::iter::empty::<f64>().sum();
    let (mut kept, mut moment, mut covered) = (0, zero, zero);
    let (mut min, mut max) = (u64::MAX, u64::MIN);
    let mut unit = Some(i32::MAX);
    for i in 0..segments.len() {
        let (v, d) = segments[i];
        if d.partial_cmp(&0.0) != Some(Ordering::Greater) {
            continue;
        }
        let key = total_order_key(v);
        min = min.min(key);
        max = max.max(key);
        segments[kept] = (v, d);
        kept += 1;
        moment += v * d;
        covered += d;
        unit = unit.zip(lowest_bit_exponent(d)).map(|(u, e)| u.min(e));
    }
    segments.truncate(kept);
    if segments.is_empty() || total <= 0.0 {
        return WeightedStats::default();
    }
    let (min, max) = (from_total_order_key(min), from_total_order_key(max));
    let avg = moment / total;
    let mut spread = zero;
    for &(v, d) in &segments {
        spread += d * (v - avg) * (v - avg);
    }
    let exact = sums_are_exact(covered, segments.len(), unit);
    let var = spread / total;
    let mut at = [max; 4];
    if exact {
        // Every partial sum is the same in any order: select instead of sorting.
        select_by_buckets(&mut segments, covered, (min, max), &mut at);
    } else {
        // Equal values keep their time order (a stable sort), as the cumulative time
        // adds up in that order.
        segments.sort_by(|a, b| a.0.total_cmp(&b.0));
        let covered: f64 = segments.iter().map(|s| s.1).sum();
        let mut found = 0;
        let mut acc = 0.0;
        for s in &segments {
            if found == LEVELS.len() {
                break;
            }
            acc += s.1;
            while found < LEVELS.len() && reached(acc, covered, LEVELS[found]) {
                at[found] = s.0;
                found += 1;
            }
        }
    }
    WeightedStats {
        avg,
        min,
        max,
        p50: at[0],
        p90: at[1],
        p95: at[2],
        p99: at[3],
        std: var.sqrt(),
    }
}

/// The weighted percentiles' levels.
const LEVELS: [f64; 4] = [0.50, 0.90, 0.95, 0.99];

/// True when `acc` of `covered` reaches the share `level` (a NaN share counts as reached,
/// as the partition point takes it).
fn reached(acc: f64, covered: f64, level: f64) -> bool {
    (acc / covered).partial_cmp(&level) != Some(Ordering::Less)
}

/// Selections over fewer segments than this go straight to `select_levels`.
const BUCKETED_FROM: usize = 2048;
/// Equal-width value buckets between the least and the largest value.
const BUCKETS: usize = 1024;
const _: () = assert!(BUCKETS <= 1 << 16, "bucket indices are kept as u16");

/// `select_levels` over `segments` (exact sums) at `LEVELS`, narrowed first when there are
/// many: one pass adds each segment's time to its value bucket (equal widths between
/// `min` and `max`, so bucket order is value order), which tells the bucket each level
/// falls in and the time of the buckets below it; a second pass gathers those buckets'
/// segments, and the selection runs among them alone. About half the work of selecting
/// among them all (by callgrind, a 3,000-request run's sweep).
fn select_by_buckets(
    segments: &mut [(f64, f64)],
    covered: f64,
    (min, max): (f64, f64),
    out: &mut [f64; 4],
) {
    let scale = BUCKETS as f64 / (max - min);
    // Infinite or NaN extremes, one value, or a range too narrow or too wide for f64.
    if segments.len() < BUCKETED_FROM || !(scale.is_finite() && scale > 0.0) {
        select_levels(segments, 0.0, covered, &LEVELS, out);
        return;
    }
    // Rounding is monotone, so a larger value never lands in a lower bucket; equal
    // values share one.
    let bucket = |v: f64| (((v - min) * scale) as usize).min(BUCKETS - 1);
    // Each segment's bucket, kept for the second pass (2 bytes a segment).
    let mut time = vec![0.0; BUCKETS];
    let buckets: Vec<u16> = segments
        .iter()
        .map(|&(v, d)| {
            let b = bucket(v);
            time[b] += d;
            b as u16
        })
        .collect();
    // Each level's bucket and the time below that bucket; the whole time reaches every
    // level, as sums are exact.
    let mut found = [(0, 0.0); LEVELS.len()];
    let (mut level, mut acc) = (0, 0.0);
    for (b, &t) in time.iter().enumerate() {
        let below = acc;
        acc += t;
        while level < LEVELS.len() && reached(acc, covered, LEVELS[level]) {
            found[level] = (b, below);
            level += 1;
        }
    }
    // Levels in one bucket are selected together.
    let mut group_of = vec![u8::MAX; BUCKETS];
    let mut groups: Vec<(usize, Vec<(f64, f64)>)> = Vec::new();
    for (i, &(b, _)) in found[..level].iter().enumerate() {
        if group_of[b] == u8::MAX {
            group_of[b] = groups.len() as u8;
            groups.push((i, Vec::new()));
        }
    }
    for (&s, &b) in segments.iter().zip(&buckets) {
        if let Some((_, members)) = groups.get_mut(usize::from(group_of[usize::from(b)])) {
            members.push(s);
        }
    }
    for (g, (first, members)) in groups.iter_mut().enumerate() {
        let (b, below) = found[*first];
        let last = *first + found[*first..level].iter().take_while(|f| f.0 == b).count();
        debug_assert_eq!(usize::from(group_of[b]), g);
        select_levels(
            members,
            below,
            covered,
            &LEVELS[*first..last],
            &mut out[*first..last],
        );
    }
}

/// For each of `levels` (ascending), the least value of `segments` whose segments at or
/// below it, with the `below` time of values under all of them, reach the level's share
/// of `covered`: what walking the sorted segments finds, when every partial sum is exact.
/// A quickselect over values, splitting at a pivot into below, equal and above.
fn select_levels(
    segments: &mut [(f64, f64)],
    below: f64,
    covered: f64,
    levels: &[f64],
    out: &mut [f64],
) {
    if levels.is_empty() || segments.is_empty() {
        return;
    }
    let n = segments.len();
    let mut three = [segments[0].0, segments[n / 2].0, segments[n - 1].0];
    three.sort_by(f64::total_cmp);
    let pivot = three[1];
    let (mut lt, mut i, mut gt) = (0, 0, n);
    let (mut under, mut equal) = (below, 0.0);
    while i < gt {
        match segments[i].0.total_cmp(&pivot) {
            Ordering::Less => {
                under += segments[i].1;
                segments.swap(lt, i);
                lt += 1;
                i += 1;
            }
            Ordering::Greater => {
                gt -= 1;
                segments.swap(i, gt);
            }
            Ordering::Equal => {
                equal += segments[i].1;
                i += 1;
            }
        }
    }
    let through = under + equal;
    let in_lower = levels.partition_point(|&l| reached(under, covered, l));
    let at_pivot = levels.partition_point(|&l| reached(through, covered, l));
    let (lower, upper) = segments.split_at_mut(gt);
    select_levels(
        &mut lower[..lt],
        below,
        covered,
        &levels[..in_lower],
        &mut out[..in_lower],
    );
    out[in_lower..at_pivot].fill(pivot);
    select_levels(
        upper,
        through,
        covered,
        &levels[at_pivot..],
        &mut out[at_pivot..],
    );
}

/// Over the whole window `[from, to]`, 0 before the first point.
fn effective(points: impl Iterator<Item = (f64, f64)>, from: f64, to: f64) -> WeightedStats {
    let mut points = points.peekable();
    if points.peek().is_none() {
        return WeightedStats::default();
    }
    // The segments between `from`, the points inside the window and `to`.
    let mut segments = Vec::new();
    let (mut at, mut value) = (from, 0.0);
    for (t, v) in points {
        if t <= from {
            value = v;
        } else if t < to {
            segments.push((value, t - at));
            (at, value) = (t, v);
        } else {
            break;
        }
    }
    segments.push((value, to - at));
    weighted(segments, to - from)
}

/// Over the parts of the window where `mask` is positive only.
fn active(
    points: impl Iterator<Item = (f64, f64)>,
    mask: impl Iterator<Item = (f64, f64)>,
    from: f64,
    to: f64,
) -> WeightedStats {
    let (mut points, mut mask) = (points.peekable(), mask.peekable());
    let forward = matches!(
        from.partial_cmp(&to),
        Some(Ordering::Less | Ordering::Equal)
    );
    if points.peek().is_none() || !forward {
        return WeightedStats::default();
    }
    // Edges: `from`, every point of either inside the window, `to`; each segment takes
    // the values at its left edge.
    let mut segments = Vec::new();
    let (mut value, mut masked) = (0.0, 0.0);
    let mut edge = from;
    loop {
        value = value_at(&mut points, edge, value);
        masked = value_at(&mut mask, edge, masked);
        if edge >= to {
            break;
        }
        let next = [points.peek(), mask.peek()]
            .into_iter()
            .flatten()
            .map(|p| p.0)
            .fold(to, f64::min);
        if masked > 0.0 {
            segments.push((value, next - edge));
        }
        edge = next;
    }
    let busy = segments.iter().map(|s| s.1).sum();
    weighted(segments, busy)
}

const NS_PER_S: f64 = 1e9;

fn per_second(s: WeightedStats) -> WeightedStats {
    WeightedStats {
        avg: s.avg * NS_PER_S,
        min: s.min * NS_PER_S,
        max: s.max * NS_PER_S,
        p50: s.p50 * NS_PER_S,
        p90: s.p90 * NS_PER_S,
        p95: s.p95 * NS_PER_S,
        p99: s.p99 * NS_PER_S,
        std: s.std * NS_PER_S,
    }
}

/// A rate curve's figures over `[from, to]` with its concurrency `busy`, per second:
/// effective and active, of the rate and of the rate per request in flight. `points`
/// gives the rate's points anew for each figure.
fn rate_figures<I: Iterator<Item = (f64, f64)>>(
    points: impl Fn() -> I,
    busy: &Step,
    from: f64,
    to: f64,
) -> (WeightedStats, WeightedStats, WeightedStats, WeightedStats) {
    (
        per_second(effective(points(), from, to)),
        per_second(active(points(), busy.points(), from, to)),
        per_second(effective(divide(points(), busy.points()), from, to)),
        per_second(active(
            divide(points(), busy.points()),
            busy.points(),
            from,
            to,
        )),
    )
}

/// The total rate's figures per second: effective, and active while any request is in
/// flight (`overall`).
fn total_figures<I: Iterator<Item = (f64, f64)>>(
    points: impl Fn() -> I,
    overall: &Step,
    from: f64,
    to: f64,
) -> (WeightedStats, WeightedStats) {
    (
        per_second(effective(points(), from, to)),
        per_second(active(points(), overall.points(), from, to)),
    )
}

/// Every sweep-line metric over the window `[from, to]` (ns, same anchor as the spans).
/// Rates are tokens/sec, concurrencies requests, tokens in flight tokens.
pub fn metrics<S: SpanSource + ?Sized>(
    spans: &S,
    from: f64,
    to: f64,
) -> Vec<(MetricId, WeightedStats)> {
    metrics_holding(spans, from, to, HOLD_EVENTS)
}

/// `metrics`, holding the curves of at most `hold_events` events.
fn metrics_holding<S: SpanSource + ?Sized>(
    spans: &S,
    from: f64,
    to: f64,
    hold_events: usize,
) -> Vec<(MetricId, WeightedStats)> {
    let (order, counts) = by_first_event(spans);
    let curve = |lists: &'static [List]| {
        let events: usize = lists
            .iter()
            .map(|l| counts[ALL_LISTS.iter().position(|a| a == l).expect("a list")])
            .sum();
        Curve::new(spans, &order, lists, events, events <= hold_events)
    };
    let overall = curve(&[List::Requests]).into_step();
    let decode_conc = curve(&[List::Decoding]).into_step();
    let prefill_conc = curve(&[List::Prefilling]).into_step();
    let has_chunks = (0..spans.count()).any(|i| !spans.span(i).chunk_gaps.is_empty());
    // A held curve's points are read straight from its step, not through `Points`.
    let figures_of = |rate: Curve<S>, busy: &Step| match &rate {
        Curve::Held(step) => rate_figures(|| step.points(), busy, from, to),
        swept => rate_figures(|| swept.points(), busy, from, to),
    };
    let decode_list: &'static [List] = if has_chunks {
        &[List::DecodeByChunk]
    } else {
        &[List::Decode]
    };
    let (decode_eff, decode_active, decode_user_eff, decode_user_active) =
        figures_of(curve(decode_list), &decode_conc);
    let (prefill_eff, prefill_active, prefill_user_eff, prefill_user_active) =
        figures_of(curve(&[List::Prefill]), &prefill_conc);
    let total = curve(&[List::Prefill, List::Decode]);
    let (total_eff, total_active) = match &total {
        Curve::Held(step) => total_figures(|| step.points(), &overall, from, to),
        swept => total_figures(|| swept.points(), &overall, from, to),
    };
    let tokens = match curve(&[List::Tokens]) {
        Curve::Held(step) => effective(step.points(), from, to),
        swept => effective(swept.points(), from, to),
    };

    use MetricId as M;
    vec![
        (
            M::EffectiveConcurrency,
            effective(overall.points(), from, to),
        ),
        (
            M::EffectiveDecodeConcurrency,
            effective(decode_conc.points(), from, to),
        ),
        (
            M::EffectivePrefillConcurrency,
            effective(prefill_conc.points(), from, to),
        ),
        (M::EffectiveDecodeThroughput, decode_eff),
        (M::EffectivePrefillThroughput, prefill_eff),
        (M::EffectiveTotalThroughput, total_eff),
        (M::EffectiveDecodeThroughputPerUser, decode_user_eff),
        (M::EffectivePrefillThroughputPerUser, prefill_user_eff),
        (M::TokensInFlight, tokens),
        (M::ActiveDecodeThroughput, decode_active),
        (M::ActivePrefillThroughput, prefill_active),
        (M::ActiveTotalThroughput, total_active),
        (M::ActiveDecodeThroughputPerUser, decode_user_active),
        (M::ActivePrefillThroughputPerUser, prefill_user_active),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    fn span(start_ms: f64, first_ms: f64, end_ms: f64, isl: f64, osl: f64) -> Span<'static> {
        Span {
            start: start_ms * MS,
            generation_start: Some(first_ms * MS),
            end: end_ms * MS,
            input_tokens: Some(isl),
            output_tokens: Some(osl),
            chunk_gaps: &[],
        }
    }

    fn encoded(gaps: &[f64]) -> Vec<u8> {
        let mut out = Vec::new();
        for &g in gaps {
            column::encode(&mut out, g);
        }
        out
    }

    /// `weighted` over the segments' whole time, and the sorted walk's figures.
    fn with_the_sorted_walk(segments: Vec<(f64, f64)>) -> (WeightedStats, WeightedStats) {
        let total: f64 = segments.iter().map(|s| s.1).sum();
        (
            weighted(segments.clone(), total),
            held::weighted(segments, total),
        )
    }

    /// Every figure's bits, to compare two computations exactly.
    fn bits(w: &WeightedStats) -> [u64; 8] {
        [w.avg, w.min, w.max, w.p50, w.p90, w.p95, w.p99, w.std].map(f64::to_bits)
    }

    fn get(all: &[(MetricId, WeightedStats)], id: MetricId) -> WeightedStats {
        all.iter().find(|m| m.0 == id).unwrap().1
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
    }

    /// The whole-curve forms the sweep had before it streamed: every event of a curve in
    /// one list, stably sorted, the step held whole, segments sorted stably with their
    /// cumulative shares. The streaming sweep must give the same bits.
    mod held {
        use super::super::*;

        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Held {
            pub times: Vec<f64>,
            pub values: Vec<f64>,
        }

        impl Held {
            pub fn from_events(mut events: Vec<(f64, f64)>) -> Held {
                events.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1 > 0.0).cmp(&(b.1 > 0.0))));
                let mut step = Held::default();
                let mut level = 0.0;
                for event in &mut events {
                    level += event.1;
                    event.1 = level;
                }
                let peak = events.iter().map(|s| s.1.abs()).fold(0.0, f64::max);
                for (t, v) in events {
                    let v = if v.abs() < 1e-9 * peak { 0.0 } else { v };
                    if step.times.last() == Some(&t) {
                        *step.values.last_mut().expect("same length") = v;
                    } else {
                        step.times.push(t);
                        step.values.push(v);
                    }
                }
                step
            }

            fn at(&self, t: f64) -> f64 {
                match self.times.partition_point(|&x| x <= t) {
                    0 => 0.0,
                    i => self.values[i - 1],
                }
            }

            pub fn divide(&self, by: &Held) -> Held {
                if self.times.is_empty() || by.times.is_empty() {
                    return Held::default();
                }
                let times = merged(&self.times, &by.times);
                let values = times
                    .iter()
                    .map(|&t| {
                        let d = by.at(t);
                        if d > 0.0 { self.at(t) / d } else { 0.0 }
                    })
                    .collect();
                Held { times, values }
            }
        }

        /// All spans' events of the lists, list by list, request by request.
        pub fn events(spans: &[Span], lists: &[List]) -> Vec<(f64, f64)> {
            let mut out = Vec::new();
            for &list in lists {
                for s in spans {
                    list.of(s, &mut out);
                }
            }
            out
        }

        pub fn merged(a: &[f64], b: &[f64]) -> Vec<f64> {
            let mut times: Vec<f64> = a.iter().chain(b).copied().collect();
            times.sort_by(f64::total_cmp);
            times.dedup();
            times
        }

        pub fn weighted(mut segments: Vec<(f64, f64)>, total: f64) -> WeightedStats {
            segments.retain(|s| s.1 > 0.0);
            if segments.is_empty() || total <= 0.0 {
                return WeightedStats::default();
            }
            let avg = segments.iter().map(|(v, d)| v * d).sum::<f64>() / total;
            let var = segments
                .iter()
                .map(|(v, d)| d * (v - avg) * (v - avg))
                .sum::<f64>()
                / total;
            segments.sort_by(|a, b| a.0.total_cmp(&b.0));
            let covered: f64 = segments.iter().map(|s| s.1).sum();
            let mut cumulative = Vec::with_capacity(segments.len());
            let mut acc = 0.0;
            for s in &segments {
                acc += s.1;
                cumulative.push(acc / covered);
            }
            let at = |q: f64| {
                let i = cumulative
                    .partition_point(|&c| c < q)
                    .min(segments.len() - 1);
                segments[i].0
            };
            WeightedStats {
                avg,
                min: segments[0].0,
                max: segments[segments.len() - 1].0,
                p50: at(0.50),
                p90: at(0.90),
                p95: at(0.95),
                p99: at(0.99),
                std: var.sqrt(),
            }
        }

        pub fn effective(step: &Held, from: f64, to: f64) -> WeightedStats {
            if step.times.is_empty() {
                return WeightedStats::default();
            }
            let mut edges = vec![from];
            edges.extend(step.times.iter().copied().filter(|&t| t > from && t < to));
            edges.push(to);
            let segments = edges
                .windows(2)
                .map(|w| (step.at(w[0]), w[1] - w[0]))
                .collect();
            weighted(segments, to - from)
        }

        pub fn active(step: &Held, mask: &Held, from: f64, to: f64) -> WeightedStats {
            if step.times.is_empty() {
                return WeightedStats::default();
            }
            let mut edges: Vec<f64> = [from, to]
                .into_iter()
                .chain(step.times.iter().copied())
                .chain(mask.times.iter().copied())
                .filter(|&t| t >= from && t <= to)
                .collect();
            edges.sort_by(f64::total_cmp);
            edges.dedup();
            let segments: Vec<(f64, f64)> = edges
                .windows(2)
                .filter(|w| mask.at(w[0]) > 0.0)
                .map(|w| (step.at(w[0]), w[1] - w[0]))
                .collect();
            let busy = segments.iter().map(|s| s.1).sum();
            weighted(segments, busy)
        }

        /// `metrics` as it was, curve by curve held whole.
        pub fn metrics(spans: &[Span], from: f64, to: f64) -> Vec<(MetricId, WeightedStats)> {
            let step = |lists: &[List]| Held::from_events(events(spans, lists));
            let overall = step(&[List::Requests]);
            let decode_conc = step(&[List::Decoding]);
            let prefill_conc = step(&[List::Prefilling]);
            let has_chunks = spans.iter().any(|s| !s.chunk_gaps.is_empty());
            let rate_figures = |rate: Held, busy: &Held| {
                let per_user = rate.divide(busy);
                (
                    per_second(effective(&rate, from, to)),
                    per_second(active(&rate, busy, from, to)),
                    per_second(effective(&per_user, from, to)),
                    per_second(active(&per_user, busy, from, to)),
                )
            };
            let decode = step(if has_chunks {
                &[List::DecodeByChunk]
            } else {
                &[List::Decode]
            });
            let d = rate_figures(decode, &decode_conc);
            let p = rate_figures(step(&[List::Prefill]), &prefill_conc);
            let total = step(&[List::Prefill, List::Decode]);
            use MetricId as M;
            vec![
                (M::EffectiveConcurrency, effective(&overall, from, to)),
                (
                    M::EffectiveDecodeConcurrency,
                    effective(&decode_conc, from, to),
                ),
                (
                    M::EffectivePrefillConcurrency,
                    effective(&prefill_conc, from, to),
                ),
                (M::EffectiveDecodeThroughput, d.0),
                (M::EffectivePrefillThroughput, p.0),
                (
                    M::EffectiveTotalThroughput,
                    per_second(effective(&total, from, to)),
                ),
                (M::EffectiveDecodeThroughputPerUser, d.2),
                (M::EffectivePrefillThroughputPerUser, p.2),
                (
                    M::TokensInFlight,
                    effective(&step(&[List::Tokens]), from, to),
                ),
                (M::ActiveDecodeThroughput, d.1),
                (M::ActivePrefillThroughput, p.1),
                (
                    M::ActiveTotalThroughput,
                    per_second(active(&total, &overall, from, to)),
                ),
                (M::ActiveDecodeThroughputPerUser, d.3),
                (M::ActivePrefillThroughputPerUser, p.3),
            ]
        }
    }

    /// Requests from small whole numbers (ns), some scaled by 1e6 so that rates and
    /// shares do not come out round: starts, first tokens, ends, token counts, chunk gaps.
    type Raw = (u32, Option<u32>, u32, Option<u8>, Option<u8>, Vec<u32>);

    fn raw_spans() -> impl proptest::strategy::Strategy<Value = Vec<Raw>> {
        proptest::collection::vec(
            (
                0u32..300,
                proptest::option::of(0u32..60),
                0u32..120,
                proptest::option::of(0u8..40),
                proptest::option::of(0u8..20),
                proptest::collection::vec(0u32..40, 0..6),
            ),
            0..25,
        )
    }

    fn gap_bytes(raw: &[Raw], scale: f64) -> Vec<Vec<u8>> {
        raw.iter()
            .map(|r| encoded(&r.5.iter().map(|&g| g as f64 * scale).collect::<Vec<_>>()))
            .collect()
    }

    fn build<'a>(raw: &[Raw], gaps: &'a [Vec<u8>], scale: f64) -> Vec<Span<'a>> {
        raw.iter()
            .zip(gaps)
            .map(|(r, g)| {
                let start = r.0 as f64 * scale;
                Span {
                    start,
                    generation_start: r.1.map(|t| start + t as f64 * scale),
                    end: start + r.2 as f64 * scale,
                    input_tokens: r.3.map(f64::from),
                    output_tokens: r.4.map(f64::from),
                    chunk_gaps: g,
                }
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn streamed_curves_match_the_held_ones(raw in raw_spans(), scale in proptest::sample::select(vec![1.0, 1e6, 1.7e3])) {
            let gaps = gap_bytes(&raw, scale);
            let spans = build(&raw, &gaps, scale);
            let (order, counts) = by_first_event(&spans[..]);
            let sets: [&[List]; 9] = [
                &[List::Requests], &[List::Decoding], &[List::Prefilling], &[List::Prefill],
                &[List::Decode], &[List::DecodeByChunk], &[List::Tokens],
                &[List::Prefill, List::Decode], &[List::Tokens, List::DecodeByChunk, List::Requests],
            ];
            for (lists, hold) in sets.into_iter().flat_map(|l| [(l, false), (l, true)]) {
                let events = counts.iter().sum();
                let streamed = Curve::new(&spans[..], &order, lists, events, hold).into_step();
                let held = held::Held::from_events(held::events(&spans, lists));
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                proptest::prop_assert_eq!(bits(&streamed.times), bits(&held.times), "{:?} {}", lists, hold);
                proptest::prop_assert_eq!(bits(&streamed.values), bits(&held.values), "{:?} {}", lists, hold);
            }
        }

        #[test]
        fn selected_percentiles_match_the_sorted_walk(
            segments in proptest::collection::vec(
                (proptest::sample::select(vec![-2.5, 0.0, -0.0, 1.0, 3.0, 7.25, f64::NAN, f64::INFINITY]), 0u32..50),
                1..200,
            ),
            scale in proptest::sample::select(vec![1.0, 0.1, 1e9]),
        ) {
            // Exact sums (whole durations) take the selection; 0.1 takes the sorted walk.
            let segments: Vec<(f64, f64)> = segments.into_iter().map(|(v, d)| (v, d as f64 * scale)).collect();
            let (now, before) = with_the_sorted_walk(segments);
            proptest::prop_assert_eq!(bits(&now), bits(&before), "{:?} {:?}", now, before);
        }

        #[test]
        fn streamed_metrics_match_the_held_ones(raw in raw_spans(), scale in proptest::sample::select(vec![1.0, 1e6, 1.7e3]), from in 0u32..200, len in 0u32..400) {
            let gaps = gap_bytes(&raw, scale);
            let spans = build(&raw, &gaps, scale);
            for (from, to) in [(from, from + len), (from + len, from), (0, 450)] {
                let (from, to) = (from as f64 * scale, to as f64 * scale);
                let before = held::metrics(&spans, from, to);
                // Every curve swept again per figure, and every curve held.
                for hold_events in [0, usize::MAX] {
                    let now = metrics_holding(&spans[..], from, to, hold_events);
                    for ((id, a), (_, b)) in now.iter().zip(&before) {
                        proptest::prop_assert_eq!(bits(a), bits(b), "{:?} {:?} {:?} {}", id, a, b, hold_events);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        #[test]
        fn bucketed_selection_matches_the_sorted_walk(
            segments in proptest::collection::vec(
                (
                    proptest::prop_oneof![
                        4 => -1e3f64..1e3,
                        1 => proptest::sample::select(vec![-0.0, 0.0, 2.5, 1e-300, 1e12, -1e9]),
                    ],
                    0u32..50,
                ),
                BUCKETED_FROM..3 * BUCKETED_FROM,
            ),
            skewed in proptest::bool::ANY,
        ) {
            // Whole durations: exact sums, so the selection (bucketed past BUCKETED_FROM).
            // `skewed` keeps the outliers (1e12, -1e9), which crowd the other values into
            // a bucket or two; otherwise values are clamped to +/-1e3.
            let segments: Vec<(f64, f64)> = segments
                .into_iter()
                .map(|(v, d)| (if skewed { v } else { v.clamp(-1e3, 1e3) }, f64::from(d)))
                .collect();
            let (now, before) = with_the_sorted_walk(segments);
            proptest::prop_assert_eq!(bits(&now), bits(&before), "{:?} {:?}", now, before);
        }
    }

    #[test]
    fn exact_sums_stop_short_of_2_pow_53_units() {
        let units = |n: f64, unit: i32| n * 2f64.powi(unit);
        for unit in [0, -10, 30] {
            assert!(sums_are_exact(units(1e6, unit), 1000, Some(unit)));
            assert!(sums_are_exact(units(2f64.powi(52), unit), 1000, Some(unit)));
            assert!(!sums_are_exact(units(2f64.powi(53), unit), 1, Some(unit)));
            // Within the rounding bound of the limit: no.
            assert!(!sums_are_exact(
                units(2f64.powi(53) - 2.0, unit),
                1000,
                Some(unit)
            ));
        }
        assert!(!sums_are_exact(1.0, 1, None));
        assert!(sums_are_exact(f64::MAX / 2.0, 1, Some(971)));
        assert!(!sums_are_exact(f64::INFINITY, 1, Some(971)));
    }

    #[test]
    fn durations_far_apart_in_size_take_the_sorted_walk() {
        // 2^120 is 2^140 units of 2^-20: far past any exact sum (and any u128 shift).
        let segments = vec![(1.0, 2f64.powi(120)), (2.0, 1.0), (3.0, 2f64.powi(-20))];
        let (now, before) = with_the_sorted_walk(segments);
        assert_eq!(bits(&now), bits(&before));
        assert_eq!((now.min, now.p50, now.max), (1.0, 1.0, 3.0));
    }

    #[test]
    fn two_overlapping_requests_by_hand() {
        // A: 0..100 ms, first token at 20 ms, 200 in, 9 out.
        // B: 50..150 ms, first token at 60 ms, 100 in, 11 out. Window 0..200 ms.
        let spans = [
            span(0.0, 20.0, 100.0, 200.0, 9.0),
            span(50.0, 60.0, 150.0, 100.0, 11.0),
        ];
        let all = metrics(&spans[..], 0.0, 200.0 * MS);

        // Concurrency: 1 for 50 ms, 2 for 50 ms, 1 for 50 ms, 0 for 50 ms.
        let c = get(&all, MetricId::EffectiveConcurrency);
        close(c.avg, (50.0 + 100.0 + 50.0) / 200.0);
        assert_eq!((c.min, c.max), (0.0, 2.0));
        // Sorted by value: 0 (25% of the time), 1 (50%), 2 (25%): median 1, p90 2.
        assert_eq!((c.p50, c.p90, c.p99), (1.0, 2.0, 2.0));
        let var = (50.0 * 1.0f64.powi(2) + 100.0 * 0.0 + 50.0 * 1.0) / 200.0;
        close(c.std, var.sqrt());

        // Decode: A makes 8 tokens over 80 ms (100/s), B 10 over 90 ms (111.1/s).
        let d = get(&all, MetricId::EffectiveDecodeThroughput);
        close(d.avg, (8.0 + 10.0) / 0.2);
        close(d.max, 100.0 + 10.0 / 0.09);
        // Active decode: only while a request decodes (20..150 ms = 130 ms).
        let a = get(&all, MetricId::ActiveDecodeThroughput);
        close(a.avg, 18.0 / 0.13);
        // Prefill: 200 tokens in 20 ms, 100 in 10 ms.
        let p = get(&all, MetricId::EffectivePrefillThroughput);
        close(p.avg, 300.0 / 0.2);
        let ap = get(&all, MetricId::ActivePrefillThroughput);
        close(ap.avg, 300.0 / 0.03);
        close(ap.min, 10_000.0);
        let t = get(&all, MetricId::EffectiveTotalThroughput);
        close(t.avg, (300.0 + 18.0) / 0.2);
        // Prefill concurrency: 20 ms + 10 ms of one request.
        close(
            get(&all, MetricId::EffectivePrefillConcurrency).avg,
            30.0 / 200.0,
        );
        close(
            get(&all, MetricId::EffectiveDecodeConcurrency).avg,
            (80.0 + 90.0) / 200.0,
        );
        // Tokens in flight without chunk times: input from the start, output at the first
        // token, all freed at the end.
        let expected = (200.0 * 100.0 + 9.0 * 80.0 + 100.0 * 100.0 + 11.0 * 90.0) / 200.0;
        close(get(&all, MetricId::TokensInFlight).avg, expected);
        // Per user: A alone 100/s, both (100 + 111.1) / 2, B alone 111.1/s.
        let u = get(&all, MetricId::ActiveDecodeThroughputPerUser);
        close(u.max, 10.0 / 0.09);
        close(u.min, 100.0);
        close(
            u.avg,
            (100.0 * 40.0 + (100.0 + 10.0 / 0.09) / 2.0 * 40.0 + 10.0 / 0.09 * 50.0) / 130.0,
        );
    }

    #[test]
    fn chunk_times_shape_the_decode_rate_and_tokens() {
        // One request 0..100 ms, first token at 10 ms, then chunks after 30 and 60 ms of
        // gaps: 5 tokens, so each gap carries 2.
        let mut s = span(0.0, 10.0, 100.0, 10.0, 5.0);
        let gaps = encoded(&[30.0 * MS, 60.0 * MS]);
        s.chunk_gaps = &gaps;
        let all = metrics(&[s][..], 0.0, 100.0 * MS);
        let d = get(&all, MetricId::EffectiveDecodeThroughput);
        close(d.max, 2.0 / 0.03);
        close(d.min, 0.0);
        close(d.avg, 4.0 / 0.1);
        // Tokens: 10 from 0, +1 at 10 ms, +2 at 40 ms, +2 just before the end at 100 ms
        // (held for a sliver of time, as in AIPerf).
        let t = get(&all, MetricId::TokensInFlight);
        assert!((t.avg - (10.0 * 10.0 + 11.0 * 30.0 + 13.0 * 60.0) / 100.0).abs() < 1e-6);
        close(t.max, 15.0);
    }

    #[test]
    fn a_chunk_held_back_before_its_start_is_swept_in_order() {
        // The first request ends as it starts, with a chunk stamped after its end: that
        // chunk counts just before the end, which is before its start and after nothing
        // else but the second request's start, half a sliver earlier still.
        let late_chunk = encoded(&[5.0]);
        let spans = [
            Span {
                start: 1000.0,
                generation_start: Some(1000.0),
                end: 1000.0,
                input_tokens: Some(3.0),
                output_tokens: Some(2.0),
                chunk_gaps: &late_chunk,
            },
            Span {
                start: 1000.0 - SLIVER / 2.0,
                generation_start: Some(1500.0),
                end: 2000.0,
                input_tokens: Some(4.0),
                output_tokens: Some(1.0),
                chunk_gaps: &[],
            },
        ];
        let (order, counts) = by_first_event(&spans[..]);
        let events = counts.iter().sum();
        let swept = Curve::new(&spans[..], &order, &[List::Tokens], events, true).into_step();
        let held = held::Held::from_events(held::events(&spans, &[List::Tokens]));
        assert_eq!(swept.times, held.times);
        assert_eq!(swept.values, held.values);
        assert_eq!(swept.times[0], 1000.0 - SLIVER);
    }

    #[test]
    fn failed_requests_count_in_concurrency_only() {
        let failed = Span {
            start: 0.0,
            generation_start: None,
            end: 40.0 * MS,
            input_tokens: None,
            output_tokens: None,
            chunk_gaps: &[],
        };
        let all = metrics(&[failed][..], 0.0, 80.0 * MS);
        close(get(&all, MetricId::EffectiveConcurrency).avg, 0.5);
        assert_eq!(
            get(&all, MetricId::EffectiveDecodeThroughput),
            WeightedStats::default()
        );
        assert_eq!(
            get(&all, MetricId::TokensInFlight),
            WeightedStats::default()
        );
    }
}
