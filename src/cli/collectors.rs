//! Switches for AIPerf's side collectors. This build has neither collector yet, so turning
//! one off changes nothing; the flags are accepted so that AIPerf command lines run
//! unchanged, and `--help` says so.

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct CollectorArgs {
    /// Turn off GPU telemetry collection. This build does not collect GPU telemetry yet, so
    /// the flag changes nothing today.
    #[arg(long, help_heading = "GPU Telemetry")]
    pub no_gpu_telemetry: bool,

    /// Turn off scraping the server's Prometheus /metrics. This build does not scrape server
    /// metrics yet, so the flag changes nothing today.
    #[arg(long, help_heading = "Server Metrics")]
    pub no_server_metrics: bool,
}
