//! `prefill-ttft-curve`: TTFT (avg) against ISL, fitted as a line TTFT = a·ISL + b; when
//! r² stays below 0.85 and three or more points were measured, a quadratic is tried and
//! kept if it fits better. `below_floor` says that neither reached 0.85 (AIPerf's
//! `ttft_curve_fit`).

use serde_json::{Value, json};

use super::fit::polyfit;
use super::{Cell, Derived};
use crate::export::sweep_files::PREFILL_CURVE_FILE;

const SWEPT_PARAM: &str = "datasets.main.prompts.isl";
const METRIC: &str = "time_to_first_token";
const STAT: &str = "avg";
const R2_FLOOR: f64 = 0.85;

pub fn process(cells: &[Cell]) -> Result<Derived, String> {
    let mut points: Vec<(f64, f64)> = cells
        .iter()
        .filter_map(|c| Some((c.param(SWEPT_PARAM)?, c.metric(METRIC, STAT)?)))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    if points.len() < 2 {
        return Err(format!(
            "ttft_curve_fit: need >= 2 sweep points to fit a curve (got {} for '{METRIC}'/'{STAT}'); widen the recipe's ISL range or check that the points' requests succeeded",
            points.len()
        ));
    }
    let x: Vec<f64> = points.iter().map(|p| p.0).collect();
    let y: Vec<f64> = points.iter().map(|p| p.1).collect();
    let (mut form, (mut coefficients, mut r2)) = ("linear", polyfit(&x, &y, 1).unwrap_or_default());
    if r2 < R2_FLOOR
        && x.len() >= 3
        && let Some((q, q_r2)) = polyfit(&x, &y, 2)
        && q_r2 > r2
    {
        (form, coefficients, r2) = ("quadratic", q, q_r2);
    }
    let below_floor = coefficients.is_empty() || !r2.is_finite() || r2 < R2_FLOOR;
    let raw: Vec<Value> = points
        .iter()
        .map(|(x, y)| json!({"isl": x, "ttft_ms": y}))
        .collect();
    let body = json!({
        "fit_form": form,
        "coefficients": coefficients,
        "r_squared": r2,
        "below_floor": below_floor,
        "r_squared_floor": R2_FLOOR,
        "raw_points": raw,
        "swept_metric": METRIC,
        "stat": STAT,
        "swept_param": SWEPT_PARAM,
    });
    let fit = match (form, coefficients.as_slice()) {
        ("linear", [a, b]) => format!("TTFT = {a:.6} ms/token x ISL + {b:.2} ms"),
        (_, [a, b, c]) => format!("TTFT = {a:.3e} x ISL^2 + {b:.6} x ISL + {c:.2} ms"),
        _ => "no fit (the ISLs measured do not vary)".to_string(),
    };
    let verdict = format!(
        "Prefill TTFT curve over {} ISLs ({}..{}): {fit}, r^2 {r2:.4}{}",
        points.len(),
        x[0],
        x[x.len() - 1],
        if below_floor {
            format!(" (below the {R2_FLOOR} floor: the curve does not follow the fit)")
        } else {
            String::new()
        }
    );
    Ok(Derived {
        file: PREFILL_CURVE_FILE,
        body,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;
    use crate::export::aggregate::RunMetrics;

    fn run(ttft: f64) -> RunMetrics {
        testing::run(&[(METRIC, "avg", ttft)])
    }

    fn derive(f: impl Fn(f64) -> f64, isls: &[u64]) -> Value {
        let values: Vec<Vec<(&'static str, Value)>> = isls
            .iter()
            .map(|i| {
                vec![
                    (SWEPT_PARAM, Value::from(*i)),
                    ("phases.profiling.concurrency", Value::from(1)),
                ]
            })
            .collect();
        let runs: Vec<RunMetrics> = isls.iter().map(|i| run(f(*i as f64))).collect();
        let cells = testing::cells(&values, &runs);
        process(&cells).unwrap().body
    }

    #[test]
    fn a_linear_prefill_cost_is_recovered() {
        let body = derive(|isl| 0.02 * isl + 12.0, &[1024, 256, 512, 2048]);
        assert_eq!(body["fit_form"], "linear");
        let c = body["coefficients"].as_array().unwrap();
        assert!((c[0].as_f64().unwrap() - 0.02).abs() < 1e-12);
        assert!((c[1].as_f64().unwrap() - 12.0).abs() < 1e-9);
        assert_eq!(body["below_floor"], false);
        // Raw points sorted by ISL, ISL written as a float as AIPerf writes it.
        assert_eq!(body["raw_points"][0]["isl"], 256.0);
        assert_eq!(body["raw_points"][3]["ttft_ms"], 0.02 * 2048.0 + 12.0);
    }

    #[test]
    fn a_curve_the_line_misses_gets_the_quadratic() {
        // Flat, then steep: a line's r^2 is below 0.85, the quadratic is exact.
        let body = derive(
            |isl| 1e-4 * isl * isl - 0.3 * isl + 250.0,
            &[100, 500, 1000, 2000, 4000],
        );
        assert_eq!(body["fit_form"], "quadratic", "{body}");
        let c = body["coefficients"].as_array().unwrap();
        assert!((c[0].as_f64().unwrap() - 1e-4).abs() < 1e-10, "{body}");
        assert!((body["r_squared"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn one_point_is_not_a_curve() {
        let runs = [run(5.0)];
        let values = [(SWEPT_PARAM, Value::from(256))];
        let cells = [Cell {
            values: &values,
            runs: vec![&runs[0]],
        }];
        assert!(process(&cells).is_err());
    }
}
