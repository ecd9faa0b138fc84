//! Flags of sweeps (list-valued load flags), repeated runs and the SLA search.

use clap::{Args, ValueEnum};

/// `--sweep-type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepType {
    /// Every combination of the listed values (the last flag, in sorted order, varies fastest).
    Grid,
    /// The i-th value of every list together; all lists must have the same length.
    Zip,
}

/// `--parameter-sweep-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ParameterSweepMode {
    /// Trial 1 of every point, then trial 2 of every point, ...
    Repeated,
    /// Every trial of point 1, then every trial of point 2, ...
    Independent,
}

/// `--convergence-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConvergenceMode {
    /// Width of the confidence interval relative to the mean.
    #[value(name = "ci-width", alias = "ci_width")]
    CiWidth,
    /// Coefficient of variation across runs.
    Cv,
    /// The latest run's per-request values look like the earlier runs' (two-sample KS test).
    Distribution,
}

/// `--convergence-stat` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConvergenceStat {
    Avg,
    P50,
    P90,
    P95,
    P99,
    Min,
    Max,
}

/// `--search-recipe` values this build runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchRecipe {
    /// The highest concurrency at which every SLA (--ttft-sla-ms, --itl-sla-ms, --e2e-sla-ms,
    /// --error-rate-sla, --search-sla) holds.
    MaxConcurrencyUnderSla,
    /// Concurrency on a log-spaced ladder; reports the first point whose latency degrades
    /// past the first point's by --degradation-threshold.
    ConcurrencyRamp,
    /// ISL on a log-spaced ladder (--isl-min..--isl-max, --isl-steps) at concurrency 1;
    /// fits TTFT against ISL (`prefill_curve.json`). Needs --streaming.
    PrefillTtftCurve,
    /// Every concurrency (--concurrency-min..max, steps; default 1..200, 6) with every OSL
    /// (--osl-min..max, steps; default 64..1024, 4); the ITL surface
    /// (`decode_itl_surface.json`). Needs --streaming.
    DecodeItlCurve,
    /// Each --isl-osl-pairs shape at each --concurrency value (default 1,4,16,64,256); the
    /// TTFT p95 vs output throughput Pareto frontier (`pareto_sweep.json`). Needs --streaming.
    ParetoSweep,
    /// The concurrency with the most goodput while --slo-attainment-fraction of requests
    /// meet --ttft-sla-ms, --tpot-sla-ms and --e2e-sla-ms together. Needs --streaming.
    MaxGoodputUnderSlo,
    /// Bayesian optimisation of output token throughput over concurrency (1-1000, or
    /// --concurrency-min/--concurrency-max) with TTFT p95 under --ttft-sla-ms.
    MaxThroughputTtftSla,
    /// The same with inter-token latency p95 under --itl-sla-ms (or --tpot-sla-ms).
    MaxThroughputItlSla,
}

/// `--search-style` values this build runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchStyle {
    /// Double the concurrency until an SLA breaks, then bisect between the last pass and
    /// the first breach.
    Monotonic,
    /// A log-spaced ladder of --concurrency-steps points, stopped at the first breach.
    Grid,
    /// Bayesian optimisation of output token throughput among the concurrencies that meet
    /// the SLAs (the bayesian planner).
    Bo,
    /// The same through the optuna planner.
    Optuna,
    /// AIPerf's isotonic-regression boundary search; not built here (refused).
    #[value(name = "smooth_isotonic", alias = "smooth-isotonic")]
    SmoothIsotonic,
}

/// `--search-stat` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchStat {
    Avg,
    P50,
    P90,
    P95,
    P99,
}

/// `--search-direction` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchDirection {
    Maximize,
    Minimize,
}

/// `--search-planner` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchPlanner {
    /// AIPerf's curated preset: BoTorch when installed, else TPE (here: always TPE, with a
    /// warning, as this build has no PyTorch).
    Bayesian,
    /// Pick the sampler with --optuna-sampler.
    Optuna,
    /// AIPerf's 1-D bisecting planner; refused with --search-space here (use
    /// --search-recipe max-concurrency-under-sla --search-style monotonic).
    #[value(name = "monotonic_sla", alias = "monotonic-sla")]
    MonotonicSla,
    /// AIPerf's isotonic-regression boundary search; not built here (refused).
    #[value(name = "smooth_isotonic", alias = "smooth-isotonic")]
    SmoothIsotonic,
}

/// `--optuna-sampler` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptunaSampler {
    /// Gaussian process (Matérn 5/2) with expected improvement and constraint feasibility.
    Gp,
    /// Tree-structured Parzen estimator.
    Tpe,
    /// BoTorch (needs PyTorch; refused by this build).
    Botorch,
}

/// `--optuna-acquisition` values (BoTorch's; refused by this build).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptunaAcquisition {
    Logei,
    Qlogei,
    Qnei,
    Qlognei,
    Qehvi,
    Qnehvi,
    Qlognehvi,
}

/// `--optuna-terminator` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptunaTerminator {
    /// Optuna's regret-bound stopping rule (refused by this build).
    Regret,
    /// Optuna's EMMR stopping rule (refused by this build).
    Emmr,
    /// Stop on --search-max-iterations, no improvement in 10 points or a plateau.
    None,
}

/// `--search-percentile-pooling` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PercentilePooling {
    /// The mean of each run's percentile.
    Mean,
    /// The percentile of every run's per-request values together.
    Pooled,
}

/// `--bo-constraint-mode` values (deprecated and ignored, as in AIPerf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BoConstraintMode {
    Penalty,
    Eic,
}

#[derive(Debug, Clone, Args)]
pub struct MultiRunArgs {
    /// Run the whole profile this many times (1-10) and report each metric's mean, spread
    /// and confidence interval across runs (`aggregate/`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10), help_heading = "Multi-Run")]
    pub num_profile_runs: u32,

    /// Seconds to wait between repeated runs (0-86400).
    #[arg(long, help_heading = "Multi-Run")]
    pub profile_run_cooldown_seconds: Option<f64>,

    /// Confidence level of the intervals across runs, between 0 and 1.
    #[arg(long, default_value_t = 0.95, help_heading = "Multi-Run")]
    pub confidence_level: f64,

    /// Repeated runs after the first skip the warmup phase (the default).
    #[arg(
        long,
        overrides_with = "no_profile_run_disable_warmup_after_first",
        help_heading = "Multi-Run"
    )]
    pub profile_run_disable_warmup_after_first: bool,

    /// Every repeated run does its warmup.
    #[arg(
        long,
        overrides_with = "profile_run_disable_warmup_after_first",
        help_heading = "Multi-Run"
    )]
    pub no_profile_run_disable_warmup_after_first: bool,

    /// Without --random-seed, sweeps and repeated runs use seed 42 (the default), so every
    /// run draws the same dataset.
    #[arg(
        long,
        overrides_with = "no_set_consistent_seed",
        help_heading = "Multi-Run"
    )]
    pub set_consistent_seed: bool,

    /// Sweeps and repeated runs without --random-seed draw fresh data each run.
    #[arg(
        long,
        overrides_with = "set_consistent_seed",
        help_heading = "Multi-Run"
    )]
    pub no_set_consistent_seed: bool,

    /// Each repeated run gets its own seed, derived from the base seed, the point and the run.
    #[arg(
        long,
        overrides_with = "no_vary_seed_per_trial",
        help_heading = "Multi-Run"
    )]
    pub vary_seed_per_trial: bool,

    /// Repeated runs of a point share its seed (the default).
    #[arg(
        long,
        overrides_with = "vary_seed_per_trial",
        help_heading = "Multi-Run"
    )]
    pub no_vary_seed_per_trial: bool,

    /// Stop repeating once this metric (e.g. `time_to_first_token`) has converged;
    /// --num-profile-runs is then the most runs.
    #[arg(long, help_heading = "Multi-Run")]
    pub convergence_metric: Option<String>,

    /// Which statistic of --convergence-metric is watched.
    #[arg(long, value_enum, default_value_t = ConvergenceStat::Avg, help_heading = "Multi-Run")]
    pub convergence_stat: ConvergenceStat,

    /// Converged below this (0-1): relative CI width (default 0.10), CV (0.05); for
    /// `distribution`, converged above this KS p-value (0.05).
    #[arg(long, help_heading = "Multi-Run")]
    pub convergence_threshold: Option<f64>,

    /// How convergence is judged.
    #[arg(long, value_enum, default_value_t = ConvergenceMode::CiWidth, help_heading = "Multi-Run")]
    pub convergence_mode: ConvergenceMode,

    /// Seconds to wait between sweep points.
    #[arg(long, default_value_t = 0.0, help_heading = "Multi-Run")]
    pub parameter_sweep_cooldown_seconds: f64,

    /// Every sweep point uses the base seed (default: base seed + point index).
    #[arg(
        long,
        overrides_with = "no_parameter_sweep_same_seed",
        help_heading = "Multi-Run"
    )]
    pub parameter_sweep_same_seed: bool,

    /// Sweep point i uses the base seed + i (the default).
    #[arg(
        long,
        overrides_with = "parameter_sweep_same_seed",
        help_heading = "Multi-Run"
    )]
    pub no_parameter_sweep_same_seed: bool,

    /// Order of a sweep with repeated runs: `repeated` (all points, then again) or
    /// `independent` (every run of a point before the next point).
    #[arg(long, value_enum, default_value_t = ParameterSweepMode::Repeated, help_heading = "Multi-Run")]
    pub parameter_sweep_mode: ParameterSweepMode,

    /// How several list-valued flags combine: `grid` (every combination) or `zip` (pairwise).
    #[arg(long, value_enum, default_value_t = SweepType::Grid, help_heading = "Multi-Run")]
    pub sweep_type: SweepType,

    /// Do not print the sweep table after each point.
    #[arg(long, help_heading = "Multi-Run")]
    pub no_sweep_table: bool,

    /// Adaptive search over `path:lo,hi[:kind]` (kind `int` or `real`), e.g.
    /// `phases.profiling.concurrency:1,64:int` or `concurrency:1,64:int`; repeatable, one
    /// per dimension. Needs --search-metric, --search-direction and --search-max-iterations.
    #[arg(long, help_heading = "Multi-Run")]
    pub search_space: Vec<String>,

    /// The metric the adaptive search optimises, e.g. `output_token_throughput`.
    #[arg(long, help_heading = "Multi-Run")]
    pub search_metric: Option<String>,

    /// The statistic of --search-metric (default avg).
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub search_stat: Option<SearchStat>,

    /// Whether --search-metric is maximised or minimised.
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub search_direction: Option<SearchDirection>,

    /// Most points the adaptive search measures (2-200), each --num-profile-runs times.
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=200), help_heading = "Multi-Run")]
    pub search_max_iterations: Option<u32>,

    /// Quasi-random (Halton) points before the model picks them (default 5); below
    /// --search-max-iterations.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Multi-Run")]
    pub search_initial_points: Option<u32>,

    /// Seed of the search's own choices, for a reproducible trajectory (default: random).
    #[arg(long, help_heading = "Multi-Run")]
    pub search_random_seed: Option<u64>,

    /// The adaptive search's planner: `bayesian` (default) or `optuna`.
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub search_planner: Option<SearchPlanner>,

    /// The sampler of --search-planner optuna: `gp` or `tpe` (`botorch` needs PyTorch,
    /// which this build lacks).
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub optuna_sampler: Option<OptunaSampler>,

    /// BoTorch's acquisition function; refused, as this build has no BoTorch.
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub optuna_acquisition: Option<OptunaAcquisition>,

    /// Stopping rule of --search-planner optuna: only `none` (regret and emmr are refused).
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub optuna_terminator: Option<OptunaTerminator>,

    /// With a percentile --search-stat and several runs per point: `mean` of the runs'
    /// percentiles (default) or the percentile of their `pooled` per-request values.
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub search_percentile_pooling: Option<PercentilePooling>,

    /// Deprecated in AIPerf and ignored (a warning says so): SLAs are constraints of the
    /// model either way.
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub bo_constraint_mode: Option<BoConstraintMode>,

    /// Multi-tier SLO search; refused, as this build has no multi-tier planner.
    #[arg(long, help_heading = "Multi-Run")]
    pub search_sla_tier: Vec<String>,

    /// Run a named recipe: `max-concurrency-under-sla`, `concurrency-ramp`,
    /// `prefill-ttft-curve`, `decode-itl-curve`, `pareto-sweep`, `max-goodput-under-slo`,
    /// `max-throughput-ttft-sla` or `max-throughput-itl-sla`.
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub search_recipe: Option<SearchRecipe>,

    /// How max-concurrency-under-sla searches: `monotonic` (double, then bisect; default
    /// here), `grid` (a log-spaced ladder), `bo` or `optuna` (Bayesian optimisation of
    /// throughput under the SLAs). AIPerf's default `smooth_isotonic` is not built.
    #[arg(long, value_enum, help_heading = "Multi-Run")]
    pub search_style: Option<SearchStyle>,

    /// SLA: TTFT p95 must stay below this many ms.
    #[arg(long, help_heading = "Multi-Run")]
    pub ttft_sla_ms: Option<f64>,

    /// SLA: inter-token latency p95 must stay below this many ms.
    #[arg(long, help_heading = "Multi-Run")]
    pub itl_sla_ms: Option<f64>,

    /// Same as --itl-sla-ms.
    #[arg(long, help_heading = "Multi-Run")]
    pub tpot_sla_ms: Option<f64>,

    /// SLA: request latency p99 must stay below this many ms.
    #[arg(long, help_heading = "Multi-Run")]
    pub e2e_sla_ms: Option<f64>,

    /// SLA: the share of failed requests must stay below this (0-1).
    #[arg(long, help_heading = "Multi-Run")]
    pub error_rate_sla: Option<f64>,

    /// More SLAs, `metric:stat:op:threshold` (op lt, le, gt, ge), e.g.
    /// `time_to_first_token:p99:lt:2000` (display units); repeatable.
    #[arg(long, help_heading = "Multi-Run")]
    pub search_sla: Vec<String>,

    /// Lowest concurrency the search tries (default 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Multi-Run")]
    pub concurrency_min: Option<u64>,

    /// Highest concurrency the search tries (default 1000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Multi-Run")]
    pub concurrency_max: Option<u64>,

    /// Points on the log-spaced ladder of the grid style and concurrency-ramp (default 8).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..), help_heading = "Multi-Run")]
    pub concurrency_steps: Option<u64>,

    /// concurrency-ramp: relative rise over the first point that counts as degraded (0.20).
    #[arg(long, help_heading = "Multi-Run")]
    pub degradation_threshold: Option<f64>,

    /// concurrency-ramp: the metric watched (request_latency).
    #[arg(long, help_heading = "Multi-Run")]
    pub degradation_metric_tag: Option<String>,

    /// concurrency-ramp: the statistic watched (p99).
    #[arg(long, help_heading = "Multi-Run")]
    pub degradation_stat: Option<String>,

    /// One scenario of a scenario sweep, `[name:] key=value, key=value` with keys the
    /// profile flags without `--` (e.g. `small: isl=128, osl=64, concurrency=4`); give it
    /// two or more times, one run per variant.
    #[arg(long, visible_alias = "sweep-variant", help_heading = "Multi-Run")]
    pub variant: Vec<String>,

    /// pareto-sweep: the ISL/OSL shapes, e.g. `128/128,512/256,2048/512`.
    #[arg(long, help_heading = "Multi-Run")]
    pub isl_osl_pairs: Option<String>,

    /// max-goodput-under-slo: share of requests (above 0, at most 1) that must meet every
    /// SLO for a concurrency to count (0.95).
    #[arg(long, help_heading = "Multi-Run")]
    pub slo_attainment_fraction: Option<f64>,

    /// prefill-ttft-curve: lowest ISL of the ladder (256).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Multi-Run")]
    pub isl_min: Option<u64>,

    /// prefill-ttft-curve: highest ISL of the ladder (32768).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Multi-Run")]
    pub isl_max: Option<u64>,

    /// prefill-ttft-curve: points on the log-spaced ISL ladder (8).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..), help_heading = "Multi-Run")]
    pub isl_steps: Option<u64>,

    /// decode-itl-curve: lowest OSL of the ladder (64).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Multi-Run")]
    pub osl_min: Option<u64>,

    /// decode-itl-curve: highest OSL of the ladder (1024).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Multi-Run")]
    pub osl_max: Option<u64>,

    /// decode-itl-curve: points on the log-spaced OSL ladder (4).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..), help_heading = "Multi-Run")]
    pub osl_steps: Option<u64>,
}
