//! `--custom-dataset-type baseten_trace`: Parquet traces written here, replayed against the
//! mock. Bodies are read back from inputs.json (the bytes sent), send times and sessions from
//! the per-request records.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;

use crate::common::{MockChild, Profile, read_json, read_jsonl, stderr_text};

/// One trace row; `ts` in ms since the epoch.
struct Row {
    ts: i64,
    prompt: &'static str,
    osl: i64,
    session: Option<&'static str>,
    e2e: Option<i64>,
    block: Option<i64>,
    hashes: Option<Vec<i64>>,
}

fn row(ts: i64, prompt: &'static str, osl: i64, session: Option<&'static str>) -> Row {
    Row {
        ts,
        prompt,
        osl,
        session,
        e2e: None,
        block: None,
        hashes: None,
    }
}

const T0: i64 = 1_700_000_000_000;

const SCHEMA: &str = "message schema {
    required int64 timestamp_start_unix_ms;
    required binary prompt (UTF8);
    required int64 input_tokens;
    required int64 output_tokens;
    optional binary provided_session_id (UTF8);
    optional int64 duration_e2e_ms;
    optional int64 block_size;
    optional group total_hashes (LIST) { repeated group list { optional int64 element; } }
}";

fn write_trace(path: &Path, rows: &[Row]) {
    let ints = |f: &dyn Fn(&Row) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let opt = |f: &dyn Fn(&Row) -> Option<i64>| {
        let vals: Vec<i64> = rows.iter().filter_map(f).collect();
        let defs: Vec<i16> = rows.iter().map(|r| f(r).is_some() as i16).collect();
        (vals, defs)
    };
    let schema = Arc::new(parse_message_type(SCHEMA).unwrap());
    let props = Arc::new(WriterProperties::builder().build());
    let mut w =
        SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
    let mut g = w.next_row_group().unwrap();
    let mut i = 0;
    while let Some(mut c) = g.next_column().unwrap() {
        match i {
            0 | 2 | 3 => {
                let v = match i {
                    0 => ints(&|r| r.ts),
                    2 => ints(&|r| r.prompt.split(' ').count() as i64),
                    _ => ints(&|r| r.osl),
                };
                c.typed::<Int64Type>().write_batch(&v, None, None).unwrap();
            }
            1 | 4 => {
                let (v, d): (Vec<ByteArray>, Vec<i16>) = if i == 1 {
                    let v = rows.iter().map(|r| ByteArray::from(r.prompt)).collect();
                    (v, vec![1; rows.len()])
                } else {
                    let v = rows
                        .iter()
                        .filter_map(|r| r.session.map(ByteArray::from))
                        .collect();
                    (v, rows.iter().map(|r| r.session.is_some() as i16).collect())
                };
                let defs = (i == 4).then_some(d);
                c.typed::<ByteArrayType>()
                    .write_batch(&v, defs.as_deref(), None)
                    .unwrap();
            }
            5 | 6 => {
                let (v, d) = if i == 5 {
                    opt(&|r| r.e2e)
                } else {
                    opt(&|r| r.block)
                };
                c.typed::<Int64Type>()
                    .write_batch(&v, Some(&d), None)
                    .unwrap();
            }
            _ => {
                // List levels: 0 = null list, 3 = an element; repetition 1 = same list.
                let (mut v, mut d, mut rep) = (Vec::new(), Vec::new(), Vec::new());
                for r in rows {
                    match &r.hashes {
                        None => {
                            d.push(0);
                            rep.push(0);
                        }
                        Some(h) => {
                            for (k, x) in h.iter().enumerate() {
                                v.push(*x);
                                d.push(3);
                                rep.push(i16::from(k > 0));
                            }
                        }
                    }
                }
                c.typed::<Int64Type>()
                    .write_batch(&v, Some(&d), Some(&rep))
                    .unwrap();
            }
        }
        c.close().unwrap();
        i += 1;
    }
    g.close().unwrap();
    w.close().unwrap();
}

fn run(dir: &Path, url: &str, trace: &Path, extra: &[&str]) -> Output {
    Profile::new("m")
        .url(url)
        .artifact_dir(dir)
        .args(&[
            "--endpoint-type",
            "completions",
            "--input-file",
            trace.to_str().unwrap(),
            "--random-seed",
            "3",
        ])
        .args(extra)
        .run()
}

/// inputs.json: session id -> its bodies in turn order.
fn bodies(dir: &Path) -> Vec<(String, Vec<Value>)> {
    read_json(&dir.join("inputs.json"))["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["session_id"].as_str().unwrap().to_string(),
                s["payloads"].as_array().unwrap().clone(),
            )
        })
        .collect()
}

/// Send times (ms from the first send) by (conversation id, turn index).
fn send_ms(dir: &Path) -> BTreeMap<(String, u64), f64> {
    let records = read_jsonl(&dir.join("profile_export.jsonl"));
    let start = |r: &Value| r["metadata"]["request_start_ns"].as_u64().unwrap();
    let t0 = records.iter().map(start).min().unwrap();
    records
        .iter()
        .map(|r| {
            let md = &r["metadata"];
            (
                (
                    md["conversation_id"].as_str().unwrap().to_string(),
                    md["turn_index"].as_u64().unwrap(),
                ),
                (start(r) - t0) as f64 / 1e6,
            )
        })
        .collect()
}

fn assert_ok(out: &Output) {
    assert!(out.status.success(), "{}", stderr_text(out));
}

fn near(got: f64, want: f64) -> bool {
    // Loaded 2-core machine: sends may be late, never early.
    (want - 5.0..want + 250.0).contains(&got)
}

#[test]
fn open_loop_replay_sends_recorded_prompts_at_their_compressed_times() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace.parquet");
    let mut first = row(T0, "hello one", 3, Some("s1"));
    first.hashes = Some(vec![11, 12]);
    first.block = Some(16);
    write_trace(
        &trace,
        &[
            first,
            // A canceled request (0 output tokens) asks for one.
            row(T0 + 800, "other start", 0, Some("s2")),
            row(T0 + 1600, "hello one and two", 4, Some("s1")),
            row(T0 + 2400, "lonely", 2, None),
        ],
    );
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tmp.path().join("run");
    let out = run(
        &dir,
        &mock.url,
        &trace,
        &[
            "--custom-dataset-type",
            "baseten_trace",
            "--replay-speedup",
            "2",
        ],
    );
    mock.terminate();
    assert_ok(&out);
    let b = bodies(&dir);
    assert_eq!(b.len(), 3, "{b:?}");
    let (s1, s2) = (&b[0], &b[1]);
    assert_eq!(s1.0, "s1");
    assert_eq!(s2.0, "s2");
    assert_eq!(s1.1.len(), 2);
    let p = &s1.1[0];
    assert_eq!(p["prompt"], "hello one");
    assert_eq!(p["max_tokens"], 3);
    assert_eq!(p["min_tokens"], 3);
    assert_eq!(p["hash_ids"], serde_json::json!([11, 12]));
    assert_eq!(p["block_size"], 16);
    // Each turn sends its own recorded prompt, no history.
    let p = &s1.1[1];
    assert_eq!(p["prompt"], "hello one and two");
    assert_eq!(
        (p["max_tokens"].as_u64(), p["min_tokens"].as_u64()),
        (Some(4), Some(4))
    );
    assert!(
        p.get("hash_ids").is_none() && p.get("block_size").is_none(),
        "{p}"
    );
    assert_eq!(
        (
            s2.1[0]["max_tokens"].as_u64(),
            s2.1[0]["min_tokens"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(b[2].1[0]["prompt"], "lonely");
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let main = &summary["input_config"]["datasets"][0];
    assert_eq!(main["replay_speedup"], 2.0, "{main}");

    let t = send_ms(&dir);
    assert_eq!(t.len(), 4, "{t:?}");
    let lonely = b[2].0.clone();
    for (key, want) in [
        (("s1".to_string(), 0), 0.0),
        (("s2".to_string(), 0), 400.0),
        (("s1".to_string(), 1), 800.0),
        ((lonely, 0), 1200.0),
    ] {
        let got = t[&key];
        assert!(
            near(got, want),
            "{key:?}: sent at {got} ms, due at {want}: {t:?}"
        );
    }
}

#[test]
fn closed_loop_replay_waits_think_times_and_caps_idle_gaps() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace.parquet");
    let mut a = row(T0, "a one", 2, Some("a"));
    a.e2e = Some(600);
    a.hashes = Some(vec![1]);
    a.block = Some(8);
    write_trace(
        &trace,
        &[
            a,
            row(T0 + 1000, "a one two", 2, Some("a")),
            // A minute of dead air, cut to half a second.
            row(T0 + 61_000, "b one", 2, Some("b")),
        ],
    );
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tmp.path().join("run");
    let out = run(
        &dir,
        &mock.url,
        &trace,
        &[
            "--no-open-loop-replay",
            "--max-idle-gap-cap-seconds",
            "0.5",
            "--omit-kv-hints",
            "--no-force-min-tokens",
            // --extra-inputs wins over the recorded length for max_tokens, as in AIPerf.
            "--extra-inputs",
            "max_tokens:7",
        ],
    );
    mock.terminate();
    assert_ok(&out);
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    let main = &summary["input_config"]["datasets"][0];
    assert_eq!(
        (
            &main["open_loop_replay"],
            &main["force_min_tokens"],
            &main["omit_kv_hints"]
        ),
        (&Value::Bool(false), &Value::Bool(false), &Value::Bool(true)),
        "{main}"
    );
    for (_, payloads) in bodies(&dir) {
        for p in payloads {
            for key in ["min_tokens", "hash_ids", "block_size"] {
                assert!(p.get(key).is_none(), "{key} in {p}");
            }
            assert_eq!(p["max_tokens"], 7);
        }
    }
    let t = send_ms(&dir);
    let key = |s: &str, k| (s.to_string(), k);
    // Think time: the 1000 ms gap minus the 600 ms the first turn took when recorded.
    let think = t[&key("a", 1)] - t[&key("a", 0)];
    assert!((395.0..700.0).contains(&think), "{t:?}");
    // Closed loop reflows the session starts only: b is due 500 ms (the cap) after a's.
    assert!(near(t[&key("b", 0)], 500.0), "{t:?}");
}

#[test]
fn strict_open_loop_makes_every_row_a_session_and_the_window_selects_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace.parquet");
    write_trace(
        &trace,
        &[
            row(T0, "x one", 1, Some("x")),
            row(T0 + 100, "x two", 1, Some("x")),
            row(T0 + 200, "y one", 1, Some("y")),
            row(T0 + 300, "x three", 1, Some("x")),
        ],
    );
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tmp.path().join("run");
    // No --custom-dataset-type: a .parquet input is a Baseten trace. The window drops the
    // first row (0 ms from the first event).
    let out = run(
        &dir,
        &mock.url,
        &trace,
        &["--open-loop-strict", "--fixed-schedule-start-offset", "50"],
    );
    mock.terminate();
    assert_ok(&out);
    let ids: Vec<(String, usize)> = bodies(&dir)
        .into_iter()
        .map(|(id, p)| (id, p.len()))
        .collect();
    assert_eq!(
        ids,
        [("x#0".into(), 1), ("x#1".into(), 1), ("y#0".into(), 1)]
    );
}

#[test]
fn session_sampling_keeps_whole_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace.parquet");
    const IDS: [&str; 8] = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"];
    let rows: Vec<Row> = (0..16)
        .map(|i| row(T0 + i as i64 * 5, "p q", 1, Some(IDS[i % 8])))
        .collect();
    write_trace(&trace, &rows);
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tmp.path().join("run");
    let out = run(
        &dir,
        &mock.url,
        &trace,
        &["--trace-session-sample-ratio", "0.5"],
    );
    mock.terminate();
    assert_ok(&out);
    let b = bodies(&dir);
    assert!((1..8).contains(&b.len()), "{} sessions", b.len());
    assert!(b.iter().all(|(_, p)| p.len() == 2), "{b:?}");
}

fn refused(dir: &Path, trace: &Path, extra: &[&str], needles: &[&str]) {
    let out = run(dir, "http://127.0.0.1:9", trace, extra);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{extra:?}: wanted {n:?} in {err}");
    }
}

#[test]
fn bad_traces_and_flag_combinations_exit_2_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let good = tmp.path().join("good.parquet");
    write_trace(&good, &[row(T0, "a b", 1, None)]);

    // A missing column, named with the file.
    let missing = tmp.path().join("missing.parquet");
    let schema = "message schema { required int64 timestamp_start_unix_ms; required int64 input_tokens; required int64 output_tokens; }";
    write_ints(&missing, schema, &[&[T0], &[1], &[1]]);
    refused(
        &dir,
        &missing,
        &[],
        &["missing.parquet", "column 'prompt' is missing"],
    );

    // A wrong type: prompt stored as a number.
    let typed = tmp.path().join("typed.parquet");
    let schema = "message schema { required int64 timestamp_start_unix_ms; required int64 prompt; required int64 input_tokens; required int64 output_tokens; }";
    write_ints(&typed, schema, &[&[T0], &[5], &[1], &[1]]);
    refused(
        &dir,
        &typed,
        &[],
        &["typed.parquet: row 1: column 'prompt'", "string"],
    );

    // A negative count.
    let negative = tmp.path().join("negative.parquet");
    let schema = "message schema { required int64 timestamp_start_unix_ms; required binary prompt (UTF8); required int64 input_tokens; required int64 output_tokens; }";
    write_mixed(&negative, schema, T0, "p", -3);
    refused(
        &dir,
        &negative,
        &[],
        &["row 1: column 'output_tokens'", "-3"],
    );

    let arrow = tmp.path().join("trace.arrow");
    std::fs::write(&arrow, b"ARROW1").unwrap();
    refused(&dir, &arrow, &[], &["trace.arrow", "Parquet"]);

    refused(
        &dir,
        &good,
        &["--extra-inputs", "min_tokens:5"],
        &["--extra-inputs min_tokens", "--no-force-min-tokens"],
    );
    refused(
        &dir,
        &good,
        &["--extra-inputs", "hash_ids:[1]"],
        &["--extra-inputs hash_ids", "--omit-kv-hints"],
    );
    refused(
        &dir,
        &good,
        &["--open-loop-strict", "--no-open-loop-replay"],
        &["--open-loop-strict", "--no-open-loop-replay"],
    );
    refused(
        &dir,
        &good,
        &["--replay-speedup", "0"],
        &["--replay-speedup 0"],
    );
    refused(
        &dir,
        &good,
        &["--trace-session-sample-ratio", "1.5"],
        &["--trace-session-sample-ratio 1.5"],
    );
    refused(
        &dir,
        &good,
        &["--synthesis-speedup-ratio", "2"],
        &["--synthesis-speedup-ratio", "--replay-speedup"],
    );

    // The knobs are refused for every other input.
    let jsonl = tmp.path().join("t.jsonl");
    std::fs::write(&jsonl, "{\"text\": \"hi\"}\n").unwrap();
    for flag in [
        &["--replay-speedup", "2"][..],
        &["--max-idle-gap-cap-seconds", "5"],
        &["--open-loop-replay"],
        &["--no-open-loop-replay"],
        &["--open-loop-strict"],
        &["--omit-kv-hints"],
        &["--force-min-tokens"],
        &["--no-force-min-tokens"],
        &["--trace-session-sample-ratio", "0.5"],
    ] {
        let name = flag[0].trim_start_matches("--no-").trim_start_matches("--");
        refused(
            &dir,
            &jsonl,
            flag,
            &[name, "baseten_trace datasets only", "single_turn"],
        );
    }
}

/// Int64 columns, one slice of values each.
fn write_ints(path: &Path, schema: &str, cols: &[&[i64]]) {
    let schema = Arc::new(parse_message_type(schema).unwrap());
    let props = Arc::new(WriterProperties::builder().build());
    let mut w =
        SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
    let mut g = w.next_row_group().unwrap();
    let mut cols = cols.iter();
    while let Some(mut c) = g.next_column().unwrap() {
        let v = cols.next().unwrap();
        c.typed::<Int64Type>().write_batch(v, None, None).unwrap();
        c.close().unwrap();
    }
    g.close().unwrap();
    w.close().unwrap();
}

/// One row: timestamp, prompt, input tokens 1, output tokens `osl`.
fn write_mixed(path: &Path, schema: &str, ts: i64, prompt: &str, osl: i64) {
    let schema = Arc::new(parse_message_type(schema).unwrap());
    let props = Arc::new(WriterProperties::builder().build());
    let mut w =
        SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
    let mut g = w.next_row_group().unwrap();
    let mut i = 0;
    while let Some(mut c) = g.next_column().unwrap() {
        if i == 1 {
            c.typed::<ByteArrayType>()
                .write_batch(&[ByteArray::from(prompt)], None, None)
                .unwrap();
        } else {
            let v = [ts, 0, 1, osl][i];
            c.typed::<Int64Type>()
                .write_batch(&[v], None, None)
                .unwrap();
        }
        c.close().unwrap();
        i += 1;
    }
    g.close().unwrap();
    w.close().unwrap();
}
