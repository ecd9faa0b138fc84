//! `--network-latency-automatic`, `--network-latency-mean` and
//! `--network-latency-ping-interval`: the round trip to the server subtracted from the
//! latencies that start at the send (`network_adjusted_*`), as AIPerf 0.13 does.

use crate::common;

use std::path::Path;

use common::{MockChild, read_json, read_jsonl, run_profile, stderr_text};
use serde_json::Value;

/// Streamed chat requests against `mock` into `dir`, with `extra` flags.
fn run(mock: &MockChild, dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--model",
        "test-model",
        "--endpoint-type",
        "chat",
        "--streaming",
        "--url",
        &mock.url,
        "--request-count",
        "24",
        "--concurrency",
        "4",
        "--output-tokens-mean",
        "4",
        "--tokenizer",
        "builtin",
        "--ui",
        "none",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_profile(&args);
    assert!(out.status.success(), "{}", stderr_text(&out));
    out
}

fn stat(summary: &Value, tag: &str, stat: &str) -> f64 {
    summary[tag][stat]
        .as_f64()
        .unwrap_or_else(|| panic!("{tag}.{stat} in {}", summary[tag]))
}

/// Every statistic of `adjusted` is that of `raw` less `rtt_ms` (no latency is below the
/// round trip here, so the shift is exact); the spread is unchanged.
fn assert_shifted(summary: &Value, raw: &str, adjusted: &str, rtt_ms: f64) {
    for s in [
        "avg", "min", "max", "p1", "p5", "p25", "p50", "p75", "p90", "p95", "p99",
    ] {
        let (r, a) = (stat(summary, raw, s), stat(summary, adjusted, s));
        assert!(
            (r - rtt_ms - a).abs() < 1e-6,
            "{adjusted}.{s} {a} is not {raw}.{s} {r} less {rtt_ms}"
        );
    }
    assert!((stat(summary, raw, "std") - stat(summary, adjusted, "std")).abs() < 1e-6);
    assert_eq!(summary[raw]["count"], summary[adjusted]["count"]);
    assert_eq!(summary[adjusted]["unit"], "ms");
}

#[test]
fn automatic_probes_the_server_and_subtracts_the_mean_round_trip() {
    let mock = MockChild::spawn(&["--ttft", "30", "--itl", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &mock,
        dir.path(),
        &[
            "--network-latency-automatic",
            "--network-latency-ping-interval",
            "0.05",
            "--slice-duration",
            "0.1",
        ],
    );
    let probes = read_jsonl(&dir.path().join("profile_export_network_latency.jsonl"));
    assert!(probes.len() >= 5, "{} probes", probes.len());
    let port = mock.addr.port();
    let mut rtts = Vec::new();
    for p in &probes {
        assert_eq!(p["probe_type"], "tcp_connect");
        assert_eq!(p["target_host"], "127.0.0.1");
        assert_eq!(p["target_port"], port);
        assert_eq!(p["target_url"], format!("http://127.0.0.1:{port}"));
        assert_eq!(p["success"], true, "{p}");
        assert!(p.get("error").is_none(), "{p}");
        assert!(p["timestamp_ns"].as_u64().unwrap() > 1_600_000_000_000_000_000);
        rtts.push(p["rtt_ns"].as_u64().unwrap() as f64);
    }
    // The keys in AIPerf's order.
    let first_line =
        std::fs::read_to_string(dir.path().join("profile_export_network_latency.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
    let keys: Vec<&str> = first_line
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|k| {
            k.ends_with("ns") || k.starts_with("target") || k.ends_with("type") || *k == "success"
        })
        .collect();
    assert_eq!(
        keys,
        [
            "timestamp_ns",
            "target_url",
            "target_host",
            "target_port",
            "probe_type",
            "rtt_ns",
            "success"
        ]
    );
    let mean_ms = rtts.iter().sum::<f64>() / rtts.len() as f64 / 1e6;
    // A loopback handshake: well under the mock's 30 ms TTFT.
    assert!(mean_ms > 0.0 && mean_ms < 20.0, "{mean_ms} ms");

    let summary = read_json(&dir.path().join("profile_export_aiperf.json"));
    assert!((stat(&summary, "network_rtt", "avg") - mean_ms).abs() < 1e-9);
    assert_eq!(summary["network_rtt"]["count"], 1);
    assert_eq!(stat(&summary, "network_rtt", "std"), 0.0);
    assert_shifted(
        &summary,
        "request_latency",
        "network_adjusted_request_latency",
        mean_ms,
    );
    assert_shifted(
        &summary,
        "time_to_first_token",
        "network_adjusted_time_to_first_token",
        mean_ms,
    );
    assert_shifted(
        &summary,
        "time_to_first_output_token",
        "network_adjusted_time_to_first_output_token",
        mean_ms,
    );
    // The gaps between tokens carry no round trip.
    assert!(
        summary
            .get("network_adjusted_inter_token_latency")
            .is_none()
    );
    assert_eq!(summary["input_config"]["network_latency"]["enabled"], true);
    assert_eq!(
        summary["input_config"]["network_latency"]["ping_interval"],
        0.05
    );

    // Each time slice has them too.
    let slices = read_json(&dir.path().join("profile_export_aiperf_timeslices.json"));
    let slices = slices["timeslices"].as_array().expect("timeslices");
    assert!(!slices.is_empty());
    for s in slices {
        assert!(
            (stat(s, "network_rtt", "avg") - mean_ms).abs() < 1e-9,
            "{s}"
        );
        assert_shifted(
            s,
            "request_latency",
            "network_adjusted_request_latency",
            mean_ms,
        );
    }

    let csv = std::fs::read_to_string(dir.path().join("profile_export_aiperf.csv")).unwrap();
    assert!(
        csv.contains("\nNetwork-Adjusted Time to First Token (ms),"),
        "{csv}"
    );
    assert!(csv.contains("\nNetwork RTT (ms),"), "{csv}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Network RTT (ms)"), "{stdout}");
    assert!(stdout.contains("Network Latency: "), "{stdout}");
}

#[test]
fn a_given_mean_is_subtracted_without_probing_and_floors_at_zero() {
    let mock = MockChild::spawn(&["--ttft", "30", "--itl", "5"]);
    let dir = tempfile::tempdir().unwrap();
    run(&mock, dir.path(), &["--network-latency-mean", "5"]);
    assert!(
        !dir.path()
            .join("profile_export_network_latency.jsonl")
            .exists()
    );
    let summary = read_json(&dir.path().join("profile_export_aiperf.json"));
    assert_eq!(stat(&summary, "network_rtt", "avg"), 5.0);
    assert_shifted(
        &summary,
        "request_latency",
        "network_adjusted_request_latency",
        5.0,
    );
    assert_shifted(
        &summary,
        "time_to_first_token",
        "network_adjusted_time_to_first_token",
        5.0,
    );
    assert_eq!(summary["input_config"]["network_latency"]["mean_ms"], 5.0);
    assert_eq!(summary["input_config"]["network_latency"]["enabled"], true);

    // A round trip longer than every TTFT leaves them at 0, not below.
    let dir = tempfile::tempdir().unwrap();
    run(&mock, dir.path(), &["--network-latency-mean", "100000"]);
    let summary = read_json(&dir.path().join("profile_export_aiperf.json"));
    for s in ["min", "avg", "max", "p99"] {
        assert_eq!(
            stat(&summary, "network_adjusted_time_to_first_token", s),
            0.0
        );
    }

    // 0 subtracts nothing: no adjusted copies of the raw metrics (AIPerf's rule).
    let dir = tempfile::tempdir().unwrap();
    run(&mock, dir.path(), &["--network-latency-mean", "0"]);
    let summary = read_json(&dir.path().join("profile_export_aiperf.json"));
    assert!(summary.get("network_rtt").is_none());
    assert!(summary.get("network_adjusted_request_latency").is_none());
}

#[test]
fn without_the_flags_there_are_no_adjusted_metrics() {
    let mock = MockChild::spawn(&[]);
    let dir = tempfile::tempdir().unwrap();
    run(&mock, dir.path(), &[]);
    let summary = read_json(&dir.path().join("profile_export_aiperf.json"));
    assert!(summary.get("network_rtt").is_none());
    assert!(
        summary
            .get("network_adjusted_time_to_first_token")
            .is_none()
    );
    assert_eq!(summary["input_config"]["network_latency"]["enabled"], false);
    assert!(
        !dir.path()
            .join("profile_export_network_latency.jsonl")
            .exists()
    );
}

#[test]
fn probes_that_cannot_connect_are_recorded_as_failures() {
    // A port nothing listens on: every request and every probe is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let out = run_profile(&[
        "--model",
        "m",
        "--url",
        &url,
        "--request-count",
        "3",
        "--tokenizer",
        "builtin",
        "--ui",
        "none",
        "--network-latency-automatic",
        "--artifact-dir",
        dir.path().to_str().unwrap(),
    ]);
    let stderr = stderr_text(&out);
    assert!(
        stderr.contains("none of the") && stderr.contains("probes connected"),
        "{stderr}"
    );
    let probes = read_jsonl(&dir.path().join("profile_export_network_latency.jsonl"));
    // The floor of 5 successes is tried for, twice over, and each attempt is kept.
    assert!(probes.len() >= 10, "{} probes", probes.len());
    for p in &probes {
        assert_eq!(p["success"], false, "{p}");
        assert!(p.get("rtt_ns").is_none(), "{p}");
        assert_eq!(p["error"]["type"], "ConnectionRefusedError", "{p}");
    }
    let summary = read_json(&dir.path().join("profile_export_aiperf.json"));
    assert!(summary.get("network_rtt").is_none());
}

#[test]
fn contradictory_network_latency_flags_exit_2_with_the_fix() {
    for (args, says) in [
        (
            &["--network-latency-automatic", "--network-latency-mean", "2"][..],
            "exclude each other",
        ),
        (
            &["--network-latency-ping-interval", "0.5"][..],
            "only applies with --network-latency-automatic",
        ),
        (
            &[
                "--network-latency-mean",
                "2",
                "--network-latency-ping-interval",
                "0.5",
            ][..],
            "not with --network-latency-mean",
        ),
        (&["--network-latency-mean", "-1"][..], ">= 0"),
        (
            &[
                "--network-latency-automatic",
                "--network-latency-ping-interval",
                "0",
            ][..],
            "above 0",
        ),
    ] {
        let mut all = vec!["-m", "m", "--url", "http://127.0.0.1:9"];
        all.extend_from_slice(args);
        let out = run_profile(&all);
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
