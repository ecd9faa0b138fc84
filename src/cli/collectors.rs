//! Switches for AIPerf's side collectors: GPU telemetry from DCGM exporters, and the server's
//! Prometheus `/metrics`.

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

    /// Turn off scraping the server's Prometheus /metrics. This build does not scrape server
    /// metrics yet, so the flag changes nothing today.
    #[arg(long, help_heading = "Server Metrics")]
    pub no_server_metrics: bool,
}
