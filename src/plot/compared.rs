//! Several runs' distributions drawn over each other (the comparison page of `aiperf plot`
//! with several runs): per metric, a histogram of each run on shared bins and each run's CDF.

use super::artifacts::{MetricKey, RunArtifacts};
use super::chart::{Axis, Chart, Series, SeriesKind};
use super::single::{DISTRIBUTIONS, Histogram, cdf_points};

/// Each run's values of `tag` (its valid requests), labelled by run.
fn values_by_run(runs: &[RunArtifacts], tag: &str) -> Vec<(String, Vec<f64>)> {
    let key = MetricKey::new(tag);
    runs.iter()
        .map(|r| {
            let v = r
                .records
                .iter()
                .filter(|x| !x.failed)
                .filter_map(|x| x.metric_of(key))
                .collect();
            (r.label.clone(), v)
        })
        .collect()
}

/// The overlaid histograms and CDFs of TTFT, ITL and request latency, for the metrics some
/// run has values of. Histograms show the share of each run's requests per bin, so runs of
/// different sizes compare.
pub fn distributions(runs: &[RunArtifacts]) -> Vec<Chart> {
    let mut out = Vec::new();
    for (name, tag, what) in DISTRIBUTIONS {
        let sides = values_by_run(runs, tag);
        let all: Vec<f64> = sides.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        if all.is_empty() {
            continue;
        }
        let stem = name.trim_end_matches("_distribution");
        let (min, max) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        // Shared bins: as many as one run's share of the values would get.
        let per_run = all.len().div_ceil(sides.len());
        let mut bars = Vec::new();
        let mut cdfs = Vec::new();
        for (label, values) in sides.iter().filter(|(_, v)| !v.is_empty()) {
            let mut h = Histogram::new(per_run, min, max);
            for &v in values {
                h.add(v);
            }
            let (points, width) = h.bars();
            let n = values.len() as f64;
            let share = points.into_iter().map(|(x, c)| (x, c / n)).collect();
            let mut s = Series::new(
                format!("{label} ({} requests)", values.len()),
                SeriesKind::Bars,
                share,
            );
            s.bar_width = Some(width);
            bars.push(s);
            cdfs.push(Series::new(
                format!("{label} ({} requests)", values.len()),
                SeriesKind::Line,
                cdf_points(values),
            ));
        }
        let x = || Axis::linear(format!("{what} (ms)"), false);
        out.push(Chart {
            name: format!("{stem}_histograms_compared"),
            title: format!("{what}: histograms compared"),
            subtitle: String::new(),
            description: format!(
                "The share of each run's requests in each {} bin, on the same bins: where the bulk and the tail of each run lie.",
                what.to_lowercase()
            ),
            x: x(),
            y: Axis::linear("Share of the run's requests", true),
            y2: None,
            series: bars,
            marks: Vec::new(),
        });
        out.push(Chart {
            name: format!("{stem}_cdfs_compared"),
            title: format!("{what}: distributions compared"),
            subtitle: String::new(),
            description: format!(
                "The share of each run's requests at or below each {} value: a line further right is slower at that share.",
                what.to_lowercase()
            ),
            x: x(),
            y: Axis::linear("Share of requests at or below (CDF)", true),
            y2: None,
            series: cdfs,
            marks: Vec::new(),
        });
    }
    out
}
