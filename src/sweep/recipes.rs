//! The points of the grid recipes, in AIPerf's order: each point's command line is the
//! base one with the recipe's values set, and its values are the recipe's parameters
//! (`datasets.main.prompts.isl`, `phases.profiling.concurrency`, or pareto-sweep's
//! `isl`/`osl`/`concurrency`), which name its directory.

use serde_json::Value;

use super::argv;
use super::lists::{Lists, Variation};
use super::plan::log_ladder;
use crate::config::multirun::{GridRecipe, Ladder};

const ISL: &str = "datasets.main.prompts.isl";
const OSL: &str = "datasets.main.prompts.osl";
const CONCURRENCY: &str = "phases.profiling.concurrency";

/// A point's (path, value) pairs.
type Point = Vec<(&'static str, u64)>;

fn ladder(l: Ladder) -> Vec<u64> {
    log_ladder(l.lo, l.hi, l.steps)
}

/// Takes pareto-sweep's `--concurrency` list out of `lists` (AIPerf's recipe consumes it);
/// `None` for any other command line.
pub fn take_concurrency_list(lists: &mut Lists, pareto: bool) -> Option<Vec<u64>> {
    if !pareto {
        return None;
    }
    let at = lists.params.iter().position(|p| p.path == CONCURRENCY)?;
    let p = lists.params.remove(at);
    Some(p.values().iter().filter_map(Value::as_u64).collect())
}

/// The recipe's points, every one a command line built from `first`.
pub fn variations(recipe: &GridRecipe, first: &[String]) -> Result<Vec<Variation>, String> {
    // Each point: its (path, value) pairs and a name (pareto-sweep's).
    let mut points: Vec<(Point, Option<String>)> = Vec::new();
    match recipe {
        // Sorted by path, as AIPerf's grid expands: ISL, then concurrency fixed at 1.
        GridRecipe::PrefillTtftCurve { isl } => {
            for i in ladder(*isl) {
                points.push((vec![(ISL, i), (CONCURRENCY, 1)], None));
            }
        }
        // OSL before concurrency (sorted paths): concurrency varies fastest.
        GridRecipe::DecodeItlCurve { concurrency, osl } => {
            for o in ladder(*osl) {
                for c in ladder(*concurrency) {
                    points.push((vec![(OSL, o), (CONCURRENCY, c)], None));
                }
            }
        }
        GridRecipe::ParetoSweep { pairs, concurrency } => {
            for (i, o) in pairs {
                for c in concurrency {
                    let name = format!("shape_{i}_{o}_c{c}");
                    points.push((
                        vec![("isl", *i), ("osl", *o), ("concurrency", *c)],
                        Some(name),
                    ));
                }
            }
        }
    }
    let flag = |path: &str| -> clap::Arg {
        let key = match path.rsplit('.').next().unwrap_or(path) {
            "isl" => "isl",
            "osl" => "osl",
            _ => "concurrency",
        };
        argv::find(key).expect("--isl, --osl and --concurrency are profile flags")
    };
    points
        .into_iter()
        .enumerate()
        .map(|(index, (values, name))| {
            let mut point = first.to_vec();
            for (path, v) in &values {
                point = argv::set(&point, &flag(path), &v.to_string())?;
            }
            Ok(Variation {
                index,
                values: values
                    .into_iter()
                    .map(|(p, v)| (p, Value::from(v)))
                    .collect(),
                argv: point,
                name,
                dir_by_name: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn points_and_names_follow_aiperf() {
        let first = argv("aiperf profile -m m --streaming");
        let v = variations(
            &GridRecipe::PrefillTtftCurve {
                isl: Ladder {
                    lo: 256,
                    hi: 32_768,
                    steps: 8,
                },
            },
            &first,
        )
        .unwrap();
        let isls: Vec<u64> = v.iter().map(|p| p.values[0].1.as_u64().unwrap()).collect();
        assert_eq!(isls, [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]);
        assert_eq!(v[0].dir_name(), "isl_256__concurrency_1");
        assert_eq!(
            v[0].label(),
            "datasets.main.prompts.isl=256, phases.profiling.concurrency=1"
        );
        assert_eq!(
            v[0].argv,
            argv(
                "aiperf profile -m m --streaming --synthetic-input-tokens-mean=256 --concurrency=1"
            )
        );
        let v = variations(
            &GridRecipe::DecodeItlCurve {
                concurrency: Ladder {
                    lo: 1,
                    hi: 4,
                    steps: 2,
                },
                osl: Ladder {
                    lo: 64,
                    hi: 1024,
                    steps: 3,
                },
            },
            &first,
        )
        .unwrap();
        let dirs: Vec<String> = v.iter().map(Variation::dir_name).collect();
        assert_eq!(
            dirs,
            [
                "osl_64__concurrency_1",
                "osl_64__concurrency_4",
                "osl_256__concurrency_1",
                "osl_256__concurrency_4",
                "osl_1024__concurrency_1",
                "osl_1024__concurrency_4"
            ]
        );
        let v = variations(
            &GridRecipe::ParetoSweep {
                pairs: vec![(128, 64)],
                concurrency: vec![2, 8],
            },
            &argv("aiperf profile -m m --concurrency=2"),
        )
        .unwrap();
        assert_eq!(v[1].label(), "shape_128_64_c8");
        assert_eq!(v[1].dir_name(), "isl_128__osl_64__concurrency_8");
        assert_eq!(
            v[1].argv,
            argv(
                "aiperf profile -m m --synthetic-input-tokens-mean=128 --output-tokens-mean=64 --concurrency=8"
            )
        );
    }

    #[test]
    fn pareto_takes_the_concurrency_list() {
        let mut lists =
            super::super::lists::find(&argv("aiperf profile --concurrency 1,4 --request-rate 2,3"))
                .unwrap();
        assert_eq!(take_concurrency_list(&mut lists, false), None);
        assert_eq!(take_concurrency_list(&mut lists, true), Some(vec![1, 4]));
        assert_eq!(lists.params.len(), 1);
    }
}
