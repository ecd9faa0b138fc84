//! A run logged to Weights & Biases. W&B has no stable public REST API for this; AIPerf
//! uses the `wandb` Python package, and so does this build: a short script (embedded
//! below) run with the `python3` on PATH, given the run as JSON on stdin. It needs
//! `pip install wandb` for that interpreter, and W&B's usual settings (`WANDB_API_KEY`,
//! or `WANDB_MODE=offline` to keep the run on disk).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tracing::{debug, info};

use super::{RunSummary, glob};
use crate::config::{DEFAULT_ARTIFACT_GLOBS, WandbOptions};
use crate::metrics::ConsoleGroup;
use crate::metrics::catalog;

const SCRIPT: &str = include_str!("wandb_export.py");
/// The script's exit code when `import wandb` fails.
const NO_WANDB: i32 = 3;
/// The console table's statistic columns, which AIPerf's table has too.
const STAT_COLUMNS: [&str; 7] = ["avg", "min", "max", "p99", "p90", "p50", "std"];

/// Logs each run as its own W&B run; stops at the first failure.
pub fn publish(opts: &WandbOptions, runs: &[RunSummary]) -> Result<(), String> {
    let multi = runs.len() > 1;
    for run in runs {
        let name = match (&opts.run_name, multi) {
            (Some(n), false) => n.clone(),
            (Some(n), true) => format!("{n}/{}", run.label),
            (None, _) => run.default_name(),
        };
        let payload = payload(opts, run, &name);
        let answer = run_script(&payload, opts.timeout)?;
        info!(
            "Uploaded Weights & Biases run '{name}' ({}) from {}",
            answer["url"]
                .as_str()
                .or(answer["id"].as_str())
                .unwrap_or("offline"),
            run.dir.display()
        );
    }
    Ok(())
}

fn payload(opts: &WandbOptions, run: &RunSummary, name: &str) -> Value {
    let mut config = without_nulls(&run.json["input_config"]);
    if let (Some(map), Some(cmd)) = (config.as_object_mut(), run.cli_command()) {
        map.insert("aiperf.cli_command".into(), cmd.into());
    }
    let mut tags = vec![format!(
        "aiperf-{}",
        run.json["aiperf_version"].as_str().unwrap_or("unknown")
    )];
    if let Some(id) = run.benchmark_id() {
        tags.push(format!(
            "benchmark-{}",
            id.chars().take(8).collect::<String>()
        ));
    }
    tags.extend(opts.tags.iter().cloned());
    // wandb.init(dir=...) keeps its own state under <dir>/wandb; that is not uploaded.
    let state = run.dir.join("wandb");
    let globs: Vec<String> = DEFAULT_ARTIFACT_GLOBS.map(String::from).to_vec();
    let files: Vec<Value> = glob::collect(&run.dir, &globs, |f| f.starts_with(&state))
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&run.dir).unwrap_or(f).display().to_string();
            json!([absolute(f), rel])
        })
        .collect();
    let mut columns = vec!["Metric"];
    columns.extend(STAT_COLUMNS);
    json!({
        "project": opts.project,
        "entity": opts.entity,
        "name": name,
        "dir": absolute(&run.dir),
        "config": config,
        "tags": tags,
        "columns": columns,
        "rows": table_rows(run),
        "files": files,
    })
}

/// AIPerf's `summary_metrics` table: the metrics the console shows, in its order, labelled
/// `Header (unit)`, each statistic rounded to 2 decimals (null when the metric has none).
fn table_rows(run: &RunSummary) -> Vec<Value> {
    let mut shown: Vec<(&catalog::MetricDef, &serde_json::Map<String, Value>)> = run
        .metrics()
        .filter_map(|(tag, stats)| Some((catalog::by_tag(tag)?, stats)))
        .filter(|(def, _)| def.console != ConsoleGroup::Hidden && !def.error_only)
        .collect();
    shown.sort_by_key(|(def, _)| def.display_order);
    shown
        .into_iter()
        .map(|(def, stats)| {
            let mut row = vec![json!(format!("{} ({})", def.header, def.unit))];
            for stat in STAT_COLUMNS {
                let v = stats.get(stat).and_then(Value::as_f64);
                row.push(v.map_or(Value::Null, |v| json!((v * 100.0).round() / 100.0)));
            }
            Value::Array(row)
        })
        .collect()
}

/// The configuration as AIPerf's `model_dump(exclude_none=True)` gives it.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// Runs the script with `payload` on stdin, for at most `timeout`; its JSON answer.
fn run_script(payload: &Value, timeout: Duration) -> Result<Value, String> {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "python3 was not found on PATH; the W&B upload runs the wandb Python package (pip install wandb)".to_string()
            }
            _ => format!("cannot start python3: {e}"),
        })?;
    let input = serde_json::to_vec(payload).expect("JSON values serialize");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // A script that dies at once closes its stdin: its exit code says why, not this write.
    let _ = stdin.write_all(&input);
    drop(stdin);
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = r.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout is piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr is piped")));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no result within {:.0} s (see AIPERF_WANDB_EXPORT_TIMEOUT_SECONDS); the wandb process was stopped",
                    timeout.as_secs_f64()
                ));
            }
            Err(e) => return Err(format!("waiting for python3: {e}")),
        }
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    debug!("wandb: {}", err.trim());
    match status.code() {
        Some(0) => Ok(serde_json::from_str(out.lines().last().unwrap_or("{}")).unwrap_or(Value::Null)),
        Some(NO_WANDB) => Err(
            "the wandb Python package is not installed for the python3 on PATH; install it with `pip install wandb`".into(),
        ),
        _ => {
            let last = err
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no message");
            Err(format!("the wandb script failed ({status}): {last}"))
        }
    }
}
