//! `profile_export_aiperf_aggregate.json` / `.csv` and the console summary of one
//! configuration's repeated runs: each `<metric>_<stat>` with its mean, spread and
//! confidence interval across the successful runs.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{Json, RunOutcome, csv_line, csv_number, failed_runs_json, pairs_json, write_file};
use crate::export::names::{AGGREGATE_CSV_FILE, AGGREGATE_JSON_FILE};
use crate::export::pyrepr;
use crate::metrics::confidence::{RunLevelStats, STAT_KEYS};

/// Version of the aggregate file's own layout.
const SCHEMA_VERSION: &str = "1.0";

/// What the confidence aggregate of one configuration is made of.
#[derive(Debug, Clone)]
pub struct ConfidenceAggregate<'a> {
    /// Every run of the configuration, failed ones included, in run order.
    pub runs: &'a [RunOutcome],
    /// `--confidence-level`, in (0, 1).
    pub confidence_level: f64,
    /// `--profile-run-cooldown-seconds`.
    pub cooldown_seconds: f64,
    /// The sweep variation these runs belong to, when sweeping.
    pub variation: Option<VariationMeta>,
}

/// Which sweep variation an aggregate describes.
#[derive(Debug, Clone, PartialEq)]
pub struct VariationMeta {
    /// `phases.profiling.concurrency=10, phases.profiling.rate=5.0`.
    pub label: String,
    /// Dotted parameter path -> value, in path order.
    pub values: Vec<(String, Value)>,
    /// `repeated` or `independent`.
    pub sweep_mode: String,
    /// The variation's first model, when known.
    pub model: Option<String>,
}

/// A metadata value: plain JSON, or a mapping whose keys keep the caller's order
/// (serde_json's own map would sort them).
enum MetaValue {
    Plain(Value),
    Mapping(Vec<(String, Value)>),
}

impl MetaValue {
    fn json(&self) -> Json {
        match self {
            MetaValue::Plain(v) => Json::Value(v.clone()),
            MetaValue::Mapping(pairs) => pairs_json(pairs),
        }
    }

    /// As Python's `str()` writes it in the CSV.
    fn python(&self) -> String {
        match self {
            MetaValue::Plain(v) => pyrepr::str(v),
            MetaValue::Mapping(pairs) => pyrepr::dict(pairs),
        }
    }
}

/// One `<metric>_<stat>` across runs.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct KeyStats {
    pub stats: RunLevelStats,
    pub unit: String,
}

impl KeyStats {
    /// `{mean, std, min, max, cv, [se,] ci_low, ci_high, [t_critical,] unit}`: the confidence
    /// aggregate's entry with `detail`, the multi-trial sweep cell's without.
    pub(super) fn json(&self, detail: bool) -> Json {
        let s = &self.stats;
        let mut entry = Json::object()
            .with("mean", s.mean)
            .with("std", s.std)
            .with("min", s.min)
            .with("max", s.max)
            .with("cv", s.cv);
        if detail {
            entry = entry.with("se", s.se);
        }
        entry = entry.with("ci_low", s.ci_low).with("ci_high", s.ci_high);
        if detail {
            entry = entry.with("t_critical", s.t_critical);
        }
        entry.with("unit", self.unit.as_str())
    }
}

/// Every `<metric>_<stat>` of the successful runs, sorted by key (AIPerf's order is a
/// set's, i.e. arbitrary). One successful run gives the degenerate point form; several
/// give [`RunLevelStats::across_runs`] over the runs that have the value.
pub(super) fn key_stats(runs: &[RunOutcome], level: f64) -> BTreeMap<String, KeyStats> {
    let ok: Vec<_> = runs.iter().filter_map(RunOutcome::metrics).collect();
    let mut out = BTreeMap::new();
    if let [single] = ok.as_slice() {
        for (tag, metric) in single.iter() {
            for stat in STAT_KEYS {
                if let Some(v) = metric.stats.get(stat) {
                    let stats = RunLevelStats::single_run(*v);
                    let unit = metric.unit.clone();
                    out.insert(format!("{tag}_{stat}"), KeyStats { stats, unit });
                }
            }
        }
        return out;
    }
    let mut pairs: BTreeMap<(&str, &str), ()> = BTreeMap::new();
    for metrics in &ok {
        for (tag, metric) in metrics.iter() {
            for stat in STAT_KEYS {
                if metric.stats.contains_key(stat) {
                    pairs.insert((tag.as_str(), stat), ());
                }
            }
        }
    }
    for (tag, stat) in pairs.into_keys() {
        let mut values = Vec::new();
        let mut unit = None;
        for metrics in &ok {
            let Some(metric) = metrics.get(tag) else {
                continue;
            };
            match metric.stats.get(stat) {
                Some(v) if v.is_finite() => {
                    values.push(*v);
                    unit.get_or_insert_with(|| metric.unit.clone());
                }
                _ => {}
            }
        }
        if let Some(stats) = RunLevelStats::across_runs(&values, level) {
            let unit = unit.unwrap_or_default();
            out.insert(format!("{tag}_{stat}"), KeyStats { stats, unit });
        }
    }
    out
}

impl ConfidenceAggregate<'_> {
    fn successful(&self) -> impl Iterator<Item = &RunOutcome> {
        self.runs.iter().filter(|r| r.result.is_ok())
    }

    fn failed(&self) -> impl Iterator<Item = (&str, &str)> {
        self.runs.iter().filter_map(|r| match &r.result {
            Err(e) => Some((r.label.as_str(), e.as_str())),
            Ok(_) => None,
        })
    }

    fn num_successful(&self) -> usize {
        self.successful().count()
    }

    /// The metadata after the run counts, in AIPerf's key order (the CSV's rows too).
    fn extra_metadata(&self) -> Vec<(&'static str, MetaValue)> {
        let plain = MetaValue::Plain;
        let labels: Vec<Value> = self.successful().map(|r| r.label.clone().into()).collect();
        let mut meta = vec![
            ("confidence_level", plain(self.confidence_level.into())),
            ("run_labels", plain(Value::Array(labels))),
        ];
        if self.num_successful() == 1 {
            meta.push(("single_run", plain(Value::Bool(true))));
        }
        meta.push(("cooldown_seconds", plain(self.cooldown_seconds.into())));
        if let Some(v) = &self.variation {
            meta.push(("variation_label", plain(v.label.clone().into())));
            meta.push(("variation_values", MetaValue::Mapping(v.values.clone())));
            meta.push(("sweep_mode", plain(v.sweep_mode.clone().into())));
            if let Some(model) = &v.model {
                meta.push(("model", plain(model.clone().into())));
            }
        }
        meta
    }

    fn render_json(&self) -> String {
        let mut meta = Json::object()
            .with("aggregation_type", "confidence")
            .with("num_profile_runs", self.runs.len())
            .with("num_successful_runs", self.num_successful())
            .with("failed_runs", failed_runs_json(self.failed()));
        for (key, value) in self.extra_metadata() {
            meta.put(key, value.json());
        }
        let mut metrics = Json::object();
        for (key, k) in key_stats(self.runs, self.confidence_level) {
            metrics.put(&key, k.json(true));
        }
        Json::object()
            .with("schema_version", SCHEMA_VERSION)
            .with("aiperf_version", env!("CARGO_PKG_VERSION"))
            .with("metadata", meta)
            .with("metrics", metrics)
            .render()
    }

    fn render_csv(&self) -> String {
        let mut out = String::new();
        let header = [
            "metric",
            "mean",
            "std",
            "min",
            "max",
            "cv",
            "se",
            "ci_low",
            "ci_high",
            "t_critical",
            "unit",
        ];
        csv_line(&mut out, &header.map(String::from));
        for (key, k) in key_stats(self.runs, self.confidence_level) {
            let s = k.stats;
            let n2 = |v: f64| csv_number(Some(v), 2);
            let n4 = |v: f64| csv_number(Some(v), 4);
            csv_line(
                &mut out,
                &[
                    key,
                    n2(s.mean),
                    n2(s.std),
                    n2(s.min),
                    n2(s.max),
                    n4(s.cv),
                    n4(s.se),
                    n2(s.ci_low),
                    n2(s.ci_high),
                    n4(s.t_critical),
                    k.unit,
                ],
            );
        }
        out.push_str("\r\n");
        let rows = [
            ("Aggregation Type".to_string(), "confidence".to_string()),
            ("Total Runs".to_string(), self.runs.len().to_string()),
            (
                "Successful Runs".to_string(),
                self.num_successful().to_string(),
            ),
        ];
        for (name, value) in rows {
            csv_line(&mut out, &[name, value]);
        }
        for (key, value) in self.extra_metadata() {
            let name = pyrepr::title(&key.replace('_', " "));
            csv_line(&mut out, &[name, value.python()]);
        }
        out
    }
}

/// Writes `profile_export_aiperf_aggregate.json` and `.csv` into `dir`. Refused (an
/// `InvalidInput` error, nothing written) when no run succeeded.
pub fn write_confidence_aggregate(dir: &Path, agg: &ConfidenceAggregate) -> std::io::Result<()> {
    if agg.num_successful() == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "all {} runs failed: there is nothing to aggregate",
                agg.runs.len()
            ),
        ));
    }
    write_file(dir, AGGREGATE_JSON_FILE, &agg.render_json())?;
    write_file(dir, AGGREGATE_CSV_FILE, &agg.render_csv())
}

/// Metrics the console summary shows, each with the first of its stats present.
const KEY_METRICS: [&str; 4] = [
    "request_throughput",
    "time_to_first_token",
    "inter_token_latency",
    "request_latency",
];
const KEY_STATS: [(&str, &str); 4] = [
    ("avg", "Avg"),
    ("p99", "P99"),
    ("max", "Max"),
    ("p50", "P50"),
];

/// Python's `{:.0%}`.
fn percent0(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// A number as Python's `{:.4f}` writes it (`nan`, `inf` spelled out).
fn fixed4(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.4}")
    } else {
        pyrepr::float(v)
    }
}

/// The summary printed after repeated runs: run counts, failures, and for the key
/// metrics their mean, spread and confidence interval, then how to read CV and CI.
pub fn confidence_console(agg: &ConfidenceAggregate) -> String {
    let rule = |c: &str| c.repeat(80);
    let level = percent0(agg.confidence_level);
    let mut lines = vec![
        format!(
            "All runs complete: {}/{} successful",
            agg.num_successful(),
            agg.runs.len()
        ),
        String::new(),
        rule("="),
        "AGGREGATE STATISTICS SUMMARY".into(),
        rule("="),
        "Aggregation Type: confidence".into(),
        format!("Total Runs: {}", agg.runs.len()),
        format!("Successful Runs: {}", agg.num_successful()),
    ];
    let failed: Vec<_> = agg.failed().collect();
    if !failed.is_empty() {
        lines.push(format!("Failed Runs ({}):", failed.len()));
        lines.extend(failed.iter().map(|(l, e)| format!("  - {l}: {e}")));
    }
    lines.push(format!("Confidence Level: {level}"));
    lines.push(String::new());
    lines.push("Key Metrics:".into());
    lines.push(rule("-"));
    let stats = key_stats(agg.runs, agg.confidence_level);
    let mut shown = 0;
    for tag in KEY_METRICS {
        let Some((stat_name, k)) = KEY_STATS
            .iter()
            .find_map(|(stat, name)| Some((*name, stats.get(&format!("{tag}_{stat}"))?)))
        else {
            continue;
        };
        shown += 1;
        let (s, unit) = (k.stats, &k.unit);
        let cv = if s.cv.is_finite() {
            format!("{:.2}%", s.cv * 100.0)
        } else {
            format!("{}%", pyrepr::float(s.cv))
        };
        lines.extend([
            String::new(),
            format!("{} ({stat_name}):", pyrepr::title(&tag.replace('_', " "))),
            format!("  Mean:    {:>12} {unit}", fixed4(s.mean)),
            format!("  Std Dev: {:>12} {unit}", fixed4(s.std)),
            format!("  Min:     {:>12} {unit}", fixed4(s.min)),
            format!("  Max:     {:>12} {unit}", fixed4(s.max)),
            format!("  CV:      {cv:>12}"),
            format!(
                "  {level} CI: [{}, {}] {unit}",
                fixed4(s.ci_low),
                fixed4(s.ci_high)
            ),
        ]);
    }
    if shown == 0 {
        lines.push("No key metrics found in the aggregate".into());
    }
    lines.extend([
        String::new(),
        rule("-"),
        "Reading the coefficient of variation (CV = std / mean across runs):".into(),
        "  CV < 5%:   excellent repeatability".into(),
        "  CV 5-10%:  good repeatability".into(),
        "  CV 10-20%: fair; more runs would help".into(),
        "  CV > 20%:  high variance; look for the cause or add runs".into(),
        String::new(),
        format!("Reading the {level} confidence interval (CI):"),
        format!("  the true mean lies in this range with {level} confidence;"),
        "  a narrower interval is a more precise estimate.".into(),
        rule("="),
    ]);
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::super::tests::{failed, run};
    use super::*;

    fn three_runs() -> Vec<RunOutcome> {
        let tp = |v: f64| [("avg", v)];
        vec![
            run(
                "run_0001",
                &[
                    ("request_throughput", "requests/sec", &tp(9.9)),
                    ("request_latency", "ms", &[("avg", 100.0), ("p99", 120.0)]),
                ],
            ),
            failed("run_0002", "All 4 requests failed"),
            run(
                "run_0003",
                &[
                    ("request_throughput", "requests/sec", &tp(10.5)),
                    ("request_latency", "ms", &[("avg", 110.0)]),
                ],
            ),
            run(
                "run_0004",
                &[("request_throughput", "requests/sec", &tp(10.2))],
            ),
        ]
    }

    #[test]
    fn keys_are_metric_and_stat_over_successful_runs() {
        let runs = three_runs();
        let stats = key_stats(&runs, 0.95);
        assert_eq!(
            stats.keys().collect::<Vec<_>>(),
            [
                "request_latency_avg",
                "request_latency_p99",
                "request_throughput_avg"
            ]
        );
        let tp = &stats["request_throughput_avg"];
        assert!((tp.stats.mean - 10.2).abs() < 1e-12);
        assert_eq!(tp.unit, "requests/sec");
        // Only one run has the p99: no spread, NaN mean.
        assert!(stats["request_latency_p99"].stats.mean.is_nan());
        assert_eq!(stats["request_latency_p99"].stats.max, 120.0);
        assert_eq!(stats["request_latency_avg"].stats.mean, 105.0);
    }

    #[test]
    fn csv_has_stats_then_python_metadata_rows() {
        let runs = three_runs();
        let agg = ConfidenceAggregate {
            runs: &runs,
            confidence_level: 0.95,
            cooldown_seconds: 0.0,
            variation: Some(VariationMeta {
                label: "phases.profiling.concurrency=2".into(),
                values: vec![("phases.profiling.concurrency".into(), 2.into())],
                sweep_mode: "repeated".into(),
                model: Some("m".into()),
            }),
        };
        let csv = agg.render_csv();
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "metric,mean,std,min,max,cv,se,ci_low,ci_high,t_critical,unit"
        );
        assert_eq!(
            lines[1],
            "request_latency_avg,105.00,7.07,100.00,110.00,0.0673,5.0000,41.47,168.53,12.7062,ms"
        );
        assert_eq!(lines[2], "request_latency_p99,,,120.00,120.00,,,,,,ms");
        assert_eq!(
            lines[4..],
            [
                "",
                "Aggregation Type,confidence",
                "Total Runs,4",
                "Successful Runs,3",
                "Confidence Level,0.95",
                "Run Labels,\"['run_0001', 'run_0003', 'run_0004']\"",
                "Cooldown Seconds,0.0",
                "Variation Label,phases.profiling.concurrency=2",
                "Variation Values,{'phases.profiling.concurrency': 2}",
                "Sweep Mode,repeated",
                "Model,m",
                "",
            ]
        );
    }

    #[test]
    fn console_shows_key_metrics_and_failures() {
        let runs = three_runs();
        let agg = ConfidenceAggregate {
            runs: &runs,
            confidence_level: 0.9,
            cooldown_seconds: 1.5,
            variation: None,
        };
        let text = confidence_console(&agg);
        assert!(
            text.starts_with("All runs complete: 3/4 successful\n"),
            "{text}"
        );
        assert!(text.contains("Failed Runs (1):\n  - run_0002: All 4 requests failed\n"));
        assert!(text.contains("Confidence Level: 90%\n"));
        assert!(
            text.contains("\nRequest Throughput (Avg):\n  Mean:         10.2000 requests/sec\n"),
            "{text}"
        );
        assert!(text.contains("\nRequest Latency (Avg):\n"));
        assert!(!text.contains("Time To First Token"));
        let cv = 0.3 / 10.2 * 100.0;
        assert!(
            text.contains(&format!("  CV:      {:>12}\n", format!("{cv:.2}%"))),
            "{text}"
        );
        assert!(text.contains("  90% CI: ["));
    }

    #[test]
    fn console_spells_undefined_figures_like_python() {
        // The TTFT p99 is in one of two runs: no mean, no interval.
        let runs = vec![
            run(
                "run_0001",
                &[("time_to_first_token", "ms", &[("p99", 20.0)])],
            ),
            run("run_0002", &[("request_latency", "ms", &[("avg", 50.0)])]),
        ];
        let agg = ConfidenceAggregate {
            runs: &runs,
            confidence_level: 0.95,
            cooldown_seconds: 0.0,
            variation: None,
        };
        let text = confidence_console(&agg);
        assert!(
            text.contains("\nTime To First Token (P99):\n  Mean:             nan ms\n"),
            "{text}"
        );
        assert!(text.contains("  Min:          20.0000 ms\n"), "{text}");
        assert!(text.contains("  CV:              nan%\n"), "{text}");
        assert!(text.contains("  95% CI: [nan, nan] ms\n"), "{text}");
    }
}
