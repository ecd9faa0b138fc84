//! `aiperf plot` flags.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// `--theme` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotTheme {
    /// Dark lines on white.
    Light,
    /// Light lines on a dark background.
    Dark,
}

/// Each path is searched for run directories (profile_export.jsonl with
/// profile_export_aiperf.json, or a repeated-run aggregate). One run gives its latency
/// distributions, timeline, throughput, image-size and server-metrics charts; several runs (a
/// sweep or several paths) give throughput against latency and latency against load.
#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// Artifact directories to search for runs (recursively).
    #[arg(value_name = "PATHS", default_value = "artifacts")]
    pub paths: Vec<PathBuf>,

    /// Where to write the charts. Default: `<first path>/plots`.
    #[arg(long)]
    pub output: Option<PathBuf>,

    /// Colours of the charts.
    #[arg(long, value_enum, default_value_t = PlotTheme::Light)]
    pub theme: PlotTheme,

    /// AIPerf plot-config YAML (default: `.aiperf-plot-config.yaml` in the first path):
    /// `visualization.single_run_defaults` and `visualization.multi_run_defaults` choose the
    /// charts; other keys are not used (a warning names them). One run: ttft_distribution,
    /// itl_distribution, request_latency_distribution, request_timeline (or ttft_timeline),
    /// ttft_over_time, itl_over_time, latency_over_time, dispersed_throughput_over_time,
    /// image_tokens_by_size, latency_by_image_size, server_requests_over_time,
    /// server_kv_cache_over_time, timeslices_ttft, timeslices_itl, timeslices_latency,
    /// timeslices_throughput. Several runs: ttft_vs_throughput,
    /// pareto_curve_throughput_vs_interactivity, pareto_curve_throughput_vs_latency,
    /// latency_vs_load, latency_throughput_uncertainty.
    #[arg(long)]
    pub config: Option<PathBuf>,

    /// List every file written.
    #[arg(short, long)]
    pub verbose: bool,

    /// After drawing, serve the charts to a browser (a page of every chart, and the page
    /// comparing the runs when there are several) until Ctrl-C.
    #[arg(long)]
    pub dashboard: bool,

    /// Address the dashboard listens on (with --dashboard).
    #[arg(long, default_value = "127.0.0.1", requires = "dashboard")]
    pub host: String,

    /// Port of the dashboard (with --dashboard; 0 picks a free one).
    #[arg(long, default_value_t = 8050, requires = "dashboard")]
    pub port: u16,

    /// AIPerf's upload of the charts to MLflow: not supported (refused).
    #[arg(long = "mlflow-upload")]
    pub mlflow_upload: bool,
}
