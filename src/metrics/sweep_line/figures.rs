//! A curve's figures over one window, taken together: a rate's effective and active
//! figures, those of the rate per request in flight, and the effective figure of the
//! requests in flight, all from one walk over the rate's and the requests' points per
//! pass. Each figure takes its own passes (`weighted::Weighted`), and a walk feeds every
//! figure that wants one; the rate per request in flight is divided out at each point as
//! the walk passes it, where it was once a curve of its own, built and read back.
//!
//! Each figure's segments are the ones its own walk over its curve made (see the
//! reference forms in the tests): an effective figure's split at its own curve's points
//! in the window, an active one's at either curve's points and only where requests are
//! in flight, so every sum adds the same numbers in the same order.

use super::WeightedStats;
use super::curve::{Curve, Points};
use super::weighted::{Limits, Scratch, Weighted, value_at};

/// One figure of a curve `a` and the requests in flight `b` it goes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Figure {
    /// `a` over the whole window, 0 before its first point.
    Effective,
    /// `a` over the parts of the window where `b` is positive.
    Active,
    /// `a / b` (0 where `b` is not positive) over the whole window.
    EffectivePerUser,
    /// `a / b` where `b` is positive.
    ActivePerUser,
    /// `b` over the whole window.
    EffectiveBusy,
}

const FIGURES: usize = 5;

/// The `wanted` figures of `a` and `b` over `[from, to]` (finite), indexed by `Figure`;
/// the others are left at their default.
pub(super) fn figures(
    a: &Curve,
    b: Option<&Curve>,
    (from, to): (f64, f64),
    wanted: &[Figure],
    limits: Limits,
    scratch: &mut Scratch,
) -> [WeightedStats; FIGURES] {
    let mut out = [WeightedStats::default(); FIGURES];
    // An empty or backward window has no positive time: every figure is 0.
    if from.partial_cmp(&to) != Some(std::cmp::Ordering::Less) {
        return out;
    }
    let (a_empty, b_empty) = (a.is_empty(), b.is_none_or(Curve::is_empty));
    let mut taken: [Option<Weighted>; FIGURES] = Default::default();
    for &f in wanted {
        // A figure of an empty curve is 0 (a rate per request in flight: of either).
        let empty = match f {
            Figure::Effective | Figure::Active => a_empty,
            Figure::EffectivePerUser | Figure::ActivePerUser => a_empty || b_empty,
            Figure::EffectiveBusy => b_empty,
        };
        let total = match f {
            Figure::Active | Figure::ActivePerUser => None,
            _ => Some(to - from),
        };
        if !empty {
            taken[f as usize] = Some(Weighted::new(total, limits, scratch));
        }
    }
    while taken.iter().flatten().any(|w| !w.done()) {
        let b_points = b.map_or(Points::Held([].iter()), |b| b.points_from(from));
        walk(a.points_from(from), b_points, (from, to), &mut taken);
        for w in taken.iter_mut().flatten() {
            w.end_pass(scratch);
        }
    }
    for (o, w) in out.iter_mut().zip(&taken) {
        if let Some(w) = w {
            *o = w.stats();
        }
    }
    out
}

/// One pass: every figure's segments, in time order, to those that take them.
fn walk(a: Points, b: Points, (from, to): (f64, f64), taken: &mut [Option<Weighted>; FIGURES]) {
    #[inline]
    fn add(taken: &mut [Option<Weighted>; FIGURES], f: Figure, v: f64, d: f64) {
        if let Some(w) = &mut taken[f as usize] {
            w.add(v, d);
        }
    }
    let ratio = |r: f64, m: f64| if m > 0.0 { r / m } else { 0.0 };
    let (mut a, mut b) = (a.peekable(), b.peekable());
    // The values at `from`: 0 before a curve's first point.
    let mut r = value_at(&mut a, from, 0.0);
    let mut m = value_at(&mut b, from, 0.0);
    let mut u = ratio(r, m);
    // Where each effective figure's current segment started, and its value.
    let (mut a_at, mut a_value) = (from, r);
    let (mut b_at, mut b_value) = (from, m);
    let (mut u_at, mut u_value) = (from, u);
    let mut edge = from;
    loop {
        let next = [a.peek(), b.peek()]
            .into_iter()
            .flatten()
            .map(|p| p.0)
            .fold(to, f64::min);
        if m > 0.0 {
            add(taken, Figure::Active, r, next - edge);
            add(taken, Figure::ActivePerUser, u, next - edge);
        }
        if next >= to {
            break;
        }
        edge = next;
        let a_moved = a.peek().is_some_and(|p| p.0 <= edge);
        let b_moved = b.peek().is_some_and(|p| p.0 <= edge);
        r = value_at(&mut a, edge, r);
        m = value_at(&mut b, edge, m);
        u = ratio(r, m);
        if a_moved {
            add(taken, Figure::Effective, a_value, edge - a_at);
            (a_at, a_value) = (edge, r);
        }
        if b_moved {
            add(taken, Figure::EffectiveBusy, b_value, edge - b_at);
            (b_at, b_value) = (edge, m);
        }
        // The rate per request in flight has a point wherever either curve has one.
        add(taken, Figure::EffectivePerUser, u_value, edge - u_at);
        (u_at, u_value) = (edge, u);
    }
    add(taken, Figure::Effective, a_value, to - a_at);
    add(taken, Figure::EffectiveBusy, b_value, to - b_at);
    add(taken, Figure::EffectivePerUser, u_value, to - u_at);
}
