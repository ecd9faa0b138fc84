//! The plots across runs (a sweep, repeated runs, or several directories): throughput
//! against latency with the Pareto frontier, and latency percentiles against load.

use super::artifacts::{Requests, RunArtifacts};
use super::chart::{Axis, Chart, Series, SeriesKind};

/// Every multi-run chart the runs have data for, by name.
pub fn charts(runs: &[RunArtifacts]) -> Vec<(String, Option<Chart>)> {
    let mut out = vec![
        ("ttft_vs_throughput".into(), ttft_vs_throughput(runs)),
        (
            "pareto_curve_throughput_vs_interactivity".into(),
            pareto(runs, true),
        ),
        (
            "pareto_curve_throughput_vs_latency".into(),
            pareto(runs, false),
        ),
        ("latency_vs_load".into(), latency_vs_load(runs)),
        ("latency_throughput_uncertainty".into(), uncertainty(runs)),
    ];
    let line = subtitle(runs);
    for chart in out.iter_mut().filter_map(|(_, c)| c.as_mut()) {
        chart.subtitle = line.clone();
    }
    out
}

/// E.g. `3 runs: 36 requests, 6 failed`.
pub fn subtitle(runs: &[RunArtifacts]) -> String {
    let requests = Requests::sum(runs.iter().filter_map(RunArtifacts::requests));
    format!("{} runs: {}", runs.len(), requests.text())
}

/// A run's label in the plots: its load (`c=4`, `rate=5`), else its directory.
fn point_label(run: &RunArtifacts) -> String {
    match &run.load {
        Some(l) if l.name == "concurrency" => format!("c={}", l.value),
        Some(l) => format!("rate={}", l.value),
        None => run.label.clone(),
    }
}

/// Each run's label: its load, or its directory's name when every run had the same load
/// (the trials of one configuration).
fn labels(runs: &[RunArtifacts]) -> Vec<String> {
    let same_load = runs.windows(2).all(|w| w[0].load == w[1].load);
    runs.iter()
        .map(|r| {
            if same_load {
                let last = r.label.rsplit('/').next().unwrap_or(&r.label);
                last.to_string()
            } else {
                point_label(r)
            }
        })
        .collect()
}

/// One figure per run: (x, y), the run's label, the y confidence interval.
#[derive(Default)]
struct Points {
    pts: Vec<(f64, f64)>,
    labels: Vec<String>,
    errs: Vec<(f64, f64)>,
}

/// The points of each run having both figures.
fn points(runs: &[RunArtifacts], x: (&str, &str), y: (&str, &str)) -> Points {
    let mut pts = Vec::new();
    let mut labels = Vec::new();
    let mut errs = Vec::new();
    for (r, label) in runs.iter().zip(self::labels(runs)) {
        let (Some(xv), Some(yv)) = (r.stat(x.0, x.1), r.stat(y.0, y.1)) else {
            continue;
        };
        pts.push((xv, yv));
        labels.push(label);
        errs.push(nonnegative(r.ci(y.0, y.1).unwrap_or((yv, yv))));
    }
    Points { pts, labels, errs }
}

/// Latencies and throughputs are never negative: a t interval over few trials can reach
/// below zero, the bar stops at it.
fn nonnegative((lo, hi): (f64, f64)) -> (f64, f64) {
    (lo.max(0.0), hi)
}

fn series(name: &str, kind: SeriesKind, Points { pts, labels, errs }: Points) -> Series {
    let mut s = Series::new(name, kind, pts);
    s.labels = labels;
    // Error bars only when some run has a confidence interval.
    if errs.iter().any(|(lo, hi)| hi > lo) {
        s.y_err = errs;
    }
    s
}

fn ttft_vs_throughput(runs: &[RunArtifacts]) -> Option<Chart> {
    let y = ("output_token_throughput", "avg");
    let p50 = points(runs, ("time_to_first_token", "p50"), y);
    let p99 = points(runs, ("time_to_first_token", "p99"), y);
    if p50.pts.is_empty() {
        return None;
    }
    Some(Chart {
        name: "ttft_vs_throughput".into(),
        title: "Output token throughput vs time to first token".into(),
        description: "How much TTFT (median and tail) each step of throughput costs, point by point along the load.".into(),
        x: Axis::linear("Time to first token (ms)", true),
        y: Axis::linear("Output token throughput (tokens/s)", true),
        y2: None,
        series: vec![
            series("TTFT p50", SeriesKind::Line, p50),
            series("TTFT p99", SeriesKind::Line, p99),
        ],
        marks: Vec::new(),
        subtitle: String::new(),
    })
}

/// The points no other point beats on both axes (higher y, and lower x for latency or
/// higher x for per-user speed), in x order.
pub fn frontier(pts: &[(f64, f64)], higher_x_better: bool) -> Vec<(f64, f64)> {
    let better_x = |a: f64, b: f64| if higher_x_better { a >= b } else { a <= b };
    let mut out: Vec<(f64, f64)> = pts
        .iter()
        .copied()
        .filter(|&(x, y)| {
            !pts.iter()
                .any(|&(ox, oy)| better_x(ox, x) && oy >= y && (ox != x || oy != y))
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

fn pareto(runs: &[RunArtifacts], interactivity: bool) -> Option<Chart> {
    let y = ("output_token_throughput", "avg");
    let (x, name, xlabel, title, description) = if interactivity {
        (
            ("output_token_throughput_per_user", "avg"),
            "pareto_curve_throughput_vs_interactivity",
            "Output tokens/s per user (interactivity)",
            "Total throughput vs per-user speed (Pareto frontier)",
            "The trade-off between serving many users (total tokens/s) and serving each fast (tokens/s per user); points on the line are the best choices.",
        )
    } else {
        (
            ("request_latency", "avg"),
            "pareto_curve_throughput_vs_latency",
            "Request latency, mean (ms)",
            "Total throughput vs request latency (Pareto frontier)",
            "Which loads give the most throughput for their latency; points off the line are beaten by another load.",
        )
    };
    let all = points(runs, x, y);
    if all.pts.is_empty() {
        return None;
    }
    let front = frontier(&all.pts, interactivity);
    Some(Chart {
        name: name.into(),
        title: title.into(),
        description: description.into(),
        x: Axis::linear(xlabel, true),
        y: Axis::linear("Output token throughput (tokens/s)", true),
        y2: None,
        series: vec![
            series("Runs", SeriesKind::Scatter, all),
            Series::new("Pareto frontier", SeriesKind::Line, front),
        ],
        marks: Vec::new(),
        subtitle: String::new(),
    })
}

fn latency_vs_load(runs: &[RunArtifacts]) -> Option<Chart> {
    let with_load: Vec<&RunArtifacts> = runs.iter().filter(|r| r.load.is_some()).collect();
    let load_name = with_load.first()?.load.as_ref()?.name.clone();
    let mut out = Vec::new();
    for (tag, stat, name) in [
        ("time_to_first_token", "p50", "TTFT p50"),
        ("time_to_first_token", "p99", "TTFT p99"),
        ("request_latency", "p50", "Request latency p50"),
        ("request_latency", "p99", "Request latency p99"),
    ] {
        let mut pts = Vec::new();
        let mut errs = Vec::new();
        for r in with_load
            .iter()
            .filter(|r| r.load.as_ref().unwrap().name == load_name)
        {
            let Some(v) = r.stat(tag, stat) else { continue };
            pts.push((r.load.as_ref().unwrap().value, v));
            errs.push(nonnegative(r.ci(tag, stat).unwrap_or((v, v))));
        }
        if pts.is_empty() {
            continue;
        }
        let labels = Vec::new();
        out.push(series(name, SeriesKind::Line, Points { pts, labels, errs }));
    }
    if out.is_empty() {
        return None;
    }
    let xlabel = if load_name == "concurrency" {
        "Concurrency (requests in flight)"
    } else {
        "Request rate (requests/s)"
    };
    Some(Chart {
        name: "latency_vs_load".into(),
        title: "Latency percentiles vs load".into(),
        description: "How the median and the tail of TTFT and request latency grow with the load; bars are the confidence interval across repeated runs.".into(),
        x: Axis {
            integer: load_name == "concurrency",
            ..Axis::linear(xlabel, true)
        },
        y: Axis::linear("Latency (ms)", true),
        y2: None,
        series: out,
        marks: Vec::new(),
        subtitle: String::new(),
    })
}

fn uncertainty(runs: &[RunArtifacts]) -> Option<Chart> {
    if !runs.iter().any(|r| r.aggregate.is_some()) {
        return None;
    }
    let pts = points(
        runs,
        ("request_latency", "avg"),
        ("output_token_throughput", "avg"),
    );
    if pts.pts.is_empty() {
        return None;
    }
    Some(Chart {
        name: "latency_throughput_uncertainty".into(),
        title: "Throughput vs latency across repeated runs (95% confidence)".into(),
        description: "How repeatable each load's throughput is: the bars are the confidence interval of the mean across trials.".into(),
        x: Axis::linear("Request latency, mean (ms)", true),
        y: Axis::linear("Output token throughput (tokens/s)", true),
        y2: None,
        series: vec![series("Mean across trials", SeriesKind::Scatter, pts)],
        marks: Vec::new(),
        subtitle: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontier_drops_beaten_points() {
        let pts = [(10.0, 100.0), (20.0, 90.0), (30.0, 200.0), (40.0, 150.0)];
        // Lower latency is better: (20, 90) is beaten by (10, 100); (40, 150) by (30, 200).
        assert_eq!(frontier(&pts, false), vec![(10.0, 100.0), (30.0, 200.0)]);
        // Higher per-user speed is better: (40, 150) beats (20, 90) and (10, 100).
        assert_eq!(frontier(&pts, true), vec![(30.0, 200.0), (40.0, 150.0)]);
    }
}
