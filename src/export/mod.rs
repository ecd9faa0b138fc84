//! Exports: console report, summary JSON and CSV, per-record JSONL.

pub mod console;
pub mod jsonl;
pub mod table;

use std::path::PathBuf;

/// Facts about the run that the exports need besides the metrics.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Unique id of this run (uuid-like).
    pub benchmark_id: String,
    pub start_wall_ns: u64,
    pub end_wall_ns: u64,
    pub was_cancelled: bool,
    /// Command line, secrets already redacted.
    pub cli_command: String,
    /// Resolved configuration, secrets already redacted.
    pub input_config: serde_json::Value,
    pub random_seed: Option<u64>,
    /// Name of the tokenizer used to count tokens.
    pub tokenizer: String,
    pub streaming: bool,
}

/// Where [`write_summary`] put its files.
#[derive(Debug, Clone)]
pub struct ExportPaths {
    pub json: PathBuf,
    pub csv: PathBuf,
    pub console_txt: PathBuf,
}

/// Renders the console report (metrics table, then the error summary table when there
/// were errors) as plain text.
pub fn render_console(summary: &crate::metrics::MetricsSummary, info: &RunInfo) -> String {
    console::render(summary, info, console::CONSOLE_WIDTH)
}
