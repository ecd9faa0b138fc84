//! Exports: console report, summary JSON and CSV, per-record JSONL.

pub mod aggregate;
pub mod console;
pub mod csv;
mod exporter;
mod gpu_telemetry;
mod inputs;
pub mod json;
mod json_text;
pub mod jsonl;
mod names;
mod outputs;
pub mod pyrepr;
mod raw;
pub mod read;
pub mod record_line;
#[cfg(test)]
mod scrape_golden_driver;
#[cfg(test)]
mod scrape_golden_tests;
mod server_metrics;
pub mod sweep_files;
pub mod table;
mod timeslices;
mod trace;
mod trace_table;

use std::path::{Path, PathBuf};

use crate::metrics::MetricsSummary;

pub const JSON_FILE: &str = "profile_export_aiperf.json";
pub const CSV_FILE: &str = "profile_export_aiperf.csv";
pub const CONSOLE_FILE: &str = "profile_export_console.txt";
pub const JSONL_FILE: &str = "profile_export.jsonl";
/// Each request's bytes as sent and received (`--export-level raw`).
pub const RAW_JSONL_FILE: &str = "profile_export_raw.jsonl";
/// Per-window metrics (`--slice-duration`).
pub const TIMESLICES_JSON_FILE: &str = "profile_export_aiperf_timeslices.json";
pub const TIMESLICES_CSV_FILE: &str = "profile_export_aiperf_timeslices.csv";
/// One line per GPU per scrape of the DCGM exporters.
pub const GPU_TELEMETRY_JSONL_FILE: &str = "gpu_telemetry_export.jsonl";
pub const INPUTS_FILE: &str = "inputs.json";
/// The run's log, under the artifact directory.
pub const LOG_FILE: &str = "logs/aiperf.log";

pub use exporter::{Exporter, Written, export_all};
pub use gpu_telemetry::{GpuJsonlSpool, GpuTelemetryJsonl};
pub use inputs::InputsJson;
pub use jsonl::{JsonlWriter, LineLayout};
pub use names::{
    AGGREGATE_CSV_FILE, AGGREGATE_JSON_FILE, FileNames, Level, Options, REPORT_HTML_FILE,
    SWEEP_CSV_FILE, SWEEP_JSON_FILE, prefix_base,
};
pub use outputs::OutputsWriter;
pub use raw::RawOptions;
pub use server_metrics::ServerMetricsFiles;
pub use server_metrics::{
    JsonlSpool as ServerMetricsSpool, ServerMetricsFormats, ServerMetricsRun,
    render_console as render_server_metrics,
};

/// Where endpoint `i`'s server-metrics JSONL lines wait during the run (hidden beside the
/// artifacts, removed when the file is written).
pub fn server_metrics_spool(dir: &Path, names: &FileNames, i: usize) -> PathBuf {
    dir.join(format!(".{}.{i}.jsonl.partial", names.server_metrics))
}

/// Where exporter `i`'s GPU telemetry JSONL lines wait during the run.
pub fn gpu_telemetry_spool(dir: &Path, names: &FileNames, i: usize) -> PathBuf {
    dir.join(format!(".{}.{i}.partial", names.gpu_telemetry_jsonl))
}

/// Written last, once every other artifact of the run is complete: tools that pick up
/// results wait for it.
pub const RESULTS_READY_FILE: &str = ".aiperf_results_ready.json";

/// Written instead by a shard that ended without results, with the reason: a merge that
/// waits for the shards stops waiting.
pub const SHARD_FAILED_FILE: &str = ".aiperf_shard_failed.json";

/// Where the run's log goes.
pub fn log_file(dir: &Path) -> PathBuf {
    dir.join(LOG_FILE)
}

/// Facts about the run that the exports need besides the metrics.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Unique id of this run (uuid-like).
    pub benchmark_id: String,
    pub start_wall_ns: u64,
    pub end_wall_ns: u64,
    pub was_cancelled: bool,
    /// Every planned request finished: no early stop, no request left unanswered.
    pub is_complete: bool,
    /// Command line, secrets already redacted.
    pub cli_command: String,
    /// Resolved configuration, secrets already redacted.
    pub input_config: serde_json::Value,
    pub random_seed: Option<u64>,
    /// Name of the tokenizer used to count tokens.
    pub tokenizer: String,
    /// How Image Token Count left out the chat template's tokens (`chat_template_overhead`).
    pub template_overhead: Option<serde_json::Value>,
    pub streaming: bool,
    /// How well the profiling phase kept its schedule (open loop and fixed schedule only).
    pub load_pacing: Option<serde_json::Value>,
    /// The client's own cost over the run (`client_overhead` in the JSON export).
    pub client_overhead: Option<crate::overhead::OverheadReport>,
    /// GPU telemetry, when any exporter gave data.
    pub gpu_telemetry: Option<std::sync::Arc<crate::metrics::gpu_telemetry::GpuTelemetry>>,
    /// The requests' output limits are ceilings the replies are expected to stop before
    /// (accuracy mode), not lengths asked for: missing them is no cause for a warning.
    pub output_limit_is_a_ceiling: bool,
    /// Run-level metrics outside the per-record catalogue (`accuracy.*`), written after the
    /// others in the JSON and among the single values of the CSV.
    pub extra_metrics: Vec<ExtraMetric>,
    /// Top-level keys outside AIPerf's schema, written last (a shard's `shard` block, a
    /// merge's `merged_shards`); AIPerf's parsers ignore them.
    pub extra: Vec<(&'static str, serde_json::Value)>,
}

/// A run-level metric made outside the per-record catalogue, e.g. `accuracy.overall`: a
/// ratio of `sum` to `count`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraMetric {
    pub tag: String,
    /// The CSV's name for it, before the unit (`Accuracy (Overall)`).
    pub header: String,
    pub unit: &'static str,
    pub count: u64,
    pub sum: u64,
    pub value: f64,
}

/// Renders the console report (metrics table, then the error summary table when there
/// were errors) as plain text.
pub fn render_console(summary: &MetricsSummary, info: &RunInfo) -> String {
    console::render(summary, info, console::CONSOLE_WIDTH)
}

/// The GPU telemetry tables (empty without telemetry data); `output_tokens` is the run's
/// total output token count, for the energy per token.
pub fn render_gpu_telemetry(
    t: &crate::metrics::gpu_telemetry::GpuTelemetry,
    output_tokens: Option<f64>,
) -> String {
    // Wider than the metrics tables: the labels carry AIPerf's "NVIDIA" prefix and the
    // clocks four digits, and a wrapped label is hard to read.
    gpu_telemetry::render_console(t, output_tokens, 120)
}

/// The `--show-trace-timing` table of the HTTP timing metrics (empty without any).
pub fn render_trace_timing(summary: &MetricsSummary) -> String {
    trace_table::render(summary, console::CONSOLE_WIDTH)
}

/// Writes `text` next to `path` first and renames it into place, so a crash or a full
/// disk never leaves a truncated file under the final name.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let result = std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// `profile_export_aiperf.json` (AIPerf's summary document).
struct SummaryJson<'a> {
    pub names: &'a FileNames,
    pub summary: &'a MetricsSummary,
    pub info: &'a RunInfo,
}

impl Exporter for SummaryJson<'_> {
    fn what(&self) -> &'static str {
        "the summary JSON"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<Written>> {
        let path = dir.join(&self.names.json);
        write_atomically(&path, &json::render(self.summary, self.info))?;
        Ok(vec![Written::listed("JSON Export", path)])
    }
}

/// `profile_export_aiperf.csv`, with the GPU telemetry section when there is telemetry.
struct SummaryCsv<'a> {
    pub names: &'a FileNames,
    pub summary: &'a MetricsSummary,
    pub info: &'a RunInfo,
}

impl Exporter for SummaryCsv<'_> {
    fn what(&self) -> &'static str {
        "the summary CSV"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<Written>> {
        let path = dir.join(&self.names.csv);
        let mut text = csv::render(self.summary, &self.info.extra_metrics);
        if let Some(t) = &self.info.gpu_telemetry {
            text.push_str(&gpu_telemetry::render_csv(t));
        }
        write_atomically(&path, &text)?;
        Ok(vec![Written::listed("CSV Export", path)])
    }
}

/// `profile_export_console.txt`: the console report as printed.
struct ConsoleText<'a> {
    pub names: &'a FileNames,
    pub text: &'a str,
}

impl Exporter for ConsoleText<'_> {
    fn what(&self) -> &'static str {
        "the console text"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<Written>> {
        let path = dir.join(&self.names.console);
        write_atomically(&path, self.text)?;
        Ok(vec![Written::unlisted(path)])
    }
}

/// The summary files of a run in the order they are listed: the CSV, the JSON, the
/// console text and, with time slices, their files.
pub struct SummaryFiles<'a> {
    pub names: &'a FileNames,
    pub summary: &'a MetricsSummary,
    pub info: &'a RunInfo,
    pub console_text: &'a str,
}

impl Exporter for SummaryFiles<'_> {
    fn what(&self) -> &'static str {
        "the summary exports"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<Written>> {
        let (names, summary, info) = (self.names, self.summary, self.info);
        let parts: [&dyn Exporter; 4] = [
            &SummaryCsv {
                names,
                summary,
                info,
            },
            &SummaryJson {
                names,
                summary,
                info,
            },
            &ConsoleText {
                names,
                text: self.console_text,
            },
            &timeslices::Timeslices {
                names,
                summary,
                input_config: &info.input_config,
            },
        ];
        let mut written = Vec::new();
        for part in parts {
            written.extend(part.export(dir)?);
        }
        Ok(written)
    }
}

/// [`SummaryFiles`] under the default names.
#[cfg(test)]
pub fn write_summary(
    dir: &Path,
    summary: &MetricsSummary,
    info: &RunInfo,
    console_text: &str,
) -> std::io::Result<Vec<Written>> {
    std::fs::create_dir_all(dir)?;
    SummaryFiles {
        names: &FileNames::default(),
        summary,
        info,
        console_text,
    }
    .export(dir)
}

/// The per-record files of a run, as `--export-level` and `--export-outputs-json` ask:
/// `None` when there are none.
pub fn record_files(
    dir: &Path,
    options: &Options,
    clock: crate::clock::Clock,
    layout: LineLayout,
) -> std::io::Result<Option<Box<dyn crate::metrics::RecordSink>>> {
    std::fs::create_dir_all(dir)?;
    let jsonl = match options.level {
        Level::Records => Some(JsonlWriter::create_at(
            &dir.join(&options.names.jsonl),
            clock,
            layout,
        )?),
        Level::Summary => None,
    };
    let outputs = options.outputs_json.then(|| OutputsWriter::new(dir, clock));
    let raw = match &options.raw {
        Some(raw) => Some(raw::RawWriter::create_at(
            &dir.join(&options.names.raw_jsonl),
            clock,
            layout,
            raw.clone(),
        )?),
        None => None,
    };
    Ok(match (jsonl, outputs, raw) {
        (None, None, None) => None,
        (jsonl, outputs, raw) => Some(Box::new(RecordFiles {
            jsonl,
            outputs,
            raw,
        })),
    })
}

/// The per-record files behind one sink.
struct RecordFiles {
    jsonl: Option<JsonlWriter>,
    outputs: Option<OutputsWriter>,
    raw: Option<raw::RawWriter>,
}

impl crate::metrics::RecordSink for RecordFiles {
    fn write(
        &mut self,
        record: &crate::record::RequestRecord,
        metrics: &crate::metrics::RecordMetrics,
    ) -> std::io::Result<()> {
        if let Some(j) = &mut self.jsonl {
            j.write(record, metrics)?;
        }
        if let Some(o) = &mut self.outputs {
            o.write(record, metrics)?;
        }
        if let Some(r) = &mut self.raw {
            r.write(record, metrics)?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> std::io::Result<()> {
        let RecordFiles {
            jsonl,
            outputs,
            raw,
        } = *self;
        let jsonl = jsonl.map_or(Ok(()), |j| Box::new(j).finish());
        let outputs = outputs.map_or(Ok(()), |o| Box::new(o).finish());
        let raw = raw.map_or(Ok(()), |r| Box::new(r).finish());
        jsonl.and(outputs).and(raw)
    }
}

/// Writes `.aiperf_results_ready.json` into `dir`: call it only after every other
/// artifact was tried. `partial` when an exporter failed (`failed_exporters` names them).
pub fn write_results_ready(
    dir: &Path,
    was_cancelled: bool,
    failed_exporters: &[&str],
) -> std::io::Result<()> {
    // AIPerf's key order, which serde_json's sorted maps would not keep.
    let partial = !failed_exporters.is_empty();
    let failed = match partial {
        true => format!(
            ",\"failed_exporters\":{}",
            serde_json::json!(failed_exporters)
        ),
        false => String::new(),
    };
    let text = format!(
        "{{\"ready\":true,\"was_cancelled\":{was_cancelled},\"partial\":{partial}{failed}}}"
    );
    write_atomically(&dir.join(RESULTS_READY_FILE), &text)
}

/// Writes `.aiperf_shard_failed.json` into `dir` (made if missing) for a run that wrote no
/// results there, and removes an earlier run's `.aiperf_results_ready.json`.
pub fn write_shard_failed(dir: &Path, exit_code: u8, error: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    match std::fs::remove_file(dir.join(RESULTS_READY_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let text = serde_json::json!({"exit_code": exit_code, "error": error}).to_string();
    write_atomically(&dir.join(SHARD_FAILED_FILE), &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::metrics::record_metrics::tests::streamed_record;
    use crate::metrics::{Collector, CollectorOptions, parse_goodput};
    use crate::record::ErrorDetails;
    use crate::tokenizer::Tokenizer;
    use std::sync::Arc;

    fn run_info() -> RunInfo {
        RunInfo {
            benchmark_id: "0b7e5a4c-1f2d-4e3a-9c8b-7a6f5e4d3c2b".into(),
            start_wall_ns: 1_709_210_096_789_012_000,
            end_wall_ns: 1_709_210_106_789_012_000,
            was_cancelled: false,
            is_complete: true,
            cli_command: "aiperf profile --model m --streaming".into(),
            input_config: serde_json::json!({"endpoint": {"streaming": true}}),
            random_seed: Some(42),
            tokenizer: "builtin".into(),
            template_overhead: None,
            streaming: true,
            load_pacing: None,
            client_overhead: None,
            gpu_telemetry: None,
            output_limit_is_a_ceiling: false,
            extra_metrics: Vec::new(),
            extra: Vec::new(),
        }
    }

    fn accuracy_metric(tag: &str, header: &str, sum: u64, count: u64) -> ExtraMetric {
        ExtraMetric {
            tag: tag.into(),
            header: header.into(),
            unit: "ratio",
            count,
            sum,
            value: sum as f64 / count as f64,
        }
    }

    #[test]
    fn run_level_metrics_join_the_single_values_and_the_json() {
        let extra = vec![
            accuracy_metric("accuracy.overall", "Accuracy (Overall)", 3, 4),
            accuracy_metric("accuracy.task.gsm8k", "Accuracy (gsm8k)", 3, 4),
        ];
        let text = csv::render(&summary(), &extra);
        let lines: Vec<&str> = text.split("\r\n").collect();
        let blank = lines.iter().position(|l| l.is_empty()).unwrap();
        assert_eq!(
            lines[blank + 1..blank + 5],
            [
                "Metric,Value",
                "Accuracy (Overall) (ratio),0.75",
                "Accuracy (gsm8k) (ratio),0.75",
                "Benchmark Duration (sec),1.06",
            ]
        );
        let info = RunInfo {
            extra_metrics: extra,
            ..run_info()
        };
        let doc: serde_json::Value =
            serde_json::from_str(&json::render(&summary(), &info)).unwrap();
        assert_eq!(
            doc["accuracy.task.gsm8k"],
            serde_json::json!({"unit": "ratio", "avg": 0.75, "count": 4, "sum": 3})
        );
    }

    /// Two good requests (one with two images), one failure.
    fn summary() -> MetricsSummary {
        let opts = CollectorOptions {
            streaming: true,
            use_server_token_count: false,
            goodput: parse_goodput("request_latency:50").unwrap(),
            ..Default::default()
        };
        let tokenizer = Arc::new(Tokenizer::builtin().unwrap());
        let mut c = Collector::new(opts, tokenizer, Clock::new(), None);
        c.add(&streamed_record(&[21, 26, 31, 41])).unwrap();
        let mut b = streamed_record(&[31, 61]);
        b.input.num_images = 2;
        b.start_wall_ns += 1_000_000_000;
        c.add(&b).unwrap();
        let mut f = streamed_record(&[]);
        f.error = Some(ErrorDetails {
            code: Some(500),
            kind: "Internal Server Error".into(),
            message: "boom, \"quoted\"".into(),
        });
        c.add(&f).unwrap();
        c.finish().unwrap()
    }

    #[test]
    fn summary_json_follows_aiperf_schema() {
        let text = json::render(&summary(), &run_info());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema_version"], "1.5");
        assert_eq!(v["benchmark_id"], "0b7e5a4c-1f2d-4e3a-9c8b-7a6f5e4d3c2b");
        assert_eq!(v["start_time"], "2024-02-29T12:34:56.789012+00:00");
        assert_eq!(v["end_time"], "2024-02-29T12:35:06.789012+00:00");
        assert_eq!(v["was_cancelled"], false);
        assert_eq!(v["is_complete"], true);
        assert_eq!(v["tokenizer"], "builtin");
        // Time-weighted metrics: unit, avg, the upper percentiles, min, max, std.
        let conc = v["effective_concurrency"].as_object().unwrap();
        let keys: Vec<&str> = conc.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "avg", "max", "min", "p50", "p90", "p95", "p99", "std", "unit"
            ]
        );
        // In the file: unit and avg first, the percentiles before min, max and std.
        let at = text.find("\"effective_concurrency\": {").unwrap();
        let block = &text[at..at + text[at..].find('}').unwrap()];
        assert!(block.find("\"unit\"") < block.find("\"avg\""), "{block}");
        assert!(block.find("\"p99\"") < block.find("\"min\""), "{block}");
        assert_eq!(conc["unit"], "requests");
        assert_eq!(conc["max"], 1.0);
        assert_eq!(v["input_config"]["endpoint"]["streaming"], true);
        assert_eq!(v["run_info"]["random_seed"], 42);
        assert_eq!(
            v["run_info"]["cli_command"],
            "aiperf profile --model m --streaming"
        );

        let latency = &v["request_latency"];
        assert_eq!(latency["unit"], "ms");
        assert_eq!(latency["avg"], 50.0);
        assert_eq!(latency["min"], 40.0);
        assert_eq!(latency["max"], 60.0);
        assert_eq!(latency["p50"], 50.0);
        assert_eq!(latency["count"], 2);
        assert_eq!(latency["sum"], 100.0);
        assert_eq!(latency.as_object().unwrap().len(), 16);
        assert_eq!(
            v["request_count"],
            serde_json::json!({"unit": "requests", "avg": 2.0})
        );
        assert_eq!(v["error_request_count"]["avg"], 1.0);
        assert_eq!(v["good_request_count"]["avg"], 1.0);
        assert_eq!(v["benchmark_duration"]["unit"], "sec");
        assert_eq!(v["benchmark_duration"]["avg"], 1.06);
        assert_eq!(v["image_latency"]["unit"], "ms/image");
        assert_eq!(v["image_latency"]["avg"], 30.0);
        assert_eq!(
            v["error_summary"],
            serde_json::json!([{"error_details": {"code": 500, "type": "Internal Server Error",
                "message": "boom, \"quoted\""}, "count": 1}])
        );

        // Keys in AIPerf's order: declared metrics first, metadata, then other metrics.
        let pos = |key: &str| text.find(&format!("\n  \"{key}\":")).unwrap();
        assert!(pos("schema_version") < pos("aiperf_version"));
        assert!(pos("benchmark_id") < pos("request_throughput"));
        assert!(pos("request_throughput") < pos("request_latency"));
        assert!(pos("request_latency") < pos("time_to_first_token"));
        assert!(pos("total_error_isl") < pos("input_config"));
        assert!(pos("end_time") < pos("image_latency"));
        // Statistics keys in JsonMetricResult order.
        let block = &text[pos("request_latency")..pos("request_count")];
        let order = [
            "unit", "avg", "p1", "p99", "min", "max", "std", "count", "sum",
        ];
        let found: Vec<usize> = order
            .iter()
            .map(|k| block.find(&format!("\"{k}\"")).unwrap())
            .collect();
        assert!(found.windows(2).all(|w| w[0] < w[1]), "{block}");
    }

    #[test]
    fn client_overhead_is_exported_only_when_measured() {
        let plain: serde_json::Value =
            serde_json::from_str(&json::render(&summary(), &run_info())).unwrap();
        assert!(plain.get("client_overhead").is_none());
        let mut info = run_info();
        info.client_overhead = Some(crate::overhead::OverheadMonitor::start(false).finish(7, None));
        let v: serde_json::Value = serde_json::from_str(&json::render(&summary(), &info)).unwrap();
        let o = &v["client_overhead"];
        assert_eq!(o["requests"], 7);
        assert!(o["cpu_time_s"].as_f64().unwrap() >= 0.0, "{o}");
        assert!(o["record_complete_lag"].is_null());
        assert!(o["warnings"].is_array());
    }

    #[test]
    fn summary_csv_has_aiperf_sections() {
        let text = csv::render(&summary(), &[]);
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std"
        );
        // Sorted by tag: the time-weighted active_* rows first, with no sum and only the
        // upper percentiles.
        assert!(lines[1].starts_with("Active Decode Throughput (tokens/sec),"));
        assert_eq!(lines[1].split(',').count(), 15);
        assert!(lines.iter().any(|l| {
            l.starts_with("Error Input Sequence Length (tokens),550.00,550.00,550.00,550.00,")
        }));
        let latency = lines
            .iter()
            .find(|l| l.starts_with("Request Latency (ms),"))
            .unwrap();
        assert_eq!(
            *latency,
            "Request Latency (ms),50.00,40.00,60.00,100.00,40.20,41.00,42.00,45.00,50.00,55.00,58.00,59.00,59.80,10.00"
        );
        let blank = lines.iter().position(|l| l.is_empty()).unwrap();
        assert_eq!(lines[blank + 1], "Metric,Value");
        // Run-level values sorted by tag (benchmark_duration, completed_request_count, ...).
        assert_eq!(
            lines[blank + 2..],
            [
                "Benchmark Duration (sec),1.06",
                "Completed Requests (Success + Error),3.00",
                "Error Request Count,1.00",
                "Good Request Count,1.00",
                "GoodRequestFraction (ratio),0.33",
                "Goodput (requests/sec),0.94",
                "Input Token Throughput (tokens/sec),1037.74",
                "Output Token Throughput (tokens/sec),5.66",
                "Request Count,2.00",
                "Request Error Rate (%),33.33",
                "Request Throughput (requests/sec),1.89",
                "Total Error Input Sequence Length (tokens),550.00",
                "Total Input Sequence Length (tokens),1100.00",
                "Total Number of Images (images),2.00",
                "Total Output Sequence Length (tokens),6.00",
                "Total Output Tokens (tokens),6.00",
                "Total Token Throughput (tokens/sec),1043.40",
                "",
            ]
        );
        assert!(text.ends_with("\r\n"));
        assert!(!text.contains("\r\n\r\n\r\n"));
    }

    #[test]
    fn write_summary_writes_three_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let s = summary();
        let info = run_info();
        let console = render_console(&s, &info);
        let written = write_summary(&out, &s, &info, &console).unwrap();
        // Listed in the order printed after a run; the console text is not listed.
        let expected = [
            (Some("CSV Export"), "profile_export_aiperf.csv"),
            (Some("JSON Export"), "profile_export_aiperf.json"),
            (None, "profile_export_console.txt"),
        ];
        let expected: Vec<Written> = expected
            .iter()
            .map(|(label, name)| Written {
                label: *label,
                path: out.join(name),
            })
            .collect();
        assert_eq!(written, expected);
        assert_eq!(std::fs::read_to_string(&written[2].path).unwrap(), console);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&written[1].path).unwrap()).unwrap();
        assert_eq!(json["request_count"]["avg"], 2.0);
        assert!(
            std::fs::read_to_string(&written[0].path)
                .unwrap()
                .starts_with("Metric,avg")
        );
        let leftovers: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
            .collect();
        assert!(leftovers.is_empty());
        assert!(console.contains("Image Latency (ms/image)"));
        assert!(console.contains("NVIDIA AIPerf | Error Summary"));
    }
}
