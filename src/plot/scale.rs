//! What part of the number line an axis shows, and its tick labels: the PNG/SVG renderer's
//! rules (the report's script follows the same ones in `charts.js`).

use std::ops::Range;

/// An axis asked to start at 0 does so only when the data reaches down to this share of its
/// largest value: an axis from 0 for values of 21-25 would squeeze them into its last 15%.
pub const ZERO_REACH: f64 = 0.4;
/// Room above the data on a value (y) axis, so a line at its maximum does not run along the
/// frame.
pub const HEADROOM: f64 = 0.10;
/// Room on either side of the data on the x axis (and below it on a y axis not from 0).
pub const PAD: f64 = 0.05;

/// The least and largest finite value, if any.
pub fn extent(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    lo.is_finite().then_some((lo, hi))
}

/// The range an axis shows for data spanning `extent`: from 0 when asked and the data comes
/// near it (`ZERO_REACH`), else fitted to the data; `PAD` below and `above` (a share of the
/// span) over it.
pub fn range(extent: Option<(f64, f64)>, from_zero: bool, above: f64) -> Range<f64> {
    let Some((mut lo, mut hi)) = extent else {
        return 0.0..1.0;
    };
    let at_zero = from_zero && lo >= 0.0 && lo <= hi * ZERO_REACH;
    if at_zero {
        lo = 0.0;
    }
    // A span within rounding of its magnitude has no ticks to find: widen it.
    let magnitude = lo.abs().max(hi.abs());
    if hi - lo <= magnitude * 1e-12 {
        hi = lo
            + if magnitude == 0.0 {
                1.0
            } else {
                magnitude * 0.1
            };
    }
    let span = hi - lo;
    let lo = if at_zero { 0.0 } else { lo - span * PAD };
    lo..hi + span * above
}

/// How many tick labels an axis gets at most: about ten, and for a count axis no more than
/// the whole numbers in its range, so the ticks fall on whole numbers.
pub fn max_ticks(r: &Range<f64>, integer: bool) -> usize {
    if !integer {
        return 10;
    }
    let whole = (r.end.floor() - r.start.ceil() + 1.0).max(1.0);
    (whole.min(10.0)) as usize
}

/// The step between ticks: the least of 1, 2 or 5 times a power of ten that puts at most
/// `max` ticks on the range (as plotters picks them).
pub fn tick_step(r: &Range<f64>, max: usize) -> f64 {
    let span = r.end - r.start;
    if !(span > 0.0 && span.is_finite()) || max < 2 {
        return span.abs().max(f64::MIN_POSITIVE);
    }
    let step = 10f64.powf((span / max as f64).log10().floor());
    for k in 0..4 {
        for m in [1.0, 2.0, 5.0] {
            let s = step * m * 10f64.powi(k);
            // Ticks at 0, s, 2s, ... across the span: floor(span / s) + 1 of them.
            if ((span / s).floor() as usize) < max {
                return s;
            }
        }
    }
    step * 1e4
}

/// Tick labels with as many decimals as the step between ticks needs (21, 22, 23 rather
/// than 21.0, 22.0, 23.0), the same for every tick; a count axis labels only whole numbers.
pub fn tick_format(r: &Range<f64>, integer: bool) -> impl Fn(&f64) -> String + use<> {
    let step = tick_step(r, max_ticks(r, integer));
    let decimals = if integer || step <= 0.0 {
        0
    } else {
        (-step.log10().floor()).clamp(0.0, 6.0) as usize
    };
    move |v: &f64| {
        if integer && (v - v.round()).abs() > 1e-9 * v.abs().max(1.0) {
            return String::new();
        }
        format!("{v:.decimals$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_start_at_zero_only_when_the_data_comes_near_it() {
        let r = range(extent([3.0, 10.0].into_iter()), true, PAD);
        assert_eq!(r.start, 0.0);
        assert!((r.end - 10.5).abs() < 1e-9);
        // 21-25 ms: fitted, the data fills most of the axis.
        let r = range(extent([21.0, 25.0].into_iter()), true, HEADROOM);
        assert!(r.start > 20.0 && r.start < 21.0, "{r:?}");
        assert!((25.0 - 21.0) / (r.end - r.start) > 0.5);
        let r = range(extent([3.0, 10.0].into_iter()), false, PAD);
        assert!(r.start < 3.0 && r.start > 2.0);
        assert_eq!(range(None, true, PAD), 0.0..1.0);
    }

    #[test]
    fn value_axes_leave_headroom_above_the_largest_value() {
        let r = range(extent([0.0, 4.0].into_iter()), true, HEADROOM);
        assert_eq!(r.start, 0.0);
        assert!((r.end - 4.4).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn count_axes_label_whole_numbers_only() {
        let r = 0.0..4.4;
        assert_eq!(max_ticks(&r, true), 5);
        assert_eq!(max_ticks(&(0.0..400.0), true), 10);
        let f = tick_format(&r, true);
        assert_eq!(f(&3.0), "3");
        assert_eq!(f(&2.5), "");
        let f = tick_format(&r, false);
        assert_eq!(f(&2.5), "2.5");
        // Whole steps print no decimals on any axis.
        let f = tick_format(&(20.5..30.2), false);
        assert_eq!(f(&21.0), "21");
        assert_eq!(tick_step(&(0.0..0.74), 10), 0.1);
        assert_eq!(tick_step(&(0.0..4500.0), 10), 500.0);
    }
}
