//! Time-weighted statistics of a curve's `(value, duration)` segments, taken in passes over
//! segments made anew for each pass from the curve, so that no segment is held.
//!
//! Sums are taken in time order (the order the segments come in) as they always were: the
//! moment and the time covered in a first pass, the spread around the average in a second.
//! Percentiles are the first value whose cumulative time share reaches the level, walking
//! the segments by value with equal values in time order. When every partial sum of the
//! durations is exact (`sums_are_exact`: whole multiples of one power of two adding up to
//! less than 2^53 of it) the walk's order cannot change a sum, so the value is selected:
//! the second pass also counts time into value buckets, and later passes narrow the bucket
//! each level falls in until it holds one value or few enough segments to select among in
//! memory. Otherwise the segments are sorted by (value, time order), in memory when few and
//! with the external sort of `spill::sort` when many.

use super::WeightedStats;
use crate::spill::sort::{KeyValue, RUN_BYTES, Sorter};
use crate::spill::{LARGE_CHUNK, Spill};
use crate::stats::{from_total_order_key, total_order_key};
use std::cmp::Ordering;

/// How much a sweep may hold in memory (smaller in tests, to take every path).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Segments gathered in memory to select or sort among.
    pub gather: usize,
    /// Bytes an external sort gathers into each run.
    pub sort_bytes: usize,
    /// Points of a curve held in memory before it goes to a spill.
    pub hold_points: usize,
    /// Bytes of a spilled curve's chunks (where reading a window can start).
    pub curve_chunk: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            gather: 1 << 17,
            sort_bytes: RUN_BYTES,
            hold_points: 1 << 17,
            curve_chunk: LARGE_CHUNK,
        }
    }
}

/// The buffers of segments a figure's passes gather in, handed on from one figure to the
/// next: a fresh one grown to `Limits::gather` segments cost its copies and page faults
/// each time (7% of the sweep by perf, 20,000 requests). It holds no more of them than
/// were in use at once.
#[derive(Default)]
pub(super) struct Scratch {
    segments: Vec<Vec<(f64, f64)>>,
}

impl Scratch {
    fn take(&mut self) -> Vec<(f64, f64)> {
        self.segments.pop().unwrap_or_default()
    }

    fn give(&mut self, mut buffer: Vec<(f64, f64)>) {
        if buffer.capacity() > 0 {
            buffer.clear();
            self.segments.push(buffer);
        }
    }
}

/// The weighted percentiles' levels.
const LEVELS: [f64; 4] = [0.50, 0.90, 0.95, 0.99];

/// True when `acc` of `covered` reaches the share `level` (a NaN share counts as reached,
/// as the partition point takes it).
fn reached(acc: f64, covered: f64, level: f64) -> bool {
    (acc / covered).partial_cmp(&level) != Some(Ordering::Less)
}

/// Whether every partial sum of `count` durations, in any order, is exact: each is a whole
/// multiple of 2^`unit` (`None`: one is not a normal number) and all of them, `covered` in
/// floating point, add up to fewer than 2^53 units. Adding n positive numbers loses less
/// than n x 2^-53 of the sum, so `covered` a little enlarged bounds the exact total: near
/// the limit this answers no where the sums were exact, never the other way, and the
/// sorted walk it then takes gives the same figures.
pub(super) fn sums_are_exact(covered: f64, count: usize, unit: Option<i32>) -> bool {
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

/// What the first pass finds: the sums in time order and the extremes of the segments
/// held for some time; and those segments while they are few, or once they are many the
/// time and number of them in each coarse value bucket.
struct FirstPass {
    kept: usize,
    moment: f64,
    covered: f64,
    /// Every segment's duration, in time order (an active figure's time).
    all: f64,
    /// Extremes as `total_order_key`s.
    min: u64,
    max: u64,
    unit: Option<i32>,
    /// The segments held for some time, in time order, up to `Limits::gather` of them.
    few: Option<Vec<(f64, f64)>>,
    /// Past that: their time and number by the top bits of their value's key.
    coarse: Vec<(f64, u64)>,
    /// The buffer `few` was, once the segments outgrew it.
    spare: Vec<(f64, f64)>,
}

/// The key bits under one coarse bucket: buckets by sign, exponent and the top 4 bits of
/// the mantissa, 16 to each power of two.
const COARSE_SHIFT: u32 = 48;

impl FirstPass {
    /// A first pass that gathers its few segments into `few` (emptied).
    fn new(mut few: Vec<(f64, f64)>) -> FirstPass {
        few.clear();
        let zero: f64 = std::iter::empty::<f64>().sum();
        FirstPass {
            kept: 0,
            moment: zero,
            covered: zero,
            all: zero,
            min: u64::MAX,
            max: u64::MIN,
            unit: Some(i32::MAX),
            few: Some(few),
            coarse: Vec::new(),
            spare: Vec::new(),
        }
    }

    #[inline]
    fn add(&mut self, v: f64, d: f64, gather: usize) {
        let coarse_add = |coarse: &mut Vec<(f64, u64)>, key: u64, d: f64| {
            let bucket = &mut coarse[(key >> COARSE_SHIFT) as usize];
            bucket.0 += d;
            bucket.1 += 1;
        };
        self.all += d;
        if d.partial_cmp(&0.0) != Some(Ordering::Greater) {
            return;
        }
        let key = total_order_key(v);
        self.min = self.min.min(key);
        self.max = self.max.max(key);
        self.kept += 1;
        self.moment += v * d;
        self.covered += d;
        self.unit = self.unit.zip(lowest_bit_exponent(d)).map(|(u, e)| u.min(e));
        match &mut self.few {
            Some(few) if few.len() < gather => few.push((v, d)),
            Some(few) => {
                // Too many to hold: counted into the coarse buckets from now on.
                self.coarse = vec![(0.0, 0); 1 << (64 - COARSE_SHIFT)];
                for &(v, d) in few.iter() {
                    coarse_add(&mut self.coarse, total_order_key(v), d);
                }
                self.spare = std::mem::take(few);
                self.spare.clear();
                self.few = None;
                coarse_add(&mut self.coarse, key, d);
            }
            None => coarse_add(&mut self.coarse, key, d),
        }
    }
}

/// Weighted statistics of segments taken in passes over them: `add` each segment (the
/// same ones, in the same time order, in every pass), then `end_pass`, until `done`.
/// Percentiles are the first value whose cumulative time share reaches the level.
pub(super) struct Weighted {
    /// The time the average is taken over; `None` for the segments' own time.
    total: Option<f64>,
    limits: Limits,
    pass: Pass,
}

/// What the next pass does with each segment.
enum Pass {
    First(FirstPass),
    /// Exact sums, too many segments to hold: the second pass takes the spread, and it and
    /// each later one count or gather the segments of `ranges` (keys within `lo..=hi`).
    Ranges {
        found: Found,
        ranges: Vec<Range>,
        lo: u64,
        hi: u64,
        spread: bool,
    },
    /// Inexact sums, too many segments to hold: the spread, and a sort by (value, time
    /// order) of the segments, the `next`th held one next.
    Sorting {
        found: Found,
        sorter: Sorter<KeyValue>,
        next: u64,
    },
    Done(WeightedStats),
}

/// What the passes after the first one need, and the figures found so far.
struct Found {
    avg: f64,
    min: f64,
    max: f64,
    covered: f64,
    total: f64,
    spread: f64,
    at: [f64; 4],
}

impl Found {
    fn stats(&self) -> WeightedStats {
        let var = self.spread / self.total;
        WeightedStats {
            avg: self.avg,
            min: self.min,
            max: self.max,
            p50: self.at[0],
            p90: self.at[1],
            p95: self.at[2],
            p99: self.at[3],
            std: var.sqrt(),
        }
    }

    #[inline]
    fn add_spread(&mut self, v: f64, d: f64) {
        self.spread += d * (v - self.avg) * (v - self.avg);
    }
}

impl Weighted {
    pub(super) fn new(total: Option<f64>, limits: Limits, scratch: &mut Scratch) -> Weighted {
        Weighted {
            total,
            limits,
            pass: Pass::First(FirstPass::new(scratch.take())),
        }
    }

    /// Whether the figures are found (no more passes).
    pub(super) fn done(&self) -> bool {
        matches!(self.pass, Pass::Done(_))
    }

    /// The figures; call once `done`.
    pub(super) fn stats(&self) -> WeightedStats {
        match self.pass {
            Pass::Done(stats) => stats,
            _ => panic!("the passes are not over"),
        }
    }

    /// Takes the next segment of this pass.
    #[inline]
    pub(super) fn add(&mut self, v: f64, d: f64) {
        match &mut self.pass {
            Pass::First(p) => p.add(v, d, self.limits.gather),
            Pass::Ranges {
                found,
                ranges,
                lo,
                hi,
                spread,
            } => {
                if d.partial_cmp(&0.0) != Some(Ordering::Greater) {
                    return;
                }
                if *spread {
                    found.add_spread(v, d);
                }
                let key = total_order_key(v);
                // Most segments lie outside every range: one test sets them aside.
                if key < *lo || key > *hi {
                    return;
                }
                if let Some(r) = ranges.iter_mut().find(|r| r.holds(key)) {
                    r.add(key, v, d);
                }
            }
            Pass::Sorting {
                found,
                sorter,
                next,
            } => {
                if d.partial_cmp(&0.0) != Some(Ordering::Greater) {
                    return;
                }
                found.add_spread(v, d);
                sorter.push(KeyValue {
                    key: u128::from(total_order_key(v)) << 64 | u128::from(*next),
                    value: d.to_bits(),
                });
                *next += 1;
            }
            Pass::Done(_) => {}
        }
    }

    /// Ends a pass: the figures, or what the next pass must do.
    pub(super) fn end_pass(&mut self, scratch: &mut Scratch) {
        let limits = self.limits;
        let pass = std::mem::replace(&mut self.pass, Pass::Done(WeightedStats::default()));
        self.pass = match pass {
            Pass::First(p) => after_first(p, self.total, limits, scratch),
            Pass::Ranges {
                mut found, ranges, ..
            } => {
                let next = narrow(ranges, found.covered, limits, &mut found.at, scratch);
                ranges_or_done(found, next, false)
            }
            Pass::Sorting {
                mut found, sorter, ..
            } => {
                let sorted = sorter.finish();
                let pairs = || {
                    sorted.iter().map(|s| {
                        (
                            from_total_order_key((s.key >> 64) as u64),
                            f64::from_bits(s.value),
                        )
                    })
                };
                let covered: f64 = pairs().map(|s| s.1).sum();
                walk(pairs(), covered, &mut found.at);
                Pass::Done(found.stats())
            }
            done @ Pass::Done(_) => done,
        };
    }
}

/// After the first pass: the figures when the segments were few (held since), else the
/// second pass.
fn after_first(p: FirstPass, total: Option<f64>, limits: Limits, scratch: &mut Scratch) -> Pass {
    scratch.give(p.spare);
    let total = total.unwrap_or(p.all);
    if p.kept == 0 || total <= 0.0 {
        return Pass::Done(WeightedStats::default());
    }
    let (min, max) = (from_total_order_key(p.min), from_total_order_key(p.max));
    let avg = p.moment / total;
    let exact = sums_are_exact(p.covered, p.kept, p.unit);
    let mut found = Found {
        avg,
        min,
        max,
        covered: p.covered,
        total,
        spread: std::iter::empty::<f64>().sum(),
        at: [max; 4],
    };
    if let Some(mut few) = p.few {
        // Few, and held since the first pass: selected or sorted in memory.
        for &(v, d) in &few {
            found.add_spread(v, d);
        }
        if exact {
            select_by_buckets(&mut few, p.covered, (min, max), &mut found.at);
        } else {
            sorted_walk(&mut few, &mut found.at);
        }
        scratch.give(few);
        Pass::Done(found.stats())
    } else if exact {
        // Each level's coarse bucket; the second pass gathers or counts into finer
        // buckets the segments of those alone.
        let ranges = coarse_ranges(&p.coarse, (p.min, p.max), p.covered, limits, scratch);
        ranges_or_done(found, ranges, true)
    } else {
        // The second pass also sorts them, by value then time order.
        Pass::Sorting {
            found,
            sorter: Sorter::new(&Spill::new(), limits.sort_bytes),
            next: 0,
        }
    }
}

/// A pass over `ranges` (always, for the spread), or the figures when no range is left.
fn ranges_or_done(found: Found, ranges: Vec<Range>, spread: bool) -> Pass {
    if ranges.is_empty() && !spread {
        return Pass::Done(found.stats());
    }
    let lo = ranges.iter().map(|r| r.lo).min().unwrap_or(0);
    let hi = ranges.iter().map(|r| r.hi).max().unwrap_or(0);
    Pass::Ranges {
        found,
        ranges,
        lo,
        hi,
        spread,
    }
}

/// Weighted statistics of the segments `segments()` makes (the same ones, in the same
/// order, each time); `total` is the time the average is taken over, `None` for the
/// segments' own time.
#[cfg(test)]
pub(super) fn weighted<I: Iterator<Item = (f64, f64)>>(
    segments: impl Fn() -> I,
    total: Option<f64>,
    limits: Limits,
) -> WeightedStats {
    let scratch = &mut Scratch::default();
    let mut w = Weighted::new(total, limits, scratch);
    while !w.done() {
        for (v, d) in segments() {
            w.add(v, d);
        }
        w.end_pass(scratch);
    }
    w.stats()
}

/// The coarse bucket each level falls in, as a range of keys (within the extremes) to
/// gather or count into finer buckets, with the time below it; levels in one bucket share
/// a range. The whole time reaches every level, as sums are exact.
fn coarse_ranges(
    coarse: &[(f64, u64)],
    (min, max): (u64, u64),
    covered: f64,
    limits: Limits,
    scratch: &mut Scratch,
) -> Vec<Range> {
    let mut ranges = Vec::new();
    let (mut level, mut acc) = (0, 0.0);
    for (b, &(time, count)) in coarse.iter().enumerate() {
        let below = acc;
        acc += time;
        let first = level;
        while level < LEVELS.len() && reached(acc, covered, LEVELS[level]) {
            level += 1;
        }
        if level == first {
            continue;
        }
        let lo = ((b as u64) << COARSE_SHIFT).max(min);
        let hi = ((b as u64) << COARSE_SHIFT | ((1 << COARSE_SHIFT) - 1)).min(max);
        ranges.push(if count <= limits.gather as u64 {
            Range::gathering(lo, hi, below, first..level, scratch.take())
        } else {
            Range::new(lo, hi, below, first..level, true)
        });
    }
    ranges
}

/// The walk over segments sorted by value, equal values in time order (a stable sort), as
/// the cumulative time adds up in that order.
fn sorted_walk(segments: &mut [(f64, f64)], at: &mut [f64; 4]) {
    segments.sort_by(|a, b| a.0.total_cmp(&b.0));
    let covered: f64 = segments.iter().map(|s| s.1).sum();
    walk(segments.iter().copied(), covered, at);
}

fn walk(sorted: impl Iterator<Item = (f64, f64)>, covered: f64, at: &mut [f64; 4]) {
    let mut found = 0;
    let mut acc = 0.0;
    for (v, d) in sorted {
        if found == LEVELS.len() {
            break;
        }
        acc += d;
        while found < LEVELS.len() && reached(acc, covered, LEVELS[found]) {
            at[found] = v;
            found += 1;
        }
    }
}

/// Selections over fewer segments than this go straight to `select_levels`.
pub(super) const BUCKETED_FROM: usize = 2048;
/// Value buckets a range is split into.
const BUCKETS: usize = 1024;
const _: () = assert!(BUCKETS <= 1 << 16, "bucket indices are kept as u16");

/// `select_levels` over `segments` (exact sums) at `LEVELS`, narrowed first when there are
/// many: one pass adds each segment's time to its value bucket (equal widths between
/// `min` and `max`, so bucket order is value order), which tells the bucket each level
/// falls in and the time of the buckets below it; a second pass gathers those buckets'
/// segments, and the selection runs among them alone. About half the work of selecting
/// among them all (by callgrind, a 3,000-request run's sweep).
pub(super) fn select_by_buckets(
    segments: &mut [(f64, f64)],
    covered: f64,
    (min, max): (f64, f64),
    out: &mut [f64; 4],
) {
    select_within(segments, 0.0, covered, (min, max), &LEVELS, out);
}

/// `select_by_buckets` for `levels` (a run of `LEVELS`) among segments of values within
/// `min..=max`, above `below` time of segments under all of them.
fn select_within(
    segments: &mut [(f64, f64)],
    below: f64,
    covered: f64,
    (min, max): (f64, f64),
    levels: &[f64],
    out: &mut [f64],
) {
    let scale = BUCKETS as f64 / (max - min);
    // Infinite or NaN extremes, one value, or a range too narrow or too wide for f64.
    if segments.len() < BUCKETED_FROM || !(scale.is_finite() && scale > 0.0) {
        select_levels(segments, below, covered, levels, out);
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
    let (mut level, mut acc) = (0, below);
    for (b, &t) in time.iter().enumerate() {
        let under = acc;
        acc += t;
        while level < levels.len() && reached(acc, covered, levels[level]) {
            found[level] = (b, under);
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
        let (b, under) = found[*first];
        let last = *first + found[*first..level].iter().take_while(|f| f.0 == b).count();
        debug_assert_eq!(usize::from(group_of[b]), g);
        select_levels(
            members,
            under,
            covered,
            &levels[*first..last],
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

/// Where some levels' values lie: among the segments whose value keys are in `lo..=hi`,
/// above `below` time of segments under `lo`. Its segments are counted into buckets, or
/// gathered when few.
struct Range {
    lo: u64,
    hi: u64,
    below: f64,
    /// Indices into `LEVELS`.
    levels: std::ops::Range<usize>,
    /// Per bucket: time, segments, least and largest key; empty when gathering.
    time: Vec<f64>,
    count: Vec<usize>,
    least: Vec<u64>,
    largest: Vec<u64>,
    /// Equal-width value buckets (`Some(lo value, scale)`), else buckets of keys.
    linear: Option<(f64, f64)>,
    /// Key bits under one bucket, for buckets of keys.
    shift: u32,
    gathered: Vec<(f64, f64)>,
}

impl Range {
    /// A range bucketed by value when `linear` (and the values' span allows), else by key.
    fn new(lo: u64, hi: u64, below: f64, levels: std::ops::Range<usize>, linear: bool) -> Range {
        let (lo_v, hi_v) = (from_total_order_key(lo), from_total_order_key(hi));
        let scale = BUCKETS as f64 / (hi_v - lo_v);
        let linear = (linear && scale.is_finite() && scale > 0.0).then_some((lo_v, scale));
        let mut shift = 0;
        while (hi - lo) >> shift >= BUCKETS as u64 {
            shift += 1;
        }
        Range {
            lo,
            hi,
            below,
            levels,
            time: vec![0.0; BUCKETS],
            count: vec![0; BUCKETS],
            least: vec![u64::MAX; BUCKETS],
            largest: vec![0; BUCKETS],
            linear,
            shift,
            gathered: Vec::new(),
        }
    }

    /// A range whose segments are few enough to gather.
    fn gathering(
        lo: u64,
        hi: u64,
        below: f64,
        levels: std::ops::Range<usize>,
        mut gathered: Vec<(f64, f64)>,
    ) -> Range {
        gathered.clear();
        Range {
            lo,
            hi,
            below,
            levels,
            time: Vec::new(),
            count: Vec::new(),
            least: Vec::new(),
            largest: Vec::new(),
            linear: None,
            shift: 0,
            gathered,
        }
    }

    fn holds(&self, key: u64) -> bool {
        self.lo <= key && key <= self.hi
    }

    fn add(&mut self, key: u64, v: f64, d: f64) {
        if self.time.is_empty() {
            self.gathered.push((v, d));
            return;
        }
        // Both are monotone in the value: a larger value never lands in a lower bucket.
        let b = match self.linear {
            Some((lo_v, scale)) => (((v - lo_v) * scale) as usize).min(BUCKETS - 1),
            None => ((key - self.lo) >> self.shift) as usize,
        };
        self.time[b] += d;
        self.count[b] += 1;
        self.least[b] = self.least[b].min(key);
        self.largest[b] = self.largest[b].max(key);
    }
}

/// One round of the selection: each range counted in the last pass gives its levels'
/// values when their bucket holds one value or was gathered (selected among), else a
/// narrower range of that bucket for the next pass to count; those are returned.
fn narrow(
    ranges: Vec<Range>,
    covered: f64,
    limits: Limits,
    out: &mut [f64; 4],
    scratch: &mut Scratch,
) -> Vec<Range> {
    let mut next = Vec::new();
    for mut r in ranges {
        if r.time.is_empty() {
            let values = (from_total_order_key(r.lo), from_total_order_key(r.hi));
            select_within(
                &mut r.gathered,
                r.below,
                covered,
                values,
                &LEVELS[r.levels.clone()],
                &mut out[r.levels.clone()],
            );
            scratch.give(r.gathered);
            continue;
        }
        // Each level's bucket: where the time through it first reaches the level. The
        // whole range's time reaches every level it holds, as sums are exact.
        let mut level = r.levels.start;
        let mut acc = r.below;
        for b in 0..BUCKETS {
            let below = acc;
            acc += r.time[b];
            let first = level;
            while level < r.levels.end && reached(acc, covered, LEVELS[level]) {
                level += 1;
            }
            if level == first {
                continue;
            }
            let (least, largest) = (r.least[b], r.largest[b]);
            if least == largest {
                out[first..level].fill(from_total_order_key(least));
            } else if r.count[b] <= limits.gather {
                next.push(Range::gathering(
                    least,
                    largest,
                    below,
                    first..level,
                    scratch.take(),
                ));
            } else {
                next.push(Range::new(least, largest, below, first..level, false));
            }
        }
    }
    next
}

/// The curve's value at `t`: moves `points` past every point at or before `t` and returns
/// the last one's value (`value`, the value so far, when there is none).
pub(super) fn value_at<I: Iterator<Item = (f64, f64)>>(
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
