//! One side of a comparison read from disk: a run directory, the trials of a repeated run
//! (`profile_runs/run_NNNN/`), or a sweep's points (`<point>/`, repeated as
//! `<point>/profile_runs/trial_NNNN/` or `profile_runs/trial_NNNN/<point>/`), each run with
//! its summary and per-request values.

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
    /// Reads `dir`: a run directory, or a repeated run's base directory (with trials).
    fn read(dir: &Path) -> Result<Side, String> {
        let runs = match dir.join(SUMMARY).is_file() {
            true => vec![dir.to_path_buf()],
            false => repeat_dirs(dir),
        };
        Side::of_runs(dir, &runs)
    }

    fn of_runs(dir: &Path, runs: &[PathBuf]) -> Result<Side, String> {
        let trials = runs.iter().map(|d| read_trial(d));
        Ok(Side {
            dir: dir.to_path_buf(),
            trials: trials.collect::<Result<_, _>>()?,
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

/// What `dir` holds: one side (`None` as its point), or a sweep's points by name.
pub fn read_points(dir: &Path) -> Result<Vec<(Option<String>, Side)>, String> {
    if dir.join(SUMMARY).is_file() || !repeat_dirs(dir).is_empty() {
        return Ok(vec![(None, Side::read(dir)?)]);
    }
    // A point is a subdirectory that is a run or a repeated run: `<point>/`.
    let mut points = Vec::new();
    for sub in subdirs(dir, |_| true) {
        if sub.join(SUMMARY).is_file() || !repeat_dirs(&sub).is_empty() {
            let name = sub.file_name().unwrap_or_default().to_string_lossy();
            points.push((Some(name.into_owned()), Side::read(&sub)?));
        }
    }
    // A sweep repeated trial by trial: `profile_runs/trial_NNNN/<point>/`.
    let trials = subdirs(&dir.join("profile_runs"), |n| n.starts_with("trial_"));
    let mut by_point: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for run in trials.iter().flat_map(|t| subdirs(t, |_| true)) {
        if run.join(SUMMARY).is_file() {
            let name = run.file_name().unwrap_or_default().to_string_lossy();
            by_point.entry(name.into_owned()).or_default().push(run);
        }
    }
    for (name, runs) in by_point {
        points.push((Some(name.clone()), Side::of_runs(&dir.join(&name), &runs)?));
    }
    if points.is_empty() {
        return Err(format!(
            "{}: not a run directory (no {SUMMARY}), a repeated run (no profile_runs/run_*/) nor a sweep (no point directories)",
            dir.display()
        ));
    }
    Ok(points)
}

/// `dir/profile_runs/run_*/` (or `trial_*/`, a sweep point's trials) holding a summary.
fn repeat_dirs(dir: &Path) -> Vec<PathBuf> {
    let named = |n: &str| n.starts_with("run_") || n.starts_with("trial_");
    let runs = subdirs(&dir.join("profile_runs"), named);
    runs.into_iter()
        .filter(|p| p.join(SUMMARY).is_file())
        .collect()
}

/// The subdirectories of `dir` whose name passes `keep`, sorted; none when it is unreadable.
fn subdirs(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| keep(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
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
