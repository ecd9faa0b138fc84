//! `aiperf speed-bench-report`: the matrix from run directories made here (one per
//! category and model), checked cell by cell in the CSV and the table.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common::BIN;

fn aiperf_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A run directory as `profile` writes it: the summary (model, dataset, throughput) and,
/// when given, the server-metrics export with vLLM's speculative-decoding counters.
fn run_dir(dir: &Path, model: &str, dataset: Value, throughput: f64, vllm: Option<(f64, f64)>) {
    std::fs::create_dir_all(dir).unwrap();
    let summary = json!({
        "input_config": {"models": {"items": [{"name": model}]}, "datasets": [dataset]},
        "output_token_throughput": {"unit": "tokens/sec", "avg": throughput},
    });
    std::fs::write(dir.join("profile_export_aiperf.json"), summary.to_string()).unwrap();
    if let Some((accepted, drafts)) = vllm {
        let series = |total: f64| json!({"series": [{"stats": {"total": total}}]});
        let sm = json!({"metrics": {
            "vllm:spec_decode_num_accepted_tokens": series(accepted),
            "vllm:spec_decode_num_drafts": series(drafts),
            "vllm:spec_decode_num_draft_tokens": series(drafts * 4.0),
        }});
        std::fs::write(dir.join("server_metrics_export.json"), sm.to_string()).unwrap();
    }
}

fn file_dataset(format: &str) -> Value {
    json!({"name": "main", "type": "file", "path": "q.jsonl", "format": format})
}

#[test]
fn the_matrix_has_a_row_per_model_and_a_column_per_category() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("artifacts");
    run_dir(
        &runs.join("a_math"),
        "model-a",
        file_dataset("speed_bench_math"),
        100.0,
        Some((300.0, 200.0)),
    );
    run_dir(
        &runs.join("a_coding"),
        "model-a",
        file_dataset("speed_bench_coding"),
        50.0,
        Some((100.0, 100.0)),
    );
    run_dir(
        &runs.join("b_math"),
        "model-b",
        file_dataset("speed_bench_math"),
        80.0,
        None,
    );
    // Not a SPEED-Bench run: skipped with a warning.
    run_dir(
        &runs.join("other"),
        "model-a",
        file_dataset("single_turn"),
        1.0,
        None,
    );

    let out = aiperf_in(tmp.path(), &["speed-bench-report", "artifacts"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("Found 4 run directories.\n"), "{stdout}");
    assert!(stdout.contains("Acceptance Length Report"), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cannot tell the category of") && stderr.contains("other"),
        "{stderr}"
    );
    assert!(
        stderr.contains("no server_metrics_export.json in"),
        "{stderr}"
    );
    // accept length = accepted / drafts + 1: coding 2.00, math 2.50; model-b has none.
    let csv = std::fs::read_to_string(tmp.path().join("speed_bench_report.csv")).unwrap();
    assert_eq!(
        csv,
        "Model,coding,math,Overall\nmodel-a,2.00,2.50,2.25\nmodel-b,,,\n"
    );
    let table_row = stdout.lines().find(|l| l.starts_with("model-a")).unwrap();
    let cells: Vec<&str> = table_row.split_whitespace().collect();
    assert_eq!(cells, ["model-a", "2.00", "2.50", "2.25"]);
    let table_row = stdout.lines().find(|l| l.starts_with("model-b")).unwrap();
    assert_eq!(
        table_row.split_whitespace().collect::<Vec<_>>(),
        ["model-b", "-", "-", "-"]
    );

    // Acceptance rate (accepted / draft tokens) and throughput, run directories listed.
    let out = aiperf_in(
        tmp.path(),
        &[
            "speed-bench-report",
            "artifacts/a_coding",
            "artifacts/a_math",
            "--metric",
            "accept_rate",
            "--format",
            "csv",
            "--output",
            "rate.csv",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("Report"), "csv only: no table");
    let csv = std::fs::read_to_string(tmp.path().join("rate.csv")).unwrap();
    assert_eq!(csv, "Model,coding,math,Overall\nmodel-a,0.25,0.38,0.31\n");
    let out = aiperf_in(
        tmp.path(),
        &[
            "speed-bench-report",
            "artifacts",
            "--metric",
            "throughput",
            "--format",
            "table",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("Throughput Report (tokens/sec)"),
        "{stdout}"
    );
    let row = stdout.lines().find(|l| l.starts_with("model-b")).unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["model-b", "-", "80.00", "80.00"]
    );
}

#[test]
fn public_spec_al_runs_and_bad_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let public = |name: &str| json!({"name": "main", "type": "public", "dataset": name});
    run_dir(
        &tmp.path().join("r1"),
        "m",
        public("spec_al_mbpp"),
        10.0,
        Some((10.0, 10.0)),
    );
    run_dir(
        &tmp.path().join("r2"),
        "m",
        public("spec_al_gsm8k"),
        10.0,
        Some((30.0, 10.0)),
    );
    let out = aiperf_in(tmp.path(), &["speed-bench-report", ".", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The spec_al order: gsm8k before mbpp.
    let csv = std::fs::read_to_string(tmp.path().join("speed_bench_report.csv")).unwrap();
    assert_eq!(csv, "Model,gsm8k,mbpp,Overall\nm,4.00,2.00,3.00\n");

    let out = aiperf_in(tmp.path(), &["speed-bench-report", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("nowhere is not a directory"), "{stderr}");
    assert!(
        stderr.contains("error: no run directories found under nowhere"),
        "{stderr}"
    );

    // Runs without any value: exit 1.
    let only = tmp.path().join("only");
    run_dir(&only.join("x"), "m", public("spec_al_mbpp"), 10.0, None);
    let out = aiperf_in(tmp.path(), &["speed-bench-report", "only"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: no SPEED-Bench results extracted"));
}
