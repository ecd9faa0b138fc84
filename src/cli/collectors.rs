//! Switches for AIPerf's side collectors: the server's Prometheus metrics (scraped by
//! default) and GPU telemetry (not collected by this build yet: `--no-gpu-telemetry` is
//! accepted so that AIPerf command lines run unchanged, and `--help` says so).

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct CollectorArgs {
    /// Turn off GPU telemetry collection. This build does not collect GPU telemetry yet, so
    /// the flag changes nothing today.
    #[arg(long, help_heading = "GPU Telemetry")]
    pub no_gpu_telemetry: bool,

    /// Extra Prometheus endpoints to scrape besides every --url's /metrics (on by default):
    /// `host:port`, `http://host:port` or a full URL; `/metrics` is added when missing.
    /// Given with no value, only the --url endpoints are scraped.
    #[arg(long, num_args = 0.., value_delimiter = ',', help_heading = "Server Metrics")]
    pub server_metrics: Option<Vec<String>>,

    /// Do not scrape the server's Prometheus /metrics during the run.
    #[arg(long, help_heading = "Server Metrics")]
    pub no_server_metrics: bool,

    /// Which server-metrics files to write: json, csv, jsonl (one line per changed scrape).
    /// Default: json csv.
    #[arg(long, num_args = 1.., value_delimiter = ',', help_heading = "Server Metrics")]
    pub server_metrics_formats: Option<Vec<String>>,
}
