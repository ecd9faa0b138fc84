//! The tree-structured Parzen estimator, as Optuna's `TPESampler` (its defaults: one
//! estimator per dimension, the best ⌈10%⌉ (at most 25) points as "good", 24 candidates
//! drawn from the good points' estimator, the one with the highest good/bad density ratio
//! kept). With constraints, feasible points rank first and infeasible ones by how far they
//! miss, as Optuna's constrained TPE.

use rand::RngExt;
use rand::rngs::ChaCha8Rng;

use super::{Box01, Observation, cdf, normal, phi};

const CANDIDATES: usize = 24;
/// Rounds of candidates tried when every candidate was measured already.
const ROUNDS: usize = 8;

/// A mixture of normals truncated to [0, 1], one per point plus a wide prior.
struct Parzen {
    mus: Vec<f64>,
    sigmas: Vec<f64>,
}

impl Parzen {
    fn new(points: &[f64]) -> Parzen {
        // The prior: centred, as wide as the box (Optuna's prior_weight 1).
        let mut mus: Vec<f64> = points.to_vec();
        mus.push(0.5);
        let mut order: Vec<usize> = (0..mus.len()).collect();
        order.sort_by(|a, b| mus[*a].total_cmp(&mus[*b]));
        let min_sigma = 1.0 / (100.0_f64).min(1.0 + points.len() as f64);
        let mut sigmas = vec![1.0; mus.len()];
        // Each point's width: the larger gap to its neighbours (the box edges at the ends).
        for (rank, &i) in order.iter().enumerate() {
            if i == points.len() {
                continue;
            }
            let left = if rank == 0 { 0.0 } else { mus[order[rank - 1]] };
            let right = if rank + 1 == order.len() {
                1.0
            } else {
                mus[order[rank + 1]]
            };
            sigmas[i] = (mus[i] - left).max(right - mus[i]).clamp(min_sigma, 1.0);
        }
        Parzen { mus, sigmas }
    }

    fn log_pdf(&self, x: f64) -> f64 {
        let w = 1.0 / self.mus.len() as f64;
        let p: f64 = self
            .mus
            .iter()
            .zip(&self.sigmas)
            .map(|(m, s)| {
                let mass = cdf((1.0 - m) / s) - cdf(-m / s);
                w * phi((x - m) / s) / s / mass.max(1e-300)
            })
            .sum();
        p.max(1e-300).ln()
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        let k = rng.random_range(0..self.mus.len());
        for _ in 0..100 {
            let v = self.mus[k] + self.sigmas[k] * normal(rng);
            if (0.0..=1.0).contains(&v) {
                return v;
            }
        }
        self.mus[k].clamp(0.0, 1.0)
    }
}

pub fn suggest(obs: &[Observation], space: &dyn Box01, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut ranked: Vec<&Observation> = obs.iter().collect();
    ranked.sort_by(|a, b| match (a.feasible(), b.feasible()) {
        (true, true) => b.y.total_cmp(&a.y),
        (false, false) => a.total_violation().total_cmp(&b.total_violation()),
        (fa, fb) => fb.cmp(&fa),
    });
    let n_good = (obs.len() as f64 * 0.1).ceil().clamp(1.0, 25.0) as usize;
    let (good, bad) = ranked.split_at(n_good.min(ranked.len()));
    let per_dim = |set: &[&Observation], d: usize| {
        Parzen::new(&set.iter().map(|o| o.x[d]).collect::<Vec<_>>())
    };
    let dims = space.dims();
    let l: Vec<Parzen> = (0..dims).map(|d| per_dim(good, d)).collect();
    let g: Vec<Parzen> = (0..dims).map(|d| per_dim(bad, d)).collect();
    let mut best: Option<(f64, Vec<f64>)> = None;
    let mut fallback: Option<(f64, Vec<f64>)> = None;
    for _ in 0..ROUNDS {
        for _ in 0..CANDIDATES {
            let c = space.snap(&l.iter().map(|p| p.sample(rng)).collect::<Vec<_>>());
            let score: f64 = (0..dims)
                .map(|d| l[d].log_pdf(c[d]) - g[d].log_pdf(c[d]))
                .sum();
            let slot = if space.taken(&c) {
                &mut fallback
            } else {
                &mut best
            };
            if slot.as_ref().is_none_or(|(b, _)| score > *b) {
                *slot = Some((score, c));
            }
        }
        if best.is_some() {
            break;
        }
    }
    best.or(fallback).map(|(_, c)| c).expect("candidates")
}

#[cfg(test)]
mod tests {
    use super::super::Method;
    use super::super::tests::{TestBox, optimise};

    #[test]
    fn finds_the_maximum_of_a_1d_function() {
        let f = |x: &[f64]| -(x[0] - 0.3).abs();
        let mut b = TestBox {
            dims: 1,
            steps: Some(101),
            seen: Vec::new(),
        };
        let (x, _) = optimise(Method::Tpe, &mut b, f, None, 5, 30, 5);
        assert!((x[0] - 0.3).abs() <= 0.02, "{x:?}");
    }

    #[test]
    fn finds_the_maximum_of_a_2d_function_under_a_constraint() {
        // Maximise x + y with x² + y² <= 0.5: the optimum is x = y = 0.5 (sum 1).
        let f = |p: &[f64]| p[0] + p[1];
        let g: &dyn Fn(&[f64]) -> f64 = &|p: &[f64]| p[0] * p[0] + p[1] * p[1] - 0.5;
        let run = |seed| {
            let mut b = TestBox {
                dims: 2,
                steps: None,
                seen: Vec::new(),
            };
            optimise(Method::Tpe, &mut b, f, Some(g), 5, 60, seed)
        };
        let (x, y) = run(2);
        assert!(y > 0.93, "best {y} at {x:?}");
        assert_eq!(run(2).0, x, "same seed, same trajectory");
    }
}
