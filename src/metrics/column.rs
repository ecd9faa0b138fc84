//! Compact, lossless storage for the per-request values the statistics need.
//!
//! A long run keeps tens of values per request until its end. Most are whole numbers (ns
//! durations, token counts): those take a LEB128 varint of `n << 1` (1 byte for a token
//! count, 3-5 for a duration in ns); any other f64 takes a marker byte and its 8 raw bytes.
//! Decoding gives back the exact bits that were pushed, so every statistic is unchanged.
//! A [`Column`] writes its bytes to a spill as they come, and its statistics sort them
//! within a bounded memory (`spill::sort`), so a run's length costs disk, not memory.

use std::sync::Arc;

use crate::spill::sort::{RUN_BYTES, Sorter};
use crate::spill::{Log, Reader, Spill};
use crate::stats::{Stats, from_total_order_key, total_order_key};

/// First byte of a value stored as its raw bits (a whole number's first byte is even).
const RAW: u8 = 1;

/// Appends `v` to `out`. The bytes are gathered in two words and stored as two fixed
/// 8-byte appends, then cut back: a push per byte made a capacity check each, and bytes
/// stored one by one into a buffer then copied out stall the copy's wide load (a
/// collector adds some 50 values a record).
pub fn encode(out: &mut Vec<u8>, v: f64) {
    // The encoding's bytes, little-endian: the first eight in `lo`, the rest in `hi`.
    let (mut lo, mut hi) = (0u64, 0u64);
    let n = v as u64;
    // Whole, non-negative and below 2^63 (so `n << 1` fits); the bit test keeps -0.0 raw.
    let len = if n < 1 << 63 && (n as f64).to_bits() == v.to_bits() {
        let mut rest = n << 1;
        let mut len = 0;
        loop {
            let more = rest >= 0x80;
            let byte = u64::from(rest as u8 & 0x7f | u8::from(more) << 7);
            match len {
                0..8 => lo |= byte << (8 * len),
                _ => hi |= byte << (8 * (len - 8)),
            }
            len += 1;
            if !more {
                break len;
            }
            rest >>= 7;
        }
    } else {
        let bits = v.to_bits();
        lo = u64::from(RAW) | bits << 8;
        hi = bits >> 56;
        9
    };
    let at = out.len();
    out.extend_from_slice(&lo.to_le_bytes());
    if len > 8 {
        out.extend_from_slice(&hi.to_le_bytes());
    }
    out.truncate(at + len);
}

/// The values encoded in `bytes`, in order.
pub fn decode(bytes: &[u8]) -> Decode<'_> {
    Decode { bytes, at: 0 }
}

/// Iterator over encoded values.
#[derive(Debug, Clone)]
pub struct Decode<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Iterator for Decode<'_> {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let rest = self.bytes.get(self.at..).filter(|b| !b.is_empty())?;
        let (v, used) = decode_one(rest);
        self.at += used;
        Some(v)
    }
}

/// The value at the start of `bytes` (not empty) and its encoded length.
pub fn decode_one(bytes: &[u8]) -> (f64, usize) {
    if bytes[0] == RAW {
        let raw = &bytes[1..9];
        return (
            f64::from_bits(u64::from_le_bytes(raw.try_into().expect("8 bytes"))),
            9,
        );
    }
    let mut n = 0u64;
    let mut shift = 0;
    let mut at = 0;
    loop {
        let b = bytes[at];
        at += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    ((n >> 1) as f64, at)
}

/// One metric's values over the run, encoded, in a log that spills.
#[derive(Debug)]
pub struct Column {
    log: Log,
    len: usize,
}

impl Column {
    pub fn new(spill: &Arc<Spill>) -> Column {
        Column {
            log: Log::new(spill),
            len: 0,
        }
    }

    pub fn push(&mut self, v: f64) {
        encode(self.log.tail(), v);
        self.log.end_item();
        self.len += 1;
    }

    #[cfg(test)]
    pub fn extend(&mut self, values: &[f64]) {
        for &v in values {
            self.push(v);
        }
    }

    /// `count` values already encoded (by `encode`), appended as they are.
    pub fn push_encoded(&mut self, bytes: &[u8], count: usize) {
        self.log.tail().extend_from_slice(bytes);
        self.log.end_item();
        self.len += count;
    }

    /// Every value, in the order pushed.
    pub fn values(&self) -> Values<'_> {
        Values {
            reader: self.log.reader(),
        }
    }

    /// Every value, decoded.
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<f64> {
        self.values().collect()
    }

    /// `Stats::compute` of the values, bit for bit, sorting them in runs of a bounded size
    /// (in a spill of the sort's own) when there are many.
    pub fn stats(&self) -> Option<Stats> {
        self.stats_within(RUN_BYTES)
    }

    /// The statistics of every value less `by`, floored at 0 (AIPerf's network adjustment:
    /// `max(latency - rtt, 0)`). The map keeps the order, so the values sort once.
    pub fn stats_less(&self, by: f64) -> Option<Stats> {
        self.sorted_stats(RUN_BYTES, |v| (v - by).max(0.0))
    }

    fn stats_within(&self, run_bytes: usize) -> Option<Stats> {
        self.sorted_stats(run_bytes, |v| v)
    }

    /// Statistics of `map` of each value; `map` must not decrease (it is applied after the
    /// sort).
    fn sorted_stats(&self, run_bytes: usize, map: impl Fn(f64) -> f64) -> Option<Stats> {
        if self.len == 0 {
            return None;
        }
        let mut sorter = Sorter::new(&Spill::new(), run_bytes);
        for v in self.values() {
            sorter.push(total_order_key(v));
        }
        let sorted = sorter.finish();
        Stats::from_sorted(self.len, || {
            sorted.iter().map(|k| map(from_total_order_key(k)))
        })
    }
}

/// A column's values, read back in order.
pub struct Values<'a> {
    reader: Reader<'a>,
}

impl Iterator for Values<'_> {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let bytes = self.reader.rest()?;
        let (v, used) = decode_one(bytes);
        self.reader.advance(used);
        Some(v)
    }
}

/// One scraped series' samples, by the ordinal of the scrape they came in, run-length
/// encoded: a value that repeats on consecutive scrapes (an idle gauge, a GPU's memory in
/// use) costs nothing more, one that changes a few bytes. Bits come back exact.
#[derive(Debug, Clone, Default)]
pub struct SampleRuns {
    /// Finished runs: the gap in ordinals since the previous run's end, the value, the
    /// length (each as `encode` writes it).
    runs: Vec<u8>,
    /// The run still growing: first ordinal, value, length.
    open: Option<(u64, f64, u64)>,
    /// Ordinal just past the last finished run.
    end: u64,
}

impl SampleRuns {
    /// Adds the sample of scrape `ordinal` (ordinals only grow).
    pub fn push(&mut self, ordinal: u64, v: f64) {
        if let Some((first, value, len)) = &mut self.open
            && *first + *len == ordinal
            && value.to_bits() == v.to_bits()
        {
            *len += 1;
            return;
        }
        self.close_run();
        self.open = Some((ordinal, v, 1));
    }

    fn close_run(&mut self) {
        if let Some((first, value, len)) = self.open.take() {
            encode(&mut self.runs, (first - self.end) as f64);
            encode(&mut self.runs, value);
            encode(&mut self.runs, len as f64);
            self.end = first + len;
        }
    }

    /// Every (ordinal, value), in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        let mut decoded = decode(&self.runs);
        let mut end = 0u64;
        let finished = std::iter::from_fn(move || {
            let gap = decoded.next()? as u64;
            let value = decoded.next()?;
            let len = decoded.next()? as u64;
            let first = end + gap;
            end = first + len;
            Some((first, value, len))
        });
        finished
            .chain(self.open)
            .flat_map(|(first, value, len)| (first..first + len).map(move |o| (o, value)))
    }

    /// The values of the scrapes `lo..=hi`.
    pub fn in_range(&self, lo: u64, hi: u64) -> Vec<f64> {
        self.iter()
            .skip_while(|(o, _)| *o < lo)
            .take_while(|(o, _)| *o <= hi)
            .map(|(_, v)| v)
            .collect()
    }

    /// Bytes held (finished runs).
    #[cfg(test)]
    pub fn encoded_len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    /// `encode` as it was written first, a push per byte: the bytes must stay the same.
    fn encode_by_pushes(out: &mut Vec<u8>, v: f64) {
        let n = v as u64;
        if n < 1 << 63 && (n as f64).to_bits() == v.to_bits() {
            let mut rest = n << 1;
            while rest >= 0x80 {
                out.push(rest as u8 | 0x80);
                rest >>= 7;
            }
            out.push(rest as u8);
        } else {
            out.push(RAW);
            out.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }

    proptest::proptest! {
        #[test]
        fn encodes_the_bytes_a_push_per_byte_made(
            bits in proptest::num::u64::ANY,
            whole in proptest::prop_oneof![0u64..256, 0u64..(1 << 53), proptest::num::u64::ANY],
        ) {
            for v in [f64::from_bits(bits), whole as f64, -0.0, 0.0, f64::NAN, 2f64.powi(63), 2f64.powi(63) - 1024.0] {
                let (mut ours, mut pushed) = (b"ab".to_vec(), b"ab".to_vec());
                encode(&mut ours, v);
                encode_by_pushes(&mut pushed, v);
                proptest::prop_assert_eq!(ours, pushed);
            }
        }
    }

    #[test]
    fn round_trips_every_kind_of_value_bit_for_bit() {
        let values = [
            0.0,
            -0.0,
            1.0,
            63.0,
            64.0,
            127.0,
            128.0,
            16_383.0,
            40_000_000.0,
            (1u64 << 53) as f64,
            (1u64 << 62) as f64,
            (1u64 << 63) as f64,
            9.2e18,
            1e300,
            0.5,
            -3.0,
            1e9 / 7.0,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let mut c = Column::new(&Spill::new());
        c.extend(&values);
        let back = c.to_vec();
        assert_eq!(back.len(), values.len());
        let mut runs = SampleRuns::default();
        for (i, v) in values.iter().enumerate() {
            runs.push(i as u64 * 2, *v);
        }
        let kept: Vec<(u64, f64)> = runs.iter().collect();
        assert_eq!(kept.len(), values.len());
        for (i, ((o, b), a)) in kept.iter().zip(&values).enumerate() {
            assert_eq!((*o, a.to_bits()), (i as u64 * 2, b.to_bits()));
        }
        for (a, b) in values.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits(), "{a} came back as {b}");
        }
    }

    /// The network adjustment: each value less the round trip, floored at 0, then the
    /// statistics of those values as `Stats::compute` gives them.
    #[test]
    fn stats_less_shifts_each_value_and_floors_at_zero() {
        let values = [5e6, 1e6, 30e6, 2.5e6, 12e6];
        let mut c = Column::new(&Spill::new());
        c.extend(&values);
        let got = c.stats_less(2e6).unwrap();
        let want = Stats::compute(&mut [3e6, 0.0, 28e6, 0.5e6, 10e6]).unwrap();
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert_eq!(got.min, 0.0);
        assert_eq!(got.max, 28e6);
        assert!(Column::new(&Spill::new()).stats_less(1.0).is_none());
    }

    #[test]
    fn whole_numbers_take_few_bytes() {
        let mut out = Vec::new();
        encode(&mut out, 16.0);
        assert_eq!(out.len(), 1);
        out.clear();
        // 40 ms in ns.
        encode(&mut out, 40_000_000.0);
        assert_eq!(out.len(), 4);
        out.clear();
        encode(&mut out, 2.5);
        assert_eq!(out.len(), 9);
    }

    proptest::proptest! {
        #[test]
        fn any_bits_round_trip(bits in proptest::collection::vec(proptest::num::u64::ANY, 0..50), whole in proptest::collection::vec(0u64..(1 << 53), 0..50)) {
            let values: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).chain(whole.iter().map(|&n| n as f64)).collect();
            let mut c = Column::new(&Spill::new());
            c.extend(&values);
            let back: Vec<u64> = c.to_vec().iter().map(|v| v.to_bits()).collect();
            let want: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
            proptest::prop_assert_eq!(back, want);
        }

        /// A column's statistics, through sorted runs in a spill or in memory, are those
        /// of the values held and sorted, bit for bit.
        #[test]
        fn column_stats_are_the_held_values_stats(
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::num::f64::ANY,
                    (0u64..1 << 35).prop_map(|n| n as f64),
                    (0u64..50).prop_map(|n| n as f64),
                    proptest::prelude::Just(f64::NAN),
                    proptest::prelude::Just(-0.0),
                ],
                0..3000,
            ),
            run_bytes in proptest::sample::select(vec![64usize, 4096, 1 << 20]),
        ) {
            let mut c = Column::new(&Spill::new());
            c.extend(&values);
            let got = c.stats_within(run_bytes);
            let want = Stats::compute(&mut values.clone());
            let all = |s: &Option<Stats>| s.map(|s| {
                let mut v = vec![s.avg, s.min, s.max, s.std, s.sum, s.count as f64];
                v.extend(s.percentiles);
                // NaN payloads are not kept by arithmetic (LLVM may swap an add's
                // operands): any NaN compares as one.
                v.iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() }).collect::<Vec<_>>()
            });
            proptest::prop_assert_eq!(all(&got), all(&want));
        }
    }

    #[test]
    fn sample_runs_keep_each_ordinal_and_value_and_repeats_cost_nothing() {
        let mut runs = SampleRuns::default();
        // Scrapes 0..1000 of an idle gauge, absent from 1000 to 1004, then changing.
        for o in 0..1000 {
            runs.push(o, 3.0);
        }
        for o in 1005..1010 {
            runs.push(o, o as f64 / 4.0);
        }
        runs.push(1010, 1010.0 / 4.0 + 0.25);
        let all: Vec<(u64, f64)> = runs.iter().collect();
        assert_eq!(all.len(), 1006);
        assert_eq!(all[999], (999, 3.0));
        assert_eq!(all[1000], (1005, 1005.0 / 4.0));
        assert_eq!(all[1005], (1010, 252.75));
        // One run for the idle thousand, one per changing value.
        assert!(runs.encoded_len() < 80, "{} bytes", runs.encoded_len());
        assert_eq!(runs.in_range(998, 1006), [3.0, 3.0, 251.25, 251.5]);
        assert_eq!(runs.in_range(1001, 1004), Vec::<f64>::new());
        assert!(SampleRuns::default().iter().next().is_none());
        // NaN repeats are one run too (bits, not ==).
        let mut nan = SampleRuns::default();
        nan.push(0, f64::NAN);
        nan.push(1, f64::NAN);
        assert_eq!(nan.iter().count(), 2);
    }
}
