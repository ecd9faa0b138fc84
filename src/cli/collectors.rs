//! Switches for AIPerf's side collectors: the server's Prometheus `/metrics` and GPU
//! telemetry from DCGM exporters (both on by default, as in AIPerf), and the probes of the
//! network round trip (`--network-latency-*`, off by default).

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct CollectorArgs {
    /// DCGM exporter endpoints to scrape for GPU telemetry, besides the defaults
    /// (localhost:9400 and :9401, tried silently). `host:port` or a URL; `/metrics` is added
    /// when missing. Given alone, it only asks for telemetry (already on by default).
    #[arg(long, num_args = 0.., value_name = "URL", help_heading = "GPU Telemetry")]
    pub gpu_telemetry: Option<Vec<String>>,

    /// Turn off GPU telemetry: no DCGM exporter is scraped.
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

    /// Measure the round trip to the server during profiling (a fresh TCP connect to each
    /// --url's host:port every --network-latency-ping-interval seconds) and report request
    /// latency, TTFT and TTFO with its mean subtracted as `network_adjusted_*` metrics, plus
    /// `network_rtt`; the probes go to profile_export_network_latency.jsonl. Not with
    /// --network-latency-mean.
    #[arg(long, help_heading = "Network Latency")]
    pub network_latency_automatic: bool,

    /// A known mean round trip in ms to subtract instead of measuring it (no probes are
    /// sent); turns the `network_adjusted_*` metrics on.
    #[arg(long, value_name = "MS", help_heading = "Network Latency")]
    pub network_latency_mean: Option<f64>,

    /// Seconds between probes with --network-latency-automatic (default 1).
    #[arg(long, value_name = "SECONDS", help_heading = "Network Latency")]
    pub network_latency_ping_interval: Option<f64>,
}
