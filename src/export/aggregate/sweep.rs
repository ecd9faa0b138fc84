//! `profile_export_aiperf_sweep.json` / `.csv`: one row of statistics per sweep variation
//! (a "cell"), the best configurations and the throughput-vs-latency Pareto frontier.
//!
//! Cells with one trial carry their run's metrics keyed by metric tag; cells with several
//! trials carry `<tag>_<stat>` keys with statistics across the trials (AIPerf's two shapes).
//!
//! Deviation from AIPerf 0.13: AIPerf looks the objectives up only under the `<tag>_<stat>`
//! keys, so single-trial sweeps always get empty `best_configurations` and
//! `pareto_optimal`. Here a single-trial cell answers from its tag-keyed metrics
//! (`request_throughput` avg, `time_to_first_token` or else `request_latency` p99), so
//! every sweep names its best configurations and frontier.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::confidence::{KeyStats, key_stats};
use super::{Json, RunMetrics, RunOutcome, csv_line, csv_number, failed_runs_json, write_file};
use crate::export::names::{SWEEP_CSV_FILE, SWEEP_JSON_FILE};
use crate::export::pyrepr;

/// One sweep variation and its trials.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepCell {
    /// Dotted parameter path -> value, sorted by path.
    pub values: Vec<(String, Value)>,
    /// The variation's trials in run order, failed ones included.
    pub runs: Vec<RunOutcome>,
}

/// What the sweep aggregate is made of.
#[derive(Debug, Clone)]
pub struct SweepAggregate<'a> {
    /// The variations in the order they were first run.
    pub cells: &'a [SweepCell],
    /// `repeated` or `independent`.
    pub sweep_mode: String,
    /// `--confidence-level`.
    pub confidence_level: f64,
    /// Every failed run: (label, error).
    pub failed_runs: Vec<(String, String)>,
}

/// The objectives: maximise request throughput, minimise the first latency figure that
/// every cell has.
const THROUGHPUT: (&str, &str) = ("request_throughput", "avg");
const LATENCIES: [(&str, &str); 2] = [("time_to_first_token", "p99"), ("request_latency", "p99")];
/// Percentiles a single-trial cell copies from its run.
const PERCENTILES: [&str; 9] = ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"];

/// A cell's statistics in one of AIPerf's two shapes; `None` for a cell without a
/// successful trial.
pub(super) enum CellStats<'a> {
    /// One trial: that run's metrics, keyed by tag.
    ByTag(&'a RunMetrics),
    /// Several trials: `<tag>_<stat>` across the successful ones.
    ByKey(BTreeMap<String, KeyStats>),
}

impl<'a> CellStats<'a> {
    fn of(cell: &'a SweepCell, level: f64) -> Option<CellStats<'a>> {
        match cell.runs.as_slice() {
            [] => None,
            [one] => one.metrics().map(CellStats::ByTag),
            runs if runs.iter().all(|r| r.result.is_err()) => None,
            runs => Some(CellStats::ByKey(key_stats(runs, level))),
        }
    }

    /// A figure the objectives use, with its unit: the tag's stat in a single-trial cell,
    /// the mean of `<tag>_<stat>` across trials otherwise. Only finite figures count.
    fn figure(&self, (tag, stat): (&str, &str)) -> Option<(f64, &str)> {
        let (v, unit) = match self {
            CellStats::ByTag(m) => {
                let metric = m.get(tag)?;
                (*metric.stats.get(stat)?, metric.unit.as_str())
            }
            CellStats::ByKey(k) => {
                let entry = k.get(&format!("{tag}_{stat}"))?;
                (entry.stats.mean, entry.unit.as_str())
            }
        };
        v.is_finite().then_some((v, unit))
    }

    /// `(key, [mean, std, min, max, cv])` per metric key, for the CSV.
    fn csv_columns(&self) -> Vec<(String, [f64; 5])> {
        match self {
            CellStats::ByTag(m) => m
                .iter()
                .map(|(tag, metric)| {
                    let v = metric.stats.get("avg").copied().unwrap_or(0.0);
                    let min = metric.stats.get("min").copied().unwrap_or(v);
                    let max = metric.stats.get("max").copied().unwrap_or(v);
                    (tag.clone(), [v, 0.0, min, max, 0.0])
                })
                .collect(),
            CellStats::ByKey(k) => k
                .iter()
                .map(|(key, e)| {
                    let s = e.stats;
                    (key.clone(), [s.mean, s.std, s.min, s.max, s.cv])
                })
                .collect(),
        }
    }

    fn to_json(&self) -> Json {
        let mut out = Json::object();
        match self {
            CellStats::ByTag(m) => {
                for (tag, metric) in m.iter() {
                    let get = |k: &str| metric.stats.get(k).copied();
                    let v = get("avg").unwrap_or(0.0);
                    let mut entry = Json::object()
                        .with("mean", v)
                        .with("avg", v)
                        .with("std", 0.0)
                        .with("min", get("min").unwrap_or(v))
                        .with("max", get("max").unwrap_or(v))
                        .with("cv", 0.0)
                        .with("ci_low", v)
                        .with("ci_high", v)
                        .with("unit", metric.unit.as_str());
                    for key in PERCENTILES {
                        if let Some(p) = get(key) {
                            entry.put(key, p);
                        }
                    }
                    if let Some(count) = get("count") {
                        // A count is whole; write it as the integer the run wrote.
                        entry.put("count", Value::from(count as u64));
                    }
                    if let Some(sum) = get("sum") {
                        entry.put("sum", sum);
                    }
                    out.put(tag, entry);
                }
            }
            CellStats::ByKey(k) => {
                for (key, e) in k {
                    out.put(key, e.json(false));
                }
            }
        }
        out
    }
}

impl SweepCell {
    /// Failed and finished requests per successful trial (means over those trials; 0 and 0
    /// when none finished): `error_request_count` and that plus `request_count`.
    pub(super) fn failed_requests(&self) -> (f64, f64) {
        let ok: Vec<&RunOutcome> = self.runs.iter().filter(|r| r.result.is_ok()).collect();
        let n = ok.len().max(1) as f64;
        let sum = |tag: &str| -> f64 { ok.iter().map(|r| r.stat(tag, "avg").unwrap_or(0.0)).sum() };
        let failed = sum("error_request_count");
        (failed / n, (failed + sum("request_count")) / n)
    }

    /// `[FAILED REQUESTS: 3 of 12]` when the cell's trials lost requests (means over its
    /// trials), so no such variation is named best without saying so.
    pub(super) fn failed_mark(&self) -> Option<String> {
        let (failed, finished) = self.failed_requests();
        (failed > 0.0).then(|| {
            let count = |v: f64| {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.1}")
                }
            };
            format!(
                "[FAILED REQUESTS: {} of {}]",
                count(failed),
                count(finished)
            )
        })
    }
}

/// A statistic of the cells: (metric tag, stat).
type StatKey = (&'static str, &'static str);
/// One cell's figure of a statistic: (cell, value, unit).
type Figure = (usize, f64, String);

/// The best cell for one objective.
pub(super) struct Best {
    pub cell: usize,
    pub value: f64,
    pub unit: String,
    /// The statistic ranked (`time_to_first_token_p99`): the title alone does not say.
    pub ranked_by: StatKey,
}

/// Everything the sweep files and tables show, worked out once.
pub(super) struct Analysis<'a> {
    /// Parameter display names in first-seen order: the leaf of the dotted path unless
    /// two parameters share a leaf (then the whole path), with the path it stands for.
    pub params: Vec<(String, String)>,
    /// Each cell with its statistics (`None`: no successful trial).
    pub cells: Vec<(&'a SweepCell, Option<CellStats<'a>>)>,
    pub best_throughput: Option<Best>,
    pub best_latency: Option<Best>,
    /// Indices of the Pareto-optimal cells, sorted by their parameters.
    pub pareto: Vec<usize>,
}

impl<'a> Analysis<'a> {
    pub fn of(agg: &SweepAggregate<'a>) -> Analysis<'a> {
        let mut paths: Vec<&str> = Vec::new();
        for cell in agg.cells {
            for (path, _) in &cell.values {
                if !paths.contains(&path.as_str()) {
                    paths.push(path);
                }
            }
        }
        let leaf = |p: &str| p.rsplit('.').next().unwrap_or(p).to_string();
        let params = paths
            .iter()
            .map(|p| {
                let shared = paths.iter().filter(|q| leaf(q) == leaf(p)).count() > 1;
                let name = if shared { p.to_string() } else { leaf(p) };
                (name, p.to_string())
            })
            .collect();
        let cells: Vec<_> = agg
            .cells
            .iter()
            .map(|c| (c, CellStats::of(c, agg.confidence_level)))
            .collect();
        let mut analysis = Analysis {
            params,
            cells,
            best_throughput: None,
            best_latency: None,
            pareto: Vec::new(),
        };
        analysis.rank();
        analysis
    }

    /// Cells that have statistics.
    pub fn with_stats(&self) -> impl Iterator<Item = (usize, &CellStats<'a>)> {
        self.cells
            .iter()
            .enumerate()
            .filter_map(|(i, (_, s))| Some((i, s.as_ref()?)))
    }

    /// An objective's figure in every cell with statistics, or `None` if one lacks it.
    fn figures(&self, key: StatKey) -> Option<Vec<Figure>> {
        let all: Option<Vec<_>> = self
            .with_stats()
            .map(|(i, s)| s.figure(key).map(|(v, u)| (i, v, u.to_string())))
            .collect();
        all.filter(|v| !v.is_empty())
    }

    fn rank(&mut self) {
        let throughput = self.figures(THROUGHPUT).map(|f| (THROUGHPUT, f));
        let latency = LATENCIES
            .iter()
            .find_map(|k| self.figures(*k).map(|f| (*k, f)));
        let pick = |(key, figures): &(StatKey, Vec<Figure>), better: Ordering| {
            // The first of equals wins, as Python's max()/min() pick.
            let mut best = &figures[0];
            for f in &figures[1..] {
                if f.1.total_cmp(&best.1) == better {
                    best = f;
                }
            }
            Best {
                cell: best.0,
                value: best.1,
                unit: best.2.clone(),
                ranked_by: *key,
            }
        };
        self.best_throughput = throughput.as_ref().map(|f| pick(f, Ordering::Greater));
        self.best_latency = latency.as_ref().map(|f| pick(f, Ordering::Less));
        if let (Some((_, tp)), Some((_, lat))) = (&throughput, &latency) {
            let points: Vec<(usize, f64, f64)> =
                tp.iter().zip(lat).map(|(t, l)| (t.0, t.1, l.1)).collect();
            let dominates = |a: &(usize, f64, f64), b: &(usize, f64, f64)| {
                a.1 >= b.1 && a.2 <= b.2 && (a.1 > b.1 || a.2 < b.2)
            };
            let mut pareto: Vec<usize> = points
                .iter()
                .filter(|p| !points.iter().any(|q| q.0 != p.0 && dominates(q, p)))
                .map(|p| p.0)
                .collect();
            pareto.sort_by(|a, b| self.sort_key(*a).cmp_values(&self.sort_key(*b)));
            self.pareto = pareto;
        }
    }

    /// A cell's parameters as (display name, value), sorted by name.
    fn sort_key(&self, cell: usize) -> ParamKey {
        let mut pairs = self.parameters(cell);
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        ParamKey(pairs)
    }

    /// A cell's parameters under their display names, in the cell's path order.
    pub fn parameters(&self, cell: usize) -> Vec<(String, Value)> {
        let (c, _) = &self.cells[cell];
        c.values
            .iter()
            .map(|(path, v)| (self.display_name(path), v.clone()))
            .collect()
    }

    pub fn display_name(&self, path: &str) -> String {
        self.params
            .iter()
            .find(|(_, p)| p == path)
            .map_or_else(|| path.to_string(), |(n, _)| n.clone())
    }

    /// A cell's value of a parameter (by display name), as Python's `str()` writes it.
    fn param_text(&self, cell: usize, name: &str) -> String {
        self.parameters(cell)
            .iter()
            .find(|(n, _)| n == name)
            .map_or_else(String::new, |(_, v)| pyrepr::str(v))
    }
}

/// Sorted (name, value) pairs, compared like Python tuples.
struct ParamKey(Vec<(String, Value)>);

impl ParamKey {
    fn cmp_values(&self, other: &ParamKey) -> Ordering {
        for (a, b) in self.0.iter().zip(&other.0) {
            let by = a.0.cmp(&b.0).then_with(|| compare_values(&a.1, &b.1));
            if by != Ordering::Equal {
                return by;
            }
        }
        self.0.len().cmp(&other.0.len())
    }
}

/// Numbers by value, text by text; numbers sort before text.
fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => pyrepr::str(a).cmp(&pyrepr::str(b)),
    }
}

fn parameters_json(pairs: &[(String, Value)]) -> Json {
    super::pairs_json(pairs)
}

impl SweepAggregate<'_> {
    fn num_runs(&self) -> usize {
        self.cells.iter().map(|c| c.runs.len()).sum()
    }

    fn num_successful(&self) -> usize {
        let ok = |c: &SweepCell| c.runs.iter().filter(|r| r.result.is_ok()).count();
        self.cells.iter().map(ok).sum()
    }

    /// `sweep_parameters`: each parameter's distinct values in first-seen order.
    fn parameter_values(&self, a: &Analysis) -> Vec<(String, Vec<Value>)> {
        a.params
            .iter()
            .map(|(name, path)| {
                let mut values: Vec<Value> = Vec::new();
                for cell in self.cells {
                    for (p, v) in &cell.values {
                        if p == path && !values.contains(v) {
                            values.push(v.clone());
                        }
                    }
                }
                (name.clone(), values)
            })
            .collect()
    }

    /// AIPerf multiplies the distinct value counts (so a zip sweep over two parameters of
    /// two values each reports 4).
    fn num_combinations(&self, a: &Analysis) -> usize {
        self.parameter_values(a)
            .iter()
            .map(|(_, v)| v.len())
            .product()
    }

    fn render_json(&self, a: &Analysis) -> String {
        let sweep_parameters = Json::Array(
            self.parameter_values(a)
                .into_iter()
                .map(|(name, values)| {
                    Json::object()
                        .with("name", name.as_str())
                        .with("values", Value::Array(values))
                })
                .collect(),
        );
        let metadata = Json::object()
            .with("sweep_parameters", sweep_parameters)
            .with("num_combinations", self.num_combinations(a))
            .with("sweep_mode", self.sweep_mode.as_str())
            .with("confidence_level", self.confidence_level)
            .with(
                "num_trials_per_value",
                self.cells.iter().map(|c| c.runs.len()).max().unwrap_or(0),
            )
            .with("aggregation_type", "sweep");
        let per_combination = Json::Array(
            a.with_stats()
                .map(|(i, stats)| {
                    Json::object()
                        .with("parameters", parameters_json(&a.parameters(i)))
                        .with("metrics", stats.to_json())
                })
                .collect(),
        );
        let mut best = Json::object();
        for (key, b) in [
            ("best_throughput", &a.best_throughput),
            ("best_latency_p99", &a.best_latency),
        ] {
            if let Some(b) = b {
                let mut entry = Json::object()
                    .with("parameters", parameters_json(&a.parameters(b.cell)))
                    .with("metric", b.value)
                    .with("unit", b.unit.as_str());
                // Not in AIPerf's schema: a best variation that lost requests says so.
                let (failed, _) = a.cells[b.cell].0.failed_requests();
                if failed > 0.0 {
                    entry.put("error_request_count", failed);
                }
                best.put(key, entry);
            }
        }
        let pareto = Json::Array(
            a.pareto
                .iter()
                .map(|i| parameters_json(&a.parameters(*i)))
                .collect(),
        );
        let failed = self
            .failed_runs
            .iter()
            .map(|(l, e)| (l.as_str(), e.as_str()));
        Json::object()
            .with("aggregation_type", "sweep")
            .with("num_profile_runs", self.num_runs())
            .with("num_successful_runs", self.num_successful())
            .with("failed_runs", failed_runs_json(failed))
            .with("metadata", metadata)
            .with("per_combination_metrics", per_combination)
            .with("best_configurations", best)
            .with("pareto_optimal", pareto)
            .render()
    }

    fn render_csv(&self, a: &Analysis) -> String {
        let names: Vec<String> = a.params.iter().map(|(n, _)| n.clone()).collect();
        let mut out = String::new();

        // 1. One row per cell: parameters, then mean/std/min/max/cv of every metric key.
        let columns: Vec<(usize, BTreeMap<String, [f64; 5]>)> = a
            .with_stats()
            .map(|(i, s)| (i, s.csv_columns().into_iter().collect()))
            .collect();
        let keys: BTreeSet<&String> = columns.iter().flat_map(|(_, c)| c.keys()).collect();
        let mut header = names.clone();
        for key in &keys {
            for stat in ["mean", "std", "min", "max", "cv"] {
                header.push(format!("{key}_{stat}"));
            }
        }
        csv_line(&mut out, &header);
        for (i, cols) in &columns {
            let mut row: Vec<String> = names.iter().map(|n| a.param_text(*i, n)).collect();
            for key in &keys {
                match cols.get(*key) {
                    Some(v) => {
                        let finite = |x: f64| x.is_finite().then_some(x);
                        row.extend(v[..4].iter().map(|x| csv_number(finite(*x), 2)));
                        row.push(csv_number(finite(v[4]), 4));
                    }
                    None => row.extend((0..5).map(|_| String::new())),
                }
            }
            csv_line(&mut out, &row);
        }

        // 2. Best configurations.
        out.push_str("\r\n");
        csv_line(&mut out, &["Best Configurations".into()]);
        let best = [
            ("Best Throughput", &a.best_throughput),
            ("Best Latency P99", &a.best_latency),
        ];
        if best.iter().any(|(_, b)| b.is_some()) {
            let mut header = vec!["Configuration".to_string()];
            header.extend(names.iter().cloned());
            header.extend(["Metric".into(), "Unit".into()]);
            csv_line(&mut out, &header);
            for (title, b) in best {
                if let Some(b) = b {
                    let mut row = vec![title.to_string()];
                    row.extend(names.iter().map(|n| a.param_text(b.cell, n)));
                    row.extend([csv_number(Some(b.value), 2), b.unit.clone()]);
                    csv_line(&mut out, &row);
                }
            }
        }

        // 3. Pareto-optimal points.
        out.push_str("\r\n");
        csv_line(&mut out, &["Pareto Optimal Points".into()]);
        if a.pareto.is_empty() {
            csv_line(&mut out, &["None".into()]);
        } else {
            csv_line(&mut out, &names);
            for i in &a.pareto {
                let row: Vec<String> = names.iter().map(|n| a.param_text(*i, n)).collect();
                csv_line(&mut out, &row);
            }
        }

        // 4. Metadata.
        out.push_str("\r\n");
        csv_line(&mut out, &["Metadata".into()]);
        let rows = [
            ("Field", "Value".to_string()),
            ("Aggregation Type", "sweep".into()),
            ("Sweep Parameters", names.join(", ")),
            (
                "Number of Combinations",
                self.num_combinations(a).to_string(),
            ),
            ("Number of Profile Runs", self.num_runs().to_string()),
            (
                "Number of Successful Runs",
                self.num_successful().to_string(),
            ),
        ];
        for (field, value) in rows {
            csv_line(&mut out, &[field.to_string(), value]);
        }
        out
    }
}

/// Writes `profile_export_aiperf_sweep.json` and `.csv` into `dir`. Refused (an
/// `InvalidInput` error, nothing written) when no cell has a successful run.
pub fn write_sweep_aggregate(dir: &Path, agg: &SweepAggregate) -> std::io::Result<()> {
    let analysis = Analysis::of(agg);
    if analysis.with_stats().next().is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no sweep variation has a successful run: there is nothing to aggregate",
        ));
    }
    write_file(dir, SWEEP_JSON_FILE, &agg.render_json(&analysis))?;
    write_file(dir, SWEEP_CSV_FILE, &agg.render_csv(&analysis))
}

/// The lines printed after a sweep: the best configurations and the Pareto-optimal
/// points (empty when there are none).
pub fn best_configurations_console(agg: &SweepAggregate) -> String {
    let a = Analysis::of(agg);
    let params = |cell: usize| {
        let parts: Vec<String> = a
            .parameters(cell)
            .iter()
            .map(|(k, v)| format!("{k}={}", pyrepr::str(v)))
            .collect();
        parts.join(", ")
    };
    let mut lines = Vec::new();
    if a.best_throughput.is_some() || a.best_latency.is_some() {
        lines.push(String::new());
        lines.push("Best Configurations:".to_string());
        // The latency ranked is TTFT p99 when every cell has one, else request latency p99:
        // its line says which.
        for (title, best, says_which) in [
            ("Best throughput", &a.best_throughput, false),
            ("Best latency (p99)", &a.best_latency, true),
        ] {
            if let Some(b) = best {
                let mark = a.cells[b.cell]
                    .0
                    .failed_mark()
                    .map_or_else(String::new, |m| format!(" {m}"));
                let which = match says_which {
                    true => format!(", {} {}", b.ranked_by.0, b.ranked_by.1),
                    false => String::new(),
                };
                lines.push(format!(
                    "  {title}: {} ({:.2} {}{which}){mark}",
                    params(b.cell),
                    b.value,
                    b.unit,
                ));
            }
        }
    }
    if !a.pareto.is_empty() {
        let points: Vec<String> = a
            .pareto
            .iter()
            .map(|i| pyrepr::dict(&a.parameters(*i)))
            .collect();
        lines.push(format!("  Pareto optimal points: [{}]", points.join(", ")));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{failed, run};
    use super::*;
    use serde_json::json;

    fn cell(c: i64, runs: Vec<RunOutcome>) -> SweepCell {
        SweepCell {
            values: vec![("phases.profiling.concurrency".into(), json!(c))],
            runs,
        }
    }

    /// A run with the given throughput and TTFT p99.
    fn point(label: &str, tp: f64, ttft_p99: f64) -> RunOutcome {
        run(
            label,
            &[
                ("request_throughput", "requests/sec", &[("avg", tp)]),
                (
                    "time_to_first_token",
                    "ms",
                    &[("avg", ttft_p99 / 2.0), ("p99", ttft_p99), ("count", 10.0)],
                ),
            ],
        )
    }

    #[test]
    fn a_best_variation_that_lost_requests_says_so() {
        let lossy = |label: &str, tp: f64, ttft: f64, ok: f64, failed: f64| {
            run(
                label,
                &[
                    ("request_throughput", "requests/sec", &[("avg", tp)]),
                    ("time_to_first_token", "ms", &[("p99", ttft)]),
                    ("request_count", "requests", &[("avg", ok)]),
                    ("error_request_count", "requests", &[("avg", failed)]),
                ],
            )
        };
        let cells = [
            cell(1, vec![lossy("a", 10.0, 20.0, 12.0, 0.0)]),
            cell(4, vec![lossy("b", 18.0, 30.0, 9.0, 3.0)]),
        ];
        let agg = SweepAggregate {
            cells: &cells,
            sweep_mode: "repeated".into(),
            confidence_level: 0.95,
            failed_runs: Vec::new(),
        };
        let text = best_configurations_console(&agg);
        assert!(
            text.contains(
                "Best throughput: concurrency=4 (18.00 requests/sec) [FAILED REQUESTS: 3 of 12]\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "Best latency (p99): concurrency=1 (20.00 ms, time_to_first_token p99)\n"
            ),
            "{text}"
        );
        let v: Value = serde_json::from_str(&agg.render_json(&Analysis::of(&agg))).unwrap();
        let best = &v["best_configurations"];
        assert_eq!(best["best_throughput"]["error_request_count"], 3.0);
        assert!(
            best["best_latency_p99"]
                .get("error_request_count")
                .is_none()
        );
    }

    #[test]
    fn single_trial_cells_rank_from_their_tag_keyed_metrics() {
        let cells = [
            cell(1, vec![point("a", 10.0, 20.0)]),
            cell(2, vec![point("b", 18.0, 30.0)]),
            cell(4, vec![point("c", 17.0, 45.0)]), // dominated by c=2
            cell(8, vec![failed("d", "No requests completed")]),
        ];
        let agg = SweepAggregate {
            cells: &cells,
            sweep_mode: "repeated".into(),
            confidence_level: 0.95,
            failed_runs: vec![("d".into(), "No requests completed".into())],
        };
        let a = Analysis::of(&agg);
        assert_eq!(
            a.params,
            [("concurrency".into(), "phases.profiling.concurrency".into())]
        );
        let best = a.best_throughput.as_ref().unwrap();
        assert_eq!(
            (best.cell, best.value, best.unit.as_str()),
            (1, 18.0, "requests/sec")
        );
        let lat = a.best_latency.as_ref().unwrap();
        assert_eq!((lat.cell, lat.value, lat.unit.as_str()), (0, 20.0, "ms"));
        assert_eq!(a.pareto, [0, 1]);

        let text = best_configurations_console(&agg);
        assert_eq!(
            text,
            "\nBest Configurations:\n  Best throughput: concurrency=2 (18.00 requests/sec)\n  \
             Best latency (p99): concurrency=1 (20.00 ms, time_to_first_token p99)\n  \
             Pareto optimal points: [{'concurrency': 1}, {'concurrency': 2}]\n"
        );

        let v: Value = serde_json::from_str(&agg.render_json(&a)).unwrap();
        assert_eq!(v["num_profile_runs"], 4);
        assert_eq!(v["num_successful_runs"], 3);
        assert_eq!(v["metadata"]["num_combinations"], 4);
        assert_eq!(v["metadata"]["num_trials_per_value"], 1);
        // The failed cell has no row.
        assert_eq!(v["per_combination_metrics"].as_array().unwrap().len(), 3);
        let ttft = &v["per_combination_metrics"][0]["metrics"]["time_to_first_token"];
        assert_eq!(
            ttft,
            &json!({"mean": 10.0, "avg": 10.0, "std": 0.0, "min": 10.0, "max": 10.0,
                    "cv": 0.0, "ci_low": 10.0, "ci_high": 10.0, "unit": "ms",
                    "p99": 20.0, "count": 10})
        );
        assert_eq!(
            v["best_configurations"]["best_latency_p99"],
            json!({"parameters": {"concurrency": 1}, "metric": 20.0, "unit": "ms"})
        );
        assert_eq!(
            v["pareto_optimal"],
            json!([{"concurrency": 1}, {"concurrency": 2}])
        );
    }

    #[test]
    fn multi_trial_cells_rank_by_the_mean_across_trials_and_fall_back_to_latency() {
        let lat = |label: &str, tp: f64, p99: f64| {
            run(
                label,
                &[
                    ("request_throughput", "requests/sec", &[("avg", tp)]),
                    ("request_latency", "ms", &[("p99", p99)]),
                ],
            )
        };
        let cells = [
            cell(2, vec![lat("t1", 4.0, 40.0), lat("t2", 4.2, 42.0)]),
            cell(
                4,
                vec![
                    lat("t1", 8.0, 80.0),
                    failed("t2", "x"),
                    lat("t3", 8.4, 82.0),
                ],
            ),
        ];
        let agg = SweepAggregate {
            cells: &cells,
            sweep_mode: "independent".into(),
            confidence_level: 0.95,
            failed_runs: vec![("t2".into(), "x".into())],
        };
        let a = Analysis::of(&agg);
        assert_eq!(a.best_throughput.as_ref().unwrap().cell, 1);
        assert!((a.best_throughput.as_ref().unwrap().value - 8.2).abs() < 1e-12);
        assert_eq!(a.best_latency.as_ref().unwrap().cell, 0);
        assert_eq!(a.pareto, [0, 1]);
        let csv = agg.render_csv(&a);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "concurrency,request_latency_p99_mean,request_latency_p99_std,request_latency_p99_min,\
             request_latency_p99_max,request_latency_p99_cv,request_throughput_avg_mean,\
             request_throughput_avg_std,request_throughput_avg_min,request_throughput_avg_max,\
             request_throughput_avg_cv"
        );
        assert_eq!(
            lines[1],
            "2,41.00,1.41,40.00,42.00,0.0345,4.10,0.14,4.00,4.20,0.0345"
        );
        assert_eq!(
            lines[3..],
            [
                "",
                "Best Configurations",
                "Configuration,concurrency,Metric,Unit",
                "Best Throughput,4,8.20,requests/sec",
                "Best Latency P99,2,41.00,ms",
                "",
                "Pareto Optimal Points",
                "concurrency",
                "2",
                "4",
                "",
                "Metadata",
                "Field,Value",
                "Aggregation Type,sweep",
                "Sweep Parameters,concurrency",
                "Number of Combinations,2",
                "Number of Profile Runs,5",
                "Number of Successful Runs,4",
                "",
            ]
        );
    }

    #[test]
    fn shared_leaf_names_use_the_full_path_and_zip_counts_the_product() {
        let zip = |isl: i64, osl: i64, tp: f64| SweepCell {
            values: vec![
                ("datasets.main.prompts.isl.mean".into(), json!(isl)),
                ("datasets.main.prompts.osl.mean".into(), json!(osl)),
                ("phases.profiling.rate".into(), json!(5.0)),
            ],
            runs: vec![run(
                "r",
                &[("request_throughput", "requests/sec", &[("avg", tp)])],
            )],
        };
        let cells = [zip(128, 64, 1.0), zip(256, 32, 2.0)];
        let agg = SweepAggregate {
            cells: &cells,
            sweep_mode: "repeated".into(),
            confidence_level: 0.95,
            failed_runs: vec![],
        };
        let a = Analysis::of(&agg);
        let names: Vec<&str> = a.params.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "datasets.main.prompts.isl.mean",
                "datasets.main.prompts.osl.mean",
                "rate"
            ]
        );
        assert_eq!(agg.num_combinations(&a), 4);
        // No latency anywhere: a best throughput, no best latency, no frontier.
        assert!(a.best_throughput.is_some() && a.best_latency.is_none());
        assert!(a.pareto.is_empty());
        let csv = agg.render_csv(&a);
        assert!(
            csv.contains("\r\nPareto Optimal Points\r\nNone\r\n"),
            "{csv}"
        );
        assert!(
            csv.contains("\r\n256,32,5.0,2.00,0.00,2.00,2.00,0.0000\r\n"),
            "{csv}"
        );
        assert_eq!(
            best_configurations_console(&agg),
            "\nBest Configurations:\n  Best throughput: datasets.main.prompts.isl.mean=256, \
             datasets.main.prompts.osl.mean=32, rate=5.0 (2.00 requests/sec)\n"
        );
    }

    #[test]
    fn nothing_is_written_without_a_successful_cell() {
        let cells = [cell(1, vec![failed("a", "boom")])];
        let agg = SweepAggregate {
            cells: &cells,
            sweep_mode: "repeated".into(),
            confidence_level: 0.95,
            failed_runs: vec![("a".into(), "boom".into())],
        };
        let dir = tempfile::tempdir().unwrap();
        let err = write_sweep_aggregate(dir.path(), &agg).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(best_configurations_console(&agg), "");
    }
}
