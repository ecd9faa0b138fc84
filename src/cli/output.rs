//! Flags that choose which export files a run writes and how they are named.

use clap::{Args, ValueEnum};

/// `--export-level` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportLevel {
    /// Only the summary files (JSON, CSV, console copy).
    Summary,
    /// The summary files plus `profile_export.jsonl`, one line per request.
    Records,
    /// The records plus `profile_export_raw.jsonl`: each request's headers and body as
    /// sent and every response message as received.
    Raw,
}

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// How much to write: `summary` (summary JSON and CSV), `records` (also the per-request
    /// JSONL), `raw` (also `profile_export_raw.jsonl`: each request's headers and body as
    /// sent and its responses as received; large).
    #[arg(long = "export-level", visible_aliases = ["profile-export-level"], value_enum, default_value_t = ExportLevel::Records, help_heading = "Output")]
    pub export_level: ExportLevel,

    /// Base name for the export files instead of `profile_export`: `NAME.json`, `NAME.csv`,
    /// `NAME.jsonl`, `NAME_timeslices.csv`, `NAME_console.txt`. A known ending (`.json`,
    /// `_console.txt`, ...) and any directory part are dropped.
    #[arg(long = "profile-export-prefix", visible_aliases = ["profile-export-file"], help_heading = "Output")]
    pub profile_export_prefix: Option<String>,

    /// Also write outputs.json: the text of every response, with its ids and key metrics.
    #[arg(long = "export-outputs-json", help_heading = "Output")]
    pub export_outputs_json: bool,

    /// Add each request's HTTP timing stamps (`trace_data`) to its profile_export.jsonl line.
    #[arg(long = "export-http-trace", help_heading = "Output")]
    pub export_http_trace: bool,

    /// Print a table of the HTTP timing metrics (http_req_*) after the metrics table.
    #[arg(long = "show-trace-timing", help_heading = "Output")]
    pub show_trace_timing: bool,

    /// Also summarize the run per window of this many seconds (`30`, `2.5`, `30s`, `5m`,
    /// `2h`), counted from the first request's start; each request counts in the window it
    /// started in. Writes profile_export_aiperf_timeslices.json and .csv.
    #[arg(
        long = "slice-duration",
        value_name = "SECONDS",
        help_heading = "Output"
    )]
    pub slice_duration: Option<String>,

    /// Do not write report.html, the one-file HTML page (charts, tables, configuration) that
    /// every run, sweep and repeated run otherwise gets in its artifact directory.
    #[arg(long = "no-html-report", help_heading = "Output")]
    pub no_html_report: bool,

    /// Serve the client's live metrics while the run goes on http://HOST:PORT/metrics in the
    /// Prometheus text format: request, error (by type) and token counters, TTFT, ITL and
    /// request latency histograms, requests in flight, send lag; labelled with the run's
    /// benchmark_id, model and endpoint. 0 picks a free port (logged).
    #[arg(long = "prometheus-port", value_name = "PORT", help_heading = "Output")]
    pub prometheus_port: Option<u16>,

    /// The address --prometheus-port listens on [default: 127.0.0.1, this machine only;
    /// 0.0.0.0 for every interface].
    #[arg(long = "prometheus-host", value_name = "HOST", help_heading = "Output")]
    pub prometheus_host: Option<String>,
}
