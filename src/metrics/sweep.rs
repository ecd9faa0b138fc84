//! AIPerf's sweep-line metrics: step functions over the run built from every request's
//! start, first token and end (concurrency, decode / prefill / total token rates, tokens in
//! flight), summarized by time-weighted statistics.
//!
//! "Effective" metrics weigh each value by how long it was held over the whole window;
//! "Active" ones only over the time the matching phase had a request in flight.

use super::catalog::MetricId;

/// One profiling request's interval, in ns relative to an anchor (the run's first start).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub start: f64,
    /// First content response; `None` for failed or non-streamed requests.
    pub generation_start: Option<f64>,
    pub end: f64,
    /// Input tokens (valid requests only).
    pub input_tokens: Option<f64>,
    /// Output tokens (OSL, valid requests only).
    pub output_tokens: Option<f64>,
    /// Gaps between consecutive content responses (ns), when streamed.
    pub chunk_gaps: Vec<f64>,
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

/// A right-continuous step function: `values[i]` holds from `times[i]` to `times[i + 1]`,
/// 0 before the first time. Times are sorted and distinct.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    pub times: Vec<f64>,
    pub values: Vec<f64>,
}

impl Step {
    /// Sums `(time, delta)` events into a step function. At equal times ends (negative
    /// deltas) are applied before starts; only the value after the last event at a time
    /// is kept, since the ones before it are held for no time.
    fn from_events(mut events: Vec<(f64, f64)>) -> Step {
        events.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1 > 0.0).cmp(&(b.1 > 0.0))));
        let mut step = Step::default();
        // Each event's delta becomes the level after it, in place: a long run has tens of
        // events per request, and a second list of them doubled the peak memory.
        let mut level = 0.0;
        for event in &mut events {
            level += event.1;
            event.1 = level;
        }
        // Large +/- pairs do not cancel exactly; a value this small is a rounding residue.
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

    /// The value at time `t`.
    fn at(&self, t: f64) -> f64 {
        match self.times.partition_point(|&x| x <= t) {
            0 => 0.0,
            i => self.values[i - 1],
        }
    }

    /// Point-wise quotient on the merged times; 0 where the divisor is not positive.
    fn divide(&self, by: &Step) -> Step {
        if self.times.is_empty() || by.times.is_empty() {
            return Step::default();
        }
        let times = merge_sorted(&self.times, &by.times);
        let values = times
            .iter()
            .map(|&t| {
                let d = by.at(t);
                if d > 0.0 { self.at(t) / d } else { 0.0 }
            })
            .collect();
        Step { times, values }
    }
}

/// The union of two sorted lists of distinct times, sorted and without repeats: what
/// sorting their concatenation and dropping repeats gives, in linear time (the lists hold a
/// few events per request, and sorting them took most of the end of a long run).
fn merge_sorted(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x.total_cmp(&y).is_le() => {
                i += 1;
                x
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (_, Some(&y)) => {
                j += 1;
                y
            }
            (None, None) => unreachable!("the loop runs while one list has times"),
        };
        if out.last() != Some(&next) {
            out.push(next);
        }
    }
    out
}

/// Requests in flight over `[from, to)` per span (both ends needed).
fn concurrency(
    spans: &[Span],
    from: impl Fn(&Span) -> Option<f64>,
    to: impl Fn(&Span) -> Option<f64>,
) -> Step {
    let mut events = Vec::new();
    for s in spans {
        if let (Some(a), Some(b)) = (from(s), to(s)) {
            events.push((a, 1.0));
            events.push((b, -1.0));
        }
    }
    Step::from_events(events)
}

/// Prefill: each request processes its input tokens evenly over `[start, first token)`.
fn prefill_events(spans: &[Span]) -> Vec<(f64, f64)> {
    let mut events = Vec::new();
    for s in spans {
        if let (Some(g), Some(isl)) = (s.generation_start, s.input_tokens)
            && g > s.start
        {
            let rate = isl / (g - s.start);
            events.push((s.start, rate));
            events.push((g, -rate));
        }
    }
    events
}

/// Decode spread evenly over `[first token, end)`: `(OSL - 1)` tokens (the first one came
/// with TTFT).
fn decode_events(spans: &[Span]) -> Vec<(f64, f64)> {
    let mut events = Vec::new();
    for s in spans {
        if let (Some(g), Some(osl)) = (s.generation_start, s.output_tokens)
            && s.end > g
        {
            let rate = (osl - 1.0) / (s.end - g);
            events.push((g, rate));
            events.push((s.end, -rate));
        }
    }
    events
}

/// Decode rate following the chunks: each gap between two chunks carries
/// `(OSL - 1) / (number of non-zero gaps)` tokens over its own interval.
fn decode_events_by_chunk(spans: &[Span]) -> Vec<(f64, f64)> {
    let mut events = Vec::new();
    for s in spans {
        let (Some(g), Some(osl)) = (s.generation_start, s.output_tokens) else {
            continue;
        };
        let nonzero = s.chunk_gaps.iter().filter(|&&d| d > 0.0).count();
        if osl < 1.0 || nonzero == 0 {
            continue;
        }
        let per_gap = (osl - 1.0) / nonzero as f64;
        let mut at = g;
        for &gap in &s.chunk_gaps {
            let end = at + gap;
            if gap > 0.0 {
                let rate = per_gap / gap;
                events.push((at, rate));
                events.push((end, -rate));
            }
            at = end;
        }
    }
    events
}

/// Tokens held per request: the input from its start, output tokens as chunks arrive
/// (one at the first token, the rest spread over the later chunks, or all at the first
/// token without chunk times), all released at its end.
fn tokens_in_flight(spans: &[Span]) -> Step {
    let mut events = Vec::new();
    for s in spans {
        let prefill = match (s.generation_start, s.input_tokens) {
            (Some(g), Some(isl)) if g > s.start => Some(isl),
            _ => None,
        };
        if let Some(isl) = prefill {
            events.push((s.start, isl));
        }
        let mut added_output = None;
        if let (Some(g), Some(osl)) = (s.generation_start, s.output_tokens) {
            if !s.chunk_gaps.is_empty() {
                if osl >= 1.0 {
                    events.push((g, 1.0));
                }
                let per_chunk = (osl - 1.0) / s.chunk_gaps.len() as f64;
                let mut at = g;
                for &gap in &s.chunk_gaps {
                    at += gap;
                    if gap >= 0.0 {
                        // A chunk stamped at or after the end still arrives before it.
                        let t = if at >= s.end { s.end.next_down() } else { at };
                        events.push((t, per_chunk));
                    }
                }
                added_output = Some(osl);
            } else if s.end > g {
                events.push((g, osl));
                added_output = Some(osl);
            }
        }
        let release = prefill.unwrap_or(0.0) + added_output.unwrap_or(0.0);
        if prefill.is_some() || added_output.is_some() {
            events.push((s.end, -release));
        }
    }
    Step::from_events(events)
}

/// Weighted statistics of `(value, duration)` segments; `total` is the time the average
/// is taken over. Percentiles are the first value whose cumulative time share reaches q.
fn weighted(mut segments: Vec<(f64, f64)>, total: f64) -> WeightedStats {
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

/// Over the whole window `[from, to]`, 0 before the first event.
fn effective(step: &Step, from: f64, to: f64) -> WeightedStats {
    if step.times.is_empty() {
        return WeightedStats::default();
    }
    // The segments between `from`, the step's times inside the window and `to`; each step
    // time starts its own value, so only the first needs a search.
    let first = step.times.partition_point(|&t| t <= from);
    let last = step.times.partition_point(|&t| t < to).max(first);
    let mut segments = Vec::with_capacity(last - first + 1);
    let (mut at, mut value) = (from, step.at(from));
    for (&t, &v) in step.times[first..last]
        .iter()
        .zip(&step.values[first..last])
    {
        segments.push((value, t - at));
        (at, value) = (t, v);
    }
    segments.push((value, to - at));
    weighted(segments, to - from)
}

/// Over the parts of the window where `mask` is positive only.
fn active(step: &Step, mask: &Step, from: f64, to: f64) -> WeightedStats {
    if step.times.is_empty() {
        return WeightedStats::default();
    }
    let inside = |times: &[f64]| -> Vec<f64> {
        let lo = times.partition_point(|&t| t < from);
        let hi = times.partition_point(|&t| t <= to).max(lo);
        times[lo..hi].to_vec()
    };
    let ends: &[f64] = if from <= to { &[from, to] } else { &[] };
    let edges = merge_sorted(
        &merge_sorted(&inside(&step.times), &inside(&mask.times)),
        ends,
    );
    let segments: Vec<(f64, f64)> = edges
        .windows(2)
        .filter(|w| mask.at(w[0]) > 0.0)
        .map(|w| (step.at(w[0]), w[1] - w[0]))
        .collect();
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

/// Every sweep-line metric over the window `[from, to]` (ns, same anchor as the spans).
/// Rates are tokens/sec, concurrencies requests, tokens in flight tokens.
pub fn metrics(spans: &[Span], from: f64, to: f64) -> Vec<(MetricId, WeightedStats)> {
    // Each rate step holds a few events per request (per chunk for the decode rate): each
    // is dropped as soon as its figures are taken, so a long run holds one at a time.
    let overall = concurrency(spans, |s| Some(s.start), |s| Some(s.end));
    let decode_conc = concurrency(spans, |s| s.generation_start, |s| Some(s.end));
    let prefill_conc = concurrency(spans, |s| Some(s.start), |s| s.generation_start);
    let has_chunks = spans.iter().any(|s| !s.chunk_gaps.is_empty());
    let rate_figures = |rate: Step, busy: &Step| {
        let effective_rate = per_second(effective(&rate, from, to));
        let active_rate = per_second(active(&rate, busy, from, to));
        let per_user = rate.divide(busy);
        drop(rate);
        (
            effective_rate,
            active_rate,
            per_second(effective(&per_user, from, to)),
            per_second(active(&per_user, busy, from, to)),
        )
    };
    let decode = Step::from_events(if has_chunks {
        decode_events_by_chunk(spans)
    } else {
        decode_events(spans)
    });
    let (decode_eff, decode_active, decode_user_eff, decode_user_active) =
        rate_figures(decode, &decode_conc);
    let prefill = Step::from_events(prefill_events(spans));
    let (prefill_eff, prefill_active, prefill_user_eff, prefill_user_active) =
        rate_figures(prefill, &prefill_conc);
    let mut both = prefill_events(spans);
    both.extend(decode_events(spans));
    let total = Step::from_events(both);
    let total_eff = per_second(effective(&total, from, to));
    let total_active = per_second(active(&total, &overall, from, to));
    drop(total);
    let tokens = effective(&tokens_in_flight(spans), from, to);

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

    fn span(start_ms: f64, first_ms: f64, end_ms: f64, isl: f64, osl: f64) -> Span {
        Span {
            start: start_ms * MS,
            generation_start: Some(first_ms * MS),
            end: end_ms * MS,
            input_tokens: Some(isl),
            output_tokens: Some(osl),
            chunk_gaps: Vec::new(),
        }
    }

    fn get(all: &[(MetricId, WeightedStats)], id: MetricId) -> WeightedStats {
        all.iter().find(|m| m.0 == id).unwrap().1
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} != {b}");
    }

    /// The sort-based forms `effective`, `active` and `divide` had before their linear
    /// versions; both must give the same numbers.
    mod by_sorting {
        use super::super::*;

        pub fn merged(a: &[f64], b: &[f64]) -> Vec<f64> {
            let mut times: Vec<f64> = a.iter().chain(b).copied().collect();
            times.sort_by(f64::total_cmp);
            times.dedup();
            times
        }

        pub fn effective(step: &Step, from: f64, to: f64) -> WeightedStats {
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

        pub fn active(step: &Step, mask: &Step, from: f64, to: f64) -> WeightedStats {
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
    }

    proptest::proptest! {
        #[test]
        fn linear_sweeps_match_the_sorting_ones(
            a in proptest::collection::vec((0u32..400, 1u32..60, -3i32..4), 0..40),
            b in proptest::collection::vec((0u32..400, 1u32..60, -3i32..4), 0..40),
            from in 0u32..200,
            len in 0u32..400,
        ) {
            let events = |v: &[(u32, u32, i32)]| -> Vec<(f64, f64)> {
                v.iter()
                    .flat_map(|&(t, d, x)| [(t as f64, x as f64), ((t + d) as f64, -(x as f64))])
                    .collect()
            };
            let step = Step::from_events(events(&a));
            let mask = Step::from_events(events(&b));
            let (from, to) = (from as f64, (from + len) as f64);
            proptest::prop_assert_eq!(merge_sorted(&step.times, &mask.times), by_sorting::merged(&step.times, &mask.times));
            proptest::prop_assert_eq!(effective(&step, from, to), by_sorting::effective(&step, from, to));
            proptest::prop_assert_eq!(effective(&step, to, from), by_sorting::effective(&step, to, from));
            proptest::prop_assert_eq!(active(&step, &mask, from, to), by_sorting::active(&step, &mask, from, to));
            proptest::prop_assert_eq!(active(&step, &mask, to, from), by_sorting::active(&step, &mask, to, from));
        }
    }

    #[test]
    fn two_overlapping_requests_by_hand() {
        // A: 0..100 ms, first token at 20 ms, 200 in, 9 out.
        // B: 50..150 ms, first token at 60 ms, 100 in, 11 out. Window 0..200 ms.
        let spans = [
            span(0.0, 20.0, 100.0, 200.0, 9.0),
            span(50.0, 60.0, 150.0, 100.0, 11.0),
        ];
        let all = metrics(&spans, 0.0, 200.0 * MS);

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
        s.chunk_gaps = vec![30.0 * MS, 60.0 * MS];
        let all = metrics(&[s], 0.0, 100.0 * MS);
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
    fn failed_requests_count_in_concurrency_only() {
        let failed = Span {
            start: 0.0,
            generation_start: None,
            end: 40.0 * MS,
            input_tokens: None,
            output_tokens: None,
            chunk_gaps: Vec::new(),
        };
        let all = metrics(&[failed], 0.0, 80.0 * MS);
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
