//! The grid recipes (prefill-ttft-curve, decode-itl-curve, pareto-sweep), the goodput
//! search and `--variant` scenario sweeps, end to end: the real binary against
//! `aiperf mock-server` with its load knobs, results read back from the artifact files.

use crate::common;

use std::path::Path;

use common::{MockChild, read_json, run_profile, stderr_text};
use serde_json::Value;

fn profile_ok(args: &[&str]) -> String {
    let out = run_profile(args);
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        stderr_text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn base_args<'a>(url: &'a str, dir: &'a Path) -> Vec<&'a str> {
    vec![
        "-m",
        "m",
        "--url",
        url,
        "--streaming",
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]
}

/// A server whose TTFT is 10 ms + 0.05 ms per prompt token: the fitted line's slope is the
/// server's prefill cost.
#[test]
fn prefill_ttft_curve_fits_the_servers_prefill_cost() {
    let mock = MockChild::spawn(&[
        "--ttft",
        "10",
        "--ttft-per-prompt-token",
        "0.05",
        "--itl",
        "1",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("prefill");
    let mut args = base_args(&mock.url, &base);
    args.extend([
        "--search-recipe",
        "prefill-ttft-curve",
        "--isl-min",
        "100",
        "--isl-max",
        "1600",
        "--isl-steps",
        "3",
        "--request-count",
        "4",
        "--osl",
        "2",
    ]);
    let stdout = profile_ok(&args);
    for isl in [100, 400, 1600] {
        let dir = base.join(format!("isl_{isl}__concurrency_1"));
        let rc = read_json(&dir.join("run_config.json"));
        assert_eq!(rc["variation"]["values"]["datasets.main.prompts.isl"], isl);
        assert_eq!(rc["variation"]["values"]["phases.profiling.concurrency"], 1);
        let summary = read_json(&dir.join("profile_export_aiperf.json"));
        assert_eq!(f(&summary["input_sequence_length"]["avg"]), isl as f64);
    }
    let curve = read_json(&base.join("sweep_aggregate/prefill_curve.json"));
    assert_eq!(curve["fit_form"], "linear", "{curve:#}");
    assert_eq!(curve["swept_param"], "datasets.main.prompts.isl");
    assert_eq!(curve["swept_metric"], "time_to_first_token");
    assert_eq!(curve["below_floor"], false);
    let isls: Vec<f64> = curve["raw_points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| f(&p["isl"]))
        .collect();
    assert_eq!(isls, [100.0, 400.0, 1600.0]);
    let slope = f(&curve["coefficients"][0]);
    let intercept = f(&curve["coefficients"][1]);
    assert!((0.045..0.065).contains(&slope), "slope {slope}: {curve:#}");
    assert!((9.0..40.0).contains(&intercept), "intercept {intercept}");
    assert!(f(&curve["r_squared"]) > 0.95, "{curve:#}");
    // The fit passes through the measured points.
    for p in curve["raw_points"].as_array().unwrap() {
        let predicted = slope * f(&p["isl"]) + intercept;
        assert!(
            (predicted - f(&p["ttft_ms"])).abs() < 8.0,
            "{p} vs {predicted}"
        );
    }
    assert!(
        stdout.contains("Prefill TTFT curve over 3 ISLs"),
        "{stdout}"
    );
}

/// ITL grows 1 ms per other request being served: the surface holds every (concurrency,
/// OSL) cell and the fitted plane's concurrency slope is about 1 ms.
#[test]
fn decode_itl_curve_measures_the_surface() {
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "3", "--itl-per-running", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("decode");
    let mut args = base_args(&mock.url, &base);
    args.extend([
        "--search-recipe",
        "decode-itl-curve",
        "--concurrency-min",
        "1",
        "--concurrency-max",
        "4",
        "--concurrency-steps",
        "2",
        "--osl-min",
        "8",
        "--osl-max",
        "32",
        "--osl-steps",
        "2",
        "--request-count",
        "8",
        "--isl",
        "16",
    ]);
    let stdout = profile_ok(&args);
    for dir in [
        "osl_8__concurrency_1",
        "osl_8__concurrency_4",
        "osl_32__concurrency_1",
        "osl_32__concurrency_4",
    ] {
        assert!(
            base.join(dir).join("profile_export_aiperf.json").exists(),
            "{dir}"
        );
    }
    let s = read_json(&base.join("sweep_aggregate/decode_itl_surface.json"));
    assert_eq!(s["surface_fit_failed"], false, "{s:#}");
    assert_eq!(
        s["surface"]["concurrency_axis"],
        serde_json::json!([1.0, 4.0])
    );
    assert_eq!(s["surface"]["osl_axis"], serde_json::json!([8.0, 32.0]));
    assert_eq!(
        s["swept_params"],
        serde_json::json!(["phases.profiling.concurrency", "datasets.main.prompts.osl"])
    );
    let grid = &s["surface"]["itl_grid"];
    for o in 0..2 {
        let (one, four) = (f(&grid[0][o]), f(&grid[1][o]));
        assert!((2.5..6.0).contains(&one), "ITL at 1: {one}");
        // Three others in flight add up to 3 ms.
        assert!(four > one + 1.5, "ITL at 4 {four} vs 1 {one}");
    }
    let slope = f(&s["linear_fit"]["concurrency_coef"]);
    assert!((0.5..1.3).contains(&slope), "{s:#}");
    assert!(
        stdout.contains("Decode ITL surface: 2 concurrencies x 2 OSLs"),
        "{stdout}"
    );
}

/// Two shapes at two concurrencies: four points named by their values, and a frontier
/// that holds exactly the points no other point dominates.
#[test]
fn pareto_sweep_marks_the_frontier() {
    let mock = MockChild::spawn(&["--max-concurrency", "2", "--ttft", "20", "--itl", "2"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("pareto");
    let mut args = base_args(&mock.url, &base);
    args.extend([
        "--search-recipe",
        "pareto-sweep",
        "--isl-osl-pairs",
        "32/8, 64/16",
        "--concurrency",
        "1,4",
        "--request-count",
        "6",
    ]);
    let stdout = profile_ok(&args);
    let p = read_json(&base.join("sweep_aggregate/pareto_sweep.json"));
    assert_eq!(
        (&p["x_metric"], &p["x_stat"], &p["y_metric"], &p["y_stat"]),
        (
            &Value::from("time_to_first_token"),
            &Value::from("p95"),
            &Value::from("output_token_throughput"),
            &Value::from("avg")
        )
    );
    let cells = p["cells"].as_array().unwrap();
    let shapes: Vec<(u64, u64, u64)> = cells
        .iter()
        .map(|c| {
            (
                c["isl"].as_u64().unwrap(),
                c["osl"].as_u64().unwrap(),
                c["concurrency"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(shapes, [(32, 8, 1), (32, 8, 4), (64, 16, 1), (64, 16, 4)]);
    for (i, c) in cells.iter().enumerate() {
        let dominated = cells.iter().enumerate().any(|(j, o)| {
            j != i
                && f(&o["x"]) <= f(&c["x"])
                && f(&o["y"]) >= f(&c["y"])
                && (f(&o["x"]) < f(&c["x"]) || f(&o["y"]) > f(&c["y"]))
        });
        assert_eq!(c["pareto_optimal"], !dominated, "{p:#}");
        // x is the point's TTFT p95, y its output token throughput.
        let (isl, osl, conc) = shapes[i];
        let summary = read_json(&base.join(format!(
            "isl_{isl}__osl_{osl}__concurrency_{conc}/profile_export_aiperf.json"
        )));
        assert_eq!(f(&c["x"]), f(&summary["time_to_first_token"]["p95"]));
        assert_eq!(f(&c["y"]), f(&summary["output_token_throughput"]["avg"]));
    }
    assert!(cells.iter().any(|c| c["pareto_optimal"] == true));
    let agg = read_json(
        &base.join("aggregate/isl_32__osl_8__concurrency_4/profile_export_aiperf_aggregate.json"),
    );
    assert_eq!(agg["metadata"]["variation_label"], "shape_32_8_c4");
    assert!(stdout.contains("Pareto frontier"), "{stdout}");
}

/// A server with 2 slots and 60 ms TTFT: past 2 in flight requests queue a whole service
/// time, so fewer than 80% stay within the 100 ms TTFT SLO. The most goodput is at 2.
#[test]
fn max_goodput_under_slo_stops_where_attainment_breaks() {
    let mock = MockChild::spawn(&["--max-concurrency", "2", "--ttft", "60", "--itl", "2"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("goodput");
    let mut args = base_args(&mock.url, &base);
    args.extend([
        "--search-recipe",
        "max-goodput-under-slo",
        "--ttft-sla-ms",
        "100",
        "--tpot-sla-ms",
        "50",
        "--e2e-sla-ms",
        "2000",
        "--slo-attainment-fraction",
        "0.8",
        "--concurrency-max",
        "8",
        "--request-count",
        "8",
        "--osl",
        "4",
        "--isl",
        "16",
    ]);
    let stdout = profile_ok(&args);
    let h = read_json(&base.join("search_history.json"));
    assert_eq!(h["recipe"], "max-goodput-under-slo");
    assert_eq!(h["slo_attainment_fraction"], 0.8);
    assert_eq!(h["slos"]["time_to_first_token"], 100.0);
    assert_eq!(h["best_concurrency"], 2, "{h:#}");
    assert_eq!(h["max_feasible_concurrency"], 2, "{h:#}");
    let points = h["points"].as_array().unwrap();
    let tried: Vec<u64> = points
        .iter()
        .map(|p| p["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(&tried[..3], [1, 2, 4], "{tried:?}");
    for p in points {
        let frac = f(&p["values"]["good_request_fraction_avg"]);
        assert_eq!(p["feasible"], frac >= 0.8, "{p}");
    }
    // Each run counted its good requests against the recipe's SLOs.
    let run =
        read_json(&base.join("search_iter_0001/profile_runs/run_0001/profile_export_aiperf.json"));
    let good = f(&run["good_request_count"]["avg"]);
    assert!(good >= 7.0, "{run:#}");
    assert_eq!(f(&run["good_request_fraction"]["avg"]), good / 8.0);
    assert!((f(&run["goodput"]["avg"]) - f(&h["best_goodput"])).abs() < 1e-9);
    assert!(stdout.contains("requests/sec at concurrency 2"), "{stdout}");
}

/// Two named scenarios and one unnamed: one run each, in directories named after them,
/// with the variant's flags applied.
#[test]
fn variants_run_one_scenario_each() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("variants");
    profile_ok(&[
        "-m",
        "m",
        "--mock-server",
        "--tokenizer",
        "builtin",
        "--request-count",
        "3",
        "--isl",
        "40",
        "--variant",
        "small: isl=16, concurrency=1",
        "--sweep-variant",
        "large:isl=64,concurrency=2,osl=3",
        "--variant",
        "request_count=5",
        "--artifact-dir",
        base.to_str().unwrap(),
    ]);
    let run = |name: &str| read_json(&base.join(name).join("profile_export_aiperf.json"));
    assert_eq!(f(&run("small")["input_sequence_length"]["avg"]), 16.0);
    assert_eq!(f(&run("small")["request_count"]["avg"]), 3.0);
    assert_eq!(f(&run("large")["input_sequence_length"]["avg"]), 64.0);
    assert_eq!(f(&run("large")["output_sequence_length"]["avg"]), 3.0);
    assert_eq!(f(&run("v2")["request_count"]["avg"]), 5.0);
    assert_eq!(f(&run("v2")["input_sequence_length"]["avg"]), 40.0);
    let rc = read_json(&base.join("large/run_config.json"));
    assert_eq!(rc["variation"]["label"], "large");
    assert_eq!(rc["variation"]["values"]["phases.profiling.concurrency"], 2);
    let agg = read_json(&base.join("aggregate/small/profile_export_aiperf_aggregate.json"));
    assert_eq!(agg["metadata"]["variation_label"], "small");
    let sweep = read_json(&base.join("sweep_aggregate/profile_export_aiperf_sweep.json"));
    assert_eq!(sweep["num_successful_runs"], 3);
}

#[test]
fn bad_recipe_and_variant_command_lines_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["--variant", "isl=8"], "two or more"),
        (
            &[
                "--variant",
                "isl=8",
                "--variant",
                "isl=9",
                "--concurrency",
                "1,2",
            ],
            "list-valued",
        ),
        (
            &[
                "--variant",
                "isl=8",
                "--variant",
                "isl=9",
                "--search-recipe",
                "concurrency-ramp",
            ],
            "--search-recipe",
        ),
        (
            &["--variant", "a=1", "--variant", "isl=9"],
            "unknown key 'a'",
        ),
        (
            &["--isl-min", "64"],
            "belongs to --search-recipe prefill-ttft-curve",
        ),
        (
            &["--search-recipe", "prefill-ttft-curve"],
            "add --streaming",
        ),
        (
            &["--search-recipe", "pareto-sweep", "--streaming"],
            "needs --isl-osl-pairs",
        ),
        (
            &[
                "--search-recipe",
                "decode-itl-curve",
                "--streaming",
                "--ttft-sla-ms",
                "9",
            ],
            "--ttft-sla-ms is not read by --search-recipe decode-itl-curve",
        ),
        (
            &[
                "--search-recipe",
                "max-goodput-under-slo",
                "--streaming",
                "--ttft-sla-ms",
                "9",
            ],
            "needs --tpot-sla-ms, --e2e-sla-ms",
        ),
        (
            &["--slo-attainment-fraction", "0.9"],
            "max-goodput-under-slo",
        ),
    ];
    for (extra, want) in cases {
        common::assert_refused(extra, want);
    }
}

/// Prompts past the server's context length fail: with one point left there is no curve,
/// and `post_process_errors.json` says why where the curve would be.
#[test]
fn a_curve_without_enough_points_leaves_post_process_errors() {
    let mock = MockChild::spawn(&["--fast", "--max-model-len", "300"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("short");
    let mut args = base_args(&mock.url, &base);
    args.extend([
        "--search-recipe",
        "prefill-ttft-curve",
        "--isl-min",
        "100",
        "--isl-max",
        "1600",
        "--isl-steps",
        "3",
        "--request-count",
        "2",
        "--osl",
        "2",
    ]);
    let out = run_profile(&args);
    assert_ne!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let dir = base.join("sweep_aggregate");
    assert!(!dir.join("prefill_curve.json").exists());
    let e = read_json(&dir.join("post_process_errors.json"));
    assert_eq!(e["handler"], "ttft_curve_fit");
    assert_eq!(e["output_filename"], "prefill_curve.json");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("need >= 2 sweep points"),
        "{e:#}"
    );
    // The point that fit the context ran normally.
    let ok = read_json(&base.join("isl_100__concurrency_1/profile_export_aiperf.json"));
    assert_eq!(f(&ok["request_count"]["avg"]), 2.0);
}
