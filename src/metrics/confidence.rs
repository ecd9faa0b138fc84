//! Statistics across repeated runs: the run-level mean, sample spread and Student-t
//! confidence interval of one `<metric>_<stat>` value (AIPerf's confidence aggregate), and
//! the criteria that stop adaptive repetition early (`--convergence-mode`).
//!
//! Pure functions, no I/O: `export::aggregate` writes what these compute.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The statistics of a run's summary that the aggregates carry across runs, in AIPerf's order.
pub const STAT_KEYS: [&str; 14] = [
    "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std",
];

/// Spread of one value (e.g. `time_to_first_token_p99`) over the successful runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLevelStats {
    pub mean: f64,
    /// Sample standard deviation (ddof = 1).
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// `std / mean` as a ratio; `+inf` when the mean is 0.
    pub cv: f64,
    /// Standard error, `std / sqrt(n)`.
    pub se: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Student-t quantile at `1 - (1 - level) / 2` with `n - 1` degrees of freedom.
    pub t_critical: f64,
}

impl RunLevelStats {
    /// Statistics of `values` (one per run; NaN and infinities are left out) at confidence
    /// `level` in (0, 1). `None` when no value is finite.
    ///
    /// With a single finite value among several runs the spread is undefined: mean, std,
    /// cv, se, the interval and `t_critical` are NaN (written `null`), min and max keep the
    /// value. A run set with one successful run uses [`RunLevelStats::single_run`] instead.
    pub fn across_runs(values: &[f64], level: f64) -> Option<RunLevelStats> {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let n = finite.len();
        let min = finite.iter().copied().reduce(f64::min)?;
        let max = finite.iter().copied().reduce(f64::max)?;
        if n == 1 {
            let nan = f64::NAN;
            return Some(RunLevelStats {
                mean: nan,
                std: nan,
                min,
                max,
                cv: nan,
                se: nan,
                ci_low: nan,
                ci_high: nan,
                t_critical: nan,
            });
        }
        let mean = finite.iter().sum::<f64>() / n as f64;
        let std = sample_std(&finite, mean);
        let cv = if mean == 0.0 {
            f64::INFINITY
        } else {
            std / mean
        };
        let se = std / (n as f64).sqrt();
        let t = t_critical(level, n - 1);
        Some(RunLevelStats {
            mean,
            std,
            min,
            max,
            cv,
            se,
            ci_low: mean - t * se,
            ci_high: mean + t * se,
            t_critical: t,
        })
    }

    /// The degenerate form when exactly one run succeeded: every figure is the value, no
    /// spread, and `t_critical` NaN because there is no interval.
    pub fn single_run(value: f64) -> RunLevelStats {
        RunLevelStats {
            mean: value,
            std: 0.0,
            min: value,
            max: value,
            cv: 0.0,
            se: 0.0,
            ci_low: value,
            ci_high: value,
            t_critical: f64::NAN,
        }
    }
}

/// Sample standard deviation (ddof = 1) of at least two values around their `mean`.
fn sample_std(values: &[f64], mean: f64) -> f64 {
    let squares: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
    (squares / (values.len() - 1) as f64).sqrt()
}

/// Two-sided Student-t critical value for confidence `level` and `df` degrees of freedom;
/// NaN when `df` is 0 or the level is outside (0, 1).
pub fn t_critical(level: f64, df: usize) -> f64 {
    if df == 0 || !(level > 0.0 && level < 1.0) {
        return f64::NAN;
    }
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) => t.inverse_cdf(1.0 - (1.0 - level) / 2.0),
        Err(_) => f64::NAN,
    }
}

/// How adaptive repetition decides that enough runs were made (`--convergence-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvergenceMode {
    /// The confidence interval's width relative to the mean is below the threshold.
    CiWidth,
    /// The coefficient of variation across runs is below the threshold.
    Cv,
    /// The latest run's per-request values look drawn from the same distribution as the
    /// earlier runs' (Kolmogorov–Smirnov p-value above the threshold).
    Distribution,
}

/// Runs made before a criterion is first judged (AIPerf's `min_runs`; not a flag).
pub const MIN_RUNS: usize = 2;

impl ConvergenceMode {
    /// `--convergence-threshold` when not given.
    pub fn default_threshold(self) -> f64 {
        match self {
            ConvergenceMode::CiWidth => 0.10,
            ConvergenceMode::Cv => 0.05,
            ConvergenceMode::Distribution => 0.05,
        }
    }
}

/// Whether the run-level `values` (the chosen stat of the metric, one per successful run)
/// meet `mode`'s criterion. Only `CiWidth` and `Cv` judge run-level values; `Distribution`
/// compares per-request values with [`distributions_match`], so here it is never met.
/// Non-finite values are left out; too few values, or a zero mean, is "not yet".
pub fn has_converged(mode: ConvergenceMode, threshold: f64, level: f64, values: &[f64]) -> bool {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = finite.len();
    if n < MIN_RUNS.max(2) {
        return false;
    }
    let mean = finite.iter().sum::<f64>() / n as f64;
    if mean == 0.0 {
        return false;
    }
    let std = sample_std(&finite, mean);
    let ratio = match mode {
        ConvergenceMode::CiWidth => 2.0 * t_critical(level, n - 1) * std / (n as f64).sqrt(),
        ConvergenceMode::Cv => std,
        ConvergenceMode::Distribution => return false,
    } / mean.abs();
    ratio < threshold
}

/// The distribution criterion: the latest run's per-request values against those of the
/// runs before it. Met when the two-sample Kolmogorov–Smirnov p-value is above
/// `threshold`; each side needs at least two values.
pub fn distributions_match(earlier: &[f64], latest: &[f64], threshold: f64) -> bool {
    if earlier.len() < 2 || latest.len() < 2 {
        return false;
    }
    ks_2samp(earlier, latest).1 > threshold
}

/// Largest sample size for which the p-value is computed exactly (as scipy's `ks_2samp`
/// does by default); above it the asymptotic distribution is used.
const EXACT_MAX_N: usize = 10_000;

/// Two-sample Kolmogorov–Smirnov test, two-sided: the statistic D (largest gap between
/// the two empirical CDFs) and its p-value. NaN values are ignored; an empty side gives
/// `(NaN, NaN)`.
///
/// The p-value is exact, like scipy's default, while neither sample has more than 10 000
/// values: the probability that a uniformly random interleaving of the two samples (a
/// lattice path from (0,0) to (n1,n2)) reaches a gap of at least D, summed over the
/// points where paths first reach it. Larger samples use Kolmogorov's limiting
/// distribution at `sqrt(n1·n2/(n1+n2))·D` (scipy uses the finite-n one-sample
/// distribution there; at these sizes the two differ in the third decimal at most).
pub fn ks_2samp(a: &[f64], b: &[f64]) -> (f64, f64) {
    let mut a: Vec<f64> = a.iter().copied().filter(|v| !v.is_nan()).collect();
    let mut b: Vec<f64> = b.iter().copied().filter(|v| !v.is_nan()).collect();
    if a.is_empty() || b.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n1, n2) = (a.len() as u64, b.len() as u64);
    // The gap in units of 1/(n1·n2): |i·n2 − j·n1| after the first i values of a and the
    // first j of b, taken where both CDFs have passed every copy of a value.
    let (mut i, mut j, mut gap) = (0usize, 0usize, 0u64);
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.min(*y),
            (Some(x), None) => *x,
            (None, Some(y)) => *y,
            (None, None) => unreachable!(),
        };
        while a.get(i) == Some(&v) {
            i += 1;
        }
        while b.get(j) == Some(&v) {
            j += 1;
        }
        gap = gap.max((i as u64 * n2).abs_diff(j as u64 * n1));
    }
    let d = gap as f64 / (n1 * n2) as f64;
    let p = if a.len().max(b.len()) <= EXACT_MAX_N {
        exact_p_value(n1, n2, gap)
    } else {
        let en = (n1 * n2) as f64 / (n1 + n2) as f64;
        kolmogorov_sf(en.sqrt() * d)
    };
    (d, p.clamp(0.0, 1.0))
}

/// Probability that a uniformly random lattice path from (0,0) to (n1,n2) touches a point
/// with `|i·n2 − j·n1| >= gap` (the exact null distribution of D without ties).
fn exact_p_value(n1: u64, n2: u64, gap: u64) -> f64 {
    if gap == 0 {
        return 1.0;
    }
    let outside = |i: u64, j: u64| (i * n2).abs_diff(j * n1) >= gap;
    // inside[j]: probability of being at (i, j) without having touched the boundary.
    let mut inside = vec![0.0f64; n2 as usize + 1];
    inside[0] = 1.0;
    let mut reached = 0.0;
    for i in 0..=n1 {
        let mut next = vec![0.0f64; n2 as usize + 1];
        for j in 0..=n2 {
            let p = inside[j as usize];
            if p == 0.0 {
                continue;
            }
            let (left_a, left_b) = ((n1 - i) as f64, (n2 - j) as f64);
            let total = left_a + left_b;
            if total == 0.0 {
                continue;
            }
            // Step in a: to (i + 1, j).
            if left_a > 0.0 {
                let q = p * left_a / total;
                if outside(i + 1, j) {
                    reached += q;
                } else {
                    next[j as usize] += q;
                }
            }
            // Step in b: to (i, j + 1), still in this row.
            if left_b > 0.0 {
                let q = p * left_b / total;
                if outside(i, j + 1) {
                    reached += q;
                } else {
                    inside[j as usize + 1] += q;
                }
            }
        }
        inside = next;
    }
    reached
}

/// Survival function of Kolmogorov's limiting distribution, P(K > x).
pub fn kolmogorov_sf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 1.0;
    }
    if x < 1.18 {
        // The theta-function form converges fast for small x.
        let w = std::f64::consts::PI.powi(2) / (8.0 * x * x);
        let cdf: f64 = (1..=20)
            .map(|k| (-((2 * k - 1) as f64).powi(2) * w).exp())
            .sum::<f64>()
            * (2.0 * std::f64::consts::PI).sqrt()
            / x;
        1.0 - cdf
    } else {
        let sf: f64 = (1..=100)
            .map(|k| {
                let sign = if k % 2 == 1 { 1.0 } else { -1.0 };
                sign * (-2.0 * (k * k) as f64 * x * x).exp()
            })
            .sum();
        2.0 * sf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn t_critical_matches_scipy() {
        // scipy.stats.t.ppf(0.975, 2) prints 4.302652729911275; the closed form for two
        // degrees of freedom, a·sqrt(2 / (1 − a²)) with a = 0.95, is 4.302652729749463:
        // scipy is 1.6e-10 off, statrs matches the closed form.
        assert!(close(t_critical(0.95, 2), 4.302652729911275, 1e-9));
        assert!(close(
            t_critical(0.95, 2),
            0.95 * (2.0f64 / (1.0 - 0.95 * 0.95)).sqrt(),
            1e-13
        ));
        // One degree of freedom is the Cauchy distribution: tan(π·0.475).
        let cauchy = (std::f64::consts::PI * 0.475).tan();
        assert!(close(t_critical(0.95, 1), cauchy, 1e-9));
        // scipy: t.ppf(0.95, 9) = 1.8331129326536335.
        assert!(close(t_critical(0.90, 9), 1.8331129326536335, 1e-9));
        assert!(t_critical(0.95, 0).is_nan());
        assert!(t_critical(1.0, 3).is_nan());
    }

    #[test]
    fn three_runs_use_the_sample_std_and_t_interval() {
        let s = RunLevelStats::across_runs(&[10.0, 12.0, 14.0], 0.95).unwrap();
        assert_eq!(s.mean, 12.0);
        // ddof=1: sqrt((4 + 0 + 4) / 2) = 2 (ddof=0 would give 1.633).
        assert_eq!(s.std, 2.0);
        assert_eq!((s.min, s.max), (10.0, 14.0));
        assert!(close(s.cv, 2.0 / 12.0, 1e-15));
        assert!(close(s.se, 2.0 / 3f64.sqrt(), 1e-15));
        assert!(close(s.t_critical, 4.302652729911275, 1e-9));
        let margin = 4.302652729911275 * 2.0 / 3f64.sqrt();
        assert!(close(s.ci_low, 12.0 - margin, 1e-9));
        assert!(close(s.ci_high, 12.0 + margin, 1e-9));
    }

    #[test]
    fn non_finite_values_are_left_out() {
        let s = RunLevelStats::across_runs(&[1.0, f64::NAN, 3.0, f64::INFINITY], 0.95).unwrap();
        assert_eq!(s.mean, 2.0);
        assert!(close(s.t_critical, 12.706204736174698, 1e-8));
        assert!(RunLevelStats::across_runs(&[f64::NAN], 0.95).is_none());
        assert!(RunLevelStats::across_runs(&[], 0.95).is_none());
    }

    #[test]
    fn zero_mean_gives_infinite_cv() {
        let s = RunLevelStats::across_runs(&[-1.0, 1.0], 0.95).unwrap();
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.cv, f64::INFINITY);
        let zeros = RunLevelStats::across_runs(&[0.0, 0.0, 0.0], 0.95).unwrap();
        assert_eq!((zeros.std, zeros.cv), (0.0, f64::INFINITY));
    }

    #[test]
    fn one_finite_value_among_several_runs_has_no_spread() {
        let s = RunLevelStats::across_runs(&[f64::NAN, 7.0, f64::NAN], 0.95).unwrap();
        assert!(s.mean.is_nan() && s.std.is_nan() && s.cv.is_nan() && s.se.is_nan());
        assert!(s.ci_low.is_nan() && s.ci_high.is_nan() && s.t_critical.is_nan());
        assert_eq!((s.min, s.max), (7.0, 7.0));
    }

    #[test]
    fn single_successful_run_is_a_point_estimate() {
        let s = RunLevelStats::single_run(5.5);
        assert_eq!(
            (s.mean, s.min, s.max, s.ci_low, s.ci_high),
            (5.5, 5.5, 5.5, 5.5, 5.5)
        );
        assert_eq!((s.std, s.cv, s.se), (0.0, 0.0, 0.0));
        assert!(s.t_critical.is_nan());
    }

    #[test]
    fn ci_width_and_cv_criteria() {
        // mean 100, std 1, n 3: ci ratio = 2 * 4.3027 * 1 / sqrt(3) / 100 = 0.0497.
        let tight = [99.0, 100.0, 101.0];
        assert!(has_converged(ConvergenceMode::CiWidth, 0.10, 0.95, &tight));
        assert!(!has_converged(ConvergenceMode::CiWidth, 0.04, 0.95, &tight));
        // cv = 0.01
        assert!(has_converged(ConvergenceMode::Cv, 0.05, 0.95, &tight));
        assert!(!has_converged(ConvergenceMode::Cv, 0.009, 0.95, &tight));
        // Too few values, or a zero mean, never converge.
        assert!(!has_converged(ConvergenceMode::Cv, 0.05, 0.95, &[100.0]));
        assert!(!has_converged(
            ConvergenceMode::Cv,
            0.05,
            0.95,
            &[100.0, f64::NAN]
        ));
        assert!(!has_converged(
            ConvergenceMode::CiWidth,
            0.5,
            0.95,
            &[-1.0, 1.0]
        ));
        assert!(!has_converged(
            ConvergenceMode::Distribution,
            0.05,
            0.95,
            &tight
        ));
        assert_eq!(ConvergenceMode::CiWidth.default_threshold(), 0.10);
        assert_eq!(ConvergenceMode::Cv.default_threshold(), 0.05);
        assert_eq!(ConvergenceMode::Distribution.default_threshold(), 0.05);
    }

    #[test]
    fn ks_separated_samples_match_scipy() {
        // scipy.stats.ks_2samp([1,2,3], [4,5,6]) -> statistic 1.0, pvalue 0.1 (2 of 20 paths).
        let (d, p) = ks_2samp(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert_eq!(d, 1.0);
        assert!(close(p, 0.1, 1e-12), "{p}");
        // Five against five: 2 / C(10, 5) = 0.007936507936507936.
        let a: Vec<f64> = (1..=5).map(f64::from).collect();
        let b: Vec<f64> = (6..=10).map(f64::from).collect();
        assert!(close(ks_2samp(&a, &b).1, 2.0 / 252.0, 1e-12));
        // Identical samples: D = 0, p = 1.
        assert_eq!(ks_2samp(&a, &a), (0.0, 1.0));
        assert!(ks_2samp(&[], &a).1.is_nan());
    }

    /// All C(m+n, m) ways to split the pooled (distinct) values into the two samples.
    fn brute_force_p(a: &[f64], b: &[f64]) -> f64 {
        let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
        let (m, total) = (a.len(), pooled.len());
        let observed = ks_2samp(a, b).0;
        let (mut hits, mut all) = (0u64, 0u64);
        for mask in 0u32..(1 << total) {
            if mask.count_ones() as usize != m {
                continue;
            }
            let (mut x, mut y) = (Vec::new(), Vec::new());
            for (k, v) in pooled.iter().enumerate() {
                if mask & (1 << k) != 0 {
                    x.push(*v);
                } else {
                    y.push(*v);
                }
            }
            all += 1;
            if ks_2samp(&x, &y).0 >= observed - 1e-12 {
                hits += 1;
            }
        }
        hits as f64 / all as f64
    }

    #[test]
    fn ks_exact_p_value_equals_brute_force_enumeration() {
        let cases: [(&[f64], &[f64]); 5] = [
            (&[0.1, 0.5, 0.9, 1.3], &[0.2, 0.3, 1.5, 1.7, 2.2, 2.4]),
            (&[3.0, 1.0, 4.0, 1.5, 9.0], &[2.6, 5.3, 5.8, 9.7, 9.3]),
            (&[0.3, 0.4], &[0.1, 0.2, 0.5, 0.6, 0.7, 0.8, 0.9]),
            (
                &[1.1, 2.2, 3.3, 4.4, 5.5, 6.6],
                &[1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0],
            ),
            (&[10.0, 11.0, 12.0], &[1.0, 10.5, 20.0, 30.0]),
        ];
        for (a, b) in cases {
            let exact = ks_2samp(a, b).1;
            let brute = brute_force_p(a, b);
            assert!(
                close(exact, brute, 1e-12),
                "{a:?} {b:?}: {exact} vs {brute}"
            );
        }
    }

    #[test]
    fn ks_ties_count_where_both_cdfs_have_passed_the_value() {
        // ECDFs at 1: 2/3 and 1/3, at 2: 1 and 1 -> D = 1/3.
        let (d, _) = ks_2samp(&[1.0, 1.0, 2.0], &[1.0, 2.0, 2.0]);
        assert!(close(d, 1.0 / 3.0, 1e-15));
    }

    #[test]
    fn kolmogorov_limit_distribution() {
        // scipy.stats.kstwobign: sf(1.3580986393225505) = 0.05, sf(0.5) = 0.9639452436648751,
        // sf(1.0) = 0.26999967167735456.
        assert!(close(kolmogorov_sf(1.3580986393225505), 0.05, 1e-9));
        assert!(close(kolmogorov_sf(0.5), 0.9639452436648751, 1e-12));
        assert!(close(kolmogorov_sf(1.0), 0.26999967167735456, 1e-12));
        assert_eq!(kolmogorov_sf(0.0), 1.0);
        // Large samples take the limit: 20 000 against 20 000 shifted by half a step.
        let a: Vec<f64> = (0..20_000).map(f64::from).collect();
        let b: Vec<f64> = (0..20_000).map(|v| f64::from(v) + 0.5).collect();
        let (d, p) = ks_2samp(&a, &b);
        assert!(close(d, 1.0 / 20_000.0, 1e-15));
        assert_eq!(p, 1.0);
        assert!(distributions_match(&a, &b, 0.05));
        let far: Vec<f64> = b.iter().map(|v| v + 5_000.0).collect();
        assert!(!distributions_match(&a, &far, 0.05));
    }

    #[test]
    fn distribution_criterion_needs_two_values_a_side() {
        assert!(!distributions_match(&[1.0], &[1.0, 2.0], 0.05));
        assert!(distributions_match(&[1.0, 2.0, 3.0], &[1.5, 2.5], 0.05));
        assert!(!distributions_match(
            &[1.0, 2.0, 3.0, 4.0, 5.0],
            &[6.0, 7.0, 8.0, 9.0, 10.0],
            0.05
        ));
    }
}
