//! `report.html`: one self-contained page per run (and per sweep or repeated run, in its
//! base directory) with the run's facts, its charts drawn interactively, the console tables
//! and the configuration. Built from the artifact files after the run (`aiperf profile`
//! hands over the per-request records it kept instead of having them read back); the
//! charts are the plot module's chart models, drawn in the browser by uPlot.

mod console;
mod page;
mod runs_page;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::export::{FileNames, REPORT_HTML_FILE};
use crate::plot;
use crate::plot::artifacts::RecordRow;
use crate::plot::streamed::Rows;
use page::Page;
/// The page comparing several runs, for `plot::run`.
pub fn write_runs_page(
    dir: &Path,
    runs: &[plot::artifacts::RunArtifacts],
    charts: Vec<plot::Chart>,
) -> Result<PathBuf, String> {
    runs_page::write(dir, runs, charts).map_err(|e| e.to_string())
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A run's profiling records as `aiperf profile` kept them while writing
/// `profile_export.jsonl`: read as a stream, but for those with images, which are held
/// (with what finds their image sizes in `inputs.json`).
pub struct KeptRecords<'a> {
    pub rows: &'a dyn Rows,
    pub with_images: Vec<RecordRow>,
}

/// Writes `report.html` into the run directory `dir`, whose files are named `names`.
/// `records` are the run's profiling records when the caller has them (read from
/// `profile_export.jsonl` otherwise).
pub fn write_run(
    dir: &Path,
    names: &FileNames,
    records: Option<KeptRecords>,
) -> Result<PathBuf, ReportError> {
    let summary = read_json(&dir.join(&names.json))?;
    let console_path = dir.join(&names.console);
    let console_text = match std::fs::read_to_string(&console_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(ReportError::Read {
                path: console_path,
                source,
            });
        }
    };
    let drawn = match records {
        Some(kept) => {
            plot::artifacts::read_run_with(dir, plot::artifacts::own_label(dir), kept.with_images)
                .map(|mut run| {
                    plot::default_charts_streamed(&mut run, kept.rows, MAX_POINTS_PER_SERIES)
                })
        }
        None => {
            plot::artifacts::discover(&[dir.to_path_buf()]).map(|runs| plot::default_charts(&runs))
        }
    };
    let (charts, charts_note) = charts(drawn);
    let config = &summary["input_config"];
    let page = Page {
        title: format!("aiperf profile: {}", models(config)),
        facts: run_facts(&summary),
        tables: console_text
            .map(|t| vec![(String::new(), console::parse(&t))])
            .unwrap_or_default(),
        links: Vec::new(),
        command: summary["run_info"]["cli_command"]
            .as_str()
            .map(str::to_string),
        config: (!config.is_null())
            .then(|| serde_json::to_string_pretty(config).unwrap_or_default()),
        charts,
        charts_note,
    };
    write(dir, &page)
}

/// What a sweep or repeated run adds to its base directory's report: the console text of
/// its tables (the sweep table, the best configurations), as printed.
#[derive(Debug, Default)]
pub struct SweepText {
    pub tables: Vec<String>,
    pub model: String,
    pub command: String,
    /// The run directories, in the order they ran.
    pub runs: Vec<PathBuf>,
    pub succeeded: usize,
}

/// Writes `report.html` into the base directory of a sweep or repeated run.
pub fn write_sweep(base: &Path, text: &SweepText) -> Result<PathBuf, ReportError> {
    let drawn =
        plot::artifacts::discover(&[base.to_path_buf()]).map(|runs| plot::default_charts(&runs));
    let (charts, charts_note) = charts(drawn);
    let links = text
        .runs
        .iter()
        .filter(|dir| dir.join(REPORT_HTML_FILE).is_file())
        .map(|dir| {
            let rel = dir.strip_prefix(base).unwrap_or(dir);
            let href = rel.join(REPORT_HTML_FILE).display().to_string();
            (rel.display().to_string(), href)
        })
        .collect();
    let page = Page {
        title: format!("aiperf sweep: {}", text.model),
        facts: vec![
            ("Model".into(), text.model.clone()),
            (
                "Runs".into(),
                format!(
                    "{} ({} succeeded) · {}",
                    text.runs.len(),
                    text.succeeded,
                    sweep_requests(&text.runs).text()
                ),
            ),
            ("Directory".into(), base.display().to_string()),
        ],
        tables: text
            .tables
            .iter()
            .map(|t| (String::new(), console::parse(t)))
            .collect(),
        links,
        command: Some(text.command.clone()),
        config: None,
        charts,
        charts_note,
    };
    write(base, &page)
}

/// The requests of every run that wrote its summary, failed ones counted.
fn sweep_requests(runs: &[PathBuf]) -> plot::artifacts::Requests {
    let of = |dir: &PathBuf| {
        let summary = read_json(&dir.join(crate::export::JSON_FILE)).ok()?;
        plot::artifacts::Requests::of_summary(&summary)
    };
    plot::artifacts::Requests::sum(runs.iter().filter_map(of))
}

/// [`write_run`], saying where the report went, or warning why it could not be written
/// (the run's results stand without it).
pub fn write_run_or_warn(
    dir: &Path,
    names: &FileNames,
    records: Option<KeptRecords>,
) -> Option<PathBuf> {
    logged(write_run(dir, names, records))
}

/// [`write_sweep`], saying where the report went or warning why not.
pub fn write_sweep_or_warn(base: &Path, text: &SweepText) -> Option<PathBuf> {
    logged(write_sweep(base, text))
}

fn logged(written: Result<PathBuf, ReportError>) -> Option<PathBuf> {
    match written {
        Ok(path) => {
            tracing::info!("HTML report: {}", path.display());
            Some(path)
        }
        Err(e) => {
            tracing::warn!("No HTML report: {e}");
            None
        }
    }
}

/// A comparison's page (`aiperf compare`) at `path`: its facts, its table as printed, and
/// `charts` (the distributions of both runs).
pub fn write_comparison(
    path: &Path,
    title: String,
    facts: Vec<(String, String)>,
    table: &str,
    charts: Vec<plot::Chart>,
) -> Result<PathBuf, ReportError> {
    let (charts, charts_note) = self::charts(Ok(charts));
    let page = Page {
        title,
        facts,
        tables: vec![(String::new(), console::parse(table))],
        links: Vec::new(),
        command: None,
        config: None,
        charts,
        charts_note,
    };
    write_to(path.to_path_buf(), &page)
}

fn write(dir: &Path, page: &Page) -> Result<PathBuf, ReportError> {
    write_to(dir.join(REPORT_HTML_FILE), page)
}

fn write_to(path: PathBuf, page: &Page) -> Result<PathBuf, ReportError> {
    // Atomically: a full disk must not leave a cut page under the final name.
    crate::export::write_atomically(&path, &page.html()).map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Per-request series beyond this are thinned for the page: 20,000 requests made a 4 MB
/// report, and a browser stays responsive with a few thousand points per series.
const MAX_POINTS_PER_SERIES: usize = 5000;

/// The default charts of the runs read, thinned, as JSON for the page's script; when there
/// are none, why.
fn charts(drawn: Result<Vec<plot::Chart>, plot::PlotError>) -> (String, Option<String>) {
    let mut charts = match drawn {
        Ok(charts) => charts,
        Err(e) => return ("[]".into(), Some(format!("No charts: {e}"))),
    };
    for chart in &mut charts {
        let k = chart
            .series
            .iter_mut()
            .map(|s| s.thin(MAX_POINTS_PER_SERIES))
            .max()
            .unwrap_or(1);
        if k > 1 {
            chart.description += &format!(
                " (The page draws every {k}th point; the PNG/SVG plots of `aiperf plot` draw all.)"
            );
        }
    }
    let note = charts
        .is_empty()
        .then(|| "No charts: the run has no data to plot.".to_string());
    // Straight to text: a `Value` tree of every point first was half the report's time.
    let json = serde_json::to_string(&charts).unwrap_or_else(|_| "[]".into());
    (json, note)
}

fn read_json(path: &Path) -> Result<Value, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ReportError::Read {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

fn models(config: &Value) -> String {
    let names: Vec<&str> = config["models"]["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|m| m["name"].as_str()).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "unknown model".into()
    } else {
        names.join(", ")
    }
}

/// The header of a run's report: what was measured, how, when and for how long.
fn run_facts(summary: &Value) -> Vec<(String, String)> {
    let config = &summary["input_config"];
    let endpoint = &config["endpoint"];
    let urls: Vec<&str> = endpoint["urls"]
        .as_array()
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut facts = vec![("Model".to_string(), models(config))];
    let mut endpoint_text = format!(
        "{} at {}",
        endpoint["type"].as_str().unwrap_or("?"),
        if urls.is_empty() {
            "?".to_string()
        } else {
            urls.join(", ")
        }
    );
    if endpoint["streaming"].as_bool() == Some(true) {
        endpoint_text.push_str(", streaming");
    }
    facts.push(("Endpoint".into(), endpoint_text));
    if let Some(load) = load_text(config) {
        facts.push(("Load".into(), load));
    }
    if let Some(start) = summary["start_time"].as_str() {
        facts.push(("Started".into(), start.to_string()));
    }
    if let Some(d) = summary["benchmark_duration"]["avg"].as_f64() {
        facts.push(("Duration".into(), format!("{d:.2} s")));
    }
    let ok = summary["request_count"]["avg"].as_f64();
    let errors = summary["error_request_count"]["avg"]
        .as_f64()
        .unwrap_or(0.0);
    if let Some(ok) = ok {
        facts.push((
            "Requests".into(),
            format!("{ok:.0} succeeded, {errors:.0} failed"),
        ));
    }
    if summary["was_cancelled"].as_bool() == Some(true) {
        facts.push(("Status".into(), "stopped early: results are partial".into()));
    }
    facts
}

/// The profiling phase's load in a few words, e.g. `concurrency 4, 20 requests`.
fn load_text(config: &Value) -> Option<String> {
    let phase = config["phases"]
        .as_array()?
        .iter()
        .find(|p| p["kind"] == "profiling")?;
    let mut parts = Vec::new();
    match phase["type"].as_str() {
        Some("request_rate") => {
            if let Some(r) = phase["rate"].as_f64() {
                let pattern = phase["arrival_pattern"].as_str().unwrap_or("constant");
                parts.push(format!("{r} requests/s ({pattern})"));
            }
            if let Some(c) = phase["concurrency"].as_u64() {
                parts.push(format!("at most {c} in flight"));
            }
        }
        Some("fixed_schedule") => parts.push("fixed schedule".into()),
        _ => {
            if let Some(c) = phase["concurrency"].as_u64() {
                parts.push(format!("concurrency {c}"));
            }
        }
    }
    if let Some(n) = phase["requests"].as_u64() {
        parts.push(format!("{n} requests"));
    }
    if let Some(n) = phase["sessions"].as_u64() {
        parts.push(format!("{n} conversations"));
    }
    if let Some(d) = phase["duration"].as_f64() {
        parts.push(format!("for {d} s"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_say_model_endpoint_load_date_and_duration() {
        let summary = serde_json::json!({
            "input_config": {
                "models": {"items": [{"name": "Qwen/Qwen2-VL-2B-Instruct"}]},
                "endpoint": {"type": "chat", "urls": ["http://127.0.0.1:9/"], "streaming": true},
                "phases": [
                    {"kind": "warmup", "type": "concurrency", "concurrency": 1},
                    {"kind": "profiling", "type": "request_rate", "rate": 5.0,
                     "arrival_pattern": "poisson", "concurrency": 8, "requests": 20},
                ],
            },
            "start_time": "2026-12-03T18:18:43.875405+00:00",
            "benchmark_duration": {"avg": 0.585684695},
            "request_count": {"avg": 18.0},
            "error_request_count": {"avg": 2.0},
        });
        let facts = run_facts(&summary);
        let get = |k: &str| {
            facts
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("{k} in {facts:?}"))
        };
        assert_eq!(get("Model"), "Qwen/Qwen2-VL-2B-Instruct");
        assert_eq!(get("Endpoint"), "chat at http://127.0.0.1:9/, streaming");
        assert_eq!(
            get("Load"),
            "5 requests/s (poisson), at most 8 in flight, 20 requests"
        );
        assert_eq!(get("Started"), "2026-12-03T18:18:43.875405+00:00");
        assert_eq!(get("Duration"), "0.59 s");
        assert_eq!(get("Requests"), "18 succeeded, 2 failed");
        assert!(facts.iter().all(|(n, _)| n != "Status"));
    }
}
