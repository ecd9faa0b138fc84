//! `aiperf compare` flags.

use clap::Args;
use std::path::PathBuf;

/// Compares two run directories (single runs, repeated runs with `profile_runs/run_*/`, or
/// sweeps, point by point): for each metric and statistic the change in % with a confidence
/// interval, and a verdict. Writes `compare.json`, `compare.csv` and `compare.html` to
/// `--output` (default: `NEW/compare`).
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline run directory (or repeated run, or sweep).
    #[arg(value_name = "BASE")]
    pub base: PathBuf,

    /// The run directory (or repeated run, or sweep) compared with the baseline.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,

    /// Where to write compare.json, compare.csv and compare.html (a sweep: one subdirectory
    /// per point). Default: `NEW/compare`.
    #[arg(long)]
    pub output: Option<PathBuf>,

    /// Metric tags to compare, comma-separated. Default: time_to_first_token,
    /// inter_token_latency, request_latency, request_throughput, output_token_throughput,
    /// request_error_rate, goodput (those present in both runs).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,

    /// Confidence level of the intervals, between 0 and 1.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,

    /// Changes within ±threshold are `no change` even when certain: "2%" or "2".
    #[arg(long, default_value = "2%")]
    pub threshold: String,

    /// Bootstrap resamples per metric.
    #[arg(long, default_value_t = 2000)]
    pub resamples: usize,

    /// Seed of the bootstrap resampling (the same seed gives the same intervals).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Compare runs of different endpoint types or workloads (a warning instead of an error).
    #[arg(long)]
    pub force: bool,

    /// Exit 1 when any compared metric got worse beyond the threshold with confidence.
    #[arg(long)]
    pub fail_on_regression: bool,
}
