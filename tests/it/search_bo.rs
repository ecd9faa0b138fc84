//! The adaptive search (Bayesian optimisation) end to end: the real binary against a mock
//! whose latency rises with load, the chosen point and `search_history.json` read back.

use crate::common;

use common::{MockChild, read_json, run_profile, stderr_text};
use serde_json::Value;

/// A mock with 4 slots: throughput grows with concurrency up to 4 and stays flat beyond;
/// past 4 in flight requests queue for a whole service time (~300 ms), so TTFT p95 breaks
/// a 200 ms SLA. The throughput-best concurrency under the SLA is 4.
fn four_slot_mock() -> MockChild {
    MockChild::spawn(&["--max-concurrency", "4", "--ttft", "100", "--itl", "40"])
}

const WORKLOAD: [&str; 10] = [
    "-m",
    "m",
    "--streaming",
    "--tokenizer",
    "builtin",
    "--osl",
    "5",
    "--isl",
    "20",
    "--ui-type",
];

fn search(mock: &MockChild, base: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&str> = WORKLOAD.to_vec();
    args.extend(["none", "--url", &mock.url, "--request-count", "12"]);
    args.extend(["--artifact-dir", base.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        stderr_text(&out)
    );
    out
}

fn concurrency(v: &Value) -> u64 {
    v["phases.profiling.concurrency"]
        .as_u64()
        .unwrap_or_else(|| panic!("no concurrency in {v}"))
}

#[test]
fn the_ttft_recipe_finds_the_throughput_peak_under_the_sla() {
    let mock = four_slot_mock();
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("bo");
    let out = search(
        &mock,
        &base,
        &[
            "--search-recipe",
            "max-throughput-ttft-sla",
            "--ttft-sla-ms",
            "200",
            "--concurrency-max",
            "8",
            "--search-max-iterations",
            "9",
            "--search-initial-points",
            "3",
            "--search-random-seed",
            "7",
        ],
    );
    let h = read_json(&base.join("search_history.json"));
    assert_eq!(h["recipe"], "max-throughput-ttft-sla");
    assert_eq!(h["config"]["planner"], "bayesian");
    assert_eq!(h["config"]["optuna_sampler"], "tpe");
    assert_eq!(
        h["config"]["objectives"][0]["metric"],
        "output_token_throughput"
    );
    assert_eq!(h["config"]["sla_filters"][0]["threshold"], 200.0);
    assert_eq!(h["config"]["search_space"][0]["hi"], 8.0);
    let iterations = h["iterations"].as_array().unwrap();
    assert!((4..=9).contains(&iterations.len()), "{h:#}");
    let reason = h["convergence_reason"].as_str().unwrap();
    assert!(
        ["max_iterations", "improvement_patience", "plateau_cv"].contains(&reason),
        "{reason}"
    );
    // Every point is within the box; each has its own iteration directory.
    for (i, it) in iterations.iter().enumerate() {
        assert_eq!(it["iteration_idx"], i);
        let c = concurrency(&it["variation_values"]);
        assert!((1..=8).contains(&c), "{c}");
        assert!(
            base.join(format!(
                "search_iter_{i:04}/profile_runs/run_0001/profile_export_aiperf.json"
            ))
            .exists()
        );
        // Feasibility follows the mock: 4 slots hold the 200 ms SLA, 5 and more do not.
        assert_eq!(it["feasible"], c <= 4, "concurrency {c}: {it}");
    }
    let best = &h["best_trials"][0];
    assert_eq!(concurrency(&best["variation_values"]), 4, "{h:#}");
    assert_eq!(best["feasible"], true);
    assert_eq!(h["boundary_summary"]["feasible_max"]["value"], 4, "{h:#}");
    let breach = &h["boundary_summary"]["infeasible_min"];
    if !breach.is_null() {
        assert_eq!(breach["first_breach"]["metric_tag"], "time_to_first_token");
        assert!(breach["first_breach"]["observed"].as_f64().unwrap() > 200.0);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Best point: concurrency=4"), "{stdout}");
    assert!(
        stderr_text(&out).contains("falling back to the TPE sampler"),
        "{}",
        stderr_text(&out)
    );
    // Per point a confidence aggregate named by its values, as AIPerf's adaptive layout.
    assert!(
        base.join("aggregate/concurrency_4/profile_export_aiperf_aggregate.json")
            .exists()
    );
    // The sweep aggregate holds every point measured.
    let sweep = read_json(&base.join("sweep_aggregate/profile_export_aiperf_sweep.json"));
    assert_eq!(
        sweep["per_combination_metrics"].as_array().unwrap().len(),
        iterations.len()
    );
}

/// `--search-space` with the Gaussian process: minimise TTFT p95 (pooled over the
/// per-request records) over concurrency; the lowest is at the unqueued concurrencies (1-4).
#[test]
fn a_search_space_with_the_gp_sampler_minimises_a_latency() {
    let mock = four_slot_mock();
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("gp");
    let out = search(
        &mock,
        &base,
        &[
            "--search-space",
            "concurrency:1,10:int",
            "--search-metric",
            "time_to_first_token",
            "--search-stat",
            "p95",
            "--search-direction",
            "minimize",
            "--search-max-iterations",
            "6",
            "--search-initial-points",
            "3",
            "--search-planner",
            "optuna",
            "--optuna-sampler",
            "gp",
            "--search-random-seed",
            "1",
            "--bo-constraint-mode",
            "penalty",
            "--search-percentile-pooling",
            "pooled",
        ],
    );
    let h = read_json(&base.join("search_history.json"));
    assert_eq!(h["config"]["optuna_sampler"], "gp");
    assert_eq!(h["config"]["objectives"][0]["direction"], "MINIMIZE");
    assert_eq!(h["iterations"].as_array().unwrap().len(), 6);
    assert_eq!(h["convergence_reason"], "max_iterations");
    let best = &h["best_trials"][0];
    assert!(concurrency(&best["variation_values"]) <= 4, "{h:#}");
    assert!(
        best["objective_values"][0].as_f64().unwrap() < 200.0,
        "{h:#}"
    );
    // No SLA: every point is feasible.
    assert_eq!(best["feasible_count"], 6);
    // With one run per point the pooled p95 is the run's own p95 (from its records).
    let idx = best["iteration_idx"].as_u64().unwrap();
    let run = read_json(&base.join(format!(
        "search_iter_{idx:04}/profile_runs/run_0001/profile_export_aiperf.json"
    )));
    let p95 = run["time_to_first_token"]["p95"].as_f64().unwrap();
    let pooled = best["objective_values"][0].as_f64().unwrap();
    assert!((pooled - p95).abs() <= 1e-6 * p95, "{pooled} vs {p95}");
    let err = stderr_text(&out);
    assert!(
        err.contains("--bo-constraint-mode penalty is deprecated and ignored"),
        "{err}"
    );
    assert!(!err.contains("falling back"), "{err}");
}

#[test]
fn search_flags_this_build_cannot_honour_are_refused() {
    let space = [
        "--search-space",
        "concurrency:1,8:int",
        "--search-metric",
        "output_token_throughput",
        "--search-direction",
        "maximize",
        "--search-max-iterations",
        "8",
    ];
    let cases: &[(&[&str], &str)] = &[
        (&["--optuna-sampler", "botorch"], "--optuna-sampler gp"),
        (
            &["--search-planner", "optuna", "--optuna-terminator", "emmr"],
            "use none",
        ),
        (
            &["--optuna-acquisition", "qlognei"],
            "not supported by this build",
        ),
        (
            &[
                "--search-sla-tier",
                "a:x:p95:lt:1",
                "--search-sla-tier",
                "b:x:p95:lt:2",
            ],
            "--search-sla-tier",
        ),
        (&["--search-space", "concurrency:0,4:int"], "lower end"),
    ];
    for (extra, want) in cases {
        let mut args = vec![
            "-m",
            "m",
            "--mock-server",
            "--artifact-dir",
            "/nonexistent/never",
        ];
        args.extend_from_slice(&space);
        args.extend_from_slice(extra);
        if extra[0] == "--search-space" {
            args.drain(5..7);
        }
        let out = run_profile(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{extra:?}: {}",
            stderr_text(&out)
        );
        assert!(
            stderr_text(&out).contains(want),
            "{extra:?}: {}",
            stderr_text(&out)
        );
    }
    for (extra, want) in [
        (
            &[
                "--search-recipe",
                "max-concurrency-under-sla",
                "--e2e-sla-ms",
                "500",
                "--search-style",
                "smooth_isotonic",
            ][..],
            "smooth_isotonic",
        ),
        (
            &[
                "--search-recipe",
                "max-throughput-ttft-sla",
                "--ttft-sla-ms",
                "200",
            ][..],
            "--streaming",
        ),
        (
            &["--search-recipe", "max-throughput-itl-sla", "--streaming"][..],
            "needs --itl-sla-ms",
        ),
        (
            &[
                "--search-recipe",
                "max-throughput-ttft-sla",
                "--streaming",
                "--ttft-sla-ms",
                "200",
                "--search-metric",
                "x",
            ][..],
            "drop --search-metric",
        ),
    ] {
        common::assert_refused(extra, want);
    }
}
