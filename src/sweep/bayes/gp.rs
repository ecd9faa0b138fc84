//! Gaussian-process regression (Matérn 5/2 kernel, one length scale per dimension) and the
//! constrained expected improvement that picks the next point.
//!
//! Hyperparameters are chosen by the log marginal likelihood over a small grid: first one
//! length scale for every dimension (with the noise level), then each dimension's own in
//! turn. Targets are standardised, so the signal variance is 1. A search has at most 200
//! points, so the O(n³) Cholesky per grid point costs milliseconds.

use rand::RngExt;
use rand::rngs::ChaCha8Rng;

use super::{Box01, Observation, cdf, normal, phi};

const LENGTH_SCALES: [f64; 8] = [0.03, 0.07, 0.15, 0.3, 0.5, 0.8, 1.3, 2.5];
const NOISES: [f64; 4] = [1e-6, 1e-3, 1e-2, 0.1];
/// Random candidates scored per suggestion, plus local ones around the best points.
const RANDOM_CANDIDATES: usize = 2000;
const LOCAL_CANDIDATES: usize = 300;

/// A fitted process.
pub struct Gp {
    x: Vec<Vec<f64>>,
    /// Lower Cholesky factor of K + noise·I.
    l: Vec<Vec<f64>>,
    /// (K + noise·I)⁻¹ y (standardised y).
    alpha: Vec<f64>,
    ls: Vec<f64>,
    mean: f64,
    scale: f64,
}

fn matern52(a: &[f64], b: &[f64], ls: &[f64]) -> f64 {
    let r2: f64 = a
        .iter()
        .zip(b)
        .zip(ls)
        .map(|((a, b), l)| ((a - b) / l).powi(2))
        .sum();
    let s = (5.0 * r2).sqrt();
    (1.0 + s + 5.0 * r2 / 3.0) * (-s).exp()
}

/// Lower Cholesky factor, `None` when the matrix is not positive definite.
fn cholesky(k: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = k.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|m| l[i][m] * l[j][m]).sum();
            if i == j {
                let d = k[i][i] - s;
                if d <= 0.0 || !d.is_finite() {
                    return None;
                }
                l[i][j] = d.sqrt();
            } else {
                l[i][j] = (k[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

/// Solves L z = b.
fn forward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; b.len()];
    for i in 0..b.len() {
        let s: f64 = (0..i).map(|m| l[i][m] * z[m]).sum();
        z[i] = (b[i] - s) / l[i][i];
    }
    z
}

/// Solves Lᵀ z = b.
fn backward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut z = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|m| l[m][i] * z[m]).sum();
        z[i] = (b[i] - s) / l[i][i];
    }
    z
}

/// The factor, the weights and the log marginal likelihood for one hyperparameter choice.
fn factor(
    x: &[Vec<f64>],
    y: &[f64],
    ls: &[f64],
    noise: f64,
) -> Option<(Vec<Vec<f64>>, Vec<f64>, f64)> {
    let n = x.len();
    let k: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| matern52(&x[i], &x[j], ls) + if i == j { noise } else { 0.0 })
                .collect()
        })
        .collect();
    let l = cholesky(&k)?;
    let alpha = backward(&l, &forward(&l, y));
    let fit: f64 = y.iter().zip(&alpha).map(|(a, b)| a * b).sum();
    let log_det: f64 = (0..n).map(|i| l[i][i].ln()).sum();
    let lml = -0.5 * fit - log_det - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
    Some((l, alpha, lml))
}

impl Gp {
    /// Fits `y` at `x`; `None` only when no grid point gives a positive definite matrix.
    pub fn fit(x: &[Vec<f64>], y: &[f64]) -> Option<Gp> {
        let n = y.len() as f64;
        let mean = y.iter().sum::<f64>() / n;
        let sd = (y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        let scale = if sd > 1e-12 { sd } else { 1.0 };
        let ys: Vec<f64> = y.iter().map(|v| (v - mean) / scale).collect();
        let dims = x.first().map_or(0, Vec::len);
        let mut best: Option<(f64, Vec<f64>, f64)> = None;
        let consider = |ls: Vec<f64>, noise: f64, best: &mut Option<(f64, Vec<f64>, f64)>| {
            if let Some((_, _, lml)) = factor(x, &ys, &ls, noise)
                && best.as_ref().is_none_or(|b| lml > b.0)
            {
                *best = Some((lml, ls, noise));
            }
        };
        for &l in &LENGTH_SCALES {
            for &noise in &NOISES {
                consider(vec![l; dims], noise, &mut best);
            }
        }
        // Each dimension's own length scale, two passes.
        for _ in 0..2 {
            for d in 0..dims {
                let (_, ls, noise) = best.clone()?;
                for &l in &LENGTH_SCALES {
                    let mut try_ls = ls.clone();
                    try_ls[d] = l;
                    consider(try_ls, noise, &mut best);
                }
            }
        }
        let (_, ls, noise) = best?;
        let (l, alpha, _) = factor(x, &ys, &ls, noise)?;
        Some(Gp {
            x: x.to_vec(),
            l,
            alpha,
            ls,
            mean,
            scale,
        })
    }

    /// Posterior mean and standard deviation at `p`, in the units of the fitted y.
    pub fn predict(&self, p: &[f64]) -> (f64, f64) {
        let k: Vec<f64> = self.x.iter().map(|xi| matern52(xi, p, &self.ls)).collect();
        let mu: f64 = k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = forward(&self.l, &k);
        let var = (1.0 - v.iter().map(|a| a * a).sum::<f64>()).max(1e-12);
        (self.mean + mu * self.scale, var.sqrt() * self.scale)
    }
}

/// Expected improvement over `best` of a normal(mu, sd).
fn expected_improvement(mu: f64, sd: f64, best: f64) -> f64 {
    let z = (mu - best) / sd;
    (mu - best) * cdf(z) + sd * phi(z)
}

/// The point with the largest expected improvement times probability of feasibility (the
/// probability alone until a feasible point is known), among random and local candidates
/// not measured yet.
pub fn suggest(obs: &[Observation], space: &dyn Box01, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let dims = space.dims();
    let x: Vec<Vec<f64>> = obs.iter().map(|o| o.x.clone()).collect();
    let y: Vec<f64> = obs.iter().map(|o| o.y).collect();
    let random_point =
        |rng: &mut ChaCha8Rng| (0..dims).map(|_| rng.random::<f64>()).collect::<Vec<f64>>();
    let Some(objective) = Gp::fit(&x, &y) else {
        return space.snap(&random_point(rng));
    };
    let n_con = obs.first().map_or(0, |o| o.violations.len());
    let constraints: Vec<Gp> = (0..n_con)
        .filter_map(|k| Gp::fit(&x, &obs.iter().map(|o| o.violations[k]).collect::<Vec<_>>()))
        .collect();
    let best_feasible = obs
        .iter()
        .filter(|o| o.feasible())
        .map(|o| o.y)
        .max_by(f64::total_cmp);
    let score = |p: &[f64]| -> f64 {
        let feasibility: f64 = constraints
            .iter()
            .map(|c| {
                let (mu, sd) = c.predict(p);
                cdf(-mu / sd)
            })
            .product();
        match best_feasible {
            Some(b) => {
                let (mu, sd) = objective.predict(p);
                expected_improvement(mu, sd, b) * feasibility
            }
            None => feasibility,
        }
    };
    // Local candidates around the best points so far (feasible ones first).
    let mut ranked: Vec<&Observation> = obs.iter().collect();
    ranked.sort_by(|a, b| b.feasible().cmp(&a.feasible()).then(b.y.total_cmp(&a.y)));
    let mut candidates: Vec<Vec<f64>> = (0..RANDOM_CANDIDATES).map(|_| random_point(rng)).collect();
    for (i, o) in ranked.iter().take(3).enumerate() {
        for j in 0..LOCAL_CANDIDATES / 3 {
            let spread = if j % 2 == 0 { 0.1 } else { 0.02 } / (i + 1) as f64;
            candidates.push(
                o.x.iter()
                    .map(|v| (v + spread * normal(rng)).clamp(0.0, 1.0))
                    .collect(),
            );
        }
    }
    let mut best: Option<(f64, Vec<f64>)> = None;
    let mut fallback: Option<(f64, Vec<f64>)> = None;
    for c in candidates {
        let c = space.snap(&c);
        let s = score(&c);
        let slot = if space.taken(&c) {
            &mut fallback
        } else {
            &mut best
        };
        if slot.as_ref().is_none_or(|(b, _)| s > *b) {
            *slot = Some((s, c));
        }
    }
    best.or(fallback).map(|(_, c)| c).expect("candidates")
}

#[cfg(test)]
mod tests {
    use super::super::Method;
    use super::super::tests::{TestBox, optimise};
    use super::*;

    #[test]
    fn the_posterior_follows_a_smooth_function() {
        let x: Vec<Vec<f64>> = (0..8).map(|i| vec![i as f64 / 7.0]).collect();
        let f = |v: f64| (6.0 * v).sin();
        let y: Vec<f64> = x.iter().map(|p| f(p[0])).collect();
        let gp = Gp::fit(&x, &y).unwrap();
        for (p, v) in x.iter().zip(&y) {
            assert!((gp.predict(p).0 - v).abs() < 0.1, "at {p:?}");
        }
        // Between the points too, and surer at a point than between two.
        for i in 0..7 {
            let mid = (i as f64 + 0.5) / 7.0;
            assert!((gp.predict(&[mid]).0 - f(mid)).abs() < 0.15, "at {mid}");
        }
        assert!(gp.predict(&[0.5 / 7.0]).1 > gp.predict(&[0.0]).1);
    }

    #[test]
    fn finds_the_maximum_of_a_1d_function() {
        // Global peak at x = 0.63, a lesser one at 0.2.
        let f = |x: &[f64]| {
            (-(x[0] - 0.63).powi(2) / 0.02).exp() + 0.5 * (-(x[0] - 0.2).powi(2) / 0.005).exp()
        };
        let mut b = TestBox {
            dims: 1,
            steps: None,
            seen: Vec::new(),
        };
        let (x, _) = optimise(Method::Gp, &mut b, f, None, 3, 12, 7);
        assert!((x[0] - 0.63).abs() < 0.02, "{x:?}");
    }

    #[test]
    fn finds_the_maximum_of_a_2d_function_reproducibly() {
        // Branin (negated, rescaled to the unit square): three global maxima of -0.397887.
        let branin = |p: &[f64]| {
            let (x, y) = (15.0 * p[0] - 5.0, 15.0 * p[1]);
            let pi = std::f64::consts::PI;
            let a = y - 5.1 / (4.0 * pi * pi) * x * x + 5.0 / pi * x - 6.0;
            -(a * a + 10.0 * (1.0 - 1.0 / (8.0 * pi)) * x.cos() + 10.0)
        };
        let run = |seed| {
            let mut b = TestBox {
                dims: 2,
                steps: None,
                seen: Vec::new(),
            };
            optimise(Method::Gp, &mut b, branin, None, 5, 30, seed)
        };
        let (x, y) = run(3);
        assert!(y > -0.397887 - 0.05, "best {y} at {x:?}");
        assert_eq!(run(3).0, x, "same seed, same trajectory");
    }

    #[test]
    fn keeps_to_the_feasible_side_of_a_constraint() {
        // Throughput-like: rises with x; the SLA holds for x <= 0.4 (of 31 whole steps).
        let f = |x: &[f64]| x[0];
        let g: &dyn Fn(&[f64]) -> f64 = &|x: &[f64]| x[0] - 0.41;
        let mut b = TestBox {
            dims: 1,
            steps: Some(31),
            seen: Vec::new(),
        };
        let (x, _) = optimise(Method::Gp, &mut b, f, Some(g), 4, 14, 11);
        assert!((x[0] - 0.4).abs() < 1e-9, "{x:?}");
    }
}
