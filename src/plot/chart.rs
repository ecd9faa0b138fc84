//! What a plot shows, independent of how it is drawn (PNG/SVG via plotters, or the HTML report's JS).
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    pub name: String, // file stem, e.g. "ttft_distribution"
    pub title: String,
    /// The requests behind the chart, failed ones counted, e.g. "36 requests, 6 failed".
    pub subtitle: String,
    pub description: String, // one sentence: what a reader learns from it
    pub x: Axis,
    pub y: Axis,
    pub y2: Option<Axis>, // secondary y axis (series with on_y2)
    pub series: Vec<Series>,
    pub marks: Vec<Mark>, // reference lines, e.g. p50/p90/p99
}
#[derive(Debug, Clone, Serialize)]
pub struct Axis {
    pub label: String, // with unit, e.g. "Time to first token (ms)"
    pub log: bool,
    pub from_zero: bool,
    pub time: bool, // a time axis: zoomable in the report
    /// Counts (requests, concurrency, tokens): ticks only at whole numbers, printed as such.
    pub integer: bool,
}
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum SeriesKind {
    Line,
    Step,
    Scatter,
    Bars,
    Area,
}
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub name: String,
    pub kind: SeriesKind,
    pub points: Vec<(f64, f64)>, // Bars: (bin left edge, value), width in `bar_width`
    pub bar_width: Option<f64>,
    pub labels: Vec<String>, // per-point labels (e.g. the load value), empty if none
    pub y_err: Vec<(f64, f64)>, // per-point (low, high) error bars, empty if none
    pub on_y2: bool,
    pub error_points: bool, // points are failed requests (drawn as crosses)
    /// The k of a series already thinned as `thin` would (made thinned from a stream).
    #[serde(skip)]
    pub thinned_by: usize,
}
#[derive(Debug, Clone, Serialize)]
pub struct Mark {
    pub on_x: bool, // vertical line at x = value (else horizontal at y = value)
    pub value: f64,
    pub label: String, // e.g. "p50 12.3 ms"
}

impl Axis {
    /// A linear axis labelled `label`, starting at 0 when `from_zero`.
    pub fn linear(label: impl Into<String>, from_zero: bool) -> Axis {
        Axis {
            label: label.into(),
            log: false,
            from_zero,
            time: false,
            integer: false,
        }
    }

    /// A linear axis of whole numbers (counts), from 0 when `from_zero`.
    pub fn count(label: impl Into<String>, from_zero: bool) -> Axis {
        Axis {
            integer: true,
            ..Axis::linear(label, from_zero)
        }
    }

    /// A time axis (seconds since the run's start), zoomable in the report.
    pub fn time(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            log: false,
            from_zero: true,
            time: true,
            integer: false,
        }
    }
}

/// The k that `Series::thin` keeps every k-th of `n` points by to keep about `max`.
pub fn thinning(n: usize, max: usize) -> usize {
    if n <= max || max == 0 {
        1
    } else {
        n.div_ceil(max)
    }
}

/// Whether thinning `n` points by `k` keeps the `i`-th: every k-th and the last.
pub fn keeps(n: usize, k: usize, i: usize) -> bool {
    i.is_multiple_of(k) || i == n - 1
}

impl Series {
    /// A series of `kind` with no labels, error bars or bar width.
    pub fn new(name: impl Into<String>, kind: SeriesKind, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            kind,
            points,
            bar_width: None,
            labels: Vec::new(),
            y_err: Vec::new(),
            on_y2: false,
            error_points: false,
            thinned_by: 1,
        }
    }

    /// Keeps every k-th point (and the last) so at most about `max` remain, with their
    /// labels and error bars; returns k (1 when nothing was dropped). Per-request series of
    /// a long run would otherwise make the HTML report hundreds of megabytes.
    pub fn thin(&mut self, max: usize) -> usize {
        if self.thinned_by > 1 {
            return self.thinned_by;
        }
        let n = self.points.len();
        let k = thinning(n, max);
        if k == 1 {
            return 1;
        }
        let keep = |i: usize| keeps(n, k, i);
        fn sift<T>(v: &mut Vec<T>, keep: impl Fn(usize) -> bool) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                keep(i - 1)
            });
        }
        sift(&mut self.points, keep);
        if self.labels.len() == n {
            sift(&mut self.labels, keep);
        }
        if self.y_err.len() == n {
            sift(&mut self.y_err, keep);
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_every_kth_point_the_last_and_their_labels() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 2.0 * i as f64)).collect();
        let mut s = Series::new("s", SeriesKind::Scatter, pts);
        s.labels = (0..10).map(|i| i.to_string()).collect();
        assert_eq!(s.thin(4), 3);
        let xs: Vec<f64> = s.points.iter().map(|p| p.0).collect();
        assert_eq!(xs, [0.0, 3.0, 6.0, 9.0]);
        assert_eq!(s.labels, ["0", "3", "6", "9"]);
        assert_eq!(s.thin(4), 1, "already small enough");
    }
}
