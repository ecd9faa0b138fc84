//! The files written across several runs: the confidence aggregate of one configuration's
//! repeated runs (`profile_export_aiperf_aggregate.json`/`.csv`) and the sweep aggregate
//! over all variations (`profile_export_aiperf_sweep.json`/`.csv`), with their console
//! summaries. The run driver hands over each run's metrics (read with
//! [`read_run_metrics`]) or its failure; this module computes and writes the rest.

mod confidence;
mod records;
mod sweep;
mod sweep_table;

use std::collections::BTreeMap;
use std::path::Path;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

pub use confidence::{
    ConfidenceAggregate, VariationMeta, confidence_console, write_confidence_aggregate,
};
pub use records::read_record_values;
pub use sweep::{SweepAggregate, SweepCell, best_configurations_console, write_sweep_aggregate};
pub use sweep_table::sweep_table;

/// One metric of one run's summary: its unit and statistics (avg, min, max, sum, p1..p99,
/// std, count, whichever the run wrote).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSummary {
    pub unit: String,
    pub stats: BTreeMap<String, f64>,
}

/// A run's metrics by tag (`request_latency`, `time_to_first_token`, ...).
pub type RunMetrics = BTreeMap<String, MetricSummary>;

/// One run's outcome: its metrics, or why it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// `run_0001`, `trial_0002`, ...
    pub label: String,
    pub result: Result<RunMetrics, String>,
}

impl RunOutcome {
    fn metrics(&self) -> Option<&RunMetrics> {
        self.result.as_ref().ok()
    }

    /// The mean of one run-level figure, e.g. `("request_count", "avg")`.
    fn stat(&self, tag: &str, stat: &str) -> Option<f64> {
        self.metrics()?.get(tag)?.stats.get(stat).copied()
    }
}

/// Failure text when a run left no readable summary.
pub const NO_METRICS: &str = "No metrics found in artifacts - run may have failed to complete";

/// Reads a run's `profile_export_aiperf.json`: every top-level object with a `unit` is a
/// metric, its numeric fields the statistics. A missing or unreadable file, or one
/// without a successful request, is the run's failure text.
pub fn read_run_metrics(summary_json: &Path) -> Result<RunMetrics, String> {
    let text = std::fs::read_to_string(summary_json).map_err(|_| NO_METRICS.to_string())?;
    let doc: Value = serde_json::from_str(&text).map_err(|_| NO_METRICS.to_string())?;
    let metrics: RunMetrics = doc
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(tag, v)| {
            let obj = v.as_object()?;
            let unit = obj.get("unit")?.as_str().unwrap_or_default().to_string();
            let stats = obj
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                .collect();
            Some((tag.clone(), MetricSummary { unit, stats }))
        })
        .collect();
    if metrics.is_empty() {
        return Err(NO_METRICS.into());
    }
    let avg = |tag: &str| metrics.get(tag).and_then(|m| m.stats.get("avg")).copied();
    if avg("request_count").unwrap_or(0.0) <= 0.0 {
        return Err(match avg("error_request_count") {
            Some(errors) if errors > 0.0 => format!("All {} requests failed", errors as u64),
            _ => "No requests completed".into(),
        });
    }
    Ok(metrics)
}

/// A JSON value whose objects keep their keys in the order written (serde_json's own map
/// sorts them).
enum Json {
    Value(Value),
    Object(Vec<(String, Json)>),
    Array(Vec<Json>),
}

impl Json {
    fn object() -> Json {
        Json::Object(Vec::new())
    }

    fn put(&mut self, key: &str, value: impl Into<Json>) {
        if let Json::Object(pairs) = self {
            pairs.push((key.to_string(), value.into()));
        }
    }

    fn with(mut self, key: &str, value: impl Into<Json>) -> Json {
        self.put(key, value);
        self
    }

    /// Two-space indented text; NaN and infinities are written `null`.
    fn render(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("JSON into memory");
        text.push('\n');
        text
    }
}

impl From<Value> for Json {
    fn from(v: Value) -> Json {
        Json::Value(v)
    }
}

impl From<f64> for Json {
    fn from(v: f64) -> Json {
        Json::Value(Value::from(v))
    }
}

impl From<&str> for Json {
    fn from(v: &str) -> Json {
        Json::Value(Value::from(v))
    }
}

impl From<usize> for Json {
    fn from(v: usize) -> Json {
        Json::Value(Value::from(v))
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Value(v) => v.serialize(s),
            Json::Object(pairs) => {
                let mut map = s.serialize_map(Some(pairs.len()))?;
                for (k, v) in pairs {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
        }
    }
}

/// `[{"label": ..., "error": ...}]`.
fn failed_runs_json<'a>(failed: impl Iterator<Item = (&'a str, &'a str)>) -> Json {
    Json::Array(
        failed
            .map(|(label, error)| Json::object().with("label", label).with("error", error))
            .collect(),
    )
}

/// A pair list as an ordered JSON object.
fn pairs_json(pairs: &[(String, Value)]) -> Json {
    Json::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Json::Value(v.clone())))
            .collect(),
    )
}

/// A CSV number: `decimals` places, `inf`/`-inf` spelled out, NaN or absent empty.
fn csv_number(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_nan() => String::new(),
        Some(v) if v.is_infinite() => if v > 0.0 { "inf" } else { "-inf" }.into(),
        Some(v) => format!("{v:.decimals$}"),
        None => String::new(),
    }
}

/// One CSV line as Python's csv module writes it (fields quoted when needed, `\r\n`).
fn csv_line(out: &mut String, fields: &[String]) {
    let quoted: Vec<String> = fields.iter().map(|f| super::csv::field(f)).collect();
    out.push_str(&quoted.join(","));
    out.push_str("\r\n");
}

/// Writes `name` into `dir` (created if needed) without leaving a partial file behind.
fn write_file(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    super::write_atomically(&dir.join(name), text)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A metric of a test run: tag, unit and (stat, value) pairs.
    pub(crate) type MetricSpec<'a> = (&'a str, &'a str, &'a [(&'a str, f64)]);

    /// A run whose every metric has the given stats.
    pub(crate) fn run(label: &str, metrics: &[MetricSpec]) -> RunOutcome {
        let metrics = metrics
            .iter()
            .map(|(tag, unit, stats)| {
                let stats = stats.iter().map(|(k, v)| (k.to_string(), *v)).collect();
                (
                    tag.to_string(),
                    MetricSummary {
                        unit: unit.to_string(),
                        stats,
                    },
                )
            })
            .collect();
        RunOutcome {
            label: label.into(),
            result: Ok(metrics),
        }
    }

    pub(crate) fn failed(label: &str, error: &str) -> RunOutcome {
        RunOutcome {
            label: label.into(),
            result: Err(error.into()),
        }
    }

    #[test]
    fn csv_numbers_follow_python_format() {
        assert_eq!(csv_number(Some(1.005), 2), "1.00");
        assert_eq!(csv_number(Some(2.0), 4), "2.0000");
        assert_eq!(csv_number(Some(-0.123456), 4), "-0.1235");
        assert_eq!(csv_number(Some(f64::INFINITY), 4), "inf");
        assert_eq!(csv_number(Some(f64::NEG_INFINITY), 2), "-inf");
        assert_eq!(csv_number(Some(f64::NAN), 2), "");
        assert_eq!(csv_number(None, 2), "");
        let mut line = String::new();
        csv_line(&mut line, &["Run Labels".into(), "['a', 'b']".into()]);
        assert_eq!(line, "Run Labels,\"['a', 'b']\"\r\n");
    }

    #[test]
    fn summary_files_read_into_metrics_or_failure_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile_export_aiperf.json");
        let missing = read_run_metrics(&path);
        assert_eq!(missing.unwrap_err(), NO_METRICS);

        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(read_run_metrics(&path).unwrap_err(), NO_METRICS);

        std::fs::write(&path, r#"{"schema_version": "1.5", "input_config": {}}"#).unwrap();
        assert_eq!(read_run_metrics(&path).unwrap_err(), NO_METRICS);

        std::fs::write(
            &path,
            r#"{"request_count": {"unit": "requests", "avg": 0.0},
                "error_request_count": {"unit": "requests", "avg": 7.0}}"#,
        )
        .unwrap();
        assert_eq!(
            read_run_metrics(&path).unwrap_err(),
            "All 7 requests failed"
        );

        std::fs::write(&path, r#"{"request_latency": {"unit": "ms", "avg": 1.0}}"#).unwrap();
        assert_eq!(
            read_run_metrics(&path).unwrap_err(),
            "No requests completed"
        );

        std::fs::write(
            &path,
            r#"{"schema_version": "1.5",
                "request_count": {"unit": "requests", "avg": 3.0},
                "request_latency": {"unit": "ms", "avg": 10.5, "p99": 12.0, "std": null,
                                    "count": 3},
                "error_summary": [],
                "input_config": {"endpoint": {"unit": "ignored?"}}}"#,
        )
        .unwrap();
        let m = read_run_metrics(&path).unwrap();
        // Nested objects are not metrics; only top-level ones with a unit.
        assert_eq!(
            m.keys().collect::<Vec<_>>(),
            ["request_count", "request_latency"]
        );
        let lat = &m["request_latency"];
        assert_eq!(lat.unit, "ms");
        assert_eq!(
            lat.stats,
            BTreeMap::from([
                ("avg".to_string(), 10.5),
                ("count".to_string(), 3.0),
                ("p99".to_string(), 12.0)
            ])
        );
    }
}
