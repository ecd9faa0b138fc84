//! `aiperf compare BASE NEW`: for each metric and statistic, the change from BASE to NEW
//! with a confidence interval and a verdict, so that "did it get faster" has an answer
//! that run-to-run noise does not decide.

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

use crate::cli::compare::CompareArgs;
use crate::metrics::catalog::{MetricDef, MetricKind, by_tag};

mod guard;
mod interval;
mod output;
mod side;

use interval::Stat;
use side::Side;

/// Compared when `--metrics` is not given (those both runs have).
const DEFAULT_METRICS: [&str; 5] = [
    "time_to_first_token",
    "inter_token_latency",
    "request_latency",
    "request_throughput",
    "output_token_throughput",
];

/// Why a comparison failed: bad input (exit 2) or anything else (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Other(String),
}

/// How a comparison ended when it was made.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// `--fail-on-regression` and a metric got worse with confidence.
    Regression,
}

/// How an interval was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Percentile bootstrap over the requests (pooled over trials).
    Bootstrap,
    /// Welch's t interval over the per-trial values (both sides repeated).
    Trials,
    /// A run-level value of single runs: no interval.
    Point,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Bootstrap => "bootstrap",
            Method::Trials => "trials",
            Method::Point => "point",
        }
    }
}

/// One line of the comparison.
#[derive(Debug, Clone)]
pub struct Row {
    pub def: &'static MetricDef,
    pub stat: &'static str,
    pub base: f64,
    pub new: f64,
    pub change_pct: f64,
    /// Interval of `change_pct`, in %.
    pub ci: Option<(f64, f64)>,
    pub verdict: &'static str,
    /// Worse beyond the threshold with confidence.
    pub regression: bool,
    pub method: Method,
}

/// The settings the rows are computed with.
struct Settings {
    confidence: f64,
    /// In %.
    threshold: f64,
    resamples: usize,
    seed: u64,
}

pub fn run(args: &CompareArgs) -> Result<Outcome, CompareError> {
    let settings = settings(args)?;
    let base = Side::read(&args.base).map_err(CompareError::Input)?;
    let new = Side::read(&args.new).map_err(CompareError::Input)?;
    let checks = guard::check(&base, &new);
    for refusal in &checks.refusals {
        if !args.force {
            return Err(CompareError::Input(format!(
                "cannot compare {} with {}: {refusal} (--force compares them anyway)",
                base.dir.display(),
                new.dir.display()
            )));
        }
        eprintln!("warning: {refusal} (compared anyway: --force)");
    }
    for w in &checks.warnings {
        eprintln!("warning: {w}");
    }
    let rows = rows(&base, &new, &args.metrics, &settings)?;
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| args.new.join("compare"));
    output::write_files(&dir, &rows, &base, &new).map_err(CompareError::Other)?;
    print!(
        "{}",
        output::table(&rows, settings.confidence, settings.threshold)
    );
    println!("Wrote compare.json and compare.csv to {}", dir.display());
    let regressed = rows.iter().any(|r| r.regression);
    Ok(match args.fail_on_regression && regressed {
        true => Outcome::Regression,
        false => Outcome::Done,
    })
}

fn settings(args: &CompareArgs) -> Result<Settings, CompareError> {
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        return Err(CompareError::Input(format!(
            "--confidence {}: give a level between 0 and 1 (0.95 for 95%)",
            args.confidence
        )));
    }
    let t = args.threshold.trim();
    let threshold = t.strip_suffix('%').unwrap_or(t).trim().parse::<f64>();
    let threshold = match threshold {
        Ok(x) if x >= 0.0 && x.is_finite() => x,
        _ => {
            return Err(CompareError::Input(format!(
                "--threshold {}: give a percentage >= 0, such as 2% or 2",
                args.threshold
            )));
        }
    };
    if args.resamples < 100 {
        return Err(CompareError::Input(format!(
            "--resamples {}: give at least 100 (the interval's ends are tail percentiles of the resamples)",
            args.resamples
        )));
    }
    Ok(Settings {
        confidence: args.confidence,
        threshold,
        resamples: args.resamples,
        seed: args.seed,
    })
}

/// The rows of every chosen metric, in the order chosen.
fn rows(
    base: &Side,
    new: &Side,
    chosen: &[String],
    s: &Settings,
) -> Result<Vec<Row>, CompareError> {
    let explicit = !chosen.is_empty();
    let tags: Vec<&str> = match explicit {
        true => chosen.iter().map(String::as_str).collect(),
        false => DEFAULT_METRICS.to_vec(),
    };
    let mut rows = Vec::new();
    for tag in tags {
        let def = by_tag(tag).ok_or_else(|| {
            CompareError::Input(format!("--metrics: {tag} is not a metric tag of aiperf"))
        })?;
        let found = match def.kind {
            MetricKind::Record => record_rows(def, base, new, s),
            _ => run_level_row(def, base, new, s).map(|r| vec![r]),
        };
        match found {
            Some(r) => rows.extend(r),
            None if explicit => {
                return Err(CompareError::Input(format!(
                    "--metrics: {tag} is not in both runs ({} and {})",
                    base.dir.display(),
                    new.dir.display()
                )));
            }
            None => {}
        }
    }
    if rows.is_empty() {
        return Err(CompareError::Input(
            "the runs have no metric in common to compare (no successful requests?)".into(),
        ));
    }
    Ok(rows)
}

/// avg, p50, p90 and p99 of a per-request metric; `None` when a side has no value of it.
fn record_rows(def: &'static MetricDef, base: &Side, new: &Side, s: &Settings) -> Option<Vec<Row>> {
    let (b, n) = (base.pooled(def.tag), new.pooled(def.tag));
    if b.is_empty() || n.is_empty() {
        return None;
    }
    let repeated = base.trials.len() >= 2 && new.trials.len() >= 2;
    if repeated {
        // One value of the statistic per trial; the interval is across trials.
        let per_trial = |side: &Side, stat: Stat| -> Vec<f64> {
            let values = side.trials.iter().filter_map(|t| t.values.get(def.tag));
            values
                .map(|v| stat.of_sorted(&interval::sorted(v)))
                .collect()
        };
        let rows = Stat::ALL.map(|stat| {
            let (tb, tn) = (per_trial(base, stat), per_trial(new, stat));
            let ci = interval::across_trials(&tb, &tn, s.confidence);
            row(
                def,
                stat.name(),
                mean(&tb),
                mean(&tn),
                ci,
                Method::Trials,
                s,
            )
        });
        return Some(rows.to_vec());
    }
    let (b, n) = (interval::sorted(&b), interval::sorted(&n));
    let mut rng = ChaCha8Rng::seed_from_u64(metric_seed(s.seed, def.tag));
    let cis = interval::bootstrap(&b, &n, &Stat::ALL, s.resamples, s.confidence, &mut rng);
    let rows = Stat::ALL.iter().zip(cis).map(|(stat, ci)| {
        let (vb, vn) = (stat.of_sorted(&b), stat.of_sorted(&n));
        row(def, stat.name(), vb, vn, Some(ci), Method::Bootstrap, s)
    });
    Some(rows.collect())
}

/// A run-level value (`avg` in the summary, e.g. request_throughput): an interval across
/// trials when both sides were repeated, else the point change only.
fn run_level_row(def: &'static MetricDef, base: &Side, new: &Side, s: &Settings) -> Option<Row> {
    let values = |side: &Side| -> Option<Vec<f64>> {
        let per_trial = side.trials.iter();
        per_trial
            .map(|t| t.summary[def.tag]["avg"].as_f64())
            .collect()
    };
    let (tb, tn) = (values(base)?, values(new)?);
    let ci = interval::across_trials(&tb, &tn, s.confidence);
    let method = match ci {
        Some(_) => Method::Trials,
        None => Method::Point,
    };
    Some(row(def, "avg", mean(&tb), mean(&tn), ci, method, s))
}

fn row(
    def: &'static MetricDef,
    stat: &'static str,
    base: f64,
    new: f64,
    ci: Option<(f64, f64)>,
    method: Method,
    s: &Settings,
) -> Row {
    let (verdict, regression) = verdict(def, ci, s.threshold);
    Row {
        def,
        stat,
        base,
        new,
        change_pct: interval::change_pct(base, new),
        ci,
        verdict,
        regression,
        method,
    }
}

/// `faster`/`slower` (times) or `higher`/`lower` (anything else) when the whole interval
/// lies beyond ±threshold, else `no change`; and whether that direction is the worse one.
fn verdict(def: &MetricDef, ci: Option<(f64, f64)>, threshold: f64) -> (&'static str, bool) {
    let Some((low, high)) = ci else {
        return ("no interval", false);
    };
    let (up, down) = (low > threshold, high < -threshold);
    let timed = def.unit == "ms" && !def.larger_is_better;
    let word = match (up, down, timed) {
        (true, _, true) => "slower",
        (_, true, true) => "faster",
        (true, _, false) => "higher",
        (_, true, false) => "lower",
        _ => "no change",
    };
    let worse = if def.larger_is_better { down } else { up };
    (word, worse)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Each metric draws its own resamples: choosing other metrics leaves its interval as is.
fn metric_seed(seed: u64, tag: &str) -> u64 {
    tag.bytes().fold(crate::hash::splitmix64(seed), |h, b| {
        crate::hash::splitmix64(h ^ u64::from(b))
    })
}
