//! How load moves over a phase, against the mock server: `--request-rate-series`,
//! `--prefill-concurrency-ramp-duration`, the warmup's own ramps and
//! `--inter-turn-delay-cap-seconds`; and the trace-replay knobs of dataset types not read
//! here, refused. Timings are read from the send times of `profile_export.jsonl` (or the
//! mock's `--record-requests` stamps) with margins a loaded 2-core machine keeps.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common;
use crate::common::Profile;

use common::{MockChild, read_jsonl, read_served, stderr_text};

/// `aiperf profile -m m` with small prompts, 2 output tokens and a fixed seed, plus `extra`.
fn profile(dir: &Path, extra: &[&str]) -> Output {
    Profile::new("m")
        .args(&["--isl", "10", "--osl", "2", "--random-seed", "7"])
        .artifact_dir(dir)
        .args(extra)
        .run()
}

/// Send times (s from the phase's first) of one phase's records, sorted.
fn starts(dir: &Path, phase: &str) -> Vec<f64> {
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    let mut ns: Vec<u64> = records
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == phase)
        .map(|r| r["metadata"]["request_start_ns"].as_u64().unwrap())
        .collect();
    ns.sort_unstable();
    ns.iter().map(|t| (t - ns[0]) as f64 / 1e9).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median gap between consecutive sends whose start lies in [from, to) seconds.
fn median_gap(s: &[f64], from: f64, to: f64) -> f64 {
    median(
        s.windows(2)
            .filter(|w| w[0] >= from && w[0] < to)
            .map(|w| w[1] - w[0])
            .collect(),
    )
}

fn refused(dir: &Path, args: &[&str], needles: &[&str]) {
    let out = profile(dir, args);
    let e = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
    for n in needles {
        assert!(e.contains(n), "{args:?}: no {n:?} in {e}");
    }
}

#[test]
fn a_rate_series_sends_at_each_of_its_rates() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    // 10/s for 2 s, then 40/s.
    let series = tmp.path().join("series.json");
    std::fs::write(
        &series,
        r#"{"points": [{"time_s": 2.0, "qps": 10}, {"time_s": 2.001, "qps": 40}]}"#,
    )
    .unwrap();
    let dir = tmp.path().join("run");
    let out = profile(
        &dir,
        &[
            "-u",
            &mock.url,
            "--request-rate-series",
            series.to_str().unwrap(),
            "--arrival-pattern",
            "constant",
            "--request-count",
            "60",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let s = starts(&dir, "profiling");
    assert_eq!(s.len(), 60);
    let (slow, fast) = (median_gap(&s, 0.0, 1.8), median_gap(&s, 2.2, 10.0));
    assert!(
        (0.08..0.12).contains(&slow),
        "10/s: gap {slow:.4} s in {s:?}"
    );
    assert!(
        (0.018..0.032).contains(&fast),
        "40/s: gap {fast:.4} s in {s:?}"
    );
    // 21 sends in the first 2 s, 39 more at 40/s: the last at about 2.975 s.
    let last = s[59];
    assert!((2.9..3.6).contains(&last), "last send at {last:.3} s");
    // The summary names no single target rate.
    let summary = common::read_json(&dir.join("profile_export_aiperf.json"));
    assert!(
        summary["load_pacing"]["target_request_rate"].is_null(),
        "{}",
        summary["load_pacing"]
    );

    // Refused: with --request-rate, and files that are not a series.
    let x = tmp.path().join("x");
    refused(
        &x,
        &[
            "--request-rate",
            "5",
            "--request-rate-series",
            series.to_str().unwrap(),
        ],
        &["--request-rate and --request-rate-series"],
    );
    for (text, why) in [
        (r#"[{"time_s": 0, "qps": 5}]"#, "at least two"),
        (
            r#"[{"time_s": 1, "qps": 5}, {"time_s": 1, "qps": 6}]"#,
            "strictly increasing",
        ),
        (
            r#"[{"time_s": 0, "qps": 0}, {"time_s": 1, "qps": 6}]"#,
            "qps 0 must be > 0",
        ),
        (
            r#"[{"time_s": 0, "qps": 5, "x": 1}, {"time_s": 1, "qps": 6}]"#,
            "unknown key",
        ),
        (r#"{"rates": []}"#, "points"),
        ("not json", "not valid JSON"),
    ] {
        let bad = tmp.path().join("bad.json");
        std::fs::write(&bad, text).unwrap();
        refused(
            &x,
            &["--request-rate-series", bad.to_str().unwrap()],
            &["--request-rate-series", why],
        );
    }
}

/// Most of `intervals` (start, end) open at `t`.
fn open_at(intervals: &[(f64, f64)], t: f64) -> usize {
    intervals.iter().filter(|(a, b)| *a <= t && *b > t).count()
}

/// (received, first token) of each request the mock served, in s from the first.
fn prefills(log: &Path) -> Vec<(f64, f64)> {
    let served = read_served(log);
    let ns = |r: &Value, k: &str| r[k].as_u64().unwrap();
    let t0 = served.iter().map(|r| ns(r, "received_ns")).min().unwrap();
    let s = |r: &Value, k: &str| (ns(r, k) - t0) as f64 / 1e9;
    let mut v: Vec<_> = served
        .iter()
        .map(|r| (s(r, "received_ns"), s(r, "first_token_ns")))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Checks that at most 1 request waited for its first token before 1 s, at most 2 before
/// 2 s, and that 3 did at some point: a ramp of 3 slots over 2 s.
fn ramped_to_three(p: &[(f64, f64)]) {
    for &(start, _) in p {
        let n = open_at(p, start);
        if start < 0.95 {
            assert!(n <= 1, "{n} waiting at {start:.3} s: {p:?}");
        } else if start < 1.95 {
            assert!(n <= 2, "{n} waiting at {start:.3} s: {p:?}");
        }
    }
    let most = p.iter().map(|&(a, _)| open_at(p, a)).max().unwrap();
    assert_eq!(most, 3, "{p:?}");
}

#[test]
fn prefill_concurrency_ramps_up_one_slot_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("served.jsonl");
    let mock = MockChild::spawn(&["--ttft", "300", "--record-requests", log.to_str().unwrap()]);
    let dir = tmp.path().join("run");
    let out = profile(
        &dir,
        &[
            "-u",
            &mock.url,
            "--streaming",
            "--concurrency",
            "3",
            "--prefill-concurrency",
            "3",
            "--prefill-concurrency-ramp-duration",
            "2",
            "--request-count",
            "24",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    mock.terminate();
    let p = prefills(&log);
    assert_eq!(p.len(), 24);
    ramped_to_three(&p);

    refused(
        &tmp.path().join("x"),
        &["--prefill-concurrency-ramp-duration", "2"],
        &[
            "--prefill-concurrency-ramp-duration",
            "--prefill-concurrency",
        ],
    );
}

#[test]
fn the_warmup_ramps_its_own_way() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    // A warmup rate ramp over 2 s to 20/s; profiling at 20/s from the start.
    let dir = tmp.path().join("rate");
    let out = profile(
        &dir,
        &[
            "-u",
            &mock.url,
            "--request-rate",
            "20",
            "--arrival-pattern",
            "constant",
            "--warmup-request-count",
            "30",
            "--warmup-request-rate-ramp-duration",
            "2",
            "--request-count",
            "20",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let (w, p) = (starts(&dir, "warmup"), starts(&dir, "profiling"));
    assert_eq!((w.len(), p.len()), (30, 20));
    // Ramped from 1/s: the warmup's first gap is about 365 ms, its span about 2.45 s.
    assert!(w[1] - w[0] > 0.25, "warmup {w:?}");
    assert!(w[29] > 2.2, "warmup {w:?}");
    let gap = median_gap(&p, 0.0, 10.0);
    assert!(
        (0.04..0.06).contains(&gap),
        "profiling gap {gap:.4} s: {p:?}"
    );

    // A warmup concurrency ramp (closed loop) and a warmup prefill ramp, each of 3 slots
    // over 2 s; profiling has neither.
    for (name, extra) in [
        ("conc", &["--warmup-concurrency-ramp-duration", "2"][..]),
        (
            "prefill",
            &[
                "--prefill-concurrency",
                "3",
                "--warmup-prefill-concurrency-ramp-duration",
                "2",
            ][..],
        ),
    ] {
        let log = tmp.path().join(format!("{name}.jsonl"));
        let mock = MockChild::spawn(&["--ttft", "300", "--record-requests", log.to_str().unwrap()]);
        let dir = tmp.path().join(name);
        let mut args = vec![
            "-u",
            &mock.url,
            "--streaming",
            "--concurrency",
            "3",
            "--warmup-request-count",
            "24",
            "--request-count",
            "6",
        ];
        args.extend_from_slice(extra);
        let out = profile(&dir, &args);
        assert!(out.status.success(), "{name}: {}", stderr_text(&out));
        mock.terminate();
        let served = prefills(&log);
        assert_eq!(served.len(), 30);
        let (warmup, profiling) = served.split_at(24);
        ramped_to_three(warmup);
        // Profiling starts with all three slots open.
        let t0 = profiling[0].0;
        let first: Vec<_> = profiling.iter().filter(|(a, _)| a - t0 < 0.2).collect();
        assert_eq!(first.len(), 3, "{name}: {profiling:?}");
    }

    let x = tmp.path().join("x");
    refused(
        &x,
        &[
            "--warmup-request-count",
            "2",
            "--warmup-request-rate-ramp-duration",
            "2",
        ],
        &[
            "--warmup-request-rate-ramp-duration",
            "--warmup-request-rate",
        ],
    );
    refused(
        &x,
        &[
            "--warmup-request-count",
            "2",
            "--warmup-concurrency-ramp-duration",
            "2",
        ],
        &["--warmup-concurrency-ramp-duration", "--warmup-concurrency"],
    );
    refused(
        &x,
        &[
            "--warmup-request-count",
            "2",
            "--warmup-prefill-concurrency-ramp-duration",
            "0",
        ],
        &["--warmup-prefill-concurrency-ramp-duration: 0 is not allowed"],
    );
}

#[test]
fn long_turn_delays_of_the_input_file_are_cut_to_the_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--fast"]);
    let convs = tmp.path().join("convs.jsonl");
    std::fs::write(
        &convs,
        "{\"session_id\": \"s1\", \"turns\": [{\"text\": \"a\"}, {\"text\": \"b\", \"delay\": 4000}, {\"text\": \"c\", \"delay\": 200}]}\n",
    )
    .unwrap();
    let dir = tmp.path().join("run");
    let out = profile(
        &dir,
        &[
            "-u",
            &mock.url,
            "--input-file",
            convs.to_str().unwrap(),
            "--custom-dataset-type",
            "multi_turn",
            "--inter-turn-delay-cap-seconds",
            "0.5",
            "--conversation-num",
            "1",
        ],
    );
    let e = stderr_text(&out);
    assert!(out.status.success(), "{e}");
    assert!(e.contains("1 turn delays cut to the cap"), "{e}");
    let s = starts(&dir, "profiling");
    assert_eq!(s.len(), 3);
    // 4 s cut to 0.5 s; the 0.2 s delay under the cap is kept.
    let (first, second) = (s[1] - s[0], s[2] - s[1]);
    assert!((0.5..2.0).contains(&first), "{s:?}");
    assert!((0.2..first).contains(&second), "{s:?}");

    let x = tmp.path().join("x");
    refused(
        &x,
        &["--inter-turn-delay-cap-seconds", "1"],
        &["--inter-turn-delay-cap-seconds", "--input-file"],
    );
    refused(
        &x,
        &[
            "--input-file",
            convs.to_str().unwrap(),
            "--ignore-trace-delays",
            "--inter-turn-delay-cap-seconds",
            "1",
        ],
        &["--inter-turn-delay-cap-seconds", "--ignore-trace-delays"],
    );
    refused(
        &x,
        &["--inter-turn-delay-cap-seconds", "-1"],
        &["--inter-turn-delay-cap-seconds: -1 is not allowed"],
    );
}

#[test]
fn replay_knobs_of_other_trace_types_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("x");
    for (args, kind) in [
        (&["--trajectory-start-min-ratio", "0.5"][..], "agentic"),
        (&["--trajectory-start-max-ratio", "0.5"][..], "agentic"),
        (&["--burst-phase-starts"][..], "agentic"),
        (&["--system-idle-gap-cap-seconds", "5"][..], "agentic"),
        (&["--agentic-cache-warmup-duration", "5"][..], "agentic"),
        (&["--agentic-warmup-grace-period", "5"][..], "agentic"),
        (&["--trace-idle-gap-cap-seconds", "5"][..], "weka_trace"),
        (&["--hf-weka-dataset", "org/traces"][..], "weka_hf"),
    ] {
        let flag = args[0].trim_start_matches("--no-");
        refused(
            &x,
            args,
            &[flag.trim_start_matches("--"), kind, "does not read"],
        );
    }
}

/// `--scenario`: AIPerf 0.13's one scenario locks a Weka agentic replay (not read here), so
/// it is refused for that, even with `--unsafe-override`; an unknown name gets the list;
/// `--unsafe-override` alone runs with a warning that it does nothing.
#[test]
fn scenarios_are_refused_for_what_they_lock_and_the_override_alone_warns() {
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("x");
    refused(
        &x,
        &["--scenario", "inferencex-agentx-mvp", "--unsafe-override"],
        &["--scenario inferencex-agentx-mvp", "Weka", "does not read"],
    );
    refused(
        &x,
        &["--scenario", "fastest"],
        &["unknown scenario", "inferencex-agentx-mvp"],
    );
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tmp.path().join("run");
    let out = profile(
        &dir,
        &["-u", &mock.url, "--request-count", "2", "--unsafe-override"],
    );
    let e = stderr_text(&out);
    assert!(out.status.success(), "{e}");
    assert!(
        e.contains("--unsafe-override has no effect without --scenario"),
        "{e}"
    );
}
