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
const DEFAULT_METRICS: [&str; 7] = [
    "time_to_first_token",
    "inter_token_latency",
    "request_latency",
    "request_throughput",
    "output_token_throughput",
    "request_error_rate",
    // Only in runs made with --goodput.
    "goodput",
];

/// Requests a side needs beyond a percentile (above p90: 10% of them) for its bootstrap
/// interval: with fewer, the resampled percentile is one of a handful of the largest
/// values, and the interval is too narrow to trust (two runs of one server came out
/// "different" at p99 with 200 requests). Such a row has no interval (`point`).
const MIN_TAIL: f64 = 10.0;

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
    /// No interval: a run-level value of single runs, or a percentile with too few
    /// requests beyond it (`MIN_TAIL`).
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
pub struct Settings {
    pub confidence: f64,
    /// In %.
    pub threshold: f64,
    resamples: usize,
    seed: u64,
}

pub fn run(args: &CompareArgs) -> Result<Outcome, CompareError> {
    let settings = settings(args)?;
    let out_dir = args
        .output
        .clone()
        .unwrap_or_else(|| args.new.join("compare"));
    let pairs = pairs(args)?;
    // Every pair is checked before anything is written: a refused sweep point leaves no
    // partial comparison behind.
    for (point, base, new) in &pairs {
        let at = point.as_ref().map_or(String::new(), |p| format!("{p}: "));
        let checks = guard::check(base, new);
        for refusal in &checks.refusals {
            if !args.force {
                return Err(CompareError::Input(format!(
                    "cannot compare {} with {}: {refusal} (--force compares them anyway)",
                    base.dir.display(),
                    new.dir.display()
                )));
            }
            eprintln!("warning: {at}{refusal} (compared anyway: --force)");
        }
        for w in &checks.warnings {
            eprintln!("warning: {at}{w}");
        }
    }
    let mut regressed = false;
    for (point, base, new) in &pairs {
        // A sweep's points are compared one by one, each in its own subdirectory.
        let (dir, title) = match point {
            Some(p) => (out_dir.join(p), format!(" | {p}")),
            None => (out_dir.clone(), String::new()),
        };
        let rows = rows(base, new, &args.metrics, &settings)?;
        let table = output::table(&rows, &title, &settings);
        output::write_files(&dir, &rows, base, new, &table).map_err(CompareError::Other)?;
        print!("{}", output::for_stdout(&table, &rows));
        println!(
            "Wrote compare.json, compare.csv and compare.html to {}",
            dir.display()
        );
        regressed |= rows.iter().any(|r| r.regression);
    }
    Ok(match args.fail_on_regression && regressed {
        true => Outcome::Regression,
        false => Outcome::Done,
    })
}

/// BASE and NEW side by side: the two runs, or a sweep's points matched by name (the swept
/// values); a point on one side only is left out with a warning.
fn pairs(args: &CompareArgs) -> Result<Vec<(Option<String>, Side, Side)>, CompareError> {
    let base = side::read_points(&args.base).map_err(CompareError::Input)?;
    let mut new = side::read_points(&args.new).map_err(CompareError::Input)?;
    let is_sweep = |points: &[(Option<String>, Side)]| points[0].0.is_some();
    if is_sweep(&base) != is_sweep(&new) {
        let (sweep, run) = match is_sweep(&base) {
            true => (&args.base, &args.new),
            false => (&args.new, &args.base),
        };
        return Err(CompareError::Input(format!(
            "{} is a sweep and {} is not: compare a sweep with a sweep (or one point's directory with a run)",
            sweep.display(),
            run.display()
        )));
    }
    let mut pairs = Vec::new();
    for (point, b) in base {
        match new.iter().position(|(p, _)| *p == point) {
            Some(i) => pairs.push((point, b, new.remove(i).1)),
            None => eprintln!(
                "warning: point {} is in BASE only; not compared",
                point.unwrap_or_default()
            ),
        }
    }
    for (point, _) in new {
        eprintln!(
            "warning: point {} is in NEW only; not compared",
            point.unwrap_or_default()
        );
    }
    if pairs.is_empty() {
        return Err(CompareError::Input(
            "the sweeps have no point in common (points are matched by their directory name, the swept values)".into(),
        ));
    }
    Ok(pairs)
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
    let fewest = b.len().min(n.len());
    let (supported, unsupported): (Vec<Stat>, Vec<Stat>) = Stat::ALL
        .iter()
        .partition(|stat| stat.tail(fewest) >= MIN_TAIL);
    let mut rng = ChaCha8Rng::seed_from_u64(metric_seed(s.seed, def.tag));
    let cis = interval::bootstrap(&b, &n, &supported, s.resamples, s.confidence, &mut rng);
    let with_ci = supported.into_iter().zip(cis.into_iter().map(Some));
    let without = unsupported.into_iter().map(|stat| (stat, None));
    let mut rows: Vec<Row> = with_ci
        .chain(without)
        .map(|(stat, ci)| {
            let (vb, vn) = (stat.of_sorted(&b), stat.of_sorted(&n));
            let method = ci.map_or(Method::Point, |_| Method::Bootstrap);
            row(def, stat.name(), vb, vn, ci, method, s)
        })
        .collect();
    rows.sort_by_key(|r| Stat::ALL.iter().position(|s| s.name() == r.stat));
    Some(rows)
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
/// lies beyond ±threshold, else `no change`; and whether that is a change for the worse.
fn verdict(def: &MetricDef, ci: Option<(f64, f64)>, threshold: f64) -> (&'static str, bool) {
    let Some((low, high)) = ci else {
        return ("no interval", false);
    };
    let (up, down) = (low > threshold, high < -threshold);
    let timed = def.unit == "ms" && !def.larger_is_better;
    // Shares in % (errors, token-count mismatches) are better smaller.
    let smaller_is_better = timed || def.unit == "%";
    let word = match (up, down, timed) {
        (true, _, true) => "slower",
        (_, true, true) => "faster",
        (true, _, false) => "higher",
        (_, true, false) => "lower",
        _ => "no change",
    };
    // The catalogue marks larger-is-better metrics; of the others only times and shares
    // are known to be better smaller (byte and chunk counts have no better direction).
    let worse = match (def.larger_is_better, smaller_is_better) {
        (true, _) => down,
        (false, true) => up,
        (false, false) => false,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_name_the_direction_and_the_worse_one_is_a_regression() {
        let ttft = by_tag("time_to_first_token").unwrap();
        let tput = by_tag("output_token_throughput").unwrap();
        let osl = by_tag("output_sequence_length").unwrap();
        assert_eq!(verdict(ttft, Some((2.5, 9.0)), 2.0), ("slower", true));
        assert_eq!(verdict(ttft, Some((-9.0, -2.5)), 2.0), ("faster", false));
        // Overlapping the ±2% band: not shown to change, however far the other end.
        assert_eq!(verdict(ttft, Some((1.5, 30.0)), 2.0), ("no change", false));
        assert_eq!(verdict(tput, Some((-9.0, -2.5)), 2.0), ("lower", true));
        assert_eq!(verdict(tput, Some((2.5, 9.0)), 2.0), ("higher", false));
        assert_eq!(verdict(osl, Some((-9.0, -2.5)), 2.0), ("lower", true));
        let bytes = by_tag("http_req_data_sent").unwrap();
        assert_eq!(verdict(bytes, Some((2.5, 9.0)), 2.0), ("higher", false));
        assert_eq!(verdict(tput, None, 2.0), ("no interval", false));
        let errors = by_tag("request_error_rate").unwrap();
        assert_eq!(verdict(errors, Some((2.5, 9.0)), 2.0), ("higher", true));
    }
}
