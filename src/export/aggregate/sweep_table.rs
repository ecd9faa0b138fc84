//! The console table of a sweep: one row per variation with its headline figures, the
//! mean across its successful trials when there are several.

use super::sweep::{Analysis, SweepAggregate, SweepCell};
use crate::export::console::format_number;
use crate::export::pyrepr;
use crate::export::table::{Justify, Table};

/// Wide enough for several parameters beside the ten figure columns.
const SWEEP_TABLE_WIDTH: usize = 200;

/// Figure columns: header, metric tag, statistic.
const FIGURES: [(&str, &str, &str); 7] = [
    ("Request/s", "request_throughput", "avg"),
    ("Output tok/s", "output_token_throughput", "avg"),
    ("TTFT p50 (ms)", "time_to_first_token", "p50"),
    ("TTFT p99 (ms)", "time_to_first_token", "p99"),
    ("ITL p50 (ms)", "inter_token_latency", "p50"),
    ("ITL p99 (ms)", "inter_token_latency", "p99"),
    ("Latency p99 (ms)", "request_latency", "p99"),
];

/// Mean of a figure over the cell's successful trials that have it.
fn trial_mean(cell: &SweepCell, tag: &str, stat: &str) -> Option<f64> {
    let values: Vec<f64> = cell
        .runs
        .iter()
        .filter_map(|r| r.stat(tag, stat))
        .filter(|v| v.is_finite())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Failed requests per trial (`error_request_count`, 0 when a run has none), averaged.
fn errors(cell: &SweepCell) -> String {
    let (mean, _) = cell.failed_requests();
    if mean.fract() == 0.0 {
        format!("{mean:.0}")
    } else {
        format!("{mean:.1}")
    }
}

/// The sweep table: parameter values (leaf names as headers), request and output token
/// throughput, TTFT and ITL p50/p99, latency p99, failed requests, successful/total
/// trials, and `*` on the Pareto-optimal variations. A variation without a successful
/// trial shows `failed` and the first line of its first error.
pub fn sweep_table(agg: &SweepAggregate) -> String {
    let a = Analysis::of(agg);
    let any_failed = a.cells.iter().any(|(_, stats)| stats.is_none());
    let mut table = Table::new("NVIDIA AIPerf | Sweep Summary");
    for (name, _) in &a.params {
        table = table.column(name, Justify::Right);
    }
    for (header, _, _) in FIGURES {
        table = table.column(header, Justify::Right);
    }
    table = table
        .column("Errors", Justify::Right)
        .column("Trials", Justify::Right)
        .column("Pareto", Justify::Left);
    if any_failed {
        table = table.column("Failure", Justify::Left);
    }
    for (i, (cell, stats)) in a.cells.iter().enumerate() {
        let mut row: Vec<String> = a
            .params
            .iter()
            .map(|(_, path)| {
                let value = cell.values.iter().find(|(p, _)| p == path);
                value.map_or_else(String::new, |(_, v)| pyrepr::str(v))
            })
            .collect();
        let successes = cell.runs.iter().filter(|r| r.result.is_ok()).count();
        if stats.is_some() {
            row.extend(FIGURES.iter().map(|(_, tag, stat)| {
                trial_mean(cell, tag, stat).map_or_else(|| "-".into(), format_number)
            }));
            row.push(errors(cell));
        } else {
            row.push("failed".into());
            row.extend((1..FIGURES.len()).map(|_| String::new()));
            row.push(String::new());
        }
        row.push(format!("{successes}/{}", cell.runs.len()));
        row.push(if a.pareto.contains(&i) { "*" } else { "" }.into());
        if any_failed {
            let first_error = cell.runs.iter().find_map(|r| r.result.as_ref().err());
            let line = match (stats, first_error) {
                (None, Some(e)) => e.lines().next().unwrap_or_default().to_string(),
                _ => String::new(),
            };
            row.push(line);
        }
        table.row(row);
    }
    table.render(SWEEP_TABLE_WIDTH)
}

#[cfg(test)]
mod tests {
    use super::super::RunOutcome;
    use super::super::tests::{MetricSpec, failed, run};
    use super::*;
    use serde_json::json;

    fn trial(tp: f64, ttft_p99: f64, errors: Option<f64>) -> RunOutcome {
        let mut metrics = vec![
            ("request_throughput", "requests/sec", vec![("avg", tp)]),
            (
                "output_token_throughput",
                "tokens/sec",
                vec![("avg", tp * 100.0)],
            ),
            (
                "time_to_first_token",
                "ms",
                vec![("p50", ttft_p99 / 2.0), ("p99", ttft_p99)],
            ),
            ("request_latency", "ms", vec![("p99", ttft_p99 * 10.0)]),
        ];
        if let Some(e) = errors {
            metrics.push(("error_request_count", "requests", vec![("avg", e)]));
        }
        let borrowed: Vec<MetricSpec> = metrics
            .iter()
            .map(|(t, u, s)| (*t, *u, s.as_slice()))
            .collect();
        run("t", &borrowed)
    }

    #[test]
    fn rows_show_means_across_trials_pareto_marks_and_failures() {
        let cells = [
            SweepCell {
                values: vec![("phases.profiling.concurrency".into(), json!(2))],
                runs: vec![trial(4.0, 40.0, None), trial(4.4, 42.0, Some(3.0))],
            },
            SweepCell {
                values: vec![("phases.profiling.concurrency".into(), json!(4))],
                runs: vec![trial(8.0, 80.0, Some(1.0)), failed("t2", "exit 1\nmore")],
            },
            SweepCell {
                values: vec![("phases.profiling.concurrency".into(), json!(8))],
                runs: vec![
                    failed("t1", "All 5 requests failed\nstderr tail"),
                    failed("t2", "other"),
                ],
            },
        ];
        let agg = SweepAggregate {
            cells: &cells,
            sweep_mode: "repeated".into(),
            confidence_level: 0.95,
            failed_runs: vec![],
        };
        let text = sweep_table(&agg);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].trim() == "NVIDIA AIPerf | Sweep Summary", "{text}");
        let cells_of = |l: &str| -> Vec<String> {
            l.split(['│', '┃'])
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        };
        assert_eq!(
            cells_of(lines[2]),
            [
                "concurrency",
                "Request/s",
                "Output tok/s",
                "TTFT p50 (ms)",
                "TTFT p99 (ms)",
                "ITL p50 (ms)",
                "ITL p99 (ms)",
                "Latency p99 (ms)",
                "Errors",
                "Trials",
                "Pareto",
                "Failure"
            ]
        );
        let row = |n: usize| -> Vec<String> {
            lines[n].split('│').map(|c| c.trim().to_string()).collect()
        };
        // Two trials: means (4.2 req/s, TTFT p99 41), errors (0 + 3) / 2.
        assert_eq!(
            row(4)[1..13],
            [
                "2", "4.20", "420.00", "20.50", "41.00", "-", "-", "410.00", "1.5", "2/2", "*", ""
            ]
        );
        // One of two trials failed: the successful one's figures.
        assert_eq!(
            row(5)[1..12],
            [
                "4", "8.00", "800.00", "40.00", "80.00", "-", "-", "800.00", "1", "1/2", "*"
            ]
        );
        // No success: failed, with the first line of the first error.
        assert_eq!(row(6)[1..4], ["8", "failed", ""]);
        assert_eq!(row(6)[10..13], ["0/2", "", "All 5 requests failed"]);
    }
}
