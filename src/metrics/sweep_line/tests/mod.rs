use super::events::SLIVER;
use super::figures::{Figure, figures};
use super::weighted::{BUCKETED_FROM, Limits, Scratch, sums_are_exact, weighted};
use super::*;

mod held;
mod separate;

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

/// Limits that take every path: nothing gathered or held, sorts in runs of a few items;
/// a few gathered; everything in memory.
const TIGHT: [Limits; 3] = [
    Limits {
        gather: 0,
        sort_bytes: 64,
        hold_points: 0,
        curve_chunk: 1,
    },
    Limits {
        gather: 3,
        sort_bytes: 300,
        hold_points: 2,
        curve_chunk: 20,
    },
    Limits {
        gather: usize::MAX,
        sort_bytes: usize::MAX,
        hold_points: usize::MAX,
        curve_chunk: 1 << 20,
    },
];

/// The streaming `weighted` over the segments' whole time within each of `TIGHT` and the
/// default limits, checked equal to the in-memory form it replaced; and the sorted walk's
/// figures.
fn with_the_sorted_walk(segments: Vec<(f64, f64)>) -> (WeightedStats, WeightedStats) {
    let total: f64 = segments.iter().map(|s| s.1).sum();
    let head = held::head_weighted(segments.clone(), total);
    for limits in TIGHT.into_iter().chain([Limits::default()]) {
        let now = weighted(|| segments.iter().copied(), Some(total), limits);
        assert_eq!(bits(&now), bits(&head), "{limits:?}: {now:?} {head:?}");
    }
    (head, held::weighted(segments, total))
}

/// The spans in sweep order, sorted in runs of `limit` bytes.
fn ordered(spans: &[Span], limit: usize) -> OrderedSpans {
    let mut order = SpanOrder::with_limit(limit);
    for s in spans {
        order.push(s);
    }
    order.finish()
}

/// Every sweep-line metric over one window.
fn metrics(spans: &[Span], from: f64, to: f64) -> Vec<(MetricId, WeightedStats)> {
    super::metrics(&ordered(spans, 1 << 20), &[(from, to)]).remove(0)
}

/// The order read back is by first event, each with its first event and its span as
/// pushed.
#[test]
fn spans_come_back_by_first_event() {
    let late = encoded(&[5.0, 1e6]);
    let spans: Vec<Span> = (0..500u32)
        .map(|i| {
            let start = f64::from((i * 7919) % 1000) * 1e3;
            Span {
                start,
                generation_start: (i % 3 != 0).then_some(start + 10.0),
                end: start + f64::from(i % 17) * 1e2,
                input_tokens: (i % 5 != 0).then_some(3.0),
                output_tokens: (i % 7 != 0).then_some(f64::from(i % 4)),
                chunk_gaps: if i % 2 == 0 { &late } else { &[] },
            }
        })
        .collect();
    for limit in [300, 1 << 20] {
        let source = ordered(&spans, limit);
        let mut stream = source.stream();
        let mut seen = Vec::new();
        while let Some(first) = stream.peek_first() {
            let (i, s) = stream.take();
            assert_eq!(s, spans[i as usize]);
            assert_eq!(first.to_bits(), super::events::first_event(&s).to_bits());
            seen.push((first, i));
        }
        assert_eq!(seen.len(), spans.len());
        assert!(seen.is_sorted_by(|a, b| a.0 <= b.0), "by first event");
    }
}

fn points(c: &Curve) -> (Vec<f64>, Vec<f64>) {
    c.points().unzip()
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
    fn streamed_curves_match_the_held_ones(raw in raw_spans(), scale in proptest::sample::select(vec![1.0, 1e6, 1.7e3, 0.37])) {
        let gaps = gap_bytes(&raw, scale);
        let spans = build(&raw, &gaps, scale);
        let sets: [&[List]; 9] = [
            &[List::Requests], &[List::Decoding], &[List::Prefilling], &[List::Prefill],
            &[List::Decode], &[List::DecodeByChunk], &[List::Tokens],
            &[List::Prefill, List::Decode], &[List::Tokens, List::DecodeByChunk, List::Requests],
        ];
        // Sorted in memory, and in runs of about two spans.
        for (source, limits) in [(ordered(&spans, 1 << 20), Limits::default()), (ordered(&spans, 100), TIGHT[0]), (ordered(&spans, 200), TIGHT[1])] {
            for lists in sets {
                let streamed = Curve::build(&source, lists, limits);
                let (times, values) = points(&streamed);
                let held = held::Held::from_events(held::events(&spans, lists));
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                proptest::prop_assert_eq!(bits(&times), bits(&held.times), "{:?} {:?}", lists, limits);
                proptest::prop_assert_eq!(bits(&values), bits(&held.values), "{:?} {:?}", lists, limits);
                if limits.hold_points == 0 && !times.is_empty() {
                    proptest::prop_assert!(streamed.is_spilled());
                }
            }
        }
    }

    #[test]
    fn shared_passes_match_separate_ones(raw in raw_spans(), scale in proptest::sample::select(vec![1.0, 1e6, 1.7e3, 0.37]), from in 0u32..200, len in 0u32..400) {
        let gaps = gap_bytes(&raw, scale);
        let spans = build(&raw, &gaps, scale);
        let windows = [(from, from + len), (from + len, from), (0, 450), (from, from)]
            .map(|(from, to)| (from as f64 * scale, to as f64 * scale));
        let pairs: [(&[List], &[List]); 4] = [
            (&[List::DecodeByChunk], &[List::Decoding]),
            (&[List::Prefill], &[List::Prefilling]),
            (&[List::Prefill, List::Decode], &[List::Requests]),
            (&[List::Tokens], &[]),
        ];
        let all = [
            Figure::Effective,
            Figure::Active,
            Figure::EffectivePerUser,
            Figure::ActivePerUser,
            Figure::EffectiveBusy,
        ];
        for (limit, limits) in [(1 << 20, Limits::default()), (100, TIGHT[0]), (300, TIGHT[1]), (1 << 20, TIGHT[2])] {
            let source = ordered(&spans, limit);
            for (rate, busy) in pairs {
                let a = Curve::build(&source, rate, limits);
                let b = (!busy.is_empty()).then(|| Curve::build(&source, busy, limits));
                let per_user = b.as_ref().map(|b| Curve::of_points(separate::divide(a.points(), b.points()), limits));
                for (from, to) in windows {
                    let now = figures(&a, b.as_ref(), (from, to), &all, limits, &mut Scratch::default());
                    let a_from = || a.points_from(from);
                    let mut before = [WeightedStats::default(); 5];
                    before[Figure::Effective as usize] = separate::effective(a_from, from, to, limits);
                    if let (Some(b), Some(u)) = (&b, &per_user) {
                        let b_from = || b.points_from(from);
                        let u_from = || u.points_from(from);
                        before[Figure::Active as usize] = separate::active(a_from, b_from, from, to, limits);
                        before[Figure::EffectivePerUser as usize] = separate::effective(u_from, from, to, limits);
                        before[Figure::ActivePerUser as usize] = separate::active(u_from, b_from, from, to, limits);
                        before[Figure::EffectiveBusy as usize] = separate::effective(b_from, from, to, limits);
                    } else {
                        // No requests in flight: nothing is active, nothing per request.
                        before[Figure::Active as usize] = separate::active(a_from, std::iter::empty, from, to, limits);
                    }
                    for (f, (x, y)) in all.iter().zip(now.iter().zip(&before)) {
                        proptest::prop_assert_eq!(bits(x), bits(y), "{:?} {:?} {:?} {:?} {:?}", f, rate, (from, to), x, y);
                    }
                    // A figure left out is left at 0, and takes nothing from the others.
                    let one = figures(&a, b.as_ref(), (from, to), &[Figure::Active], limits, &mut Scratch::default());
                    proptest::prop_assert_eq!(bits(&one[Figure::Active as usize]), bits(&now[Figure::Active as usize]));
                    proptest::prop_assert_eq!(bits(&one[Figure::Effective as usize]), bits(&WeightedStats::default()));
                }
            }
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
    fn streamed_metrics_match_the_held_ones(raw in raw_spans(), scale in proptest::sample::select(vec![1.0, 1e6, 1.7e3, 0.37]), from in 0u32..200, len in 0u32..400) {
        let gaps = gap_bytes(&raw, scale);
        let spans = build(&raw, &gaps, scale);
        let windows: Vec<(f64, f64)> = [(from, from + len), (from + len, from), (0, 450)]
            .into_iter()
            .map(|(from, to)| (from as f64 * scale, to as f64 * scale))
            .collect();
        // Every window from one set of curves; each path of the passes taken.
        for (limit, limits) in [(1 << 20, Limits::default()), (100, TIGHT[0]), (300, TIGHT[1]), (1 << 20, TIGHT[2])] {
            let all = metrics_with(&ordered(&spans, limit), &windows, limits);
            for (&(from, to), now) in windows.iter().zip(&all) {
                let before = held::metrics(&spans, from, to);
                proptest::prop_assert_eq!(now.len(), before.len());
                for ((id, a), (id_b, b)) in now.iter().zip(&before) {
                    proptest::prop_assert_eq!(id, id_b);
                    proptest::prop_assert_eq!(bits(a), bits(b), "{:?} {:?} {:?} {:?}", id, a, b, limits);
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
    let source = ordered(&spans, 1 << 20);
    let (times, values) = points(&Curve::build(&source, &[List::Tokens], Limits::default()));
    let held = held::Held::from_events(held::events(&spans, &[List::Tokens]));
    assert_eq!(times, held.times);
    assert_eq!(values, held.values);
    assert_eq!(times[0], 1000.0 - SLIVER);
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
