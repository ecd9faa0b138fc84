//! What the grid recipes derive from their points once all have run, each in its own
//! module: `prefill` (TTFT against ISL), `decode` (the ITL surface) and `pareto` (the
//! frontier). Each reads the points' parameters and the mean across a point's successful
//! runs of a metric's statistic, and returns the file AIPerf writes in `sweep_aggregate/`
//! with a one-line verdict for the console.

mod decode;
pub mod fit;
mod pareto;
mod prefill;

use std::path::Path;

use serde_json::{Value, json};

use super::search::mean_of;
use crate::config::multirun::GridRecipe;
use crate::export::aggregate::RunMetrics;
use crate::export::sweep_files::{POST_PROCESS_ERRORS_FILE, write_json_file};

/// One point: its parameters and its successful runs.
pub struct Cell<'a> {
    pub values: &'a [(&'static str, Value)],
    pub runs: Vec<&'a RunMetrics>,
}

impl Cell<'_> {
    /// A parameter by its dotted path or its last segment (`isl`), as a number.
    fn param(&self, key: &str) -> Option<f64> {
        let leaf = key.rsplit('.').next().unwrap_or(key);
        self.values
            .iter()
            .find(|(p, _)| *p == key)
            .or_else(|| {
                self.values
                    .iter()
                    .find(|(p, _)| p.rsplit('.').next() == Some(leaf))
            })
            .and_then(|(_, v)| v.as_f64())
    }

    /// The mean across the runs of `tag`'s `stat`; `None` when no run has it.
    fn metric(&self, tag: &str, stat: &str) -> Option<f64> {
        mean_of(&self.runs, tag, stat)
    }
}

/// A derived file and what the console says about it.
pub struct Derived {
    pub file: &'static str,
    pub body: Value,
    pub verdict: String,
}

fn derive(recipe: &GridRecipe, cells: &[Cell]) -> Result<Derived, String> {
    match recipe {
        GridRecipe::PrefillTtftCurve { .. } => prefill::process(cells),
        GridRecipe::DecodeItlCurve { .. } => decode::process(cells),
        GridRecipe::ParetoSweep { .. } => pareto::process(cells),
    }
}

/// The handler name AIPerf records in `post_process_errors.json`.
fn handler(recipe: &GridRecipe) -> (&'static str, &'static str) {
    use crate::export::sweep_files::{
        DECODE_ITL_SURFACE_FILE, PARETO_SWEEP_FILE, PREFILL_CURVE_FILE,
    };
    match recipe {
        GridRecipe::PrefillTtftCurve { .. } => ("ttft_curve_fit", PREFILL_CURVE_FILE),
        GridRecipe::DecodeItlCurve { .. } => ("itl_surface_fit", DECODE_ITL_SURFACE_FILE),
        GridRecipe::ParetoSweep { .. } => ("pareto_sweep_export", PARETO_SWEEP_FILE),
    }
}

/// Derives the recipe's file into `dir` and prints its verdict. A derivation that fails
/// (too few points measured) writes `post_process_errors.json` instead, as AIPerf does:
/// the runs and the aggregates stay. `Err` only when a file cannot be written.
pub fn write(dir: &Path, recipe: &GridRecipe, cells: &[Cell]) -> std::io::Result<()> {
    match derive(recipe, cells) {
        Ok(d) => {
            write_json_file(dir, d.file, &d.body)?;
            println!("{}", d.verdict);
            println!("{}: {}", recipe.name(), dir.join(d.file).display());
        }
        Err(why) => {
            let (handler, file) = handler(recipe);
            let body = json!({
                "handler": handler,
                "output_filename": file,
                "error": why,
                "type": "ValueError",
            });
            write_json_file(dir, POST_PROCESS_ERRORS_FILE, &body)?;
            tracing::warn!(
                "{} could not derive {file}: {why} (details in {})",
                recipe.name(),
                dir.join(POST_PROCESS_ERRORS_FILE).display()
            );
        }
    }
    Ok(())
}

/// A whole number written as an integer, anything else as a float.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

/// What the derived files' tests build their points from.
#[cfg(test)]
pub(super) mod testing {
    use super::Cell;
    use crate::export::aggregate::{MetricSummary, RunMetrics};
    use serde_json::Value;

    /// A run with one statistic of each of `metrics` (tag, stat, value).
    pub fn run(metrics: &[(&str, &str, f64)]) -> RunMetrics {
        let mut m = RunMetrics::new();
        for (tag, stat, v) in metrics {
            m.insert(
                (*tag).into(),
                MetricSummary {
                    unit: "x".into(),
                    stats: [(stat.to_string(), *v)].into_iter().collect(),
                },
            );
        }
        m
    }

    /// One cell per point: its parameters and its one run.
    pub fn cells<'a>(
        values: &'a [Vec<(&'static str, Value)>],
        runs: &'a [RunMetrics],
    ) -> Vec<Cell<'a>> {
        values
            .iter()
            .zip(runs)
            .map(|(v, r)| Cell {
                values: v,
                runs: vec![r],
            })
            .collect()
    }
}
