//! The report's per-request charts from a run's records read as a stream, never all held:
//! the data `single::PerRecord::of` makes from every record in memory, each per-request
//! series already thinned as `Series::thin` would thin it for the page.
//!
//! A first pass counts what each series will have (so its thinning is known before its
//! points are made) and finds the extremes; a second makes the series in record order and
//! feeds the sorted ones (the CDFs, TTFT in send order, requests in flight) to external
//! sorts, whose order is that of the sorts in memory (equal keys are equal items, or the
//! key holds the record's place where the in-memory sort is stable).

use super::chart::{Series, SeriesKind, keeps, thinning};
use super::single::{self, Distribution, MARKS, PerRecord};
use crate::spill::Spill;
use crate::spill::sort::{KeyValue, Sorter};
use crate::stats::{from_total_order_key, total_order_key};

/// One profiling request as the charts read it; `values` in display units, by
/// `RECORD_TAGS` order.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub start_ns: u64,
    pub end_ns: u64,
    pub failed: bool,
    pub values: [Option<f64>; super::RECORD_TAGS.len()],
}

/// Places in `RECORD_TAGS`.
const TTFT: usize = 0;
const OSL: usize = 3;
/// The distributions' tags' places in `RECORD_TAGS` (TTFT, ITL, request latency).
const DISTRIBUTED: [usize; 3] = [0, 1, 2];
const LATENCY: usize = 2;
const _: () = {
    assert!(matches!(
        super::RECORD_TAGS[TTFT].as_bytes(),
        b"time_to_first_token"
    ));
    assert!(matches!(
        super::RECORD_TAGS[1].as_bytes(),
        b"inter_token_latency"
    ));
    assert!(matches!(
        super::RECORD_TAGS[LATENCY].as_bytes(),
        b"request_latency"
    ));
    assert!(matches!(
        super::RECORD_TAGS[OSL].as_bytes(),
        b"output_sequence_length"
    ));
};

/// A run's profiling requests, in the order they were recorded; read as often as needed.
pub trait Rows {
    fn for_each(&self, f: &mut dyn FnMut(&Row));
}

#[cfg(test)]
impl Rows for Vec<Row> {
    fn for_each(&self, f: &mut dyn FnMut(&Row)) {
        for r in self {
            f(r);
        }
    }
}

/// Bytes each external sort gathers in memory.
const SORT_BYTES: usize = 1 << 20;

/// What the first pass finds.
#[derive(Default)]
struct Counts {
    rows: usize,
    ok: usize,
    first_start: Option<u64>,
    last_end: Option<u64>,
    /// Per distribution: values and their extremes as the histogram takes them.
    values: [usize; 3],
    extremes: [(f64, f64); 3],
    /// Valid requests with a latency and with a TTFT; failed requests.
    latency: usize,
    ttft: usize,
    failed: usize,
}

/// A series being made in record order, keeping the points its thinning keeps.
struct Thinned {
    n: usize,
    k: usize,
    seen: usize,
    points: Vec<(f64, f64)>,
}

impl Thinned {
    fn new(n: usize, max: usize) -> Thinned {
        Thinned {
            n,
            k: thinning(n, max),
            seen: 0,
            points: Vec::new(),
        }
    }

    fn push(&mut self, point: impl FnOnce() -> (f64, f64)) {
        if keeps(self.n, self.k, self.seen) {
            self.points.push(point());
        }
        self.seen += 1;
    }

    fn series(self, mut series: Series) -> Series {
        series.points = self.points;
        series.thinned_by = self.k;
        series
    }
}

/// The per-request charts' data of `rows`, each series thinned to about `max` points,
/// and the first request's start (the time axes' zero), `None` without rows.
pub fn per_record(rows: &dyn Rows, max: usize) -> (PerRecord, Option<u64>) {
    per_record_within(rows, max, SORT_BYTES)
}

pub(super) fn per_record_within(
    rows: &dyn Rows,
    max: usize,
    sort_bytes: usize,
) -> (PerRecord, Option<u64>) {
    let mut c = Counts {
        extremes: [(f64::INFINITY, f64::NEG_INFINITY); 3],
        ..Counts::default()
    };
    rows.for_each(&mut |r| {
        c.rows += 1;
        c.first_start = Some(c.first_start.map_or(r.start_ns, |t| t.min(r.start_ns)));
        c.last_end = Some(c.last_end.map_or(r.end_ns, |t| t.max(r.end_ns)));
        if r.failed {
            c.failed += 1;
            return;
        }
        c.ok += 1;
        for (d, &tag) in DISTRIBUTED.iter().enumerate() {
            if let Some(v) = r.values[tag] {
                c.values[d] += 1;
                let (min, max) = &mut c.extremes[d];
                *min = f64::min(*min, v);
                *max = f64::max(*max, v);
            }
        }
        c.latency += usize::from(r.values[LATENCY].is_some());
        c.ttft += usize::from(r.values[TTFT].is_some());
    });
    let Some(t0) = c.first_start else {
        return (PerRecord::default(), None);
    };
    // As `single::secs`.
    let secs = |wall_ns: u64| (wall_ns as f64 - t0 as f64) / 1e9;
    let spill = Spill::new();
    let sorter = |_| Sorter::new(&spill, sort_bytes);

    let mut histograms = [0, 1, 2].map(|d| {
        let (min, max) = c.extremes[d];
        single::Histogram::new(c.values[d], min, max)
    });
    let mut sorted_values: [Sorter<u64>; 3] = [0, 1, 2].map(sorter);
    let mut latency = Thinned::new(c.latency, max);
    let mut ttft = Thinned::new(c.ttft, max);
    let mut errors = Thinned::new(c.failed, max);
    // TTFT in send order: the valid requests by start, ties in record order (a stable
    // sort), each keyed with its place and whether it has a TTFT.
    let mut by_start: Sorter<KeyValue> = Sorter::new(&spill, sort_bytes);
    // Requests in flight: +1 at each send, -1 at each end, by time then -1 first.
    let mut events: Sorter<u128> = Sorter::new(&spill, sort_bytes);
    let width = single::window_width(c.last_end.map_or(0.0, secs).max(0.0));
    let mut tokens = vec![0.0; single::WINDOWS + 1];
    let mut ok_place = 0u64;
    rows.for_each(&mut |r| {
        let (start, end) = (secs(r.start_ns), secs(r.end_ns));
        events.push(u128::from(total_order_key(start)) << 1 | 1);
        events.push(u128::from(total_order_key(end)) << 1);
        if r.failed {
            errors.push(|| (start, single::time_to_error(r.start_ns, r.end_ns)));
            return;
        }
        for (d, &tag) in DISTRIBUTED.iter().enumerate() {
            if let Some(v) = r.values[tag] {
                histograms[d].add(v);
                sorted_values[d].push(total_order_key(v));
            }
        }
        if let Some(v) = r.values[LATENCY] {
            latency.push(|| (start, v));
        }
        if let Some(v) = r.values[TTFT] {
            ttft.push(|| (start, v));
        }
        by_start.push(KeyValue {
            key: u128::from(r.start_ns) << 64
                | u128::from(ok_place) << 1
                | u128::from(r.values[TTFT].is_some()),
            value: r.values[TTFT].map_or(0, f64::to_bits),
        });
        ok_place += 1;
        single::add_tokens(
            &mut tokens,
            width,
            (start, end),
            r.values[OSL],
            r.values[TTFT],
        );
    });

    let mut distributions = [None, None, None];
    for (d, (histogram, sorter)) in histograms.into_iter().zip(sorted_values).enumerate() {
        let n = c.values[d];
        if n == 0 {
            continue;
        }
        let sorted = sorter.finish();
        // The CDF's points: the sorted values at shares i/(n-1), or one value twice.
        let points = if n == 1 { 2 } else { n };
        let mut cdf = Thinned::new(points, max);
        let ranks = MARKS.map(|p| super::percentile_ranks(n, p));
        let mut at = [(0.0, 0.0); 3];
        for (i, key) in sorted.iter().enumerate() {
            let v = from_total_order_key(key);
            if n == 1 {
                cdf.push(|| (v, 0.0));
                cdf.push(|| (v, 1.0));
            } else {
                cdf.push(|| (v, i as f64 / (n - 1) as f64));
            }
            for (r, a) in ranks.iter().zip(&mut at) {
                if let Some((lo, hi, _)) = r {
                    if i == *lo {
                        a.0 = v;
                    }
                    if i == *hi {
                        a.1 = v;
                    }
                }
            }
        }
        let mut percentiles = [None; 3];
        for ((p, r), a) in percentiles.iter_mut().zip(ranks).zip(at) {
            *p = r.map(|(lo, _, pos)| super::interpolate(a.0, a.1, lo, pos));
        }
        distributions[d] = Some(Distribution {
            count: n,
            bars: histogram.bars(),
            cdf: cdf.series(single::cdf_series(Vec::new())),
            percentiles,
        });
    }
    let [latency_series, ttft_series, errors_series] =
        single::timeline_series(Vec::new(), Vec::new(), Vec::new());
    let timeline = Some([
        latency.series(latency_series),
        ttft.series(ttft_series),
        errors.series(errors_series),
    ]);

    // TTFT by the place of the request in send order (among the valid requests).
    let by_start = by_start.finish();
    let mut in_send_order = Thinned::new(c.ttft, max);
    for (i, item) in by_start.iter().enumerate() {
        if item.key & 1 == 1 {
            in_send_order.push(|| ((i + 1) as f64, f64::from_bits(item.value)));
        }
    }
    let what = single::OVER_TIME[0].2;
    let ttft_over_time = (c.ttft > 0)
        .then(|| in_send_order.series(Series::new(what, SeriesKind::Scatter, Vec::new())));

    let throughput = (c.ok > 0).then(|| {
        let events = events.finish();
        let mut steps = Thinned::new(2 * c.rows + 1, max);
        steps.push(|| (0.0, 0.0));
        let mut in_flight = 0i64;
        for key in events.iter() {
            in_flight += if key & 1 == 1 { 1 } else { -1 };
            let t = from_total_order_key((key >> 1) as u64);
            steps.push(|| (t, in_flight as f64));
        }
        (
            single::throughput_series(&tokens, width),
            steps.series(single::in_flight_series(Vec::new())),
        )
    });
    let data = PerRecord {
        distributions,
        timeline,
        // Only TTFT in send order is a default chart: the others are not made.
        over_time: [ttft_over_time, None, None],
        throughput,
    };
    (data, Some(t0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::artifacts::{RecordRow, ServerSample, read_run_with};
    use proptest::prelude::*;

    /// What the report does to the charts: each series thinned, the k of each chart.
    fn thinned(mut charts: Vec<crate::plot::Chart>, max: usize) -> (String, Vec<usize>) {
        let ks = charts
            .iter_mut()
            .map(|c| c.series.iter_mut().map(|s| s.thin(max)).max().unwrap_or(1))
            .collect();
        (serde_json::to_string(&charts).unwrap(), ks)
    }

    type Raw = (u32, u32, bool, [Option<u16>; 4]);

    fn rows_of(raw: &[Raw]) -> Vec<Row> {
        raw.iter()
            .map(|&(start, took, failed, values)| {
                // Few distinct values, so that ties (equal starts, equal values) happen.
                let start_ns = 1_700_000_000_000_000_000 + u64::from(start) * 1_000_000;
                let mut v = [None; super::super::RECORD_TAGS.len()];
                for (slot, raw) in v.iter_mut().zip(values) {
                    *slot = raw.map(|x| f64::from(x) * 0.37);
                }
                Row {
                    start_ns,
                    end_ns: start_ns + u64::from(took) * 700_000,
                    failed,
                    values: v,
                }
            })
            .collect()
    }

    fn record_row(r: &Row) -> RecordRow {
        let tags = (super::super::RECORD_TAGS.iter().zip(r.values))
            .filter_map(|(tag, v)| Some((*tag, v?)));
        RecordRow::new(r.start_ns, r.end_ns, String::new(), 0, r.failed, tags)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The report's charts from the rows as a stream (sorted in small runs) are the
        /// charts of every row held, thinned the same way: the same JSON, the same k.
        #[test]
        fn streamed_charts_are_the_held_charts_thinned(
            raw in proptest::collection::vec(
                (0u32..50, 0u32..40, proptest::bool::weighted(0.2), [
                    proptest::option::weighted(0.9, 0u16..30),
                    proptest::option::weighted(0.8, 0u16..30),
                    proptest::option::weighted(0.9, 0u16..300),
                    proptest::option::weighted(0.9, 0u16..20),
                ]),
                0..120,
            ),
            max in prop_oneof![Just(2usize), Just(7), Just(5000)],
            sort_bytes in prop_oneof![Just(40usize), Just(1 << 20)],
            server in proptest::bool::ANY,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let rows = rows_of(&raw);
            let samples: Vec<ServerSample> = (0..9u64)
                .map(|i| ServerSample { wall_ns: 1_700_000_000_000_000_000 + i * 7_000_000, sum: i as f64, series: 1 })
                .collect();
            let with_server = |run: &mut crate::plot::RunArtifacts| {
                if server {
                    run.server.insert("vllm:num_requests_running".into(), samples.clone());
                    run.server.insert("vllm:kv_cache_usage_perc".into(), samples.clone());
                }
            };
            let mut held = read_run_with(dir.path(), "run".into(), rows.iter().map(record_row).collect()).unwrap();
            with_server(&mut held);
            let want = thinned(crate::plot::default_charts(&[held]), max);

            let mut run = read_run_with(dir.path(), "run".into(), Vec::new()).unwrap();
            with_server(&mut run);
            let (data, first) = per_record_within(&rows, max, sort_bytes);
            run.set_first_start_ns(first);
            let all = single::charts_of(&run, data);
            let got = thinned(crate::plot::select_from(all, &crate::plot::defaults(true), &mut Vec::new()), max);
            prop_assert_eq!(got, want);
        }
    }
}
