//! The page `aiperf plot` writes for several runs: their distributions overlaid (one colour
//! per run), the multi-run charts, and their figures side by side in one table, a column per
//! run. One self-contained file, as every report.

use std::path::{Path, PathBuf};

use super::console::{Block, Table};
use super::page::Page;
use super::{ReportError, charts, models, write_to};
use crate::plot;
use crate::plot::artifacts::{Requests, RunArtifacts};

/// The figures compared: (metric tag, row name, statistics).
const FIGURES: &[(&str, &str, &[&str])] = &[
    (
        "time_to_first_token",
        "Time to first token (ms)",
        &["avg", "p50", "p90", "p99"],
    ),
    (
        "inter_token_latency",
        "Inter-token latency (ms)",
        &["avg", "p50", "p90", "p99"],
    ),
    (
        "request_latency",
        "Request latency (ms)",
        &["avg", "p50", "p90", "p99"],
    ),
    (
        "output_token_throughput",
        "Output token throughput (tokens/s)",
        &["avg"],
    ),
    (
        "request_throughput",
        "Request throughput (requests/s)",
        &["avg"],
    ),
];

/// Writes `report.html` into `dir`: `runs` compared, with `charts` (the overlaid
/// distributions first).
pub fn write(
    dir: &Path,
    runs: &[RunArtifacts],
    charts: Vec<plot::Chart>,
) -> Result<PathBuf, ReportError> {
    let (charts, charts_note) = self::charts(Ok(charts));
    let total = Requests::sum(runs.iter().filter_map(RunArtifacts::requests));
    let mut facts = vec![(
        "Runs".to_string(),
        format!("{} · {}", runs.len(), total.text()),
    )];
    for r in runs {
        facts.push((r.label.clone(), run_line(r)));
    }
    let page = Page {
        title: format!("aiperf plot: {} runs compared", runs.len()),
        facts,
        tables: vec![(String::new(), vec![Block::Table(side_by_side(runs))])],
        links: Vec::new(),
        command: None,
        config: None,
        charts,
        charts_note,
    };
    write_to(dir.join(crate::export::REPORT_HTML_FILE), &page)
}

/// A run in one line: model, requests and failures, directory.
fn run_line(r: &RunArtifacts) -> String {
    let mut parts = Vec::new();
    if let Some(summary) = &r.summary {
        parts.push(models(&summary["input_config"]));
    }
    if let Some(req) = r.requests() {
        parts.push(req.text());
    }
    parts.push(r.dir.display().to_string());
    parts.join(" · ")
}

/// One row per figure, one column per run; a figure no run has is left out.
fn side_by_side(runs: &[RunArtifacts]) -> Table {
    let mut header = vec!["Metric".to_string()];
    header.extend(runs.iter().map(|r| r.label.clone()));
    let mut rows = Vec::new();
    let requests: Vec<Option<Requests>> = runs.iter().map(RunArtifacts::requests).collect();
    for (name, pick) in [
        ("Requests", (|q: Requests| q.total) as fn(Requests) -> u64),
        ("Failed requests", |q: Requests| q.failed),
    ] {
        let mut row = vec![name.to_string()];
        row.extend(
            requests
                .iter()
                .map(|q| q.map_or("-".to_string(), |q| pick(q).to_string())),
        );
        rows.push(row);
    }
    for (tag, name, stats) in FIGURES {
        for stat in *stats {
            let values: Vec<Option<f64>> = runs.iter().map(|r| r.stat(tag, stat)).collect();
            if values.iter().all(Option::is_none) {
                continue;
            }
            let mut row = vec![format!("{name} {stat}")];
            row.extend(
                values
                    .iter()
                    .map(|v| v.map_or("-".to_string(), |v| format!("{v:.2}"))),
            );
            rows.push(row);
        }
    }
    let mut right = vec![false];
    right.extend(runs.iter().map(|_| true));
    Table {
        title: "Runs side by side".into(),
        header,
        right,
        rows,
    }
}
