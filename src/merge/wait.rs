//! `aiperf merge --wait-for-shards N`: waits until N shard directories under one directory
//! hold their results, so that a merge can start beside the shards (the merge Job of
//! `aiperf kube generate`). A shard that ended without results leaves
//! `.aiperf_shard_failed.json` with its reason, which ends the wait at once; a shard killed
//! from outside (out of memory, evicted) leaves nothing, so the wait has a deadline.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::{MergeError, input};
use crate::export::{RESULTS_READY_FILE, SHARD_FAILED_FILE};

/// How the wait looks at the directory, and how often it says where it stands.
const POLL: Duration = Duration::from_secs(2);
const REPORT_EVERY: Duration = Duration::from_secs(60);

pub struct Wait {
    pub shards: u64,
    pub timeout: Duration,
    /// Markers older than this are an earlier run's (a job name used again on the volume).
    pub since: Option<SystemTime>,
}

/// What one look at the directory found.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    ready: Vec<PathBuf>,
    /// Each failed shard's directory and the reason it wrote.
    failed: Vec<(PathBuf, String)>,
    /// Subdirectories without a current marker.
    pending: Vec<PathBuf>,
}

pub fn wait_for_shards(dirs: &[PathBuf], wait: &Wait) -> Result<(), MergeError> {
    let [dir] = dirs else {
        return Err(input(
            "--wait-for-shards: give one directory, the one the shards write their subdirectories to",
        ));
    };
    let started = Instant::now();
    let mut last_report = Instant::now();
    loop {
        let seen = look(dir, wait.since)?;
        if let Some((shard, why)) = seen.failed.first() {
            return Err(anyhow::anyhow!(
                "shard {} failed, so there is nothing to merge: {why}",
                shard.display()
            )
            .into());
        }
        if seen.ready.len() as u64 >= wait.shards {
            eprintln!(
                "{} of {} shards have their results; merging",
                seen.ready.len(),
                wait.shards
            );
            return Ok(());
        }
        if started.elapsed() >= wait.timeout {
            return Err(anyhow::anyhow!(
                "after {:.0} s, {} of {} shards have results in {} (still without: {}); a shard killed from outside (out of memory, evicted) leaves no marker: see its pod's status and logs",
                wait.timeout.as_secs_f64(),
                seen.ready.len(),
                wait.shards,
                dir.display(),
                names(&seen.pending)
            )
            .into());
        }
        if last_report.elapsed() >= REPORT_EVERY {
            eprintln!(
                "waiting for shards: {} of {} have results after {:.0} s",
                seen.ready.len(),
                wait.shards,
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        std::thread::sleep(POLL.min(wait.timeout.saturating_sub(started.elapsed())));
    }
}

fn names(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "no shard directory yet".into();
    }
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap_or_default().to_string_lossy().into())
        .collect();
    names.join(", ")
}

/// The shard directories under `dir` by the markers they hold (a missing `dir` is a volume
/// the shards have not written to yet).
fn look(dir: &Path, since: Option<SystemTime>) -> Result<Seen, MergeError> {
    let mut seen = Seen::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(seen),
        Err(e) => return Err(input(format!("{}: cannot read it: {e}", dir.display()))),
    };
    let current = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|t| since.is_none_or(|s| t >= s))
    };
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        let failed = sub.join(SHARD_FAILED_FILE);
        if current(&failed) {
            let why = std::fs::read_to_string(&failed)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["error"].as_str().map(String::from))
                .unwrap_or_else(|| "(no reason given)".into());
            seen.failed.push((sub, why));
        } else if current(&sub.join(RESULTS_READY_FILE)) {
            seen.ready.push(sub);
        } else {
            seen.pending.push(sub);
        }
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_sort_shards_and_old_ones_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let sub = |name: &str| {
            let p = dir.path().join(name);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let (a, b, c) = (sub("shard-0"), sub("shard-1"), sub("shard-2"));
        std::fs::write(a.join(RESULTS_READY_FILE), "{}").unwrap();
        std::fs::write(b.join(SHARD_FAILED_FILE), r#"{"error":"boom"}"#).unwrap();
        let seen = look(dir.path(), None).unwrap();
        assert_eq!(seen.ready, [a]);
        assert_eq!(seen.failed, [(b, "boom".to_string())]);
        assert_eq!(seen.pending, [c]);
        // Markers written before the run began count for nothing.
        let later = SystemTime::now() + Duration::from_secs(60);
        let seen = look(dir.path(), Some(later)).unwrap();
        assert!(seen.ready.is_empty() && seen.failed.is_empty());
        assert_eq!(seen.pending.len(), 3);
        // No directory yet: nothing seen, not an error.
        assert_eq!(
            look(&dir.path().join("absent"), None).unwrap(),
            Seen::default()
        );
    }
}
