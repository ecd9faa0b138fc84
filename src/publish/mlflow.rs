//! A run logged to an MLflow tracking server through its REST API, as AIPerf's exporter logs
//! it with the Python client: the experiment (created when missing), a run named
//! `aiperf-<benchmark id>` (or `--mlflow-run-name`), params from the configuration, every
//! summary statistic as a metric (`time_to_first_token` for the average,
//! `time_to_first_token.p99`, ...), tags, then the artifact files under `exports/` and
//! `plots/` with `mlflow_export.json` describing the upload. A sweep or repeated run adds
//! one parent run that holds the base directory's files; each run is its child.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use http::Method;
use serde_json::{Value, json};
use tracing::info;

use super::mlflow_api::{Api, now_ms};
use super::{RunSummary, default_name, glob};
use crate::config::MlflowOptions;
use crate::export::pyrepr;
use crate::sweep::Ran;

/// AIPerf's statistic fields, each a metric when the summary has it.
const STAT_FIELDS: [&str; 15] = [
    "avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min", "max", "std",
    "count", "sum",
];
pub const METADATA_FILE: &str = "mlflow_export.json";
/// Suffixes AIPerf files under `plots/`; everything else goes under `exports/`.
const PLOT_SUFFIXES: [&str; 7] = ["png", "jpg", "jpeg", "svg", "gif", "webp", "html"];
/// The REST API's limits per `log-batch` call and on a param's value.
const MAX_METRICS_PER_BATCH: usize = 1000;
const MAX_PARAMS_OR_TAGS_PER_BATCH: usize = 100;
const MAX_PARAM_VALUE_CHARS: usize = 6000;

/// Logs every run of `ran` (children of one parent run for a sweep or repeated run).
pub fn publish(opts: &MlflowOptions, ran: &Ran, runs: &[RunSummary]) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async {
        let api = Api::new(opts)?;
        let within = |what: &'static str| {
            move |_| {
                format!(
                    "{what}: no answer within {:.0} s (see AIPERF_MLFLOW_EXPORT_TIMEOUT_SECONDS)",
                    opts.timeout.as_secs_f64()
                )
            }
        };
        let experiment = tokio::time::timeout(opts.timeout, api.experiment_id(&opts.experiment))
            .await
            .map_err(within("finding the experiment"))??;
        let parent = match &opts.parent_run_id {
            Some(id) => tokio::time::timeout(opts.timeout, api.check_parent(id, &experiment))
                .await
                .map_err(within("checking --mlflow-parent-run-id"))??,
            None => None,
        };
        let uploads: Vec<Upload> = match ran.multi {
            false => vec![Upload::of_run(
                opts,
                &runs[0],
                opts.run_name.clone(),
                parent,
            )],
            true => {
                // The sweep's base directory names it (its runs have ids, it has none).
                let name = opts.run_name.clone().unwrap_or_else(|| {
                    ran.base
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| default_name(None))
                });
                let sweep = Upload::of_sweep(opts, ran, runs, name.clone(), parent);
                let id = tokio::time::timeout(opts.timeout, log(&api, &experiment, &sweep, opts))
                    .await
                    .map_err(within("logging the parent run"))??;
                runs.iter()
                    .map(|r| {
                        let child = format!("{name}/{}", r.label);
                        Upload::of_run(opts, r, Some(child), Some(id.clone()))
                    })
                    .collect()
            }
        };
        for upload in &uploads {
            tokio::time::timeout(opts.timeout, log(&api, &experiment, upload, opts))
                .await
                .map_err(within("logging the run"))??;
        }
        Ok(())
    })
}

/// One MLflow run to create: what it logs and which files it uploads.
struct Upload {
    name: String,
    parent: Option<String>,
    benchmark_id: Option<String>,
    metrics: Vec<(String, f64)>,
    params: Vec<(String, String)>,
    tags: Vec<(String, String)>,
    dir: PathBuf,
    /// Directories whose files belong to other runs (a sweep's runs, for its parent).
    skip: Vec<PathBuf>,
}

impl Upload {
    fn of_run(
        opts: &MlflowOptions,
        run: &RunSummary,
        name: Option<String>,
        parent: Option<String>,
    ) -> Upload {
        Upload {
            name: name.unwrap_or_else(|| run.default_name()),
            parent,
            benchmark_id: run.benchmark_id().map(str::to_string),
            metrics: metrics(run),
            params: params(run, &run.dir),
            tags: tags(opts, run),
            dir: run.dir.clone(),
            skip: Vec::new(),
        }
    }

    /// The parent run of a sweep: the first run's configuration and the base directory's
    /// files (aggregates, plots, report), no metrics.
    fn of_sweep(
        opts: &MlflowOptions,
        ran: &Ran,
        runs: &[RunSummary],
        name: String,
        parent: Option<String>,
    ) -> Upload {
        let mut params = params(&runs[0], &ran.base);
        params.retain(|(k, _)| k != "aiperf.cli_command");
        let mut tags = tags(opts, &runs[0]);
        tags.retain(|(k, _)| k != "benchmark_id" && k != "aiperf.was_cancelled");
        Upload {
            name,
            parent,
            benchmark_id: None,
            metrics: Vec::new(),
            params,
            tags,
            dir: ran.base.clone(),
            skip: ran.dirs.clone(),
        }
    }
}

/// Every statistic of every metric: `tag` for the average, `tag.stat` for the others; and
/// `aiperf.completed_requests`, which in AIPerf counts the metric results of the run.
fn metrics(run: &RunSummary) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut results = 0;
    for (tag, stats) in run.metrics() {
        results += 1;
        for field in STAT_FIELDS {
            if let Some(v) = stats.get(field).and_then(Value::as_f64) {
                let key = match field {
                    "avg" => tag.clone(),
                    _ => format!("{tag}.{field}"),
                };
                out.push((key, v));
            }
        }
    }
    out.push(("aiperf.completed_requests".into(), results as f64));
    out
}

/// AIPerf's params: endpoint, models, URLs, artifact directory, the profiling phase's load
/// settings and the command line.
fn params(run: &RunSummary, dir: &Path) -> Vec<(String, String)> {
    let cfg = &run.json["input_config"];
    let joined = |items: &Value, field: Option<&str>| {
        let items = items.as_array().map(Vec::as_slice).unwrap_or_default();
        let names: Vec<String> = items
            .iter()
            .map(|v| pyrepr::str(field.map_or(v, |f| &v[f])))
            .collect();
        names.join(",")
    };
    let mut out = vec![
        (
            "endpoint.type".to_string(),
            pyrepr::str(&cfg["endpoint"]["type"]),
        ),
        (
            "endpoint.models".into(),
            joined(&cfg["models"]["items"], Some("name")),
        ),
        (
            "endpoint.urls".into(),
            joined(&cfg["endpoint"]["urls"], None),
        ),
        (
            "output.artifact_directory".into(),
            dir.display().to_string(),
        ),
    ];
    let phases = cfg["phases"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if let Some(phase) = phases.iter().find(|p| p["kind"] == "profiling") {
        out.push(("timing.mode".into(), pyrepr::str(&phase["type"])));
        for (key, field) in [
            ("loadgen.concurrency", "concurrency"),
            ("loadgen.request_rate", "rate"),
            ("loadgen.request_count", "requests"),
            ("loadgen.benchmark_duration", "duration"),
        ] {
            if !phase[field].is_null() {
                out.push((key.into(), pyrepr::str(&phase[field])));
            }
        }
    }
    if let Some(cmd) = run.cli_command() {
        out.push(("aiperf.cli_command".into(), cmd.to_string()));
    }
    // The server refuses a longer value (and with it the whole batch).
    for (_, v) in &mut out {
        if v.chars().count() > MAX_PARAM_VALUE_CHARS {
            *v = v.chars().take(MAX_PARAM_VALUE_CHARS).collect();
        }
    }
    out
}

fn tags(opts: &MlflowOptions, run: &RunSummary) -> Vec<(String, String)> {
    let mut out = vec![
        (
            "aiperf.version".to_string(),
            pyrepr::str(&run.json["aiperf_version"]),
        ),
        (
            "aiperf.was_cancelled".into(),
            (run.json["was_cancelled"] == true).to_string(),
        ),
    ];
    if let Some(id) = run.benchmark_id() {
        out.push(("benchmark_id".into(), id.to_string()));
    }
    for (k, v) in &opts.tags {
        out.retain(|(old, _)| old != k);
        out.push((k.clone(), v.clone()));
    }
    out
}

/// Where AIPerf puts a file in the run's artifact tree: `plots/` or `exports/`, then the
/// file's directory under the artifact directory (a leading `plots/` or `exports/` not
/// repeated).
fn artifact_path(dir: &Path, file: &Path) -> String {
    let suffix = file
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let base = match suffix {
        Some(s) if PLOT_SUFFIXES.contains(&s.as_str()) => "plots",
        _ => "exports",
    };
    let parent = file
        .strip_prefix(dir)
        .ok()
        .and_then(Path::parent)
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let parent = match parent.first() {
        Some(first) if first == base => &parent[1..],
        _ => &parent[..],
    };
    match parent.is_empty() {
        true => base.to_string(),
        false => format!("{base}/{}", parent.join("/")),
    }
}

/// Creates the run, logs it, uploads its files and marks it finished; a run that fails
/// part way is marked failed. Gives the run's id.
async fn log(
    api: &Api,
    experiment: &str,
    upload: &Upload,
    opts: &MlflowOptions,
) -> Result<String, String> {
    let mut tags = vec![json!({"key": "mlflow.runName", "value": upload.name})];
    if let Some(p) = &upload.parent {
        tags.push(json!({"key": "mlflow.parentRunId", "value": p}));
    }
    let created = api
        .call(
            Method::POST,
            "runs/create",
            Some(json!({
                "experiment_id": experiment,
                "run_name": upload.name,
                "start_time": now_ms(),
                "tags": tags,
            })),
        )
        .await
        .map_err(|f| f.in_call("creating the run"))?;
    let info = &created["run"]["info"];
    let run_id = info["run_id"].as_str().unwrap_or_default().to_string();
    let artifact_uri = info["artifact_uri"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if run_id.is_empty() {
        return Err("creating the run: no run id in the answer".into());
    }
    let logged = fill(api, &run_id, &artifact_uri, experiment, upload, opts).await;
    let status = if logged.is_ok() { "FINISHED" } else { "FAILED" };
    let finished = api
        .call(
            Method::POST,
            "runs/update",
            Some(json!({"run_id": run_id, "status": status, "end_time": now_ms()})),
        )
        .await
        .map_err(|f| f.in_call("finishing the run"));
    let artifacts = logged?;
    finished?;
    info!(
        "Uploaded MLflow run '{}' ({run_id}) with {} metrics and {artifacts} artifacts.",
        upload.name,
        upload.metrics.len()
    );
    Ok(run_id)
}

/// Logs the values in batches the API takes, then the files and `mlflow_export.json`.
/// Gives the number of files uploaded.
async fn fill(
    api: &Api,
    run_id: &str,
    artifact_uri: &str,
    experiment: &str,
    upload: &Upload,
    opts: &MlflowOptions,
) -> Result<usize, String> {
    let pairs = |items: &[(String, String)]| -> Vec<Value> {
        items
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect()
    };
    let now = now_ms();
    let mut batches: Vec<Value> = Vec::new();
    for chunk in upload.params.chunks(MAX_PARAMS_OR_TAGS_PER_BATCH) {
        batches.push(json!({"run_id": run_id, "params": pairs(chunk)}));
    }
    for chunk in upload.tags.chunks(MAX_PARAMS_OR_TAGS_PER_BATCH) {
        batches.push(json!({"run_id": run_id, "tags": pairs(chunk)}));
    }
    for chunk in upload.metrics.chunks(MAX_METRICS_PER_BATCH) {
        let metrics: Vec<Value> = chunk
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v, "timestamp": now, "step": 0}))
            .collect();
        batches.push(json!({"run_id": run_id, "metrics": metrics}));
    }
    for batch in batches {
        api.call(Method::POST, "runs/log-batch", Some(batch))
            .await
            .map_err(|f| f.in_call("logging params, tags and metrics"))?;
    }

    let metadata = upload.dir.join(METADATA_FILE);
    let files = glob::collect(&upload.dir, &opts.artifact_globs, |f| {
        f == metadata || upload.skip.iter().any(|d| f.starts_with(d))
    });
    let mut uploaded: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(&upload.dir)
                .unwrap_or(f)
                .display()
                .to_string()
        })
        .collect();
    uploaded.push(METADATA_FILE.into());
    let sorted_keys = |items: Vec<&String>| {
        let mut keys: Vec<&String> = items;
        keys.sort();
        keys.dedup();
        json!(keys)
    };
    let record = json!({
        "tracking_uri": opts.tracking_uri.to_string(),
        "experiment": opts.experiment,
        "experiment_id": experiment,
        "run_id": run_id,
        "run_name": upload.name,
        "benchmark_id": upload.benchmark_id,
        "parent_run_id": upload.parent,
        "live_streaming": false,
        "reused_live_run": false,
        "metric_keys": sorted_keys(upload.metrics.iter().map(|(k, _)| k).collect()),
        "param_keys": sorted_keys(upload.params.iter().map(|(k, _)| k).collect()),
        "tag_keys": sorted_keys(upload.tags.iter().map(|(k, _)| k).collect()),
        "uploaded_artifacts": uploaded,
        "exported_at_ns": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
    });
    let text = serde_json::to_string_pretty(&record).expect("JSON values serialize");
    std::fs::write(&metadata, text)
        .map_err(|e| format!("cannot write {}: {e}", metadata.display()))?;
    for file in files.iter().chain([&metadata]) {
        let dest = artifact_path(&upload.dir, file);
        api.upload_file(artifact_uri, &dest, file).await?;
    }
    Ok(files.len() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_paths_follow_aiperf() {
        let dir = Path::new("/a");
        let at = |f: &str| artifact_path(dir, &dir.join(f));
        assert_eq!(at("profile_export_aiperf.json"), "exports");
        assert_eq!(at("plots/ttft.png"), "plots");
        assert_eq!(at("plots/deep/x.svg"), "plots/deep");
        assert_eq!(at("report.html"), "plots");
        assert_eq!(at("agg/summary.csv"), "exports/agg");
        assert_eq!(at("exports/x.json"), "exports");
    }
}
