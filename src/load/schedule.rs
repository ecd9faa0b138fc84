//! Open-loop arrival schedules: the send offset of every request, drawn up front from the
//! run's seed so that pacing never depends on how late the previous send was.

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma};

/// How inter-arrival gaps are drawn (AIPerf's `--arrival-pattern` / `--request-rate-mode`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArrivalPattern {
    /// Every gap is exactly 1 / rate.
    Constant,
    /// Exponential gaps with mean 1 / rate (a Poisson process).
    Poisson,
    /// Gamma gaps with mean 1 / rate and the given shape (vLLM's `--burstiness`): shape 1 is
    /// Poisson, below 1 burstier, above 1 smoother. Variance of a gap = mean^2 / shape.
    Gamma { shape: f64 },
}

impl ArrivalPattern {
    /// Its name in AIPerf's config (the phase type of a rate-paced phase).
    pub fn as_str(&self) -> &'static str {
        match self {
            ArrivalPattern::Constant => "constant",
            ArrivalPattern::Poisson => "poisson",
            ArrivalPattern::Gamma { .. } => "gamma",
        }
    }
}

#[cfg(test)]
/// Send offsets in nanoseconds from the start of the phase, one per request; the first
/// request goes at offset 0.
pub fn arrival_offsets_ns(pattern: ArrivalPattern, rate: f64, count: usize, seed: u64) -> Vec<u64> {
    Arrivals::new(pattern, rate, seed).take(count).collect()
}

/// The same offsets as [`arrival_offsets_ns`], drawn one at a time: a run limited by
/// duration does not know its request count up front.
pub struct Arrivals {
    pattern: ArrivalPattern,
    rate: f64,
    rng: ChaCha8Rng,
    /// Seconds since the phase start of the next arrival (one running sum, so no drift).
    t: f64,
    first: bool,
}

impl Arrivals {
    pub fn new(pattern: ArrivalPattern, rate: f64, seed: u64) -> Self {
        assert!(rate > 0.0 && rate.is_finite(), "rate must be positive");
        if let ArrivalPattern::Gamma { shape } = pattern {
            assert!(
                shape > 0.0 && shape.is_finite(),
                "gamma shape must be positive"
            );
        }
        Arrivals {
            pattern,
            rate,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x00a7_717a_150f_f5e7_u64),
            t: 0.0,
            first: true,
        }
    }
}

impl Iterator for Arrivals {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if !self.first {
            let mean_gap_s = 1.0 / self.rate;
            self.t += match self.pattern {
                ArrivalPattern::Constant => mean_gap_s,
                ArrivalPattern::Poisson => {
                    Exp::new(self.rate).expect("rate > 0").sample(&mut self.rng)
                }
                ArrivalPattern::Gamma { shape } => Gamma::new(shape, mean_gap_s / shape)
                    .expect("shape > 0")
                    .sample(&mut self.rng),
            };
        }
        self.first = false;
        Some((self.t * 1e9).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps_s(offsets: &[u64]) -> Vec<f64> {
        offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64 / 1e9)
            .collect()
    }

    fn mean_var(x: &[f64]) -> (f64, f64) {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        (
            m,
            x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0),
        )
    }

    #[test]
    fn constant_is_even_and_never_drifts() {
        let o = arrival_offsets_ns(ArrivalPattern::Constant, 3.0, 3001, 1);
        assert_eq!(o[0], 0);
        // Offsets come from one running sum: after 3,000 gaps of 1/3 s it is 1,000 s to the ns.
        assert!(
            (o[3000] as i64 - 1_000_000_000_000).abs() <= 1,
            "{}",
            o[3000]
        );
        for g in gaps_s(&o) {
            assert!((g - 1.0 / 3.0).abs() < 1e-6);
        }
    }

    /// Kolmogorov-Smirnov statistic of the gaps against Exp(rate).
    fn ks_exponential(gaps: &mut [f64], rate: f64) -> f64 {
        gaps.sort_by(f64::total_cmp);
        let n = gaps.len() as f64;
        gaps.iter()
            .enumerate()
            .map(|(i, &x)| {
                let cdf = 1.0 - (-rate * x).exp();
                (cdf - i as f64 / n)
                    .abs()
                    .max(((i + 1) as f64 / n - cdf).abs())
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn poisson_gaps_pass_a_ks_test_against_the_exponential() {
        let rate = 250.0;
        let o = arrival_offsets_ns(ArrivalPattern::Poisson, rate, 5001, 7);
        let mut g = gaps_s(&o);
        let d = ks_exponential(&mut g, rate);
        // Critical value at alpha = 0.01 is 1.628 / sqrt(n).
        let critical = 1.628 / (g.len() as f64).sqrt();
        assert!(d < critical, "KS D = {d:.4} >= {critical:.4}");
        // And a clearly wrong rate is rejected by the same test.
        assert!(ks_exponential(&mut g, rate * 1.2) > critical);
    }

    #[test]
    fn gamma_variance_follows_its_shape() {
        let rate = 100.0;
        for shape in [0.25, 1.0, 4.0] {
            let o = arrival_offsets_ns(ArrivalPattern::Gamma { shape }, rate, 20_001, 3);
            let (m, v) = mean_var(&gaps_s(&o));
            let want_v = (1.0 / rate).powi(2) / shape;
            assert!((m * rate - 1.0).abs() < 0.05, "shape {shape}: mean {m}");
            assert!(
                (v / want_v - 1.0).abs() < 0.15,
                "shape {shape}: var {v} want {want_v}"
            );
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let a = arrival_offsets_ns(ArrivalPattern::Poisson, 10.0, 100, 5);
        assert_eq!(a, arrival_offsets_ns(ArrivalPattern::Poisson, 10.0, 100, 5));
        assert_ne!(a, arrival_offsets_ns(ArrivalPattern::Poisson, 10.0, 100, 6));
    }
}
