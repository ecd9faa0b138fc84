//! What reaches the server from synthetic data and input files, checked on the wire (the
//! mock's `--record-requests`) against what AIPerf sends: send order, sessions, pools,
//! trace prompt lengths, lenient input fields.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Output;

use common::{read_json, read_jsonl, read_served, run_aiperf_in, stderr_text as stderr};
use serde_json::Value;

/// A run against a fresh recording mock, in a temporary directory.
struct Run {
    out: Output,
    /// The server's records, in the order it received the requests.
    served: Vec<Value>,
    dir: tempfile::TempDir,
}

impl Run {
    fn start(files: &[(&str, &str)], args: &[&str]) -> Run {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let rec = dir.path().join("server.jsonl");
        let mock =
            common::MockChild::spawn(&["--fast", "--record-requests", rec.to_str().unwrap()]);
        let mut all = vec![
            "profile",
            "--model",
            "m",
            "--url",
            &mock.url,
            "--tokenizer",
            "builtin",
            "--random-seed",
            "3",
            "--artifact-dir",
            "run",
        ];
        all.extend_from_slice(args);
        let out = run_aiperf_in(dir.path(), &all);
        mock.terminate();
        let mut served = read_served(&rec);
        served.sort_by_key(|r| r["received_ns"].as_u64());
        Run { out, served, dir }
    }

    fn ok(self) -> Run {
        assert!(self.out.status.success(), "{}", stderr(&self.out));
        self
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// `inputs.json`'s entries, in dataset order.
    fn inputs(&self) -> Vec<Value> {
        read_json(&self.path("run/inputs.json"))["data"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// For each request the server received, in order: the dataset index of its entry
    /// (its `conversation_id`'s place in inputs.json) and its turn index.
    fn wire_entries(&self) -> Vec<(usize, u64)> {
        let index: HashMap<String, usize> = self
            .inputs()
            .iter()
            .enumerate()
            .map(|(i, e)| (e["session_id"].as_str().unwrap().to_string(), i))
            .collect();
        let by_request: HashMap<String, Value> = read_jsonl(&self.path("run/profile_export.jsonl"))
            .into_iter()
            .map(|r| {
                (
                    r["metadata"]["x_request_id"].as_str().unwrap().to_string(),
                    r,
                )
            })
            .collect();
        self.served
            .iter()
            .map(|s| {
                let md = &by_request[s["x_request_id"].as_str().unwrap()]["metadata"];
                let conv = md["conversation_id"].as_str().unwrap();
                (index[conv], md["turn_index"].as_u64().unwrap())
            })
            .collect()
    }
}

fn write_png(path: &Path, w: u32, h: u32, seed: u64) {
    let pixels = aiperf::api::noise_rgb(w, h, seed);
    let bytes = aiperf::api::encode_rgb(&pixels, w, h, aiperf::api::ImageEncoding::Png).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The image URL of each inputs.json entry's first turn.
fn image_urls(inputs: &[Value]) -> Vec<String> {
    inputs
        .iter()
        .map(|e| {
            let parts = &e["payloads"][0]["messages"][0]["content"];
            parts[1]["image_url"]["url"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn synthetic_entries_go_out_in_order_with_their_images_cycling_in_file_order() {
    let images = tempfile::tempdir().unwrap();
    for i in 0..6 {
        write_png(&images.path().join(format!("img{i}.png")), 40, 30, i);
    }
    let dir = images.path().to_str().unwrap();
    let synthetic = [
        "--image-width-mean",
        "64",
        "--image-height-mean",
        "48",
        "--image-source",
        dir,
        "--isl",
        "10",
        "--osl",
        "2",
        "--request-count",
        "8",
        "--concurrency",
        "1",
    ];
    let mut args = synthetic.to_vec();
    args.extend(["--image-source-sampling", "sequential-cycle"]);
    let run = Run::start(&[], &args).ok();
    // Sequential by default, as AIPerf: entries 0..7 in order, on the wire.
    let order: Vec<usize> = run.wire_entries().iter().map(|e| e.0).collect();
    assert_eq!(order, (0..8).collect::<Vec<_>>());
    // Entry i holds image i % 6 (same photo, same size: same bytes), so the wire carries
    // images 0 1 2 3 4 5 0 1.
    let urls = image_urls(&run.inputs());
    assert!(
        urls.iter()
            .all(|u| u.starts_with("data:image/jpeg;base64,"))
    );
    let distinct: std::collections::HashSet<&String> = urls[..6].iter().collect();
    assert_eq!(distinct.len(), 6);
    assert_eq!(urls[6], urls[0]);
    assert_eq!(urls[7], urls[1]);

    // `shuffle`: 3 entries over 9 requests, each entry once per round of 3.
    let mut args = synthetic.to_vec();
    args.extend([
        "--num-dataset-entries",
        "3",
        "--dataset-sampling-strategy",
        "shuffle",
    ]);
    let count = args.iter().position(|a| *a == "8").unwrap();
    args[count] = "9";
    let run = Run::start(&[], &args).ok();
    let order: Vec<usize> = run.wire_entries().iter().map(|e| e.0).collect();
    assert_eq!(order.len(), 9);
    for round in order.chunks(3) {
        let mut r = round.to_vec();
        r.sort();
        assert_eq!(r, vec![0, 1, 2], "{order:?}");
    }
    assert_ne!(
        order[..3],
        order[3..6],
        "{order:?} (reshuffled every round)"
    );
}

#[test]
fn the_sampling_strategy_applies_to_input_files_and_not_to_a_fixed_schedule() {
    let file = "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\"}\n";
    let run = Run::start(
        &[("in.jsonl", file)],
        &[
            "--input-file",
            "in.jsonl",
            "--request-count",
            "30",
            "--dataset-sampling-strategy",
            "random",
        ],
    )
    .ok();
    let order: Vec<usize> = run.wire_entries().iter().map(|e| e.0).collect();
    assert_eq!(order.len(), 30);
    let sequential: Vec<usize> = (0..30).map(|i| i % 3).collect();
    assert_ne!(order, sequential, "drawn with replacement");

    let trace = "{\"timestamp\": 0, \"text\": \"a\"}\n";
    let run = Run::start(
        &[("t.jsonl", trace)],
        &[
            "--input-file",
            "t.jsonl",
            "--dataset-sampling-strategy",
            "shuffle",
        ],
    );
    assert_eq!(run.out.status.code(), Some(2), "{}", stderr(&run.out));
    assert!(
        stderr(&run.out)
            .contains("--dataset-sampling-strategy cannot be used with a fixed schedule"),
        "{}",
        stderr(&run.out)
    );
    assert!(run.served.is_empty());
}

#[test]
fn single_turn_rows_of_one_session_are_one_conversation_with_its_ids_kept() {
    // Session "s1" has two rows; the second may only leave after the first's reply.
    let file = "{\"session_id\": \"s1\", \"text\": \"first question\", \"output_length\": 20}\n\
                {\"session_id\": \"s2\", \"text\": \"other user\", \"output_length\": 2}\n\
                {\"session_id\": \"s1\", \"text\": \"follow-up\", \"output_length\": 2}\n";
    let run = Run::start(
        &[("in.jsonl", file)],
        &[
            "--input-file",
            "in.jsonl",
            "--custom-dataset-type",
            "single_turn",
            "--concurrency",
            "2",
            "--conversation-num",
            "2",
        ],
    )
    .ok();
    let inputs = run.inputs();
    let ids: Vec<&str> = inputs
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s1", "s2"]);
    assert_eq!(inputs[0]["payloads"].as_array().unwrap().len(), 2);

    let records = read_jsonl(&run.path("run/profile_export.jsonl"));
    let mut convs: Vec<(String, u64)> = records
        .iter()
        .map(|r| {
            let md = &r["metadata"];
            let id = md["conversation_id"].as_str().unwrap().to_string();
            (id, md["turn_index"].as_u64().unwrap())
        })
        .collect();
    convs.sort();
    let want = [("s1", 0), ("s1", 1), ("s2", 0)].map(|(s, t)| (s.to_string(), t));
    assert_eq!(convs, want);

    // On the wire: the follow-up arrives after the first turn's last token was sent, and
    // carries the history (its text tokens include the first question and the reply).
    assert_eq!(run.served.len(), 3);
    let wire = run.wire_entries();
    let first = wire.iter().position(|&e| e == (0, 0)).unwrap();
    let second = wire.iter().position(|&e| e == (0, 1)).unwrap();
    let (a, b) = (&run.served[first], &run.served[second]);
    assert!(
        b["received_ns"].as_u64().unwrap() >= a["last_token_ns"].as_u64().unwrap(),
        "{a}\n{b}"
    );
    assert!(
        b["text_tokens"].as_u64() > a["text_tokens"].as_u64(),
        "{a}\n{b}"
    );
}

#[test]
fn a_random_pool_directory_joins_one_entry_of_every_file_per_request() {
    let queries = "{\"text\": \"query one\"}\n{\"text\": \"query two\"}\n";
    let passages = "{\"text\": \"passage alpha\"}\n{\"text\": \"passage beta\"}\n{\"text\": \"passage gamma\"}\n";
    let run = Run::start(
        &[
            ("pool/a_queries.jsonl", queries),
            ("pool/b_passages.jsonl", passages),
        ],
        &[
            "--input-file",
            "pool",
            "--custom-dataset-type",
            "random_pool",
            "--request-count",
            "12",
        ],
    )
    .ok();
    assert_eq!(run.served.len(), 12);
    let mut seen = std::collections::HashSet::new();
    for entry in run.inputs() {
        let parts = entry["payloads"][0]["messages"][0]["content"]
            .as_array()
            .unwrap()
            .clone();
        let texts: Vec<&str> = parts.iter().map(|p| p["text"].as_str().unwrap()).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].starts_with("query"), "{texts:?}");
        assert!(texts[1].starts_with("passage"), "{texts:?}");
        seen.insert(texts[1].to_string());
    }
    assert!(seen.len() >= 2, "passages drawn: {seen:?}");
    // Every request on the wire carries a query and a passage (4 to 5 o200k tokens).
    for s in &run.served {
        let t = s["text_tokens"].as_u64().unwrap();
        assert!((4..=6).contains(&t), "{s}");
    }
}

#[test]
fn mooncake_hash_id_prompts_arrive_with_exactly_the_trace_length() {
    let trace = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1, 2]}\n\
                 {\"timestamp\": 1, \"input_length\": 1000, \"output_length\": 2, \"hash_ids\": [1, 3]}\n\
                 {\"timestamp\": 2, \"input_length\": 1100, \"output_length\": 2, \"hash_ids\": [4, 5, 6]}\n";
    let run = Run::start(
        &[("trace.jsonl", trace)],
        &[
            "--input-file",
            "trace.jsonl",
            "--custom-dataset-type",
            "mooncake_trace",
        ],
    )
    .ok();
    let mut lengths: Vec<u64> = run
        .served
        .iter()
        .map(|s| s["text_tokens"].as_u64().unwrap())
        .collect();
    lengths.sort();
    assert_eq!(lengths, vec![600, 1000, 1100]);
}

#[test]
fn lenient_input_fields_and_a_trace_that_ignores_request_count() {
    let pixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/x8AAusB9WlLaY4AAAAASUVORK5CYII=";
    let file = format!(
        "{{\"type\": \"single_turn\", \"text\": \"a\", \"images\": [\"{pixel}\"], \"image_uuids\": [\"img-a\"], \"timestamp\": 0.4, \"source\": \"x\"}}\n\
         {{\"type\": \"single_turn\", \"text\": \"b\", \"timestamp\": 250.6, \"label\": 1, \"source\": \"y\"}}\n"
    );
    let run = Run::start(
        &[("in.jsonl", &file)],
        &["--input-file", "in.jsonl", "--request-count", "50"],
    )
    .ok();
    let err = stderr(&run.out);
    assert_eq!(
        err.matches("Ignoring unknown field(s) of the input file: label, source (first at ")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("in.jsonl:1)"), "{err}");
    assert_eq!(
        err.matches("--request-count 50 is ignored").count(),
        1,
        "{err}"
    );
    // Both rows, once each, at their (rounded) times: 0 and 251 ms apart.
    assert_eq!(run.served.len(), 2);
    let gap = run.served[1]["received_ns"].as_u64().unwrap()
        - run.served[0]["received_ns"].as_u64().unwrap();
    assert!((200_000_000..1_000_000_000).contains(&gap), "{gap}");
    // The image id goes out as the image part's uuid.
    let inputs = run.inputs();
    let part = &inputs[0]["payloads"][0]["messages"][0]["content"][1];
    assert_eq!(part["uuid"], "img-a", "{part}");
    assert_eq!(run.served[0]["num_images"], 1);

    // Fractional delays between turns of a conversation.
    let file = "{\"session_id\": \"c\", \"turns\": [{\"text\": \"a\"}, {\"text\": \"b\", \"delay\": 150.5}]}\n";
    let run = Run::start(
        &[("mt.jsonl", file)],
        &[
            "--input-file",
            "mt.jsonl",
            "--custom-dataset-type",
            "multi_turn",
            "--request-count",
            "2",
        ],
    )
    .ok();
    assert_eq!(run.served.len(), 2);
    let gap = run.served[1]["received_ns"].as_u64().unwrap()
        - run.served[0]["last_token_ns"].as_u64().unwrap();
    assert!(gap >= 150_000_000, "{gap}");
}
