//! `--slice-duration`: the time-slice files have AIPerf 0.13's layout (checked against
//! tests/fixtures/aiperf-timeslices/layout.txt and against the summary JSON's metric
//! objects), and their values agree with the per-request JSONL.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{MockChild, read_json, read_jsonl, run_profile, stderr_text};

/// The fixture's lines as (kind, rest).
fn layout() -> Vec<(String, String)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/aiperf-timeslices/layout.txt");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (kind, rest) = l.split_once(' ').expect("kind and value");
            (kind.to_string(), rest.to_string())
        })
        .collect()
}

fn of_kind(layout: &[(String, String)], kind: &str) -> Vec<String> {
    layout
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, v)| v.clone())
        .collect()
}

/// 30 streamed chat requests at a constant 10 per second (3 s of sends).
fn constant_rate_run(mock: &MockChild, dir: &Path, extra: &[&str]) {
    let mut args = vec![
        "--model",
        "test-model",
        "--endpoint-type",
        "chat",
        "--streaming",
        "--url",
        &mock.url,
        "--request-count",
        "30",
        "--request-rate",
        "10",
        "--request-rate-mode",
        "constant",
        "--synthetic-input-tokens-mean",
        "50",
        "--output-tokens-mean",
        "8",
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        stderr_text(&out)
    );
}

fn csv_rows(path: &Path) -> (String, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.split("\r\n").filter(|l| !l.is_empty());
    let header = lines.next().expect("header").to_string();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

#[test]
fn three_second_run_gives_three_slices_matching_the_records() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "10", "--itl", "2"]);
    let dir = tmp.path().join("run");
    constant_rate_run(&mock, &dir, &["--slice-duration", "1"]);
    let layout = layout();

    let doc = read_json(&dir.join("profile_export_aiperf_timeslices.json"));
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    assert_eq!(records.len(), 30);

    // Layout: top-level keys, slice keys, metric objects shaped as in the summary JSON.
    let text = std::fs::read_to_string(dir.join("profile_export_aiperf_timeslices.json")).unwrap();
    let want_top = of_kind(&layout, "json_top");
    let top: BTreeSet<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(top, want_top.iter().collect());
    let positions: Vec<usize> = want_top
        .iter()
        .map(|k| text.find(&format!("\n  \"{k}\":")).unwrap())
        .collect();
    assert!(positions.is_sorted(), "top-level key order {positions:?}");
    assert_eq!(doc["input_config"], summary["input_config"]);
    let slices = doc["timeslices"].as_array().unwrap();
    let slice_keys = of_kind(&layout, "slice_key");
    let last_only = of_kind(&layout, "last_slice_key");
    // Every slice object starts with the fixed keys, in order.
    let opening = slice_keys
        .iter()
        .map(|k| format!("\"{k}\": "))
        .collect::<Vec<_>>();
    for (i, _) in slices.iter().enumerate() {
        let at = text.find(&format!("{}{i},", opening[0])).unwrap();
        let mut pos = at;
        for k in &opening[1..] {
            let next = text[pos..].find(k.as_str()).unwrap() + pos;
            assert!(!text[pos..next].contains('{'), "slice {i}: {k} is not next");
            pos = next;
        }
    }
    for (i, slice) in slices.iter().enumerate() {
        let obj = slice.as_object().unwrap();
        let last = i + 1 == slices.len();
        for k in &slice_keys {
            assert!(obj.contains_key(k), "slice {i} lacks {k}");
        }
        for k in &last_only {
            assert_eq!(obj.contains_key(k), last, "slice {i}: {k}");
        }
        assert_eq!(slice["timeslice_index"], i);
        let fixed: BTreeSet<&String> = slice_keys.iter().chain(&last_only).collect();
        for (tag, obj) in obj.iter().filter(|(k, _)| !fixed.contains(k)) {
            let in_summary = summary
                .get(tag)
                .unwrap_or_else(|| panic!("slice metric {tag} is not in the summary JSON"));
            let got: BTreeSet<&String> = obj.as_object().unwrap().keys().collect();
            let want: BTreeSet<&String> = in_summary.as_object().unwrap().keys().collect();
            assert_eq!(got, want, "{tag} statistics");
            assert_eq!(obj["unit"], in_summary["unit"], "{tag} unit");
        }
        for m in of_kind(&layout, "metric") {
            let tag = m.split(' ').next().unwrap();
            assert!(slice.get(tag).is_some(), "slice {i} lacks {tag}");
        }
    }
    assert_eq!(slices.last().unwrap()["is_complete"], false);

    // Values: three windows of 1 s from the first start, requests counted by start.
    let starts: Vec<u64> = records
        .iter()
        .map(|r| r["metadata"]["request_start_ns"].as_u64().unwrap())
        .collect();
    let first = *starts.iter().min().unwrap();
    let mut by_window: BTreeMap<u64, u64> = BTreeMap::new();
    for s in &starts {
        *by_window.entry((s - first) / 1_000_000_000).or_default() += 1;
    }
    assert_eq!(by_window.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(slices.len(), 3);
    let last_end = records
        .iter()
        .map(|r| r["metadata"]["request_end_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    let mut total = 0;
    for (i, (window, count)) in by_window.iter().enumerate() {
        let slice = &slices[i];
        let start = slice["start_ns"].as_u64().unwrap();
        let end = slice["end_ns"].as_u64().unwrap();
        assert_eq!(start, first + window * 1_000_000_000);
        if i + 1 < slices.len() {
            assert_eq!(end, start + 1_000_000_000);
        } else {
            // The last window ends at the last response (its last chunk, within 1 ms of
            // the record's end).
            assert!(
                end <= last_end && end + 1_000_000 >= last_end,
                "{end} vs {last_end}"
            );
        }
        let n = slice["request_count"]["avg"].as_f64().unwrap();
        assert_eq!(n, *count as f64, "slice {i}");
        assert_eq!(slice["time_to_first_token"]["count"], *count, "slice {i}");
        // Throughput over the window's own length.
        let seconds = (end - start) as f64 / 1e9;
        let rate = slice["request_throughput"]["avg"].as_f64().unwrap();
        assert!(
            (rate - n / seconds).abs() < 1e-6 * rate,
            "{rate} vs {n}/{seconds}"
        );
        total += count;
    }
    assert_eq!(total, 30);
    assert_eq!(summary["request_count"]["avg"], 30.0);

    // CSV: the tidy layout, the same slices and numbers as the JSON.
    let (header, rows) = csv_rows(&dir.join("profile_export_aiperf_timeslices.csv"));
    assert_eq!(header, of_kind(&layout, "csv_header")[0]);
    let stats = of_kind(&layout, "stat");
    let mut seen = BTreeSet::new();
    // Every row carries its slice's wall-clock bounds, the JSON's.
    for row in &rows {
        assert_eq!(row.len(), 7, "{row:?}");
        assert!(stats.contains(&row[5]), "stat {row:?}");
        let slice = &slices[row[0].parse::<usize>().unwrap()];
        assert_eq!(row[1], slice["start_ns"].to_string(), "{row:?}");
        assert_eq!(row[2], slice["end_ns"].to_string(), "{row:?}");
        seen.insert(row[0].clone());
    }
    assert_eq!(seen, BTreeSet::from(["0".into(), "1".into(), "2".into()]));
    for m in of_kind(&layout, "metric") {
        let parts: Vec<&str> = m.split(' ').collect();
        let (tag, header, unit) = (parts[0], parts[1].replace('_', " "), parts[2]);
        for (i, slice) in slices.iter().enumerate() {
            let avg = rows
                .iter()
                .find(|r| r[0] == i.to_string() && r[3] == header && r[5] == "avg")
                .unwrap_or_else(|| panic!("no avg row for {header} in slice {i}"));
            assert_eq!(avg[4], unit, "{tag} unit");
            let want = slice[tag]["avg"].as_f64().unwrap();
            let got: f64 = avg[6].parse().unwrap();
            assert!(
                (got - want).abs() <= 0.005 + 1e-9,
                "{tag} slice {i}: {got} vs {want}"
            );
        }
    }
    // Counts are whole numbers in the CSV.
    let count_row = rows
        .iter()
        .find(|r| r[0] == "0" && r[3] == "Request Count")
        .unwrap();
    assert_eq!(count_row[6], by_window[&0].to_string());
}

#[test]
fn prefix_names_the_files_and_summary_level_keeps_them() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "1"]);
    let dir = tmp.path().join("run");
    let out = run_profile(&[
        "--model",
        "test-model",
        "--endpoint-type",
        "chat",
        "--url",
        &mock.url,
        "--request-count",
        "4",
        "--concurrency",
        "2",
        "--output-tokens-mean",
        "4",
        "--tokenizer",
        "builtin",
        "--slice-duration",
        "2m",
        "--export-level",
        "summary",
        "--profile-export-prefix",
        "run1.json",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let doc = read_json(&dir.join("run1_timeslices.json"));
    // A 2-minute window holds the whole run: one slice, shortened to it.
    let slices = doc["timeslices"].as_array().unwrap();
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0]["request_count"]["avg"], 4.0);
    assert_eq!(slices[0]["is_complete"], false);
    assert!(dir.join("run1_timeslices.csv").exists());
    assert!(!dir.join("profile_export_aiperf_timeslices.json").exists());
    assert!(!dir.join("run1.jsonl").exists());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("run1_timeslices.json"), "{stdout}");
}

#[test]
fn without_the_flag_no_slice_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "1"]);
    let dir = tmp.path().join("run");
    let out = run_profile(&[
        "--model",
        "test-model",
        "--url",
        &mock.url,
        "--request-count",
        "2",
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(dir.join("profile_export_aiperf.json").exists());
    assert!(!dir.join("profile_export_aiperf_timeslices.json").exists());
    assert!(!dir.join("profile_export_aiperf_timeslices.csv").exists());
}

#[test]
fn bad_slice_durations_exit_2_naming_the_flag() {
    for bad in ["0", "-2", "abc", "1d"] {
        let out = run_profile(&[
            "--model",
            "m",
            "--url",
            "127.0.0.1:9",
            "--request-count",
            "1",
            &format!("--slice-duration={bad}"),
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr_text(&out));
        let err = stderr_text(&out);
        assert!(err.contains("--slice-duration"), "{bad}: {err}");
    }
}
