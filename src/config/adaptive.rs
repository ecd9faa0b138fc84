//! The adaptive search: `--search-space` with its companions, the BO recipes
//! (`max-throughput-ttft-sla`, `max-throughput-itl-sla`) and the `bo`/`optuna` styles of
//! `max-concurrency-under-sla`, checked by AIPerf's rules and turned into one [`Adaptive`].
//! What this build cannot honour (BoTorch, Optuna's terminators, multi-tier SLOs,
//! the smooth_isotonic planner) is refused by name with what to use instead.

use super::multirun::{Sla, SlaOp, parse_search_sla};
use super::{ConfigError, config_error};
use crate::cli::ProfileArgs;
use crate::cli::flags::{FLAGS, Kind};
use crate::cli::multirun::{
    OptunaSampler, OptunaTerminator, PercentilePooling, SearchDirection, SearchPlanner,
    SearchRecipe as CliRecipe, SearchStat,
};

/// One dimension of the box.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    /// AIPerf's dotted path, e.g. `phases.profiling.concurrency`.
    pub path: &'static str,
    /// The flag that sets it, e.g. `--concurrency`.
    pub flag: String,
    pub lo: f64,
    pub hi: f64,
    /// Whole numbers only (`:int`).
    pub int: bool,
    /// Sampled on a log scale (the recipes' concurrency, AIPerf's `log-uniform` prior).
    pub log: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Maximize,
    Minimize,
}

/// The planner, as AIPerf names it in `search_history.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planner {
    Bayesian,
    Optuna,
}

/// How points after the initial ones are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampler {
    Gp,
    Tpe,
}

/// AIPerf's fixed convergence knobs (its YAML-only `improvement_patience`,
/// `plateau_window`, `plateau_threshold`).
pub const IMPROVEMENT_PATIENCE: usize = 10;
pub const PLATEAU_WINDOW: usize = 8;
pub const PLATEAU_THRESHOLD: f64 = 0.01;

#[derive(Debug, Clone, PartialEq)]
pub struct Adaptive {
    pub planner: Planner,
    pub sampler: Sampler,
    pub dims: Vec<Dim>,
    pub metric: String,
    pub stat: &'static str,
    pub direction: Direction,
    pub slas: Vec<Sla>,
    pub max_iterations: usize,
    pub initial_points: usize,
    pub seed: Option<u64>,
    /// A percentile over every run's per-request values (not the mean of the runs').
    pub pooled: bool,
    pub recipe: Option<&'static str>,
}

/// AIPerf's bare names for the most searched paths.
const ALIASES: [(&str, &str); 9] = [
    ("concurrency", "phases.profiling.concurrency"),
    (
        "prefill_concurrency",
        "phases.profiling.prefill_concurrency",
    ),
    ("rate", "phases.profiling.rate"),
    ("requests", "phases.profiling.requests"),
    ("duration", "phases.profiling.duration"),
    ("sessions", "phases.profiling.sessions"),
    ("users", "phases.profiling.users"),
    ("smoothness", "phases.profiling.smoothness"),
    ("grace_period", "phases.profiling.grace_period"),
];

/// The flags that choose what is searched; a recipe owns them (AIPerf's rule).
const DEFINING: [(&str, &str); 10] = [
    ("search_space", "--search-space"),
    ("search_metric", "--search-metric"),
    ("search_stat", "--search-stat"),
    ("search_direction", "--search-direction"),
    ("search_planner", "--search-planner"),
    ("optuna_sampler", "--optuna-sampler"),
    ("optuna_acquisition", "--optuna-acquisition"),
    ("optuna_terminator", "--optuna-terminator"),
    ("search_percentile_pooling", "--search-percentile-pooling"),
    ("bo_constraint_mode", "--bo-constraint-mode"),
];

/// Budget and seed: allowed with a BO recipe, where they override its defaults.
const TUNABLE: [(&str, &str); 3] = [
    ("search_max_iterations", "--search-max-iterations"),
    ("search_initial_points", "--search-initial-points"),
    ("search_random_seed", "--search-random-seed"),
];

/// The recipe-named SLA and bounds flags, which `--search-space` does not read.
const RECIPE_ONLY: [(&str, &str); 12] = [
    ("ttft_sla_ms", "--ttft-sla-ms"),
    ("itl_sla_ms", "--itl-sla-ms"),
    ("tpot_sla_ms", "--tpot-sla-ms"),
    ("e2e_sla_ms", "--e2e-sla-ms"),
    ("error_rate_sla", "--error-rate-sla"),
    ("search_style", "--search-style"),
    ("concurrency_min", "--concurrency-min"),
    ("concurrency_max", "--concurrency-max"),
    ("concurrency_steps", "--concurrency-steps"),
    ("degradation_threshold", "--degradation-threshold"),
    ("degradation_metric_tag", "--degradation-metric-tag"),
    ("degradation_stat", "--degradation-stat"),
];

fn first_typed<'a>(a: &ProfileArgs, flags: &[(&str, &'a str)]) -> Option<&'a str> {
    flags.iter().find(|(id, _)| a.typed(id)).map(|(_, f)| *f)
}

/// Flags this build refuses whatever else is given.
fn refuse_unbuilt(a: &ProfileArgs) -> Result<(), ConfigError> {
    let m = &a.multirun;
    if !m.search_sla_tier.is_empty() {
        return Err(config_error(
            "--search-sla-tier: multi-tier SLO search is not supported by this build; run one search per tier with --search-sla",
        ));
    }
    if m.optuna_sampler == Some(OptunaSampler::Botorch) {
        return Err(config_error(
            "--optuna-sampler botorch needs PyTorch and BoTorch, which this build does not have; use --optuna-sampler gp (a Gaussian process with expected improvement) or tpe",
        ));
    }
    if let Some(acq) = m.optuna_acquisition {
        let acq = format!("{acq:?}").to_lowercase();
        return Err(config_error(format!(
            "--optuna-acquisition {acq}: acquisitions belong to --optuna-sampler botorch, which needs PyTorch and is not supported by this build; drop it (--optuna-sampler gp maximises expected improvement)"
        )));
    }
    if let Some(t @ (OptunaTerminator::Regret | OptunaTerminator::Emmr)) = m.optuna_terminator {
        let t = format!("{t:?}").to_lowercase();
        return Err(config_error(format!(
            "--optuna-terminator {t}: Optuna's posterior-regret stopping rules are not supported by this build; use none (the search stops at --search-max-iterations, after 10 points without improvement or on a plateau)"
        )));
    }
    Ok(())
}

/// The search of `--search-space` and its companions; `None` when not given. Warnings
/// (a fallback, a deprecated flag) go to `warnings`.
pub fn from_flags(
    a: &ProfileArgs,
    is_sweep: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<Adaptive>, ConfigError> {
    let m = &a.multirun;
    refuse_unbuilt(a)?;
    if m.search_recipe.is_some() {
        if let Some(flag) = first_typed(a, &DEFINING) {
            return Err(config_error(format!(
                "--search-recipe chooses the objective, search space and planner itself: drop {flag} (--search-max-iterations, --search-initial-points and --search-random-seed may be given with a BO recipe)"
            )));
        }
        return Ok(None);
    }
    if m.search_space.is_empty() {
        if let Some(flag) = first_typed(a, &DEFINING[1..]).or(first_typed(a, &TUNABLE)) {
            return Err(config_error(format!(
                "{flag} belongs to an adaptive search: add --search-space path:lo,hi[:int] (or a --search-recipe), or drop it"
            )));
        }
        return Ok(None);
    }
    if is_sweep {
        return Err(config_error(
            "--search-space picks the values itself: give single values instead of lists, or drop --search-space",
        ));
    }
    if let Some(flag) = first_typed(a, &RECIPE_ONLY) {
        return Err(config_error(format!(
            "{flag} belongs to --search-recipe; with --search-space give SLAs as --search-sla metric:stat:op:threshold and bounds in the space"
        )));
    }
    if a.typed("convergence_metric") {
        return Err(config_error(
            "--search-space and --convergence-metric cannot be combined (AIPerf leaves their composition undefined); drop one",
        ));
    }
    let (Some(metric), Some(direction), Some(max_iterations)) = (
        m.search_metric.clone(),
        m.search_direction,
        m.search_max_iterations,
    ) else {
        let missing = [
            (m.search_metric.is_none(), "--search-metric"),
            (m.search_direction.is_none(), "--search-direction"),
            (m.search_max_iterations.is_none(), "--search-max-iterations"),
        ]
        .iter()
        .find_map(|(missing, f)| missing.then_some(*f))
        .unwrap_or_default();
        return Err(config_error(format!(
            "--search-space needs {missing}, e.g. --search-metric output_token_throughput --search-direction maximize --search-max-iterations 20"
        )));
    };
    let mut dims: Vec<Dim> = Vec::new();
    for raw in &m.search_space {
        let dim = parse_dim(raw)?;
        if dims.iter().any(|d| d.path == dim.path) {
            return Err(config_error(format!(
                "--search-space {}: given twice; give each path once",
                dim.path
            )));
        }
        dims.push(dim);
    }
    for d in &dims {
        let id = FLAGS
            .iter()
            .find(|f| f.path == Some(d.path))
            .map(|f| f.id)
            .unwrap_or_default();
        if a.typed(id) || (id == "concurrency" && a.request_rate.is_some()) {
            return Err(config_error(format!(
                "--search-space sets {} itself: drop {} (and --request-rate for concurrency)",
                d.path, d.flag
            )));
        }
    }
    let (planner, sampler) = planner(a, warnings)?;
    let stat = match m.search_stat.unwrap_or(SearchStat::Avg) {
        SearchStat::Avg => "avg",
        SearchStat::P50 => "p50",
        SearchStat::P90 => "p90",
        SearchStat::P95 => "p95",
        SearchStat::P99 => "p99",
    };
    let pooled = pooling(a, stat)?;
    let slas = m
        .search_sla
        .iter()
        .map(|s| parse_search_sla(s))
        .collect::<Result<Vec<_>, _>>()?;
    let adaptive = Adaptive {
        planner,
        sampler,
        dims,
        metric,
        stat,
        direction: match direction {
            SearchDirection::Maximize => Direction::Maximize,
            SearchDirection::Minimize => Direction::Minimize,
        },
        slas,
        max_iterations: max_iterations as usize,
        initial_points: m.search_initial_points.unwrap_or(5) as usize,
        seed: m.search_random_seed,
        pooled,
        recipe: None,
    };
    check_budget(&adaptive)?;
    Ok(Some(adaptive))
}

/// The planner and sampler of the flags, with AIPerf's fallback when BoTorch was implied.
fn planner(a: &ProfileArgs, warnings: &mut Vec<String>) -> Result<(Planner, Sampler), ConfigError> {
    let m = &a.multirun;
    if let Some(c) = m.bo_constraint_mode {
        let c = format!("{c:?}").to_lowercase();
        warnings.push(format!(
            "--bo-constraint-mode {c} is deprecated and ignored (as in AIPerf): SLAs are constraints of the model either way"
        ));
    }
    let planner = match m.search_planner.unwrap_or(SearchPlanner::Bayesian) {
        SearchPlanner::Bayesian => Planner::Bayesian,
        SearchPlanner::Optuna => Planner::Optuna,
        SearchPlanner::MonotonicSla => {
            return Err(config_error(
                "--search-planner monotonic_sla is not supported with --search-space by this build; for the highest concurrency under SLAs use --search-recipe max-concurrency-under-sla --search-style monotonic",
            ));
        }
        SearchPlanner::SmoothIsotonic => {
            return Err(config_error(
                "--search-planner smooth_isotonic is not supported by this build; use bayesian or optuna, or --search-recipe max-concurrency-under-sla --search-style monotonic",
            ));
        }
    };
    // (--optuna-terminator none is a no-op with either planner; the others are refused.)
    let optuna_only = [("optuna_sampler", "--optuna-sampler")];
    if planner == Planner::Bayesian
        && let Some(flag) = first_typed(a, &optuna_only)
    {
        return Err(config_error(format!(
            "{flag} is read only by --search-planner optuna; add it or drop {flag}"
        )));
    }
    let sampler = match m.optuna_sampler {
        Some(OptunaSampler::Gp) => Sampler::Gp,
        Some(OptunaSampler::Tpe) => Sampler::Tpe,
        // Refused earlier; listed so a new value forces a decision.
        Some(OptunaSampler::Botorch) => unreachable!("refused"),
        None => {
            warnings.push(implicit_botorch_warning(planner));
            Sampler::Tpe
        }
    };
    Ok((planner, sampler))
}

/// AIPerf's warning when its implied BoTorch sampler cannot load; this build never has it.
fn implicit_botorch_warning(planner: Planner) -> String {
    let name = match planner {
        Planner::Bayesian => "bayesian",
        Planner::Optuna => "optuna",
    };
    format!(
        "search planner {name}: its default BoTorch sampler needs PyTorch, which this build does not have; falling back to the TPE sampler (--search-planner optuna --optuna-sampler gp uses a Gaussian process)"
    )
}

fn pooling(a: &ProfileArgs, stat: &str) -> Result<bool, ConfigError> {
    match a.multirun.search_percentile_pooling {
        // Pooled means would be the mean again (AIPerf refuses it when avg is typed).
        Some(PercentilePooling::Pooled) if stat == "avg" => Err(config_error(
            "--search-percentile-pooling pooled needs a percentile --search-stat (p50, p90, p95 or p99); pooling means is the mean again",
        )),
        Some(PercentilePooling::Pooled)
            if a.output.export_level == crate::cli::output::ExportLevel::Summary =>
        {
            Err(config_error(
                "--search-percentile-pooling pooled reads each run's per-request records: drop --export-level summary",
            ))
        }
        Some(PercentilePooling::Pooled) => Ok(true),
        _ => Ok(false),
    }
}

fn check_budget(s: &Adaptive) -> Result<(), ConfigError> {
    if s.initial_points >= s.max_iterations {
        return Err(config_error(format!(
            "--search-initial-points {} must be below --search-max-iterations {}: the model never fits otherwise",
            s.initial_points, s.max_iterations
        )));
    }
    Ok(())
}

/// `path:lo,hi[:kind]`.
fn parse_dim(raw: &str) -> Result<Dim, ConfigError> {
    let usage = |why: &str| {
        config_error(format!(
            "--search-space {raw:?}: {why}; give path:lo,hi[:kind] with kind int or real, e.g. phases.profiling.concurrency:1,64:int"
        ))
    };
    let parts: Vec<&str> = raw.split(':').collect();
    let (path, bounds, kind) = match parts[..] {
        [p, b] => (p, b, "real"),
        [p, b, k] => (p, b, k),
        _ => return Err(usage("expected 2 or 3 parts separated by ':'")),
    };
    let int = match kind {
        "int" => true,
        "real" => false,
        _ => return Err(usage("kind must be int or real")),
    };
    let Some((lo, hi)) = bounds.split_once(',') else {
        return Err(usage("missing ',' between the bounds"));
    };
    let (Ok(lo), Ok(hi)) = (lo.trim().parse::<f64>(), hi.trim().parse::<f64>()) else {
        return Err(usage("the bounds must be numbers"));
    };
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return Err(usage("hi must be above lo, both finite"));
    }
    let path = ALIASES
        .iter()
        .find(|(alias, _)| *alias == path)
        .map_or(path, |(_, full)| full);
    let searchable = |k: Kind| matches!(k, Kind::Int | Kind::Float);
    let Some(row) = FLAGS
        .iter()
        .find(|f| f.path == Some(path) && searchable(f.kind))
    else {
        let mut known: Vec<&str> = FLAGS
            .iter()
            .filter(|f| f.sweep)
            .filter_map(|f| f.path)
            .collect();
        known.sort_unstable();
        return Err(config_error(format!(
            "--search-space {raw:?}: {path} is not a number this build can search; give one of {}",
            known.join(", ")
        )));
    };
    if row.kind == Kind::Int && !int {
        return Err(usage(&format!("{path} takes whole numbers: add :int")));
    }
    let long = crate::cli::command()
        .find_subcommand("profile")
        .and_then(|p| {
            p.get_arguments()
                .find(|x| x.get_id() == row.id)?
                .get_long()
                .map(str::to_string)
        })
        .unwrap_or_else(|| row.id.replace('_', "-"));
    Ok(Dim {
        path: row.path.expect("found by its path"),
        flag: format!("--{long}"),
        lo,
        hi,
        int,
        log: false,
    })
}

/// A BO recipe or a `bo`/`optuna` style of max-concurrency-under-sla: throughput maximised
/// over concurrency `lo..=hi` (log scale) under `slas`, with the budget flags applied.
pub fn recipe(
    a: &ProfileArgs,
    recipe: CliRecipe,
    planner: Planner,
    slas: Vec<Sla>,
    (lo, hi): (u64, u64),
    warnings: &mut Vec<String>,
) -> Result<Adaptive, ConfigError> {
    let m = &a.multirun;
    let name = super::recipes::cli_name(recipe);
    warnings.push(implicit_botorch_warning(planner));
    let s = Adaptive {
        planner,
        sampler: Sampler::Tpe,
        dims: vec![Dim {
            path: "phases.profiling.concurrency",
            flag: "--concurrency".into(),
            lo: lo as f64,
            hi: hi as f64,
            int: true,
            log: true,
        }],
        metric: "output_token_throughput".into(),
        stat: "avg",
        direction: Direction::Maximize,
        slas,
        max_iterations: m.search_max_iterations.unwrap_or(30) as usize,
        initial_points: m.search_initial_points.unwrap_or(5) as usize,
        seed: m.search_random_seed,
        pooled: false,
        recipe: Some(name),
    };
    check_budget(&s)?;
    Ok(s)
}

/// The one SLA of a max-throughput recipe (`--ttft-sla-ms` or `--itl-sla-ms`), then each
/// --search-sla; the other recipe SLA flags are refused (AIPerf would ignore them).
pub fn throughput_recipe_slas(a: &ProfileArgs, recipe: CliRecipe) -> Result<Vec<Sla>, ConfigError> {
    let m = &a.multirun;
    let (metric, own, others): (&str, Option<f64>, &[(&str, &str)]) = match recipe {
        CliRecipe::MaxThroughputTtftSla => (
            "time_to_first_token",
            m.ttft_sla_ms,
            &[
                ("itl_sla_ms", "--itl-sla-ms"),
                ("tpot_sla_ms", "--tpot-sla-ms"),
                ("e2e_sla_ms", "--e2e-sla-ms"),
                ("error_rate_sla", "--error-rate-sla"),
            ],
        ),
        _ => {
            let itl = match (m.itl_sla_ms, m.tpot_sla_ms) {
                (Some(i), Some(t)) if i != t => {
                    return Err(config_error(format!(
                        "--itl-sla-ms {i} and --tpot-sla-ms {t} name the same SLA; give one"
                    )));
                }
                (i, t) => i.or(t),
            };
            (
                "inter_token_latency",
                itl,
                &[
                    ("ttft_sla_ms", "--ttft-sla-ms"),
                    ("e2e_sla_ms", "--e2e-sla-ms"),
                    ("error_rate_sla", "--error-rate-sla"),
                ],
            )
        }
    };
    let (name, flag) = match recipe {
        CliRecipe::MaxThroughputTtftSla => ("max-throughput-ttft-sla", "--ttft-sla-ms"),
        _ => ("max-throughput-itl-sla", "--itl-sla-ms (or --tpot-sla-ms)"),
    };
    if let Some(other) = first_typed(a, others) {
        return Err(config_error(format!(
            "{other} is not read by --search-recipe {name} (its SLA is {flag}); add it as --search-sla or drop it"
        )));
    }
    if let Some(f) = first_typed(
        a,
        &[
            ("search_style", "--search-style"),
            ("concurrency_steps", "--concurrency-steps"),
        ],
    ) {
        return Err(config_error(format!(
            "{f} belongs to other recipes; --search-recipe {name} is always Bayesian optimisation"
        )));
    }
    let Some(threshold) = own else {
        return Err(config_error(format!(
            "--search-recipe {name} needs {flag}: the SLA in milliseconds"
        )));
    };
    if !(threshold > 0.0 && threshold.is_finite()) {
        return Err(config_error(format!(
            "{flag} {threshold}: give milliseconds above 0"
        )));
    }
    if !a.streaming {
        return Err(config_error(format!(
            "--search-recipe {name}: {metric} is measured only on streamed responses: add --streaming"
        )));
    }
    let mut slas = vec![Sla {
        metric: metric.into(),
        stat: "p95".into(),
        op: SlaOp::Lt,
        threshold,
    }];
    for spec in &m.search_sla {
        slas.push(parse_search_sla(spec)?);
    }
    Ok(slas)
}

/// Budget flags given with a recipe or style that is not Bayesian optimisation.
pub fn refuse_tunables(a: &ProfileArgs, what: &str) -> Result<(), ConfigError> {
    match first_typed(a, &TUNABLE) {
        Some(flag) => Err(config_error(format!(
            "{flag} sets the budget of Bayesian optimisation; {what} does not read it: drop it (or use --search-style bo)"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};

    fn resolve(extra: &[&str]) -> Result<(Option<Adaptive>, Vec<String>), ConfigError> {
        let mut argv = vec!["aiperf", "profile", "-m", "m"];
        argv.extend_from_slice(extra);
        let Command::Profile(args) = Cli::parse_with_sources(argv).unwrap().command else {
            unreachable!()
        };
        let mut w = Vec::new();
        from_flags(&args, false, &mut w).map(|s| (s, w))
    }

    const BASE: [&str; 8] = [
        "--search-space",
        "concurrency:1,64:int",
        "--search-metric",
        "output_token_throughput",
        "--search-direction",
        "maximize",
        "--search-max-iterations",
        "12",
    ];

    fn with(extra: &[&'static str]) -> Vec<&'static str> {
        let mut v = BASE.to_vec();
        v.extend_from_slice(extra);
        v
    }

    #[test]
    fn a_search_space_resolves_with_aiperf_defaults() {
        let (s, w) = resolve(&BASE).unwrap();
        let s = s.unwrap();
        assert_eq!(s.dims[0].path, "phases.profiling.concurrency");
        assert_eq!(s.dims[0].flag, "--concurrency");
        assert!(s.dims[0].int && !s.dims[0].log);
        assert_eq!((s.stat, s.initial_points, s.max_iterations), ("avg", 5, 12));
        assert_eq!((s.planner, s.sampler), (Planner::Bayesian, Sampler::Tpe));
        assert!(w[0].contains("falling back to the TPE sampler"), "{w:?}");
        let (s, w) = resolve(&with(&[
            "--search-planner",
            "optuna",
            "--optuna-sampler",
            "gp",
        ]))
        .unwrap();
        assert_eq!(s.unwrap().sampler, Sampler::Gp);
        assert!(w.is_empty(), "{w:?}");
        let (_, w) = resolve(&with(&["--bo-constraint-mode", "eic"])).unwrap();
        assert!(
            w.iter().any(|w| w.contains("deprecated and ignored")),
            "{w:?}"
        );
    }

    #[test]
    fn what_cannot_be_honoured_is_refused() {
        let cases: [(&[&str], &str); 11] = [
            (&["--optuna-sampler", "botorch"], "needs PyTorch"),
            (
                &["--optuna-acquisition", "qlognei"],
                "not supported by this build",
            ),
            (
                &["--optuna-terminator", "regret"],
                "not supported by this build",
            ),
            (&["--search-sla-tier", "a:x:p95:lt:1"], "multi-tier"),
            (&["--search-planner", "smooth_isotonic"], "not supported"),
            (
                &["--optuna-sampler", "gp"],
                "only by --search-planner optuna",
            ),
            (&["--search-initial-points", "12"], "must be below"),
            (&["--concurrency", "4"], "drop --concurrency"),
            (&["--ttft-sla-ms", "100"], "--search-sla"),
            (&["--search-percentile-pooling", "pooled"], "percentile"),
            (
                &[
                    "--convergence-metric",
                    "request_latency",
                    "--num-profile-runs",
                    "3",
                ],
                "cannot be combined",
            ),
        ];
        for (extra, want) in cases {
            let e = resolve(&with(extra)).unwrap_err().to_string();
            assert!(e.contains(want), "{extra:?}: {e}");
        }
        let e = resolve(&["--search-metric", "x"]).unwrap_err().to_string();
        assert!(e.contains("--search-space"), "{e}");
        let e = resolve(&BASE[..6]).unwrap_err().to_string();
        assert!(e.contains("needs --search-max-iterations"), "{e}");
        for (space, want) in [
            ("concurrency:1,64", "whole numbers"),
            ("concurrency:64,1:int", "hi must be above lo"),
            ("nope.path:1,2", "not a number this build can search"),
            ("concurrency:1-4:int", "missing ','"),
        ] {
            let mut argv = BASE.to_vec();
            argv[1] = space;
            let e = resolve(&argv).unwrap_err().to_string();
            assert!(e.contains(want), "{space}: {e}");
        }
    }
}
