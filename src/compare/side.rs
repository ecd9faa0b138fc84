//! One side of a comparison read from disk: a run directory, or the trials of a repeated
//! run (`profile_runs/run_NNNN/`), each with its summary and per-request values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::export::read::{read_records, read_summary};

const SUMMARY: &str = "profile_export_aiperf.json";
const RECORDS: &str = "profile_export.jsonl";

/// One run's artifacts, as far as the comparison needs them.
#[derive(Debug)]
pub struct Trial {
    pub summary: Value,
    /// Per-request metric values (display units) of the successful profiling requests.
    pub values: BTreeMap<String, Vec<f64>>,
    /// Profiling requests, failed ones included.
    pub requests: usize,
    pub failed: usize,
}

#[derive(Debug)]
pub struct Side {
    pub dir: PathBuf,
    pub trials: Vec<Trial>,
}

impl Side {
    /// Reads `dir`: a run directory, or a repeated run's base directory.
    pub fn read(dir: &Path) -> Result<Side, String> {
        let trials = if dir.join(SUMMARY).is_file() {
            vec![read_trial(dir)?]
        } else {
            let runs = repeat_dirs(dir)?;
            runs.iter()
                .map(|d| read_trial(d))
                .collect::<Result<_, _>>()?
        };
        Ok(Side {
            dir: dir.to_path_buf(),
            trials,
        })
    }

    /// The per-request values of `tag` over every trial.
    pub fn pooled(&self, tag: &str) -> Vec<f64> {
        let per_trial = self.trials.iter().filter_map(|t| t.values.get(tag));
        per_trial.flatten().copied().collect()
    }

    /// The first trial's summary: the run settings every trial shares.
    pub fn summary(&self) -> &Value {
        &self.trials[0].summary
    }

    pub fn requests(&self) -> usize {
        self.trials.iter().map(|t| t.requests).sum()
    }

    pub fn failed(&self) -> usize {
        self.trials.iter().map(|t| t.failed).sum()
    }

    pub fn was_cancelled(&self) -> bool {
        let cancelled = |t: &Trial| t.summary["was_cancelled"] == Value::Bool(true);
        self.trials.iter().any(cancelled)
    }
}

/// `dir/profile_runs/run_*/` in order; an error when there are none.
fn repeat_dirs(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let runs = dir.join("profile_runs");
    let entries = std::fs::read_dir(&runs).map_err(|_| {
        format!(
            "{}: not a run directory (no {SUMMARY}) nor a repeated run (no profile_runs/run_*/)",
            dir.display()
        )
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("run_"))
        .map(|e| e.path())
        .filter(|p| p.join(SUMMARY).is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "{}: profile_runs/ holds no run_*/ with {SUMMARY}",
            dir.display()
        ));
    }
    Ok(dirs)
}

fn read_trial(dir: &Path) -> Result<Trial, String> {
    let summary = read_summary(&dir.join(SUMMARY))?;
    let records = read_records(&dir.join(RECORDS))?;
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let (mut requests, mut failed) = (0, 0);
    for r in records.iter().filter(|r| !r.warmup) {
        requests += 1;
        if r.error.is_some() {
            failed += 1;
            continue;
        }
        for (tag, v) in &r.metrics {
            values.entry(tag.clone()).or_default().push(*v);
        }
    }
    Ok(Trial {
        summary,
        values,
        requests,
        failed,
    })
}
