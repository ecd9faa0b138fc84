//! `--input-file` end to end: the real `aiperf` binary against the real mock server.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{read_jsonl, run_aiperf_in as aiperf, stderr_text as stderr};
use serde_json::Value;

const PIXEL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/x8AAusB9WlLaY4AAAAASUVORK5CYII=";

/// A recording mock server; the records are read after it stops.
struct Recorded {
    mock: common::MockChild,
    file: std::path::PathBuf,
}

impl Recorded {
    fn start(dir: &Path) -> Recorded {
        let file = dir.join("server.jsonl");
        let mock =
            common::MockChild::spawn(&["--fast", "--record-requests", file.to_str().unwrap()]);
        Recorded { mock, file }
    }

    fn url(&self) -> String {
        format!("localhost:{}", self.mock.addr.port())
    }

    fn finish(self) -> Vec<Value> {
        self.mock.terminate();
        common::read_served(&self.file)
    }
}

/// `profile` with a custom file at the mock, builtin tokenizer, artifacts in `cwd/run`.
fn profile_file(cwd: &Path, url: &str, file: &str, kind: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "profile",
        "--model",
        "m",
        "--url",
        url,
        "--input-file",
        file,
        "--custom-dataset-type",
        kind,
        "--tokenizer",
        "builtin",
        "--random-seed",
        "1",
        "--artifact-dir",
        "run",
    ];
    args.extend_from_slice(extra);
    aiperf(cwd, &args)
}

#[test]
fn the_vision_guide_custom_file_command_works_verbatim() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = [
        ("Describe this image in detail.", Some(200)),
        ("What objects are visible in this image?", None),
        ("Analyze the composition of this photo.", Some(300)),
        ("What is the main subject of this image?", None),
        ("Provide a caption for this image.", Some(50)),
    ];
    let mut text = String::new();
    for (prompt, osl) in lines {
        let osl = osl
            .map(|n| format!(", \"output_length\": {n}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "{{\"texts\": [\"{prompt}\"], \"images\": [\"{PIXEL}\"]{osl}}}\n"
        ));
    }
    std::fs::write(tmp.path().join("inputs.jsonl"), text).unwrap();
    let server = Recorded::start(tmp.path());
    let url = server.url();
    let out = aiperf(
        tmp.path(),
        &[
            "profile",
            "--model",
            "Qwen/Qwen2-VL-2B-Instruct",
            "--endpoint-type",
            "chat",
            "--input-file",
            "inputs.jsonl",
            "--custom-dataset-type",
            "single_turn",
            "--streaming",
            "--url",
            &url,
            "--request-count",
            "5",
        ],
    );
    let records = server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    let run = tmp
        .path()
        .join("artifacts/Qwen_Qwen2-VL-2B-Instruct-chat-concurrency1");
    assert!(run.join("profile_export_aiperf.json").is_file());
    // Sent in file order, each with its 1x1 image and its own output length.
    assert_eq!(records.len(), 5);
    for (r, (_, osl)) in records.iter().zip(lines) {
        assert_eq!(r["image_sizes"], serde_json::json!([[1, 1]]), "{r}");
        assert!(r["error"].is_null(), "{r}");
        if let Some(n) = osl {
            assert_eq!(r["output_tokens"].as_u64(), Some(n), "{r}");
        }
    }
    let inputs: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("inputs.json")).unwrap()).unwrap();
    let first = &inputs["data"][0]["payloads"][0];
    assert_eq!(
        first["messages"][0]["content"][0]["text"],
        "Describe this image in detail."
    );
    assert_eq!(
        first["messages"][0]["content"][1]["image_url"]["url"],
        PIXEL
    );
    assert_eq!(first["max_completion_tokens"], 200);
}

#[test]
fn single_turn_reuses_entries_and_reads_local_images() {
    let tmp = tempfile::tempdir().unwrap();
    let pixels = aiperf::api::noise_rgb(40, 30, 1);
    let png = aiperf::api::encode_rgb(&pixels, 40, 30, aiperf::api::ImageEncoding::Png).unwrap();
    std::fs::write(tmp.path().join("photo.png"), &png).unwrap();
    std::fs::write(
        tmp.path().join("in.jsonl"),
        "{\"text\": \"one\", \"image\": \"photo.png\", \"extra\": {\"temperature\": 0.5}}\n\
         {\"text\": \"two\", \"output_length\": 3}\n",
    )
    .unwrap();
    let server = Recorded::start(tmp.path());
    let out = profile_file(
        tmp.path(),
        &server.url(),
        "in.jsonl",
        "single_turn",
        &["--request-count", "5"],
    );
    let records = server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    let sizes: Vec<Value> = records.iter().map(|r| r["image_sizes"].clone()).collect();
    let one = serde_json::json!([[40, 30]]);
    let none = serde_json::json!([]);
    assert_eq!(
        sizes,
        vec![
            one.clone(),
            none.clone(),
            one,
            none.clone(),
            serde_json::json!([[40, 30]])
        ]
    );
    let inputs: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("run/inputs.json")).unwrap())
            .unwrap();
    let body = &inputs["data"][0]["payloads"][0];
    assert_eq!(body["temperature"], 0.5);
    let url = body["messages"][0]["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap();
    assert!(url.starts_with("data:image/png;base64,iVBOR"), "{url}");
}

#[test]
fn multi_turn_sends_the_history_with_the_actual_replies() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("chat.jsonl"),
        r#"{"session_id": "s1", "turns": [{"role": "system", "text": "Be brief."}, {"text": "Hello there", "output_length": 4}, {"text": "And then?", "output_length": 3, "delay": 50}]}
"#,
    )
    .unwrap();
    let server = Recorded::start(tmp.path());
    let out = profile_file(
        tmp.path(),
        &server.url(),
        "chat.jsonl",
        "multi_turn",
        &["--request-count", "2"],
    );
    let records = server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(records.len(), 2);
    let (first, second) = (&records[0], &records[1]);
    let tok = aiperf::api::Tokenizer::builtin().unwrap();
    let count = |s: &str| tok.count(s) as u64;
    // Turn 1: system + user. Turn 2: the same, the 4-token reply, and the new user text.
    assert_eq!(
        first["text_tokens"].as_u64(),
        Some(count("Be brief.") + count("Hello there"))
    );
    assert_eq!(first["output_tokens"].as_u64(), Some(4));
    let reply: String = (0..4).map(aiperf::api::mock_word).collect();
    assert_eq!(
        second["text_tokens"].as_u64(),
        Some(count("Be brief.") + count("Hello there") + count(&reply) + count("And then?")),
        "{second}"
    );
    // The turn waited for the reply and its 50 ms delay.
    let gap = second["received_ns"].as_u64().unwrap() - first["last_token_ns"].as_u64().unwrap();
    assert!(gap >= 50_000_000, "{gap} ns");
    let jsonl = read_jsonl(&tmp.path().join("run/profile_export.jsonl"));
    let turns: Vec<u64> = jsonl
        .iter()
        .map(|r| r["metadata"]["turn_index"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, vec![0, 1]);
}

#[test]
fn random_pool_directory_and_mooncake_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("pool");
    std::fs::create_dir(&pool).unwrap();
    // A directory of one file is that file's pool (several files are joined per request:
    // tests/dataset_compat.rs).
    std::fs::write(
        pool.join("a.jsonl"),
        "{\"text\": \"alpha\", \"output_length\": 2}\n{\"text\": \"beta\", \"output_length\": 3}\n",
    )
    .unwrap();
    let server = Recorded::start(tmp.path());
    let out = profile_file(
        tmp.path(),
        &server.url(),
        "pool",
        "random_pool",
        &["--request-count", "12"],
    );
    let records = server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    let outputs: Vec<u64> = records
        .iter()
        .map(|r| r["output_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(outputs.len(), 12);
    assert!(
        outputs.contains(&2) && outputs.contains(&3),
        "both entries drawn: {outputs:?}"
    );

    std::fs::write(
        tmp.path().join("trace.jsonl"),
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 2, \"hash_ids\": [7, 8]}\n\
         {\"timestamp\": 10, \"input_length\": 30, \"output_length\": 2, \"hash_ids\": [7, 9]}\n\
         {\"timestamp\": 20, \"text_input\": \"plain text\", \"output_length\": 1}\n",
    )
    .unwrap();
    let server = Recorded::start(tmp.path());
    let out = profile_file(
        tmp.path(),
        &server.url(),
        "trace.jsonl",
        "mooncake_trace",
        // The trace's timestamps fix both the schedule and the count: no --request-count.
        &["--isl-block-size", "20"],
    );
    let records = server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(records.len(), 3);
    let inputs: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("run/inputs.json")).unwrap())
            .unwrap();
    let prompt = |i: usize| {
        inputs["data"][i]["payloads"][0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Hash id 7 is the same 20-token block at the start of both prompts.
    let (p0, p1) = (prompt(0), prompt(1));
    let block = p0.split('\n').next().unwrap();
    assert!(p1.starts_with(&format!("{block}\n")), "{p0:?} / {p1:?}");
    assert_ne!(p0, p1);
    assert_eq!(prompt(2), "plain text");
}

#[test]
fn bad_input_is_reported_with_file_line_and_field_and_nothing_is_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "{\"text\": \"ok\"}\n{\"text\": \"broken\"\n",
            "error: bad.jsonl:2: malformed JSON: EOF while parsing an object at line 1 column 17",
        ),
        (
            "{\"text\": \"a\", \"texts\": [\"b\"]}\n",
            "error: bad.jsonl:1: field 'text': give either 'text' or 'texts', not both",
        ),
        (
            "{\"text\": \"fine\"}\n\n{\"output_length\": 5}\n",
            "error: bad.jsonl:3: no content; give text, texts, image, images, audio(s) or video(s)",
        ),
        (
            "{\"text\": \"look\", \"images\": [\"missing.png\"]}\n",
            "error: bad.jsonl:1: field 'images[0]': image file 'missing.png' does not exist",
        ),
        (
            "{\"text\": \"look\", \"image\": \"corrupt.png\"}\n",
            "error: bad.jsonl:1: field 'image': cannot decode image file 'corrupt.png': ",
        ),
    ];
    std::fs::write(
        tmp.path().join("corrupt.png"),
        b"\x89PNG\r\n\x1a\n not really",
    )
    .unwrap();
    let server = Recorded::start(tmp.path());
    let url = server.url();
    for (content, message) in cases {
        std::fs::write(tmp.path().join("bad.jsonl"), content).unwrap();
        let out = profile_file(tmp.path(), &url, "bad.jsonl", "single_turn", &[]);
        assert_eq!(out.status.code(), Some(2), "{content}: {}", stderr(&out));
        let err = stderr(&out);
        let line = err.lines().last().unwrap_or_default();
        assert!(
            line.starts_with(message),
            "{content}\nwanted {message}\ngot    {line}"
        );
    }
    // A misspelt field is ignored with a warning naming it with its turn; the turn then has
    // no content.
    std::fs::write(
        tmp.path().join("bad.jsonl"),
        "{\"session_id\": \"a\", \"turns\": [{\"text\": \"hi\"}, {\"txt\": \"typo\"}]}\n",
    )
    .unwrap();
    let out = profile_file(tmp.path(), &url, "bad.jsonl", "multi_turn", &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(
            "Ignoring unknown field(s) of the input file: turns[1].txt (first at bad.jsonl:1)"
        ),
        "{err}"
    );
    assert!(
        err.contains("error: bad.jsonl:1: turns[1].no content; give text"),
        "{err}"
    );
    // Synthetic image flags make no sense with a file.
    std::fs::write(tmp.path().join("ok.jsonl"), "{\"text\": \"hi\"}\n").unwrap();
    let out = profile_file(
        tmp.path(),
        &url,
        "ok.jsonl",
        "single_turn",
        &["--image-width-mean", "64", "--image-height-mean", "64"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("error: --image-width-mean applies to synthetic data only and cannot be used with --input-file"),
        "{}",
        stderr(&out)
    );
    assert!(server.finish().is_empty(), "nothing may be sent");
}

/// `--synthesis-*` reshape a mooncake trace: the shared prefix [7, 8] (40 tokens over
/// 20-token blocks) doubled, each row's own part doubled, outputs doubled then capped, the
/// clock four times faster, and the 500-token row dropped by the ISL cap.
#[test]
fn synthesis_flags_reshape_a_mooncake_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let long: Vec<String> = (100..125).map(|i| i.to_string()).collect();
    std::fs::write(
        tmp.path().join("trace.jsonl"),
        format!(
            "{{\"timestamp\": 0, \"input_length\": 50, \"output_length\": 3, \"hash_ids\": [7, 8, 9]}}\n\
             {{\"timestamp\": 800, \"input_length\": 45, \"output_length\": 5, \"hash_ids\": [7, 8, 10]}}\n\
             {{\"timestamp\": 1600, \"input_length\": 500, \"output_length\": 2, \"hash_ids\": [{}]}}\n",
            long.join(", ")
        ),
    )
    .unwrap();
    let server = Recorded::start(tmp.path());
    let out = profile_file(
        tmp.path(),
        &server.url(),
        "trace.jsonl",
        "mooncake_trace",
        &[
            "--isl-block-size",
            "20",
            "--synthesis-prefix-len-multiplier",
            "2",
            "--synthesis-prompt-len-multiplier",
            "2",
            "--synthesis-output-len-multiplier",
            "2",
            "--synthesis-max-osl",
            "8",
            "--synthesis-max-isl",
            "100",
            "--synthesis-speedup-ratio",
            "4",
        ],
    );
    let served = server.finish();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(served.len(), 2, "the 500-token row is dropped");
    let records = read_jsonl(&tmp.path().join("run/profile_export.jsonl"));
    let isl: Vec<u64> = records
        .iter()
        .map(|r| {
            r["metrics"]["input_sequence_length"]["value"]
                .as_u64()
                .unwrap()
        })
        .collect();
    // 80 shared + 2 x 10 own, and 80 + 2 x 5.
    assert_eq!(isl, [100, 90]);
    let asked: Vec<u64> = served
        .iter()
        .map(|r| r["output_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(asked, [6, 8]);
    // The rows were 800 ms apart in the trace: 200 ms at four times the speed.
    let starts: Vec<f64> = records
        .iter()
        .map(|r| r["metadata"]["request_start_ns"].as_f64().unwrap())
        .collect();
    let gap_ms = (starts[1] - starts[0]) / 1e6;
    assert!((150.0..600.0).contains(&gap_ms), "{gap_ms} ms");

    // Without a trace they have nothing to reshape: refused.
    let out = profile_file(
        tmp.path(),
        &server_url_unused(),
        "trace.jsonl",
        "single_turn",
        &["--synthesis-max-osl", "8"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--synthesis-*: these reshape a trace; give --input-file with --custom-dataset-type mooncake_trace"),
        "{}",
        stderr(&out)
    );
}

/// A URL nothing listens on: for runs refused before they send.
fn server_url_unused() -> String {
    "localhost:9".to_string()
}
