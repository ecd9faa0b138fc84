//! `profile_export_aiperf.csv`: AIPerf's layout. First the record metrics with their
//! statistics, then a blank line and the run-level values; each section sorted by tag.
//! Lines end with `\r\n` as Python's csv module writes them.

use super::console::python_non_finite;
use crate::metrics::{MetricResult, MetricValue, MetricsSummary};

/// AIPerf's stat columns, `sum` included: scripts read these by position.
const STAT_HEADER: &str = "Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std";

/// `Header (unit)`; AIPerf leaves the unit out for plain counts.
fn metric_name(result: &MetricResult) -> String {
    let def = result.def;
    if matches!(def.unit.to_ascii_lowercase().as_str(), "count" | "requests") {
        def.header.to_string()
    } else {
        format!("{} ({})", def.header, def.unit)
    }
}

/// Python's `f"{v:.2f}"`; an absent statistic is an empty cell.
fn cell(v: Option<f64>) -> String {
    v.map_or(String::new(), number)
}

/// Python's `f"{v:.2f}"`.
pub(super) fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        python_non_finite(v).to_string()
    }
}

/// Quotes a field the way Python's csv module does (only when needed).
pub(super) fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A distribution's statistics in display units, in the stat columns' order (`avg` to
/// `std`); time-weighted metrics have no `sum` and only the upper percentiles. `None` for a
/// run-level value.
pub(super) fn stat_columns(r: &MetricResult) -> Option<[Option<f64>; 14]> {
    match r.display() {
        MetricValue::Distribution(s) => {
            let p = s.percentiles.map(Some);
            Some([
                Some(s.avg),
                Some(s.min),
                Some(s.max),
                Some(s.sum),
                p[0],
                p[1],
                p[2],
                p[3],
                p[4],
                p[5],
                p[6],
                p[7],
                p[8],
                Some(s.std),
            ])
        }
        MetricValue::TimeWeighted(w) => Some([
            Some(w.avg),
            Some(w.min),
            Some(w.max),
            None,
            None,
            None,
            None,
            None,
            Some(w.p50),
            None,
            Some(w.p90),
            Some(w.p95),
            Some(w.p99),
            Some(w.std),
        ]),
        MetricValue::Scalar(_) => None,
    }
}

pub fn render(summary: &MetricsSummary, extra: &[super::ExtraMetric]) -> String {
    let mut records: Vec<&MetricResult> = Vec::new();
    let mut scalars: Vec<&MetricResult> = Vec::new();
    for r in &summary.results {
        match r.value {
            MetricValue::Distribution(_) | MetricValue::TimeWeighted(_) => records.push(r),
            MetricValue::Scalar(_) => scalars.push(r),
        }
    }
    records.sort_by_key(|r| r.def.tag);
    scalars.sort_by_key(|r| r.def.tag);

    let mut out = String::new();
    if !records.is_empty() {
        out.push_str(STAT_HEADER);
        out.push_str("\r\n");
        for r in &records {
            let Some(values) = stat_columns(r) else {
                continue;
            };
            out.push_str(&field(&metric_name(r)));
            for v in values {
                out.push(',');
                out.push_str(&cell(v));
            }
            out.push_str("\r\n");
        }
        if !scalars.is_empty() || !extra.is_empty() {
            out.push_str("\r\n");
        }
    }
    // Single values, the catalogue's and the run-level ones, sorted by tag together.
    let mut singles: Vec<(&str, String, f64)> = scalars
        .iter()
        .map(|r| (r.def.tag, metric_name(r), r.display_avg()))
        .chain(extra.iter().map(|m| {
            (
                m.tag.as_str(),
                format!("{} ({})", m.header, m.unit),
                m.value,
            )
        }))
        .collect();
    singles.sort_by(|a, b| a.0.cmp(b.0));
    if !singles.is_empty() {
        out.push_str("Metric,Value\r\n");
        for (_, name, value) in &singles {
            out.push_str(&field(name));
            out.push(',');
            out.push_str(&number(*value));
            out.push_str("\r\n");
        }
    }
    out
}
