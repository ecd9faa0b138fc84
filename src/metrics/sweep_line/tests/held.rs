//! The whole-curve forms of the sweep, before it streamed: every event of a curve in one
//! list, stably sorted, the step held whole, segments sorted stably with their cumulative
//! shares. The sweep must give the same bits; and `head_weighted`, the in-memory weighted
//! statistics the streaming passes replaced, must too.

use super::super::events::List;
use super::super::weighted::{select_by_buckets, sums_are_exact};
use super::super::{MetricId, Span, WeightedStats, per_second};

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

/// The weighted statistics as they were taken before their passes streamed: the segments
/// held, compacted, their sums in time order, percentiles selected (exact sums) or by a
/// stable sort and walk.
pub fn head_weighted(mut segments: Vec<(f64, f64)>, total: f64) -> WeightedStats {
    use crate::stats::{from_total_order_key, total_order_key};
    use std::cmp::Ordering;
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
        select_by_buckets(&mut segments, covered, (min, max), &mut at);
    } else {
        segments.sort_by(|a, b| a.0.total_cmp(&b.0));
        let covered: f64 = segments.iter().map(|s| s.1).sum();
        let mut found = 0;
        let mut acc = 0.0;
        for s in &segments {
            if found == 4 {
                break;
            }
            acc += s.1;
            while found < 4
                && (acc / covered).partial_cmp(&[0.50, 0.90, 0.95, 0.99][found])
                    != Some(Ordering::Less)
            {
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

fn lowest_bit_exponent(d: f64) -> Option<i32> {
    if !d.is_normal() {
        return None;
    }
    let bits = d.to_bits();
    let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    Some(((bits >> 52) & 0x7ff) as i32 - 1075 + mantissa.trailing_zeros() as i32)
}
