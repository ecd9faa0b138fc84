//! The searches of `--search-recipe`: which concurrency to try next, given the verdicts so
//! far. Each point is judged on the mean across its successful runs.

use serde_json::{Value, json};

use crate::config::multirun::{Search, Sla};
use crate::export::aggregate::RunMetrics;

use super::plan::log_ladder;

/// The goodput search's objective, as its points' values name it.
const GOODPUT_KEY: &str = "goodput_avg";

/// Most points a monotonic search tries (AIPerf's cap).
const MAX_ITERATIONS: usize = 20;

/// One point tried: its concurrency and what was measured.
#[derive(Debug, Clone)]
pub struct Tried {
    pub concurrency: u64,
    /// Why the point counts as failing (an SLA broken, every run failed); `None` = it passed.
    pub breach: Option<String>,
    /// The watched values (metric_stat -> mean across runs).
    pub values: Vec<(String, f64)>,
}

/// The mean across runs of one metric's stat; `None` when no run has it.
pub fn mean_of(runs: &[&RunMetrics], metric: &str, stat: &str) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.get(metric)?.stats.get(stat).copied())
        .filter(|v| v.is_finite())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Judges a point against the SLAs.
pub fn judge_slas(concurrency: u64, runs: &[&RunMetrics], slas: &[Sla]) -> Tried {
    let mut values = Vec::new();
    let mut breach = None;
    if runs.is_empty() {
        breach = Some("every run failed".to_string());
    }
    for s in slas {
        let key = format!("{}_{}", s.metric, s.stat);
        match mean_of(runs, &s.metric, &s.stat) {
            Some(v) => {
                values.push((key.clone(), v));
                if breach.is_none() && !s.op.holds(v, s.threshold) {
                    breach = Some(format!(
                        "{key} {v:.2} is not {} {}",
                        s.op.as_str(),
                        s.threshold
                    ));
                }
            }
            None if breach.is_none() && !runs.is_empty() => {
                breach = Some(format!("{key} was not measured"));
            }
            None => {}
        }
    }
    Tried {
        concurrency,
        breach,
        values,
    }
}

/// Where a search stands.
pub struct SearchState {
    search: Search,
    /// The ladder of the grid styles.
    ladder: Vec<u64>,
    pub tried: Vec<Tried>,
}

impl SearchState {
    pub fn new(search: Search) -> SearchState {
        let ladder = match &search {
            Search::MaxConcurrencyUnderSla {
                lo,
                hi,
                ladder: Some(steps),
                ..
            } => log_ladder(*lo, *hi, *steps),
            Search::ConcurrencyRamp { lo, hi, steps, .. } => log_ladder(*lo, *hi, *steps),
            Search::MaxConcurrencyUnderSla { .. } | Search::MaxGoodputUnderSlo { .. } => Vec::new(),
            Search::Adaptive(_) => unreachable!("the adaptive search has its own state"),
        };
        SearchState {
            search,
            ladder,
            tried: Vec::new(),
        }
    }

    /// True for the bisecting search (its own directory layout).
    pub fn is_monotonic(&self) -> bool {
        matches!(
            self.search,
            Search::MaxConcurrencyUnderSla { ladder: None, .. } | Search::MaxGoodputUnderSlo { .. }
        )
    }

    /// Flags every point of the search adds to the command line: the goodput search's
    /// per-request SLOs.
    pub fn point_args(&self) -> Vec<String> {
        match &self.search {
            Search::MaxGoodputUnderSlo { slos, .. } => {
                let slos: Vec<String> = slos.iter().map(|(m, v)| format!("{m}:{v}")).collect();
                vec![format!("--goodput={}", slos.join(" "))]
            }
            Search::MaxConcurrencyUnderSla { .. }
            | Search::ConcurrencyRamp { .. }
            | Search::Adaptive(_) => Vec::new(),
        }
    }

    /// The goodput search's best point: (concurrency, goodput) of the passing point with
    /// the most goodput.
    pub fn best_goodput(&self) -> Option<(u64, f64)> {
        self.tried
            .iter()
            .filter(|t| t.breach.is_none())
            .filter_map(|t| {
                let (_, v) = t.values.iter().find(|(k, _)| k == GOODPUT_KEY)?;
                Some((t.concurrency, *v))
            })
            .fold(None, |best: Option<(u64, f64)>, p| match best {
                Some(b) if b.1 >= p.1 => Some(b),
                _ => Some(p),
            })
    }

    /// Judges the point just run.
    pub fn record(&mut self, concurrency: u64, runs: &[&RunMetrics]) -> &Tried {
        let tried = match &self.search {
            Search::MaxConcurrencyUnderSla { slas, .. } => judge_slas(concurrency, runs, slas),
            Search::MaxGoodputUnderSlo { filters, .. } => {
                let mut tried = judge_slas(concurrency, runs, filters);
                if let Some(v) = mean_of(runs, "goodput", "avg") {
                    tried.values.push((GOODPUT_KEY.to_string(), v));
                }
                tried
            }
            Search::ConcurrencyRamp {
                metric,
                stat,
                threshold,
                ..
            } => {
                let key = format!("{metric}_{stat}");
                let value = mean_of(runs, metric, stat);
                let baseline = self
                    .tried
                    .first()
                    .and_then(|t| t.values.first())
                    .map(|(_, v)| *v);
                let breach = match (value, baseline) {
                    (None, _) if runs.is_empty() => Some("every run failed".to_string()),
                    (None, _) => Some(format!("{key} was not measured")),
                    (Some(v), Some(b)) if v > b * (1.0 + threshold) => Some(format!(
                        "{key} {v:.2} is more than {:.0}% above the first point's {b:.2}",
                        threshold * 100.0
                    )),
                    _ => None,
                };
                Tried {
                    concurrency,
                    breach,
                    values: value.map(|v| (key, v)).into_iter().collect(),
                }
            }
            Search::Adaptive(_) => unreachable!("the adaptive search has its own state"),
        };
        self.tried.push(tried);
        self.tried.last().expect("just pushed")
    }

    /// The next concurrency to try; `None` when the search is over.
    pub fn next(&self) -> Option<u64> {
        if !self.ladder.is_empty() {
            // Grid styles stop at the first breach: the points beyond it are the slowest.
            if self.tried.iter().any(|t| t.breach.is_some()) {
                return None;
            }
            return self.ladder.get(self.tried.len()).copied();
        }
        let (lo, hi) = match self.search {
            Search::MaxConcurrencyUnderSla { lo, hi, .. }
            | Search::MaxGoodputUnderSlo { lo, hi, .. } => (lo, hi),
            Search::ConcurrencyRamp { .. } | Search::Adaptive(_) => return None,
        };
        if self.tried.len() >= MAX_ITERATIONS {
            return None;
        }
        let pass = self.best_pass();
        let fail = self
            .tried
            .iter()
            .filter(|t| t.breach.is_some())
            .map(|t| t.concurrency)
            .min();
        match (pass, fail) {
            (None, None) => Some(lo),
            // Even the lowest concurrency breaks an SLA.
            (None, Some(_)) => None,
            (Some(p), None) if p >= hi => None,
            (Some(p), None) => Some((p * 2).min(hi)),
            (Some(p), Some(f)) if f <= p + 1 => None,
            (Some(p), Some(f)) => Some(p + (f - p) / 2),
        }
    }

    /// The highest passing concurrency below every failing one.
    pub fn best_pass(&self) -> Option<u64> {
        let first_fail = self
            .tried
            .iter()
            .filter(|t| t.breach.is_some())
            .map(|t| t.concurrency)
            .min()
            .unwrap_or(u64::MAX);
        self.tried
            .iter()
            .filter(|t| t.breach.is_none() && t.concurrency < first_fail)
            .map(|t| t.concurrency)
            .max()
    }

    /// The first failing point (the breach, or the knee).
    pub fn first_breach(&self) -> Option<&Tried> {
        self.tried
            .iter()
            .filter(|t| t.breach.is_some())
            .min_by_key(|t| t.concurrency)
    }

    /// The search's result file: (file name, contents).
    pub fn result_file(&self, dirs: &[String]) -> (&'static str, Value) {
        use crate::export::sweep_files::{
            DEGRADATION_KNEE_FILE, SEARCH_HISTORY_FILE, SLA_BREACH_FILE,
        };
        let points: Vec<Value> = self
            .tried
            .iter()
            .zip(dirs)
            .enumerate()
            .map(|(i, (t, dir))| {
                let values: serde_json::Map<String, Value> = t
                    .values
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect();
                json!({
                    "iteration": i + 1,
                    "concurrency": t.concurrency,
                    "feasible": t.breach.is_none(),
                    "breach": t.breach,
                    "values": values,
                    "dir": dir,
                })
            })
            .collect();
        let breach = self.first_breach().map(|t| t.concurrency);
        match &self.search {
            Search::MaxConcurrencyUnderSla {
                slas,
                lo,
                hi,
                ladder,
            } => {
                let slas: Vec<Value> = slas.iter().map(Sla::to_json).collect();
                let body = json!({
                    "recipe": "max-concurrency-under-sla",
                    "style": if ladder.is_some() { "grid" } else { "monotonic" },
                    "swept_param": "phases.profiling.concurrency",
                    "bounds": [lo, hi],
                    "sla_filters": slas,
                    "max_feasible_concurrency": self.best_pass(),
                    "first_breach_concurrency": breach,
                    "points": points,
                });
                let file = if ladder.is_some() {
                    SLA_BREACH_FILE
                } else {
                    SEARCH_HISTORY_FILE
                };
                (file, body)
            }
            Search::MaxGoodputUnderSlo {
                slos,
                fraction,
                filters,
                lo,
                hi,
            } => {
                let slos: serde_json::Map<String, Value> =
                    slos.iter().map(|(m, v)| (m.clone(), json!(v))).collect();
                let filters: Vec<Value> = filters.iter().map(Sla::to_json).collect();
                let best = self.best_goodput();
                let body = json!({
                    "recipe": "max-goodput-under-slo",
                    "style": "monotonic",
                    "swept_param": "phases.profiling.concurrency",
                    "bounds": [lo, hi],
                    "objective": {"metric": "goodput", "stat": "avg", "direction": "maximize"},
                    "slos": slos,
                    "slo_attainment_fraction": fraction,
                    "sla_filters": filters,
                    "best_concurrency": best.map(|b| b.0),
                    "best_goodput": best.map(|b| b.1),
                    "max_feasible_concurrency": self.best_pass(),
                    "first_breach_concurrency": breach,
                    "points": points,
                });
                (SEARCH_HISTORY_FILE, body)
            }
            Search::ConcurrencyRamp {
                metric,
                stat,
                threshold,
                ..
            } => (
                DEGRADATION_KNEE_FILE,
                json!({
                    "recipe": "concurrency-ramp",
                    "swept_param": "phases.profiling.concurrency",
                    "metric_tag": metric,
                    "stat": stat,
                    "threshold_pct": threshold,
                    "baseline": self.tried.first().and_then(|t| t.values.first()).map(|(_, v)| *v),
                    "knee_concurrency": breach,
                    "points": points,
                }),
            ),
            Search::Adaptive(_) => unreachable!("the adaptive search has its own state"),
        }
    }

    /// One line saying what the search found.
    pub fn verdict(&self) -> String {
        match &self.search {
            Search::MaxConcurrencyUnderSla { .. } => {
                match (self.best_pass(), self.first_breach()) {
                    (Some(c), Some(b)) => format!(
                        "Highest concurrency meeting every SLA: {c} (at {}: {})",
                        b.concurrency,
                        b.breach.as_deref().unwrap_or("")
                    ),
                    (Some(c), None) => format!(
                        "Highest concurrency meeting every SLA: {c} (every point tried met them; raise --concurrency-max to look further)"
                    ),
                    (None, Some(b)) => format!(
                        "No concurrency met every SLA: at {}: {}",
                        b.concurrency,
                        b.breach.as_deref().unwrap_or("")
                    ),
                    (None, None) => "The search ran no point".to_string(),
                }
            }
            Search::MaxGoodputUnderSlo { fraction, .. } => {
                match (self.best_goodput(), self.first_breach()) {
                    (Some((c, g)), _) => format!(
                        "Most goodput with {:.0}% of requests meeting every SLO: {g:.2} requests/sec at concurrency {c}{}",
                        fraction * 100.0,
                        self.first_breach()
                            .map(|b| format!(
                                " (at {}: {})",
                                b.concurrency,
                                b.breach.as_deref().unwrap_or("")
                            ))
                            .unwrap_or_default()
                    ),
                    (None, Some(b)) => format!(
                        "No concurrency kept {:.0}% of requests within every SLO: at {}: {}",
                        fraction * 100.0,
                        b.concurrency,
                        b.breach.as_deref().unwrap_or("")
                    ),
                    (None, None) => "The search ran no point".to_string(),
                }
            }
            Search::ConcurrencyRamp { .. } => match self.first_breach() {
                Some(b) => format!(
                    "Degradation knee at concurrency {}: {}",
                    b.concurrency,
                    b.breach.as_deref().unwrap_or("")
                ),
                None => "No degradation knee on the ladder tried".to_string(),
            },
            Search::Adaptive(_) => unreachable!("the adaptive search has its own state"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::multirun::SlaOp;
    use crate::export::aggregate::MetricSummary;

    fn metrics(ttft_p95: f64) -> RunMetrics {
        let mut m = RunMetrics::new();
        m.insert(
            "time_to_first_token".into(),
            MetricSummary {
                unit: "ms".into(),
                stats: [("p95".to_string(), ttft_p95)].into_iter().collect(),
            },
        );
        m
    }

    fn sla(ms: f64) -> Sla {
        Sla {
            metric: "time_to_first_token".into(),
            stat: "p95".into(),
            op: SlaOp::Lt,
            threshold: ms,
        }
    }

    /// A server whose TTFT p95 is 10 ms per request in flight beyond 8.
    fn ttft_at(c: u64) -> f64 {
        50.0 + 10.0 * c.saturating_sub(8) as f64
    }

    #[test]
    fn monotonic_doubles_then_bisects_to_the_boundary() {
        let mut s = SearchState::new(Search::MaxConcurrencyUnderSla {
            slas: vec![sla(100.0)],
            lo: 1,
            hi: 1000,
            ladder: None,
        });
        let mut seen = Vec::new();
        while let Some(c) = s.next() {
            seen.push(c);
            s.record(c, &[&metrics(ttft_at(c))]);
        }
        // TTFT < 100 holds up to c = 12.
        assert_eq!(s.best_pass(), Some(12));
        assert_eq!(&seen[..6], [1, 2, 4, 8, 16, 12]);
        assert!(seen.len() <= 8, "{seen:?}");
        assert!(s.verdict().contains("12"), "{}", s.verdict());
    }

    #[test]
    fn grid_stops_at_the_first_breach_and_ramp_finds_the_knee() {
        let mut s = SearchState::new(Search::MaxConcurrencyUnderSla {
            slas: vec![sla(100.0)],
            lo: 1,
            hi: 1000,
            ladder: Some(8),
        });
        let mut seen = Vec::new();
        while let Some(c) = s.next() {
            seen.push(c);
            s.record(c, &[&metrics(ttft_at(c))]);
        }
        assert_eq!(seen, [1, 3, 7, 19]);
        assert_eq!(s.best_pass(), Some(7));
        let mut r = SearchState::new(Search::ConcurrencyRamp {
            lo: 1,
            hi: 64,
            steps: 7,
            metric: "time_to_first_token".into(),
            stat: "p95".into(),
            threshold: 0.2,
        });
        while let Some(c) = r.next() {
            r.record(c, &[&metrics(ttft_at(c))]);
        }
        // 50 ms up to 8; 16 gives 130 ms (> 60).
        assert_eq!(r.first_breach().unwrap().concurrency, 16);
        let (file, body) = r.result_file(&vec!["d".to_string(); 8]);
        assert_eq!(file, "degradation_knee.json");
        assert_eq!(body["knee_concurrency"], 16);
        assert_eq!(body["baseline"], 50.0);
    }

    /// Good fraction 1 up to concurrency 6, then falling; goodput = 10 x concurrency x
    /// the fraction.
    fn goodput_point(c: u64) -> RunMetrics {
        let frac = if c <= 6 { 1.0 } else { 6.0 / c as f64 };
        let mut m = RunMetrics::new();
        let one = |k: &str, v: f64| MetricSummary {
            unit: "x".into(),
            stats: [(k.to_string(), v)].into_iter().collect(),
        };
        m.insert("good_request_fraction".into(), one("avg", frac));
        m.insert("goodput".into(), one("avg", 10.0 * c as f64 * frac));
        m
    }

    #[test]
    fn the_goodput_search_bisects_to_the_last_attaining_concurrency() {
        let mut s = SearchState::new(Search::MaxGoodputUnderSlo {
            slos: vec![("time_to_first_token".into(), 100.0)],
            fraction: 0.9,
            filters: vec![Sla {
                metric: "good_request_fraction".into(),
                stat: "avg".into(),
                op: SlaOp::Ge,
                threshold: 0.9,
            }],
            lo: 1,
            hi: 64,
        });
        assert!(s.is_monotonic());
        assert_eq!(
            s.point_args(),
            ["--goodput=time_to_first_token:100".to_string()]
        );
        let mut seen = Vec::new();
        while let Some(c) = s.next() {
            seen.push(c);
            s.record(c, &[&goodput_point(c)]);
        }
        // 6/6.67 = 0.9 holds at 6; at 7 the fraction is 0.857.
        assert_eq!(&seen[..5], [1, 2, 4, 8, 6], "{seen:?}");
        assert_eq!(s.best_pass(), Some(6));
        assert_eq!(s.best_goodput(), Some((6, 60.0)));
        let (file, body) = s.result_file(&vec!["d".to_string(); seen.len()]);
        assert_eq!(file, "search_history.json");
        assert_eq!(body["best_concurrency"], 6);
        assert_eq!(body["best_goodput"], 60.0);
        assert!(
            s.verdict().contains("60.00 requests/sec at concurrency 6"),
            "{}",
            s.verdict()
        );
    }

    #[test]
    fn failed_points_and_lowest_breach() {
        let mut s = SearchState::new(Search::MaxConcurrencyUnderSla {
            slas: vec![sla(10.0)],
            lo: 2,
            hi: 8,
            ladder: None,
        });
        assert_eq!(s.next(), Some(2));
        assert_eq!(s.record(2, &[]).breach.as_deref(), Some("every run failed"));
        assert_eq!(s.next(), None);
        assert!(s.verdict().starts_with("No concurrency met every SLA"));
    }
}
