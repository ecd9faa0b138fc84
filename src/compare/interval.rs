//! Confidence intervals of a relative change (new / base - 1, in %): a percentile bootstrap
//! over requests, or a Student-t interval across trials when both sides were repeated.

use rand::RngExt;

use crate::metrics::confidence::{RunLevelStats, t_critical};
use crate::stats::percentile_sorted;

/// A statistic of a per-request distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    Avg,
    P50,
    P90,
    P99,
}

impl Stat {
    pub const ALL: [Stat; 4] = [Stat::Avg, Stat::P50, Stat::P90, Stat::P99];

    /// The name the summary JSON uses.
    pub fn name(self) -> &'static str {
        match self {
            Stat::Avg => "avg",
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
        }
    }

    /// How many of `n` values lie beyond the statistic (all of them for the mean).
    pub fn tail(self, n: usize) -> f64 {
        let beyond = match self {
            Stat::Avg => 1.0,
            Stat::P50 => 0.5,
            Stat::P90 => 0.1,
            Stat::P99 => 0.01,
        };
        n as f64 * beyond
    }

    /// The statistic of a resample of `sorted` held as `cumulative` counts (see
    /// `resample`).
    fn of_resample(self, sorted: &[f64], cumulative: &[u32]) -> f64 {
        let n = sorted.len();
        // The resample's value at rank k: the first value drawn more than k times so far.
        let at = |k: usize| sorted[cumulative.partition_point(|&c| c as usize <= k)];
        let percentile = |p| crate::stats::percentile_at(n, p, at);
        match self {
            Stat::Avg => {
                let mut before = 0;
                let mut sum = 0.0;
                for (x, &c) in sorted.iter().zip(cumulative) {
                    sum += x * f64::from(c - before);
                    before = c;
                }
                sum / n as f64
            }
            Stat::P50 => percentile(50.0),
            Stat::P90 => percentile(90.0),
            Stat::P99 => percentile(99.0),
        }
    }

    /// The statistic of values sorted ascending (percentiles by numpy's linear rule).
    pub fn of_sorted(self, sorted: &[f64]) -> f64 {
        match self {
            Stat::Avg => sorted.iter().sum::<f64>() / sorted.len() as f64,
            Stat::P50 => percentile_sorted(sorted, 50.0),
            Stat::P90 => percentile_sorted(sorted, 90.0),
            Stat::P99 => percentile_sorted(sorted, 99.0),
        }
    }
}

/// `new` relative to `base`, in %; 0 when both are 0 (no errors on either side).
pub fn change_pct(base: f64, new: f64) -> f64 {
    if base == new {
        return 0.0;
    }
    (new / base - 1.0) * 100.0
}

/// Sorted copy (the statistics read sorted values).
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Percentile bootstrap of the change of each of `stats`: `resamples` times, both sides'
/// requests are drawn with replacement (each side its own size) and the change computed;
/// the interval is the (1 - confidence)/2 and (1 + confidence)/2 percentiles of those
/// changes. One (low, high) per stat, in %.
pub fn bootstrap(
    base: &[f64],
    new: &[f64],
    stats: &[Stat],
    resamples: usize,
    confidence: f64,
    rng: &mut impl RngExt,
) -> Vec<(f64, f64)> {
    let (base, new) = (sorted(base), sorted(new));
    let mut changes = vec![Vec::with_capacity(resamples); stats.len()];
    let (mut b, mut n) = (vec![0; base.len()], vec![0; new.len()]);
    for _ in 0..resamples {
        resample(&mut b, rng);
        resample(&mut n, rng);
        for (s, c) in stats.iter().zip(&mut changes) {
            c.push(change_pct(
                s.of_resample(&base, &b),
                s.of_resample(&new, &n),
            ));
        }
    }
    changes
        .into_iter()
        .map(|c| {
            let c = sorted(&c);
            let tail = (1.0 - confidence) / 2.0 * 100.0;
            (
                percentile_sorted(&c, tail),
                percentile_sorted(&c, 100.0 - tail),
            )
        })
        .collect()
}

/// One resample of n sorted values (n drawn with replacement), held as the running count
/// of draws up to each value: its order statistics are then found by binary search, with
/// no sort of the resample (O(n) per resample, not O(n log n): runs have 100k requests).
fn resample(cumulative: &mut [u32], rng: &mut impl RngExt) {
    let n = cumulative.len();
    cumulative.fill(0);
    for _ in 0..n {
        cumulative[rng.random_range(0..n)] += 1;
    }
    let mut total = 0;
    for c in cumulative.iter_mut() {
        total += *c;
        *c = total;
    }
}

/// Interval of the change of the mean across trials (one value per trial, at least two per
/// side): Welch's t interval of the difference of the means, divided by the base mean.
/// The base mean's own uncertainty in that divisor is left out (it is second order while
/// the change is small). `None` when a side has fewer than two trials.
pub fn across_trials(base: &[f64], new: &[f64], confidence: f64) -> Option<(f64, f64)> {
    if base.len() < 2 || new.len() < 2 {
        return None;
    }
    let b = RunLevelStats::across_runs(base, confidence)?;
    let n = RunLevelStats::across_runs(new, confidence)?;
    let (vb, vn) = (b.se * b.se, n.se * n.se);
    let se = (vb + vn).sqrt();
    // Welch–Satterthwaite degrees of freedom, rounded down (the wider interval).
    let df =
        (vb + vn).powi(2) / (vb * vb / (base.len() - 1) as f64 + vn * vn / (new.len() - 1) as f64);
    let df = if df.is_finite() {
        df.floor().max(1.0)
    } else {
        1.0
    };
    let t = t_critical(confidence, df as usize);
    let diff = n.mean - b.mean;
    let to_pct = |d: f64| d / b.mean * 100.0;
    Some((to_pct(diff - t * se), to_pct(diff + t * se)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::ChaCha8Rng;
    use rand_distr::{Distribution, Exp};

    /// The bootstrap interval of a change of the mean agrees with the normal approximation's
    /// closed form, mean_new/mean_base - 1 ± z·sqrt(se_b²·(m_n/m_b²)² + se_n²/m_b²) (delta
    /// method), for skewed samples large enough for both to hold.
    #[test]
    fn the_bootstrap_of_the_mean_matches_the_delta_method() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let exp = Exp::new(1.0 / 20.0).unwrap();
        let base: Vec<f64> = (0..400).map(|_| 10.0 + exp.sample(&mut rng)).collect();
        let new: Vec<f64> = (0..300).map(|_| 12.0 + exp.sample(&mut rng)).collect();
        let (lo, hi) = bootstrap(&base, &new, &[Stat::Avg], 4000, 0.95, &mut rng)[0];

        let mean_se = |v: &[f64]| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64;
            (m, (var / v.len() as f64).sqrt())
        };
        let ((mb, sb), (mn, sn)) = (mean_se(&base), mean_se(&new));
        let ratio_se = ((sb * mn / (mb * mb)).powi(2) + (sn / mb).powi(2)).sqrt();
        let z = 1.959964;
        let (clo, chi) = (
            (mn / mb - 1.0 - z * ratio_se) * 100.0,
            (mn / mb - 1.0 + z * ratio_se) * 100.0,
        );
        let width = chi - clo;
        eprintln!("bootstrap [{lo:.3}, {hi:.3}], closed form [{clo:.3}, {chi:.3}]");
        assert!(
            (lo - clo).abs() < 0.1 * width && (hi - chi).abs() < 0.1 * width,
            "bootstrap [{lo:.2}, {hi:.2}] vs closed form [{clo:.2}, {chi:.2}]"
        );
    }

    /// Two samples of one distribution: over 40 pairs, the 95% interval of the change of
    /// the mean and of the median excludes 0 in about 5% of them (at most 15% allowed).
    #[test]
    fn the_false_alarm_rate_over_40_pairs_stays_near_5_percent() {
        let mut rng = ChaCha8Rng::seed_from_u64(46);
        let exp = Exp::new(1.0 / 5.0).unwrap();
        let draw = |rng: &mut ChaCha8Rng| -> Vec<f64> {
            (0..200).map(|_| 20.0 + exp.sample(rng)).collect()
        };
        let stats = [Stat::Avg, Stat::P50];
        let mut alarms = [0; 2];
        for _ in 0..40 {
            let (a, b) = (draw(&mut rng), draw(&mut rng));
            for (i, (lo, hi)) in bootstrap(&a, &b, &stats, 1000, 0.95, &mut rng)
                .into_iter()
                .enumerate()
            {
                alarms[i] += usize::from(lo > 0.0 || hi < 0.0);
            }
        }
        eprintln!("false alarms of 40 pairs (avg, p50): {alarms:?}");
        assert!(alarms.iter().all(|&a| a <= 6), "{alarms:?} of 40");
    }

    /// A shifted sample is caught, and the interval holds the true change.
    #[test]
    fn a_true_change_lies_in_the_interval() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let exp = Exp::new(1.0).unwrap();
        let base: Vec<f64> = (0..300).map(|_| 20.0 + exp.sample(&mut rng)).collect();
        let new: Vec<f64> = base.iter().map(|x| x * 1.5).collect();
        for (s, (lo, hi)) in
            Stat::ALL
                .iter()
                .zip(bootstrap(&base, &new, &Stat::ALL, 2000, 0.95, &mut rng))
        {
            assert!(lo < 50.0 && 50.0 < hi && lo > 30.0, "{s:?}: [{lo}, {hi}]");
        }
    }

    /// A resample held as counts gives the statistics of the same values sorted.
    #[test]
    fn a_resample_as_counts_has_the_statistics_of_its_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let values = sorted(&(0..37).map(|i| f64::from(i * i % 11)).collect::<Vec<_>>());
        let mut cumulative = vec![0; values.len()];
        for _ in 0..20 {
            resample(&mut cumulative, &mut rng);
            let mut expanded = Vec::new();
            let mut before = 0;
            for (x, &c) in values.iter().zip(&cumulative) {
                expanded.extend(std::iter::repeat_n(*x, (c - before) as usize));
                before = c;
            }
            assert_eq!(expanded.len(), values.len());
            for s in Stat::ALL {
                let (a, b) = (s.of_resample(&values, &cumulative), s.of_sorted(&expanded));
                assert!((a - b).abs() < 1e-12, "{s:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn across_trials_is_welchs_interval_over_the_base_mean() {
        // Means 10 and 11, sample variances 1 and 1, three trials each: se² = 1/3 + 1/3,
        // df = 4, t(0.975, 4) = 2.776445.
        let (lo, hi) = across_trials(&[9.0, 10.0, 11.0], &[10.0, 11.0, 12.0], 0.95).unwrap();
        let half = 2.776445 * (2.0f64 / 3.0).sqrt() * 10.0;
        assert!((lo - (10.0 - half)).abs() < 1e-4, "{lo}");
        assert!((hi - (10.0 + half)).abs() < 1e-4, "{hi}");
        assert_eq!(across_trials(&[1.0], &[1.0, 2.0], 0.95), None);
    }
}
