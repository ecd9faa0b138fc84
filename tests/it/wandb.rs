//! `--wandb-*`: the run logged by the real `wandb` Python package in offline mode, read back
//! from the offline run directory it leaves. `.ci/run` installs wandb in a venv and says
//! where (`AIPERF_WANDB_VENV`); without it the offline test says so and passes, unless
//! `AIPERF_REQUIRE_WANDB=1` (CI), where it fails. The missing-package test needs only python3.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{MockChild, read_json, stderr_text};
use serde_json::Value;

/// The venv with wandb installed, or `None` (after saying why) when it is not here.
fn wandb_venv() -> Option<PathBuf> {
    match std::env::var_os("AIPERF_WANDB_VENV") {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var("AIPERF_REQUIRE_WANDB").as_deref() == Ok("1") => {
            panic!("AIPERF_REQUIRE_WANDB=1 but AIPERF_WANDB_VENV (a venv with wandb) is not set")
        }
        None => {
            eprintln!(
                "skipped: no wandb here (set AIPERF_WANDB_VENV to a venv with wandb; .ci/run installs wandb==0.31.0)"
            );
            None
        }
    }
}

/// PATH with `venv/bin` first, so that the `python3` aiperf runs is the venv's.
fn path_with(venv: &Path) -> String {
    format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `aiperf profile` with W&B flags, in offline mode with its files under `home`.
fn run_with(
    mock: &MockChild,
    dir: &Path,
    venv: &Path,
    home: &Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "profile",
        "--tokenizer",
        "builtin",
        "-m",
        "m",
        "--url",
        &mock.url,
    ];
    let dir = dir.to_str().unwrap();
    args.extend(["--artifact-dir", dir, "--request-count", "6", "--streaming"]);
    args.extend(["--isl", "16", "--osl", "8"]);
    args.extend_from_slice(extra);
    Command::new(common::BIN)
        .args(&args)
        .env("HF_HUB_OFFLINE", "1")
        .env("PATH", path_with(venv))
        .env("WANDB_MODE", "offline")
        .env("WANDB_SILENT", "true")
        .env("WANDB_CONFIG_DIR", home.join("config"))
        .env("WANDB_CACHE_DIR", home.join("cache"))
        .env("WANDB_DATA_DIR", home.join("data"))
        .output()
        .expect("run aiperf")
}

#[test]
fn an_offline_wandb_run_holds_the_summary_table_config_name_and_tags() {
    let Some(venv) = wandb_venv() else { return };
    let mock = MockChild::spawn(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = run_with(
        &mock,
        &dir,
        &venv,
        tmp.path(),
        &[
            "--wandb-project",
            "bench",
            "--wandb-run-name",
            "first",
            "--wandb-tag",
            "a,b",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let summary = read_json(&dir.join("profile_export_aiperf.json"));

    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("wandb"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("offline-run-")
        })
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let recorded = offline_run(&venv, &runs[0]);
    assert_eq!(recorded["name"], "first");
    assert_eq!(recorded["project"], "bench");
    let id = summary["benchmark_id"].as_str().unwrap();
    let version = summary["aiperf_version"].as_str().unwrap();
    assert_eq!(
        recorded["tags"],
        serde_json::json!([
            format!("aiperf-{version}"),
            format!("benchmark-{}", &id[..8]),
            "a",
            "b"
        ])
    );
    let config = &recorded["config"];
    assert_eq!(
        config["aiperf.cli_command"],
        summary["run_info"]["cli_command"]
    );
    assert_eq!(config["endpoint"]["type"], "chat");

    // The summary names the table; the table file holds the console's rows.
    let logged = &recorded["summary"];
    assert_eq!(logged["summary_metrics._type"], "table-file", "{logged:#}");
    let path = logged["summary_metrics.path"].as_str().unwrap();
    let table = read_json(&runs[0].join("files").join(path));
    assert_eq!(
        table["columns"],
        serde_json::json!(["Metric", "avg", "min", "max", "p99", "p90", "p50", "std"])
    );
    let row = |label: &str| -> Vec<Value> {
        table["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r[0] == label)
            .unwrap_or_else(|| panic!("no row {label} in {table:#}"))
            .as_array()
            .unwrap()
            .clone()
    };
    let rounded = |v: &Value| (v.as_f64().unwrap() * 100.0).round() / 100.0;
    let ttft = row("Time to First Token (ms)");
    assert_eq!(
        ttft[1].as_f64().unwrap(),
        rounded(&summary["time_to_first_token"]["avg"])
    );
    assert_eq!(
        ttft[4].as_f64().unwrap(),
        rounded(&summary["time_to_first_token"]["p99"])
    );
    let count = row("Request Count (requests)");
    assert_eq!(count[1].as_f64().unwrap(), 6.0);
    assert!(count[2].is_null());
}

/// What the offline run recorded, read from its `run-<id>.wandb` file by
/// `wandb_offline_run.py` with the venv's wandb (its protobuf definitions).
fn offline_run(venv: &Path, run_dir: &Path) -> Value {
    let file = std::fs::read_dir(run_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wandb"))
        .expect("a .wandb file");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/wandb_offline_run.py");
    let out = Command::new(venv.join("bin/python"))
        .arg(script)
        .arg(file)
        .output()
        .expect("run the venv's python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A python3 without wandb: the results are written, one error line says to install it.
#[test]
fn without_the_wandb_package_the_upload_fails_with_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("bare");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(made.success());
    let mock = MockChild::spawn(&[]);
    let dir = tmp.path().join("run");
    let out = run_with(
        &mock,
        &dir,
        &venv,
        tmp.path(),
        &["--wandb-project", "bench"],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("wandb")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: Weights & Biases upload failed")
            && lines[0].contains("pip install wandb"),
        "{}",
        lines[0]
    );
    assert!(dir.join("profile_export_aiperf.json").is_file());
}
