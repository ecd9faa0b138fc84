//! What a run looks like while it runs. The collector thread folds each record into running
//! figures (a few counter adds and histogram bumps, no sorting) and, a few times a second,
//! publishes an immutable snapshot; the dashboard and live exporters read the latest one
//! through an `ArcSwap`, so they never hold a lock the collector waits on.
//!
//! Quantiles come from log-bucketed histograms (within 1.1% of the exact value): a live view
//! needs a figure that is right to the displayed digit, not the exact percentiles the
//! end-of-run statistics compute over every value.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::{MetricId, RecordMetrics};
use crate::record::{Phase, RequestRecord};

/// How often the collector publishes a snapshot.
pub const PUBLISH_EVERY_NS: u64 = 200_000_000;
/// The sliding window of the "recent" figures, in seconds.
pub const WINDOW_SECS: u64 = 10;
/// Seconds of per-second history kept for sparklines.
pub const HISTORY_SECS: usize = 180;

/// Buckets per doubling: bucket width 2.2%, so the midpoint is within 1.1% of any value in it.
const BUCKETS_PER_OCTAVE: f64 = 32.0;

/// A histogram of non-negative values in log-spaced buckets (count, sum, min, max exact).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogHistogram {
    counts: Vec<u64>,
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
}

impl LogHistogram {
    fn bucket(v: f64) -> usize {
        if v < 1.0 {
            0
        } else {
            (v.log2() * BUCKETS_PER_OCTAVE) as usize + 1
        }
    }

    /// The value a bucket stands for: the geometric middle of its range.
    fn bucket_value(i: usize) -> f64 {
        if i == 0 {
            0.5
        } else {
            ((i as f64 - 0.5) / BUCKETS_PER_OCTAVE).exp2()
        }
    }

    pub fn record(&mut self, v: f64) {
        if !v.is_finite() || v < 0.0 {
            return;
        }
        let b = Self::bucket(v);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        if self.count == 0 {
            (self.min, self.max) = (v, v);
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.sum += v;
    }

    pub fn merge(&mut self, other: &LogHistogram) {
        if other.count == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        if self.count == 0 {
            (self.min, self.max) = (other.min, other.max);
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count += other.count;
        self.sum += other.sum;
    }

    /// The value at quantile `q` (0..=1): the bucket of the rank numpy's default would
    /// interpolate at, clamped to the exact min and max. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * (self.count - 1) as f64).round() as u64;
        if rank == 0 {
            return Some(self.min);
        }
        if rank == self.count - 1 {
            return Some(self.max);
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Some(Self::bucket_value(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

/// A histogram over fixed upper bounds, counted exactly (Prometheus' `le` buckets).
#[derive(Debug, Clone, PartialEq)]
pub struct BucketCounts {
    /// Upper bounds in ns, increasing; a last, implicit bucket is `+Inf`.
    pub bounds_ns: &'static [f64],
    /// Values at most each bound (not cumulative), then the ones above the last.
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl BucketCounts {
    fn new(bounds_ns: &'static [f64]) -> BucketCounts {
        BucketCounts {
            bounds_ns,
            counts: vec![0; bounds_ns.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    fn record(&mut self, v: f64) {
        let i = self.bounds_ns.partition_point(|b| *b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// (upper bound in ns, values at most it), cumulative; `+Inf` last.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let bounds = self.bounds_ns.iter().copied().chain([f64::INFINITY]);
        bounds.zip(self.counts.iter().scan(0, |total, c| {
            *total += c;
            Some(*total)
        }))
    }
}

const MS: f64 = 1e6;
/// TTFT and request latency: 5 ms to 2 min.
const LATENCY_BOUNDS_NS: &[f64] = &[
    5.0 * MS,
    10.0 * MS,
    25.0 * MS,
    50.0 * MS,
    75.0 * MS,
    100.0 * MS,
    250.0 * MS,
    500.0 * MS,
    750.0 * MS,
    1_000.0 * MS,
    2_500.0 * MS,
    5_000.0 * MS,
    7_500.0 * MS,
    10_000.0 * MS,
    30_000.0 * MS,
    60_000.0 * MS,
    120_000.0 * MS,
];
/// Inter-token latency: 1 ms to 2 s.
const ITL_BOUNDS_NS: &[f64] = &[
    1.0 * MS,
    2.5 * MS,
    5.0 * MS,
    7.5 * MS,
    10.0 * MS,
    15.0 * MS,
    20.0 * MS,
    30.0 * MS,
    50.0 * MS,
    75.0 * MS,
    100.0 * MS,
    250.0 * MS,
    500.0 * MS,
    1_000.0 * MS,
    2_000.0 * MS,
];

/// The request metrics shown live, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveMetric {
    TimeToFirstToken,
    InterTokenLatency,
    RequestLatency,
}

impl LiveMetric {
    pub const ALL: [LiveMetric; 3] = [
        LiveMetric::TimeToFirstToken,
        LiveMetric::InterTokenLatency,
        LiveMetric::RequestLatency,
    ];

    pub fn id(self) -> MetricId {
        match self {
            LiveMetric::TimeToFirstToken => MetricId::TimeToFirstToken,
            LiveMetric::InterTokenLatency => MetricId::InterTokenLatency,
            LiveMetric::RequestLatency => MetricId::RequestLatency,
        }
    }

    /// The Prometheus buckets of the metric.
    pub fn bounds_ns(self) -> &'static [f64] {
        match self {
            LiveMetric::InterTokenLatency => ITL_BOUNDS_NS,
            _ => LATENCY_BOUNDS_NS,
        }
    }

    /// The header AIPerf's console uses for the metric.
    pub fn label(self) -> &'static str {
        self.id().def().header
    }
}

/// One second of profiling records (by completion time).
#[derive(Debug, Clone, Default)]
struct Second {
    index: u64,
    metrics: [LogHistogram; 3],
    send_lag: LogHistogram,
    requests: u64,
    errors: u64,
    output_tokens: f64,
}

impl Second {
    fn point(&self) -> HistoryPoint {
        HistoryPoint {
            requests: self.requests,
            errors: self.errors,
            output_tokens: self.output_tokens,
            ttft_p50: self.metrics[0].quantile(0.5),
            latency_p50: self.metrics[2].quantile(0.5),
        }
    }
}

/// One closed second, for sparklines.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HistoryPoint {
    pub requests: u64,
    pub errors: u64,
    pub output_tokens: f64,
    /// Median TTFT and request latency of the second, ns.
    pub ttft_p50: Option<f64>,
    pub latency_p50: Option<f64>,
}

/// Figures of one metric over a span of records.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Quantiles {
    pub count: u64,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Quantiles {
    fn of(h: &LogHistogram) -> Option<Quantiles> {
        Some(Quantiles {
            count: h.count,
            avg: h.mean()?,
            min: h.min,
            max: h.max,
            p50: h.quantile(0.5)?,
            p90: h.quantile(0.9)?,
            p99: h.quantile(0.99)?,
        })
    }
}

/// Requests of one phase seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseCounts {
    /// Records finished (successful and failed).
    pub completed: u64,
    pub errors: u64,
}

/// Everything the live view shows about the records, at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Run-clock ns of the snapshot.
    pub at_ns: u64,
    pub warmup: PhaseCounts,
    pub profiling: PhaseCounts,
    /// Per [`LiveMetric::ALL`]: over the sliding window, and since profiling started.
    pub window: [Option<Quantiles>; 3],
    pub total: [Option<Quantiles>; 3],
    /// Seconds the window figures cover (less than [`WINDOW_SECS`] early in the run).
    pub window_secs: f64,
    pub window_requests: u64,
    pub window_errors: u64,
    pub window_output_tokens: f64,
    /// Since profiling started.
    pub output_tokens: f64,
    pub input_tokens: f64,
    /// Seconds since the first profiling record's second began.
    pub profiling_secs: f64,
    /// Send lag (actual minus scheduled send, ns) over the window; paced runs only.
    pub send_lag: Option<Quantiles>,
    /// Exact bucket counts since profiling started, per [`LiveMetric::ALL`].
    pub buckets: Vec<BucketCounts>,
    /// Failed requests by error type, most frequent first.
    pub errors_by_type: Vec<(String, u64)>,
    /// Closed seconds, oldest first (at most [`HISTORY_SECS`]).
    pub history: Vec<HistoryPoint>,
}

impl LiveSnapshot {
    pub fn metric(&self, m: LiveMetric) -> (Option<Quantiles>, Option<Quantiles>) {
        let i = LiveMetric::ALL.iter().position(|x| *x == m).unwrap_or(0);
        (self.window[i], self.total[i])
    }

    /// Requests per second over the window.
    pub fn window_request_rate(&self) -> Option<f64> {
        (self.window_secs > 0.0).then(|| self.window_requests as f64 / self.window_secs)
    }

    pub fn window_output_token_rate(&self) -> Option<f64> {
        (self.window_secs > 0.0).then(|| self.window_output_tokens / self.window_secs)
    }
}

/// Where the run is, set by the phase driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LivePhase {
    Starting = 0,
    Warmup = 1,
    Profiling = 2,
    Done = 3,
}

/// What the collector publishes and readers read.
#[derive(Debug)]
pub struct LiveBoard {
    snapshot: ArcSwap<LiveSnapshot>,
    phase: AtomicU8,
    /// Run-clock ns the current phase started.
    phase_started_ns: AtomicU64,
}

impl Default for LiveBoard {
    fn default() -> Self {
        LiveBoard {
            snapshot: ArcSwap::from_pointee(LiveSnapshot::default()),
            phase: AtomicU8::new(LivePhase::Starting as u8),
            phase_started_ns: AtomicU64::new(0),
        }
    }
}

impl LiveBoard {
    pub fn snapshot(&self) -> Arc<LiveSnapshot> {
        self.snapshot.load_full()
    }

    pub fn publish(&self, s: LiveSnapshot) {
        self.snapshot.store(Arc::new(s));
    }

    pub fn set_phase(&self, phase: LivePhase, at_ns: u64) {
        self.phase_started_ns.store(at_ns, Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Release);
    }

    /// The current phase and the run-clock ns it started.
    pub fn phase(&self) -> (LivePhase, u64) {
        let phase = match self.phase.load(Ordering::Acquire) {
            1 => LivePhase::Warmup,
            2 => LivePhase::Profiling,
            3 => LivePhase::Done,
            _ => LivePhase::Starting,
        };
        (phase, self.phase_started_ns.load(Ordering::Relaxed))
    }
}

/// Folds records into running figures on the collector thread and publishes snapshots.
#[derive(Debug)]
pub struct LiveRecorder {
    board: Arc<LiveBoard>,
    warmup: PhaseCounts,
    profiling: PhaseCounts,
    /// Run-clock ns the first profiling record's second starts at; seconds count from it.
    origin_ns: Option<u64>,
    seconds: VecDeque<Second>,
    total: [LogHistogram; 3],
    buckets: Vec<BucketCounts>,
    output_tokens: f64,
    input_tokens: f64,
    errors: Vec<(String, u64)>,
    history: VecDeque<HistoryPoint>,
    last_publish_ns: u64,
}

impl LiveRecorder {
    /// A recorder publishing to `board`, which gets a first (empty) snapshot at once: its
    /// readers see every figure, at zero, from the start.
    pub fn new(board: Arc<LiveBoard>) -> LiveRecorder {
        let mut recorder = LiveRecorder {
            board,
            warmup: PhaseCounts::default(),
            profiling: PhaseCounts::default(),
            origin_ns: None,
            seconds: VecDeque::new(),
            total: Default::default(),
            buckets: LiveMetric::ALL
                .iter()
                .map(|m| BucketCounts::new(m.bounds_ns()))
                .collect(),
            output_tokens: 0.0,
            input_tokens: 0.0,
            errors: Vec::new(),
            history: VecDeque::new(),
            last_publish_ns: 0,
        };
        recorder.publish(0, true);
        recorder
    }

    /// A warmup record: counted only.
    pub fn observe_warmup(&mut self, record: &RequestRecord) {
        self.warmup.completed += 1;
        self.warmup.errors += u64::from(record.error.is_some());
    }

    /// A profiling record with its metrics.
    pub fn observe(&mut self, record: &RequestRecord, m: &RecordMetrics) {
        debug_assert_eq!(record.phase, Phase::Profiling);
        self.profiling.completed += 1;
        let origin = *self.origin_ns.get_or_insert(record.end_perf_ns);
        let index = record.end_perf_ns.saturating_sub(origin) / 1_000_000_000;
        self.roll_to(index);
        let total = &mut self.total;
        // A record that finished in a second already out of the window counts in totals only.
        let mut second = self.seconds.iter_mut().rev().find(|s| s.index == index);
        if let Some(details) = &record.error {
            self.profiling.errors += 1;
            match self.errors.iter_mut().find(|(k, _)| *k == details.kind) {
                Some((_, n)) => *n += 1,
                None => self.errors.push((details.kind.clone(), 1)),
            }
            if let Some(s) = second {
                s.errors += 1;
            }
            return;
        }
        let out = m.get(MetricId::OutputSequenceLength).unwrap_or(0.0);
        self.output_tokens += out;
        self.input_tokens += m.get(MetricId::InputSequenceLength).unwrap_or(0.0);
        for (i, metric) in LiveMetric::ALL.into_iter().enumerate() {
            if let Some(v) = m.get(metric.id()) {
                total[i].record(v);
                self.buckets[i].record(v);
                if let Some(s) = second.as_deref_mut() {
                    s.metrics[i].record(v);
                }
            }
        }
        if let Some(s) = second {
            s.requests += 1;
            s.output_tokens += out;
            if let Some(lag) = record.send_lag_ns() {
                s.send_lag.record(lag.max(0) as f64);
            }
        }
    }

    /// Opens seconds up to `index`, closing older ones into the history.
    fn roll_to(&mut self, index: u64) {
        let newest = self.seconds.back().map(|s| s.index);
        if newest.is_some_and(|n| n >= index) {
            return;
        }
        // A long idle gap: only the seconds the history and window can hold matter.
        let keep = HISTORY_SECS as u64 + WINDOW_SECS + 1;
        let first_new = newest.map_or(index, |n| (n + 1).max(index.saturating_sub(keep)));
        for i in first_new..=index {
            self.seconds.push_back(Second {
                index: i,
                ..Second::default()
            });
            // Keep the window plus the second being filled; the rest goes to history.
            while self.seconds.len() as u64 > WINDOW_SECS + 1 {
                let s = self.seconds.pop_front().expect("not empty");
                self.history.push_back(s.point());
                if self.history.len() > HISTORY_SECS {
                    self.history.pop_front();
                }
            }
        }
    }

    /// Publishes a snapshot when the last one is `PUBLISH_EVERY_NS` old (or `force`).
    pub fn publish(&mut self, now_ns: u64, force: bool) {
        if !force && now_ns < self.last_publish_ns + PUBLISH_EVERY_NS {
            return;
        }
        self.last_publish_ns = now_ns;
        let snapshot = self.snapshot(now_ns);
        self.board.publish(snapshot);
    }

    fn snapshot(&mut self, now_ns: u64) -> LiveSnapshot {
        // Seconds with nothing finished still pass: a stalled server shows as a falling rate.
        if let Some(origin) = self.origin_ns {
            self.roll_to(now_ns.saturating_sub(origin) / 1_000_000_000);
        }
        let mut window: [LogHistogram; 3] = Default::default();
        let mut lag = LogHistogram::default();
        let (mut requests, mut errors, mut tokens) = (0, 0, 0.0);
        for s in &self.seconds {
            for (w, h) in window.iter_mut().zip(&s.metrics) {
                w.merge(h);
            }
            lag.merge(&s.send_lag);
            requests += s.requests;
            errors += s.errors;
            tokens += s.output_tokens;
        }
        let profiling_secs = self
            .origin_ns
            .map_or(0.0, |o| now_ns.saturating_sub(o) as f64 / 1e9);
        // The window is the last WINDOW_SECS whole seconds and the one being filled.
        let window_secs = match self.seconds.front() {
            Some(first) => profiling_secs - first.index as f64,
            None => 0.0,
        };
        let mut errors_by_type = self.errors.clone();
        errors_by_type.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        LiveSnapshot {
            at_ns: now_ns,
            warmup: self.warmup,
            profiling: self.profiling,
            window: window.each_ref().map(Quantiles::of),
            total: self.total.each_ref().map(Quantiles::of),
            window_secs,
            window_requests: requests,
            window_errors: errors,
            window_output_tokens: tokens,
            output_tokens: self.output_tokens,
            input_tokens: self.input_tokens,
            profiling_secs,
            send_lag: Quantiles::of(&lag),
            errors_by_type,
            buckets: self.buckets.clone(),
            history: {
                // Seconds that left the window, then the closed ones still in it.
                let closed = self.seconds.len().saturating_sub(1);
                let mut h: Vec<HistoryPoint> = self.history.iter().copied().collect();
                h.extend(self.seconds.iter().take(closed).map(Second::point));
                h.split_off(h.len().saturating_sub(HISTORY_SECS))
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ErrorDetails, RequestInput};

    #[test]
    fn quantiles_are_within_the_bucket_width_of_numpy_s() {
        let mut h = LogHistogram::default();
        let mut values: Vec<f64> = (1..=10_000)
            .map(|i| (i as f64).powf(1.7) * 1000.0)
            .collect();
        values.iter().for_each(|&v| h.record(v));
        values.sort_by(f64::total_cmp);
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            let exact = crate::stats::percentile_sorted(&values, q * 100.0);
            let got = h.quantile(q).unwrap();
            assert!(
                (got - exact).abs() / exact < 0.012,
                "q={q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.count, 10_000);
        assert_eq!(h.min, 1000.0);
        assert_eq!(h.quantile(1.0), Some(h.max));
    }

    #[test]
    fn merging_is_recording_both() {
        let (mut a, mut b, mut both) = Default::default();
        for v in [3.0, 5e6, 7.5e8] {
            LogHistogram::record(&mut a, v);
            LogHistogram::record(&mut both, v);
        }
        for v in [0.2, 9e3] {
            LogHistogram::record(&mut b, v);
            LogHistogram::record(&mut both, v);
        }
        let mut merged: LogHistogram = a.clone();
        merged.merge(&b);
        assert_eq!(merged, both);
    }

    #[test]
    fn bucket_counts_are_exact_and_cumulative() {
        let mut b = BucketCounts::new(&[10.0, 20.0]);
        for v in [1.0, 10.0, 10.5, 20.0, 99.0] {
            b.record(v);
        }
        let c: Vec<(f64, u64)> = b.cumulative().collect();
        assert_eq!(c, vec![(10.0, 2), (20.0, 4), (f64::INFINITY, 5)]);
        assert_eq!((b.count, b.sum), (5, 140.5));
    }

    fn record(end_ns: u64, error: Option<&str>) -> RequestRecord {
        let mut r = RequestRecord::new(Phase::Profiling, RequestInput::default(), String::new());
        r.end_perf_ns = end_ns;
        r.error = error.map(|kind| ErrorDetails {
            code: Some(500),
            kind: kind.into(),
            message: String::new(),
        });
        r
    }

    fn metrics(ttft_ms: f64, latency_ms: f64, osl: f64) -> RecordMetrics {
        let mut m = RecordMetrics::default();
        m.set(MetricId::TimeToFirstToken, Some(ttft_ms * 1e6));
        m.set(MetricId::RequestLatency, Some(latency_ms * 1e6));
        m.set(MetricId::OutputSequenceLength, Some(osl));
        m
    }

    #[test]
    fn the_window_slides_and_old_seconds_become_history() {
        let board = Arc::new(LiveBoard::default());
        let mut live = LiveRecorder::new(board.clone());
        let s = 1_000_000_000;
        // Second 0: two fast requests; second 15: one slow one and a failure.
        live.observe(&record(5 * s, None), &metrics(10.0, 100.0, 50.0));
        live.observe(&record(5 * s + 1, None), &metrics(12.0, 110.0, 50.0));
        live.publish(5 * s + s / 2, true);
        let early = board.snapshot();
        assert_eq!(early.window_requests, 2);
        assert_eq!(early.window[0].unwrap().count, 2);
        assert!((early.window_secs - 0.5).abs() < 1e-9);
        assert_eq!(early.window_request_rate(), Some(4.0));

        live.observe(&record(20 * s, None), &metrics(50.0, 500.0, 10.0));
        live.observe(
            &record(20 * s + 5, Some("Internal Server Error")),
            &metrics(0.0, 0.0, 0.0),
        );
        live.publish(20 * s + s / 4, false);
        let late = board.snapshot();
        assert_eq!(late.window_requests, 1, "the first second left the window");
        assert_eq!(late.window_errors, 1);
        let (w, t) = late.metric(LiveMetric::TimeToFirstToken);
        assert_eq!(w.unwrap().count, 1);
        assert!((w.unwrap().p50 - 50e6).abs() / 50e6 < 0.012);
        assert_eq!(t.unwrap().count, 3, "totals keep everything");
        assert_eq!(
            late.profiling,
            PhaseCounts {
                completed: 4,
                errors: 1
            }
        );
        assert_eq!(
            late.errors_by_type,
            vec![("Internal Server Error".to_string(), 1)]
        );
        assert_eq!(late.output_tokens, 110.0);
        // Seconds 0..=14 are closed; second 0 held both fast requests.
        assert_eq!(late.history.len(), 15);
        assert_eq!(late.history[0].requests, 2);
        assert!(late.history[1..].iter().all(|h| h.requests == 0));
        assert_eq!(early.history, vec![], "nothing closed yet");
        assert!((late.window_secs - (WINDOW_SECS as f64 + 0.25)).abs() < 1e-9);
    }

    #[test]
    fn a_stalled_run_shows_a_falling_rate() {
        let board = Arc::new(LiveBoard::default());
        let mut live = LiveRecorder::new(board.clone());
        let s = 1_000_000_000;
        for i in 0..10 {
            live.observe(&record(i * s / 10, None), &metrics(10.0, 20.0, 5.0));
        }
        live.publish(s / 2, true);
        let busy = board.snapshot().window_request_rate().unwrap();
        live.publish(30 * s, true);
        let idle = board.snapshot();
        assert!(busy > 10.0);
        assert_eq!(idle.window_request_rate(), Some(0.0));
        assert_eq!(idle.total[2].unwrap().count, 10);
        // A day without records: the history stays its size, the rate zero.
        live.publish(86_400 * s, true);
        let later = board.snapshot();
        assert_eq!(later.history.len(), HISTORY_SECS);
        assert!(later.history.iter().all(|h| h.requests == 0));
    }
}
