//! Accuracy mode end to end: the benchmark's Parquet files written here into a Hugging Face
//! cache layout in a temporary HF_HOME (offline), the real binary run against a server that
//! knows the questions and answers some right, some wrong and some in a format the grader
//! must dig the answer out of; the graded counts checked in accuracy_results.csv, each
//! reply in accuracy_export.jsonl, and the requests' timing in profile_export.jsonl.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

// Shared with the other accuracy modules, which take them from here.
pub(crate) use common::hub_fixture::{
    COMMIT, Leaf, png, snapshot, text_lists, text_schema, texts, write_parquet,
    write_parquet_schema,
};
use common::raw_server::{After, RawRequest, RawServer, json_reply};
use common::{read_jsonl, stderr_text};
use serde_json::{Value, json};

/// openai/gsm8k, config main, split test: (question, answer).
fn cache_gsm8k(home: &Path, rows: &[(&str, &str)]) {
    let file = snapshot(home, "openai/gsm8k").join("main/test-00000-of-00001.parquet");
    let schema =
        "message schema { optional binary question (STRING); optional binary answer (STRING); }";
    let q: Vec<&str> = rows.iter().map(|r| r.0).collect();
    let a: Vec<&str> = rows.iter().map(|r| r.1).collect();
    write_parquet(&file, schema, vec![texts(&q), texts(&a)]);
}

/// lighteval/mmlu, one subject's split: (question, four choices, gold index).
fn cache_mmlu(home: &Path, subject: &str, split: &str, rows: &[(&str, [&str; 4], i64)]) {
    let file = snapshot(home, "lighteval/mmlu")
        .join(subject)
        .join(format!("{split}-00000-of-00001.parquet"));
    let schema = "message schema {
        optional binary question (STRING);
        optional binary subject (STRING);
        optional group choices (LIST) { repeated group list { optional binary element (STRING); } }
        optional int64 answer;
    }";
    write_parquet(
        &file,
        schema,
        vec![
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            texts(&vec![subject; rows.len()]),
            text_lists(&rows.iter().map(|r| r.1.to_vec()).collect::<Vec<_>>()),
            Leaf::Int(rows.iter().map(|r| r.2).collect()),
        ],
    );
}

/// A chat server that answers each question by a phrase of its last user message.
pub(crate) fn answering(table: &'static [(&'static str, &'static str)]) -> RawServer {
    RawServer::start(move |req: &RawRequest| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        // A string content, the text parts of a list, or a completions prompt.
        let last = match body["messages"].as_array().and_then(|m| m.last()) {
            Some(m) => match &m["content"] {
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                c => c.as_str().unwrap_or_default().to_string(),
            },
            None => body["prompt"].as_str().unwrap_or_default().to_string(),
        };
        let reply = table
            .iter()
            .find(|(key, _)| last.contains(key))
            .map_or("no such question", |(_, reply)| reply);
        let (content, text) = match body["prompt"].is_string() {
            true => (Value::Null, json!(reply)),
            false => (json!(reply), Value::Null),
        };
        let choice = match text {
            Value::Null => {
                json!({"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"})
            }
            t => json!({"index": 0, "text": t, "finish_reason": "stop"}),
        };
        json_reply(
            "",
            &json!({"id": "x", "object": "chat.completion", "choices": [choice]}),
            After::KeepOpen,
        )
    })
}

pub(crate) fn profile(cwd: &Path, home: &Path, url: &str, extra: &[&str]) -> Output {
    profile_env(cwd, url, extra, &[("HF_HOME", home)])
}

/// `aiperf profile` offline, with these Hugging Face variables (HF_HOME, HF_HUB_CACHE).
pub(crate) fn profile_env(cwd: &Path, url: &str, extra: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(common::BIN);
    cmd.args([
        "profile",
        "--model",
        "m",
        "--url",
        url,
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        "run",
        "--ui-type",
        "none",
    ])
    .args(extra)
    .current_dir(cwd)
    .env("HF_HUB_OFFLINE", "1")
    .env_remove("HF_ENDPOINT")
    .env_remove("HF_HUB_CACHE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    if let Some(keep) = std::env::var_os("AIPERF_TEST_KEEP_RUNS") {
        keep_run(&cwd.join("run"), Path::new(&keep), extra);
    }
    out
}

/// `AIPERF_TEST_KEEP_RUNS=DIR`: each run's accuracy and summary files copied to
/// `DIR/<benchmark>-<n>` for a look after the tests (the run directories are temporary).
fn keep_run(run: &Path, keep: &Path, args: &[&str]) {
    let benchmark = args
        .iter()
        .position(|a| *a == "--accuracy-benchmark")
        .and_then(|i| args.get(i + 1))
        .unwrap_or(&"none");
    let _ = std::fs::create_dir_all(keep);
    let n = std::fs::read_dir(keep).map_or(0, |d| d.count());
    let dir = keep.join(format!("{benchmark}-{n}"));
    let _ = std::fs::create_dir_all(&dir);
    for f in ["accuracy_results.csv", "profile_export_aiperf.json"] {
        let _ = std::fs::copy(run.join(f), dir.join(f));
    }
}

pub(crate) fn bodies(server: &RawServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .filter(|r| r.head.starts_with("post"))
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

const GSM8K_ROWS: &[(&str, &str)] = &[
    (
        "Natalia sold clips to 48 friends",
        "48/2 = 24\n48+24 = 72\n#### 72",
    ),
    (
        "Weng earns $12 an hour",
        "12/60 = 0.2\n0.2*50 = 10\n#### 10",
    ),
    ("Betty is saving money", "... #### 3,000"),
    ("Julie is reading a 120-page book", "... #### 42"),
];

/// Right with the marker, right without it (unparsed), right with commas, and no number.
const GSM8K_REPLIES: &[(&str, &str)] = &[
    ("Natalia", "She sold 24 in May, 72 in all.\n#### 72"),
    ("Weng", "Weng earned 10 dollars."),
    ("Betty", "#### 3000"),
    ("Julie", "I cannot work that out."),
];

#[test]
fn gsm8k_replies_are_graded_and_timed() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_gsm8k(&home, GSM8K_ROWS);
    let server = answering(GSM8K_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--endpoint-type",
            "chat",
            "--accuracy-benchmark",
            "gsm8k",
            "--request-count",
            "4",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,3,4,2,0.7500\ngsm8k,3,4,2,0.7500\n"
    );
    // lighteval's prompt, and its generation size as the output limit.
    let sent = bodies(&server);
    assert_eq!(sent.len(), 4);
    assert_eq!(
        sent[0]["messages"],
        json!([{"role": "user", "content": "Question: Natalia sold clips to 48 friends\nAnswer:"}])
    );
    assert_eq!(sent[0]["max_completion_tokens"], 256);
    assert!(sent[0].get("stop").is_none());

    let lines = read_jsonl(&run.join("accuracy_export.jsonl"));
    let keys: Vec<&str> = lines[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected_keys = vec![
        "session_num",
        "conversation_id",
        "x_request_id",
        "worker_id",
        "benchmark_phase",
        "timestamp_ns",
        "task",
        "grader_name",
        "passed",
        "unparsed",
        "confidence",
        "expected",
        "actual",
        "explanation",
        "model_output",
        "model_thinking",
    ];
    expected_keys.sort();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, expected_keys);
    let by_id = |id: &str| lines.iter().find(|l| l["conversation_id"] == id).unwrap();
    let weng = by_id("gsm8k-1");
    assert_eq!(
        (
            &weng["passed"],
            &weng["unparsed"],
            &weng["expected"],
            &weng["actual"]
        ),
        (&json!(true), &json!(true), &json!("10"), &json!("10"))
    );
    assert_eq!(weng["grader_name"], "lighteval_gsm8k");
    assert_eq!(weng["model_output"], "Weng earned 10 dollars.");
    let julie = by_id("gsm8k-3");
    assert_eq!(
        (&julie["passed"], &julie["actual"]),
        (&json!(false), &json!("[invalid]"))
    );
    assert_eq!(by_id("gsm8k-2")["expected"], "3000");

    // The same requests are timed as usual: one record each, with its latency.
    let records = read_jsonl(&run.join("profile_export.jsonl"));
    assert_eq!(records.len(), 4);
    let ids: Vec<&str> = records
        .iter()
        .map(|r| r["metadata"]["conversation_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["gsm8k-0", "gsm8k-1", "gsm8k-2", "gsm8k-3"]);
    assert!(
        records
            .iter()
            .all(|r| r["metrics"]["request_latency"]["value"].as_f64().unwrap() > 0.0)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Accuracy Benchmark Results"), "{stdout}");
    assert!(
        stdout.contains("75.00%") && stdout.contains("NVIDIA AIPerf | LLM Metrics"),
        "{stdout}"
    );
    // Replies shorter than the 256-token ceiling are expected: no advice to force lengths.
    assert!(
        stdout.contains("Expected here: max_tokens is each question's ceiling"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("ignore_eos:true") && !stderr.contains("OSL mismatch"),
        "{stdout}"
    );

    // AIPerf's accuracy.* metrics in the summary files: a ratio with its count and sum.
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    for (tag, sum, avg) in [
        ("accuracy.overall", 3, 0.75),
        ("accuracy.task.gsm8k", 3, 0.75),
        ("accuracy.unparsed", 2, 0.5),
        ("accuracy.unparsed.task.gsm8k", 2, 0.5),
    ] {
        assert_eq!(
            summary[tag],
            json!({"unit": "ratio", "avg": avg, "count": 4, "sum": sum}),
            "{tag}"
        );
    }
    let csv = std::fs::read_to_string(run.join("profile_export_aiperf.csv")).unwrap();
    for row in [
        "Accuracy (Overall) (ratio),0.75",
        "Accuracy (gsm8k) (ratio),0.75",
        "Accuracy Unparsed (Overall) (ratio),0.50",
    ] {
        assert!(csv.contains(&format!("{row}\r\n")), "{row} in {csv}");
    }
}

/// Five dev rows per subject (the few-shot pool) and two test questions.
fn cache_two_subjects(home: &Path) {
    for subject in ["anatomy", "astronomy"] {
        let dev: Vec<(String, [&str; 4], i64)> = (0..5)
            .map(|i| {
                (
                    format!("{subject} example {i}?"),
                    ["w", "x", "y", "z"],
                    i % 4,
                )
            })
            .collect();
        let dev: Vec<(&str, [&str; 4], i64)> =
            dev.iter().map(|(q, c, a)| (q.as_str(), *c, *a)).collect();
        cache_mmlu(home, subject, "dev", &dev);
    }
    cache_mmlu(
        home,
        "anatomy",
        "test",
        &[
            (
                "Which bone is longest?",
                ["skull", "femur", "rib", "ulna"],
                1,
            ),
            (
                "Which organ pumps blood?",
                ["lung", "liver", "skin", "heart"],
                3,
            ),
        ],
    );
    cache_mmlu(
        home,
        "astronomy",
        "test",
        &[
            (
                "Which planet is largest?",
                ["Jupiter", "Mars", "Venus", "Earth"],
                0,
            ),
            ("Which is a star?", ["Moon", "Io", "Sun", "Ceres"], 2),
        ],
    );
}

/// A bare right letter, a right "Answer: D" (a fallback: unparsed), a wrong letter, and a
/// reply with no letter (unparsed, wrong).
const MMLU_REPLIES: &[(&str, &str)] = &[
    ("longest", "B\n"),
    ("pumps", "Let me see. Answer: D"),
    ("largest", "C"),
    ("a star", "hmm"),
];

#[test]
fn mmlu_few_shot_replies_are_graded_per_subject() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_two_subjects(&home);
    let server = answering(MMLU_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "mmlu",
            "--accuracy-tasks",
            "anatomy,astronomy",
            "--accuracy-system-prompt",
            "Answer with one letter.",
            "--request-count",
            "4",
            "--concurrency",
            "2",
            "--accuracy-verbose",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    // --accuracy-verbose: one line per graded reply, with the grader's reason.
    let graded: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("[accuracy] session="))
        .collect();
    assert_eq!(graded.len(), 4, "{stderr}");
    assert!(
        graded
            .iter()
            .any(|l| l.contains("correct=True unparsed=True") && l.contains("(regex fallback)")),
        "{stderr}"
    );
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,4,2,0.5000\nanatomy,2,2,1,1.0000\nastronomy,0,2,1,0.0000\n"
    );
    let sent = bodies(&server);
    let first = sent
        .iter()
        .find(|b| b.to_string().contains("longest"))
        .unwrap();
    let messages = first["messages"].as_array().unwrap();
    // The system prompt, five example pairs (the default n-shots), then the question.
    assert_eq!(messages.len(), 12);
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "Answer with one letter."})
    );
    let opening = messages[1]["content"].as_str().unwrap();
    assert!(
        opening.starts_with(
            "The following are multiple choice questions (with answers) about anatomy.\n\nQuestion: anatomy example "
        ),
        "{opening}"
    );
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(
        messages[11],
        json!({"role": "user", "content": "Question: Which bone is longest?\nA. skull\nB. femur\nC. rib\nD. ulna\nAnswer:"})
    );
    assert_eq!(first["stop"], json!(["\n"]));
    assert_eq!(first["max_completion_tokens"], 5);
    let summary = common::read_json(&run.join("profile_export_aiperf.json"));
    // The typed accuracy flags are echoed in the run's config, at AIPerf's paths.
    assert_eq!(
        summary["input_config"]["accuracy"],
        json!({"benchmark": "mmlu", "system_prompt": "Answer with one letter.", "tasks": ["anatomy", "astronomy"], "verbose": true})
    );
    let lines = read_jsonl(&run.join("accuracy_export.jsonl"));
    let hmm = lines
        .iter()
        .find(|l| l["conversation_id"] == "astronomy-1")
        .unwrap();
    assert_eq!(
        (&hmm["actual"], &hmm["expected"], &hmm["unparsed"]),
        (&json!("hmm"), &json!("C"), &json!(true))
    );
    assert_eq!(hmm["task"], "astronomy");
}

#[test]
fn an_empty_offline_cache_names_the_dataset_and_how_to_fetch_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("empty");
    let out = profile(
        dir.path(),
        &home,
        "http://127.0.0.1:9",
        &["--accuracy-benchmark", "gsm8k"],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("HF_HUB_OFFLINE is set and dataset openai/gsm8k (config main, split test) is not in the Hugging Face cache"),
        "{stderr}"
    );
    assert!(
        stderr.contains("huggingface-cli download --repo-type dataset openai/gsm8k"),
        "{stderr}"
    );
}

#[test]
fn accuracy_flags_are_checked() {
    for (args, says) in [
        (
            &["--accuracy-benchmark", "bigbenchh"][..],
            "--accuracy-benchmark bigbenchh: is not a benchmark name; the benchmarks are: gsm8k,",
        ),
        (
            &["--accuracy-benchmark", "mmlu", "--accuracy-n-shots", "33"],
            "--accuracy-n-shots 33: at most 32",
        ),
        (
            &["--accuracy-benchmark", "mmlu", "--accuracy-grader", "judge"],
            "--accuracy-grader judge: is not a grader name; the graders are: lighteval_gsm8k,",
        ),
        (
            &["--accuracy-tasks", "anatomy"],
            "--accuracy-tasks were set but --accuracy-benchmark is not",
        ),
        (
            &["--accuracy-benchmark", "mmlu", "--accuracy-tasks", "botany"],
            "--accuracy-tasks botany: not a task of mmlu",
        ),
        (
            &[
                "--accuracy-benchmark",
                "gsm8k",
                "--endpoint-type",
                "embeddings",
            ],
            "chat or completions, not embeddings",
        ),
        (
            &[
                "--accuracy-benchmark",
                "gsm8k",
                "--image-width-mean",
                "64",
                "--image-height-mean",
                "64",
            ],
            "synthetic media cannot be sent with --accuracy-benchmark gsm8k",
        ),
    ] {
        let mut all = vec!["-m", "m", "--url", "http://127.0.0.1:9"];
        all.extend_from_slice(args);
        let out = common::run_profile(&all);
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// TIGER-Lab/MMLU-Pro (default config: `data/<split>-*.parquet`): (question, options,
/// answer letter, cot_content, category).
fn cache_mmlu_pro(home: &Path, split: &str, rows: &[(&str, &[&str], &str, &str, &str)]) {
    let file =
        snapshot(home, "TIGER-Lab/MMLU-Pro").join(format!("data/{split}-00000-of-00001.parquet"));
    let schema = "message schema {
        optional binary question (STRING);
        optional group options (LIST) { repeated group list { optional binary element (STRING); } }
        optional binary answer (STRING);
        optional binary cot_content (STRING);
        optional binary category (STRING);
    }";
    write_parquet(
        &file,
        schema,
        vec![
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            text_lists(&rows.iter().map(|r| r.1.to_vec()).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.2).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.3).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.4).collect::<Vec<_>>()),
        ],
    );
}

/// The stated answer (right), a bare letter (right), and a guess with no stated answer
/// (its last lone letter, wrong: unparsed).
const MMLU_PRO_REPLIES: &[(&str, &str)] = &[
    ("contract", "Offer and acceptance... The answer is (C)."),
    ("integral", "J"),
    ("tort", "I think it's B or maybe E"),
];

#[test]
fn mmlu_pro_chain_of_thought_replies_are_graded() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    let ten: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    cache_mmlu_pro(
        &home,
        "validation",
        &[(
            "A law example?",
            &["x", "y", "N/A"],
            "B",
            "A: Because y. The answer is (B).",
            "law",
        )],
    );
    cache_mmlu_pro(
        &home,
        "test",
        &[
            ("Is this contract valid?", ten, "C", "", "law"),
            ("What is this integral?", ten, "J", "", "math"),
            ("Who is liable in this tort?", ten, "A", "", "law"),
            ("An unasked chemistry question?", ten, "A", "", "chemistry"),
        ],
    );
    let server = answering(MMLU_PRO_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "mmlu_pro",
            "--accuracy-tasks",
            "law,math",
            "--request-count",
            "3",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,3,1,0.6667\nlaw,1,2,1,0.5000\nmath,1,1,0,1.0000\n"
    );
    let sent = bodies(&server);
    let contract = sent
        .iter()
        .find(|b| b.to_string().contains("contract"))
        .unwrap();
    // One user message: the law instruction (chain of thought by default), the law example
    // with its reasoning, then the question with the step-by-step primer.
    let prompt = contract["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.starts_with("The following are multiple choice questions (with answers) about law. Think step by step"), "{prompt}");
    assert!(
        prompt.contains("Options: A. x\nB. y\nAnswer: Because y. The answer is (B).\n\n"),
        "{prompt}"
    );
    assert!(
        prompt.ends_with("J. j\nAnswer: Let's think step by step.\n\n"),
        "{prompt}"
    );
    assert_eq!(contract["max_completion_tokens"], 4000);
    let lines = read_jsonl(&run.join("accuracy_export.jsonl"));
    let tort = lines
        .iter()
        .find(|l| l["conversation_id"] == "law-2")
        .unwrap();
    assert_eq!(
        (&tort["actual"], &tort["unparsed"], &tort["grader_name"]),
        (&json!("E"), &json!(true), &json!("mmlu_pro"))
    );
}

/// Maxwell-Jia/AIME_2024: one Parquet file at the top of the repository (the train split).
fn cache_aime(home: &Path, rows: &[(&str, &str, i64)]) {
    let file = snapshot(home, "Maxwell-Jia/AIME_2024").join("aime_2024_problems.parquet");
    let schema = "message schema {
        optional binary ID (STRING);
        optional binary Problem (STRING);
        optional binary Solution (STRING);
        optional int64 Answer;
    }";
    let ids: Vec<String> = (1..=rows.len()).map(|i| format!("2024-I-{i}")).collect();
    write_parquet(
        &file,
        schema,
        vec![
            texts(&ids.iter().map(String::as_str).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.1).collect::<Vec<_>>()),
            Leaf::Int(rows.iter().map(|r| r.2).collect()),
        ],
    );
}

/// A boxed right answer, a right "answer is" without a box (unparsed), a boxed wrong one,
/// and no answer at all (unparsed). The first problem is also every prompt's example, so it
/// is looked up last.
const AIME_REPLIES: &[(&str, &str)] = &[
    ("Alice and Bob", "The answer is 25."),
    ("tetrahedron", "\\boxed{\\frac{1}{2}}"),
    ("torus", "I do not know."),
    (
        "Aya walks",
        "So s = 3 and the walk takes \\boxed{204} minutes.",
    ),
];

#[test]
fn aime_boxed_answers_are_graded_as_math() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_aime(
        &home,
        &[
            ("Every morning Aya walks 9 km.", "Solve for s.", 204),
            ("Alice and Bob play a game.", "Count positions.", 25),
            ("Let ABCD be a tetrahedron.", "Use volumes.", 113),
            (
                "A torus is made by revolving a circle.",
                "Subtract radii.",
                127,
            ),
        ],
    );
    let server = answering(AIME_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "aime",
            "--accuracy-n-shots",
            "1",
            "--request-count",
            "4",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,4,2,0.5000\naime,2,4,2,0.5000\n"
    );
    let sent = bodies(&server);
    let alice = sent
        .iter()
        .find(|b| b.to_string().contains("Alice and Bob"))
        .unwrap();
    // AIPerf's default system prompt for aime, then the recipe's prompt (one example with
    // its solution: chain of thought is on by default).
    assert_eq!(
        alice["messages"][0],
        json!({"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."})
    );
    let prompt = alice["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.ends_with("**Problem**: Every morning Aya walks 9 km.\n**Solution**: Solve for s.\n**Answer**: 204\n\n**Problem**: Alice and Bob play a game.\n**Answer**: \n\nLet's think step-by-step."),
        "{prompt}"
    );
    assert_eq!(alice["max_completion_tokens"], 32768);
    let lines = read_jsonl(&run.join("accuracy_export.jsonl"));
    let tetra = lines
        .iter()
        .find(|l| l["conversation_id"] == "aime-2")
        .unwrap();
    assert_eq!(
        (
            &tetra["actual"],
            &tetra["passed"],
            &tetra["unparsed"],
            &tetra["grader_name"]
        ),
        (
            &json!("\\frac{1}{2}"),
            &json!(false),
            &json!(false),
            &json!("math")
        )
    );
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &["--accuracy-benchmark", "aime", "--accuracy-n-shots", "9"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out)
            .contains("--accuracy-n-shots 9: --accuracy-benchmark aime takes at most 8")
    );
}

/// Lin-Chen/MMStar (config val: `mmstar.parquet`): (question, answer, category, image).
fn cache_mmstar(home: &Path, rows: &[(&str, &str, &str, Vec<u8>)]) {
    let file = snapshot(home, "Lin-Chen/MMStar").join("mmstar.parquet");
    let schema = "message schema {
        optional int64 index;
        optional binary question (STRING);
        optional group image { optional binary bytes; optional binary path (STRING); }
        optional binary answer (STRING);
        optional binary category (STRING);
    }";
    let n = rows.len();
    write_parquet(
        &file,
        schema,
        vec![
            Leaf::Int((0..n as i64).collect()),
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            Leaf::Bytes(rows.iter().map(|r| r.3.clone()).collect(), vec![2; n]),
            Leaf::Text(vec!["x.png".to_string(); n], vec![2; n], None),
            texts(&rows.iter().map(|r| r.1).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.2).collect::<Vec<_>>()),
        ],
    );
}

/// A bare right letter, a right "The answer is C." and a wrong letter.
const MMSTAR_REPLIES: &[(&str, &str)] = &[
    ("Which animal", "A"),
    ("How many blocks", "The answer is C."),
    ("What color", "D"),
];

#[test]
fn mmstar_images_go_as_image_parts_and_letters_are_graded() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    let (cat, blocks) = (png(20, 10), png(16, 24));
    cache_mmstar(
        &home,
        &[
            (
                "Which animal is shown?\nOptions: A: cat, B: dog, C: cow, D: fox",
                "A",
                "coarse perception",
                cat.clone(),
            ),
            (
                "How many blocks are stacked?\nOptions: A: 1, B: 2, C: 3, D: 4",
                "C",
                "instance reasoning",
                blocks,
            ),
            (
                "What color is the sky?\nOptions: A: red, B: blue, C: green, D: black",
                "B",
                "coarse perception",
                png(8, 8),
            ),
            (
                "Which shape has 5 sides?\nOptions: A: square, B: circle, C: line, D: pentagon",
                "D",
                "math",
                png(9, 9),
            ),
        ],
    );
    let server = answering(MMSTAR_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "mmstar",
            "--accuracy-tasks",
            "coarse perception,instance reasoning",
            "--accuracy-system-prompt",
            "Look carefully.",
            "--request-count",
            "3",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,3,0,0.6667\ncoarse perception,1,2,0,0.5000\ninstance reasoning,1,1,0,1.0000\n"
    );
    let sent = bodies(&server);
    // The system prompt, then the question's text part and its image as a data URL of the
    // stored bytes: the parts synthetic images are sent as. (The Image Token Count probe
    // sends the same question without its image first.)
    use base64::Engine;
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&cat)
    );
    let expected = json!([
        {"role": "system", "content": "Look carefully."},
        {"role": "user", "content": [
            {"type": "text", "text": "Which animal is shown?\nOptions: A: cat, B: dog, C: cow, D: fox\nAnswer with the option's letter from the given choices directly."},
            {"type": "image_url", "image_url": {"url": url}}
        ]}
    ]);
    let with_image: Vec<&Value> = sent
        .iter()
        .filter(|b| b.to_string().contains("data:image/png"))
        .collect();
    assert_eq!(with_image.len(), 3);
    assert!(
        with_image.iter().any(|b| b["messages"] == expected),
        "{with_image:?}"
    );
    let lines = read_jsonl(&run.join("accuracy_export.jsonl"));
    let sky = lines
        .iter()
        .find(|l| l["conversation_id"] == "coarse_perception-2")
        .unwrap();
    assert_eq!(
        (&sky["actual"], &sky["expected"], &sky["passed"]),
        (&json!("D"), &json!("B"), &json!(false))
    );
    let records = read_jsonl(&run.join("profile_export.jsonl"));
    assert_eq!(records.len(), 3);

    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "mmstar",
            "--endpoint-type",
            "completions",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("its questions carry images, which need --endpoint-type chat")
    );
}

#[test]
fn completions_get_one_prompt_and_hf_hub_cache_is_the_cache() {
    // The cache named by HF_HUB_CACHE (a `hub` directory elsewhere), HF_HOME empty.
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    cache_gsm8k(&elsewhere, GSM8K_ROWS);
    let server = answering(GSM8K_REPLIES);
    let out = profile_env(
        dir.path(),
        &server.url,
        &[
            "--endpoint-type",
            "completions",
            "--accuracy-benchmark",
            "gsm8k",
            "--accuracy-system-prompt",
            "Solve it.",
            "--request-count",
            "4",
        ],
        &[
            ("HF_HOME", &dir.path().join("empty")),
            ("HF_HUB_CACHE", &elsewhere.join("hub")),
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    let sent = bodies(&server);
    assert_eq!(
        sent[0]["prompt"],
        "Solve it.\n\nQuestion: Natalia sold clips to 48 friends\nAnswer:"
    );
    assert!(sent[0].get("messages").is_none());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,3,4,2,0.7500\ngsm8k,3,4,2,0.7500\n"
    );
}
