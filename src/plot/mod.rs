//! `aiperf plot`: charts of finished runs. `load` finds and reads the artifacts, `single`
//! and `multi` decide what each chart shows (`chart`), `render` draws them as PNG and SVG.

pub mod chart;
pub mod load;
mod multi;
mod single;

pub use chart::{Axis, Chart, Mark, Series, SeriesKind};
pub use load::{PlotError, RunArtifacts, discover};

/// The charts of the default set that the runs have data for: the single-run set for one
/// run, the multi-run set for several (a sweep or repeated runs).
pub fn default_charts(runs: &[RunArtifacts]) -> Vec<Chart> {
    candidate_charts(runs)
        .into_iter()
        .filter_map(|(_, c)| c)
        .collect()
}

/// Every chart of the set that applies (single- or multi-run), by name, `None` where the
/// runs lack its data.
pub fn candidate_charts(runs: &[RunArtifacts]) -> Vec<(String, Option<Chart>)> {
    match runs {
        [] => Vec::new(),
        [one] => single::charts(one),
        many => multi::charts(many),
    }
}

/// numpy's linear-interpolated percentile (`p50` -> 0.5) of `values`.
fn stats_percentile(values: &[f64], p: &str) -> Option<f64> {
    let q: f64 = p.strip_prefix('p')?.parse::<f64>().ok()? / 100.0;
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let last = v.len().checked_sub(1)?;
    let pos = q * last as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}
