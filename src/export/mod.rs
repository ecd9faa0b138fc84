//! (stub; replaced by the export module)
use crate::metrics::MetricsSummary;
use std::path::{Path, PathBuf};
pub struct RunInfo {
    pub benchmark_id: String,
    pub start_wall_ns: u64,
    pub end_wall_ns: u64,
    pub was_cancelled: bool,
    pub cli_command: String,
    pub input_config: serde_json::Value,
    pub random_seed: Option<u64>,
    pub tokenizer: String,
    pub streaming: bool,
}
pub struct ExportPaths {
    pub json: PathBuf,
    pub csv: PathBuf,
    pub console_txt: PathBuf,
}
pub fn render_console(summary: &MetricsSummary, _info: &RunInfo) -> String {
    format!("records: {}\n", summary.n)
}
pub fn write_summary(
    dir: &Path,
    _summary: &MetricsSummary,
    _info: &RunInfo,
    console_text: &str,
) -> std::io::Result<ExportPaths> {
    let p = ExportPaths {
        json: dir.join("profile_export_aiperf.json"),
        csv: dir.join("profile_export_aiperf.csv"),
        console_txt: dir.join("profile_export_console.txt"),
    };
    std::fs::write(&p.console_txt, console_text)?;
    Ok(p)
}
