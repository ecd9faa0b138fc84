//! The figures as they were taken before they shared passes: each over its own segments,
//! made anew for each pass from its curve (`effective`, `active`), and the rate per request
//! in flight made into a curve of its own (`divide`). `figures` must give the same bits.

use super::super::WeightedStats;
use super::super::weighted::{Limits, value_at, weighted};
use std::cmp::Ordering;

/// The segments of `points` over the whole window `[from, to]`, 0 before the first point.
/// `points` must not be empty.
pub(super) fn effective_segments(
    points: impl Iterator<Item = (f64, f64)>,
    from: f64,
    to: f64,
) -> impl Iterator<Item = (f64, f64)> {
    let mut points = Some(points);
    let (mut at, mut value) = (from, 0.0);
    std::iter::from_fn(move || {
        let inner = points.as_mut()?;
        for (t, v) in inner.by_ref() {
            if t <= from {
                value = v;
            } else if t < to {
                let segment = (value, t - at);
                (at, value) = (t, v);
                return Some(segment);
            } else {
                break;
            }
        }
        points = None;
        Some((value, to - at))
    })
}

/// The segments of `points` over the parts of `[from, to]` where `mask` is positive.
pub(super) fn active_segments(
    points: impl Iterator<Item = (f64, f64)>,
    mask: impl Iterator<Item = (f64, f64)>,
    from: f64,
    to: f64,
) -> impl Iterator<Item = (f64, f64)> {
    let (mut points, mut mask) = (points.peekable(), mask.peekable());
    // Edges: `from`, every point of either inside the window, `to`; each segment takes
    // the values at its left edge.
    let (mut value, mut masked) = (0.0, 0.0);
    let mut edge = from;
    let mut done = false;
    std::iter::from_fn(move || {
        while !done {
            value = value_at(&mut points, edge, value);
            masked = value_at(&mut mask, edge, masked);
            if edge >= to {
                done = true;
                break;
            }
            let next = [points.peek(), mask.peek()]
                .into_iter()
                .flatten()
                .map(|p| p.0)
                .fold(to, f64::min);
            let segment = (value, next - edge);
            edge = next;
            if masked > 0.0 {
                return Some(segment);
            }
        }
        None
    })
}

/// Over the whole window `[from, to]`, 0 before the first point.
pub(super) fn effective<I: Iterator<Item = (f64, f64)>>(
    points: impl Fn() -> I,
    from: f64,
    to: f64,
    limits: Limits,
) -> WeightedStats {
    if points().next().is_none() {
        return WeightedStats::default();
    }
    weighted(
        || effective_segments(points(), from, to),
        Some(to - from),
        limits,
    )
}

/// Over the parts of the window where `mask` is positive only.
pub(super) fn active<I: Iterator<Item = (f64, f64)>, M: Iterator<Item = (f64, f64)>>(
    points: impl Fn() -> I,
    mask: impl Fn() -> M,
    from: f64,
    to: f64,
    limits: Limits,
) -> WeightedStats {
    let forward = matches!(
        from.partial_cmp(&to),
        Some(Ordering::Less | Ordering::Equal)
    );
    if points().next().is_none() || !forward {
        return WeightedStats::default();
    }
    weighted(|| active_segments(points(), mask(), from, to), None, limits)
}

/// Point-wise quotient on the merged times; 0 where the divisor is not positive; nothing
/// when either is empty.
pub(super) fn divide(
    a: impl Iterator<Item = (f64, f64)>,
    b: impl Iterator<Item = (f64, f64)>,
) -> impl Iterator<Item = (f64, f64)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let mut done = a.peek().is_none() || b.peek().is_none();
    let (mut av, mut bv) = (0.0, 0.0);
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let t = match (a.peek(), b.peek()) {
            (Some(&(x, _)), Some(&(y, _))) => {
                if x.total_cmp(&y).is_le() {
                    x
                } else {
                    y
                }
            }
            (Some(&(x, _)), None) => x,
            (None, Some(&(y, _))) => y,
            (None, None) => {
                done = true;
                return None;
            }
        };
        av = value_at(&mut a, t, av);
        bv = value_at(&mut b, t, bv);
        Some((t, if bv > 0.0 { av / bv } else { 0.0 }))
    })
}
