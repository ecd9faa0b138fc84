//! Accuracy mode's vision sets end to end (chartqa, docvqa, ai2d, mmmu): each set's Parquet
//! files with generated PNG images written into a Hugging Face cache layout (offline), the
//! real binary run against a chat server that knows the questions and answers some right,
//! some wrong and one in a form the grader cannot read; the exact counts checked in
//! accuracy_results.csv, each request's image parts, and the image and timing metrics in
//! the profile exports.

use crate::common;

use std::process::Output;

use super::accuracy::profile;
use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use common::hub_fixture::{Leaf, image_leaves, png, snapshot, text_lists, texts, write_parquet};
use common::raw_server::{After, RawRequest, RawServer, json_reply};
use common::{read_json, read_jsonl, stderr_text};
use serde_json::{Value, json};

/// Prompt tokens the server charges per image, beyond a fixed text charge.
const TOKENS_PER_IMAGE: u64 = 100;

/// The user message's text parts and its image URLs.
fn user_parts(body: &Value) -> (String, Vec<String>) {
    let Some(last) = body["messages"].as_array().and_then(|m| m.last()) else {
        return (String::new(), Vec::new());
    };
    match &last["content"] {
        Value::Array(parts) => (
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            parts
                .iter()
                .filter_map(|p| p["image_url"]["url"].as_str().map(String::from))
                .collect(),
        ),
        c => (c.as_str().unwrap_or_default().to_string(), Vec::new()),
    }
}

/// A chat server answering each question by a phrase of its text, charging 1000 prompt
/// tokens plus 100 per image (so Image Token Count is measured).
fn answering(table: &'static [(&'static str, &'static str)]) -> RawServer {
    RawServer::start(move |req: &RawRequest| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let (text, images) = user_parts(&body);
        let reply = table
            .iter()
            .find(|(key, _)| text.contains(key))
            .map_or("no such question", |(_, reply)| reply);
        json_reply(
            "",
            &json!({
                "id": "x",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": 1000 + TOKENS_PER_IMAGE * images.len() as u64,
                    "completion_tokens": 3,
                    "total_tokens": 1003 + TOKENS_PER_IMAGE * images.len() as u64,
                },
            }),
            After::KeepOpen,
        )
    })
}

/// The requests that carried images (the template probe sends its question without them).
fn image_requests(server: &RawServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .filter(|r| r.head.starts_with("post"))
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|b| !user_parts(b).1.is_empty())
        .collect()
}

fn data_url(png: &[u8]) -> String {
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    )
}

/// The run's checks common to every set: it succeeded; accuracy_results.csv is `csv`; each
/// question went once with its image parts (data URLs, `images` of them per conversation
/// id); each record is timed and counts its images; the summary has Image Token Count.
fn check_run(out: &Output, dir: &Path, server: &RawServer, csv: &str, images: &[(&str, usize)]) {
    let stderr = stderr_text(out);
    assert!(out.status.success(), "{stderr}");
    let run = dir.join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        csv
    );
    let sent = image_requests(server);
    assert_eq!(sent.len(), images.len());
    for body in &sent {
        assert!(
            user_parts(body)
                .1
                .iter()
                .all(|u| u.starts_with("data:image/png;base64,")),
            "{body}"
        );
    }
    let mut sent_counts: Vec<usize> = sent.iter().map(|b| user_parts(b).1.len()).collect();
    let mut expected_counts: Vec<usize> = images.iter().map(|(_, n)| *n).collect();
    sent_counts.sort_unstable();
    expected_counts.sort_unstable();
    assert_eq!(sent_counts, expected_counts);

    let records = read_jsonl(&run.join("profile_export.jsonl"));
    let by_id: BTreeMap<String, &Value> = records
        .iter()
        .map(|r| {
            (
                r["metadata"]["conversation_id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                r,
            )
        })
        .collect();
    assert_eq!(by_id.len(), images.len());
    for (id, n) in images {
        let r = by_id
            .get(*id)
            .unwrap_or_else(|| panic!("no record of {id}"));
        assert_eq!(
            r["metrics"]["num_images"]["value"].as_f64(),
            Some(*n as f64),
            "{r}"
        );
        assert!(r["metrics"]["request_latency"]["value"].as_f64().unwrap() > 0.0);
        assert!(
            r["metrics"]["image_token_count"]["value"].is_number(),
            "{r}"
        );
    }
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    for metric in ["image_token_count", "request_latency", "num_images"] {
        assert!(
            summary[metric]["avg"].as_f64().is_some(),
            "no {metric} in {summary}"
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Accuracy Benchmark Results"), "{stdout}");
}

/// The JSONL line of conversation `id`.
fn graded(dir: &Path, id: &str) -> Value {
    read_jsonl(&dir.join("run/accuracy_export.jsonl"))
        .into_iter()
        .find(|l| l["conversation_id"] == id)
        .unwrap_or_else(|| panic!("no graded reply for {id}"))
}

/// HuggingFaceM4/ChartQA, `data/test-*.parquet`: (query, labels, human_or_machine, image).
fn cache_chartqa(home: &Path, rows: &[(&str, Vec<&str>, i64, Vec<u8>)]) {
    let file = snapshot(home, "HuggingFaceM4/ChartQA").join("data/test-00000-of-00001.parquet");
    let schema = "message schema {
        optional group image { optional binary bytes; optional binary path (STRING); }
        optional binary query (STRING);
        optional group label (LIST) { repeated group list { optional binary element (STRING); } }
        optional int64 human_or_machine;
    }";
    let [bytes, paths] = image_leaves(&rows.iter().map(|r| Some(r.3.clone())).collect::<Vec<_>>());
    write_parquet(
        &file,
        schema,
        vec![
            bytes,
            paths,
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            text_lists(&rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>()),
            Leaf::Int(rows.iter().map(|r| r.2).collect()),
        ],
    );
}

/// Within 5% (3.3% off), more than 5% off (5.6%), text ignoring case, no number at all
/// (unparsed), and an exact text.
const CHARTQA_REPLIES: &[(&str, &str)] = &[
    ("How many bars", "12.4"),
    ("share of Germany", "47.5"),
    ("highest value", "brazil"),
    ("value in 2019", "I cannot read the chart."),
    ("line rising", "Yes"),
];

#[test]
fn chartqa_is_graded_by_relaxed_accuracy_per_split() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    let first = png(20, 12);
    cache_chartqa(
        &home,
        &[
            ("How many bars are blue?", vec!["12"], 0, first.clone()),
            ("What is the share of Germany?", vec!["45"], 0, png(8, 8)),
            (
                "Which country has the highest value?",
                vec!["Brazil"],
                1,
                png(9, 9),
            ),
            ("What is the value in 2019?", vec!["3.5"], 1, png(10, 7)),
            ("Is the line rising?", vec!["Yes"], 0, png(6, 6)),
        ],
    );
    let server = answering(CHARTQA_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &["--accuracy-benchmark", "chartqa", "--request-count", "5"],
    );
    check_run(
        &out,
        dir.path(),
        &server,
        "task,correct,total,unparsed,accuracy\nOVERALL,3,5,1,0.6000\naugmented,1,2,1,0.5000\nhuman,2,3,0,0.6667\n",
        &[
            ("human-0", 1),
            ("human-1", 1),
            ("augmented-2", 1),
            ("augmented-3", 1),
            ("human-4", 1),
        ],
    );
    // lmms-eval's prompt, then the chart as a data URL of the stored bytes; its output limit.
    let sent = image_requests(&server);
    let bars = sent
        .iter()
        .find(|b| b.to_string().contains("How many bars"))
        .unwrap();
    assert_eq!(
        bars["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "How many bars are blue?\nAnswer the question using a single word or phrase."},
            {"type": "image_url", "image_url": {"url": data_url(&first)}}
        ]}])
    );
    assert_eq!(bars["max_completion_tokens"], 16);
    let germany = graded(dir.path(), "human-1");
    assert_eq!(
        (
            &germany["passed"],
            &germany["unparsed"],
            &germany["grader_name"]
        ),
        (&json!(false), &json!(false), &json!("relaxed_accuracy"))
    );
    assert!(graded(dir.path(), "augmented-3")["unparsed"] == json!(true));

    // Only the human-written questions.
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "chartqa",
            "--accuracy-tasks",
            "human",
            "--request-count",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,3,0,0.6667\nhuman,2,3,0,0.6667\n"
    );
    // The prompt asks for a word or phrase: no chain of thought.
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &["--accuracy-benchmark", "chartqa", "--accuracy-enable-cot"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains(
            "--accuracy-enable-cot: --accuracy-benchmark chartqa asks for a single word or phrase"
        ),
        "{}",
        stderr_text(&out)
    );
}

/// lmms-lab/DocVQA, config DocVQA: `DocVQA/validation-*.parquet`: (question, answers, image).
fn cache_docvqa(home: &Path, rows: &[(&str, Vec<&str>, Vec<u8>)]) {
    let file = snapshot(home, "lmms-lab/DocVQA").join("DocVQA/validation-00000-of-00001.parquet");
    let schema = "message schema {
        optional binary questionId (STRING);
        optional binary question (STRING);
        optional group image { optional binary bytes; optional binary path (STRING); }
        optional group answers (LIST) { repeated group list { optional binary element (STRING); } }
    }";
    let [bytes, paths] = image_leaves(&rows.iter().map(|r| Some(r.2.clone())).collect::<Vec<_>>());
    let ids: Vec<String> = (0..rows.len()).map(|i| format!("{}", 1000 + i)).collect();
    write_parquet(
        &file,
        schema,
        vec![
            texts(&ids.iter().map(String::as_str).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            bytes,
            paths,
            text_lists(&rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>()),
        ],
    );
}

/// ANLS 12/13 (a comma missing), 1 (case only), 0 (far off), 0 (6/14 similar: below the
/// 0.5 threshold), and blank (unparsed).
const DOCVQA_REPLIES: &[(&str, &str)] = &[
    ("date on the letter", "March 5 1998"),
    ("signed the memo", "j. smith"),
    ("the total", "$ 980"),
    ("which city", "Bostonian Area"),
    ("the title", "  \n"),
];

#[test]
fn docvqa_is_graded_by_anls_with_its_mean_reported() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_docvqa(
        &home,
        &[
            (
                "What is the date on the letter?",
                vec!["March 5, 1998", "5 March 1998"],
                png(12, 16),
            ),
            ("Who signed the memo?", vec!["J. Smith"], png(8, 8)),
            ("What is the total?", vec!["$1,250"], png(9, 9)),
            ("In which city is the office?", vec!["Boston"], png(7, 9)),
            ("What is the title?", vec!["Annual Report"], png(10, 10)),
        ],
    );
    let server = answering(DOCVQA_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &["--accuracy-benchmark", "docvqa", "--request-count", "5"],
    );
    // Mean ANLS (12/13 + 1) / 5 = 0.3846; 2 of 5 at 0.5 or more.
    check_run(
        &out,
        dir.path(),
        &server,
        "task,correct,total,unparsed,accuracy,anls\nOVERALL,2,5,1,0.4000,0.3846\ndocvqa,2,5,1,0.4000,0.3846\n",
        &[
            ("docvqa-0", 1),
            ("docvqa-1", 1),
            ("docvqa-2", 1),
            ("docvqa-3", 1),
            ("docvqa-4", 1),
        ],
    );
    let sent = image_requests(&server);
    let memo = sent
        .iter()
        .find(|b| b.to_string().contains("signed the memo"))
        .unwrap();
    assert_eq!(
        user_parts(memo).0,
        "Who signed the memo?\nAnswer the question using a single word or phrase."
    );
    assert_eq!(memo["max_completion_tokens"], 128);
    let date = graded(dir.path(), "docvqa-0");
    assert!(
        (date["anls"].as_f64().unwrap() - 12.0 / 13.0).abs() < 1e-9,
        "{date}"
    );
    assert_eq!(
        (&date["passed"], &date["expected"], &date["grader_name"]),
        (
            &json!(true),
            &json!("March 5, 1998 | 5 March 1998"),
            &json!("anls")
        )
    );
    let city = graded(dir.path(), "docvqa-3");
    assert_eq!(
        (&city["anls"], &city["passed"]),
        (&json!(0.0), &json!(false))
    );
    assert_eq!(graded(dir.path(), "docvqa-4")["unparsed"], json!(true));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ANLS") && stdout.contains("0.3846"),
        "{stdout}"
    );
}

/// lmms-lab/ai2d, `data/test-*.parquet`: (question, options, answer index, image).
fn cache_ai2d(home: &Path, rows: &[(&str, Vec<&str>, &str, Vec<u8>)]) {
    let file = snapshot(home, "lmms-lab/ai2d").join("data/test-00000-of-00001.parquet");
    let schema = "message schema {
        optional binary question (STRING);
        optional group options (LIST) { repeated group list { optional binary element (STRING); } }
        optional binary answer (STRING);
        optional group image { optional binary bytes; optional binary path (STRING); }
    }";
    let [bytes, paths] = image_leaves(&rows.iter().map(|r| Some(r.3.clone())).collect::<Vec<_>>());
    write_parquet(
        &file,
        schema,
        vec![
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            text_lists(&rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.2).collect::<Vec<_>>()),
            bytes,
            paths,
        ],
    );
}

/// A bare right letter, a right "The answer is C.", a wrong letter, and no letter.
const AI2D_REPLIES: &[(&str, &str)] = &[
    ("is a producer", "A"),
    ("arrow represent", "The answer is C."),
    ("after larva", "D"),
    ("How many legs", "I am not sure."),
];

#[test]
fn ai2d_options_are_lettered_and_graded() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_ai2d(
        &home,
        &[
            (
                "Which organism is a producer?",
                vec!["grass", "hawk", "snake", "frog"],
                "0",
                png(10, 10),
            ),
            (
                "What does the arrow represent?",
                vec!["light", "water", "energy flow", "heat"],
                "2",
                png(11, 9),
            ),
            (
                "Which stage comes after larva?",
                vec!["egg", "pupa", "adult", "nymph"],
                "1",
                png(8, 12),
            ),
            (
                "How many legs does the insect have?",
                vec!["2", "4", "8", "6"],
                "3",
                png(7, 7),
            ),
        ],
    );
    let server = answering(AI2D_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &["--accuracy-benchmark", "ai2d", "--request-count", "4"],
    );
    check_run(
        &out,
        dir.path(),
        &server,
        "task,correct,total,unparsed,accuracy\nOVERALL,2,4,1,0.5000\nai2d,2,4,1,0.5000\n",
        &[("ai2d-0", 1), ("ai2d-1", 1), ("ai2d-2", 1), ("ai2d-3", 1)],
    );
    let sent = image_requests(&server);
    let producer = sent
        .iter()
        .find(|b| b.to_string().contains("is a producer"))
        .unwrap();
    assert_eq!(
        user_parts(producer).0,
        "Which organism is a producer?\nA. grass\nB. hawk\nC. snake\nD. frog\nAnswer with the option's letter from the given choices directly."
    );
    assert_eq!(producer["max_completion_tokens"], 16);
    let larva = graded(dir.path(), "ai2d-2");
    assert_eq!(
        (&larva["actual"], &larva["expected"], &larva["passed"]),
        (&json!("D"), &json!("B"), &json!(false))
    );
}

/// One MMMU question: (question, options literal, answer, question type, images 1..7).
type MmmuRow<'a> = (&'a str, &'a str, &'a str, &'a str, [Option<Vec<u8>>; 7]);

/// MMMU/MMMU, one subject's `<Subject>/validation-*.parquet`.
fn cache_mmmu(home: &Path, subject: &str, rows: &[MmmuRow]) {
    let file = snapshot(home, "MMMU/MMMU")
        .join(subject)
        .join("validation-00000-of-00001.parquet");
    let images: String = (1..=7)
        .map(|i| {
            format!(
                "optional group image_{i} {{ optional binary bytes; optional binary path (STRING); }}\n"
            )
        })
        .collect();
    let schema = format!(
        "message schema {{
            optional binary id (STRING);
            optional binary question (STRING);
            optional binary options (STRING);
            {images}
            optional binary answer (STRING);
            optional binary question_type (STRING);
        }}"
    );
    let ids: Vec<String> = (1..=rows.len())
        .map(|i| format!("validation_{subject}_{i}"))
        .collect();
    let mut leaves = vec![
        texts(&ids.iter().map(String::as_str).collect::<Vec<_>>()),
        texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        texts(&rows.iter().map(|r| r.1).collect::<Vec<_>>()),
    ];
    for i in 0..7 {
        let column: Vec<Option<Vec<u8>>> = rows.iter().map(|r| r.4[i].clone()).collect();
        leaves.extend(image_leaves(&column));
    }
    leaves.push(texts(&rows.iter().map(|r| r.2).collect::<Vec<_>>()));
    leaves.push(texts(&rows.iter().map(|r| r.3).collect::<Vec<_>>()));
    write_parquet(&file, &schema, leaves);
}

/// The first `n` of 7 image columns filled.
fn imgs(n: usize) -> [Option<Vec<u8>>; 7] {
    std::array::from_fn(|i| (i < n).then(|| png(5 + i as u32, 6)))
}

/// Art: a bracketed right letter; a right answer named by its option's text (a fallback:
/// unparsed). Math: a right open number; no letter (unparsed); a wrong open answer; a wrong
/// letter.
const MMMU_REPLIES: &[(&str, &str)] = &[
    ("painting is older", "(A)"),
    ("Who painted", "I believe it was painted by Manet in Paris"),
    ("area of the square", "The area is 16"),
    ("shows y = x^2", "hmm"),
    ("Solve for x", "no idea"),
    ("Compare", "D"),
];

#[test]
fn mmmu_sends_the_named_images_and_parses_as_mmmu() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    let older = imgs(3);
    cache_mmmu(
        &home,
        "Art",
        &[
            (
                "Which painting is older? <image 1>",
                "['<image 2>', '<image 3>', 'Both', 'Neither']",
                "A",
                "multiple-choice",
                older.clone(),
            ),
            (
                "Who painted <image 1>?",
                "['Monet', 'Manet', 'Degas', 'Renoir']",
                "B",
                "multiple-choice",
                imgs(1),
            ),
        ],
    );
    cache_mmmu(
        &home,
        "Math",
        &[
            (
                "What is the area of the square in <image 1>?",
                "[]",
                "16",
                "open",
                imgs(1),
            ),
            (
                "Which graph shows y = x^2?",
                "['<image 1>', '<image 2>']",
                "B",
                "multiple-choice",
                imgs(2),
            ),
            ("Solve for x in <image 1>.", "[]", "4", "open", imgs(1)),
            (
                "Compare <image 1> and <image 3>: which is larger?",
                "['left', 'right', 'same', 'unknown']",
                "C",
                "multiple-choice",
                imgs(3),
            ),
        ],
    );
    let server = answering(MMMU_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "mmmu",
            "--accuracy-tasks",
            "Art,Math",
            "--request-count",
            "6",
        ],
    );
    // The last Math question names images 1 and 3 only: two are sent, not three.
    check_run(
        &out,
        dir.path(),
        &server,
        "task,correct,total,unparsed,accuracy\nOVERALL,3,6,2,0.5000\nArt,2,2,1,1.0000\nMath,1,4,1,0.2500\n",
        &[
            ("Art-0", 3),
            ("Art-1", 1),
            ("Math-0", 1),
            ("Math-1", 2),
            ("Math-2", 1),
            ("Math-3", 2),
        ],
    );
    let sent = image_requests(&server);
    let art = sent
        .iter()
        .find(|b| b.to_string().contains("painting is older"))
        .unwrap();
    let (text, urls) = user_parts(art);
    assert_eq!(
        text,
        "Which painting is older? <image 1>\nA. <image 2>\nB. <image 3>\nC. Both\nD. Neither\n\nAnswer with the option's letter from the given choices directly."
    );
    let expected: Vec<String> = older.iter().flatten().map(|p| data_url(p)).collect();
    assert_eq!(urls, expected);
    let square = sent
        .iter()
        .find(|b| b.to_string().contains("area of the square"))
        .unwrap();
    assert_eq!(
        user_parts(square).0,
        "What is the area of the square in <image 1>?\n\nAnswer the question using a single word or phrase."
    );
    let compare = sent
        .iter()
        .find(|b| b.to_string().contains("Compare"))
        .unwrap();
    let three = imgs(3);
    assert_eq!(
        user_parts(compare).1,
        [
            data_url(three[0].as_ref().unwrap()),
            data_url(three[2].as_ref().unwrap())
        ]
    );
    let manet = graded(dir.path(), "Art-1");
    assert_eq!(
        (
            &manet["actual"],
            &manet["passed"],
            &manet["unparsed"],
            &manet["grader_name"]
        ),
        (&json!("B"), &json!(true), &json!(true), &json!("mmmu"))
    );
    let hmm = graded(dir.path(), "Math-1");
    assert_eq!(
        (&hmm["passed"], &hmm["unparsed"]),
        (&json!(false), &json!(true))
    );

    // Images go to the chat endpoint only.
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "mmmu",
            "--endpoint-type",
            "completions",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("its questions carry images, which need --endpoint-type chat")
    );
}
