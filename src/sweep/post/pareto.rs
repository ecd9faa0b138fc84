//! `pareto-sweep`: each (ISL, OSL, concurrency) point with x = TTFT p95 (lower is better)
//! and y = output token throughput avg (higher is better), marked Pareto-optimal when no
//! other point is at least as good on both and better on one (AIPerf's
//! `pareto_sweep_export`).
//!
//! Deviation from AIPerf 0.13: for a point with one run AIPerf reads the TTFT average
//! (its single-run layout has no percentile keys) although the file says p95; here x is
//! the p95 the file names, for one run or several.

use serde_json::{Value, json};

use super::{Cell, Derived, number};
use crate::export::sweep_files::PARETO_SWEEP_FILE;

const X: (&str, &str) = ("time_to_first_token", "p95");
const Y: (&str, &str) = ("output_token_throughput", "avg");

struct Point {
    isl: f64,
    osl: f64,
    concurrency: f64,
    x: f64,
    y: f64,
    optimal: bool,
}

pub fn process(cells: &[Cell]) -> Result<Derived, String> {
    let mut points: Vec<Point> = cells
        .iter()
        .filter_map(|c| {
            Some(Point {
                isl: c.param("isl")?,
                osl: c.param("osl")?,
                concurrency: c.param("concurrency")?,
                x: c.metric(X.0, X.1)?,
                y: c.metric(Y.0, Y.1)?,
                optimal: false,
            })
        })
        .collect();
    if points.is_empty() {
        return Err(format!(
            "pareto_sweep_export: no point measured {}_{} and {}_{}; check that the points' requests succeeded with --streaming",
            X.0, X.1, Y.0, Y.1
        ));
    }
    mark_optimal(&mut points);
    let cells_json: Vec<Value> = points
        .iter()
        .map(|p| {
            json!({
                "isl": number(p.isl),
                "osl": number(p.osl),
                "concurrency": number(p.concurrency),
                "x": p.x,
                "y": p.y,
                "pareto_optimal": p.optimal,
            })
        })
        .collect();
    let body = json!({
        "x_metric": X.0,
        "x_stat": X.1,
        "y_metric": Y.0,
        "y_stat": Y.1,
        "cells": cells_json,
    });
    let frontier: Vec<String> = points
        .iter()
        .filter(|p| p.optimal)
        .map(|p| {
            format!(
                "{}/{} at {} ({:.1} ms, {:.1} tokens/s)",
                p.isl, p.osl, p.concurrency, p.x, p.y
            )
        })
        .collect();
    let verdict = format!(
        "Pareto frontier (TTFT p95 vs output token throughput): {} of {} points: {}",
        frontier.len(),
        points.len(),
        frontier.join("; ")
    );
    Ok(Derived {
        file: PARETO_SWEEP_FILE,
        body,
        verdict,
    })
}

/// A point is optimal when no other has x <= its x and y >= its y, strictly on one.
fn mark_optimal(points: &mut [Point]) {
    let dominated: Vec<bool> = points
        .iter()
        .map(|p| {
            points
                .iter()
                .any(|q| q.x <= p.x && q.y >= p.y && (q.x < p.x || q.y > p.y))
        })
        .collect();
    for (p, d) in points.iter_mut().zip(dominated) {
        p.optimal = !d;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;
    use crate::export::aggregate::RunMetrics;

    fn run(ttft_p95: f64, tput: f64) -> RunMetrics {
        testing::run(&[(X.0, "p95", ttft_p95), (Y.0, "avg", tput)])
    }

    #[test]
    fn dominated_points_are_off_the_frontier() {
        // (ttft, throughput): a (10, 100) and c (40, 300) are optimal; b (20, 90) is
        // dominated by a; d (40, 250) by c; e (50, 300) ties c on y but is slower.
        let data = [
            (10.0, 100.0),
            (20.0, 90.0),
            (40.0, 300.0),
            (40.0, 250.0),
            (50.0, 300.0),
        ];
        let runs: Vec<RunMetrics> = data.iter().map(|(x, y)| run(*x, *y)).collect();
        let values: Vec<Vec<(&'static str, Value)>> = (0..data.len())
            .map(|i| {
                vec![
                    ("isl", Value::from(128)),
                    ("osl", Value::from(64)),
                    ("concurrency", Value::from(1u64 << i)),
                ]
            })
            .collect();
        let cells = testing::cells(&values, &runs);
        let d = process(&cells).unwrap();
        let optimal: Vec<bool> = d.body["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["pareto_optimal"].as_bool().unwrap())
            .collect();
        assert_eq!(optimal, [true, false, true, false, false]);
        assert_eq!(d.body["cells"][2]["concurrency"], 4);
        assert_eq!(d.body["cells"][2]["x"], 40.0);
        assert!(d.verdict.contains("2 of 5 points"), "{}", d.verdict);
    }
}
