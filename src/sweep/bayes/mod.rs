//! The optimiser of the adaptive search (`--search-space`, the BO recipes): given the points
//! measured so far, which point of the box to measure next. Points live in the unit cube
//! (each dimension mapped to [0, 1], linearly or on a log scale, by the caller); the
//! objective is always maximised (the caller negates a minimised one) and each SLA is a
//! constraint value that is > 0 when violated, as Optuna's `constraints_func`.
//!
//! Two methods, as AIPerf's Optuna samplers: a Gaussian process with expected improvement
//! times the probability of feasibility (`gp`, Optuna's `GPSampler`), and the tree-structured
//! Parzen estimator (`tpe`, Optuna's `TPESampler`). The first points are a scrambled Halton
//! sequence, which covers the box more evenly than independent draws.

mod gp;
mod tpe;

use rand::RngExt;
use rand::rngs::ChaCha8Rng;

/// How the next point is chosen once the initial points are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Gp,
    Tpe,
}

/// One measured point.
#[derive(Debug, Clone)]
pub struct Observation {
    /// Unit coordinates.
    pub x: Vec<f64>,
    /// The objective, larger is better (a failed point carries a value worse than any seen).
    pub y: f64,
    /// One per constraint: > 0 violates, <= 0 holds.
    pub violations: Vec<f64>,
}

impl Observation {
    pub fn feasible(&self) -> bool {
        self.violations.iter().all(|v| *v <= 0.0)
    }

    /// How far outside the constraints the point is (0 when feasible).
    fn total_violation(&self) -> f64 {
        self.violations.iter().map(|v| v.max(0.0)).sum()
    }
}

/// What the caller knows about the box: how a unit point lands on a point it can run
/// (whole numbers rounded), and which points were already measured.
pub trait Box01 {
    fn dims(&self) -> usize;
    /// The unit point of the runnable point nearest `x`.
    fn snap(&self, x: &[f64]) -> Vec<f64>;
    /// True when the runnable point of `x` (snapped) was measured already.
    fn taken(&self, x: &[f64]) -> bool;
}

/// Initial point `i` (0-based) of a Halton sequence shifted by one random offset per
/// dimension (Cranley-Patterson rotation), so seeds give different but even designs.
pub struct Halton {
    shift: Vec<f64>,
}

const PRIMES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];

impl Halton {
    pub fn new(dims: usize, rng: &mut ChaCha8Rng) -> Halton {
        Halton {
            shift: (0..dims).map(|_| rng.random::<f64>()).collect(),
        }
    }

    pub fn point(&self, i: usize) -> Vec<f64> {
        self.shift
            .iter()
            .enumerate()
            .map(|(d, s)| (radical_inverse(i as u64 + 1, PRIMES[d % PRIMES.len()]) + s).fract())
            .collect()
    }
}

/// The digits of `i` in base `b` mirrored around the radix point.
fn radical_inverse(mut i: u64, b: u64) -> f64 {
    let (mut out, mut f) = (0.0, 1.0 / b as f64);
    while i > 0 {
        out += (i % b) as f64 * f;
        i /= b;
        f /= b as f64;
    }
    out
}

/// The next point to measure, in unit coordinates (snapped), after `obs`.
pub fn suggest(
    method: Method,
    obs: &[Observation],
    space: &dyn Box01,
    rng: &mut ChaCha8Rng,
) -> Vec<f64> {
    match method {
        Method::Gp => gp::suggest(obs, space, rng),
        Method::Tpe => tpe::suggest(obs, space, rng),
    }
}

/// The standard normal's density and distribution function.
fn phi(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

fn cdf(z: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-z / std::f64::consts::SQRT_2)
}

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>();
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// A box of `dims` real dimensions, or one whole-number dimension of `steps` values.
    pub(super) struct TestBox {
        pub dims: usize,
        pub steps: Option<u32>,
        pub seen: Vec<Vec<f64>>,
    }

    impl Box01 for TestBox {
        fn dims(&self) -> usize {
            self.dims
        }
        fn snap(&self, x: &[f64]) -> Vec<f64> {
            match self.steps {
                Some(n) => x
                    .iter()
                    .map(|v| (v * f64::from(n - 1)).round() / f64::from(n - 1))
                    .collect(),
                None => x.to_vec(),
            }
        }
        fn taken(&self, x: &[f64]) -> bool {
            let s = self.snap(x);
            self.seen.iter().any(|p| p == &s)
        }
    }

    /// A constraint of a test problem: > 0 violates.
    pub(super) type Constraint<'a> = Option<&'a dyn Fn(&[f64]) -> f64>;

    /// Runs `iters` iterations (the first `init` from Halton) of `method` on `f` (maximised),
    /// with `g` as a constraint (> 0 violates); returns the best feasible point and value.
    pub(super) fn optimise(
        method: Method,
        b: &mut TestBox,
        f: impl Fn(&[f64]) -> f64,
        g: Constraint<'_>,
        init: usize,
        iters: usize,
        seed: u64,
    ) -> (Vec<f64>, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let halton = Halton::new(b.dims, &mut rng);
        let mut obs: Vec<Observation> = Vec::new();
        for i in 0..iters {
            let x = if i < init {
                b.snap(&halton.point(i))
            } else {
                suggest(method, &obs, b, &mut rng)
            };
            b.seen.push(x.clone());
            obs.push(Observation {
                y: f(&x),
                violations: g.map(|g| vec![g(&x)]).unwrap_or_default(),
                x,
            });
        }
        let best = obs
            .iter()
            .filter(|o| o.feasible())
            .max_by(|a, b| a.y.total_cmp(&b.y))
            .expect("a feasible point");
        (best.x.clone(), best.y)
    }

    #[test]
    fn halton_points_cover_the_box_evenly() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let h = Halton::new(2, &mut rng);
        let pts: Vec<Vec<f64>> = (0..16).map(|i| h.point(i)).collect();
        // Every quarter of each axis holds 4 of the 16 points.
        for d in 0..2 {
            for q in 0..4 {
                let n = pts
                    .iter()
                    .filter(|p| (p[d] * 4.0).floor() as usize == q)
                    .count();
                assert!((3..=5).contains(&n), "dim {d} quarter {q}: {n}");
            }
        }
        assert_eq!(radical_inverse(1, 2), 0.5);
        assert_eq!(radical_inverse(3, 2), 0.75);
    }
}
