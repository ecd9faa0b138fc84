//! After the run: each finished run is logged to an experiment tracker, read back from the
//! files it wrote (so what is logged is what `profile_export_aiperf.json` says). MLflow
//! through its REST API (`mlflow`), Weights & Biases through the `wandb` Python package
//! (`wandb`). A failure leaves the results on disk and is reported once; `main` gives it
//! its own exit code.

mod glob;
mod mlflow;
mod mlflow_api;
mod wandb;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::ProfileArgs;
use crate::config::PublishOptions;
use crate::profile::{Outcome, ProfileError};
use crate::sweep::Ran;

/// One finished run as its summary file tells it.
pub struct RunSummary {
    pub dir: PathBuf,
    /// The directory relative to the sweep's base (`concurrency_4/run_0002`).
    pub label: String,
    pub json: Value,
}

impl RunSummary {
    pub fn benchmark_id(&self) -> Option<&str> {
        self.json["benchmark_id"].as_str()
    }

    /// `aiperf-` and the benchmark id's first 8 characters (AIPerf's default run name).
    pub fn default_name(&self) -> String {
        default_name(self.benchmark_id())
    }

    /// Each metric of the summary: its tag and its statistics object.
    pub fn metrics(&self) -> impl Iterator<Item = (&String, &serde_json::Map<String, Value>)> {
        self.json
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k, v.as_object().filter(|m| m.contains_key("unit"))?)))
    }

    pub fn cli_command(&self) -> Option<&str> {
        self.json["run_info"]["cli_command"].as_str()
    }
}

fn default_name(id: Option<&str>) -> String {
    match id {
        Some(id) if !id.is_empty() => format!("aiperf-{}", id.chars().take(8).collect::<String>()),
        _ => format!(
            "aiperf-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        ),
    }
}

/// Logs the runs of `ran` where the flags ask for it. Nothing is logged when the command
/// failed before writing results. `Err` is the one line saying what did not get logged.
pub fn after_run(
    args: &ProfileArgs,
    ran: &Ran,
    result: &Result<Outcome, ProfileError>,
) -> Result<(), String> {
    if result.is_err() {
        return Ok(());
    }
    // Checked before the run; cannot fail here.
    let opts = PublishOptions::from_args(&args.publish).map_err(|e| e.to_string())?;
    if opts.mlflow.is_none() && opts.wandb.is_none() {
        return Ok(());
    }
    let summary_name = crate::profile::run_files(args)
        .map_err(|e| e.to_string())?
        .summary_json
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default();
    let runs: Vec<RunSummary> = ran
        .dirs
        .iter()
        .filter_map(|dir| read_summary(&ran.base, dir, &summary_name))
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    let mut failed = Vec::new();
    if let Some(m) = &opts.mlflow
        && let Err(e) = mlflow::publish(m, ran, &runs)
    {
        failed.push(format!("MLflow upload to {} failed: {e}", m.tracking_uri));
    }
    if let Some(w) = &opts.wandb
        && let Err(e) = wandb::publish(w, &runs)
    {
        failed.push(format!("Weights & Biases upload failed: {e}"));
    }
    match failed.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{}; the results are written in {}",
            failed.join("; "),
            ran.base.display()
        )),
    }
}

fn read_summary(base: &Path, dir: &Path, name: &Path) -> Option<RunSummary> {
    let text = std::fs::read_to_string(dir.join(name)).ok()?;
    let json: Value = serde_json::from_str(&text).ok()?;
    let label = dir
        .strip_prefix(base)
        .ok()
        .map(|p| p.display().to_string())
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| {
            dir.file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned())
        });
    Some(RunSummary {
        dir: dir.to_path_buf(),
        label,
        json,
    })
}
