//! The adaptive search's loop (AIPerf's Optuna-backed planners): which point to measure
//! next, how a measured point is judged (its objective, its SLA feasibility), when to stop,
//! and the `search_history.json` that records the trajectory.
//!
//! AIPerf's rules kept here: the objective is the mean of the runs' values (or a pooled
//! percentile); a point is feasible when at least one successful run meets every SLA and
//! every SLA was measured; the optimiser sees each SLA as the mean observed value minus the
//! threshold (its constraint); a point without an objective is told a value worse than any
//! seen; the search stops at the iteration budget, after 10 points without improvement, or
//! when the last 8 objectives vary by less than 1% (coefficient of variation).

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use serde_json::{Map, Value, json};

use super::bayes::{self, Box01, Halton, Method, Observation};
use super::search::mean_of;
use crate::config::adaptive::{
    Adaptive, Dim, Direction, IMPROVEMENT_PATIENCE, PLATEAU_THRESHOLD, PLATEAU_WINDOW, Planner,
    Sampler,
};
use crate::config::multirun::{Sla, SlaOp};
use crate::export::aggregate::RunMetrics;

/// One measured point.
#[derive(Debug, Clone)]
pub struct Iteration {
    /// (path, value) per dimension.
    pub values: Vec<(&'static str, Value)>,
    unit: Vec<f64>,
    pub objective: Option<f64>,
    pub feasible: bool,
    /// Per SLA, the mean across successful runs (`None`: not measured).
    observed: Vec<Option<f64>>,
    /// The first SLA no run met, with its mean observed value.
    first_breach: Option<Value>,
}

pub struct AdaptiveState {
    pub cfg: Adaptive,
    rng: ChaCha8Rng,
    halton: Halton,
    pub iterations: Vec<Iteration>,
    best_loss: Option<f64>,
    since_improvement: usize,
    pub convergence_reason: Option<&'static str>,
}

/// The box of the search as the optimiser sees it.
struct Space<'a> {
    dims: &'a [Dim],
    seen: Vec<Vec<f64>>,
}

impl Space<'_> {
    fn value(&self, d: usize, u: f64) -> f64 {
        let dim = &self.dims[d];
        let v = if dim.log {
            (dim.lo.ln() + u * (dim.hi.ln() - dim.lo.ln())).exp()
        } else {
            dim.lo + u * (dim.hi - dim.lo)
        };
        if dim.int {
            v.round().clamp(dim.lo.ceil(), dim.hi.floor())
        } else {
            v.clamp(dim.lo, dim.hi)
        }
    }

    fn unit(&self, d: usize, v: f64) -> f64 {
        let dim = &self.dims[d];
        let u = if dim.log {
            (v.ln() - dim.lo.ln()) / (dim.hi.ln() - dim.lo.ln())
        } else {
            (v - dim.lo) / (dim.hi - dim.lo)
        };
        u.clamp(0.0, 1.0)
    }
}

impl Box01 for Space<'_> {
    fn dims(&self) -> usize {
        self.dims.len()
    }

    fn snap(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .enumerate()
            .map(|(d, u)| self.unit(d, self.value(d, *u)))
            .collect()
    }

    fn taken(&self, x: &[f64]) -> bool {
        let s = self.snap(x);
        self.seen.iter().any(|p| p == &s)
    }
}

fn space_of<'a>(dims: &'a [Dim], iterations: &[Iteration]) -> Space<'a> {
    Space {
        dims,
        seen: iterations.iter().map(|i| i.unit.clone()).collect(),
    }
}

/// Optuna's constraint value: > 0 violates.
fn violation(observed: f64, sla: &Sla) -> f64 {
    match sla.op {
        SlaOp::Lt | SlaOp::Le => observed - sla.threshold,
        SlaOp::Gt | SlaOp::Ge => sla.threshold - observed,
    }
}

fn stat_of(run: &RunMetrics, metric: &str, stat: &str) -> Option<f64> {
    run.get(metric)?
        .stats
        .get(stat)
        .copied()
        .filter(|v| v.is_finite())
}

impl AdaptiveState {
    pub fn new(cfg: Adaptive) -> AdaptiveState {
        // Without --search-random-seed the trajectory is not reproducible (AIPerf's rule).
        let seed = cfg.seed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ u64::from(std::process::id()).rotate_left(32)
        });
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let halton = Halton::new(cfg.dims.len(), &mut rng);
        AdaptiveState {
            cfg,
            rng,
            halton,
            iterations: Vec::new(),
            best_loss: None,
            since_improvement: 0,
            convergence_reason: None,
        }
    }

    fn space(&self) -> Space<'_> {
        space_of(&self.cfg.dims, &self.iterations)
    }

    /// The metric whose per-request values the runs must hand over (pooled percentiles).
    pub fn pooled_metric(&self) -> Option<&str> {
        self.cfg.pooled.then_some(self.cfg.metric.as_str())
    }

    /// The next point: per dimension (path, value, flag); `None` once the search stops.
    pub fn ask(&mut self) -> Option<Vec<(&'static str, Value, String)>> {
        if let Some(reason) = self.converged() {
            self.convergence_reason = Some(reason);
            return None;
        }
        let unit = if self.iterations.len() < self.cfg.initial_points {
            let space = self.space();
            space.snap(&self.halton.point(self.iterations.len()))
        } else {
            let method = match self.cfg.sampler {
                Sampler::Gp => Method::Gp,
                Sampler::Tpe => Method::Tpe,
            };
            let obs = self.observations();
            let space = space_of(&self.cfg.dims, &self.iterations);
            bayes::suggest(method, &obs, &space, &mut self.rng)
        };
        let space = self.space();
        Some(
            self.cfg
                .dims
                .iter()
                .enumerate()
                .map(|(d, dim)| {
                    let v = space.value(d, unit[d]);
                    let value = if dim.int {
                        Value::from(v as i64)
                    } else {
                        Value::from(v)
                    };
                    (dim.path, value, dim.flag.clone())
                })
                .collect(),
        )
    }

    /// The optimiser's view of the points so far: objective as "larger is better", a failed
    /// point just below the worst seen, an unmeasured SLA well past the worst violation seen
    /// (AIPerf tells Optuna 1e6 for both; a bounded value keeps the model's scale usable).
    fn observations(&self) -> Vec<Observation> {
        let sign = match self.cfg.direction {
            Direction::Maximize => 1.0,
            Direction::Minimize => -1.0,
        };
        let finite: Vec<f64> = self
            .iterations
            .iter()
            .filter_map(|i| i.objective.map(|v| sign * v))
            .collect();
        let failed = finite
            .iter()
            .copied()
            .min_by(f64::total_cmp)
            .map_or(0.0, |w| w - (w.abs() * 0.1).max(1.0));
        let unmeasured: Vec<f64> = self
            .cfg
            .slas
            .iter()
            .enumerate()
            .map(|(k, sla)| {
                self.iterations
                    .iter()
                    .filter_map(|i| i.observed[k].map(|o| violation(o, sla)))
                    .map(f64::abs)
                    .max_by(f64::total_cmp)
                    .map_or(1.0, |w| 2.0 * w + 1.0)
            })
            .collect();
        self.iterations
            .iter()
            .map(|i| Observation {
                x: i.unit.clone(),
                y: i.objective.map_or(failed, |v| sign * v),
                violations: self
                    .cfg
                    .slas
                    .iter()
                    .zip(&i.observed)
                    .zip(&unmeasured)
                    .map(|((sla, o), u)| o.map_or(*u, |o| violation(o, sla)))
                    .collect(),
            })
            .collect()
    }

    /// Judges the point just run: `runs` are its successful runs' metrics, `samples` each
    /// one's per-request values of the objective metric (pooled percentiles only).
    pub fn tell(
        &mut self,
        values: Vec<(&'static str, Value)>,
        runs: &[&RunMetrics],
        samples: &[Vec<f64>],
    ) -> &Iteration {
        let space = self.space();
        let unit: Vec<f64> = values
            .iter()
            .enumerate()
            .map(|(d, (_, v))| space.unit(d, v.as_f64().unwrap_or(0.0)))
            .collect();
        let objective = self.objective(runs, samples);
        let observed: Vec<Option<f64>> = self
            .cfg
            .slas
            .iter()
            .map(|s| mean_of(runs, &s.metric, &s.stat))
            .collect();
        let meets = |r: &RunMetrics, s: &Sla| {
            stat_of(r, &s.metric, &s.stat).is_some_and(|v| s.op.holds(v, s.threshold))
        };
        let first_breach = self
            .cfg
            .slas
            .iter()
            .zip(&observed)
            .find(|(s, _)| !runs.iter().any(|r| meets(r, s)))
            .map(|(s, o)| {
                let mut j = Sla::to_json(s);
                j["observed"] = json!(o);
                j
            });
        let feasible =
            first_breach.is_none() && !runs.is_empty() && observed.iter().all(Option::is_some);
        // Patience counts points without a better objective, feasible or not (AIPerf's).
        match objective {
            Some(v) => {
                let loss = match self.cfg.direction {
                    Direction::Maximize => -v,
                    Direction::Minimize => v,
                };
                if self.best_loss.is_none_or(|b| loss < b) {
                    self.best_loss = Some(loss);
                    self.since_improvement = 0;
                } else {
                    self.since_improvement += 1;
                }
            }
            None => self.since_improvement += 1,
        }
        self.iterations.push(Iteration {
            values,
            unit,
            objective,
            feasible,
            observed,
            first_breach,
        });
        self.iterations.last().expect("just pushed")
    }

    fn objective(&self, runs: &[&RunMetrics], samples: &[Vec<f64>]) -> Option<f64> {
        if self.cfg.pooled {
            let p: f64 = self.cfg.stat.trim_start_matches('p').parse().ok()?;
            let mut all: Vec<f64> = samples.iter().flatten().copied().collect();
            if !all.is_empty() {
                all.sort_by(f64::total_cmp);
                return Some(crate::stats::percentile_sorted(&all, p));
            }
        }
        mean_of(runs, &self.cfg.metric, self.cfg.stat)
    }

    /// AIPerf's three stopping signals, in its order.
    fn converged(&self) -> Option<&'static str> {
        if self.iterations.len() >= self.cfg.max_iterations {
            return Some("max_iterations");
        }
        if self.since_improvement >= IMPROVEMENT_PATIENCE {
            return Some("improvement_patience");
        }
        let recent: Vec<f64> = self
            .iterations
            .iter()
            .rev()
            .take(PLATEAU_WINDOW)
            .filter_map(|i| i.objective)
            .collect();
        if recent.len() < PLATEAU_WINDOW {
            return None;
        }
        let n = recent.len() as f64;
        let mean = recent.iter().sum::<f64>() / n;
        if mean.abs() < 1e-9 {
            return None;
        }
        let var = recent.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (var.sqrt() / mean.abs() < PLATEAU_THRESHOLD).then_some("plateau_cv")
    }

    /// The best point: among feasible points if any, else among all scored ones.
    pub fn best(&self) -> Option<(usize, &Iteration)> {
        let scored = self
            .iterations
            .iter()
            .enumerate()
            .filter(|(_, i)| i.objective.is_some());
        let feasible: Vec<(usize, &Iteration)> =
            scored.clone().filter(|(_, i)| i.feasible).collect();
        let pool: Vec<(usize, &Iteration)> = if feasible.is_empty() {
            scored.collect()
        } else {
            feasible
        };
        let key = |i: &Iteration| i.objective.unwrap_or(f64::NAN);
        let pick = pool.into_iter();
        match self.cfg.direction {
            Direction::Maximize => pick.max_by(|a, b| key(a.1).total_cmp(&key(b.1))),
            Direction::Minimize => pick.min_by(|a, b| key(a.1).total_cmp(&key(b.1))),
        }
    }

    fn values_json(values: &[(&'static str, Value)]) -> Value {
        Value::Object(
            values
                .iter()
                .map(|(p, v)| (p.to_string(), v.clone()))
                .collect::<Map<_, _>>(),
        )
    }

    /// `search_history.json`: AIPerf's layout (config, iterations, best_trials,
    /// boundary_summary, recipe, convergence_reason). `reason` is null mid-search.
    pub fn history_json(&self, reason: Option<&str>) -> Value {
        let c = &self.cfg;
        let iterations: Vec<Value> = self
            .iterations
            .iter()
            .enumerate()
            .map(|(idx, i)| {
                json!({
                    "iteration_idx": idx,
                    "variation_values": Self::values_json(&i.values),
                    "objective_values": i.objective.map(|v| vec![v]),
                    "feasible": i.feasible,
                    "non_monotonic_warning": false,
                })
            })
            .collect();
        let feasible_count = self
            .iterations
            .iter()
            .filter(|i| i.feasible && i.objective.is_some())
            .count();
        let best_trials = self.best().map(|(idx, i)| {
            vec![json!({
                "iteration_idx": idx,
                "objective_values": i.objective.map(|v| vec![v]),
                "variation_values": Self::values_json(&i.values),
                "feasible": i.feasible,
                "feasible_count": feasible_count,
                "pareto_rank": 0,
            })]
        });
        json!({
            "config": {
                "planner": match c.planner { Planner::Bayesian => "bayesian", Planner::Optuna => "optuna" },
                "optuna_sampler": match c.sampler { Sampler::Gp => "gp", Sampler::Tpe => "tpe" },
                "objectives": [{
                    "metric": c.metric,
                    "stat": c.stat,
                    "direction": match c.direction { Direction::Maximize => "MAXIMIZE", Direction::Minimize => "MINIMIZE" },
                    "threshold": null,
                }],
                "outcome_constraints": [],
                "max_iterations": c.max_iterations,
                "n_initial_points": c.initial_points,
                "random_seed": c.seed,
                "improvement_patience": IMPROVEMENT_PATIENCE,
                "plateau_window": PLATEAU_WINDOW,
                "plateau_threshold": PLATEAU_THRESHOLD,
                "search_space": c.dims.iter().map(|d| json!({
                    "path": d.path,
                    "lo": d.lo,
                    "hi": d.hi,
                    "kind": if d.int { "int" } else { "real" },
                })).collect::<Vec<_>>(),
                "sla_filters": c.slas.iter().map(Sla::to_json).collect::<Vec<_>>(),
            },
            "iterations": iterations,
            "best_trials": best_trials,
            "boundary_summary": self.boundary_summary(),
            "recipe": c.recipe,
            "convergence_reason": reason,
        })
    }

    /// On a one-dimensional search: the highest feasible and the lowest infeasible value.
    fn boundary_summary(&self) -> Value {
        if self.cfg.dims.len() != 1 || self.iterations.is_empty() {
            return Value::Null;
        }
        let v = |i: &Iteration| i.values[0].1.as_f64().unwrap_or(f64::NAN);
        let indexed = self.iterations.iter().enumerate();
        let feasible_max = indexed
            .clone()
            .filter(|(_, i)| i.feasible)
            .max_by(|a, b| v(a.1).total_cmp(&v(b.1)))
            .map(|(idx, i)| {
                json!({"value": i.values[0].1, "iteration_idx": idx, "objective_value": i.objective})
            });
        let infeasible_min = indexed
            .filter(|(_, i)| !i.feasible)
            .min_by(|a, b| v(a.1).total_cmp(&v(b.1)))
            .map(|(idx, i)| {
                json!({"value": i.values[0].1, "iteration_idx": idx, "first_breach": i.first_breach})
            });
        json!({
            "swept_dim_path": self.cfg.dims[0].path,
            "feasible_max": feasible_max,
            "infeasible_min": infeasible_min,
        })
    }

    /// One line saying what the search found.
    pub fn verdict(&self) -> String {
        let metric = format!("{} {}", self.cfg.metric, self.cfg.stat);
        let at = |i: &Iteration| {
            i.values
                .iter()
                .map(|(p, v)| format!("{}={v}", super::lists::leaf(p)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reason = self.convergence_reason.unwrap_or("stopped");
        match self.best() {
            Some((idx, i)) if i.feasible => format!(
                "Best point: {} ({metric} {:.2}, iteration {idx}; {} points, stopped on {reason})",
                at(i),
                i.objective.unwrap_or(f64::NAN),
                self.iterations.len()
            ),
            Some((idx, i)) => format!(
                "No point met every SLA; best unconstrained: {} ({metric} {:.2}, iteration {idx}; stopped on {reason})",
                at(i),
                i.objective.unwrap_or(f64::NAN)
            ),
            None => format!("The search measured no {metric} (stopped on {reason})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::aggregate::MetricSummary;

    fn metrics(throughput: f64, ttft_p95: f64) -> RunMetrics {
        let mut m = RunMetrics::new();
        for (name, stat, v) in [
            ("output_token_throughput", "avg", throughput),
            ("time_to_first_token", "p95", ttft_p95),
        ] {
            m.insert(
                name.into(),
                MetricSummary {
                    unit: "x".into(),
                    stats: [(stat.to_string(), v)].into_iter().collect(),
                },
            );
        }
        m
    }

    fn cfg(sampler: Sampler, seed: u64) -> Adaptive {
        Adaptive {
            planner: Planner::Optuna,
            sampler,
            dims: vec![Dim {
                path: "phases.profiling.concurrency",
                flag: "--concurrency".into(),
                lo: 1.0,
                hi: 64.0,
                int: true,
                log: true,
            }],
            metric: "output_token_throughput".into(),
            stat: "avg",
            direction: Direction::Maximize,
            slas: vec![Sla {
                metric: "time_to_first_token".into(),
                stat: "p95".into(),
                op: SlaOp::Lt,
                threshold: 200.0,
            }],
            max_iterations: 20,
            initial_points: 5,
            seed: Some(seed),
            pooled: false,
            recipe: Some("max-throughput-ttft-sla"),
        }
    }

    /// A server with 8 slots: throughput grows to 8 in flight, then stays; TTFT p95 is
    /// 100 ms up to 8, then grows by a service time per 8 queued.
    fn server(c: f64) -> RunMetrics {
        let tput = 50.0 * c.min(8.0);
        let ttft = 100.0 + 300.0 * ((c - 8.0).max(0.0) / 8.0).ceil();
        metrics(tput, ttft)
    }

    fn run(sampler: Sampler, seed: u64) -> AdaptiveState {
        let mut s = AdaptiveState::new(cfg(sampler, seed));
        while let Some(point) = s.ask() {
            let c = point[0].1.as_f64().unwrap();
            let m = server(c);
            s.tell(
                point.into_iter().map(|(p, v, _)| (p, v)).collect(),
                &[&m],
                &[],
            );
        }
        s
    }

    #[test]
    fn both_samplers_find_the_throughput_peak_under_the_sla() {
        for sampler in [Sampler::Gp, Sampler::Tpe] {
            let s = run(sampler, 42);
            let (_, best) = s.best().unwrap();
            assert!(best.feasible);
            assert_eq!(best.values[0].1, 8, "{sampler:?}: {}", s.verdict());
            let h = s.history_json(s.convergence_reason);
            assert_eq!(
                h["best_trials"][0]["variation_values"]["phases.profiling.concurrency"],
                8
            );
            assert_eq!(h["boundary_summary"]["feasible_max"]["value"], 8);
            assert_eq!(
                h["boundary_summary"]["infeasible_min"]["value"]
                    .as_u64()
                    .map(|v| v > 8),
                Some(true)
            );
            assert_eq!(
                h["boundary_summary"]["infeasible_min"]["first_breach"]["metric_tag"],
                "time_to_first_token"
            );
            let trajectory = |s: &AdaptiveState| -> Vec<Value> {
                s.iterations.iter().map(|i| i.values[0].1.clone()).collect()
            };
            assert_eq!(
                trajectory(&run(sampler, 42)),
                trajectory(&s),
                "{sampler:?} reproducible"
            );
        }
    }

    #[test]
    fn stops_on_patience_and_judges_failed_points() {
        let mut s = AdaptiveState::new(cfg(Sampler::Tpe, 1));
        // Every point fails: no objective, never feasible; patience ends the search.
        let mut n = 0;
        while let Some(point) = s.ask() {
            n += 1;
            let it = s.tell(
                point.into_iter().map(|(p, v, _)| (p, v)).collect(),
                &[],
                &[],
            );
            assert!(!it.feasible && it.objective.is_none());
        }
        assert_eq!(n, IMPROVEMENT_PATIENCE);
        assert_eq!(s.convergence_reason, Some("improvement_patience"));
        assert!(s.best().is_none());
        assert!(s.verdict().contains("measured no"), "{}", s.verdict());
        assert!(s.history_json(Some("x"))["best_trials"].is_null());
    }

    #[test]
    fn a_run_meeting_the_sla_makes_the_point_feasible_and_pooling_reads_samples() {
        let mut c = cfg(Sampler::Tpe, 1);
        c.stat = "p50";
        c.metric = "time_to_first_token".into();
        c.pooled = true;
        let mut s = AdaptiveState::new(c);
        let (ok, bad) = (metrics(1.0, 150.0), metrics(1.0, 250.0));
        let it = s.tell(
            vec![("phases.profiling.concurrency", Value::from(4))],
            &[&ok, &bad],
            &[vec![1.0, 2.0], vec![3.0, 10.0]],
        );
        // One of two runs met the SLA (AIPerf: any run); pooled p50 of 1, 2, 3, 10 = 2.5.
        assert!(it.feasible);
        assert_eq!(it.objective, Some(2.5));
    }
}
