//! `aiperf speed-bench-report`: one SPEED-Bench matrix (model x category) from the run
//! directories of one `profile` per category. Reads each run's summary JSON (category,
//! model, throughput) and server-metrics JSON (speculative-decoding acceptance), as
//! AIPerf 0.13 does; writes a CSV and prints a table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::speed_bench::{SpeedBenchArgs, SpeedFormat, SpeedMetric};

const PROFILE_JSON: &str = crate::export::JSON_FILE;
const SERVER_METRICS_JSON: &str = "server_metrics_export.json";

/// SPEED-Bench's qualitative categories, its throughput tiers and the spec_al_* benchmarks,
/// each in the paper's column order.
const QUALITATIVE: [&str; 11] = [
    "coding",
    "humanities",
    "math",
    "multilingual",
    "qa",
    "rag",
    "reasoning",
    "roleplay",
    "stem",
    "summarization",
    "writing",
];
const THROUGHPUT_TIERS: [&str; 3] = ["low_entropy", "mixed", "high_entropy"];
const SPEC_AL: [&str; 5] = ["gsm8k", "math500", "mtbench", "humaneval", "mbpp"];

/// Dataset names that mark a run's category: the name with the prefix taken off.
const CATEGORY_PREFIXES: [&str; 2] = ["speed_bench_", "spec_al_"];

/// Acceptance-length and -rate gauges, by engine, in the order tried.
const ACCEPT_LENGTH: [&str; 3] = [
    "sglang:spec_accept_length",
    "vllm:spec_decode_mean_accepted_length",
    "trtllm:spec_accept_length",
];
const ACCEPT_RATE: [&str; 3] = [
    "sglang:spec_accept_rate",
    "vllm:spec_decode_draft_acceptance_rate",
    "trtllm:spec_accept_rate",
];

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Nothing to read: exit 2.
    #[error("{0}")]
    Input(String),
    /// Runs were found but none gave a value: exit 1.
    #[error("{0}")]
    Empty(String),
    #[error("{0}")]
    Write(String),
}

/// model -> category -> value (`None`: the run had no value).
type Matrix = BTreeMap<String, BTreeMap<String, Option<f64>>>;

pub fn run(args: &SpeedBenchArgs) -> Result<(), ReportError> {
    let dirs = find_run_dirs(&args.paths);
    if dirs.is_empty() {
        return Err(ReportError::Input(format!(
            "no run directories found under {}: a run directory holds {PROFILE_JSON} (give the \
             directories `aiperf profile` wrote, or the directory holding them)",
            args.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    println!("Found {} run directories.", dirs.len());
    let matrix = build(&dirs, args.metric);
    if !matrix
        .values()
        .flat_map(|m| m.values())
        .any(Option::is_some)
    {
        return Err(ReportError::Empty(format!(
            "no SPEED-Bench results extracted from the {} run directories (see the warnings above)",
            dirs.len()
        )));
    }
    let columns = columns(&matrix);
    if matches!(args.output_format, SpeedFormat::Table | SpeedFormat::Both) {
        print!("{}", table(&matrix, &columns, args.metric));
    }
    if matches!(args.output_format, SpeedFormat::Csv | SpeedFormat::Both) {
        std::fs::write(&args.output, csv(&matrix, &columns)).map_err(|e| {
            ReportError::Write(format!(
                "--output {}: cannot write it: {e}",
                args.output.display()
            ))
        })?;
        println!("CSV written to {}", args.output.display());
    }
    Ok(())
}

/// Each path that is a run directory, else its subdirectories that are (sorted by name).
fn find_run_dirs(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            eprintln!("warning: {} is not a directory, skipping", p.display());
            continue;
        }
        if p.join(PROFILE_JSON).is_file() {
            out.push(p.clone());
            continue;
        }
        let mut children: Vec<PathBuf> = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|c| c.is_dir() && c.join(PROFILE_JSON).is_file())
            .collect();
        children.sort();
        out.extend(children);
    }
    out
}

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("warning: {}: not JSON ({e}), skipping", path.display());
            None
        }
    }
}

fn build(dirs: &[PathBuf], metric: SpeedMetric) -> Matrix {
    let mut matrix = Matrix::new();
    for dir in dirs {
        let Some(profile) = read_json(&dir.join(PROFILE_JSON)) else {
            eprintln!(
                "warning: no readable {PROFILE_JSON} in {}, skipping",
                dir.display()
            );
            continue;
        };
        let Some(category) = category(&profile) else {
            eprintln!(
                "warning: cannot tell the category of {} (its dataset is not speed_bench_* or spec_al_*), skipping",
                dir.display()
            );
            continue;
        };
        let value = match metric {
            SpeedMetric::Throughput => throughput(&profile),
            SpeedMetric::AcceptLength | SpeedMetric::AcceptRate => {
                match read_json(&dir.join(SERVER_METRICS_JSON)) {
                    Some(sm) if metric == SpeedMetric::AcceptLength => accept_length(&sm),
                    Some(sm) => accept_rate(&sm),
                    None => {
                        eprintln!("warning: no {SERVER_METRICS_JSON} in {}", dir.display());
                        None
                    }
                }
            }
        };
        matrix
            .entry(model(&profile))
            .or_default()
            .insert(category, value.filter(|v| v.is_finite()));
    }
    matrix
}

/// The first dataset whose file format or public-dataset name has a category prefix.
fn category(profile: &Value) -> Option<String> {
    let datasets = profile["input_config"]["datasets"].as_array()?;
    datasets.iter().find_map(|d| {
        let name = d["format"]
            .as_str()
            .filter(|s| !s.is_empty())
            .or_else(|| d["dataset"].as_str())?;
        CATEGORY_PREFIXES
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .map(str::to_string)
    })
}

fn model(profile: &Value) -> String {
    profile["input_config"]["models"]["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find_map(|i| i["name"].as_str().filter(|s| !s.is_empty()))
        })
        .unwrap_or("unknown")
        .to_string()
}

/// `stat` of the first series of server metric `name`.
fn stat(sm: &Value, name: &str, stat: &str) -> Option<f64> {
    sm["metrics"][name]["series"][0]["stats"][stat].as_f64()
}

fn accept_length(sm: &Value) -> Option<f64> {
    if let Some(v) = ACCEPT_LENGTH.iter().find_map(|n| stat(sm, n, "avg")) {
        return Some(v);
    }
    // Each draft step verifies one token besides the accepted ones.
    let accepted = stat(sm, "vllm:spec_decode_num_accepted_tokens", "total");
    let drafts = stat(sm, "vllm:spec_decode_num_drafts", "total");
    if let (Some(a), Some(d)) = (accepted, drafts)
        && d > 0.0
    {
        return Some(a / d + 1.0);
    }
    // An engine not named above: a metric naming spec, accept and length.
    sm["metrics"].as_object()?.iter().find_map(|(name, _)| {
        let lower = name.to_lowercase();
        (lower.contains("spec") && lower.contains("accept") && lower.contains("length"))
            .then(|| stat(sm, name, "avg"))
            .flatten()
    })
}

fn accept_rate(sm: &Value) -> Option<f64> {
    if let Some(v) = ACCEPT_RATE.iter().find_map(|n| stat(sm, n, "avg")) {
        return Some(v);
    }
    let accepted = stat(sm, "vllm:spec_decode_num_accepted_tokens", "total")?;
    let drafted = stat(sm, "vllm:spec_decode_num_draft_tokens", "total")?;
    (drafted > 0.0).then(|| accepted / drafted)
}

fn throughput(profile: &Value) -> Option<f64> {
    profile["output_token_throughput"]["avg"].as_f64()
}

/// The paper's column set the categories belong to, in its order; else sorted by name.
fn columns(matrix: &Matrix) -> Vec<String> {
    let all: BTreeSet<&str> = matrix
        .values()
        .flat_map(|m| m.keys().map(String::as_str))
        .collect();
    for set in [&QUALITATIVE[..], &THROUGHPUT_TIERS[..], &SPEC_AL[..]] {
        if all.iter().all(|c| set.contains(c)) {
            return set
                .iter()
                .filter(|c| all.contains(*c))
                .map(|c| c.to_string())
                .collect();
        }
    }
    all.into_iter().map(str::to_string).collect()
}

/// A row's cells (`missing` where a category has no value) and their mean.
fn row(values: &BTreeMap<String, Option<f64>>, columns: &[String], missing: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut present = Vec::new();
    for c in columns {
        match values.get(c).copied().flatten() {
            Some(v) => {
                cells.push(format!("{v:.2}"));
                present.push(v);
            }
            None => cells.push(missing.to_string()),
        }
    }
    cells.push(match present.len() {
        0 => missing.to_string(),
        n => format!("{:.2}", present.iter().sum::<f64>() / n as f64),
    });
    cells
}

fn csv(matrix: &Matrix, columns: &[String]) -> String {
    let field = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut out = String::new();
    let header: Vec<String> = std::iter::once("Model".to_string())
        .chain(columns.iter().cloned())
        .chain(std::iter::once("Overall".to_string()))
        .collect();
    let _ = writeln!(
        out,
        "{}",
        header
            .iter()
            .map(|h| field(h))
            .collect::<Vec<_>>()
            .join(",")
    );
    for (model, values) in matrix {
        let mut cells = vec![field(model)];
        cells.extend(row(values, columns, ""));
        let _ = writeln!(out, "{}", cells.join(","));
    }
    out
}

fn table(matrix: &Matrix, columns: &[String], metric: SpeedMetric) -> String {
    let title = match metric {
        SpeedMetric::AcceptLength => "Acceptance Length Report",
        SpeedMetric::AcceptRate => "Acceptance Rate Report",
        SpeedMetric::Throughput => "Throughput Report (tokens/sec)",
    };
    let header: Vec<String> = std::iter::once("Model".to_string())
        .chain(columns.iter().cloned())
        .chain(std::iter::once("Overall".to_string()))
        .collect();
    let rows: Vec<Vec<String>> = matrix
        .iter()
        .map(|(model, values)| {
            std::iter::once(model.clone())
                .chain(row(values, columns, "-"))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count(), 8])
                .max()
                .unwrap_or(8)
        })
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| match i {
                0 => format!("{c:<w$}"),
                _ => format!("{c:>w$}"),
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = format!("{title}\n{}\n", line(&header));
    let _ = writeln!(
        out,
        "{}",
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("  ")
    );
    for r in &rows {
        let _ = writeln!(out, "{}", line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn series(stats: Value) -> Value {
        json!({"series": [{"stats": stats}]})
    }

    #[test]
    fn acceptance_from_each_engine() {
        let sglang = json!({"metrics": {"sglang:spec_accept_length": series(json!({"avg": 2.5}))}});
        assert_eq!(accept_length(&sglang), Some(2.5));
        let vllm = json!({"metrics": {
            "vllm:spec_decode_num_accepted_tokens": series(json!({"total": 300.0})),
            "vllm:spec_decode_num_drafts": series(json!({"total": 200.0})),
            "vllm:spec_decode_num_draft_tokens": series(json!({"total": 600.0})),
        }});
        assert_eq!(accept_length(&vllm), Some(2.5));
        assert_eq!(accept_rate(&vllm), Some(0.5));
        let other = json!({"metrics": {"x:request_acceptance_total": series(json!({"avg": 9.0})),
            "y:SpecAcceptLength": series(json!({"avg": 3.0}))}});
        assert_eq!(accept_length(&other), Some(3.0));
        assert_eq!(accept_rate(&other), None);
    }

    #[test]
    fn columns_follow_the_paper_order() {
        let mut m = Matrix::new();
        let row: BTreeMap<String, Option<f64>> = [
            ("writing", Some(1.0)),
            ("coding", None),
            ("math", Some(2.0)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        m.insert("a".into(), row.clone());
        assert_eq!(columns(&m), ["coding", "math", "writing"]);
        assert_eq!(row_cells(&row), ["-", "2.00", "1.00", "1.50"]);
        m.get_mut("a").unwrap().insert("zzz".into(), Some(1.0));
        assert_eq!(columns(&m), ["coding", "math", "writing", "zzz"]);
    }

    fn row_cells(values: &BTreeMap<String, Option<f64>>) -> Vec<String> {
        let cols: Vec<String> = ["coding", "math", "writing"].map(String::from).to_vec();
        row(values, &cols, "-")
    }
}
