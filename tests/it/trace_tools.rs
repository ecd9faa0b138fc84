//! `aiperf analyze-trace` and `aiperf validate mooncake-trace` on small traces whose
//! statistics are worked out by hand.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{read_json, stderr_text};

const BIN: &str = env!("CARGO_BIN_EXE_aiperf");

/// Five rows, hash ids standing for 4 tokens each. ISL 10, 12, 8, 6, 20; OSL 5, 7, 3, 10, 5.
/// Blocks 1 and 2 open three rows; row 3 is made only of them.
const TRACE: &str = r#"{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 10, "input_length": 12, "output_length": 7, "hash_ids": [1, 2, 4]}

{"timestamp": 20, "input_length": 8, "output_length": 3, "hash_ids": [1, 2]}
{"timestamp": 30, "input_length": 6, "output_length": 10, "hash_ids": [5, 6]}
{"timestamp": 40, "input_length": 20, "output_length": 5}
"#;

fn aiperf(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn stdout_text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn close(got: &serde_json::Value, want: f64) {
    let got = got.as_f64().unwrap_or_else(|| panic!("{got} is no number"));
    assert!((got - want).abs() < 1e-9, "{got} != {want}");
}

fn assert_stats(stats: &serde_json::Value, want: [f64; 7]) {
    for (key, w) in ["mean", "std_dev", "min", "p25", "median", "p75", "max"]
        .iter()
        .zip(want)
    {
        close(&stats[key], w);
    }
}

#[test]
fn analyze_trace_reports_lengths_prefixes_and_hit_rates() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write(tmp.path(), "trace.jsonl", TRACE);
    let report = tmp.path().join("out/analysis.json");
    let out = aiperf(&[
        "analyze-trace",
        trace.to_str().unwrap(),
        "--block-size",
        "4",
        "--output-file",
        report.to_str().unwrap(),
    ]);
    let stdout = stdout_text(&out);
    assert!(out.status.success(), "{}{stdout}", stderr_text(&out));
    let a = read_json(&report);

    assert_eq!(a["total_requests"], 5);
    // Prefixes (1) (1,2) (1,2,3) (1,2,4) (5) (5,6); block 1 opens three rows, 5 only one.
    assert_eq!(a["unique_prefixes"], 6);
    assert_eq!(a["num_prefix_groups"], 1);
    // (1) and (1,2) are seen three times each: 6 of the 10 prefix occurrences.
    close(&a["prefix_reuse_ratio"], 0.6);
    assert_eq!(
        (a["min_isl"].as_u64(), a["max_isl"].as_u64()),
        (Some(6), Some(20))
    );
    close(&a["avg_isl"], 11.2);
    assert_eq!(
        (a["min_osl"].as_u64(), a["max_osl"].as_u64()),
        (Some(3), Some(10))
    );
    close(&a["avg_osl"], 6.0);
    // ISL deviations from 11.2: squares sum to 116.8, over 5; OSL: 28 / 5.
    assert_stats(
        &a["isl_stats"],
        [11.2, (116.8f64 / 5.0).sqrt(), 6.0, 8.0, 10.0, 12.0, 20.0],
    );
    assert_stats(
        &a["osl_stats"],
        [6.0, (28.0f64 / 5.0).sqrt(), 3.0, 5.0, 5.0, 7.0, 10.0],
    );
    // Context: rows 1 and 2 share blocks 1 and 2 (2 x 4 tokens), row 3 is all shared (its
    // whole 8), rows 4 and 5 nothing: 8, 8, 8, 0, 0. The rest is unique: 2, 4, 0, 6, 20.
    assert_stats(
        &a["context_length_stats"],
        [4.8, (76.8f64 / 5.0).sqrt(), 0.0, 0.0, 8.0, 8.0, 8.0],
    );
    assert_stats(
        &a["unique_prompt_length_stats"],
        [6.4, (251.2f64 / 5.0).sqrt(), 0.0, 2.0, 4.0, 6.0, 20.0],
    );
    // An infinite cache: row 1 misses, row 2 hits 1 and 2 of 3, row 3 all, row 4 misses;
    // row 5 has no hash ids and no hit rate.
    close(&a["cache_hit_rate"], 5.0 / 12.0);
    assert_stats(
        &a["hit_rate_stats"],
        [
            5.0 / 12.0,
            ((2.0 * (5.0f64 / 12.0).powi(2) + (0.25f64).powi(2) + (7.0f64 / 12.0).powi(2)) / 4.0)
                .sqrt(),
            0.0,
            0.0,
            1.0 / 3.0,
            2.0 / 3.0 + 0.25 * (1.0 - 2.0 / 3.0),
            1.0,
        ],
    );

    // The console: the counts, then AIPerf's rows with two decimals.
    for want in [
        "Trace Analysis Report",
        "Total requests:   5",
        "Unique prefixes:  6",
        "Prefix groups:    1",
        "Trace Statistics",
        &format!("Analysis report saved to {}", report.display()),
    ] {
        assert!(stdout.contains(want), "{want:?} not in\n{stdout}");
    }
    let row = |name: &str| -> Vec<String> {
        let line = stdout
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no {name} row in\n{stdout}"));
        line.split(['│', '┃'])
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    };
    assert_eq!(
        row("Input Length"),
        [
            "Input Length",
            "11.20",
            "4.83",
            "6.00",
            "8.00",
            "10.00",
            "12.00",
            "20.00"
        ]
    );
    assert_eq!(
        row("Theoretical Hit Rates"),
        [
            "Theoretical Hit Rates",
            "0.42",
            "0.43",
            "0.00",
            "0.00",
            "0.33",
            "0.75",
            "1.00"
        ]
    );
}

#[test]
fn analyze_trace_context_length_follows_the_block_size() {
    // One shared block then a unique one: the context is one block, whatever its size.
    let tmp = tempfile::tempdir().unwrap();
    let trace = write(
        tmp.path(),
        "t.jsonl",
        "{\"input_length\": 100, \"hash_ids\": [7, 8]}\n{\"input_length\": 100, \"hash_ids\": [7, 9]}\n",
    );
    for (block, context) in [(64, 64.0), (90, 90.0)] {
        let report = tmp.path().join(format!("a{block}.json"));
        let out = aiperf(&[
            "analyze-trace",
            "--input-file",
            trace.to_str().unwrap(),
            "--block-size",
            &block.to_string(),
            "--output-file",
            report.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr_text(&out));
        let a = read_json(&report);
        close(&a["context_length_stats"]["mean"], context);
        close(&a["unique_prompt_length_stats"]["mean"], 100.0 - context);
        // Hit rates count blocks, not tokens: 0 then 1 of 2.
        close(&a["cache_hit_rate"], 0.25);
        // No output_length: 0, as AIPerf counts it.
        close(&a["osl_stats"]["max"], 0.0);
    }
    // Blocks of 32 cannot hold 100 tokens in two ids: the line and the flag are named.
    let out = aiperf(&[
        "analyze-trace",
        trace.to_str().unwrap(),
        "--block-size",
        "32",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_text(&out);
    assert!(
        err.contains("t.jsonl:1: field 'hash_ids'") && err.contains("--block-size"),
        "{err}"
    );
    assert!(err.contains("and 1 more problem(s)"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn analyze_trace_refuses_missing_and_bad_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = aiperf(&[
        "analyze-trace",
        tmp.path().join("nope.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_text(&out).contains("nope.jsonl: cannot read the input file"));

    let bad = write(
        tmp.path(),
        "bad.jsonl",
        "{\"input_length\": 10}\n{\"input_length\": 10,}\n",
    );
    let out = aiperf(&["analyze-trace", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_text(&out);
    assert!(err.contains("bad.jsonl:2: malformed JSON"), "{err}");

    let out = aiperf(&["analyze-trace", bad.to_str().unwrap(), "--block-size", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn validate_passes_a_good_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write(tmp.path(), "trace.jsonl", TRACE);
    let path = trace.to_str().unwrap();
    // AIPerf's spelling, and the target as a flag with the file positional.
    for args in [
        vec![
            "validate",
            "mooncake-trace",
            "--input",
            path,
            "--isl-block-size",
            "4",
        ],
        vec![
            "validate",
            "--target",
            "mooncake-trace",
            path,
            "--isl-block-size",
            "4",
        ],
    ] {
        let out = aiperf(&args);
        assert!(out.status.success(), "{args:?}: {}", stdout_text(&out));
        assert_eq!(
            stdout_text(&out),
            "Validation passed: 5 rows are Mooncake-compatible.\n"
        );
    }
    // With aiperf profile's default blocks of 512 tokens, three ids cannot make 10 tokens.
    let out = aiperf(&["validate", "mooncake-trace", "--input", path]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout_text(&out);
    assert!(
        text.contains("Validation failed with 4 error(s):"),
        "{text}"
    );
    assert!(text.contains("trace.jsonl:1: field 'hash_ids': 3 ids do not fit input_length 10 with blocks of 512 tokens"), "{text}");
    assert!(text.contains("check --isl-block-size"), "{text}");
}

#[test]
fn validate_lists_every_bad_line() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write(
        tmp.path(),
        "bad.jsonl",
        concat!(
            "{\"input_length\": 10, \"output_length\": 2}\n",
            "{\"input_length\": 10, \"output_length\": 2\n",
            "{\"input_length\": 0}\n",
            "{\"text_input\": \"hi\", \"input_length\": 3}\n",
            "[1, 2]\n",
            "{\"output_length\": 4}\n",
            "{\"input_length\": 5, \"output_length\": -1}\n",
            "{\"input_length\": 5, \"hash_ids\": [1, \"x\"]}\n",
            "{\"text_input\": \"fine\", \"colour\": \"red\"}\n",
        ),
    );
    let out = aiperf(&[
        "validate",
        "mooncake-trace",
        "--input",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout_text(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Validation failed with 7 error(s):", "{text}");
    let at = |n: usize| format!("  {}:{n}: ", trace.display());
    let wanted = [
        (2, "malformed JSON"),
        (3, "field 'input_length': 0 is not allowed"),
        (
            4,
            "field 'text_input': give either text_input or input_length, not both",
        ),
        (5, "each line must be a JSON object"),
        (
            6,
            "no content; give input_length, text_input, messages or payload",
        ),
        (
            7,
            "field 'output_length': must be a whole number >= 0, not -1",
        ),
        (8, "field 'hash_ids': must be a list of whole numbers >= 0"),
    ];
    for (i, (line, what)) in wanted.iter().enumerate() {
        let got = lines[i + 1];
        assert!(
            got.starts_with(&at(*line)) && got.contains(what),
            "{got:?} for line {line}"
        );
    }
    assert_eq!(
        lines[8],
        "7 of 9 rows are bad; `aiperf profile --input-file` would refuse the file at the first."
    );
    // An unknown field is no error, but is named.
    assert!(
        stderr_text(&out).contains("colour (first at"),
        "{}",
        stderr_text(&out)
    );
}

#[test]
fn validate_whole_file_problems_and_bad_command_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing.jsonl");
    let out = aiperf(&[
        "validate",
        "mooncake-trace",
        "--input",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout_text(&out),
        format!("Validation failed: {} is not a file.\n", missing.display())
    );

    let empty = write(tmp.path(), "empty.jsonl", "\n\n");
    let out = aiperf(&[
        "validate",
        "mooncake-trace",
        "--input",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout_text(&out).contains("empty.jsonl: no entries in the file"));

    // Timestamps in seconds * 1e6 (microseconds) span years: the first line past a year.
    let long = write(
        tmp.path(),
        "long.jsonl",
        "{\"timestamp\": 0, \"text_input\": \"a\"}\n{\"timestamp\": 40000000000, \"text_input\": \"b\"}\n",
    );
    let out = aiperf(&[
        "validate",
        "mooncake-trace",
        "--input",
        long.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout_text(&out);
    assert!(
        text.contains("long.jsonl:2: field 'timestamp'") && text.contains("365 days"),
        "{text}"
    );

    let out = aiperf(&["validate", "--input", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_text(&out).contains("give the target to validate"));
    let out = aiperf(&["validate", "sharegpt", "--input", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_text(&out).contains("'sharegpt' is not a target to validate"));
    let out = aiperf(&["validate", "mooncake-trace"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_text(&out).contains("give the file to validate"));
}

/// `validate` and `aiperf profile --input-file` read a trace the same way: the file validate
/// passes runs, and the one it fails is refused by profile with validate's first message.
#[test]
fn validate_agrees_with_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write(tmp.path(), "trace.jsonl", TRACE);
    let profile = |block: &str, run: &str| {
        Command::new(BIN)
            .args([
                "profile",
                "-m",
                "m",
                "--tokenizer",
                "builtin",
                "--mock-server",
            ])
            .args(["--custom-dataset-type", "mooncake_trace", "--ui", "none"])
            .args(["--isl-block-size", block, "--input-file"])
            .arg(&trace)
            .arg("--artifact-dir")
            .arg(tmp.path().join(run))
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap()
    };
    let path = trace.to_str().unwrap();
    let passed = aiperf(&[
        "validate",
        "mooncake-trace",
        "--input",
        path,
        "--isl-block-size",
        "4",
    ]);
    assert_eq!(passed.status.code(), Some(0));
    let out = profile("4", "good");
    assert!(out.status.success(), "{}", stderr_text(&out));
    let records = crate::common::read_jsonl(&tmp.path().join("good/profile_export.jsonl"));
    assert_eq!(records.len(), 5);

    let failed = aiperf(&["validate", "mooncake-trace", "--input", path]);
    assert_eq!(failed.status.code(), Some(1));
    let first = stdout_text(&failed)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    let out = profile("512", "bad");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains(&format!("error: {first}")),
        "{first}\n{}",
        stderr_text(&out)
    );
}
