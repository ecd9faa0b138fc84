//! The grid recipes (`prefill-ttft-curve`, `decode-itl-curve`, `pareto-sweep`), the
//! `max-goodput-under-slo` search and `--variant` scenario sweeps: their flags checked
//! against each other and resolved. Each recipe's own flags are refused with any other
//! recipe, so none is taken and then ignored.

use super::multirun::{Search, Sla, SlaOp};
use super::{ConfigError, config_error};
use crate::cli::ProfileArgs;
use crate::cli::multirun::SearchRecipe as CliRecipe;

/// A log-spaced ladder of whole numbers from `lo` to `hi` (both kept) in `steps` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ladder {
    pub lo: u64,
    pub hi: u64,
    pub steps: u64,
}

/// A recipe that runs a fixed grid of points and derives a file from their results.
#[derive(Debug, Clone, PartialEq)]
pub enum GridRecipe {
    /// Each ISL of the ladder at concurrency 1; TTFT fitted against ISL.
    PrefillTtftCurve { isl: Ladder },
    /// Every OSL of one ladder with every concurrency of the other; the ITL surface.
    DecodeItlCurve { concurrency: Ladder, osl: Ladder },
    /// Each (ISL, OSL) shape at each concurrency; the TTFT p95 vs throughput frontier.
    ParetoSweep {
        pairs: Vec<(u64, u64)>,
        concurrency: Vec<u64>,
    },
}

impl GridRecipe {
    pub fn name(&self) -> &'static str {
        match self {
            GridRecipe::PrefillTtftCurve { .. } => "prefill-ttft-curve",
            GridRecipe::DecodeItlCurve { .. } => "decode-itl-curve",
            GridRecipe::ParetoSweep { .. } => "pareto-sweep",
        }
    }
}

/// One `--variant`: its name (`v0`, `v1`, ... when none is given) and its `key=value`
/// pairs as typed (keys are flag names without `--`).
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: String,
    pub pairs: Vec<(String, String)>,
}

/// AIPerf's default concurrencies of pareto-sweep.
const PARETO_CONCURRENCY: [u64; 5] = [1, 4, 16, 64, 256];

/// True for the recipes resolved here into a fixed grid.
pub fn is_grid(recipe: CliRecipe) -> bool {
    match recipe {
        CliRecipe::PrefillTtftCurve | CliRecipe::DecodeItlCurve | CliRecipe::ParetoSweep => true,
        CliRecipe::MaxConcurrencyUnderSla
        | CliRecipe::ConcurrencyRamp
        | CliRecipe::MaxGoodputUnderSlo
        | CliRecipe::MaxThroughputTtftSla
        | CliRecipe::MaxThroughputItlSla => false,
    }
}

/// The recipe's name as typed.
pub fn cli_name(recipe: CliRecipe) -> &'static str {
    match recipe {
        CliRecipe::MaxConcurrencyUnderSla => "max-concurrency-under-sla",
        CliRecipe::ConcurrencyRamp => "concurrency-ramp",
        CliRecipe::PrefillTtftCurve => "prefill-ttft-curve",
        CliRecipe::DecodeItlCurve => "decode-itl-curve",
        CliRecipe::ParetoSweep => "pareto-sweep",
        CliRecipe::MaxGoodputUnderSlo => "max-goodput-under-slo",
        CliRecipe::MaxThroughputTtftSla => "max-throughput-ttft-sla",
        CliRecipe::MaxThroughputItlSla => "max-throughput-itl-sla",
    }
}

/// The grid recipe asked for, checked. `is_sweep`: a flag carried a list besides the
/// `--concurrency` list pareto-sweep takes, whose values are `concurrency_list`.
pub fn grid(
    a: &ProfileArgs,
    is_sweep: bool,
    concurrency_list: Option<Vec<u64>>,
) -> Result<Option<GridRecipe>, ConfigError> {
    let m = &a.multirun;
    recipe_only_flags(a)?;
    let Some(recipe) = m.search_recipe.filter(|r| is_grid(*r)) else {
        return Ok(None);
    };
    let name = cli_name(recipe);
    if is_sweep {
        return Err(config_error(format!(
            "--search-recipe {name} picks its points itself: give single values instead of lists, or drop --search-recipe"
        )));
    }
    if !a.streaming {
        return Err(config_error(format!(
            "--search-recipe {name} reads streamed metrics (TTFT, ITL, output throughput): add --streaming"
        )));
    }
    if a.request_rate.is_some() {
        return Err(config_error(format!(
            "--search-recipe {name} runs at fixed concurrencies: drop --request-rate"
        )));
    }
    let refuse_typed = |id: &str, flag: &str, instead: &str| -> Result<(), ConfigError> {
        if a.typed(id) {
            return Err(config_error(format!(
                "{flag} is set by --search-recipe {name} for each point: drop it ({instead})"
            )));
        }
        Ok(())
    };
    let grid = match recipe {
        CliRecipe::PrefillTtftCurve => {
            refuse_typed(
                "isl_mean",
                "--isl",
                "bound the ladder with --isl-min/--isl-max",
            )?;
            refuse_typed("concurrency", "--concurrency", "the recipe runs at 1")?;
            GridRecipe::PrefillTtftCurve {
                isl: ladder(
                    ("--isl-min", m.isl_min, 256),
                    ("--isl-max", m.isl_max, 32_768),
                    m.isl_steps.unwrap_or(8),
                )?,
            }
        }
        CliRecipe::DecodeItlCurve => {
            refuse_typed(
                "osl_mean",
                "--osl",
                "bound the ladder with --osl-min/--osl-max",
            )?;
            refuse_typed(
                "concurrency",
                "--concurrency",
                "bound the ladder with --concurrency-min/--concurrency-max",
            )?;
            GridRecipe::DecodeItlCurve {
                concurrency: ladder(
                    ("--concurrency-min", m.concurrency_min, 1),
                    ("--concurrency-max", m.concurrency_max, 200),
                    m.concurrency_steps.unwrap_or(6),
                )?,
                osl: ladder(
                    ("--osl-min", m.osl_min, 64),
                    ("--osl-max", m.osl_max, 1024),
                    m.osl_steps.unwrap_or(4),
                )?,
            }
        }
        _ => {
            refuse_typed("isl_mean", "--isl", "give the shapes with --isl-osl-pairs")?;
            refuse_typed("osl_mean", "--osl", "give the shapes with --isl-osl-pairs")?;
            let Some(raw) = &m.isl_osl_pairs else {
                return Err(config_error(
                    "--search-recipe pareto-sweep needs --isl-osl-pairs, e.g. 128/128,512/256",
                ));
            };
            let pairs = isl_osl_pairs(raw)?;
            let concurrency = match (concurrency_list, a.typed("concurrency")) {
                (Some(list), _) => list,
                (None, true) => vec![a.concurrency.unwrap_or(1)],
                (None, false) => PARETO_CONCURRENCY.to_vec(),
            };
            if let Some(0) = concurrency.iter().min() {
                return Err(config_error(
                    "--concurrency: pareto-sweep needs concurrencies of 1 or more",
                ));
            }
            if pairs.len() * concurrency.len() < 2 {
                return Err(config_error(
                    "--search-recipe pareto-sweep with one shape at one concurrency is a single point: give two or more --isl-osl-pairs or --concurrency values",
                ));
            }
            GridRecipe::ParetoSweep { pairs, concurrency }
        }
    };
    Ok(Some(grid))
}

/// `(flag, typed, default)` of each end and the steps, checked as AIPerf does (`hi > lo`).
fn ladder(
    lo: (&str, Option<u64>, u64),
    hi: (&str, Option<u64>, u64),
    steps: u64,
) -> Result<Ladder, ConfigError> {
    let (lo_flag, lo_value) = (lo.0, lo.1.unwrap_or(lo.2));
    let (hi_flag, hi_value) = (hi.0, hi.1.unwrap_or(hi.2));
    if hi_value <= lo_value {
        return Err(config_error(format!(
            "{hi_flag} {hi_value} must be above {lo_flag} {lo_value}"
        )));
    }
    Ok(Ladder {
        lo: lo_value,
        hi: hi_value,
        steps,
    })
}

/// `128/128, 512/256`: positive whole numbers, no pair twice.
fn isl_osl_pairs(raw: &str) -> Result<Vec<(u64, u64)>, ConfigError> {
    let mut pairs = Vec::new();
    for token in raw.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let bad = || {
            config_error(format!(
                "--isl-osl-pairs: '{token}' is not <isl>/<osl> with two whole numbers above 0, e.g. 128/64"
            ))
        };
        let (isl, osl) = token.split_once('/').ok_or_else(bad)?;
        let parse = |s: &str| s.trim().parse::<u64>().ok().filter(|v| *v > 0);
        let pair = (parse(isl).ok_or_else(bad)?, parse(osl).ok_or_else(bad)?);
        if pairs.contains(&pair) {
            return Err(config_error(format!(
                "--isl-osl-pairs: '{token}' is given twice; give each shape once"
            )));
        }
        pairs.push(pair);
    }
    if pairs.is_empty() {
        return Err(config_error(
            "--isl-osl-pairs: no pair given; give e.g. 128/128,512/256",
        ));
    }
    Ok(pairs)
}

/// The flags only one recipe reads, refused with any other (or none).
fn recipe_only_flags(a: &ProfileArgs) -> Result<(), ConfigError> {
    let m = &a.multirun;
    let recipe = m.search_recipe;
    let owned: [(bool, &str, CliRecipe); 8] = [
        (
            m.isl_min.is_some(),
            "--isl-min",
            CliRecipe::PrefillTtftCurve,
        ),
        (
            m.isl_max.is_some(),
            "--isl-max",
            CliRecipe::PrefillTtftCurve,
        ),
        (
            m.isl_steps.is_some(),
            "--isl-steps",
            CliRecipe::PrefillTtftCurve,
        ),
        (m.osl_min.is_some(), "--osl-min", CliRecipe::DecodeItlCurve),
        (m.osl_max.is_some(), "--osl-max", CliRecipe::DecodeItlCurve),
        (
            m.osl_steps.is_some(),
            "--osl-steps",
            CliRecipe::DecodeItlCurve,
        ),
        (
            m.isl_osl_pairs.is_some(),
            "--isl-osl-pairs",
            CliRecipe::ParetoSweep,
        ),
        (
            m.slo_attainment_fraction.is_some(),
            "--slo-attainment-fraction",
            CliRecipe::MaxGoodputUnderSlo,
        ),
    ];
    for (given, flag, owner) in owned {
        if given && recipe != Some(owner) {
            let owner = cli_name(owner);
            return Err(config_error(format!(
                "{flag} belongs to --search-recipe {owner}; add it or drop {flag}"
            )));
        }
    }
    Ok(())
}

/// The flags a grid recipe does not read (SLAs, search styles, knee detection): the error
/// for the first one given.
pub fn unused_by_grid(a: &ProfileArgs, recipe: &GridRecipe) -> Option<ConfigError> {
    let m = &a.multirun;
    let decode = matches!(recipe, GridRecipe::DecodeItlCurve { .. });
    let flag = [
        (m.ttft_sla_ms.is_some(), "--ttft-sla-ms"),
        (m.itl_sla_ms.is_some(), "--itl-sla-ms"),
        (m.tpot_sla_ms.is_some(), "--tpot-sla-ms"),
        (m.e2e_sla_ms.is_some(), "--e2e-sla-ms"),
        (m.error_rate_sla.is_some(), "--error-rate-sla"),
        (!m.search_sla.is_empty(), "--search-sla"),
        (m.search_style.is_some(), "--search-style"),
        (m.concurrency_min.is_some() && !decode, "--concurrency-min"),
        (m.concurrency_max.is_some() && !decode, "--concurrency-max"),
        (
            m.concurrency_steps.is_some() && !decode,
            "--concurrency-steps",
        ),
        (m.degradation_threshold.is_some(), "--degradation-threshold"),
        (
            m.degradation_metric_tag.is_some(),
            "--degradation-metric-tag",
        ),
        (m.degradation_stat.is_some(), "--degradation-stat"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))?;
    Some(config_error(format!(
        "{flag} is not read by --search-recipe {}; drop it",
        recipe.name()
    )))
}

/// `max-goodput-under-slo`: all three per-request SLOs, the attainment fraction as the
/// feasibility filter (then any --search-sla), concurrency between `lo` and `hi`.
pub fn max_goodput(a: &ProfileArgs, lo: u64, hi: u64) -> Result<Search, ConfigError> {
    let m = &a.multirun;
    if let Some(flag) = [
        (m.error_rate_sla.is_some(), "--error-rate-sla"),
        (m.search_style.is_some(), "--search-style"),
        (m.concurrency_steps.is_some(), "--concurrency-steps"),
        (m.degradation_threshold.is_some(), "--degradation-threshold"),
        (
            m.degradation_metric_tag.is_some(),
            "--degradation-metric-tag",
        ),
        (m.degradation_stat.is_some(), "--degradation-stat"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
    {
        return Err(config_error(format!(
            "{flag} is not read by --search-recipe max-goodput-under-slo; drop it"
        )));
    }
    if a.goodput.is_some() {
        return Err(config_error(
            "--goodput: max-goodput-under-slo sets the per-request SLOs from --ttft-sla-ms, --tpot-sla-ms and --e2e-sla-ms; drop --goodput",
        ));
    }
    let itl = match (m.itl_sla_ms, m.tpot_sla_ms) {
        (Some(i), Some(t)) if i != t => {
            return Err(config_error(format!(
                "--itl-sla-ms {i} and --tpot-sla-ms {t} name the same SLA; give one"
            )));
        }
        (i, t) => t.or(i),
    };
    let missing: Vec<&str> = [
        (m.ttft_sla_ms, "--ttft-sla-ms"),
        (itl, "--tpot-sla-ms"),
        (m.e2e_sla_ms, "--e2e-sla-ms"),
    ]
    .iter()
    .filter(|(v, _)| v.is_none())
    .map(|(_, f)| *f)
    .collect();
    if !missing.is_empty() {
        return Err(config_error(format!(
            "--search-recipe max-goodput-under-slo needs {}: the three SLOs (--ttft-sla-ms, --tpot-sla-ms or --itl-sla-ms, --e2e-sla-ms) say when a request is good",
            missing.join(", ")
        )));
    }
    let slos = vec![
        (
            "time_to_first_token".to_string(),
            m.ttft_sla_ms.unwrap_or_default(),
        ),
        ("inter_token_latency".to_string(), itl.unwrap_or_default()),
        (
            "request_latency".to_string(),
            m.e2e_sla_ms.unwrap_or_default(),
        ),
    ];
    for ((_, v), flag) in slos
        .iter()
        .zip(["--ttft-sla-ms", "--tpot-sla-ms", "--e2e-sla-ms"])
    {
        if !(*v > 0.0 && v.is_finite()) {
            return Err(config_error(format!(
                "{flag} {v}: give milliseconds above 0"
            )));
        }
    }
    if !a.streaming {
        return Err(config_error(
            "--search-recipe max-goodput-under-slo judges TTFT and TPOT, measured only on streamed responses: add --streaming",
        ));
    }
    let fraction = m.slo_attainment_fraction.unwrap_or(0.95);
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(config_error(format!(
            "--slo-attainment-fraction {fraction}: give a share above 0 and at most 1, e.g. 0.95"
        )));
    }
    let mut filters = vec![Sla {
        metric: "good_request_fraction".into(),
        stat: "avg".into(),
        op: SlaOp::Ge,
        threshold: fraction,
    }];
    for spec in &m.search_sla {
        filters.push(super::multirun::parse_search_sla(spec)?);
    }
    Ok(Search::MaxGoodputUnderSlo {
        slos,
        fraction,
        filters,
        lo,
        hi,
    })
}

/// The `--variant` scenarios: none, or two or more, each parsed; refused with lists and
/// recipes (both pick the runs too).
pub fn variants(a: &ProfileArgs, is_sweep: bool) -> Result<Vec<Variant>, ConfigError> {
    let specs = &a.multirun.variant;
    match specs.len() {
        0 => return Ok(Vec::new()),
        1 => {
            return Err(config_error(
                "--variant: one variant is not a sweep; give --variant two or more times, or set --isl/--osl/--concurrency directly for a single run",
            ));
        }
        _ => {}
    }
    if a.multirun.search_recipe.is_some() {
        return Err(config_error(
            "--variant and --search-recipe both choose the runs: the recipe its own points, --variant the scenarios; drop one",
        ));
    }
    if is_sweep {
        return Err(config_error(
            "--variant and list-valued flags (e.g. --concurrency 1,2,4) both choose the runs: lists a grid, --variant hand-picked scenarios; drop one",
        ));
    }
    let mut out: Vec<Variant> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let v = parse_variant(spec, i)?;
        if out.iter().any(|o| o.name == v.name) {
            return Err(config_error(format!(
                "--variant {spec:?}: the name {:?} is given twice; each variant's runs go to a directory of its name",
                v.name
            )));
        }
        out.push(v);
    }
    Ok(out)
}

/// `[name:] key=value, key=value` (values may be quoted; no commas inside a value).
pub fn parse_variant(spec: &str, index: usize) -> Result<Variant, ConfigError> {
    let bad = |why: &str| config_error(format!("--variant {spec:?}: {why}"));
    let raw = spec.trim();
    if raw.is_empty() {
        return Err(bad("empty; give e.g. 'small: isl=128, concurrency=4'"));
    }
    let (name, body) = match raw.split_once(':') {
        Some((head, tail)) if !head.contains('=') => {
            let head = head.trim();
            if head.is_empty() {
                return Err(bad("empty name before ':'"));
            }
            (head.to_string(), tail.trim())
        }
        _ => (format!("v{index}"), raw),
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for chunk in body.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let Some((key, value)) = chunk.split_once('=') else {
            return Err(bad(&format!(
                "'{chunk}' has no '='; give key=value (a flag name without --)"
            )));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(bad(&format!("'{chunk}' has no key before '='")));
        }
        if pairs.iter().any(|(k, _)| k == key) {
            return Err(bad(&format!("the key '{key}' is given twice")));
        }
        let value = value.trim();
        let quoted = value.len() >= 2
            && (value.starts_with('"') && value.ends_with('"')
                || value.starts_with('\'') && value.ends_with('\''));
        let value = if quoted {
            &value[1..value.len() - 1]
        } else {
            value
        };
        pairs.push((key.to_string(), value.to_string()));
    }
    if pairs.is_empty() {
        return Err(bad("no key=value pairs"));
    }
    Ok(Variant { name, pairs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};

    fn args(extra: &[&str]) -> ProfileArgs {
        let mut argv = vec!["aiperf", "profile", "-m", "m"];
        argv.extend_from_slice(extra);
        let Command::Profile(args) = Cli::parse_with_sources(argv).unwrap().command else {
            unreachable!()
        };
        *args
    }

    fn err(r: Result<impl std::fmt::Debug, ConfigError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn variants_parse_as_aiperf_reads_them() {
        let v = parse_variant(" small: isl=128, osl = 64 ,", 3).unwrap();
        assert_eq!(v.name, "small");
        assert_eq!(
            v.pairs,
            [("isl".into(), "128".into()), ("osl".into(), "64".into())]
        );
        let v = parse_variant("concurrency=4, model='a'", 2).unwrap();
        assert_eq!(v.name, "v2");
        assert_eq!(v.pairs[1], ("model".into(), "a".into()));
        assert!(err(parse_variant("x: isl", 0)).contains("no '='"));
        assert!(err(parse_variant("isl=1, isl=2", 0)).contains("twice"));
        assert!(err(parse_variant(": isl=1", 0)).contains("empty name"));
        assert!(err(parse_variant("x:", 0)).contains("no key=value"));
    }

    #[test]
    fn one_variant_or_variants_with_lists_or_recipes_are_refused() {
        let e = err(variants(&args(&["--variant", "isl=1"]), false));
        assert!(e.contains("two or more"), "{e}");
        let two = ["--variant", "isl=1", "--sweep-variant", "isl=2"];
        assert_eq!(variants(&args(&two), false).unwrap().len(), 2);
        assert!(err(variants(&args(&two), true)).contains("list-valued"));
        let mut with_recipe = two.to_vec();
        with_recipe.extend(["--search-recipe", "concurrency-ramp"]);
        assert!(err(variants(&args(&with_recipe), false)).contains("--search-recipe"));
        let dup = ["--variant", "a: isl=1", "--variant", "a: isl=2"];
        assert!(err(variants(&args(&dup), false)).contains("twice"));
    }

    #[test]
    fn grid_recipes_resolve_with_aiperf_defaults() {
        let g = grid(
            &args(&["--search-recipe", "prefill-ttft-curve", "--streaming"]),
            false,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            g,
            GridRecipe::PrefillTtftCurve {
                isl: Ladder {
                    lo: 256,
                    hi: 32_768,
                    steps: 8
                }
            }
        );
        let g = grid(
            &args(&[
                "--search-recipe",
                "decode-itl-curve",
                "--streaming",
                "--osl-max",
                "256",
            ]),
            false,
            None,
        )
        .unwrap()
        .unwrap();
        let GridRecipe::DecodeItlCurve { concurrency, osl } = g else {
            panic!()
        };
        assert_eq!(
            (concurrency.lo, concurrency.hi, concurrency.steps),
            (1, 200, 6)
        );
        assert_eq!((osl.lo, osl.hi, osl.steps), (64, 256, 4));
        let pareto = |extra: &[&str], list: Option<Vec<u64>>| {
            let mut a = vec!["--search-recipe", "pareto-sweep", "--streaming"];
            a.extend_from_slice(extra);
            grid(&args(&a), false, list)
        };
        let g = pareto(&["--isl-osl-pairs", "128/64, 512/256"], None)
            .unwrap()
            .unwrap();
        assert_eq!(
            g,
            GridRecipe::ParetoSweep {
                pairs: vec![(128, 64), (512, 256)],
                concurrency: PARETO_CONCURRENCY.to_vec()
            }
        );
        let g = pareto(&["--isl-osl-pairs", "128/64"], Some(vec![2, 8]))
            .unwrap()
            .unwrap();
        assert!(matches!(g, GridRecipe::ParetoSweep { concurrency, .. } if concurrency == [2, 8]));
        assert!(
            err(pareto(
                &["--isl-osl-pairs", "128/64", "--concurrency", "4"],
                None
            ))
            .contains("single point")
        );
        assert!(err(pareto(&["--isl-osl-pairs", "128/x"], None)).contains("'128/x'"));
        assert!(err(pareto(&["--isl-osl-pairs", "1/1,1/1"], None)).contains("twice"));
        assert!(err(pareto(&[], None)).contains("needs --isl-osl-pairs"));
    }

    #[test]
    fn recipe_flags_are_refused_where_unread() {
        let e = err(grid(&args(&["--isl-min", "10"]), false, None));
        assert!(
            e.contains("--isl-min belongs to --search-recipe prefill-ttft-curve"),
            "{e}"
        );
        let e = err(grid(
            &args(&[
                "--search-recipe",
                "decode-itl-curve",
                "--isl-steps",
                "3",
                "--streaming",
            ]),
            false,
            None,
        ));
        assert!(e.contains("prefill-ttft-curve"), "{e}");
        let e = err(grid(
            &args(&["--search-recipe", "prefill-ttft-curve"]),
            false,
            None,
        ));
        assert!(e.contains("--streaming"), "{e}");
        let e = err(grid(
            &args(&[
                "--search-recipe",
                "prefill-ttft-curve",
                "--streaming",
                "--isl",
                "9",
            ]),
            false,
            None,
        ));
        assert!(e.contains("--isl is set by"), "{e}");
        let e = err(grid(
            &args(&[
                "--search-recipe",
                "prefill-ttft-curve",
                "--streaming",
                "--isl-min",
                "512",
                "--isl-max",
                "512",
            ]),
            false,
            None,
        ));
        assert!(
            e.contains("--isl-max 512 must be above --isl-min 512"),
            "{e}"
        );
        let g = args(&[
            "--search-recipe",
            "prefill-ttft-curve",
            "--ttft-sla-ms",
            "5",
        ]);
        let recipe = GridRecipe::PrefillTtftCurve {
            isl: Ladder {
                lo: 1,
                hi: 2,
                steps: 2,
            },
        };
        assert!(
            unused_by_grid(&g, &recipe)
                .unwrap()
                .to_string()
                .contains("--ttft-sla-ms")
        );
    }

    #[test]
    fn max_goodput_needs_all_three_slos() {
        let base = ["--search-recipe", "max-goodput-under-slo", "--streaming"];
        let with = |extra: &[&str]| {
            let mut a = base.to_vec();
            a.extend_from_slice(extra);
            max_goodput(&args(&a), 1, 64)
        };
        let e = err(with(&["--ttft-sla-ms", "100"]));
        assert!(e.contains("--tpot-sla-ms, --e2e-sla-ms"), "{e}");
        let s = with(&[
            "--ttft-sla-ms",
            "100",
            "--itl-sla-ms",
            "10",
            "--e2e-sla-ms",
            "900",
            "--slo-attainment-fraction",
            "0.9",
        ])
        .unwrap();
        let Search::MaxGoodputUnderSlo {
            slos,
            fraction,
            filters,
            ..
        } = s
        else {
            panic!()
        };
        assert_eq!(fraction, 0.9);
        assert_eq!(slos[1], ("inter_token_latency".to_string(), 10.0));
        assert_eq!(
            (
                filters[0].metric.as_str(),
                filters[0].op,
                filters[0].threshold
            ),
            ("good_request_fraction", SlaOp::Ge, 0.9)
        );
        let e = err(with(&[
            "--ttft-sla-ms",
            "1",
            "--tpot-sla-ms",
            "1",
            "--e2e-sla-ms",
            "1",
            "--slo-attainment-fraction",
            "1.5",
        ]));
        assert!(e.contains("at most 1"), "{e}");
    }
}
