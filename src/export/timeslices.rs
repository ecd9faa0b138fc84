//! `profile_export_aiperf_timeslices.json` and `.csv` (`--slice-duration`): the summary
//! metrics of each time window, in AIPerf's layout.
//!
//! JSON: `{"timeslices": [{"timeslice_index", "start_ns", "end_ns", ["is_complete": false],
//! <metric tag>: {unit, avg, ...}}, ...], "input_config": {...}}`, each metric object as in
//! the summary JSON. CSV: the tidy form `Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value`
//! (the slice's wall-clock bounds on every row, as AIPerf 0.13 writes them), one row per
//! statistic, metrics sorted by tag within a slice.

use serde_json::{Value, json};

use super::csv::{field, number, stat_columns};
use super::json::{Object, metric_object};
use crate::metrics::{MetricResult, MetricValue, TimeSlice};

/// The statistics a CSV row may name, in AIPerf's order.
const STAT_KEYS: [&str; 14] = [
    "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std",
];

/// The time-slice JSON and CSV (`--slice-duration`); nothing without slices.
pub struct Timeslices<'a> {
    pub names: &'a super::FileNames,
    pub summary: &'a crate::metrics::MetricsSummary,
    pub input_config: &'a Value,
}

impl super::Exporter for Timeslices<'_> {
    fn what(&self) -> &'static str {
        "the time-slice files"
    }

    fn export(&self, dir: &std::path::Path) -> std::io::Result<Vec<super::Written>> {
        let slices = &self.summary.timeslices;
        if slices.is_empty() {
            return Ok(Vec::new());
        }
        let json = dir.join(&self.names.timeslices_json);
        let csv = dir.join(&self.names.timeslices_csv);
        super::write_atomically(&json, &render_json(slices, self.input_config))?;
        super::write_atomically(&csv, &render_csv(slices))?;
        Ok(vec![
            super::Written::listed("Timeslices", json),
            super::Written::listed("Timeslices CSV", csv),
        ])
    }
}

pub fn render_json(slices: &[TimeSlice], input_config: &Value) -> String {
    let list: Vec<Object> = slices
        .iter()
        .enumerate()
        .map(|(index, slice)| {
            let mut o = Object::new();
            o.put("timeslice_index", json!(index));
            o.put("start_ns", json!(slice.start_ns));
            o.put("end_ns", json!(slice.end_ns));
            // Only the last, shortened window carries the flag.
            if !slice.is_complete {
                o.put("is_complete", json!(false));
            }
            for r in &slice.results {
                o.put_object(r.def.tag, metric_object(r));
            }
            o
        })
        .collect();
    // Fields in this order; the slices keep theirs (a `Value` would sort them).
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        timeslices: Vec<Object>,
        input_config: &'a Value,
    }
    let doc = Doc {
        timeslices: list,
        input_config,
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON into memory");
    text.push('\n');
    text
}

/// The statistics of one result in display units, by name, in [`STAT_KEYS`] order.
fn stats(r: &MetricResult) -> Vec<(&'static str, f64)> {
    let values = stat_columns(r).unwrap_or_else(|| {
        // A run-level value: `avg` only.
        let mut only_avg = [None; 14];
        if let MetricValue::Scalar(v) = r.display() {
            only_avg[0] = Some(v);
        }
        only_avg
    });
    STAT_KEYS
        .into_iter()
        .zip(values)
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// Counts (requests, tokens) are whole numbers and written without decimals, as AIPerf
/// writes integers; everything else with two.
fn value_cell(r: &MetricResult, v: f64) -> String {
    let count = matches!(r.value, MetricValue::Scalar(_))
        && r.def.scale == 1.0
        && !r.def.unit.contains('/')
        && r.def.unit != "%"
        && v.fract() == 0.0
        && v.abs() < 1e15;
    if count {
        format!("{}", v as i64)
    } else {
        number(v)
    }
}

pub fn render_csv(slices: &[TimeSlice]) -> String {
    let mut out = String::from("Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value\r\n");
    for (index, slice) in slices.iter().enumerate() {
        let mut results: Vec<&MetricResult> = slice.results.iter().collect();
        results.sort_by_key(|r| r.def.tag);
        for r in results {
            for (stat, v) in stats(r) {
                out.push_str(&format!(
                    "{index},{},{},{},{},{stat},{}\r\n",
                    slice.start_ns,
                    slice.end_ns,
                    field(r.def.header),
                    field(r.def.unit),
                    value_cell(r, v)
                ));
            }
        }
    }
    out
}
