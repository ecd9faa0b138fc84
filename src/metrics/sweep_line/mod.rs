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
//! written to a spill as it is swept when large, and read back for every figure of every
//! window; the figures take a few passes over it each (`weighted`) rather than holding its
//! segments, so memory stays flat however long the run.

mod curve;
mod events;
mod source;
#[cfg(test)]
mod tests;
mod weighted;

use super::catalog::MetricId;
use super::column;
use curve::{Curve, divide};
use events::List;
pub use source::{OrderedSpans, SpanOrder};
use weighted::{Limits, active, effective};

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

/// One window's figures of a rate curve and its concurrency `busy`, per second: effective
/// and active, of the rate and of the rate per request in flight.
type RateFigures = [WeightedStats; 4];

fn rate_figures(
    rate: &Curve,
    per_user: &Curve,
    busy: &Curve,
    (from, to): (f64, f64),
    limits: Limits,
) -> RateFigures {
    let per_user = || per_user.points_from(from);
    [
        per_second(effective(|| rate.points_from(from), from, to, limits)),
        per_second(active(
            || rate.points_from(from),
            || busy.points_from(from),
            from,
            to,
            limits,
        )),
        per_second(effective(per_user, from, to, limits)),
        per_second(active(
            per_user,
            || busy.points_from(from),
            from,
            to,
            limits,
        )),
    ]
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
    let curve = |lists: &[List]| Curve::build(spans, lists, limits);
    let each = |f: &dyn Fn((f64, f64)) -> WeightedStats| -> Vec<WeightedStats> {
        windows.iter().map(|&w| f(w)).collect()
    };
    let effective_of =
        |c: &Curve| each(&|(from, to)| effective(|| c.points_from(from), from, to, limits));
    // The concurrencies stay while the rates that need them are swept one by one.
    let overall = curve(&[List::Requests]);
    let decode_conc = curve(&[List::Decoding]);
    let prefill_conc = curve(&[List::Prefilling]);
    let concurrency = effective_of(&overall);
    let decode_concurrency = effective_of(&decode_conc);
    let prefill_concurrency = effective_of(&prefill_conc);
    let rates = |c: Curve, busy: &Curve| -> Vec<RateFigures> {
        // The rate per request in flight, made once for every figure and window.
        let per_user = Curve::of_points(divide(c.points(), busy.points()), limits);
        windows
            .iter()
            .map(|&w| rate_figures(&c, &per_user, busy, w, limits))
            .collect()
    };
    let decode_list: &[List] = if spans.has_chunks() {
        &[List::DecodeByChunk]
    } else {
        &[List::Decode]
    };
    let decode = rates(curve(decode_list), &decode_conc);
    let prefill = rates(curve(&[List::Prefill]), &prefill_conc);
    let total_curve = curve(&[List::Prefill, List::Decode]);
    let total_effective = each(&|(from, to)| {
        per_second(effective(
            || total_curve.points_from(from),
            from,
            to,
            limits,
        ))
    });
    let total_active = each(&|(from, to)| {
        per_second(active(
            || total_curve.points_from(from),
            || overall.points_from(from),
            from,
            to,
            limits,
        ))
    });
    drop(total_curve);
    let tokens = effective_of(&curve(&[List::Tokens]));

    use MetricId as M;
    (0..windows.len())
        .map(|w| {
            let (d, p) = (decode[w], prefill[w]);
            vec![
                (M::EffectiveConcurrency, concurrency[w]),
                (M::EffectiveDecodeConcurrency, decode_concurrency[w]),
                (M::EffectivePrefillConcurrency, prefill_concurrency[w]),
                (M::EffectiveDecodeThroughput, d[0]),
                (M::EffectivePrefillThroughput, p[0]),
                (M::EffectiveTotalThroughput, total_effective[w]),
                (M::EffectiveDecodeThroughputPerUser, d[2]),
                (M::EffectivePrefillThroughputPerUser, p[2]),
                (M::TokensInFlight, tokens[w]),
                (M::ActiveDecodeThroughput, d[1]),
                (M::ActivePrefillThroughput, p[1]),
                (M::ActiveTotalThroughput, total_active[w]),
                (M::ActiveDecodeThroughputPerUser, d[3]),
                (M::ActivePrefillThroughputPerUser, p[3]),
            ]
        })
        .collect()
}
