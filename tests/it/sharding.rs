//! Sharded runs of the real binary against one mock server: N shard processes started
//! together with --start-at, merged with `aiperf merge`, compared with a single process
//! running the same plan. The merged percentiles are checked against ones recomputed here
//! from the union of the shards' per-record lines (numpy's linear rule).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common;

use common::{BIN, MockChild, read_json, read_jsonl};

/// The plan every run here shares: a Poisson rate, varied prompt and output lengths.
fn plan_args<'a>(url: &'a str, dir: &'a Path, seed: &'a str) -> Vec<&'a str> {
    vec![
        "profile",
        "--model",
        "mock-model",
        "--tokenizer",
        "builtin",
        "--streaming",
        "--isl",
        "40",
        "--isl-stddev",
        "15",
        "--osl",
        "6",
        "--osl-stddev",
        "3",
        "--extra-inputs",
        "ignore_eos:true",
        "--url",
        url,
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--random-seed",
        seed,
        "--no-server-metrics",
        "--no-gpu-telemetry",
    ]
}

fn spawn(args: &[&str], envs: &[(&str, &str)]) -> Child {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("AIPERF_SHARD_COUNT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.spawn().expect("start aiperf")
}

fn run(args: &[&str], envs: &[(&str, &str)]) -> Output {
    spawn(args, envs).wait_with_output().expect("aiperf ran")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn epoch_s_in(seconds: f64) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    format!("{:.3}", now.as_secs_f64() + seconds)
}

fn profiling(records: &[Value]) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == "profiling")
        .collect()
}

fn metric(records: &[&Value], tag: &str) -> Vec<f64> {
    let mut v: Vec<f64> = records
        .iter()
        .filter_map(|r| r["metrics"][tag]["value"].as_f64())
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// numpy.percentile's default (linear between closest ranks), on sorted values.
fn numpy_percentile(sorted: &[f64], p: f64) -> f64 {
    let pos = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Send offsets from the shared start (ns), sorted.
fn offsets(records: &[&Value], start_ns: u64) -> Vec<i64> {
    let mut o: Vec<i64> = records
        .iter()
        .map(|r| r["metadata"]["scheduled_ns"].as_u64().unwrap() as i64 - start_ns as i64)
        .collect();
    o.sort();
    o
}

fn rate(offsets: &[i64]) -> f64 {
    (offsets.len() - 1) as f64 / ((offsets[offsets.len() - 1] - offsets[0]) as f64 / 1e9)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-9)
}

#[test]
fn four_shards_merge_into_the_single_run() {
    const N: usize = 4;
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "1"]);
    let root = tempfile::tempdir().unwrap();
    let load = [
        "--request-rate",
        "40",
        "--request-rate-mode",
        "poisson",
        "--request-count",
        "120",
    ];

    // Four shard processes at once, all waiting for one start a few seconds ahead.
    let start_at = epoch_s_in(6.0);
    let dirs: Vec<PathBuf> = (0..N)
        .map(|i| root.path().join(format!("shard-{i}")))
        .collect();
    let children: Vec<Child> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let mut args = plan_args(&mock.url, dir, "11");
            args.extend_from_slice(&load);
            let index = i.to_string();
            args.extend(["--shard-index", &index, "--shard-count", "4"]);
            args.extend(["--start-at", &start_at]);
            spawn(&args, &[])
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "shard {i}: {}", stderr(&out));
    }
    let merged_dir = root.path().join("merged");
    let out = run(
        &[
            "merge",
            root.path().to_str().unwrap(),
            "--output",
            merged_dir.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "merge: {}", stderr(&out));
    let console = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{console}");
    assert!(
        console.contains("Shards") && console.contains("3 of 4"),
        "{console}"
    );

    // The same plan from one process.
    let single_dir = root.path().join("single");
    let single_start = epoch_s_in(3.0);
    let mut args = plan_args(&mock.url, &single_dir, "11");
    args.extend_from_slice(&load);
    args.extend(["--start-at", &single_start]);
    let out = run(&args, &[]);
    assert!(out.status.success(), "single: {}", stderr(&out));

    let merged = read_json(&merged_dir.join("profile_export_aiperf.json"));
    // The merged directory holds every shard's records in send order, and a report.
    let merged_records = read_jsonl(&merged_dir.join("profile_export.jsonl"));
    let starts: Vec<u64> = profiling(&merged_records)
        .iter()
        .map(|r| r["metadata"]["request_start_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(starts.len(), 120);
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "send order");
    assert!(merged_dir.join("report.html").is_file());
    let single = read_json(&single_dir.join("profile_export_aiperf.json"));
    let single_records = read_jsonl(&single_dir.join("profile_export.jsonl"));
    let single_records = profiling(&single_records);
    let mut union_owned = Vec::new();
    let mut shard_offsets = Vec::new();
    let mut hashes = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let summary = read_json(&dir.join("profile_export_aiperf.json"));
        let block = &summary["shard"];
        assert_eq!(block["index"], i as u64);
        assert_eq!(block["count"], 4);
        hashes.push(block["plan_hash"].as_str().unwrap().to_string());
        // The offset against the mock's Date header, on the same machine: within its bound.
        let o = &block["clock_offset"];
        let (offset, bound) = (
            o["offset_ms"].as_f64().unwrap(),
            o["uncertainty_ms"].as_f64().unwrap(),
        );
        assert!(offset.abs() <= bound + 1.0, "shard {i}: {o}");
        let start_ns = block["start_at_ns"].as_u64().unwrap();
        let records = read_jsonl(&dir.join("profile_export.jsonl"));
        // Exactly every fourth arrival of the 120.
        assert_eq!(profiling(&records).len(), 30, "shard {i}");
        shard_offsets.extend(offsets(&profiling(&records), start_ns));
        union_owned.extend(records);
    }
    assert!(hashes.iter().all(|h| *h == hashes[0]), "{hashes:?}");
    let union = profiling(&union_owned);

    // Request count, and the same prompts and output lengths (same seed, same entries).
    assert_eq!(merged["request_count"]["avg"], 120.0);
    assert_eq!(single["request_count"]["avg"], 120.0);
    for tag in ["input_sequence_length", "output_sequence_length"] {
        assert_eq!(metric(&union, tag), metric(&single_records, tag), "{tag}");
        assert_eq!(merged[tag]["avg"], single[tag]["avg"], "{tag}");
        assert_eq!(merged[tag]["p90"], single[tag]["p90"], "{tag}");
    }
    // A spread of lengths, so that the comparison above means something.
    let isl = metric(&union, "input_sequence_length");
    assert!(isl[isl.len() - 1] - isl[0] >= 20.0, "{isl:?}");

    // The union of the shards' schedules is the single schedule.
    shard_offsets.sort();
    let single_offsets = offsets(
        &single_records,
        single["shard"]["start_at_ns"].as_u64().unwrap(),
    );
    assert_eq!(shard_offsets.len(), single_offsets.len());
    for (a, b) in shard_offsets.iter().zip(&single_offsets) {
        assert!((a - b).abs() < 2_000_000, "offset {a} vs {b} ns");
    }
    let (r_union, r_single) = (rate(&shard_offsets), rate(&single_offsets));
    assert!(
        (r_union / r_single - 1.0).abs() < 0.005,
        "rate {r_union} vs {r_single}"
    );

    // Merged percentiles are those of the union of the records, not averages of shards.
    for tag in [
        "time_to_first_token",
        "request_latency",
        "inter_token_latency",
    ] {
        let values = metric(&union, tag);
        // Every request has TTFT and latency; ITL only those with two tokens or more.
        assert!(values.len() >= 100, "{tag}: {}", values.len());
        assert_eq!(merged[tag]["count"], values.len() as u64, "{tag}");
        for (key, p) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p25", 25.0)] {
            let want = numpy_percentile(&values, p);
            let got = merged[tag][key].as_f64().unwrap();
            assert!(
                close(got, want),
                "{tag} {key}: merged {got}, recomputed {want}"
            );
        }
        let avg = values.iter().sum::<f64>() / values.len() as f64;
        assert!(
            close(merged[tag]["avg"].as_f64().unwrap(), avg),
            "{tag} avg"
        );
    }
    let shards = merged["merged_shards"].as_array().unwrap();
    assert_eq!(shards.len(), 4);
    for s in shards {
        let r = s["achieved_request_rate"].as_f64().unwrap();
        assert!(r > 4.0 && r < 25.0, "{s}");
    }
    assert_eq!(merged["shard"]["plan_hash"].as_str().unwrap(), hashes[0]);
    // Side by side, for the record.
    for tag in [
        "time_to_first_token",
        "request_latency",
        "request_throughput",
    ] {
        println!(
            "{tag}: merged avg {} p99 {} | single avg {} p99 {}",
            merged[tag]["avg"], merged[tag]["p99"], single[tag]["avg"], single[tag]["p99"]
        );
    }
}

#[test]
fn index_from_the_environment_and_merge_refusals() {
    let mock = MockChild::spawn(&["--fast"]);
    let root = tempfile::tempdir().unwrap();
    let load = ["--concurrency", "2", "--request-count", "10"];
    let shard = |name: &str, seed: &str, envs: &[(&str, &str)], flags: &[&str]| {
        let dir = root.path().join(name);
        let mut args = plan_args(&mock.url, &dir, seed);
        args.extend_from_slice(&load);
        args.extend_from_slice(flags);
        let out = run(&args, envs);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        dir
    };
    // Shard 1 of 2 from JOB_COMPLETION_INDEX and AIPERF_SHARD_COUNT alone, as a Job pod.
    let env = [("JOB_COMPLETION_INDEX", "1"), ("AIPERF_SHARD_COUNT", "2")];
    let one = shard("one", "11", &env, &[]);
    let summary = read_json(&one.join("profile_export_aiperf.json"));
    assert_eq!(summary["shard"]["index"], 1);
    assert_eq!(summary["shard"]["count"], 2);
    assert_eq!(
        profiling(&read_jsonl(&one.join("profile_export.jsonl"))).len(),
        5
    );
    // The command line wins over the environment.
    let zero = shard(
        "zero",
        "11",
        &[("JOB_COMPLETION_INDEX", "1")],
        &["--shard-index", "0", "--shard-count", "2"],
    );
    assert_eq!(
        read_json(&zero.join("profile_export_aiperf.json"))["shard"]["index"],
        0
    );
    let merge = |dirs: &[&PathBuf], out: &str| {
        let out = root.path().join(out);
        let mut args = vec!["merge"];
        args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
        args.extend(["--output", out.to_str().unwrap()]);
        (run(&args, &[]), out)
    };
    let (ok, out) = merge(&[&zero, &one], "merged");
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert_eq!(
        read_json(&out.join("profile_export_aiperf.json"))["request_count"]["avg"],
        10.0
    );

    // Another seed is another plan.
    let other = shard(
        "other",
        "12",
        &[],
        &["--shard-index", "0", "--shard-count", "2"],
    );
    let (refused, _) = merge(&[&other, &one], "mixed");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("different plans"),
        "{}",
        stderr(&refused)
    );
    let (refused, _) = merge(&[&zero], "alone");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("shard(s) 1 of 2 missing"),
        "{}",
        stderr(&refused)
    );
    let (refused, _) = merge(&[&zero, &zero, &one], "twice");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("shard 0 appears twice"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn shard_flags_that_cannot_split_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Flags, environment, and what the error must say.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (
            &["--shard-index", "4", "--shard-count", "4"],
            &[],
            "--shard-index",
        ),
        (
            &["--shard-index", "0", "--shard-count", "0"],
            &[],
            "--shard-count",
        ),
        (
            &["--shard-count", "3"],
            &[],
            "--shard-count 3 needs --shard-index",
        ),
        (
            &[
                "--shard-index",
                "0",
                "--shard-count",
                "3",
                "--concurrency",
                "2",
            ],
            &[],
            "--concurrency 2 is less than --shard-count 3",
        ),
        (
            &["--concurrency", "1"],
            &[("JOB_COMPLETION_INDEX", "0"), ("AIPERF_SHARD_COUNT", "2")],
            "--concurrency 1 is less than --shard-count 2",
        ),
        (&["--start-at", "2001-01-01T00:00:00Z"], &[], "--start-at"),
    ];
    for (flags, envs, want) in cases {
        let mut args = plan_args("127.0.0.1:9", dir.path(), "11");
        args.extend_from_slice(flags);
        let out = run(&args, envs);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{flags:?}: {}", stderr(&out));
    }
}

/// The conversation and session ids of a run's profiling records.
fn ids(dir: &Path, key: &str) -> Vec<String> {
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    profiling(&records)
        .iter()
        .map(|r| r["metadata"][key].as_str().unwrap().to_string())
        .collect()
}

/// Runs `extra` as shards 0..n (one after the other) and once whole; returns the shards'
/// ids of `key` and the whole run's.
fn split_ids(url: &str, extra: &[&str], n: usize, key: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let root = tempfile::tempdir().unwrap();
    let count = n.to_string();
    let mut parts = Vec::new();
    for i in 0..n {
        let dir = root.path().join(format!("shard-{i}"));
        let index = i.to_string();
        let mut args = plan_args(url, &dir, "5");
        args.extend_from_slice(extra);
        args.extend(["--shard-index", &index, "--shard-count", &count]);
        let out = run(&args, &[]);
        assert!(out.status.success(), "shard {i}: {}", stderr(&out));
        parts.push(ids(&dir, key));
    }
    let dir = root.path().join("whole");
    let mut args = plan_args(url, &dir, "5");
    args.extend_from_slice(extra);
    let out = run(&args, &[]);
    assert!(out.status.success(), "whole: {}", stderr(&out));
    (parts, ids(&dir, key))
}

fn sorted_unique(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v.dedup();
    v
}

#[test]
fn trace_sessions_and_conversations_go_whole_to_one_shard() {
    let mock = MockChild::spawn(&["--fast"]);
    let files = tempfile::tempdir().unwrap();
    let trace = files.path().join("trace.jsonl");
    let lines: Vec<String> = (0..24)
        .map(|i| {
            format!(r#"{{"timestamp": {}, "text": "row {i} of the trace", "session_id": "trace-{i}", "output_length": 2}}"#, i * 15)
        })
        .collect();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let trace_args = [
        "--input-file",
        trace.to_str().unwrap(),
        "--custom-dataset-type",
        "single_turn",
    ];
    let (parts, whole) = split_ids(&mock.url, &trace_args, 3, "conversation_id");
    assert_eq!(whole.len(), 24);
    let mut union: Vec<String> = parts.concat();
    union.sort();
    // Disjoint and complete: every trace session on exactly one shard.
    assert_eq!(union, sorted_unique(&whole));
    assert!(parts.iter().all(|p| !p.is_empty()), "{parts:?}");

    // Multi-turn conversations: each shard sends whole conversations, every turn of each.
    let conv_args = [
        "--conversation-num",
        "8",
        "--conversation-turn-mean",
        "3",
        "--concurrency",
        "2",
    ];
    let (parts, whole) = split_ids(&mock.url, &conv_args, 2, "x_correlation_id");
    assert_eq!(whole.len(), 24);
    let shard_sets: Vec<Vec<String>> = parts.iter().map(|p| sorted_unique(p)).collect();
    assert!(shard_sets[0].iter().all(|id| !shard_sets[1].contains(id)));
    let mut union: Vec<String> = shard_sets.concat();
    union.sort();
    assert_eq!(union, sorted_unique(&whole));
    // Every turn of a conversation went with it.
    assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), 24);
}

/// Copies a shard directory's files (flat) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().map(Result::unwrap) {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Rewrites the record lines of `dir`'s profile_export.jsonl.
fn edit_lines(dir: &Path, edit: impl FnOnce(&mut Vec<String>)) {
    let path = dir.join("profile_export.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    edit(&mut lines);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
}

/// Sets `pointer` (a JSON pointer) of line `i` (0-based) to `value`, written as given.
fn set_in_line(lines: &mut [String], i: usize, pointer: &str, value: &str) {
    let mut v: Value = serde_json::from_str(&lines[i]).unwrap();
    *v.pointer_mut(pointer).unwrap() = Value::from("VALUE");
    lines[i] = v.to_string().replace("\"VALUE\"", value);
}

/// Input a merge cannot trust is refused (exit 2) naming the file and line or the clash:
/// a request twice, a records file emptied, values no run can have, and an output that
/// is one of the shards.
#[test]
fn merge_refuses_repeated_requests_cut_records_absurd_values_and_its_own_input() {
    let mock = MockChild::spawn(&["--fast"]);
    let root = tempfile::tempdir().unwrap();
    let mut shards = Vec::new();
    for i in ["0", "1"] {
        let dir = root.path().join("run").join(format!("s{i}"));
        let mut args = plan_args(&mock.url, &dir, "5");
        args.extend_from_slice(&["--concurrency", "2", "--request-count", "10"]);
        args.extend_from_slice(&["--shard-index", i, "--shard-count", "2"]);
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        shards.push(dir);
    }
    let case = |name: &str, edit: &dyn Fn(&Path, &Path)| -> String {
        let base = root.path().join(name);
        let (s0, s1) = (base.join("s0"), base.join("s1"));
        copy_dir(&shards[0], &s0);
        copy_dir(&shards[1], &s1);
        edit(&s0, &s1);
        let out_dir = root.path().join(format!("{name}-merged"));
        let out = run(
            &[
                "merge",
                base.to_str().unwrap(),
                "--output",
                out_dir.to_str().unwrap(),
            ],
            &[],
        );
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {text}");
        assert!(!out_dir.exists(), "{name}: a merge was written");
        text
    };
    let jsonl =
        |dir: &Path, line: usize| format!("{}:{line}", dir.join("profile_export.jsonl").display());

    // A line repeated within a shard, and one shard's request in the other.
    let within = root.path().join("within/s0");
    let e = case("within", &|s0, _| edit_lines(s0, |l| l.push(l[0].clone())));
    assert!(e.contains("appears twice"), "{e}");
    assert!(
        e.contains(&jsonl(&within, 1)) && e.contains(&jsonl(&within, 6)),
        "{e}"
    );
    let e = case("across", &|s0, s1| {
        let first = std::fs::read_to_string(s0.join("profile_export.jsonl")).unwrap();
        let first = first.lines().nth(1).unwrap().to_string();
        edit_lines(s1, |l| l[4] = first);
    });
    assert!(e.contains("appears twice"), "{e}");
    let across = root.path().join("across");
    assert!(
        e.contains(&jsonl(&across.join("s0"), 2)) && e.contains(&jsonl(&across.join("s1"), 5)),
        "{e}"
    );

    // An emptied records file: no records, though the summary counts five.
    let e = case("empty", &|_, s1| {
        std::fs::write(s1.join("profile_export.jsonl"), "").unwrap();
    });
    assert!(e.contains("0 profiling records"), "{e}");
    assert!(e.contains("counts 5 requests"), "{e}");

    // Times and values no run has.
    let e = case("max", &|_, s1| {
        edit_lines(s1, |l| {
            set_in_line(l, 2, "/metadata/request_end_ns", &u64::MAX.to_string())
        })
    });
    assert!(e.contains(&jsonl(&root.path().join("max/s1"), 3)), "{e}");
    assert!(e.contains("request_end_ns 18446744073709551615"), "{e}");
    let e = case("huge", &|_, s1| {
        edit_lines(s1, |l| {
            set_in_line(l, 3, "/metrics/request_latency/value", "1e308")
        })
    });
    assert!(e.contains(&jsonl(&root.path().join("huge/s1"), 4)), "{e}");
    assert!(e.contains("metrics.request_latency: 1e308"), "{e}");

    // The output is one of the shards: refused, the shard left as it was.
    let before = std::fs::read(shards[0].join("profile_export_aiperf.json")).unwrap();
    let out = run(
        &[
            "merge",
            shards[0].to_str().unwrap(),
            shards[1].to_str().unwrap(),
            "--output",
            shards[0].to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a directory being merged"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(shards[0].join("profile_export_aiperf.json")).unwrap(),
        before
    );
}

/// The merge Job's wait: started before any shard, it merges once both shards wrote their
/// results; a shard that ends without results (its reason in `.aiperf_shard_failed.json`)
/// fails the wait at once with that reason; a shard that never writes anything fails it at
/// the deadline, named.
#[test]
fn merge_waits_for_the_shards_and_fails_with_a_shards_reason() {
    let mock = MockChild::spawn(&["--fast"]);
    let root = tempfile::tempdir().unwrap();
    let shards = root.path().join("plan");
    let shard_args = |i: &str| {
        let dir = shards.join(format!("shard-{i}"));
        let mut args: Vec<String> = plan_args(&mock.url, &dir, "5")
            .into_iter()
            .map(String::from)
            .collect();
        args.extend(
            ["--concurrency", "2", "--request-count", "10"]
                .into_iter()
                .map(String::from),
        );
        args.extend([
            "--shard-index".into(),
            i.into(),
            "--shard-count".into(),
            "2".into(),
        ]);
        args
    };
    // `since`: only markers written from now on count (as the merge Job is told).
    let wait = |out: &str, timeout: &str, since: bool| {
        let out = root.path().join(out);
        let now = epoch_s_in(0.0);
        let mut args = vec![
            "merge",
            shards.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--wait-for-shards",
            "2",
            "--wait-timeout",
            timeout,
        ];
        if since {
            args.extend(["--wait-since", &now]);
        }
        (spawn(&args, &[]), out)
    };

    let (waiting, merged) = wait("merged", "120", true);
    std::thread::sleep(std::time::Duration::from_millis(300));
    for i in ["0", "1"] {
        let args = shard_args(i);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&args, &[]);
        assert!(out.status.success(), "shard {i}: {}", stderr(&out));
    }
    let done = waiting.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    assert!(stderr(&done).contains("2 of 2 shards have their results"));
    let summary = read_json(&merged.join("profile_export_aiperf.json"));
    assert_eq!(summary["request_count"]["avg"], 10.0);

    // Shard 1 again, now failing before it sends (a tokenizer that is not there): its
    // marker replaces its results, and the wait ends with its reason.
    let mut bad = shard_args("1");
    let at = bad.iter().position(|a| a == "builtin").unwrap();
    bad[at] = root.path().join("no-such-tokenizer").display().to_string();
    let (waiting, _) = wait("merged-again", "120", true);
    let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
    let failed = run(&bad, &[]);
    assert_eq!(failed.status.code(), Some(2), "{}", stderr(&failed));
    let marker = read_json(&shards.join("shard-1/.aiperf_shard_failed.json"));
    assert_eq!(marker["exit_code"], 2);
    assert!(
        marker["error"]
            .as_str()
            .unwrap()
            .contains("no-such-tokenizer")
    );
    assert!(!shards.join("shard-1/.aiperf_results_ready.json").exists());
    let done = waiting.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(1), "{}", stderr(&done));
    let why = stderr(&done);
    assert!(
        why.contains("shard-1 failed") && why.contains("no-such-tokenizer"),
        "{why}"
    );

    // A shard that never writes: the deadline names it (shard 0's earlier results count).
    std::fs::remove_file(shards.join("shard-1/.aiperf_shard_failed.json")).unwrap();
    let (waiting, _) = wait("merged-late", "1", false);
    let done = waiting.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(1), "{}", stderr(&done));
    let why = stderr(&done);
    assert!(
        why.contains("1 of 2 shards") && why.contains("shard-1"),
        "{why}"
    );
}
