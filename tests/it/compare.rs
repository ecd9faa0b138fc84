//! `aiperf compare`: runs of the mock server compared with each other.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::common::{MockChild, Profile, read_json, run_aiperf_in, stderr_text};

/// A streaming chat run of `count` requests at concurrency 4 against `url`, in `dir`;
/// `extra` flags replace those defaults.
fn profile(url: &str, dir: &Path, count: &str, extra: &[&str]) -> PathBuf {
    let defaults = [
        ("--endpoint-type", "chat"),
        ("--request-count", count),
        ("--concurrency", "4"),
        ("--synthetic-input-tokens-mean", "50"),
        ("--output-tokens-mean", "10"),
    ];
    let mut args = vec!["--streaming"];
    for (flag, value) in defaults.iter().filter(|(f, _)| !extra.contains(f)) {
        args.extend([*flag, *value]);
    }
    args.extend(extra);
    let out = Profile::new("m")
        .url(url)
        .artifact_dir(dir)
        .args(&args)
        .run();
    assert!(out.status.success(), "{}", stderr_text(&out));
    dir.to_path_buf()
}

/// Both runs at the same time: the client's share of each measured latency (about a
/// millisecond, more on a loaded machine) then drifts alike in both, and the comparison
/// sees the servers' difference.
fn at_once(a: impl FnOnce() -> PathBuf + Send, b: impl FnOnce() -> PathBuf) -> (PathBuf, PathBuf) {
    std::thread::scope(|s| {
        let a = s.spawn(a);
        let b = b();
        (a.join().unwrap(), b)
    })
}

fn compare(base: &Path, new: &Path, args: &[&str]) -> Output {
    let mut all = vec!["compare", base.to_str().unwrap(), new.to_str().unwrap()];
    all.extend_from_slice(args);
    run_aiperf_in(Path::new("."), &all)
}

/// The compare.json row of `metric` and `stat`.
fn row<'a>(doc: &'a Value, metric: &str, stat: &str) -> &'a Value {
    let rows = doc["metrics"].as_array().unwrap();
    rows.iter()
        .find(|r| r["metric"] == metric && r["stat"] == stat)
        .unwrap_or_else(|| panic!("no {metric} {stat} in {doc:#}"))
}

const LATENCIES: [&str; 3] = [
    "time_to_first_token",
    "inter_token_latency",
    "request_latency",
];

#[test]
fn two_runs_of_one_server_show_no_change() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "5"]);
    let (a, b) = at_once(
        || profile(&mock.url, &tmp.path().join("a"), "200", &[]),
        || profile(&mock.url, &tmp.path().join("b"), "200", &[]),
    );
    let out_dir = tmp.path().join("cmp");
    let out = compare(
        &a,
        &b,
        &[
            "--output",
            out_dir.to_str().unwrap(),
            "--fail-on-regression",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", stderr_text(&out));
    assert!(stdout.contains("NVIDIA AIPerf | Compare"), "{stdout}");
    let doc = read_json(&out_dir.join("compare.json"));
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["base", "metrics", "new"]);
    let mut want = [
        "metric",
        "stat",
        "unit",
        "base",
        "new",
        "change_pct",
        "ci_low",
        "ci_high",
        "verdict",
        "method",
    ];
    want.sort();
    for r in doc["metrics"].as_array().unwrap() {
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, want);
    }
    for metric in LATENCIES {
        // p99 of 200 requests: 2 beyond it, too few for an interval.
        let r = row(&doc, metric, "p99");
        assert_eq!(
            (&r["verdict"], &r["method"]),
            (&"no interval".into(), &"point".into())
        );
        for stat in ["avg", "p50", "p90"] {
            let r = row(&doc, metric, stat);
            assert_eq!(r["verdict"], "no change", "{r}");
            assert_eq!(r["method"], "bootstrap");
            let (lo, hi) = (
                r["ci_low"].as_f64().unwrap(),
                r["ci_high"].as_f64().unwrap(),
            );
            let change = r["change_pct"].as_f64().unwrap();
            assert!(lo <= change && change <= hi, "{r}");
        }
    }
    let tp = row(&doc, "request_throughput", "avg");
    assert_eq!(
        (&tp["method"], &tp["ci_low"]),
        (&Value::from("point"), &Value::Null)
    );
    assert_eq!(doc["base"]["requests"], 200);
    let csv = std::fs::read_to_string(out_dir.join("compare.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        doc["metrics"].as_array().unwrap().len() + 1
    );
    assert!(
        csv.starts_with("metric,stat,unit,base,new,change_pct,ci_low,ci_high,verdict,method\n")
    );

    // compare.html: the table, and each latency's two distributions drawn over each other.
    let html = std::fs::read_to_string(out_dir.join("compare.html")).unwrap();
    crate::report_html::assert_self_contained(&html);
    assert!(html.contains("Time to First Token (ms)"), "the table");
    let charts = crate::report_html::embedded_charts(&html);
    let names: Vec<&str> = charts.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, LATENCIES);
    for c in &charts {
        let series: Vec<&str> = c["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(series, ["BASE (200 requests)", "NEW (200 requests)"]);
    }
    if let Some(browser) = crate::report_html::chromium() {
        let rendered = crate::report_html::render(&browser, &out_dir.join("compare.html"), 2600);
        rendered.assert_drawn(charts.len());
    }

    // The same seed gives the same intervals.
    let again = tmp.path().join("again");
    let out = compare(&a, &b, &["--output", again.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(
        read_json(&again.join("compare.json"))["metrics"],
        doc["metrics"]
    );
}

#[test]
fn a_slower_first_token_is_found_with_its_size() {
    let tmp = tempfile::tempdir().unwrap();
    let fast = MockChild::spawn(&["--ttft", "20", "--itl", "5"]);
    let slow = MockChild::spawn(&["--ttft", "30", "--itl", "5"]);
    let (a, b) = at_once(
        || profile(&fast.url, &tmp.path().join("a"), "200", &[]),
        || profile(&slow.url, &tmp.path().join("b"), "200", &[]),
    );
    let out = compare(&a, &b, &["--fail-on-regression"]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("warning: the server differs"), "{stderr}");
    assert!(stderr.contains("--fail-on-regression"), "{stderr}");
    // Written to NEW/compare without --output.
    let doc = read_json(&b.join("compare/compare.json"));
    for stat in ["avg", "p50"] {
        let r = row(&doc, "time_to_first_token", stat);
        assert_eq!(r["verdict"], "slower", "{r}");
        // The server's first token takes +50%. The measured TTFT also holds the client's
        // own share d (under 2 ms, alike in runs made at once), which makes the measured
        // change 10 ms / (20 ms + d): the interval must reach the band from 10/22 (45.5%)
        // to +50%.
        let (lo, hi) = (
            r["ci_low"].as_f64().unwrap(),
            r["ci_high"].as_f64().unwrap(),
        );
        eprintln!(
            "TTFT {stat}: {} -> {} ms, change {:.2}% in [{lo:.2}%, {hi:.2}%]",
            r["base"],
            r["new"],
            r["change_pct"].as_f64().unwrap()
        );
        assert!(lo <= 50.0 && hi >= 10.0 / 22.0 * 100.0, "[{lo}, {hi}]");
        // Far from the band, though a loaded machine's slow requests widen the mean's.
        assert!(lo > 25.0, "[{lo}, {hi}]");
    }
    let itl = row(&doc, "inter_token_latency", "avg");
    assert_eq!(itl["verdict"], "no change", "{itl}");
    // Turned around, the new run is faster and nothing regressed.
    let out = compare(
        &b,
        &a,
        &[
            "--fail-on-regression",
            "--output",
            tmp.path().join("back").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = read_json(&tmp.path().join("back/compare.json"));
    assert_eq!(row(&doc, "time_to_first_token", "avg")["verdict"], "faster");
}

#[test]
fn different_endpoints_are_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let a = profile(&mock.url, &tmp.path().join("a"), "20", &[]);
    let b = profile(
        &mock.url,
        &tmp.path().join("b"),
        "20",
        &["--endpoint-type", "completions"],
    );
    let out = compare(&a, &b, &[]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the endpoint types differ: \"chat\" vs \"completions\"")
            && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(!b.join("compare").exists());
    let out = compare(&a, &b, &["--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(stderr_text(&out).contains("warning: the endpoint types differ"));

    // Another workload (longer outputs) is refused too, naming what differs.
    let c = profile(
        &mock.url,
        &tmp.path().join("c"),
        "20",
        &["--output-tokens-mean", "20"],
    );
    let out = compare(&a, &c, &[]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the workloads differ") && stderr.contains("osl"),
        "{stderr}"
    );
}

#[test]
fn differing_settings_and_failures_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let failing = MockChild::spawn(&["--ttft", "2", "--itl", "1", "--error-rate", "30"]);
    let a = profile(&mock.url, &tmp.path().join("a"), "20", &[]);
    let b = profile(
        &failing.url,
        &tmp.path().join("b"),
        "24",
        &["--concurrency", "2"],
    );
    let out = compare(&a, &b, &[]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for w in [
        "warning: the server differs",
        "warning: the request count differs: 20 vs 24",
        "warning: the concurrency differs: 4 vs 2",
        "warning: NEW had ",
    ] {
        assert!(stderr.contains(w), "{w} not in {stderr}");
    }
    let doc = read_json(&b.join("compare/compare.json"));
    assert!(doc["new"]["failed_requests"].as_u64().unwrap() > 0, "{doc}");

    // A run stopped early (its summary says was_cancelled) is warned about, and so are
    // other goodput objectives.
    let cut = tmp.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    for f in ["profile_export.jsonl", "profile_export_aiperf.json"] {
        std::fs::copy(a.join(f), cut.join(f)).unwrap();
    }
    let mut summary = read_json(&cut.join("profile_export_aiperf.json"));
    summary["was_cancelled"] = true.into();
    summary["input_config"]["slos"] = "time_to_first_token:25".into();
    std::fs::write(cut.join("profile_export_aiperf.json"), summary.to_string()).unwrap();
    let out = compare(&cut, &a, &[]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: BASE was interrupted; its results are partial"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "warning: the goodput setting (--goodput) differs: \"time_to_first_token:25\" vs null"
        ),
        "{stderr}"
    );
}

#[test]
fn bad_input_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nothing");
    let out = compare(&missing, &missing, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("not a run directory"),
        "{}",
        stderr_text(&out)
    );
    let mock = MockChild::spawn(&["--ttft", "2", "--itl", "1"]);
    let a = profile(&mock.url, &tmp.path().join("a"), "8", &[]);
    for (args, says) in [
        (&["--threshold", "x%"][..], "--threshold x%"),
        (&["--confidence", "95"][..], "--confidence 95"),
        (&["--metrics", "ttft"][..], "ttft is not a metric tag"),
        (
            &["--metrics", "time_to_second_token,image_throughput"][..],
            "image_throughput is not in both runs",
        ),
    ] {
        let out = compare(&a, &a, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr_text(&out).contains(says),
            "{args:?}: {}",
            stderr_text(&out)
        );
    }
}

#[test]
fn repeated_runs_are_compared_across_trials() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "1"]);
    let repeats = [
        "--num-profile-runs",
        "3",
        "--profile-run-cooldown-seconds",
        "0",
    ];
    let a = profile(&mock.url, &tmp.path().join("a"), "24", &repeats);
    let b = profile(&mock.url, &tmp.path().join("b"), "24", &repeats);
    let out = compare(&a, &b, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let doc = read_json(&b.join("compare/compare.json"));
    assert_eq!(doc["base"]["trials"], 3);
    for (metric, stat) in [
        ("time_to_first_token", "p50"),
        ("request_throughput", "avg"),
    ] {
        let r = row(&doc, metric, stat);
        assert_eq!(r["method"], "trials", "{r}");
        assert!(
            r["ci_low"].as_f64().unwrap() < r["ci_high"].as_f64().unwrap(),
            "{r}"
        );
    }
    // One side repeated, the other not: the requests are pooled and bootstrapped.
    let single = profile(&mock.url, &tmp.path().join("c"), "24", &[]);
    let out = compare(&a, &single, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(stderr_text(&out).contains("BASE has 3 trial(s), NEW 1"));
    let doc = read_json(&single.join("compare/compare.json"));
    assert_eq!(row(&doc, "request_latency", "avg")["method"], "bootstrap");
    assert_eq!(doc["base"]["requests"], 72);
}

#[test]
fn sweeps_are_compared_point_by_point() {
    let tmp = tempfile::tempdir().unwrap();
    let fast = MockChild::spawn(&["--ttft", "20", "--itl", "2"]);
    let slow = MockChild::spawn(&["--ttft", "30", "--itl", "2"]);
    let a = profile(
        &fast.url,
        &tmp.path().join("a"),
        "40",
        &["--concurrency", "1,2"],
    );
    let b = profile(
        &slow.url,
        &tmp.path().join("b"),
        "40",
        &["--concurrency", "2,4"],
    );
    let out = compare(&a, &b, &[]);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("point concurrency_1 is in BASE only"),
        "{stderr}"
    );
    assert!(
        stderr.contains("point concurrency_4 is in NEW only"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("NVIDIA AIPerf | Compare | concurrency_2"),
        "{stdout}"
    );
    let dirs: Vec<String> = std::fs::read_dir(b.join("compare"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(dirs, ["concurrency_2"]);
    let doc = read_json(&b.join("compare/concurrency_2/compare.json"));
    assert_eq!(row(&doc, "time_to_first_token", "p50")["verdict"], "slower");
    assert_eq!(doc["base"]["requests"], 40);
    // A sweep is not compared with a single run.
    let single = profile(&fast.url, &tmp.path().join("c"), "8", &[]);
    let out = compare(&a, &single, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("is a sweep and"),
        "{}",
        stderr_text(&out)
    );
}
