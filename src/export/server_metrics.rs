//! The server-metrics files (`server_metrics_export.json`/`.csv`/`.jsonl`, AIPerf's schema
//! 1.1 layout) and the console's `Server Metrics` table with the client-vs-server fidelity
//! lines.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::console::format_number;
use super::table::{Justify, Table};
use crate::clock::Clock;
use crate::metrics::server_metrics::{
    GAUGE_PERCENTILES, HISTOGRAM_PERCENTILES, MetricSummary, SeriesStats, SeriesSummary, Window,
};
use crate::metrics::server_series::ScrapeTimes;
use crate::metrics::{MetricValue, MetricsSummary};
use crate::scrape::{EndpointLog, Kind, ScrapeEvent, ScrapeSink, Value as Sample};

/// `--server-metrics-formats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerMetricsFormats {
    pub json: bool,
    pub csv: bool,
    pub jsonl: bool,
}

impl Default for ServerMetricsFormats {
    fn default() -> Self {
        ServerMetricsFormats {
            json: true,
            csv: true,
            jsonl: false,
        }
    }
}

/// What the files are made of.
pub struct ServerMetricsRun<'a> {
    pub benchmark_id: &'a str,
    pub clock: Clock,
    pub configured: &'a [String],
    /// Each endpoint scraped: how its scraping went and when its scrapes came.
    pub endpoints: Vec<(&'a EndpointLog, &'a ScrapeTimes)>,
    /// The spooled lines of each endpoint's changed scrapes (`JsonlSpool::close`), for
    /// `--server-metrics-formats jsonl`.
    pub jsonl: Vec<PathBuf>,
    pub profiling_window: Window,
    pub warmup_window: Option<Window>,
    pub profiling: &'a [MetricSummary],
    pub warmup: Option<&'a [MetricSummary]>,
    pub input_config: Value,
}

/// The server-metrics files `--server-metrics-formats` asks for, as `<base>.json` and so on.
pub struct ServerMetricsFiles<'a> {
    pub base: &'a str,
    pub formats: ServerMetricsFormats,
    pub run: ServerMetricsRun<'a>,
}

impl super::Exporter for ServerMetricsFiles<'_> {
    fn what(&self) -> &'static str {
        "the server metrics files"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<super::Written>> {
        let paths = write_server_metrics(dir, self.base, self.formats, &self.run)?;
        let listed = paths.into_iter();
        Ok(listed
            .map(|p| super::Written::listed("Server Metrics Export", p))
            .collect())
    }
}

/// Writes the asked formats as `<base>.json` and so on; returns the paths written.
pub(super) fn write_server_metrics(
    dir: &Path,
    base: &str,
    formats: ServerMetricsFormats,
    run: &ServerMetricsRun,
) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if formats.json {
        let p = dir.join(format!("{base}.json"));
        let text = serde_json::to_string_pretty(&to_json(run)).expect("JSON of plain values");
        super::write_atomically(&p, &text)?;
        out.push(p);
    }
    if formats.csv {
        let p = dir.join(format!("{base}.csv"));
        super::write_atomically(&p, &to_csv(run))?;
        out.push(p);
    }
    if formats.jsonl {
        let p = dir.join(format!("{base}.jsonl"));
        write_jsonl(&p, run)?;
        out.push(p);
    }
    Ok(out)
}

fn to_json(run: &ServerMetricsRun) -> Value {
    let wall = |ns: u64| run.clock.wall_ns(ns);
    let mut endpoint_info = Map::new();
    for (log, times) in &run.endpoints {
        let (Some(first), Some(last)) = (times.first_ns, times.last_ns) else {
            continue;
        };
        let updates = &times.updates;
        let intervals: Vec<f64> = updates
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64 / 1e6)
            .collect();
        let mut sorted = intervals.clone();
        sorted.sort_by(f64::total_cmp);
        let avg_latency = times.fetch_ns_sum as f64 / times.scrapes as f64 / 1e6;
        endpoint_info.insert(
            log.url.clone(),
            json!({
                "total_fetches": times.scrapes + log.failures,
                "first_fetch_ns": wall(first),
                "last_fetch_ns": wall(last),
                "avg_fetch_latency_ms": avg_latency,
                "unique_updates": updates.len(),
                "first_update_ns": updates.first().map(|t| wall(*t)),
                "last_update_ns": updates.last().map(|t| wall(*t)),
                "duration_seconds": (last - first) as f64 / 1e9,
                "avg_update_interval_ms": (!intervals.is_empty())
                    .then(|| intervals.iter().sum::<f64>() / intervals.len() as f64),
                "median_update_interval_ms": (!sorted.is_empty())
                    .then(|| crate::stats::percentile_sorted(&sorted, 50.0)),
            }),
        );
    }
    let successful: Vec<&String> = run
        .endpoints
        .iter()
        .filter(|(_, t)| t.scrapes > 0)
        .map(|(l, _)| &l.url)
        .collect();
    let window = |w: Window| json!({"start_ns": wall(w.start_ns), "end_ns": wall(w.end_ns)});
    let mut phases = Map::new();
    phases.insert("profiling".into(), window(run.profiling_window));
    if let Some(w) = run.warmup_window {
        phases.insert("warmup".into(), window(w));
    }
    let mut doc = json!({
        "schema_version": "1.1",
        "aiperf_version": "0.13.0",
        "benchmark_id": run.benchmark_id,
        "summary": {
            "endpoints_configured": run.configured,
            "endpoints_successful": successful,
            "start_time": crate::clock::iso8601_utc(wall(run.profiling_window.start_ns)),
            "end_time": crate::clock::iso8601_utc(wall(run.profiling_window.end_ns)),
            "endpoint_info": endpoint_info,
            "phase_time_ranges": phases,
        },
        "metrics_phase": "profiling",
        "metrics": metrics_json(run.profiling),
    });
    if let Some(w) = run.warmup {
        doc["warmup_metrics"] = metrics_json(w);
    }
    doc["input_config"] = run.input_config.clone();
    doc
}

fn metrics_json(metrics: &[MetricSummary]) -> Value {
    let mut out = Map::new();
    for m in metrics {
        let series: Vec<Value> = m
            .series
            .iter()
            .map(|s| {
                let mut o = Map::new();
                o.insert("endpoint_url".into(), json!(s.endpoint_url));
                if !s.labels.is_empty() {
                    o.insert("labels".into(), json!(s.labels));
                }
                o.insert("stats".into(), stats_json(&s.stats));
                // Beside the stats, not in them (AIPerf's series layout).
                if let SeriesStats::Histogram {
                    buckets: Some(b), ..
                } = &s.stats
                {
                    let m: Map<String, Value> = b
                        .iter()
                        .map(|(le, c)| (le.clone(), json!(*c as u64)))
                        .collect();
                    o.insert("buckets".into(), Value::Object(m));
                }
                Value::Object(o)
            })
            .collect();
        let mut entry = json!({"type": m.kind.as_str(), "description": m.help});
        if let Some(u) = m.unit {
            entry["unit"] = u.into();
        }
        entry["series"] = series.into();
        out.insert(m.name.clone(), entry);
    }
    Value::Object(out)
}

fn stats_json(s: &SeriesStats) -> Value {
    let mut o = Map::new();
    match s {
        SeriesStats::Gauge {
            avg,
            min,
            max,
            std,
            percentiles,
        } => {
            for (k, v) in [("avg", avg), ("min", min), ("max", max), ("std", std)] {
                o.insert(k.into(), json!(v));
            }
            for ((k, _), v) in GAUGE_PERCENTILES.iter().zip(percentiles) {
                o.insert((*k).into(), json!(v));
            }
        }
        SeriesStats::Counter { total, rate } => {
            o.insert("total".into(), json!(total));
            o.insert("rate".into(), json!(rate));
        }
        SeriesStats::Histogram {
            count,
            sum,
            avg,
            count_rate,
            sum_rate,
            buckets: _,
            estimates,
        } => {
            o.insert("count".into(), json!(*count as u64));
            if *count > 0.0 {
                o.insert("sum".into(), json!(sum));
                o.insert("avg".into(), json!(avg));
                o.insert("count_rate".into(), json!(count_rate));
                o.insert("sum_rate".into(), json!(sum_rate));
                for ((k, _), v) in HISTOGRAM_PERCENTILES.iter().zip(estimates) {
                    o.insert((*k).into(), json!(v));
                }
            }
        }
    }
    Value::Object(o)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One CSV line of `fields`, each quoted when it must be.
fn csv_row(out: &mut String, fields: &[impl AsRef<str>]) {
    let line: Vec<String> = fields.iter().map(|f| csv_field(f.as_ref())).collect();
    let _ = writeln!(out, "{}", line.join(","));
}

/// A figure in the CSV: counts whole, every other value to 4 decimals (AIPerf's format).
fn num(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
        Value::Number(n) => format!("{:.4}", n.as_f64().unwrap_or(f64::NAN)),
        _ => String::new(),
    }
}

/// The label columns of a CSV section: labels that occur together form a family
/// (families in the order of their first label); within one, the labels of a single
/// series first, then those several series share (AIPerf's order, which keeps related
/// columns side by side).
fn label_order(label_sets: &[Vec<&str>]) -> Vec<String> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    fn find<'a>(parent: &mut BTreeMap<&'a str, &'a str>, x: &'a str) -> &'a str {
        let p = *parent.entry(x).or_insert(x);
        if p == x {
            return x;
        }
        let root = find(parent, p);
        parent.insert(x, root);
        root
    }
    for set in label_sets {
        for pair in set.windows(2) {
            let (a, b) = (find(&mut parent, pair[0]), find(&mut parent, pair[1]));
            parent.insert(b, a);
        }
        if let [only] = set.as_slice() {
            find(&mut parent, only);
        }
    }
    let labels: Vec<&str> = parent.keys().copied().collect();
    let mut families: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in &labels {
        families.entry(find(&mut parent, l)).or_default().push(l);
    }
    let shared = |l: &str| label_sets.iter().filter(|s| s.contains(&l)).count() > 1;
    let mut families: Vec<Vec<&str>> = families.into_values().collect();
    families.sort_by_key(|f| f.iter().min().copied());
    let mut out = Vec::new();
    for family in families {
        out.extend(family.iter().filter(|l| !shared(l)).map(|l| l.to_string()));
        out.extend(family.iter().filter(|l| shared(l)).map(|l| l.to_string()));
    }
    out
}

fn endpoint_short(url: &str) -> &str {
    let u = url.split("://").nth(1).unwrap_or(url);
    u.strip_suffix("/metrics").unwrap_or(u)
}

fn to_csv(run: &ServerMetricsRun) -> String {
    let mut out = format!(
        "# AIPerf Server Metrics Export (CSV)\n# aiperf_version: 0.13.0\n# schema_version: 1.0\n# benchmark_id: {}\n# Note: Same benchmark_id and version appear in JSON and Parquet exports\n#\n",
        run.benchmark_id
    );
    let sections: [(&[Kind], Vec<&str>); 4] = [
        (
            &[Kind::Gauge],
            ["avg", "min", "max", "std"]
                .into_iter()
                .chain(GAUGE_PERCENTILES.iter().map(|(k, _)| *k))
                .collect(),
        ),
        (
            &[Kind::Counter],
            vec![
                "total", "rate", "rate_avg", "rate_min", "rate_max", "rate_std",
            ],
        ),
        (
            &[Kind::Histogram],
            ["count", "count_rate", "sum", "sum_rate", "avg"]
                .into_iter()
                .chain(HISTOGRAM_PERCENTILES.iter().map(|(k, _)| *k))
                .collect(),
        ),
        (
            &[Kind::Unknown],
            ["avg", "min", "max", "std"]
                .into_iter()
                .chain(GAUGE_PERCENTILES.iter().map(|(k, _)| *k))
                .collect(),
        ),
    ];
    let mut first = true;
    for (kinds, columns) in sections {
        let metrics: Vec<&MetricSummary> = run
            .profiling
            .iter()
            .filter(|m| kinds.contains(&m.kind) && !m.name.ends_with("_info"))
            .collect();
        if metrics.is_empty() {
            continue;
        }
        if !first {
            out.push('\n');
        }
        first = false;
        let label_sets: Vec<Vec<&str>> = metrics
            .iter()
            .flat_map(|m| m.series.iter())
            .filter(|s| !s.labels.is_empty())
            .map(|s| s.labels.keys().map(String::as_str).collect())
            .collect();
        let labels = label_order(&label_sets);
        let mut header = vec!["Endpoint", "Type", "Metric", "Unit"];
        header.extend(&columns);
        header.extend(labels.iter().map(|s| s.as_str()));
        header.push("Description");
        if kinds == [Kind::Histogram] {
            header.push("buckets");
        }
        let _ = writeln!(out, "{}", header.join(","));
        // Rows with the same label columns filled sit together, then by name.
        let mut rows: Vec<(String, &MetricSummary, &SeriesSummary)> = metrics
            .iter()
            .flat_map(|m| m.series.iter().map(move |s| (m, s)))
            .map(|(m, s)| {
                let filled: String = labels
                    .iter()
                    .map(|l| if s.labels.contains_key(l) { '1' } else { '0' })
                    .collect();
                (filled, *m, s)
            })
            .collect();
        rows.sort_by(|a, b| {
            (&a.0, &a.1.name, &a.2.endpoint_url, &a.2.labels).cmp(&(
                &b.0,
                &b.1.name,
                &b.2.endpoint_url,
                &b.2.labels,
            ))
        });
        for (_, m, s) in rows {
            let mut row = vec![
                endpoint_short(&s.endpoint_url).to_string(),
                m.kind.as_str().to_string(),
                m.name.clone(),
                m.unit.unwrap_or("").to_string(),
            ];
            let stats = stats_json(&s.stats);
            for c in &columns {
                row.push(stats.get(*c).map_or(String::new(), num));
            }
            for l in &labels {
                row.push(s.labels.get(l).cloned().unwrap_or_default());
            }
            row.push(m.help.clone());
            if let SeriesStats::Histogram { buckets, .. } = &s.stats {
                row.push(buckets.as_ref().map_or(String::new(), |b| {
                    b.iter()
                        .map(|(le, c)| format!("{le}={}", *c as u64))
                        .collect::<Vec<_>>()
                        .join(";")
                }));
            }
            csv_row(&mut out, &row);
        }
    }
    let infos: Vec<&MetricSummary> = run
        .profiling
        .iter()
        .filter(|m| m.kind == Kind::Gauge && m.name.ends_with("_info"))
        .collect();
    if !infos.is_empty() {
        if !first {
            out.push('\n');
        }
        out.push_str("Endpoint,Metric,Key,Value,Description\n");
        for m in infos {
            for s in &m.series {
                for (k, v) in &s.labels {
                    let row = [endpoint_short(&s.endpoint_url), &m.name, k, v, &m.help];
                    csv_row(&mut out, &row);
                }
            }
        }
    }
    out
}

fn phase_of(run: &ServerMetricsRun, t: u64) -> Option<&'static str> {
    if let Some(w) = run.warmup_window
        && t >= w.start_ns
        && t < w.end_ns
    {
        return Some("warmup");
    }
    let w = run.profiling_window;
    (t >= w.start_ns && t <= w.end_ns).then_some("profiling")
}

/// One endpoint's changed scrapes as JSON lines, written to a file beside the artifacts as
/// they come (a long run holds none of them), without the phase, which is known only at the
/// end: each line is its scrape's first-byte time, a space, and the JSON object after its
/// first key (`benchmark_phase`, first of the alphabetically ordered keys).
pub struct JsonlSpool {
    url: String,
    clock: Clock,
    path: PathBuf,
    out: Option<std::io::BufWriter<std::fs::File>>,
    /// The first write error; the file is then given up.
    error: Option<std::io::Error>,
}

impl JsonlSpool {
    /// A spool for endpoint `url` at `path` (created at the first changed scrape).
    pub fn new(url: &str, path: PathBuf, clock: Clock) -> JsonlSpool {
        JsonlSpool {
            url: url.to_string(),
            clock,
            path,
            out: None,
            error: None,
        }
    }

    fn append(&mut self, s: &ScrapeEvent) -> std::io::Result<()> {
        let out = match &mut self.out {
            Some(out) => out,
            None => self
                .out
                .insert(std::io::BufWriter::new(std::fs::File::create(&self.path)?)),
        };
        let mut metrics = Map::new();
        for fam in s
            .families
            .iter()
            .filter(|f| crate::metrics::server_metrics::is_kept(f))
        {
            let series: Vec<Value> = fam
                .series
                .iter()
                .map(|x| match &x.value {
                    Sample::Scalar(v) => json!({"labels": x.labels, "value": v}),
                    Sample::Histogram {
                        buckets,
                        sum,
                        count,
                    } => {
                        let b: Map<String, Value> = buckets
                            .iter()
                            .map(|(le, c)| (le.clone(), json!(c)))
                            .collect();
                        json!({"labels": x.labels, "buckets": b, "sum": sum, "count": count})
                    }
                    Sample::Summary { sum, count, .. } => {
                        json!({"labels": x.labels, "sum": sum, "count": count})
                    }
                })
                .collect();
            let name = crate::metrics::server_metrics::exported_name(&fam.name, fam.kind);
            metrics.insert(name.to_string(), series.into());
        }
        // The keys after `benchmark_phase`, in serde_json's (sorted) order.
        let wall = |ns: u64| self.clock.wall_ns(ns);
        writeln!(
            out,
            "{} \"endpoint_latency_ns\":{},\"endpoint_url\":{},\"first_byte_ns\":{},\"metrics\":{},\"request_sent_ns\":{},\"timestamp_ns\":{}}}",
            s.first_byte_ns,
            s.done_ns - s.sent_ns,
            Value::String(self.url.clone()),
            wall(s.first_byte_ns),
            Value::Object(metrics),
            wall(s.sent_ns),
            wall(s.first_byte_ns),
        )
    }

    /// Flushes and closes the spool; its path, `None` when nothing was written.
    pub fn close(&mut self) -> std::io::Result<Option<PathBuf>> {
        if let Some(e) = self.error.take() {
            let _ = std::fs::remove_file(&self.path);
            return Err(e);
        }
        match self.out.take() {
            Some(mut out) => {
                out.flush()?;
                Ok(Some(self.path.clone()))
            }
            None => Ok(None),
        }
    }
}

impl ScrapeSink for JsonlSpool {
    fn scraped(&mut self, s: &ScrapeEvent) {
        if !s.changed || self.error.is_some() {
            return;
        }
        if let Err(e) = self.append(s) {
            self.error = Some(e);
            self.out = None;
        }
    }
}

/// The endpoints' spooled lines, each with its phase, one endpoint after another; the
/// spools are removed.
fn write_jsonl(path: &Path, run: &ServerMetricsRun) -> std::io::Result<()> {
    use std::io::BufRead;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for spool in &run.jsonl {
        let file = std::fs::File::open(spool)?;
        for line in std::io::BufReader::new(file).lines() {
            let line = line?;
            let (at, rest) = line
                .split_once(' ')
                .ok_or_else(|| std::io::Error::other(format!("{}: bad line", spool.display())))?;
            let at: u64 = at
                .parse()
                .map_err(|_| std::io::Error::other(format!("{}: bad time", spool.display())))?;
            let phase = Value::from(phase_of(run, at));
            writeln!(f, "{{\"benchmark_phase\":{phase},{rest}")?;
        }
        let _ = std::fs::remove_file(spool);
    }
    f.flush()
}

/// The families shown in the console, by their exported names (counters without `_total`):
/// (name, what the row says). A counter shows its rate, a histogram its mean.
const CONSOLE_FAMILIES: &[(&str, &str)] = &[
    ("vllm:num_requests_running", "Requests running"),
    ("vllm:num_requests_waiting", "Requests waiting"),
    ("vllm:kv_cache_usage_perc", "KV-cache usage (0-1)"),
    ("vllm:gpu_cache_usage_perc", "KV-cache usage (0-1)"),
    ("vllm:prompt_tokens", "Prompt tokens/sec"),
    ("vllm:generation_tokens", "Generation tokens/sec"),
    ("vllm:mm_image_tokens", "Image tokens/sec"),
    ("vllm:num_preemptions", "Preemptions/sec"),
    ("vllm:time_to_first_token_seconds", "Server TTFT (s)"),
    ("vllm:e2e_request_latency_seconds", "Server e2e latency (s)"),
    ("sglang:num_running_reqs", "Requests running"),
    ("sglang:num_queue_reqs", "Requests waiting"),
    ("sglang:token_usage", "KV-cache usage (0-1)"),
    ("sglang:cache_hit_rate", "Prefix cache hit rate"),
    ("sglang:prompt_tokens", "Prompt tokens/sec"),
    ("sglang:generation_tokens", "Generation tokens/sec"),
    ("sglang:time_to_first_token_seconds", "Server TTFT (s)"),
    (
        "sglang:e2e_request_latency_seconds",
        "Server e2e latency (s)",
    ),
    ("llamacpp:requests_processing", "Requests running"),
    ("llamacpp:requests_deferred", "Requests waiting"),
    ("llamacpp:kv_cache_usage_ratio", "KV-cache usage (0-1)"),
    ("llamacpp:prompt_tokens", "Prompt tokens/sec"),
    ("llamacpp:tokens_predicted", "Generation tokens/sec"),
];

/// One row's figures: avg, min, max, p50, p99 where they apply.
fn row_values(s: &SeriesStats) -> [Option<f64>; 5] {
    let (p50, p99) = (s.percentile(50.0), s.percentile(99.0));
    match s {
        SeriesStats::Gauge { avg, min, max, .. } => [Some(*avg), Some(*min), Some(*max), p50, p99],
        SeriesStats::Counter { rate, .. } => [Some(*rate), None, None, None, None],
        SeriesStats::Histogram { avg, .. } => [*avg, None, None, p50, p99],
    }
}

fn find<'a>(metrics: &'a [MetricSummary], name: &str) -> Option<&'a MetricSummary> {
    metrics.iter().find(|m| m.name == name)
}

/// The `Server Metrics` console table and the fidelity lines; empty when no known family
/// was scraped.
pub fn render_console(metrics: &[MetricSummary], client: &MetricsSummary, width: usize) -> String {
    let several = metrics
        .iter()
        .flat_map(|m| m.series.iter().map(|s| &s.endpoint_url))
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let mut table = Table::new("NVIDIA AIPerf | Server Metrics").column("Metric", Justify::Left);
    for stat in ["avg", "min", "max", "p50", "p99"] {
        table = table.column(stat, Justify::Right);
    }
    let shown = |v: Option<f64>| v.map_or("N/A".to_string(), format_number);
    let mut row = |label: String, v: [Option<f64>; 5]| {
        let mut cells = vec![label];
        cells.extend(v.iter().map(|x| shown(*x)));
        table.row(cells);
    };
    for (name, label) in CONSOLE_FAMILIES {
        let Some(m) = find(metrics, name) else {
            continue;
        };
        for s in &m.series {
            let mut l = label.to_string();
            if several {
                l = format!("{l} [{}]", endpoint_short(&s.endpoint_url));
            }
            row(l, row_values(&s.stats));
        }
    }
    // vLLM's prefix cache: hits / queries over the window.
    for prefix in ["vllm:prefix_cache", "vllm:gpu_prefix_cache"] {
        let total = |n: &str| {
            find(metrics, &format!("{prefix}_{n}")).map(|m| {
                m.series
                    .iter()
                    .map(|s| match s.stats {
                        SeriesStats::Counter { total, .. } => total,
                        _ => 0.0,
                    })
                    .sum::<f64>()
            })
        };
        if let (Some(h), Some(q)) = (total("hits"), total("queries")) {
            row(
                "Prefix cache hit rate".into(),
                [(q > 0.0).then(|| h / q), None, None, None, None],
            );
            break;
        }
    }
    let mut out = String::new();
    if !table.is_empty() {
        out = format!("\n{}", table.render(width));
    }
    for line in fidelity_lines(metrics, client) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Client vs server over the same window: TTFT and request latency, the client's figures
/// next to the server's histogram (mean and estimated p50/p99), and what lies between them
/// (network and client overhead).
pub fn fidelity_lines(metrics: &[MetricSummary], client: &MetricsSummary) -> Vec<String> {
    let pairs = [
        ("TTFT", "time_to_first_token", "time_to_first_token_seconds"),
        (
            "Request latency",
            "request_latency",
            "e2e_request_latency_seconds",
        ),
    ];
    let mut out = Vec::new();
    for (what, tag, suffix) in pairs {
        let Some(MetricValue::Distribution(c)) = client.get(tag).map(|r| &r.value) else {
            continue;
        };
        let server = metrics
            .iter()
            .find(|m| m.name.ends_with(suffix) && m.kind == Kind::Histogram);
        let Some(server) = server else { continue };
        // Per endpoint: two servers' series are two servers, not one of twice the requests.
        let endpoints: BTreeSet<&str> = server
            .series
            .iter()
            .map(|s| s.endpoint_url.as_str())
            .collect();
        for endpoint in &endpoints {
            // Over every series of the endpoint (several engines): the pooled mean.
            let (mut count, mut sum) = (0.0, 0.0);
            let mut est = None;
            for s in server.series.iter().filter(|s| s.endpoint_url == *endpoint) {
                if let SeriesStats::Histogram {
                    count: n, sum: t, ..
                } = &s.stats
                {
                    count += n;
                    sum += t;
                    if est.is_none()
                        && let (Some(p50), Some(p99)) =
                            (s.stats.percentile(50.0), s.stats.percentile(99.0))
                    {
                        est = Some((p50, p99));
                    }
                }
            }
            let s_avg = sum / count * 1e3;
            if count <= 0.0 || !s_avg.is_finite() {
                continue;
            }
            let ms = |ns: f64| ns / 1e6;
            let (s50, s99) = est.map_or((f64::NAN, f64::NAN), |(a, b)| (a * 1e3, b * 1e3));
            let source = if endpoints.len() > 1 {
                format!("{}, {}", server.name, endpoint_short(endpoint))
            } else {
                server.name.clone()
            };
            out.push(format!(
                "{what} client vs server ({source}, {count} requests): client avg {:.2} / p50 {:.2} / p99 {:.2} ms; server avg {:.2} / p50~{:.2} / p99~{:.2} ms; client - server avg {:.2} ms (network + client)",
                ms(c.avg),
                ms(c.p50()),
                ms(c.p99()),
                s_avg,
                s50,
                s99,
                ms(c.avg) - s_avg
            ));
        }
    }
    out
}
