//! `decode-itl-curve`: the measured ITL (avg) over concurrency x OSL as AIPerf's
//! `itl_surface_fit` writes it: the raw points, the axes of the values measured and the
//! grid, `null` where a cell was not measured (nothing is interpolated).
//!
//! Not in AIPerf's file: `linear_fit`, the plane ITL = a + b·concurrency + c·OSL by least
//! squares with its r², so the file says how much a request in flight and an output token
//! add to ITL.

use serde_json::{Value, json};

use super::fit::{least_squares, r_squared};
use super::{Cell, Derived};
use crate::export::sweep_files::DECODE_ITL_SURFACE_FILE;

const CONCURRENCY: &str = "phases.profiling.concurrency";
const OSL: &str = "datasets.main.prompts.osl";
const METRIC: &str = "inter_token_latency";
const STAT: &str = "avg";

pub fn process(cells: &[Cell]) -> Result<Derived, String> {
    let mut candidates = 0;
    let mut triples: Vec<(f64, f64, f64)> = Vec::new();
    for c in cells {
        let (Some(conc), Some(osl)) = (c.param(CONCURRENCY), c.param(OSL)) else {
            continue;
        };
        let Some(itl) = c.metric(METRIC, STAT) else {
            continue;
        };
        candidates += 1;
        // Negative ITL is a measuring error, not a point of the surface.
        if itl >= 0.0 {
            triples.push((conc, osl, itl));
        }
    }
    if candidates == 0 {
        return Err(format!(
            "itl_surface_fit: no point measured '{METRIC}' with both '{CONCURRENCY}' and '{OSL}'; check that the points' requests succeeded"
        ));
    }
    triples.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let raw: Vec<Value> = triples
        .iter()
        .map(|(c, o, v)| json!({"concurrency": c, "osl": o, "itl_ms": v}))
        .collect();
    let swept = json!([CONCURRENCY, OSL]);
    if triples.len() < 2 {
        let body = json!({
            "swept_metric": METRIC,
            "stat": STAT,
            "swept_params": swept,
            "raw_points": raw,
            "surface": {"concurrency_axis": [], "osl_axis": [], "itl_grid": []},
            "surface_fit_failed": true,
            "error_reason": format!(
                "itl_surface_fit: fewer than 2 measured points (kept {} of {candidates})",
                triples.len()
            ),
        });
        return Ok(Derived {
            file: DECODE_ITL_SURFACE_FILE,
            body,
            verdict: "Decode ITL surface: fewer than 2 points measured, no surface".into(),
        });
    }
    let axis = |f: fn(&(f64, f64, f64)) -> f64| {
        let mut v: Vec<f64> = triples.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let conc_axis = axis(|t| t.0);
    let osl_axis = axis(|t| t.1);
    let grid: Vec<Vec<Option<f64>>> = conc_axis
        .iter()
        .map(|c| {
            osl_axis
                .iter()
                .map(|o| triples.iter().find(|t| t.0 == *c && t.1 == *o).map(|t| t.2))
                .collect()
        })
        .collect();
    let plane = plane_fit(&triples);
    let mut body = json!({
        "swept_metric": METRIC,
        "stat": STAT,
        "swept_params": swept,
        "raw_points": raw,
        "surface": {
            "concurrency_axis": conc_axis,
            "osl_axis": osl_axis,
            "itl_grid": grid,
        },
        "surface_fit_failed": false,
    });
    if let Some((a, b, c, r2)) = plane {
        body["linear_fit"] = json!({
            "form": "itl_ms = intercept + concurrency_coef * concurrency + osl_coef * osl",
            "intercept": a,
            "concurrency_coef": b,
            "osl_coef": c,
            "r_squared": r2,
        });
    }
    let (lo, hi) = triples
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), t| (l.min(t.2), h.max(t.2)));
    let verdict = format!(
        "Decode ITL surface: {} concurrencies x {} OSLs, ITL {lo:.2}..{hi:.2} ms{}",
        conc_axis.len(),
        osl_axis.len(),
        match plane {
            Some((_, b, c, r2)) => format!(
                "; fit: {b:+.4} ms per request in flight, {:+.4} ms per 100 output tokens (r^2 {r2:.3})",
                c * 100.0
            ),
            None => String::new(),
        }
    );
    Ok(Derived {
        file: DECODE_ITL_SURFACE_FILE,
        body,
        verdict,
    })
}

/// ITL = a + b·concurrency + c·OSL: (a, b, c, r²); `None` when the points do not span a
/// plane (one concurrency or one OSL only).
fn plane_fit(triples: &[(f64, f64, f64)]) -> Option<(f64, f64, f64, f64)> {
    let ones = vec![1.0; triples.len()];
    let conc: Vec<f64> = triples.iter().map(|t| t.0).collect();
    let osl: Vec<f64> = triples.iter().map(|t| t.1).collect();
    let y: Vec<f64> = triples.iter().map(|t| t.2).collect();
    let [a, b, c] = least_squares(&[ones, conc.clone(), osl.clone()], &y)?[..] else {
        return None;
    };
    let predicted: Vec<f64> = conc
        .iter()
        .zip(&osl)
        .map(|(x, o)| a + b * x + c * o)
        .collect();
    Some((a, b, c, r_squared(&y, &predicted)))
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;
    use crate::export::aggregate::RunMetrics;

    fn run(itl: f64) -> RunMetrics {
        testing::run(&[(METRIC, "avg", itl)])
    }

    #[test]
    fn the_surface_holds_every_point_and_the_fit_recovers_the_plane() {
        let mut values = Vec::new();
        let mut runs = Vec::new();
        for osl in [64u64, 256] {
            for c in [1u64, 4, 16] {
                // (16, 256) not measured.
                if (c, osl) == (16, 256) {
                    continue;
                }
                values.push(vec![(OSL, Value::from(osl)), (CONCURRENCY, Value::from(c))]);
                runs.push(run(5.0 + 0.25 * c as f64 + 0.01 * osl as f64));
            }
        }
        let cells = testing::cells(&values, &runs);
        let body = process(&cells).unwrap().body;
        assert_eq!(body["surface"]["concurrency_axis"], json!([1.0, 4.0, 16.0]));
        assert_eq!(body["surface"]["osl_axis"], json!([64.0, 256.0]));
        let itl = |c: f64, o: f64| 5.0 + 0.25 * c + 0.01 * o;
        assert_eq!(body["surface"]["itl_grid"][0][1], itl(1.0, 256.0));
        assert_eq!(body["surface"]["itl_grid"][2][1], Value::Null);
        assert_eq!(body["raw_points"].as_array().unwrap().len(), 5);
        assert_eq!(
            body["raw_points"][0],
            json!({"concurrency": 1.0, "osl": 64.0, "itl_ms": itl(1.0, 64.0)})
        );
        let fit = &body["linear_fit"];
        assert!(
            (fit["concurrency_coef"].as_f64().unwrap() - 0.25).abs() < 1e-9,
            "{fit}"
        );
        assert!(
            (fit["osl_coef"].as_f64().unwrap() - 0.01).abs() < 1e-9,
            "{fit}"
        );
        assert!(
            (fit["intercept"].as_f64().unwrap() - 5.0).abs() < 1e-9,
            "{fit}"
        );
        assert_eq!(body["surface_fit_failed"], false);
    }

    #[test]
    fn one_point_is_a_failed_surface_and_none_an_error() {
        let runs = [run(5.0)];
        let values = [(OSL, Value::from(64)), (CONCURRENCY, Value::from(1))];
        let cells = [Cell {
            values: &values,
            runs: vec![&runs[0]],
        }];
        let body = process(&cells).unwrap().body;
        assert_eq!(body["surface_fit_failed"], true);
        assert!(process(&[]).is_err());
    }
}
