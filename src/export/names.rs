//! Which export files a run writes and their names (`--export-level`,
//! `--profile-export-prefix`).

use std::path::Path;

/// The confidence aggregate of repeated runs (`--num-profile-runs`).
pub const AGGREGATE_JSON_FILE: &str = "profile_export_aiperf_aggregate.json";
pub const AGGREGATE_CSV_FILE: &str = "profile_export_aiperf_aggregate.csv";
/// The sweep aggregate over all variations of a sweep.
pub const SWEEP_JSON_FILE: &str = "profile_export_aiperf_sweep.json";
pub const SWEEP_CSV_FILE: &str = "profile_export_aiperf_sweep.csv";
/// The one-file interactive HTML report of a run, or of a sweep in its base directory.
pub const REPORT_HTML_FILE: &str = "report.html";

/// How much a run writes (`--export-level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// The summary JSON and CSV (and the console copy) only.
    Summary,
    /// Also the per-request `profile_export.jsonl`.
    #[default]
    Records,
}

/// The export choices of one run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub level: Level,
    pub names: FileNames,
    /// Write `outputs.json` with every response's text.
    pub outputs_json: bool,
    /// Add `trace_data` to each JSONL line.
    pub http_trace: bool,
    /// Print the HTTP timing table.
    pub show_trace_timing: bool,
    /// `--slice-duration` in ns: write the time-slice files.
    pub slice_duration_ns: Option<u64>,
    /// `--server-metrics-formats`.
    pub server_metrics_formats: super::ServerMetricsFormats,
    /// Write `report.html` after the run (off with `--no-html-report`).
    pub html_report: bool,
    /// `--export-level raw`: also write each request's bytes (`profile_export_raw.jsonl`).
    pub raw: Option<super::RawOptions>,
}

/// Names of the files that follow `--profile-export-prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileNames {
    pub json: String,
    pub csv: String,
    pub jsonl: String,
    /// `--export-level raw`'s file.
    pub raw_jsonl: String,
    pub console: String,
    pub timeslices_json: String,
    pub timeslices_csv: String,
    /// The server-metrics files' name without its ending (`.json`, `.csv`, `.jsonl`).
    pub server_metrics: String,
    pub gpu_telemetry_jsonl: String,
    /// `--network-latency-automatic`'s probes.
    pub network_latency_jsonl: String,
}

impl Default for FileNames {
    fn default() -> Self {
        FileNames {
            json: super::JSON_FILE.into(),
            csv: super::CSV_FILE.into(),
            jsonl: super::JSONL_FILE.into(),
            raw_jsonl: super::RAW_JSONL_FILE.into(),
            console: super::CONSOLE_FILE.into(),
            timeslices_json: super::TIMESLICES_JSON_FILE.into(),
            timeslices_csv: super::TIMESLICES_CSV_FILE.into(),
            server_metrics: "server_metrics_export".into(),
            gpu_telemetry_jsonl: super::GPU_TELEMETRY_JSONL_FILE.into(),
            network_latency_jsonl: "profile_export_network_latency.jsonl".into(),
        }
    }
}

/// Endings a prefix may carry that name one of the files; dropped (the longest that
/// matches, once) so `--profile-export-prefix run.json` means the base `run`.
const KNOWN_ENDINGS: &[&str] = &[
    "_server_metrics.parquet",
    "_server_metrics.jsonl",
    "_server_metrics.json",
    "_server_metrics.csv",
    "_network_latency.jsonl",
    "_gpu_telemetry.jsonl",
    "_timeslices.csv",
    "_timeslices.json",
    "_console.txt",
    "_raw.jsonl",
    ".parquet",
    ".jsonl",
    ".json",
    ".csv",
];

/// The base name a `--profile-export-prefix` value stands for: its last path component,
/// without a known ending. `None` when nothing is left.
pub fn prefix_base(prefix: &str) -> Option<String> {
    let name = Path::new(prefix).file_name()?.to_str()?;
    let base = KNOWN_ENDINGS
        .iter()
        .find_map(|end| name.strip_suffix(end))
        .unwrap_or(name);
    (!base.is_empty()).then(|| base.to_string())
}

impl FileNames {
    /// The names for base `base` (from [`prefix_base`]).
    pub fn with_base(base: &str) -> FileNames {
        FileNames {
            json: format!("{base}.json"),
            csv: format!("{base}.csv"),
            jsonl: format!("{base}.jsonl"),
            raw_jsonl: format!("{base}_raw.jsonl"),
            console: format!("{base}_console.txt"),
            timeslices_json: format!("{base}_timeslices.json"),
            timeslices_csv: format!("{base}_timeslices.csv"),
            server_metrics: format!("{base}_server_metrics"),
            gpu_telemetry_jsonl: format!("{base}_gpu_telemetry.jsonl"),
            network_latency_jsonl: format!("{base}_network_latency.jsonl"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_drops_directories_and_one_known_ending() {
        assert_eq!(prefix_base("run1").as_deref(), Some("run1"));
        assert_eq!(prefix_base("/tmp/x/run1.json").as_deref(), Some("run1"));
        assert_eq!(prefix_base("run1_console.txt").as_deref(), Some("run1"));
        assert_eq!(prefix_base("run1_timeslices.csv").as_deref(), Some("run1"));
        // Only one ending goes.
        assert_eq!(prefix_base("a.json.csv").as_deref(), Some("a.json"));
        assert_eq!(prefix_base(".json"), None);
        assert_eq!(prefix_base(""), None);
        let n = FileNames::with_base("run1");
        assert_eq!(
            (
                n.json.as_str(),
                n.csv.as_str(),
                n.jsonl.as_str(),
                n.console.as_str()
            ),
            ("run1.json", "run1.csv", "run1.jsonl", "run1_console.txt")
        );
        assert_eq!(
            (n.timeslices_json.as_str(), n.timeslices_csv.as_str()),
            ("run1_timeslices.json", "run1_timeslices.csv")
        );
        assert_eq!(n.gpu_telemetry_jsonl, "run1_gpu_telemetry.jsonl");
        assert_eq!(n.raw_jsonl, "run1_raw.jsonl");
        assert_eq!(FileNames::default().raw_jsonl, "profile_export_raw.jsonl");
        assert_eq!(
            FileNames::default().gpu_telemetry_jsonl,
            "gpu_telemetry_export.jsonl"
        );
        let d = FileNames::default();
        assert_eq!(
            (d.timeslices_json.as_str(), d.timeslices_csv.as_str()),
            (
                "profile_export_aiperf_timeslices.json",
                "profile_export_aiperf_timeslices.csv"
            )
        );
    }
}
