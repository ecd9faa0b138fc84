//! AIPerf's sweep-line metrics: step functions over the run built from every request's
//! start, first token and end (concurrency, decode / prefill / total token rates, tokens in
//! flight), summarized by time-weighted statistics.
//!
//! "Effective" metrics weigh each value by how long it was held over the whole window;
//! "Active" ones only over the time the matching phase had a request in flight.
//!
//! A long run has tens of events per request (two per chunk for the decode rate). The
//! requests are read in the order of their first event (`source`: sorted once, through a
//! spill when many), and their events merged in time order through a heap of one cursor
//! per request in flight (`events`). Each curve is swept once (`curve`): held when small,
//! written to a spill as it is swept when large, and read back for every window; a rate's
//! figures and those of the requests in flight it goes with are taken together
//! (`figures`), in a few passes over both curves per window that feed every figure
//! (`weighted`), rather than holding their segments, so memory stays flat however long
//! the run.

mod curve;
mod events;
mod figures;
mod source;
#[cfg(test)]
mod tests;
mod weighted;

use super::catalog::MetricId;
use super::column;
use curve::Curve;
use events::List;
use figures::{Figure, figures};
pub use source::{OrderedSpans, SpanOrder};
use weighted::{Limits, Scratch};

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

/// The requests a sweep reads, in the order of their first event; read from the start
/// once per curve.
pub trait SpanSource {
    fn stream(&self) -> Box<dyn SpanStream + '_>;
    /// Some request has chunk times (the decode rate then follows them).
    fn has_chunks(&self) -> bool;
}

/// One reading of a [`SpanSource`].
pub trait SpanStream {
    /// The next request's first event (`events::first_event`), without taking it.
    fn peek_first(&mut self) -> Option<f64>;
    /// Takes the next request: its place in the order the requests were pushed, and its
    /// span. Call only after `peek_first` found one.
    fn take(&mut self) -> (u32, Span<'_>);
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

/// Every sweep-line metric over each window `[from, to]` (ns, same anchor as the spans),
/// in the order of `windows`. Rates are tokens/sec, concurrencies requests, tokens in
/// flight tokens.
pub fn metrics(
    spans: &dyn SpanSource,
    windows: &[(f64, f64)],
) -> Vec<Vec<(MetricId, WeightedStats)>> {
    metrics_with(spans, windows, Limits::default())
}

/// `metrics` within `limits`.
fn metrics_with(
    spans: &dyn SpanSource,
    windows: &[(f64, f64)],
    limits: Limits,
) -> Vec<Vec<(MetricId, WeightedStats)>> {
    use Figure as F;
    let curve = |lists: &[List]| Curve::build(spans, lists, limits);
    // Each rate is swept with the requests in flight it goes with, their figures taken
    // for every window, and both let go before the next.
    let mut scratch = Scratch::default();
    let mut each = |a: &Curve, b: Option<&Curve>, wanted: &[Figure]| -> Vec<[WeightedStats; 5]> {
        windows
            .iter()
            .map(|&w| figures(a, b, w, wanted, limits, &mut scratch))
            .collect()
    };
    let rate_figures = [
        F::Effective,
        F::Active,
        F::EffectivePerUser,
        F::ActivePerUser,
        F::EffectiveBusy,
    ];
    let decode_list: &[List] = if spans.has_chunks() {
        &[List::DecodeByChunk]
    } else {
        &[List::Decode]
    };
    let decode = each(
        &curve(decode_list),
        Some(&curve(&[List::Decoding])),
        &rate_figures,
    );
    let prefill = each(
        &curve(&[List::Prefill]),
        Some(&curve(&[List::Prefilling])),
        &rate_figures,
    );
    let total = each(
        &curve(&[List::Prefill, List::Decode]),
        Some(&curve(&[List::Requests])),
        &[F::Effective, F::Active, F::EffectiveBusy],
    );
    let tokens = each(&curve(&[List::Tokens]), None, &[F::Effective]);

    use MetricId as M;
    (0..windows.len())
        .map(|w| {
            let (d, p, t) = (
                decode[w].map(per_second),
                prefill[w].map(per_second),
                total[w],
            );
            let figure = |f: [WeightedStats; 5], which: Figure| f[which as usize];
            vec![
                (M::EffectiveConcurrency, figure(t, F::EffectiveBusy)),
                (
                    M::EffectiveDecodeConcurrency,
                    figure(decode[w], F::EffectiveBusy),
                ),
                (
                    M::EffectivePrefillConcurrency,
                    figure(prefill[w], F::EffectiveBusy),
                ),
                (M::EffectiveDecodeThroughput, figure(d, F::Effective)),
                (M::EffectivePrefillThroughput, figure(p, F::Effective)),
                (
                    M::EffectiveTotalThroughput,
                    per_second(figure(t, F::Effective)),
                ),
                (
                    M::EffectiveDecodeThroughputPerUser,
                    figure(d, F::EffectivePerUser),
                ),
                (
                    M::EffectivePrefillThroughputPerUser,
                    figure(p, F::EffectivePerUser),
                ),
                (M::TokensInFlight, figure(tokens[w], F::Effective)),
                (M::ActiveDecodeThroughput, figure(d, F::Active)),
                (M::ActivePrefillThroughput, figure(p, F::Active)),
                (M::ActiveTotalThroughput, per_second(figure(t, F::Active))),
                (
                    M::ActiveDecodeThroughputPerUser,
                    figure(d, F::ActivePerUser),
                ),
                (
                    M::ActivePrefillThroughputPerUser,
                    figure(p, F::ActivePerUser),
                ),
            ]
        })
        .collect()
}
