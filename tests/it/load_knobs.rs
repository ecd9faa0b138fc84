//! Several servers and models, connection reuse, the session header, the request content
//! type and the trace knobs, against the real mock server (or a raw one that shows headers).
//! The mock's `--record-requests` lines say which model and client port each request had.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common;
use crate::common::Profile;

use common::{MockChild, read_json, read_jsonl, read_served, run_aiperf_in};

/// `aiperf profile` with small prompts, 2 output tokens and a fixed seed, plus `extra`.
fn profile(dir: &Path, extra: &[&str]) -> Output {
    Profile::without_model()
        .args(&[
            "--streaming",
            "--isl",
            "10",
            "--osl",
            "2",
            "--random-seed",
            "7",
        ])
        .artifact_dir(dir)
        .args(extra)
        .run()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A mock that records every request into `<dir>/<name>.jsonl`.
fn recording_mock(dir: &Path, name: &str) -> (MockChild, std::path::PathBuf) {
    let path = dir.join(format!("{name}.jsonl"));
    let mock = MockChild::spawn(&["--record-requests", path.to_str().unwrap()]);
    (mock, path)
}

#[test]
fn two_servers_share_the_requests_in_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, a_log) = recording_mock(tmp.path(), "a");
    let (b, b_log) = recording_mock(tmp.path(), "b");
    let dir = tmp.path().join("run");
    let out = profile(
        &dir,
        &[
            "-m",
            "m",
            "-u",
            &a.url,
            "-u",
            &b.url,
            "--request-count",
            "10",
            "--concurrency",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let (a_url, b_url) = (a.url.clone(), b.url.clone());
    a.terminate();
    b.terminate();
    assert_eq!(read_served(&a_log).len(), 5);
    assert_eq!(read_served(&b_log).len(), 5);
    let log = stderr(&out);
    for url in [&a_url, &b_url] {
        let line = format!("Requests sent to {url}/v1/chat/completions: 5");
        assert!(log.contains(&line), "no '{line}' in {log}");
    }
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let urls = &summary["input_config"]["endpoint"]["urls"];
    assert_eq!(urls.as_array().map(Vec::len), Some(2), "{urls}");
    assert_eq!(urls[1], format!("{b_url}/v1/chat/completions"));

    // A comma list is the same as repeating the flag.
    let (c, c_log) = recording_mock(tmp.path(), "c");
    let (d, d_log) = recording_mock(tmp.path(), "d");
    let both = format!("{},{}", c.url, d.url);
    let out = profile(
        &tmp.path().join("run2"),
        &["-m", "m", "--url", &both, "--request-count", "4"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    c.terminate();
    d.terminate();
    assert_eq!(read_served(&c_log).len(), 2);
    assert_eq!(read_served(&d_log).len(), 2);
}

/// The model each served request named, by its X-Request-ID, and the model of the
/// inputs.json payload the client recorded for it.
fn served_and_exported_models(dir: &Path, served: &Path) -> Vec<(String, String)> {
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    let inputs = read_json(&dir.join("inputs.json"));
    let payload_model: HashMap<&str, &str> = inputs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let m = s["payloads"][0]["model"].as_str().unwrap();
            (s["session_id"].as_str().unwrap(), m)
        })
        .collect();
    let conv_of: HashMap<&str, &str> = records
        .iter()
        .map(|r| {
            let md = &r["metadata"];
            (
                md["x_request_id"].as_str().unwrap(),
                md["conversation_id"].as_str().unwrap(),
            )
        })
        .collect();
    read_served(served)
        .iter()
        .map(|s| {
            let id = s["x_request_id"].as_str().unwrap();
            let conv = conv_of[id];
            (
                s["model"].as_str().unwrap().to_string(),
                payload_model[conv].to_string(),
            )
        })
        .collect()
}

#[test]
fn several_models_are_used_in_turn_or_at_random() {
    let tmp = tempfile::tempdir().unwrap();
    let (mock, log) = recording_mock(tmp.path(), "served");
    let dir = tmp.path().join("rr");
    let out = profile(
        &dir,
        &["-m", "alpha,beta", "-u", &mock.url, "--request-count", "10"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    mock.terminate();
    let pairs = served_and_exported_models(&dir, &log);
    assert_eq!(pairs.len(), 10);
    for (served, exported) in &pairs {
        assert_eq!(served, exported);
    }
    let alpha = pairs.iter().filter(|(m, _)| m == "alpha").count();
    assert_eq!(alpha, 5, "{pairs:?}");
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(
        summary["input_config"]["models"]["items"],
        serde_json::json!([{"name": "alpha"}, {"name": "beta"}])
    );
    assert_eq!(summary["input_config"]["models"]["strategy"], "round_robin");

    // Repeated -m with random picks; the default directory says `_multi`.
    let (mock, log) = recording_mock(tmp.path(), "served2");
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let out = run_aiperf_in(
        &cwd,
        &[
            "profile",
            "--tokenizer",
            "builtin",
            "--isl",
            "10",
            "--osl",
            "2",
            "--random-seed",
            "7",
            "-m",
            "org/alpha",
            "-m",
            "beta",
            "-m",
            "gamma",
            "--model-selection-strategy",
            "random",
            "-u",
            &mock.url,
            "--request-count",
            "30",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    mock.terminate();
    let dir = cwd.join("artifacts/org_alpha_multi-chat-concurrency1");
    assert!(dir.is_dir(), "no {}", dir.display());
    let pairs = served_and_exported_models(&dir, &log);
    let seen: HashSet<&str> = pairs.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(seen.len(), 3, "{pairs:?}");
    assert!(pairs.iter().all(|(s, e)| s == e));
}

/// The client port of each served request, in the order they were served.
fn ports(served: &Path) -> Vec<u64> {
    read_served(served)
        .iter()
        .map(|s| s["peer_port"].as_u64().expect("peer_port recorded"))
        .collect()
}

#[test]
fn connection_reuse_strategies() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let (mock, log) = recording_mock(tmp.path(), name);
        let dir = tmp.path().join(name);
        let mut args = vec!["-m", "m", "-u", &mock.url];
        args.extend_from_slice(extra);
        let out = profile(&dir, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        mock.terminate();
        (dir, log)
    };
    // Pooled, one at a time: connections are reused (a second one is opened only when the
    // end of a stream takes longer than 10 ms to arrive after `[DONE]`, which load can cause).
    let (_, pooled) = run("pooled", &["--request-count", "6"]);
    let p = ports(&pooled);
    assert_eq!(p.len(), 6);
    assert!(p.iter().collect::<HashSet<_>>().len() <= 3, "{p:?}");

    let (_, never) = run(
        "never",
        &[
            "--request-count",
            "6",
            "--connection-reuse-strategy",
            "never",
        ],
    );
    let p = ports(&never);
    assert_eq!(p.iter().collect::<HashSet<_>>().len(), 6, "{p:?}");

    // Sticky: every turn of a conversation on one connection, each conversation its own.
    let (dir, sticky) = run(
        "sticky",
        &[
            "--conversation-num",
            "4",
            "--conversation-turn-mean",
            "3",
            "--concurrency",
            "2",
            "--connection-reuse-strategy",
            "sticky-user-sessions",
        ],
    );
    let session_of: HashMap<String, String> = read_jsonl(&dir.join("profile_export.jsonl"))
        .iter()
        .map(|r| {
            let md = &r["metadata"];
            (
                md["x_request_id"].as_str().unwrap().to_string(),
                md["x_correlation_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut by_session: HashMap<&str, HashSet<u64>> = HashMap::new();
    let served = read_served(&sticky);
    assert_eq!(served.len(), 12);
    for s in &served {
        let session = &session_of[s["x_request_id"].as_str().unwrap()];
        by_session
            .entry(session)
            .or_default()
            .insert(s["peer_port"].as_u64().unwrap());
    }
    assert_eq!(by_session.len(), 4);
    assert!(by_session.values().all(|p| p.len() == 1), "{by_session:?}");
    let all: HashSet<u64> = by_session.values().flatten().copied().collect();
    assert_eq!(all.len(), 4, "{by_session:?}");
}

#[test]
fn the_session_header_carries_the_session_id() {
    use common::raw_server::{After, RawServer, sse_reply, token_event};
    let events = vec![token_event("hi"), "data: [DONE]\n\n".to_string()];
    let server = RawServer::start(move |_| sse_reply("", &events, After::KeepOpen));
    let tmp = tempfile::tempdir().unwrap();
    let out = profile(
        &tmp.path().join("run"),
        &[
            "-m",
            "m",
            "-u",
            &server.url,
            "--session-header",
            "X-Session-Id",
            "--conversation-num",
            "2",
            "--conversation-turn-mean",
            "2",
            // Only the chat requests reach the server (no /metrics scrapes).
            "--no-server-metrics",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let mut per_session: HashMap<String, usize> = HashMap::new();
    for r in &requests {
        assert_eq!(r.header("x-correlation-id"), None, "{}", r.head);
        let id = r.header("x-session-id").expect("session header sent");
        *per_session.entry(id.to_string()).or_default() += 1;
    }
    assert_eq!(per_session.len(), 2, "{per_session:?}");
    assert!(per_session.values().all(|&n| n == 2));
}

#[test]
fn refused_flags_name_the_flag_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--request-content-type", "multipart/form-data"],
            "--request-content-type",
        ),
        (&["--session-header", "bad header"], "--session-header"),
        (&["--use-think-time-only"], "weka_trace"),
        (&["--max-context-length", "4096"], "weka_trace"),
        (&["--trace-session-sample-ratio", "0.5"], "baseten_trace"),
        (&["--allow-dataset-wrap"], "agentic"),
        (
            &["--fixed-schedule", "--no-fixed-schedule"],
            "--no-fixed-schedule",
        ),
        (&["--ignore-trace-delays"], "--ignore-trace-delays"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["-m", "m"];
        args.extend_from_slice(extra);
        let out = profile(&tmp.path().join("x"), &args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
    }
}

/// Send times (request_start_ns) of a run's records, by turn index, in ms from the first.
fn start_ms(dir: &Path) -> Vec<(u64, f64)> {
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    let t0 = records
        .iter()
        .map(|r| r["metadata"]["request_start_ns"].as_u64().unwrap())
        .min()
        .unwrap();
    records
        .iter()
        .map(|r| {
            let md = &r["metadata"];
            let t = md["request_start_ns"].as_u64().unwrap();
            (md["turn_index"].as_u64().unwrap(), (t - t0) as f64 / 1e6)
        })
        .collect()
}

#[test]
fn trace_timing_can_be_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&[]);
    // Timestamps 4 s apart: replayed, the run would take 8 s.
    let trace = tmp.path().join("trace.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"text\": \"a\"}\n{\"timestamp\": 4000, \"text\": \"b\"}\n{\"timestamp\": 8000, \"text\": \"c\"}\n",
    )
    .unwrap();
    let dir = tmp.path().join("nofixed");
    let out = profile(
        &dir,
        &[
            "-m",
            "m",
            "-u",
            &mock.url,
            "--input-file",
            trace.to_str().unwrap(),
            "--custom-dataset-type",
            "single_turn",
            "--no-fixed-schedule",
            "--request-count",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let starts = start_ms(&dir);
    assert_eq!(starts.len(), 3);
    let last = starts.iter().map(|(_, t)| *t).fold(0.0, f64::max);
    assert!(last < 3000.0, "sent at {starts:?}");

    // Multi-turn delays of 4 s are not waited for with --ignore-trace-delays.
    let convs = tmp.path().join("convs.jsonl");
    std::fs::write(
        &convs,
        "{\"session_id\": \"s1\", \"turns\": [{\"text\": \"a\"}, {\"text\": \"b\", \"delay\": 4000}]}\n",
    )
    .unwrap();
    let dir = tmp.path().join("nodelay");
    let out = profile(
        &dir,
        &[
            "-m",
            "m",
            "-u",
            &mock.url,
            "--input-file",
            convs.to_str().unwrap(),
            "--custom-dataset-type",
            "multi_turn",
            "--ignore-trace-delays",
            "--conversation-num",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let starts = start_ms(&dir);
    let second = starts.iter().find(|(turn, _)| *turn == 1).expect("turn 1");
    assert!(second.1 < 3000.0, "sent at {starts:?}");
}

/// (start, end) of each profiling record in seconds from the first start.
fn spans(dir: &Path) -> Vec<(f64, f64)> {
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    let ns = |r: &Value, k: &str| r["metadata"][k].as_u64().unwrap();
    let t0 = records
        .iter()
        .map(|r| ns(r, "request_start_ns"))
        .min()
        .unwrap();
    let mut out: Vec<(f64, f64)> = records
        .iter()
        .map(|r| {
            (
                (ns(r, "request_start_ns") - t0) as f64 / 1e9,
                (ns(r, "request_end_ns") - t0) as f64 / 1e9,
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

#[test]
fn concurrency_ramps_up_one_slot_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&["--ttft", "150"]);
    let dir = tmp.path().join("ramp");
    let out = profile(
        &dir,
        &[
            "-m",
            "m",
            "-u",
            &mock.url,
            "--concurrency",
            "3",
            "--concurrency-ramp-duration",
            "2",
            "--request-count",
            "24",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let s = spans(&dir);
    assert_eq!(s.len(), 24);
    // Requests in flight when each one starts (itself included).
    let in_flight = |t: f64| s.iter().filter(|(a, b)| *a <= t && *b > t).count();
    for &(start, _) in &s {
        let n = in_flight(start);
        // Steps at 1 s and 2 s: a slot never opens early (a loaded machine only delays).
        if start < 0.95 {
            assert!(n <= 1, "{n} in flight at {start:.3} s: {s:?}");
        } else if start < 1.95 {
            assert!(n <= 2, "{n} in flight at {start:.3} s: {s:?}");
        }
    }
    let most = s.iter().map(|&(a, _)| in_flight(a)).max().unwrap();
    assert_eq!(most, 3, "{s:?}");
}

#[test]
fn request_rate_ramps_up_to_the_target() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&[]);
    let dir = tmp.path().join("ramp");
    let out = profile(
        &dir,
        &[
            "-m",
            "m",
            "-u",
            &mock.url,
            "--request-rate",
            "20",
            "--request-rate-mode",
            "constant",
            "--request-rate-ramp-duration",
            "2",
            "--request-count",
            "30",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let s = spans(&dir);
    assert_eq!(s.len(), 30);
    // At 20/s without a ramp: 50 ms gaps, 1.45 s in all. Ramped from 1/s over 2 s the
    // first gap is about 365 ms and the last arrival comes at about 2.45 s.
    let first_gap = s[1].0 - s[0].0;
    assert!(first_gap > 0.25, "first gap {first_gap:.3} s");
    let span = s[29].0;
    assert!(span > 2.2 && span < 10.0, "span {span:.3} s");
    let last_gap = s[29].0 - s[28].0;
    assert!(
        last_gap < first_gap / 2.0,
        "{last_gap:.3} vs {first_gap:.3}"
    );

    // Ramps need what they ramp.
    for (flag, needs) in [
        ("--concurrency-ramp-duration", "--concurrency"),
        ("--request-rate-ramp-duration", "--request-rate"),
    ] {
        let out = profile(&tmp.path().join("x"), &["-m", "m", flag, "2"]);
        assert_eq!(out.status.code(), Some(2));
        let e = stderr(&out);
        assert!(e.contains(flag) && e.contains(needs), "{e}");
    }
}

#[test]
fn workers_max_sets_the_sender_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = MockChild::spawn(&[]);
    let run = |dir: &str, extra: &[&str]| {
        let mut args = vec!["-m", "m", "-u", &mock.url, "--request-count", "8"];
        args.extend(["--concurrency", "4"]);
        args.extend_from_slice(extra);
        profile(&tmp.path().join(dir), &args)
    };
    let one = run("one", &["--workers-max", "1"]);
    assert!(one.status.success(), "{}", stderr(&one));
    assert!(
        stderr(&one).contains("Requests go out from 1 sender thread\n"),
        "{}",
        stderr(&one)
    );
    let json = read_json(&tmp.path().join("one/profile_export_aiperf.json"));
    assert_eq!(json["request_count"]["avg"], 8.0, "{json}");
    assert!(!stderr(&one).contains("Ignoring --workers-max"));

    // The default: one per core.
    let cores = std::thread::available_parallelism().unwrap().get();
    let default = run("default", &[]);
    assert!(default.status.success(), "{}", stderr(&default));
    let expected = format!(
        "Requests go out from {cores} sender thread{}\n",
        if cores == 1 { "" } else { "s" }
    );
    assert!(stderr(&default).contains(&expected), "{}", stderr(&default));

    let zero = run("zero", &["--max-workers", "0"]);
    assert_eq!(zero.status.code(), Some(2), "{}", stderr(&zero));
    assert!(
        stderr(&zero).contains("--workers-max") && stderr(&zero).contains("at least 1"),
        "{}",
        stderr(&zero)
    );
}
