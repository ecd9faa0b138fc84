//! AIPerf's time slices (`--slice-duration`): the metrics of the requests that started in
//! each window of the run. What each profiling request adds to its window goes to a log
//! that spills as the run goes; at the end the windows are found from the starts, and each
//! window's record metrics are the statistics of one sorted group of a single external
//! sort of (window, metric, value) keys, read twice in order as `Stats::compute` reads a
//! sorted array.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::catalog::{CATALOG, METRIC_COUNT, MetricId};
use super::collector::{Counts, TimeSlice};
use super::column;
use super::record_metrics::RecordMetrics;
use super::summary::{drop_output_token_metrics, summarize, sweep_results};
use super::sweep_line::WeightedStats;
use crate::spill::sort::{RUN_BYTES, Sorter};
use crate::spill::{Log, Spill, get_varint, put_varint};
use crate::stats::{SecondPass, Stats, from_total_order_key, total_order_key};

/// Each profiling request's start, counts, metric values and chunk gaps.
pub(super) struct SliceLog {
    log: Log,
}

/// Bits of an entry's counts byte.
const REQUEST: u8 = 1;
const ERROR: u8 = 2;
const GOOD: u8 = 4;
const OSL_MISMATCH: u8 = 8;
const USAGE_DISCREPANCY: u8 = 16;
const USAGE_COMPARED: u8 = 32;

/// One window of the run with a request in it.
pub(super) struct Window {
    /// Wall-clock ns.
    pub from: u64,
    pub to: u64,
    pub is_complete: bool,
    counts: Counts,
}

impl SliceLog {
    pub fn new(spill: &Arc<Spill>) -> SliceLog {
        SliceLog {
            log: Log::new(spill),
        }
    }

    /// Adds a request's contribution: `gaps` are its chunk gaps as `column::encode`
    /// writes them; `counts` hold 0 or 1 each.
    pub fn push(&mut self, start: u64, m: &RecordMetrics, gaps: &[u8], counts: &Counts) {
        let out = self.log.tail();
        put_varint(out, u128::from(start));
        let bit = |n: u64, b: u8| if n > 0 { b } else { 0 };
        out.push(
            bit(counts.requests, REQUEST)
                | bit(counts.errors, ERROR)
                | bit(counts.good, GOOD)
                | bit(counts.osl_mismatches, OSL_MISMATCH)
                | bit(counts.usage_discrepancies, USAGE_DISCREPANCY)
                | bit(u64::from(counts.usage_compared), USAGE_COMPARED),
        );
        put_varint(out, m.scalars().count() as u128);
        for (id, v) in m.scalars() {
            put_varint(out, id as u128);
            column::encode(out, v);
        }
        put_varint(out, gaps.len() as u128);
        out.extend_from_slice(gaps);
        self.log.end_item();
    }

    /// Every entry: its start, counts, metric values (id, value) and encoded gaps.
    fn for_each(&self, mut f: impl FnMut(u64, Counts, &mut dyn Iterator<Item = (usize, f64)>)) {
        let mut reader = self.log.reader();
        while let Some(bytes) = reader.rest() {
            let mut at = 0;
            let varint = |at: &mut usize| {
                let (n, used) = get_varint(&bytes[*at..]);
                *at += used;
                n as u64
            };
            let start = varint(&mut at);
            let flags = bytes[at];
            at += 1;
            let on = |b: u8| u64::from(flags & b != 0);
            let counts = Counts {
                requests: on(REQUEST),
                errors: on(ERROR),
                good: on(GOOD),
                osl_mismatches: on(OSL_MISMATCH),
                usage_discrepancies: on(USAGE_DISCREPANCY),
                usage_compared: flags & USAGE_COMPARED != 0,
            };
            let scalars = varint(&mut at);
            let mut values = Vec::with_capacity(scalars as usize);
            for _ in 0..scalars {
                let id = varint(&mut at) as usize;
                let (v, used) = column::decode_one(&bytes[at..]);
                at += used;
                values.push((id, v));
            }
            let len = varint(&mut at) as usize;
            let icl = MetricId::InterChunkLatency as usize;
            let gaps = column::decode(&bytes[at..at + len]).map(|v| (icl, v));
            at += len;
            f(start, counts, &mut values.into_iter().chain(gaps));
            reader.advance(at);
        }
    }

    /// AIPerf's windows: `slice_ns` long from the first request's start (`first`), each
    /// request in the window its start falls in; windows without a request are left out,
    /// and the last one ends at the run's last response (`last`).
    pub fn windows(&self, slice_ns: u64, (first, last): (u64, u64)) -> Vec<Window> {
        let mut counts: BTreeMap<u64, Counts> = BTreeMap::new();
        self.for_each(|start, c, _| {
            counts
                .entry(start.saturating_sub(first) / slice_ns)
                .or_default()
                .add(&c);
        });
        counts
            .into_iter()
            .map(|(index, counts)| {
                let from = first + index * slice_ns;
                let full_end = from + slice_ns;
                Window {
                    from,
                    to: full_end.min(last.max(from)),
                    is_complete: full_end <= last,
                    counts,
                }
            })
            .collect()
    }

    /// Each window's metrics: the record metrics' statistics and run-level values over it,
    /// then `swept`, its sweep-line metrics. `(slice_ns, first)`: the windows' length and
    /// the first one's start.
    pub fn slices(
        &self,
        (slice_ns, first): (u64, u64),
        windows: Vec<Window>,
        swept: Vec<Vec<(MetricId, WeightedStats)>>,
        goodput_enabled: bool,
        no_output_tokens: bool,
        network_rtt_ns: Option<f64>,
    ) -> Vec<TimeSlice> {
        let mut stats = self.window_stats(slice_ns, first, &windows, RUN_BYTES, network_rtt_ns);
        windows
            .into_iter()
            .zip(swept)
            .enumerate()
            .map(|(w, (window, swept))| {
                let mut results = summarize(
                    &mut |id| match network_rtt_ns {
                        Some(rtt) if id == MetricId::NetworkRtt => Stats::compute(&mut [rtt]),
                        _ => stats.remove(&(w, id as usize)),
                    },
                    &window.counts,
                    window.to - window.from,
                    true,
                    goodput_enabled,
                );
                results.extend(sweep_results(swept));
                if no_output_tokens {
                    drop_output_token_metrics(&mut results);
                }
                TimeSlice {
                    start_ns: window.from,
                    end_ns: window.to,
                    is_complete: window.is_complete,
                    results,
                }
            })
            .collect()
    }

    /// The statistics of each (window, metric) with values: every value keyed by its
    /// window's place in `windows`, its metric and its `total_order_key`, sorted in runs
    /// of `run_bytes`; then each group read in order, once for its count and sum, once for
    /// the rest. With `network_rtt_ns`, the send-anchored latencies less it (floored at 0)
    /// are also the values of their `network_adjusted_*` metrics.
    fn window_stats(
        &self,
        slice_ns: u64,
        first: u64,
        windows: &[Window],
        run_bytes: usize,
        network_rtt_ns: Option<f64>,
    ) -> BTreeMap<(usize, usize), Stats> {
        const _: () = assert!(METRIC_COUNT < 1 << 16);
        let place: BTreeMap<u64, usize> = windows
            .iter()
            .enumerate()
            .map(|(w, window)| ((window.from - first) / slice_ns, w))
            .collect();
        let mut sorter = Sorter::new(&Spill::new(), run_bytes);
        self.for_each(|start, _, values| {
            let w = place[&(start.saturating_sub(first) / slice_ns)] as u128;
            let mut push = |id: usize, v: f64| {
                sorter.push(w << 80 | (id as u128) << 64 | u128::from(total_order_key(v)));
            };
            for (id, v) in values {
                push(id, v);
                let adjusted = CATALOG[id].id.network_adjusted();
                if let (Some(adjusted), Some(rtt)) = (adjusted, network_rtt_ns) {
                    push(adjusted as usize, (v - rtt).max(0.0));
                }
            }
        });
        let sorted = sorter.finish();
        let group = |key: u128| (key >> 64) as u64;
        let value = |key: u128| from_total_order_key(key as u64);
        // Each group's count and sum, in sorted order.
        let mut sums: Vec<(u64, usize, f64)> = Vec::new();
        for key in sorted.iter() {
            match sums.last_mut() {
                Some((g, n, sum)) if *g == group(key) => {
                    *n += 1;
                    *sum += value(key);
                }
                _ => {
                    let zero: f64 = std::iter::empty::<f64>().sum();
                    sums.push((group(key), 1, zero + value(key)));
                }
            }
        }
        let mut out = BTreeMap::new();
        let mut groups = sums.into_iter();
        let mut current: Option<(u64, SecondPass)> = None;
        let mut done = |(g, pass): (u64, SecondPass)| {
            out.insert(((g >> 16) as usize, (g & 0xffff) as usize), pass.finish());
        };
        for key in sorted.iter() {
            if current.as_ref().is_none_or(|c| c.0 != group(key)) {
                if let Some(c) = current.take() {
                    done(c);
                }
                let (g, n, sum) = groups.next().expect("a group per key's group");
                current = Some((g, SecondPass::new(n, sum)));
            }
            current.as_mut().expect("set above").1.add(value(key));
        }
        if let Some(c) = current {
            done(c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each window's statistics through the sort, in runs of any size, are those of its
    /// values held and sorted (`Stats::compute`), bit for bit.
    #[test]
    fn window_stats_are_each_windows_held_stats() {
        use proptest::prelude::*;
        let strategy = proptest::collection::vec(
            (
                0u64..5_000,
                proptest::collection::vec(
                    (
                        0usize..4,
                        prop_oneof![any::<f64>(), (0u32..100).prop_map(f64::from)],
                    ),
                    0..6,
                ),
            ),
            0..200,
        );
        proptest!(|(entries in strategy, run_bytes in prop_oneof![Just(48usize), Just(1000), Just(1 << 20)])| {
            let spill = Spill::new();
            let mut log = SliceLog::new(&spill);
            let ids = [MetricId::RequestLatency, MetricId::TimeToFirstToken, MetricId::OutputSequenceLength, MetricId::InterChunkLatency];
            let mut held: BTreeMap<(u64, usize), Vec<f64>> = BTreeMap::new();
            for (start, values) in &entries {
                // Values go in as a record's scalars, and inter-chunk latency as its gaps.
                let mut m = RecordMetrics::default();
                let mut gaps = Vec::new();
                for &(i, v) in values {
                    let id = ids[i];
                    if id == MetricId::InterChunkLatency {
                        column::encode(&mut gaps, v);
                    } else if m.get(id).is_none() {
                        m.set(id, Some(v));
                    } else {
                        continue;
                    }
                    held.entry((start / 1000, id as usize)).or_default().push(v);
                }
                log.push(1_000_000 + start, &m, &gaps, &Counts { requests: 1, ..Default::default() });
            }
            let windows = log.windows(1000, (1_000_000, 1_006_000));
            let got = log.window_stats(1000, 1_000_000, &windows, run_bytes, None);
            let place: BTreeMap<u64, usize> = windows.iter().enumerate().map(|(w, win)| ((win.from - 1_000_000) / 1000, w)).collect();
            prop_assert_eq!(got.len(), held.len());
            for ((index, id), mut values) in held {
                let want = Stats::compute(&mut values).unwrap();
                let have = got[&(place[&index], id)];
                let all = |s: Stats| {
                    let mut v = vec![s.avg, s.min, s.max, s.std, s.sum, s.count as f64];
                    v.extend(s.percentiles);
                    v.iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() }).collect::<Vec<_>>()
                };
                prop_assert_eq!(all(have), all(want));
            }
        });
    }
}
