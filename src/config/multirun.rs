//! Sweeps, repeated runs and the SLA search: their flags checked against each other and
//! turned into one options struct for the sweep pipeline.

use std::time::Duration;

use super::adaptive::{self, Adaptive, Planner};
use super::{ConfigError, config_error, limits, recipes};
use crate::cli::ProfileArgs;
use crate::cli::multirun::{
    ConvergenceMode as CliConvergenceMode, ConvergenceStat, ParameterSweepMode,
    SearchRecipe as CliRecipe, SearchStyle as CliStyle, SweepType as CliSweepType,
};

/// How several lists combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepType {
    Grid,
    Zip,
}

/// The order of points and repeated runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepOrder {
    /// Trial 1 of every point, then trial 2 of every point, ...
    Repeated,
    /// Every trial of a point before the next point.
    Independent,
}

impl SweepOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            SweepOrder::Repeated => "repeated",
            SweepOrder::Independent => "independent",
        }
    }
}

pub use super::recipes::{GridRecipe, Ladder, Variant};
pub use crate::metrics::confidence::ConvergenceMode;

/// Stop repeating once a metric's run-level values have converged.
#[derive(Debug, Clone, PartialEq)]
pub struct Convergence {
    pub metric: String,
    /// `avg`, `p99`, ...
    pub stat: &'static str,
    pub mode: ConvergenceMode,
    pub threshold: f64,
}

/// One service-level objective: `metric`'s `stat` compared with `threshold` (display units).
#[derive(Debug, Clone, PartialEq)]
pub struct Sla {
    pub metric: String,
    pub stat: String,
    pub op: SlaOp,
    pub threshold: f64,
}

impl Sla {
    /// As the search files write it (AIPerf's SLA filter keys).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "metric_tag": self.metric,
            "stat": self.stat,
            "op": self.op.as_str(),
            "threshold": self.threshold,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlaOp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl SlaOp {
    pub fn as_str(self) -> &'static str {
        match self {
            SlaOp::Lt => "lt",
            SlaOp::Le => "le",
            SlaOp::Gt => "gt",
            SlaOp::Ge => "ge",
        }
    }

    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            SlaOp::Lt => value < threshold,
            SlaOp::Le => value <= threshold,
            SlaOp::Gt => value > threshold,
            SlaOp::Ge => value >= threshold,
        }
    }
}

/// What the search looks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Search {
    /// The highest concurrency in `lo..=hi` at which every SLA holds; `ladder` = the grid
    /// style's steps (None: double, then bisect).
    MaxConcurrencyUnderSla {
        slas: Vec<Sla>,
        lo: u64,
        hi: u64,
        ladder: Option<u64>,
    },
    /// A log-spaced ladder of `steps` concurrencies; the knee is the first point whose
    /// `metric` `stat` exceeds the first point's by more than `threshold` (relative).
    ConcurrencyRamp {
        lo: u64,
        hi: u64,
        steps: u64,
        metric: String,
        stat: String,
        threshold: f64,
    },
    /// The concurrency in `lo..=hi` with the most goodput among those where every filter
    /// holds (the first: `fraction` of requests meet every per-request SLO in `slos`,
    /// metric tag -> ms); doubles, then bisects, like the monotonic SLA search.
    MaxGoodputUnderSlo {
        slos: Vec<(String, f64)>,
        fraction: f64,
        filters: Vec<Sla>,
        lo: u64,
        hi: u64,
    },
    /// Bayesian optimisation over a box (`--search-space`, the BO recipes and styles).
    Adaptive(Box<Adaptive>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MultiRunOptions {
    /// Runs per point (the most, with convergence).
    pub runs: u32,
    pub run_cooldown: Duration,
    pub confidence_level: f64,
    /// Runs after the first of a point keep their warmup.
    pub warmup_after_first: bool,
    /// Seed 42 when --random-seed is not given.
    pub consistent_seed: bool,
    pub vary_seed_per_trial: bool,
    pub convergence: Option<Convergence>,
    pub sweep_cooldown: Duration,
    /// Every point uses the base seed (not base + index).
    pub same_seed: bool,
    pub order: SweepOrder,
    pub sweep_type: SweepType,
    pub sweep_table: bool,
    pub search: Option<Search>,
    /// A recipe that runs a fixed grid (`prefill-ttft-curve`, ...).
    pub grid: Option<GridRecipe>,
    /// `--variant` scenarios (none, or two or more).
    pub variants: Vec<Variant>,
    /// Said once before the runs (a fallback taken, a deprecated flag).
    pub warnings: Vec<String>,
}

impl MultiRunOptions {
    /// Checks the multi-run flags; `is_sweep` says whether a flag carried a list;
    /// `concurrency_list`: the `--concurrency` list pareto-sweep took (not in `is_sweep`).
    pub fn from_args(
        a: &ProfileArgs,
        is_sweep: bool,
        concurrency_list: Option<Vec<u64>>,
    ) -> Result<Self, ConfigError> {
        let m = &a.multirun;
        let runs = m.num_profile_runs;
        let single = runs == 1;
        let typed_with_one_run = |id: &str, flag: &str| -> Result<(), ConfigError> {
            if single && a.typed(id) {
                return Err(config_error(format!(
                    "{flag} only applies to repeated runs; add --num-profile-runs N (2-10) or drop it"
                )));
            }
            Ok(())
        };
        typed_with_one_run(
            "profile_run_cooldown_seconds",
            "--profile-run-cooldown-seconds",
        )?;
        typed_with_one_run(
            "profile_run_disable_warmup_after_first",
            "--profile-run-disable-warmup-after-first",
        )?;
        typed_with_one_run(
            "no_profile_run_disable_warmup_after_first",
            "--no-profile-run-disable-warmup-after-first",
        )?;
        // Recipes and --variant run several points too: the seed flags apply to them.
        let several_points =
            is_sweep || !m.variant.is_empty() || m.search_recipe.is_some_and(recipes::is_grid);
        if !several_points {
            typed_with_one_run("set_consistent_seed", "--set-consistent-seed")?;
            typed_with_one_run("no_set_consistent_seed", "--no-set-consistent-seed")?;
        }
        let run_cooldown = match m.profile_run_cooldown_seconds {
            Some(s) if !(0.0..=86_400.0).contains(&s) => {
                return Err(config_error(format!(
                    "--profile-run-cooldown-seconds {s}: give 0 to 86400 seconds"
                )));
            }
            Some(s) => Duration::from_secs_f64(s),
            None => Duration::ZERO,
        };
        if !(m.confidence_level > 0.0 && m.confidence_level < 1.0) {
            return Err(config_error(format!(
                "--confidence-level {}: give a value between 0 and 1, e.g. 0.95",
                m.confidence_level
            )));
        }
        let sweep_cooldown = limits::seconds(
            "--parameter-sweep-cooldown-seconds",
            m.parameter_sweep_cooldown_seconds,
            limits::Zero::Allowed,
        )?;
        let convergence = convergence(a)?;
        let variants = recipes::variants(a, is_sweep)?;
        let grid = recipes::grid(a, is_sweep, concurrency_list)?;
        if let Some(e) = grid.as_ref().and_then(|g| recipes::unused_by_grid(a, g)) {
            return Err(e);
        }
        let mut warnings = Vec::new();
        let search = search(a, is_sweep, &mut warnings)?;
        if search.is_none() && grid.is_none() {
            let sla_flags = [
                (m.ttft_sla_ms.is_some(), "--ttft-sla-ms"),
                (m.itl_sla_ms.is_some(), "--itl-sla-ms"),
                (m.tpot_sla_ms.is_some(), "--tpot-sla-ms"),
                (m.e2e_sla_ms.is_some(), "--e2e-sla-ms"),
                (m.error_rate_sla.is_some(), "--error-rate-sla"),
                (!m.search_sla.is_empty(), "--search-sla"),
                (m.search_style.is_some(), "--search-style"),
                (m.concurrency_min.is_some(), "--concurrency-min"),
                (m.concurrency_max.is_some(), "--concurrency-max"),
                (m.concurrency_steps.is_some(), "--concurrency-steps"),
                (m.degradation_threshold.is_some(), "--degradation-threshold"),
                (
                    m.degradation_metric_tag.is_some(),
                    "--degradation-metric-tag",
                ),
                (m.degradation_stat.is_some(), "--degradation-stat"),
            ];
            if let Some((_, flag)) = sla_flags.iter().find(|(given, _)| *given) {
                return Err(config_error(format!(
                    "{flag} belongs to a search: add --search-recipe max-concurrency-under-sla (or concurrency-ramp), or drop it"
                )));
            }
        }
        Ok(MultiRunOptions {
            runs,
            run_cooldown,
            confidence_level: m.confidence_level,
            warmup_after_first: m.no_profile_run_disable_warmup_after_first,
            consistent_seed: !m.no_set_consistent_seed,
            vary_seed_per_trial: m.vary_seed_per_trial,
            convergence,
            sweep_cooldown,
            same_seed: m.parameter_sweep_same_seed,
            order: match m.parameter_sweep_mode {
                ParameterSweepMode::Repeated => SweepOrder::Repeated,
                ParameterSweepMode::Independent => SweepOrder::Independent,
            },
            sweep_type: match m.sweep_type {
                CliSweepType::Grid => SweepType::Grid,
                CliSweepType::Zip => SweepType::Zip,
            },
            sweep_table: !m.no_sweep_table,
            search,
            grid,
            variants,
            warnings,
        })
    }

    /// True when this is more than one plain run.
    pub fn is_multi_run(&self) -> bool {
        self.runs > 1 || self.search.is_some() || self.grid.is_some() || !self.variants.is_empty()
    }
}

fn convergence(a: &ProfileArgs) -> Result<Option<Convergence>, ConfigError> {
    let m = &a.multirun;
    let Some(metric) = &m.convergence_metric else {
        for (id, flag) in [
            ("convergence_stat", "--convergence-stat"),
            ("convergence_threshold", "--convergence-threshold"),
            ("convergence_mode", "--convergence-mode"),
        ] {
            if a.typed(id) {
                return Err(config_error(format!(
                    "{flag} needs --convergence-metric (e.g. time_to_first_token); add it or drop {flag}"
                )));
            }
        }
        return Ok(None);
    };
    if m.num_profile_runs < 2 {
        return Err(config_error(
            "--convergence-metric needs repeated runs: add --num-profile-runs N (the most runs, 2-10)",
        ));
    }
    let mode = match m.convergence_mode {
        CliConvergenceMode::CiWidth => ConvergenceMode::CiWidth,
        CliConvergenceMode::Cv => ConvergenceMode::Cv,
        CliConvergenceMode::Distribution => ConvergenceMode::Distribution,
    };
    if mode == ConvergenceMode::Distribution
        && a.output.export_level == crate::cli::output::ExportLevel::Summary
    {
        return Err(config_error(
            "--convergence-mode distribution reads each run's per-request records: drop --export-level summary",
        ));
    }
    let threshold = m.convergence_threshold.unwrap_or(mode.default_threshold());
    if !(threshold > 0.0 && threshold < 1.0) {
        return Err(config_error(format!(
            "--convergence-threshold {threshold}: give a value between 0 and 1"
        )));
    }
    let stat = match m.convergence_stat {
        ConvergenceStat::Avg => "avg",
        ConvergenceStat::P50 => "p50",
        ConvergenceStat::P90 => "p90",
        ConvergenceStat::P95 => "p95",
        ConvergenceStat::P99 => "p99",
        ConvergenceStat::Min => "min",
        ConvergenceStat::Max => "max",
    };
    Ok(Some(Convergence {
        metric: metric.clone(),
        stat,
        mode,
        threshold,
    }))
}

fn search(
    a: &ProfileArgs,
    is_sweep: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<Search>, ConfigError> {
    let m = &a.multirun;
    if let Some(s) = adaptive::from_flags(a, is_sweep, warnings)? {
        return Ok(Some(Search::Adaptive(Box::new(s))));
    }
    let Some(recipe) = m.search_recipe else {
        return Ok(None);
    };
    if recipes::is_grid(recipe) {
        return Ok(None);
    }
    if is_sweep {
        return Err(config_error(
            "--search-recipe picks the concurrencies itself: give single values instead of lists, or drop --search-recipe",
        ));
    }
    if a.request_rate.is_some() || a.typed("concurrency") {
        return Err(config_error(
            "--search-recipe varies --concurrency itself: drop --concurrency and --request-rate (bound the search with --concurrency-min/--concurrency-max)",
        ));
    }
    let lo = m.concurrency_min.unwrap_or(1);
    let hi = m.concurrency_max.unwrap_or(1000);
    if hi <= lo {
        return Err(config_error(format!(
            "--concurrency-max {hi} must be above --concurrency-min {lo}"
        )));
    }
    let steps = m.concurrency_steps.unwrap_or(8);
    match recipe {
        CliRecipe::MaxConcurrencyUnderSla => {
            if m.degradation_threshold.is_some()
                || m.degradation_metric_tag.is_some()
                || m.degradation_stat.is_some()
            {
                return Err(config_error(
                    "--degradation-* belong to --search-recipe concurrency-ramp; drop them",
                ));
            }
            let slas = slas(a)?;
            if slas.is_empty() {
                return Err(config_error(
                    "--search-recipe max-concurrency-under-sla needs an SLA: add --ttft-sla-ms, --itl-sla-ms, --e2e-sla-ms, --error-rate-sla or --search-sla",
                ));
            }
            let style = m.search_style.unwrap_or(CliStyle::Monotonic);
            let planner = match style {
                CliStyle::SmoothIsotonic => {
                    return Err(config_error(
                        "--search-style smooth_isotonic (AIPerf's default) is not supported by this build; use monotonic (the default here), grid, bo or optuna",
                    ));
                }
                CliStyle::Bo => Some(Planner::Bayesian),
                CliStyle::Optuna => Some(Planner::Optuna),
                CliStyle::Monotonic | CliStyle::Grid => None,
            };
            if let Some(planner) = planner {
                if m.concurrency_steps.is_some() {
                    return Err(config_error(
                        "--concurrency-steps sets the ladder of --search-style grid; drop it with bo or optuna",
                    ));
                }
                let s = adaptive::recipe(a, recipe, planner, slas, (lo, hi), warnings)?;
                return Ok(Some(Search::Adaptive(Box::new(s))));
            }
            adaptive::refuse_tunables(a, "this --search-style")?;
            if m.search_style.is_none() {
                warnings.push(
                    "max-concurrency-under-sla: searching with the monotonic style (AIPerf's default, smooth_isotonic, is not built here; pass --search-style monotonic to silence this)".into(),
                );
            }
            if style == CliStyle::Monotonic && m.concurrency_steps.is_some() {
                return Err(config_error(
                    "--concurrency-steps sets the ladder of --search-style grid; add --search-style grid or drop it",
                ));
            }
            Ok(Some(Search::MaxConcurrencyUnderSla {
                slas,
                lo,
                hi,
                ladder: (style == CliStyle::Grid).then_some(steps),
            }))
        }
        CliRecipe::MaxGoodputUnderSlo => recipes::max_goodput(a, lo, hi).map(Some),
        // Resolved by recipes::grid.
        CliRecipe::PrefillTtftCurve | CliRecipe::DecodeItlCurve | CliRecipe::ParetoSweep => {
            Ok(None)
        }
        CliRecipe::MaxThroughputTtftSla | CliRecipe::MaxThroughputItlSla => {
            if m.degradation_threshold.is_some()
                || m.degradation_metric_tag.is_some()
                || m.degradation_stat.is_some()
            {
                return Err(config_error(
                    "--degradation-* belong to --search-recipe concurrency-ramp; drop them",
                ));
            }
            let slas = adaptive::throughput_recipe_slas(a, recipe)?;
            let s = adaptive::recipe(a, recipe, Planner::Bayesian, slas, (lo, hi), warnings)?;
            Ok(Some(Search::Adaptive(Box::new(s))))
        }
        CliRecipe::ConcurrencyRamp => {
            adaptive::refuse_tunables(a, "--search-recipe concurrency-ramp")?;
            if let Some(flag) = [
                (m.ttft_sla_ms.is_some(), "--ttft-sla-ms"),
                (m.itl_sla_ms.is_some(), "--itl-sla-ms"),
                (m.tpot_sla_ms.is_some(), "--tpot-sla-ms"),
                (m.e2e_sla_ms.is_some(), "--e2e-sla-ms"),
                (m.error_rate_sla.is_some(), "--error-rate-sla"),
                (!m.search_sla.is_empty(), "--search-sla"),
                (m.search_style.is_some(), "--search-style"),
            ]
            .iter()
            .find_map(|(given, flag)| given.then_some(*flag))
            {
                return Err(config_error(format!(
                    "{flag} belongs to --search-recipe max-concurrency-under-sla; concurrency-ramp watches --degradation-metric-tag"
                )));
            }
            let metric = m
                .degradation_metric_tag
                .clone()
                .unwrap_or_else(|| "request_latency".into());
            let streaming_only = ["time_to_first_token", "inter_token_latency"];
            if streaming_only.contains(&metric.as_str()) && !a.streaming {
                return Err(config_error(format!(
                    "--degradation-metric-tag {metric} is measured only on streamed responses: add --streaming"
                )));
            }
            let threshold = m.degradation_threshold.unwrap_or(0.20);
            if !(threshold > 0.0 && threshold.is_finite()) {
                return Err(config_error(format!(
                    "--degradation-threshold {threshold}: give a relative rise above 0, e.g. 0.2 for 20%"
                )));
            }
            Ok(Some(Search::ConcurrencyRamp {
                lo,
                hi,
                steps,
                metric,
                stat: m.degradation_stat.clone().unwrap_or_else(|| "p99".into()),
                threshold,
            }))
        }
    }
}

/// The SLAs of --ttft-sla-ms and friends (AIPerf's stats: TTFT and ITL p95, latency p99,
/// error rate avg in %) and each --search-sla.
fn slas(a: &ProfileArgs) -> Result<Vec<Sla>, ConfigError> {
    let m = &a.multirun;
    let itl = match (m.itl_sla_ms, m.tpot_sla_ms) {
        (Some(i), Some(t)) if i != t => {
            return Err(config_error(format!(
                "--itl-sla-ms {i} and --tpot-sla-ms {t} name the same SLA; give one"
            )));
        }
        (i, t) => i.or(t),
    };
    let sla = |metric: &str, stat: &str, threshold: f64| Sla {
        metric: metric.into(),
        stat: stat.into(),
        op: SlaOp::Lt,
        threshold,
    };
    let mut out = Vec::new();
    for (value, flag) in [
        (m.ttft_sla_ms, "--ttft-sla-ms"),
        (itl, "--itl-sla-ms"),
        (m.e2e_sla_ms, "--e2e-sla-ms"),
    ] {
        if let Some(v) = value
            && !(v > 0.0 && v.is_finite())
        {
            return Err(config_error(format!(
                "{flag} {v}: give milliseconds above 0"
            )));
        }
    }
    if let Some(v) = m.ttft_sla_ms {
        out.push(sla("time_to_first_token", "p95", v));
    }
    if let Some(v) = itl {
        out.push(sla("inter_token_latency", "p95", v));
    }
    if let Some(v) = m.e2e_sla_ms {
        out.push(sla("request_latency", "p99", v));
    }
    if let Some(v) = m.error_rate_sla {
        if !(0.0..=1.0).contains(&v) {
            return Err(config_error(format!(
                "--error-rate-sla {v}: give a share between 0 and 1, e.g. 0.01"
            )));
        }
        out.push(sla("request_error_rate", "avg", v * 100.0));
    }
    for spec in &m.search_sla {
        out.push(parse_search_sla(spec)?);
    }
    let streaming_only = ["time_to_first_token", "inter_token_latency"];
    if let Some(s) = out
        .iter()
        .find(|s| streaming_only.contains(&s.metric.as_str()))
        && !a.streaming
    {
        return Err(config_error(format!(
            "the SLA on {} is measured only on streamed responses: add --streaming",
            s.metric
        )));
    }
    Ok(out)
}

/// `metric:stat:op:threshold`, e.g. `time_to_first_token:p99:lt:2000`.
pub(super) fn parse_search_sla(spec: &str) -> Result<Sla, ConfigError> {
    let parts: Vec<&str> = spec.split(':').map(str::trim).collect();
    let usage = || {
        config_error(format!(
            "--search-sla {spec:?}: give metric:stat:op:threshold with op lt, le, gt or ge, e.g. time_to_first_token:p99:lt:2000"
        ))
    };
    let [metric, stat, op, threshold] = parts[..] else {
        return Err(usage());
    };
    let op = match op {
        "lt" | "<" => SlaOp::Lt,
        "le" | "<=" => SlaOp::Le,
        "gt" | ">" => SlaOp::Gt,
        "ge" | ">=" => SlaOp::Ge,
        _ => return Err(usage()),
    };
    let threshold: f64 = threshold.parse().map_err(|_| usage())?;
    if metric.is_empty() || stat.is_empty() || !threshold.is_finite() {
        return Err(usage());
    }
    Ok(Sla {
        metric: metric.into(),
        stat: stat.into(),
        op,
        threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};

    fn opts(extra: &[&str], is_sweep: bool) -> Result<MultiRunOptions, ConfigError> {
        let mut argv = vec!["aiperf", "profile", "-m", "m"];
        argv.extend_from_slice(extra);
        let Command::Profile(args) = Cli::parse_with_sources(argv).unwrap().command else {
            unreachable!()
        };
        MultiRunOptions::from_args(&args, is_sweep, None)
    }

    #[test]
    fn defaults_follow_aiperf() {
        let o = opts(&[], false).unwrap();
        assert_eq!(o.runs, 1);
        assert_eq!(o.confidence_level, 0.95);
        assert!(!o.warmup_after_first && o.consistent_seed && !o.vary_seed_per_trial);
        assert_eq!(
            (o.order, o.sweep_type),
            (SweepOrder::Repeated, SweepType::Grid)
        );
        assert!(o.sweep_table && !o.is_multi_run());
    }

    #[test]
    fn repeated_run_flags_need_repeated_runs() {
        let e = opts(&["--profile-run-cooldown-seconds", "5"], false).unwrap_err();
        assert!(e.to_string().contains("--num-profile-runs"), "{e}");
        assert!(
            opts(
                &[
                    "--num-profile-runs",
                    "3",
                    "--profile-run-cooldown-seconds",
                    "5"
                ],
                false
            )
            .is_ok()
        );
        assert!(opts(&["--no-set-consistent-seed"], true).is_ok());
        assert!(opts(&["--no-set-consistent-seed"], false).is_err());
        let e = opts(&["--confidence-level", "1"], false).unwrap_err();
        assert!(e.to_string().contains("between 0 and 1"), "{e}");
        let e = opts(&["--convergence-metric", "request_latency"], false).unwrap_err();
        assert!(e.to_string().contains("--num-profile-runs"), "{e}");
        let c = opts(
            &[
                "--num-profile-runs",
                "5",
                "--convergence-metric",
                "request_latency",
                "--convergence-mode",
                "cv",
            ],
            false,
        )
        .unwrap()
        .convergence
        .unwrap();
        assert_eq!(
            (c.mode, c.threshold, c.stat),
            (ConvergenceMode::Cv, 0.05, "avg")
        );
    }

    #[test]
    fn search_flags() {
        let e = opts(&["--ttft-sla-ms", "200"], false).unwrap_err();
        assert!(e.to_string().contains("--search-recipe"), "{e}");
        let e = opts(&["--search-recipe", "max-concurrency-under-sla"], false).unwrap_err();
        assert!(e.to_string().contains("needs an SLA"), "{e}");
        let e = opts(
            &[
                "--search-recipe",
                "max-concurrency-under-sla",
                "--ttft-sla-ms",
                "200",
            ],
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("--streaming"), "{e}");
        let s = opts(
            &[
                "--search-recipe",
                "max-concurrency-under-sla",
                "--streaming",
                "--ttft-sla-ms",
                "200",
                "--error-rate-sla",
                "0.01",
                "--search-sla",
                "request_latency:p50:le:900",
                "--concurrency-max",
                "64",
            ],
            false,
        )
        .unwrap()
        .search
        .unwrap();
        let Search::MaxConcurrencyUnderSla {
            slas,
            lo,
            hi,
            ladder,
        } = s
        else {
            panic!()
        };
        assert_eq!((lo, hi, ladder), (1, 64, None));
        assert_eq!(slas.len(), 3);
        assert_eq!(
            (slas[0].stat.as_str(), slas[1].threshold, slas[2].op),
            ("p95", 1.0, SlaOp::Le)
        );
        let e = opts(
            &["--search-recipe", "concurrency-ramp", "--concurrency", "4"],
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("drop --concurrency"), "{e}");
        let e = opts(
            &[
                "--search-recipe",
                "max-concurrency-under-sla",
                "--e2e-sla-ms",
                "9",
                "--search-sla",
                "x:y",
            ],
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("metric:stat:op:threshold"), "{e}");
    }

    #[test]
    fn bayesian_styles_and_recipes() {
        let base = [
            "--search-recipe",
            "max-concurrency-under-sla",
            "--e2e-sla-ms",
            "500",
            "--concurrency-max",
            "64",
        ];
        let with = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            opts(&v, false)
        };
        for (style, planner) in [("bo", Planner::Bayesian), ("optuna", Planner::Optuna)] {
            let o = with(&["--search-style", style, "--search-max-iterations", "12"]).unwrap();
            let Some(Search::Adaptive(s)) = o.search else {
                panic!("{style}")
            };
            assert_eq!(
                (s.planner, s.max_iterations, s.initial_points),
                (planner, 12, 5)
            );
            assert_eq!(
                (s.dims[0].lo, s.dims[0].hi, s.dims[0].log),
                (1.0, 64.0, true)
            );
            assert_eq!(s.slas[0].metric, "request_latency");
            assert_eq!(s.recipe, Some("max-concurrency-under-sla"));
            assert!(o.warnings[0].contains("TPE"), "{:?}", o.warnings);
        }
        let o = with(&[]).unwrap();
        assert!(matches!(
            o.search,
            Some(Search::MaxConcurrencyUnderSla { .. })
        ));
        assert!(
            o.warnings[0].contains("smooth_isotonic"),
            "{:?}",
            o.warnings
        );
        let e = with(&["--search-style", "smooth_isotonic"]).unwrap_err();
        assert!(e.to_string().contains("not supported by this build"), "{e}");
        let e = with(&["--search-style", "grid", "--search-random-seed", "3"]).unwrap_err();
        assert!(e.to_string().contains("--search-random-seed"), "{e}");
        let o = opts(
            &[
                "--search-recipe",
                "max-throughput-itl-sla",
                "--streaming",
                "--tpot-sla-ms",
                "40",
                "--search-sla",
                "request_error_rate:avg:lt:1",
            ],
            false,
        )
        .unwrap();
        let Some(Search::Adaptive(s)) = o.search else {
            panic!()
        };
        assert_eq!((s.dims[0].hi, s.max_iterations), (1000.0, 30));
        assert_eq!(
            (s.slas[0].metric.as_str(), s.slas[0].threshold, s.slas.len()),
            ("inter_token_latency", 40.0, 2)
        );
        let e = opts(
            &[
                "--search-recipe",
                "max-throughput-ttft-sla",
                "--streaming",
                "--ttft-sla-ms",
                "200",
                "--e2e-sla-ms",
                "900",
            ],
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("--search-sla"), "{e}");
    }
}
