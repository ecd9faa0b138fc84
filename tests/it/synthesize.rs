//! `aiperf synthesize agentic-code`: a small workload written, its rows checked against
//! the manifest and quality report, validated, reproduced from its seed, and replayed
//! against the mock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{BIN, MockChild, Profile, read_json, read_jsonl, stderr_text};

fn aiperf(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Small contexts, short delays and frequent resets, so that a replay is quick.
const SMALL: &str = r#"{
  "max_prompt_tokens": 6000,
  "block_size": 64,
  "new_tokens_per_turn": {"mean": 300, "median": 200},
  "generation_length": {"mean": 20, "median": 10, "max": 30},
  "inter_turn_delay": {"agentic_delay": {"mean": 20, "median": 10}, "human_delay": {"mean": 60, "median": 40}},
  "reset": {"base_probability": 0.2, "context_scaling": 2.0},
  "cache": {"layer1_tokens": 640, "layer1_5_tokens": 128, "layer2": {"mean": 400, "median": 200},
            "layer1_5_groups": {"num_groups": 3, "zipf_alpha": 1.0}}
}"#;

/// Runs synthesize into `out` and gives the run directory it made.
fn synthesize(out: &Path, args: &[&str]) -> PathBuf {
    let mut all = vec![
        "synthesize",
        "agentic-code",
        "--output",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = aiperf(&all);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains(&format!("Run directory: {}", dirs[0].display())),
        "{stdout}"
    );
    dirs[0].clone()
}

#[test]
fn a_small_agentic_workload_is_written_checked_and_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("small.json");
    std::fs::write(&config, SMALL).unwrap();
    let c = config.to_str().unwrap();
    let run = synthesize(
        &tmp.path().join("a"),
        &["--config", c, "--num-sessions", "12", "--seed", "7"],
    );
    let name = run.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("small_12s_seed7_"), "{name}");

    let rows = read_jsonl(&run.join("dataset.jsonl"));
    // AIPerf's key order.
    let text_rows = std::fs::read_to_string(run.join("dataset.jsonl")).unwrap();
    let first = text_rows.lines().next().unwrap();
    assert!(first.starts_with("{\"session_id\":\"sess-"), "{first}");
    assert!(
        first.contains("],\"timestamp\":0.0,\"group_id\":"),
        "{first}"
    );
    let mut sessions: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in &rows {
        sessions
            .entry(r["session_id"].as_str().unwrap().to_string())
            .or_default()
            .push(r);
        // Every id but the last stands for a whole 64-token block.
        let n = r["input_length"].as_u64().unwrap();
        assert_eq!(
            r["hash_ids"].as_array().unwrap().len() as u64,
            n.div_ceil(64),
            "{r}"
        );
        assert!(
            (30..=30).contains(&r["output_length"].as_u64().unwrap()),
            "output floor 30 = max: {r}"
        );
    }
    assert_eq!(sessions.len(), 12);
    for turns in sessions.values() {
        // The first row: the whole prefix, starting with L1's 10 shared blocks.
        let first = turns[0];
        assert_eq!(first["timestamp"], 0.0);
        assert!(first["group_id"].as_u64().unwrap() < 3);
        let ids: Vec<u64> = first["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(ids[..10], (0..10).collect::<Vec<u64>>()[..]);
        assert!(
            first["input_length"].as_u64().unwrap() > 768,
            "L1 and L1.5 are whole blocks"
        );
        for later in &turns[1..] {
            assert!(later["delay"].as_f64().unwrap() >= 0.0 && later.get("timestamp").is_none());
        }
        // The whole context stays under the window.
        let total: u64 = turns
            .iter()
            .map(|t| t["input_length"].as_u64().unwrap())
            .sum::<u64>()
            + turns[..turns.len() - 1]
                .iter()
                .map(|t| t["output_length"].as_u64().unwrap())
                .sum::<u64>();
        assert!(total < 6000, "{total}");
    }
    let manifest = read_json(&run.join("manifest.json"));
    assert_eq!(manifest["seed"], 7);
    assert_eq!(manifest["num_sessions"], 12);
    assert_eq!(manifest["config_name"], "small");
    let gp = &manifest["generation_params"];
    assert_eq!(gp["max_prompt_tokens"], 6000);
    assert!((gp["generation_length"]["mu"].as_f64().unwrap() - 10f64.ln()).abs() < 1e-9);
    let quality = read_json(&run.join("quality.json"));
    let ends = &quality["session_end_stats"];
    assert_eq!(ends["total_sessions"], 12);
    assert_eq!(
        ends["forced_retires"].as_u64().unwrap() + ends["probabilistic_resets"].as_u64().unwrap(),
        12
    );
    let tps = &quality["observed_vs_target"]["turns_per_session"]["observed"];
    assert_eq!(tps["count"], 12);
    let mean = rows.len() as f64 / 12.0;
    assert!(
        (tps["mean"].as_f64().unwrap() - mean).abs() < 0.006,
        "{tps} vs {mean}"
    );
    assert_eq!(
        quality["observed_vs_target"]["generation_length"]["observed"]["count"],
        rows.len()
    );

    // The same seed and settings: the same trace; the manifest loads as settings.
    let again = synthesize(
        &tmp.path().join("b"),
        &[
            "--config",
            run.join("manifest.json").to_str().unwrap(),
            "--num-sessions",
            "12",
            "--seed",
            "7",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(again.join("dataset.jsonl")).unwrap(),
        std::fs::read_to_string(run.join("dataset.jsonl")).unwrap()
    );

    let trace = run.join("dataset.jsonl");
    let out = aiperf(&[
        "validate",
        "mooncake-trace",
        trace.to_str().unwrap(),
        "--isl-block-size",
        "64",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // Replayed against the mock: one request per row.
    let mock = MockChild::spawn(&["--fast"]);
    let art = tmp.path().join("replay");
    let out = Profile::new("mock-model")
        .url(&mock.url)
        .artifact_dir(&art)
        .args(&[
            "--input-file",
            trace.to_str().unwrap(),
            "--custom-dataset-type",
            "mooncake_trace",
            "--isl-block-size",
            "64",
            "--concurrency",
            "4",
        ])
        .run();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let summary = read_json(&art.join("profile_export_aiperf.json"));
    assert_eq!(
        summary["request_count"]["avg"].as_f64().unwrap() as usize,
        rows.len()
    );
}

#[test]
fn bad_settings_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, r#"{"generation_length": {"mean": 1, "median": 2}}"#).unwrap();
    let out = aiperf(&[
        "synthesize",
        "agentic-code",
        "--config",
        bad.to_str().unwrap(),
        "--output",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("generation_length: mean (1) must be >= median (2)"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&bad, "{\n  \"reset\": ,\n}").unwrap();
    let out = aiperf(&[
        "synthesize",
        "agentic-code",
        "--config",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not JSON (line 2, column"),
        "{}",
        text(&out.stderr)
    );
    let out = aiperf(&["synthesize", "agentic-code", "--config", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("give a JSON file or a bundled name (default)"));
    let out = aiperf(&["synthesize", "other-target"]);
    assert_eq!(out.status.code(), Some(2));
    let out = aiperf(&["synthesize", "agentic-code", "--num-sessions", "0"]);
    assert_eq!(out.status.code(), Some(2));
}
