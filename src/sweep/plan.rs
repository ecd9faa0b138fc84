//! Where each run of a sweep or repeated run writes, which seed it draws with, and the
//! order and pauses of the runs (AIPerf's layout, `aiperf-workflows.md` §1.3–§1.5).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::config::multirun::{MultiRunOptions, SweepOrder};

/// How the run directories are laid out under the base directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One point, repeated: `profile_runs/run_NNNN/`.
    Repeats,
    /// A list sweep (or a grid search): `<point>/`, and with repeats
    /// `profile_runs/trial_NNNN/<point>/` (repeated) or `<point>/profile_runs/trial_NNNN/`
    /// (independent).
    Points { trials: u32, order: SweepOrder },
    /// A monotonic or adaptive search: `search_iter_NNNN/profile_runs/run_NNNN/`, numbered
    /// from 0 as AIPerf's planners number their iterations; aggregates as a sweep in
    /// AIPerf's default (repeated) order: `aggregate/<point>/`, and `sweep_aggregate/`
    /// (under `aggregate/` with several runs per point).
    SearchIterations { trials: u32 },
}

impl Layout {
    /// The directory of trial `trial0` (0-based) of point `point` (0-based) named `dir_name`.
    pub fn run_dir(self, base: &Path, point: usize, dir_name: &str, trial0: u32) -> PathBuf {
        let n = trial0 + 1;
        match self {
            Layout::Repeats => base.join("profile_runs").join(format!("run_{n:04}")),
            Layout::Points { trials: 1, .. } => base.join(dir_name),
            Layout::Points {
                order: SweepOrder::Repeated,
                ..
            } => base
                .join("profile_runs")
                .join(format!("trial_{n:04}"))
                .join(dir_name),
            Layout::Points {
                order: SweepOrder::Independent,
                ..
            } => base
                .join(dir_name)
                .join("profile_runs")
                .join(format!("trial_{n:04}")),
            Layout::SearchIterations { .. } => base
                .join(format!("search_iter_{point:04}"))
                .join("profile_runs")
                .join(format!("run_{n:04}")),
        }
    }

    /// The label of a run in the aggregates: `run_0002`, or the point's directory name for a
    /// single-trial sweep, `trial_0002` within a point otherwise.
    pub fn run_label(self, dir_name: &str, trial0: u32) -> String {
        let n = trial0 + 1;
        match self {
            Layout::Repeats | Layout::SearchIterations { .. } => format!("run_{n:04}"),
            Layout::Points { trials: 1, .. } => dir_name.to_string(),
            Layout::Points { .. } => format!("trial_{n:04}"),
        }
    }

    /// Where the confidence aggregate of a point goes.
    pub fn point_aggregate_dir(self, base: &Path, dir_name: &str) -> PathBuf {
        match self {
            Layout::Repeats => base.join("aggregate"),
            Layout::Points {
                trials,
                order: SweepOrder::Independent,
            } if trials > 1 => base.join(dir_name).join("aggregate"),
            Layout::Points { .. } | Layout::SearchIterations { .. } => {
                base.join("aggregate").join(dir_name)
            }
        }
    }

    /// Where the sweep aggregate goes (none for plain repeats).
    pub fn sweep_aggregate_dir(self, base: &Path) -> Option<PathBuf> {
        match self {
            Layout::Repeats => None,
            Layout::Points {
                trials,
                order: SweepOrder::Repeated,
            } if trials > 1 => Some(base.join("aggregate").join("sweep_aggregate")),
            Layout::SearchIterations { trials } if trials > 1 => {
                Some(base.join("aggregate").join("sweep_aggregate"))
            }
            Layout::Points { .. } | Layout::SearchIterations { .. } => {
                Some(base.join("sweep_aggregate"))
            }
        }
    }
}

/// The first part of `dir` that exists and is not a directory (a file where a directory of
/// the plan must go): creating `dir` would fail there, after the runs before it were made.
pub fn file_in_the_way(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .find(|p| std::fs::symlink_metadata(p).is_ok() && !p.is_dir())
        .map(Path::to_path_buf)
}

/// The runs of a fixed plan, in AIPerf's order: (point, trial0).
pub fn order(points: usize, trials: u32, order: SweepOrder) -> Vec<(usize, u32)> {
    match order {
        SweepOrder::Repeated => (0..trials)
            .flat_map(|t| (0..points).map(move |p| (p, t)))
            .collect(),
        SweepOrder::Independent => (0..points)
            .flat_map(|p| (0..trials).map(move |t| (p, t)))
            .collect(),
    }
}

/// The pause before run `next` when `prev` ran last: the repeated-run cooldown between
/// trials, the sweep cooldown between points (AIPerf's table for both orders).
pub fn pause(opts: &MultiRunOptions, prev: (usize, u32), next: (usize, u32)) -> Duration {
    let new_trial = next.1 != prev.1;
    let new_point = next.0 != prev.0;
    match opts.order {
        SweepOrder::Repeated if new_trial => opts.run_cooldown,
        SweepOrder::Repeated => opts.sweep_cooldown,
        SweepOrder::Independent if new_point => opts.sweep_cooldown,
        SweepOrder::Independent => opts.run_cooldown,
    }
}

/// The seed every run starts from: --random-seed, else 42 when runs must be comparable
/// (--set-consistent-seed, the default), else none.
pub fn base_seed(random_seed: Option<u64>, opts: &MultiRunOptions) -> Option<u64> {
    random_seed.or(opts.consistent_seed.then_some(42))
}

/// The seed of trial `trial0` of point `point` labelled `label`.
pub fn run_seed(
    base: Option<u64>,
    opts: &MultiRunOptions,
    point: usize,
    label: &str,
    trial0: u32,
) -> Option<u64> {
    let base = base?;
    if opts.vary_seed_per_trial {
        return Some(trial_seed(base, label, trial0));
    }
    Some(if opts.same_seed {
        base
    } else {
        base.wrapping_add(point as u64)
    })
}

/// AIPerf's per-trial seed: the first 8 bytes (big-endian) of
/// SHA-256("<base>:variation:<label>:trial:<trial0>"), kept to 63 bits.
pub fn trial_seed(base: u64, label: &str, trial0: u32) -> u64 {
    let digest = Sha256::digest(format!("{base}:variation:{label}:trial:{trial0}"));
    let first: [u8; 8] = digest[..8].try_into().expect("SHA-256 has 32 bytes");
    u64::from_be_bytes(first) & 0x7FFF_FFFF_FFFF_FFFF
}

/// `steps` log-spaced whole numbers from `lo` to `hi` (both kept), duplicates dropped.
pub fn log_ladder(lo: u64, hi: u64, steps: u64) -> Vec<u64> {
    let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
    let mut out: Vec<u64> = (0..steps)
        .map(|i| {
            let t = i as f64 / (steps - 1) as f64;
            ((a + (b - a) * t).exp().round() as u64).max(1)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trial_seeds_match_aiperf() {
        assert_eq!(trial_seed(42, "base", 0), 6858774025263032934);
        assert_eq!(trial_seed(42, "base", 1), 4337237111802998792);
    }

    #[test]
    fn directories_follow_aiperf() {
        let b = Path::new("b");
        let r = Layout::Repeats;
        assert_eq!(
            r.run_dir(b, 0, "x", 1),
            Path::new("b/profile_runs/run_0002")
        );
        assert_eq!(r.point_aggregate_dir(b, "x"), Path::new("b/aggregate"));
        assert_eq!(r.sweep_aggregate_dir(b), None);
        let one = Layout::Points {
            trials: 1,
            order: SweepOrder::Repeated,
        };
        assert_eq!(
            one.run_dir(b, 1, "concurrency_4", 0),
            Path::new("b/concurrency_4")
        );
        assert_eq!(
            one.point_aggregate_dir(b, "concurrency_4"),
            Path::new("b/aggregate/concurrency_4")
        );
        assert_eq!(
            one.sweep_aggregate_dir(b).unwrap(),
            Path::new("b/sweep_aggregate")
        );
        let rep = Layout::Points {
            trials: 2,
            order: SweepOrder::Repeated,
        };
        assert_eq!(
            rep.run_dir(b, 0, "c", 1),
            Path::new("b/profile_runs/trial_0002/c")
        );
        assert_eq!(
            rep.sweep_aggregate_dir(b).unwrap(),
            Path::new("b/aggregate/sweep_aggregate")
        );
        let ind = Layout::Points {
            trials: 2,
            order: SweepOrder::Independent,
        };
        assert_eq!(
            ind.run_dir(b, 0, "c", 0),
            Path::new("b/c/profile_runs/trial_0001")
        );
        assert_eq!(ind.point_aggregate_dir(b, "c"), Path::new("b/c/aggregate"));
        assert_eq!(
            ind.sweep_aggregate_dir(b).unwrap(),
            Path::new("b/sweep_aggregate")
        );
        let s = Layout::SearchIterations { trials: 2 };
        assert_eq!(
            s.run_dir(b, 2, "c", 0),
            Path::new("b/search_iter_0002/profile_runs/run_0001")
        );
        assert_eq!(
            s.point_aggregate_dir(b, "concurrency_8"),
            Path::new("b/aggregate/concurrency_8")
        );
        assert_eq!(
            s.sweep_aggregate_dir(b).unwrap(),
            Path::new("b/aggregate/sweep_aggregate")
        );
        assert_eq!(
            Layout::SearchIterations { trials: 1 }
                .sweep_aggregate_dir(b)
                .unwrap(),
            Path::new("b/sweep_aggregate")
        );
    }

    #[test]
    fn run_order() {
        assert_eq!(
            order(2, 2, SweepOrder::Repeated),
            [(0, 0), (1, 0), (0, 1), (1, 1)]
        );
        assert_eq!(
            order(2, 2, SweepOrder::Independent),
            [(0, 0), (0, 1), (1, 0), (1, 1)]
        );
    }

    #[test]
    fn ladders() {
        assert_eq!(log_ladder(1, 1000, 8), [1, 3, 7, 19, 52, 139, 373, 1000]);
        assert_eq!(log_ladder(1, 4, 8), [1, 2, 3, 4]);
    }
}
