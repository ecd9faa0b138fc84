//! Load modes against the real mock server: open-loop arrivals (Poisson, constant, gamma),
//! duration with grace, warmup, fixed-schedule replay, cancellation and bad input. Send
//! times come from the client's per-record JSONL. Tolerances hold on a loaded 2-core
//! machine in a debug build; the tight pacing figures are in `benches/pacing.rs`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common;

use common::{BIN, MockChild, read_jsonl, run_profile};

struct Run {
    out: Output,
    summary: Value,
    records: Vec<Value>,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    fn phase(&self, phase: &str) -> Vec<&Value> {
        self.records
            .iter()
            .filter(|r| r["metadata"]["benchmark_phase"] == phase)
            .collect()
    }

    /// Actual send times (wall ns) of the profiling records, sorted.
    fn send_times(&self) -> Vec<u64> {
        self.sorted_metadata("request_start_ns")
    }

    /// When each request was due: the arrival process itself, free of scheduling noise
    /// from whatever else runs on the machine.
    fn scheduled_times(&self) -> Vec<u64> {
        self.sorted_metadata("scheduled_ns")
    }

    fn sorted_metadata(&self, key: &str) -> Vec<u64> {
        let mut t: Vec<u64> = self
            .phase("profiling")
            .iter()
            .map(|r| r["metadata"][key].as_u64().unwrap())
            .collect();
        t.sort();
        t
    }

    fn request_count(&self) -> u64 {
        self.summary["request_count"]["avg"].as_f64().unwrap_or(0.0) as u64
    }
}

/// `aiperf profile` against `url` with small prompts and 2 output tokens; `extra` adds the
/// mode flags.
fn profile(url: &str, dir: &Path, extra: &[&str]) -> Run {
    profile_osl(url, dir, "2", extra)
}

fn profile_osl(url: &str, dir: &Path, osl: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "--model",
        "mock-model",
        "--tokenizer",
        "builtin",
        "--streaming",
        "--synthetic-input-tokens-mean",
        "10",
        "--output-tokens-mean",
        osl,
        "--url",
        url,
        "--artifact-dir",
        dir.to_str().unwrap(),
        "--random-seed",
        "7",
        // These tests time the scheduler while the file's other tests run beside them; nine
        // debug-build runs each scraping its server every 0.333 s pushed the fixed-schedule
        // median send lag past 1 ms on 2 cores. The collectors have their own tests.
        "--no-server-metrics",
        "--no-gpu-telemetry",
    ];
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    // A run that fails early writes no summary.
    let summary = std::fs::read_to_string(dir.join("profile_export_aiperf.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    Run {
        out,
        summary,
        records: read_jsonl(&dir.join("profile_export.jsonl")),
    }
}

fn gaps_s(times: &[u64]) -> Vec<f64> {
    times
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e9)
        .collect()
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    (
        m,
        x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0),
    )
}

#[test]
fn poisson_arrivals_pass_a_ks_test_against_the_exponential() {
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tempfile::tempdir().unwrap();
    let rate = 100.0;
    let run = profile(
        &mock.url,
        dir.path(),
        &["--request-rate", "100", "--request-count", "400"],
    );
    assert!(run.out.status.success(), "{}", run.stderr());
    assert_eq!(run.request_count(), 400);
    // The distribution is the schedule's; the sends follow it (checked loosely here, tightly
    // by the timer_accuracy bench).
    let sent = run.send_times();
    let sent_span_s = (sent[399] - sent[0]) as f64 / 1e9;
    let mut gaps = gaps_s(&run.scheduled_times());
    let scheduled_span_s: f64 = gaps.iter().sum();
    assert!(
        (sent_span_s - scheduled_span_s).abs() < 0.1,
        "sent over {sent_span_s} s, scheduled over {scheduled_span_s} s"
    );
    gaps.sort_by(f64::total_cmp);
    let n = gaps.len() as f64;
    let d = gaps
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let cdf = 1.0 - (-rate * x).exp();
            (cdf - i as f64 / n)
                .abs()
                .max(((i + 1) as f64 / n - cdf).abs())
        })
        .fold(0.0, f64::max);
    let critical = 1.628 / n.sqrt(); // alpha = 0.01
    assert!(d < critical, "KS D = {d:.4} >= {critical:.4}");
    let pacing = &run.summary["load_pacing"];
    assert_eq!(pacing["target_request_rate"], 100.0);
    assert_eq!(pacing["scheduled_sends"], 400);
}

#[test]
fn constant_rate_is_even_and_on_target() {
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tempfile::tempdir().unwrap();
    let run = profile(
        &mock.url,
        dir.path(),
        &[
            "--request-rate",
            "100",
            "--request-rate-mode",
            "constant",
            "--request-count",
            "200",
        ],
    );
    assert!(run.out.status.success(), "{}", run.stderr());
    let times = run.send_times();
    assert_eq!(times.len(), 200);
    // First to last send: 199 gaps of 10 ms, to within a few ms.
    let span_ms = (times[199] - times[0]) as f64 / 1e6;
    assert!((span_ms - 1990.0).abs() < 10.0, "span {span_ms} ms");
    let mut gaps = gaps_s(&times);
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    assert!((median - 0.010).abs() < 0.0005, "median gap {median}");
    // Other tests (and builds) share the two cores: most gaps, not all, are within 2 ms
    // (about 190 on an idle machine, 120-170 seen with a load average of 10); the tight
    // figures are the timer_accuracy bench's.
    let within = gaps.iter().filter(|g| (*g - 0.010).abs() < 0.002).count();
    assert!(
        within >= 110,
        "only {within} of 199 gaps within 2 ms of 10 ms"
    );
    // The schedule itself is exactly even.
    let mut scheduled: Vec<u64> = run
        .phase("profiling")
        .iter()
        .map(|r| r["metadata"]["scheduled_ns"].as_u64().unwrap())
        .collect();
    scheduled.sort();
    for g in gaps_s(&scheduled) {
        assert!((g - 0.010).abs() < 2e-6, "scheduled gap {g}");
    }
    // Each record carries its schedule; the lag is actual minus scheduled.
    let r = run.phase("profiling")[0];
    let m = &r["metadata"];
    let lag = m["request_start_ns"].as_i64().unwrap() - m["scheduled_ns"].as_i64().unwrap();
    assert!((lag - m["send_lag_ns"].as_i64().unwrap()).abs() < 2, "{m}");
    assert_eq!(m["slot_wait_ns"], 0);
}

#[test]
fn gamma_gap_variance_follows_the_shape() {
    let mock = MockChild::spawn(&["--fast"]);
    for (shape, lo, hi) in [("4", 0.15, 0.40), ("0.25", 2.0, 7.0)] {
        let dir = tempfile::tempdir().unwrap();
        let run = profile(
            &mock.url,
            dir.path(),
            &[
                "--request-rate",
                "200",
                "--request-rate-mode",
                "gamma",
                "--arrival-smoothness",
                shape,
                "--request-count",
                "400",
            ],
        );
        assert!(run.out.status.success(), "{}", run.stderr());
        // The schedule's gaps (the sends follow them; see the Poisson test).
        let (m, v) = mean_var(&gaps_s(&run.scheduled_times()));
        // Squared coefficient of variation of gamma gaps = 1 / shape.
        let cv2 = v / (m * m);
        assert!(
            (lo..hi).contains(&cv2),
            "shape {shape}: CV^2 {cv2:.3} not in {lo}..{hi}"
        );
        assert!(
            (m * 200.0 - 1.0).abs() < 0.25,
            "shape {shape}: mean gap {m}"
        );
    }
}

/// Requests of ~0.7 s (TTFT 70 ms, then 9 gaps of 70 ms), two in flight, 1 s duration:
/// two start at 0, two at ~0.7 s, none after 1 s.
fn duration_run(grace: &str) -> Run {
    let mock = MockChild::spawn(&["--ttft", "70", "--itl", "70"]);
    let dir = tempfile::tempdir().unwrap();
    profile_osl(
        &mock.url,
        dir.path(),
        "10",
        &[
            "--concurrency",
            "2",
            "--benchmark-duration",
            "1",
            "--benchmark-grace-period",
            grace,
        ],
    )
}

#[test]
fn duration_stops_issuing_and_the_grace_period_counts() {
    // A long grace: the second pair finishes at ~1.4 s and counts.
    let run = duration_run("5");
    assert!(run.out.status.success(), "{}", run.stderr());
    assert_eq!(run.request_count(), 4, "{}", run.stderr());
    assert_eq!(run.records.len(), 4);
    let duration_s = run.summary["benchmark_duration"]["avg"].as_f64().unwrap();
    assert!((1.3..2.0).contains(&duration_s), "duration {duration_s}");

    // A short grace: the second pair is cancelled at ~1.2 s and recorded as such.
    let run = duration_run("0.2");
    assert_eq!(run.records.len(), 4, "{}", run.stderr());
    assert_eq!(run.request_count(), 2);
    let cancelled: Vec<&Value> = run
        .records
        .iter()
        .filter(|r| r["metadata"]["was_cancelled"] == true)
        .collect();
    assert_eq!(cancelled.len(), 2);
    for r in &cancelled {
        assert_eq!(r["error"]["code"], 499, "{r}");
    }
    let duration_s = run.summary["benchmark_duration"]["avg"].as_f64().unwrap();
    assert!((1.15..1.8).contains(&duration_s), "duration {duration_s}");
}

#[test]
fn sends_still_waiting_for_a_slot_when_the_grace_ends_are_not_sent() {
    // One slot, a 3 s first token: the first request holds the slot while later arrivals
    // wait for it. At the end of the grace (0.3 + 0.2 s) the first is cancelled; the
    // waiting ones must not start then and run for another 3 s.
    let mock = MockChild::spawn(&["--ttft", "3000"]);
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let run = profile(
        &mock.url,
        dir.path(),
        &[
            "--request-rate",
            "20",
            "--request-rate-mode",
            "constant",
            "--concurrency",
            "1",
            "--benchmark-duration",
            "0.3",
            "--benchmark-grace-period",
            "0.2",
        ],
    );
    let took = started.elapsed().as_secs_f64();
    assert_eq!(run.records.len(), 1, "{}", run.stderr());
    assert_eq!(run.records[0]["error"]["code"], 499);
    assert!(took < 2.8, "the run took {took} s");
}

#[test]
fn warmup_records_are_kept_out_of_the_metrics() {
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tempfile::tempdir().unwrap();
    let run = profile(
        &mock.url,
        dir.path(),
        &[
            "--warmup-request-count",
            "5",
            "--request-count",
            "7",
            "--concurrency",
            "2",
        ],
    );
    assert!(run.out.status.success(), "{}", run.stderr());
    assert_eq!(run.phase("warmup").len(), 5);
    assert_eq!(run.phase("profiling").len(), 7);
    assert_eq!(run.request_count(), 7);
    assert_eq!(run.summary["request_latency"]["count"], 7);

    // A timed warmup at the run's rate: about 0.5 s x 40/s requests, none in the metrics.
    let dir = tempfile::tempdir().unwrap();
    let run = profile(
        &mock.url,
        dir.path(),
        &[
            "--warmup-duration",
            "0.5",
            "--request-rate",
            "40",
            "--request-rate-mode",
            "constant",
            "--request-count",
            "6",
        ],
    );
    assert!(run.out.status.success(), "{}", run.stderr());
    let warm = run.phase("warmup").len();
    assert!((18..=21).contains(&warm), "{warm} warmup records");
    assert_eq!(run.request_count(), 6);
    // Warmup sends come first: every profiling send is after every warmup send.
    let last_warm = run
        .phase("warmup")
        .iter()
        .map(|r| r["metadata"]["request_start_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(run.send_times()[0] > last_warm);
}

#[test]
fn a_fixed_schedule_replays_the_timestamps() {
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("trace.jsonl");
    let stamps = [1000u64, 1050, 1120, 1300, 1310, 1600, 1900];
    let lines: String = stamps
        .iter()
        .map(|t| format!("{{\"timestamp\": {t}, \"text\": \"hello at {t}\"}}\n"))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let out = dir.path().join("out");
    // The timestamps imply the fixed schedule; auto-offset starts it at the first one.
    let run = profile(
        &mock.url,
        &out,
        &[
            "--input-file",
            input.to_str().unwrap(),
            "--fixed-schedule-auto-offset",
        ],
    );
    assert!(run.out.status.success(), "{}", run.stderr());
    let recs = run.phase("profiling");
    assert_eq!(recs.len(), stamps.len());
    let mut sched: Vec<(i64, i64)> = recs
        .iter()
        .map(|r| {
            let m = &r["metadata"];
            (
                m["scheduled_ns"].as_i64().unwrap(),
                m["request_start_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    sched.sort();
    let t0 = sched[0].0;
    let mut lags = Vec::new();
    for ((s, actual), ts) in sched.iter().zip(stamps) {
        // The schedule is the trace, to the microsecond.
        let want = (ts - stamps[0]) as i64 * 1_000_000;
        assert!(((s - t0) - want).abs() < 1_000, "scheduled {s} for {ts}");
        lags.push(actual - s);
    }
    lags.sort();
    assert!(lags[0] >= 0, "a send went early: {lags:?}");
    assert!(
        lags[lags.len() / 2] < 1_000_000,
        "median lag over 1 ms: {lags:?}"
    );
    assert!(lags[lags.len() - 1] < 20_000_000, "lags {lags:?}");

    // A window keeps the stamps inside it, and the schedule starts at its start.
    let out = dir.path().join("window");
    let run = profile(
        &mock.url,
        &out,
        &[
            "--input-file",
            input.to_str().unwrap(),
            "--fixed-schedule",
            "--fixed-schedule-start-offset",
            "1100",
            "--fixed-schedule-end-offset",
            "1600",
        ],
    );
    assert!(run.out.status.success(), "{}", run.stderr());
    assert_eq!(run.phase("profiling").len(), 4, "1120, 1300, 1310, 1600");
    assert_eq!(run.summary["load_pacing"]["scheduled_sends"], 4);
}

#[test]
fn a_share_of_requests_is_cancelled_with_code_499() {
    // Requests of ~0.4 s; 30% cancelled 0.1 s after they were sent.
    let mock = MockChild::spawn(&["--ttft", "40", "--itl", "40"]);
    let dir = tempfile::tempdir().unwrap();
    let run = profile_osl(
        &mock.url,
        dir.path(),
        "10",
        &[
            "--concurrency",
            "10",
            "--request-count",
            "60",
            "--request-cancellation-rate",
            "30",
            "--request-cancellation-delay",
            "0.1",
        ],
    );
    assert!(run.out.status.success(), "{}", run.stderr());
    assert_eq!(run.records.len(), 60);
    let cancelled: Vec<&Value> = run
        .records
        .iter()
        .filter(|r| r["metadata"]["was_cancelled"] == true)
        .collect();
    // Binomial(60, 0.3): mean 18, sd 3.5.
    assert!(
        (8..=28).contains(&cancelled.len()),
        "{} cancelled",
        cancelled.len()
    );
    for r in &cancelled {
        assert_eq!(r["error"]["code"], 499, "{r}");
        assert_eq!(r["error"]["type"], "RequestCancellationError");
        let m = &r["metadata"];
        let held = (m["cancellation_time_ns"].as_u64().unwrap()
            - m["request_start_ns"].as_u64().unwrap()) as f64
            / 1e9;
        assert!((0.099..0.2).contains(&held), "cancelled after {held} s");
    }
    assert_eq!(run.request_count() as usize, 60 - cancelled.len());
    let rows = run.summary["error_summary"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["count"], cancelled.len() as u64);
}

#[test]
fn bad_load_flags_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--request-rate", "0"], "--request-rate"),
        (&["--request-rate", "-3"], "--request-rate"),
        (&["--benchmark-duration", "0"], "--benchmark-duration"),
        (
            &["--request-cancellation-rate", "150"],
            "--request-cancellation-rate",
        ),
        (&["--fixed-schedule"], "--fixed-schedule"),
        (
            &["--conversation-turn-mean", "0"],
            "--conversation-turn-mean",
        ),
        (
            &["--num-warmup-sessions", "1", "--warmup-request-count", "1"],
            "--num-warmup-sessions",
        ),
    ];
    for (args, flag) in cases {
        let out = Command::new(BIN)
            .args([
                "profile",
                "-m",
                "m",
                "--tokenizer",
                "builtin",
                "-u",
                "127.0.0.1:9",
            ])
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(flag), "{args:?}: {err}");
    }
}
