//! Scripts written for AIPerf 0.13 read our summary files unchanged: the JSON keys and
//! their statistics, the CSV columns, rows and sections, and the console tables match
//! fixtures written from AIPerf's documented schema (tests/fixtures/aiperf-summary/). The
//! values of the metrics AIPerf 0.13 added are recomputed here from the per-request JSONL.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{MockChild, read_json, read_jsonl, run_profile, stderr_text};
use serde_json::Value;

fn fixture(name: &str) -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/aiperf-summary")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with("# "))
        .map(str::to_string)
        .collect()
}

/// A streaming vision run with `--osl 100` against a mock that stops after half of it,
/// goodput objectives and an open-loop rate (so the send lag is measured).
struct Run {
    dir: PathBuf,
    stderr: String,
    _tmp: tempfile::TempDir,
}

fn vision_run(extra: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "15", "--itl", "2", "--eos-ratio", "0.5"]);
    let dir = tmp.path().join("run");
    let mut args = vec![
        "--model",
        "Qwen/Qwen2-VL-2B-Instruct",
        "--endpoint-type",
        "chat",
        "--image-width-mean",
        "256",
        "--image-height-mean",
        "256",
        "--synthetic-input-tokens-mean",
        "100",
        "--output-tokens-mean",
        "100",
        "--streaming",
        "--url",
        &mock.url,
        "--request-count",
        "12",
        "--request-rate",
        "40",
        "--concurrency",
        "4",
        "--goodput",
        "request_latency:10000",
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        dir.to_str().unwrap(),
        // AIPerf's console has no server-metrics table; the fixture is its layout.
        "--no-server-metrics",
    ];
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "exit {:?}\n{stderr}", out.status);
    Run {
        dir,
        stderr,
        _tmp: tmp,
    }
}

const RECORD_STATS: [&str; 16] = [
    "unit", "avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min", "max",
    "std", "count", "sum",
];
const SWEEP_STATS: [&str; 9] = [
    "unit", "avg", "p50", "p90", "p95", "p99", "min", "max", "std",
];
const SCALAR_STATS: [&str; 2] = ["unit", "avg"];

fn check_json(summary: &Value) {
    let doc = summary.as_object().unwrap();
    let mut expected = BTreeSet::new();
    for line in fixture("json_metrics.txt") {
        let [tag, kind, unit] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("bad fixture line {line:?}");
        };
        expected.insert(tag.to_string());
        let m = doc
            .get(tag)
            .unwrap_or_else(|| panic!("{tag} missing from the JSON"));
        assert_eq!(m["unit"], unit, "{tag}");
        let keys: BTreeSet<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
        let want: &[&str] = match kind {
            "record" => &RECORD_STATS,
            "sweep" => &SWEEP_STATS,
            "scalar" => &SCALAR_STATS,
            _ => panic!("bad kind {kind}"),
        };
        assert_eq!(
            keys,
            want.iter().copied().collect(),
            "{tag}: statistics keys"
        );
    }
    let found: BTreeSet<String> = doc
        .iter()
        .filter(|(_, v)| v.get("unit").is_some())
        .map(|(k, _)| k.clone())
        .collect();
    let extra: Vec<&String> = found.difference(&expected).collect();
    assert!(extra.is_empty(), "metrics not in the fixture: {extra:?}");

    for path in fixture("json_top_level.txt") {
        let mut v = summary;
        for part in path.split('.') {
            v = v.get(part).unwrap_or_else(|| panic!("{path} missing"));
        }
    }
    let config = &summary["input_config"];
    assert_eq!(
        config["models"]["items"][0]["name"],
        "Qwen/Qwen2-VL-2B-Instruct"
    );
    assert!(
        config["endpoint"]["urls"][0]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    assert_eq!(config["phases"][0]["name"], "profiling");
    assert_eq!(config["phases"][0]["type"], "poisson");
    assert_eq!(config["datasets"][0]["prompts"]["osl"]["mean"], 100.0);
    assert_eq!(summary["is_complete"], true);
    // AIPerf writes Python's datetime.isoformat() with the UTC offset.
    let start = summary["start_time"].as_str().unwrap();
    assert_eq!(
        start.len(),
        "2024-02-29T12:34:56.789012+00:00".len(),
        "{start}"
    );
    assert!(
        start.ends_with("+00:00") && &start[10..11] == "T",
        "{start}"
    );
}

fn check_csv(dir: &Path) {
    let text = std::fs::read_to_string(dir.join("profile_export_aiperf.csv")).unwrap();
    let lines: Vec<&str> = text.split("\r\n").collect();
    let want = fixture("csv_layout.txt");
    // Header lines are compared whole, rows by their label; every stat row has 15 cells.
    let mut i = 0;
    for (n, expected) in want.iter().enumerate() {
        let line = lines[i];
        i += 1;
        if expected.is_empty() || expected.starts_with("Metric,") {
            assert_eq!(line, expected, "CSV line {}", n + 1);
            continue;
        }
        let label = line.rsplit_once(',').map(|(l, _)| l).unwrap_or(line);
        let label = if line.matches(',').count() == 14 {
            line.split(',').next().unwrap()
        } else {
            label
        };
        assert_eq!(label, expected, "CSV line {}: {line}", n + 1);
    }
    assert_eq!(lines[i..], [""], "rows past the fixture");
    // The sum column is where AIPerf has it.
    let latency = lines
        .iter()
        .find(|l| l.starts_with("Request Latency (ms),"))
        .unwrap();
    let cells: Vec<f64> = latency
        .split(',')
        .skip(1)
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(cells.len(), 14);
    let (avg, sum) = (cells[0], cells[3]);
    assert!((sum / 12.0 - avg).abs() < 0.01, "{latency}");
    // Sweep-line rows leave sum and the lower percentiles empty.
    let conc = lines
        .iter()
        .find(|l| l.starts_with("Effective Concurrency,"))
        .unwrap();
    let cells: Vec<&str> = conc.split(',').collect();
    assert_eq!(&cells[4..9], ["", "", "", "", ""], "{conc}");
    assert_eq!(cells[10], "", "{conc}");
}

/// Table titles and row labels of the console report. Labels wrap at spaces or inside long
/// words depending on the column widths, so they are compared without spaces.
fn console_tables(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_body = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("NVIDIA AIPerf |") {
            out.push(format!("## {trimmed}"));
        } else if line.starts_with('┡') {
            in_body = true;
        } else if line.starts_with('└') {
            in_body = false;
        } else if in_body && line.starts_with('│') {
            let cells: Vec<&str> = line.split('│').collect();
            let (label, avg) = (cells[1].trim(), cells[2].trim());
            if avg.is_empty() {
                out.last_mut().unwrap().push_str(label);
            } else {
                out.push(label.to_string());
            }
        }
    }
    out
}

fn check_console(dir: &Path) {
    let text = std::fs::read_to_string(dir.join("profile_export_console.txt")).unwrap();
    let squeeze = |l: &String| {
        if l.starts_with("## ") {
            l.clone()
        } else {
            l.replace(' ', "")
        }
    };
    let got: Vec<String> = console_tables(&text).iter().map(squeeze).collect();
    let want: Vec<String> = fixture("console_tables.txt").iter().map(squeeze).collect();
    assert_eq!(got, want, "{text}");
    let header = text
        .lines()
        .find(|l| l.starts_with('┃'))
        .unwrap()
        .split('┃')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect::<Vec<_>>();
    assert_eq!(
        header,
        ["Metric", "avg", "min", "max", "p99", "p90", "p50", "std"]
    );
}

#[test]
fn summary_files_match_aiperf_layout() {
    let run = vision_run(&[]);
    let summary = read_json(&run.dir.join("profile_export_aiperf.json"));
    check_json(&summary);
    check_csv(&run.dir);
    check_console(&run.dir);
    // The sections AIPerf 0.13 writes in every run's input_config (no terminal: no UI).
    let ic = &summary["input_config"];
    assert_eq!(ic["network_latency"], serde_json::json!({"enabled": false}));
    // (This run turns server metrics off.)
    assert_eq!(ic["server_metrics"]["enabled"], false, "{ic}");
    assert_eq!(ic["server_metrics"]["urls"], serde_json::json!([]));
    assert!(ic["gpu_telemetry"]["enabled"].is_boolean(), "{ic}");
    assert_eq!(ic["runtime"]["ui"], "none");
    assert_eq!(ic["artifacts"]["auto_plot"], false);
    assert_eq!(ic["artifacts"]["plot_required"], false);
    // Nothing is coloured when the output is not a terminal.
    assert!(!run.stderr.contains('\u{1b}'), "{}", run.stderr);
    let console = std::fs::read_to_string(run.dir.join("profile_export_console.txt")).unwrap();
    assert!(!console.contains('\u{1b}'));
}

fn avg(summary: &Value, tag: &str) -> f64 {
    summary[tag]["avg"]
        .as_f64()
        .unwrap_or_else(|| panic!("{tag}: {}", summary[tag]))
}

fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-6 * want.abs().max(1.0),
        "{what}: {got} != {want}"
    );
}

#[test]
fn new_metrics_agree_with_the_per_request_records() {
    let run = vision_run(&[]);
    let s = read_json(&run.dir.join("profile_export_aiperf.json"));
    let records = read_jsonl(&run.dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), 12);
    let metric = |r: &Value, tag: &str| {
        r["metrics"][tag]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{tag} missing in {r}"))
    };
    let duration_s = avg(&s, "benchmark_duration");
    let mut sums = [0.0f64; 8];
    let mut e2e = Vec::new();
    for r in &records {
        let latency = metric(r, "request_latency");
        let ttft = metric(r, "time_to_first_token");
        let isl = metric(r, "input_sequence_length");
        let osl = metric(r, "output_sequence_length");
        close(
            metric(r, "decode_duration"),
            latency - ttft,
            "decode_duration",
        );
        close(metric(r, "time_to_first_output_token"), ttft, "ttfo");
        close(
            metric(r, "prefill_throughput_per_user"),
            isl / (ttft / 1e3),
            "prefill/user",
        );
        e2e.push(osl / (latency / 1e3));
        close(
            metric(r, "osl_mismatch_diff_pct"),
            (osl - 100.0) / 100.0 * 100.0,
            "osl diff",
        );
        let prompt = metric(r, "usage_prompt_tokens");
        close(
            metric(r, "usage_prompt_tokens_diff_pct"),
            (prompt - isl).abs() / isl * 100.0,
            "prompt diff",
        );
        for (i, v) in [latency, ttft, latency - ttft, isl, osl - 1.0, osl, prompt]
            .into_iter()
            .enumerate()
        {
            sums[i] += v;
        }
        sums[7] += metric(r, "usage_total_tokens");
    }
    let [
        latency,
        ttft,
        decode,
        isl,
        decode_tokens,
        osl,
        prompt,
        total_usage,
    ] = sums;
    close(
        avg(&s, "e2e_output_token_throughput"),
        e2e.iter().sum::<f64>() / 12.0,
        "e2e",
    );
    // Run-level values.
    close(avg(&s, "completed_request_count"), 12.0, "completed");
    close(avg(&s, "request_error_rate"), 0.0, "error rate");
    close(
        avg(&s, "input_token_throughput"),
        isl / duration_s,
        "input tps",
    );
    close(
        avg(&s, "total_token_throughput"),
        (isl + osl) / duration_s,
        "total tps",
    );
    close(avg(&s, "total_usage_prompt_tokens"), prompt, "usage prompt");
    close(
        avg(&s, "total_usage_total_tokens"),
        total_usage,
        "usage total",
    );
    close(avg(&s, "good_request_fraction"), 1.0, "good fraction");
    // The mock stopped every response at half of --osl 100.
    close(osl, 12.0 * 50.0, "osl");
    close(avg(&s, "osl_mismatch_count"), 12.0, "osl mismatches");
    // Images make the server's prompt far larger than the text: every request differs.
    close(
        avg(&s, "usage_discrepancy_count"),
        12.0,
        "usage discrepancies",
    );
    // The averages of the time-weighted curves are totals over the window.
    close(
        avg(&s, "effective_concurrency"),
        latency / 1e3 / duration_s,
        "concurrency",
    );
    close(
        avg(&s, "effective_prefill_concurrency"),
        ttft / 1e3 / duration_s,
        "prefill conc",
    );
    close(
        avg(&s, "effective_decode_concurrency"),
        decode / 1e3 / duration_s,
        "decode conc",
    );
    close(
        avg(&s, "effective_prefill_throughput"),
        isl / duration_s,
        "prefill tps",
    );
    close(
        avg(&s, "effective_decode_throughput"),
        decode_tokens / duration_s,
        "decode tps",
    );
    close(
        avg(&s, "effective_total_throughput"),
        (isl + decode_tokens) / duration_s,
        "total",
    );
    // While busy the rate can only be higher than over the whole window.
    assert!(avg(&s, "active_decode_throughput") >= avg(&s, "effective_decode_throughput"));
    let conc = &s["effective_concurrency"];
    assert!(conc["max"].as_f64().unwrap() <= 4.0 && conc["min"].as_f64().unwrap() >= 0.0);
    // Open loop: each send waited at most a few ms past its scheduled time.
    let lag = &s["credit_to_start_latency"];
    assert_eq!(lag["count"], 12);
    assert!(lag["min"].as_f64().unwrap() >= 0.0);

    // The advisories: before the run, and the mismatch summary after it.
    assert!(
        run.stderr.contains("--osl 100 sets max_tokens only"),
        "{}",
        run.stderr
    );
    let console = std::fs::read_to_string(run.dir.join("profile_export_console.txt")).unwrap();
    assert!(
        console.contains("OSL Mismatch Warning: 12 of 12 requests")
            && console.contains("got 50 tokens (requested 100, diff -50.0%)"),
        "{console}"
    );
}

#[test]
fn ignore_eos_silences_the_osl_advisories() {
    let run = vision_run(&["--extra-inputs", "ignore_eos:true"]);
    let s = read_json(&run.dir.join("profile_export_aiperf.json"));
    close(avg(&s, "osl_mismatch_count"), 0.0, "osl mismatches");
    close(avg(&s, "total_osl"), 1200.0, "osl");
    assert!(
        !run.stderr.contains("sets max_tokens only"),
        "{}",
        run.stderr
    );
    let console = std::fs::read_to_string(run.dir.join("profile_export_console.txt")).unwrap();
    assert!(!console.contains("OSL Mismatch"), "{console}");
}
