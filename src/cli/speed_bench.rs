//! `aiperf speed-bench-report` flags: a SPEED-Bench matrix (model x category) from the run
//! directories of one `profile` per category, as AIPerf's command.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// Which value fills the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpeedMetric {
    /// Mean accepted tokens per draft step, from the server's speculative-decoding metrics
    /// (SGLang/TensorRT-LLM's accept-length gauge, or vLLM's accepted tokens / drafts + 1)
    /// in `server_metrics_export.json`.
    #[value(name = "accept_length", alias = "accept-length")]
    AcceptLength,
    /// Accepted / drafted tokens, from the same server metrics.
    #[value(name = "accept_rate", alias = "accept-rate")]
    AcceptRate,
    /// The run's average output token throughput (tokens/s), from
    /// `profile_export_aiperf.json`.
    Throughput,
}

/// Where the matrix goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpeedFormat {
    /// The CSV file only (--output).
    Csv,
    /// The console table only.
    Table,
    /// Both.
    Both,
}

#[derive(Debug, Clone, Args)]
#[command(
    long_about = "Assemble per-category SPEED-Bench results into one matrix: a row per model, a \
column per category, and their mean (Overall). Profile once per category (the dataset's \
speed_bench_<category> format, or a spec_al_<benchmark> public dataset), then point this at the \
run directories or at a directory holding them. The category and model come from each run's \
profile_export_aiperf.json; acceptance values from its server_metrics_export.json (scrape the \
server with --server-metrics)."
)]
pub struct SpeedBenchArgs {
    /// Run directories, or directories whose subdirectories are runs.
    #[arg(value_name = "PATHS", required = true, num_args = 1..)]
    pub paths: Vec<PathBuf>,

    /// The CSV file to write.
    #[arg(long, default_value = "speed_bench_report.csv")]
    pub output: PathBuf,

    /// Write the CSV, print the table, or both.
    #[arg(long = "format", value_enum, default_value_t = SpeedFormat::Both)]
    pub output_format: SpeedFormat,

    /// The value in each cell.
    #[arg(long, value_enum, default_value_t = SpeedMetric::AcceptLength)]
    pub metric: SpeedMetric,
}
