//! Sweeps (list-valued flags), repeated runs and the SLA search, end to end: the real binary
//! against `aiperf mock-server`, results read back from the artifact files.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, MockChild, read_json, run_profile, stderr_text};
use serde_json::Value;

fn profile_ok(args: &[&str]) -> std::process::Output {
    let out = run_profile(args);
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        stderr_text(&out)
    );
    out
}

/// The cell of `per_combination_metrics` whose parameter `name` is `value`.
fn cell<'a>(sweep: &'a Value, name: &str, value: u64) -> &'a Value {
    sweep["per_combination_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["parameters"][name] == value)
        .unwrap_or_else(|| panic!("no cell {name}={value} in {sweep:#}"))
}

fn dirs_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_type()
                .ok()?
                .is_dir()
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// The knee: a mock that serves 2 requests at a time. Past concurrency 2 throughput stays
/// flat and TTFT grows with the queue; the sweep's aggregate shows both.
#[test]
fn a_concurrency_sweep_finds_the_knee_of_a_server_with_two_slots() {
    let mock = MockChild::spawn(&["--max-concurrency", "2", "--ttft", "60", "--itl", "5"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("sweep");
    let out = profile_ok(&[
        "-m",
        "m",
        "--url",
        &mock.url,
        "--streaming",
        "--tokenizer",
        "builtin",
        "--concurrency",
        "1,2,4,8",
        "--request-count",
        "24",
        "--osl",
        "4",
        "--isl",
        "20",
        "--artifact-dir",
        base.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("All runs complete: 4/4 successful"),
        "{stdout}"
    );

    // Each point has its normal artifacts and run_config.json; seeds 42, 43, ... (AIPerf's
    // consistent seed plus the point index).
    for (i, c) in [1, 2, 4, 8].iter().enumerate() {
        let dir = base.join(format!("concurrency_{c}"));
        let summary = read_json(&dir.join("profile_export_aiperf.json"));
        assert_eq!(summary["request_count"]["avg"], 24.0, "{c}");
        let rc = read_json(&dir.join("run_config.json"));
        assert_eq!(rc["seed"], 42 + i as u64);
        assert_eq!(
            rc["variation"]["values"]["phases.profiling.concurrency"],
            *c
        );
        assert!(dir.join("logs/aiperf.log").exists());
        let agg = read_json(&base.join(format!(
            "aggregate/concurrency_{c}/profile_export_aiperf_aggregate.json"
        )));
        assert_eq!(
            agg["metadata"]["variation_label"],
            format!("phases.profiling.concurrency={c}")
        );
    }

    let sweep = read_json(&base.join("sweep_aggregate/profile_export_aiperf_sweep.json"));
    assert_eq!(sweep["aggregation_type"], "sweep");
    assert_eq!(sweep["num_successful_runs"], 4);
    let rps = |c| {
        cell(&sweep, "concurrency", c)["metrics"]["request_throughput"]["avg"]
            .as_f64()
            .unwrap()
    };
    let ttft = |c| {
        cell(&sweep, "concurrency", c)["metrics"]["time_to_first_token"]["p50"]
            .as_f64()
            .unwrap()
    };
    // Below the knee throughput grows with concurrency...
    assert!(rps(2) > 1.5 * rps(1), "rps 1 {} 2 {}", rps(1), rps(2));
    // ...past it, it stays flat and requests queue.
    assert!(rps(8) < 1.35 * rps(2), "rps 2 {} 8 {}", rps(2), rps(8));
    assert!(ttft(8) > 2.0 * ttft(2), "ttft 2 {} 8 {}", ttft(2), ttft(8));
    assert!(
        ttft(2) < 1.5 * ttft(1) + 20.0,
        "ttft 1 {} 2 {}",
        ttft(1),
        ttft(2)
    );
    // The sweep table: one row per point.
    let table_rows = stdout
        .lines()
        .filter(|l| l.contains("│") || l.contains('|'))
        .count();
    assert!(table_rows >= 4, "{stdout}");
    assert!(
        base.join("sweep_aggregate/profile_export_aiperf_sweep.csv")
            .exists()
    );
}

/// Three runs of one point: `profile_runs/run_000N`, and an aggregate whose interval holds
/// each run's mean.
#[test]
fn repeated_runs_report_a_confidence_interval_holding_every_run() {
    let mock = MockChild::spawn(&["--ttft", "15", "--itl", "2", "--ttft-jitter-cv", "0.3"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("rep");
    let out = profile_ok(&[
        "-m",
        "m",
        "--url",
        &mock.url,
        "--streaming",
        "--tokenizer",
        "builtin",
        "--concurrency",
        "2",
        "--request-count",
        "12",
        "--osl",
        "3",
        "--isl",
        "20",
        "--warmup-request-count",
        "2",
        "--num-profile-runs",
        "3",
        "--artifact-dir",
        base.to_str().unwrap(),
    ]);
    assert_eq!(
        dirs_in(&base.join("profile_runs")),
        ["run_0001", "run_0002", "run_0003"]
    );
    let runs: Vec<Value> = (1..=3)
        .map(|i| {
            read_json(&base.join(format!(
                "profile_runs/run_{i:04}/profile_export_aiperf.json"
            )))
        })
        .collect();
    let agg = read_json(&base.join("aggregate/profile_export_aiperf_aggregate.json"));
    assert_eq!(agg["metadata"]["aggregation_type"], "confidence");
    assert_eq!(agg["metadata"]["num_profile_runs"], 3);
    assert_eq!(agg["metadata"]["num_successful_runs"], 3);
    assert_eq!(
        agg["metadata"]["run_labels"],
        serde_json::json!(["run_0001", "run_0002", "run_0003"])
    );
    for key in ["request_latency", "time_to_first_token"] {
        let m = &agg["metrics"][format!("{key}_avg")];
        let values: Vec<f64> = runs
            .iter()
            .map(|r| r[key]["avg"].as_f64().unwrap())
            .collect();
        let mean = values.iter().sum::<f64>() / 3.0;
        assert!(
            (m["mean"].as_f64().unwrap() - mean).abs() < 1e-6 * mean,
            "{key}: {m}"
        );
        for v in &values {
            assert!(
                m["ci_low"].as_f64().unwrap() <= *v && *v <= m["ci_high"].as_f64().unwrap(),
                "{key} {v} outside {m}"
            );
        }
        assert!((m["t_critical"].as_f64().unwrap() - 4.302652729911275).abs() < 1e-9);
    }
    // Only the first run warms up; all three draw the same dataset (seed 42).
    let warm = |i: usize| {
        read_json(&base.join(format!(
            "profile_runs/run_{i:04}/profile_export_aiperf.json"
        )))["input_config"]["phases"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!((warm(1), warm(2)), (2, 1));
    for i in 1..=3 {
        let rc = read_json(&base.join(format!("profile_runs/run_{i:04}/run_config.json")));
        assert_eq!(rc["seed"], 42);
        assert_eq!(rc["trial"], i);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("All runs complete: 3/3 successful"),
        "{stdout}"
    );
}

#[test]
fn zip_pairs_the_lists_and_grid_crosses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let common = [
        "-m",
        "m",
        "--mock-server",
        "--tokenizer",
        "builtin",
        "--request-count",
        "3",
    ];
    let zip = tmp.path().join("zip");
    let mut args = common.to_vec();
    args.extend([
        "--isl",
        "20,40",
        "--osl",
        "3,6",
        "--sweep-type",
        "zip",
        "--artifact-dir",
        zip.to_str().unwrap(),
    ]);
    profile_ok(&args);
    assert_eq!(
        dirs_in(&zip),
        [
            "aggregate",
            "mean_20__mean_3",
            "mean_40__mean_6",
            "sweep_aggregate"
        ]
    );
    let grid = tmp.path().join("grid");
    let mut args = common.to_vec();
    args.extend([
        "--isl",
        "20,40",
        "--osl",
        "3,6",
        "--artifact-dir",
        grid.to_str().unwrap(),
    ]);
    profile_ok(&args);
    assert_eq!(
        dirs_in(&grid),
        [
            "aggregate",
            "mean_20__mean_3",
            "mean_20__mean_6",
            "mean_40__mean_3",
            "mean_40__mean_6",
            "sweep_aggregate"
        ]
    );
    let sweep = read_json(&grid.join("sweep_aggregate/profile_export_aiperf_sweep.json"));
    assert_eq!(
        sweep["per_combination_metrics"].as_array().unwrap().len(),
        4
    );
    // ISL and OSL share the leaf `mean`: the full paths name them.
    let names: Vec<&str> = sweep["metadata"]["sweep_parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "datasets.main.prompts.isl.mean",
            "datasets.main.prompts.osl.mean"
        ]
    );
    // Uneven zip lists are refused before anything runs.
    let bad = run_profile(&[
        "-m",
        "m",
        "--mock-server",
        "--isl",
        "1,2,3",
        "--osl",
        "3,6",
        "--sweep-type",
        "zip",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr_text(&bad).contains("same length"),
        "{}",
        stderr_text(&bad)
    );
}

/// The middle point asks for more than the server's context: every request of it fails. It
/// is recorded as failed, the sweep goes on, and the aggregates cover the other two.
#[test]
fn a_failed_point_is_recorded_and_the_sweep_goes_on() {
    let mock = MockChild::spawn(&["--max-model-len", "500", "--ttft", "1", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("f");
    let out = profile_ok(&[
        "-m",
        "m",
        "--url",
        &mock.url,
        "--tokenizer",
        "builtin",
        "--request-count",
        "4",
        "--osl",
        "4",
        "--isl",
        "50,900,60",
        "--artifact-dir",
        base.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("All runs complete: 2/3 successful"),
        "{stdout}"
    );
    let sweep = read_json(&base.join("sweep_aggregate/profile_export_aiperf_sweep.json"));
    assert_eq!(sweep["num_profile_runs"], 3);
    assert_eq!(sweep["num_successful_runs"], 2);
    let failed = sweep["failed_runs"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["label"], "mean_900");
    assert!(
        failed[0]["error"].as_str().unwrap().contains("failed"),
        "{failed:?}"
    );
    assert!(base.join("aggregate/mean_50").exists() && base.join("aggregate/mean_60").exists());
    assert!(!base.join("aggregate/mean_900").exists());
    // The failed point still wrote its own artifacts (its error summary).
    assert!(base.join("mean_900/profile_export_aiperf.json").exists());
}

/// Ctrl-C during the cooldown after the second point: the sweep stops at once with both
/// finished points and the aggregate written, and exits 130.
#[test]
fn ctrl_c_stops_the_sweep_and_keeps_the_finished_points() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("int");
    let mut child = Command::new(BIN)
        .args([
            "profile",
            "-m",
            "m",
            "--mock-server",
            "--tokenizer",
            "builtin",
            "--request-count",
            "3",
            "--concurrency",
            "1,2,3",
            "--parameter-sweep-cooldown-seconds",
            "30",
            "--artifact-dir",
            base.to_str().unwrap(),
        ])
        .env("HF_HUB_OFFLINE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let second = base.join("concurrency_2/profile_export_aiperf.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !second.exists() {
        assert!(Instant::now() < deadline, "the second point never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Into the cooldown.
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(15),
        "took {:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    assert!(!base.join("concurrency_3").exists());
    let sweep = read_json(&base.join("sweep_aggregate/profile_export_aiperf_sweep.json"));
    assert_eq!(sweep["num_successful_runs"], 2);
}

/// The monotonic search against a server with 4 slots: up to 4 in flight TTFT is the
/// server's own; beyond, requests wait a whole service time. The highest concurrency under
/// the TTFT SLA is 4.
#[test]
fn the_sla_search_finds_the_highest_concurrency_that_meets_it() {
    let mock = MockChild::spawn(&["--max-concurrency", "4", "--ttft", "100", "--itl", "40"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("search");
    let out = profile_ok(&[
        "-m",
        "m",
        "--url",
        &mock.url,
        "--streaming",
        "--tokenizer",
        "builtin",
        "--osl",
        "5",
        "--isl",
        "20",
        "--search-recipe",
        "max-concurrency-under-sla",
        "--ttft-sla-ms",
        "200",
        "--concurrency-max",
        "16",
        "--artifact-dir",
        base.to_str().unwrap(),
    ]);
    let history = read_json(&base.join("search_history.json"));
    assert_eq!(history["max_feasible_concurrency"], 4, "{history:#}");
    let tried: Vec<u64> = history["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(&tried[..4], [1, 2, 4, 8], "{tried:?}");
    assert!(
        base.join("search_iter_0000/profile_runs/run_0001/profile_export_aiperf.json")
            .exists()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Highest concurrency meeting every SLA: 4"),
        "{stdout}"
    );
}

#[test]
fn bad_sweep_command_lines_are_refused_before_anything_runs() {
    let cases: &[(&[&str], &str)] = &[
        (&["--concurrency", "1,x"], "'x' is not a whole number"),
        (&["--num-profile-runs", "11"], "--num-profile-runs"),
        (
            &["--profile-run-cooldown-seconds", "3"],
            "--num-profile-runs",
        ),
        (&["--ttft-sla-ms", "100"], "--search-recipe"),
        (&["--concurrency", "1,0"], "--concurrency"),
        (
            &["--search-recipe", "concurrency-ramp", "--concurrency", "4"],
            "drop --concurrency",
        ),
    ];
    for (extra, want) in cases {
        common::assert_refused(extra, want);
    }
}

/// A sweep with repeats: AIPerf's `repeated` layout (trial directories holding every point)
/// and `independent` layout (point directories holding their trials), per-trial seeds.
#[test]
fn sweeps_and_repeats_combine_in_both_orders() {
    let tmp = tempfile::tempdir().unwrap();
    let common = [
        "-m",
        "m",
        "--mock-server",
        "--tokenizer",
        "builtin",
        "--request-count",
        "3",
        "--concurrency",
        "1,2",
        "--num-profile-runs",
        "2",
    ];
    let rep = tmp.path().join("rep");
    let mut args = common.to_vec();
    args.extend([
        "--vary-seed-per-trial",
        "--artifact-dir",
        rep.to_str().unwrap(),
    ]);
    profile_ok(&args);
    assert_eq!(
        dirs_in(&rep.join("profile_runs")),
        ["trial_0001", "trial_0002"]
    );
    assert_eq!(
        dirs_in(&rep.join("profile_runs/trial_0002")),
        ["concurrency_1", "concurrency_2"]
    );
    assert_eq!(
        dirs_in(&rep.join("aggregate")),
        ["concurrency_1", "concurrency_2", "sweep_aggregate"]
    );
    // Per-trial seeds: SHA-256 of "42:variation:<label>:trial:<n>", different for every run.
    let seed = |t: u32, c: u32| {
        read_json(&rep.join(format!(
            "profile_runs/trial_{t:04}/concurrency_{c}/run_config.json"
        )))["seed"]
            .as_u64()
            .unwrap()
    };
    let seeds = [seed(1, 1), seed(2, 1), seed(1, 2), seed(2, 2)];
    for (i, a) in seeds.iter().enumerate() {
        assert!(seeds[i + 1..].iter().all(|b| a != b), "{seeds:?}");
    }
    let sweep = read_json(&rep.join("aggregate/sweep_aggregate/profile_export_aiperf_sweep.json"));
    assert_eq!(sweep["metadata"]["num_trials_per_value"], 2);
    assert!(
        cell(&sweep, "concurrency", 2)["metrics"]["request_latency_avg"]["ci_low"].is_number(),
        "{sweep:#}"
    );
    let agg = read_json(&rep.join("aggregate/concurrency_2/profile_export_aiperf_aggregate.json"));
    assert_eq!(
        agg["metadata"]["run_labels"],
        serde_json::json!(["trial_0001", "trial_0002"])
    );

    let ind = tmp.path().join("ind");
    let mut args = common.to_vec();
    args.extend([
        "--parameter-sweep-mode",
        "independent",
        "--artifact-dir",
        ind.to_str().unwrap(),
    ]);
    profile_ok(&args);
    assert_eq!(
        dirs_in(&ind),
        ["concurrency_1", "concurrency_2", "sweep_aggregate"]
    );
    assert_eq!(
        dirs_in(&ind.join("concurrency_2")),
        ["aggregate", "profile_runs"]
    );
    assert_eq!(
        dirs_in(&ind.join("concurrency_2/profile_runs")),
        ["trial_0001", "trial_0002"]
    );
    // Without --vary-seed-per-trial both trials of a point share its seed (42 + index).
    let s = |c: u32, t: u32| {
        read_json(&ind.join(format!(
            "concurrency_{c}/profile_runs/trial_{t:04}/run_config.json"
        )))["seed"]
            .clone()
    };
    assert_eq!([s(1, 1), s(1, 2), s(2, 1), s(2, 2)], [42, 42, 43, 43]);
}

/// `--convergence-metric`: repeats stop once the metric is stable (a steady mock converges
/// by the CV criterion after the minimum of two runs).
#[test]
fn repeats_stop_once_the_metric_has_converged() {
    let mock = MockChild::spawn(&["--ttft", "30", "--itl", "2"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("conv");
    let out = profile_ok(&[
        "-m",
        "m",
        "--url",
        &mock.url,
        "--tokenizer",
        "builtin",
        "--request-count",
        "6",
        "--osl",
        "3",
        "--num-profile-runs",
        "6",
        "--convergence-metric",
        "request_latency",
        "--convergence-mode",
        "cv",
        "--convergence-threshold",
        "0.3",
        "--artifact-dir",
        base.to_str().unwrap(),
    ]);
    assert_eq!(
        dirs_in(&base.join("profile_runs")),
        ["run_0001", "run_0002"],
        "{}",
        stderr_text(&out)
    );
    let agg = read_json(&base.join("aggregate/profile_export_aiperf_aggregate.json"));
    assert_eq!(agg["metadata"]["num_profile_runs"], 2);
    assert!(
        stderr_text(&out).contains("converged after 2 runs"),
        "{}",
        stderr_text(&out)
    );
}

/// A file where a point's, a repeat's or an aggregate's directory must go is found before
/// the first run (it used to fail the sweep after the runs before it).
#[test]
fn a_file_in_the_way_of_a_run_directory_is_refused_before_the_first_run() {
    // (flags, the file in the way, the first run's directory, what the error says)
    let cases: &[(&[&str], &str, &str, &str)] = &[
        (
            &["--concurrency", "1,2"],
            "concurrency_2",
            "concurrency_1",
            "is a file where a run directory must go",
        ),
        (
            &["--num-profile-runs", "2"],
            "profile_runs/run_0002",
            "profile_runs/run_0001",
            "is a file where a run directory must go",
        ),
        (
            &["--num-profile-runs", "2"],
            "aggregate",
            "profile_runs/run_0001",
            "is a file where a run directory must go",
        ),
        (
            &["--concurrency", "1,2", "--num-profile-runs", "2"],
            "profile_runs",
            "profile_runs/trial_0001/concurrency_1",
            "is a file in the path of the run directory",
        ),
    ];
    for (extra, file, first_run, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("sweep");
        let blocker = base.join(file);
        std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
        std::fs::write(&blocker, "not a directory").unwrap();
        let mut args = vec![
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--mock-server",
            "--request-count",
            "2",
            "--artifact-dir",
            base.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = run_profile(&args);
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
        assert!(
            stderr.contains(blocker.to_str().unwrap()),
            "{extra:?}: {stderr}"
        );
        assert!(!base.join(first_run).exists(), "{extra:?}: a run was made");
    }
}
