//! `lcb_codegeneration` end to end: LiveCodeBench's JSONL release files written into a
//! Hugging Face cache, a server that answers each problem with right code, wrong code, an
//! endless loop, a memory hog or no code at all, and the real binary grading the replies by
//! running them in its sandbox; the counts checked in accuracy_results.csv.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use super::accuracy::{answering, bodies, profile_env, snapshot};
use crate::common::{read_jsonl, stderr_text};

/// LiveCodeBench's encoding of private cases: base64 of zlib of a pickled str (protocol 4:
/// PROTO, BINUNICODE, STOP).
fn encode_private(cases: &Value) -> String {
    let text = cases.to_string();
    let mut pickle = vec![0x80, 4, b'X'];
    pickle.extend((text.len() as u32).to_le_bytes());
    pickle.extend(text.as_bytes());
    pickle.push(b'.');
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&pickle).unwrap();
    base64::engine::general_purpose::STANDARD.encode(z.finish().unwrap())
}

/// One problem row as the dataset has it: test cases and metadata as JSON text.
fn row(question: &str, starter: &str, func: Option<&str>, cases: &[(&str, &str)]) -> Value {
    let testtype = if func.is_some() {
        "functional"
    } else {
        "stdin"
    };
    let case = |(i, o): &(&str, &str)| json!({"input": i, "output": o, "testtype": testtype});
    let (public, private) = cases.split_at(1);
    let metadata = match func {
        Some(f) => json!({"func_name": f}),
        None => json!({}),
    };
    json!({
        "question_title": question,
        "question_content": question,
        "platform": "atcoder",
        "question_id": "q",
        "contest_id": "c",
        "contest_date": "2024-08-01T00:00:00",
        "starter_code": starter,
        "difficulty": "easy",
        "public_test_cases": Value::Array(public.iter().map(case).collect()).to_string(),
        "private_test_cases": encode_private(&Value::Array(private.iter().map(case).collect())),
        "metadata": metadata.to_string(),
    })
}

fn write_jsonl(path: &Path, rows: &[Value]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

const STARTER: &str =
    "class Solution:\n    def double(self, nums: List[int]) -> List[int]:\n        ";

/// Release v4_v5 is test4.jsonl then test5.jsonl; test6.jsonl is another release.
fn cache_lcb(home: &Path) {
    let snap = snapshot(home, "livecodebench/code_generation_lite");
    let sum_cases = [("1 2\n", "3\n"), ("10 20\n", "30\n"), ("-5 5\n", "0\n")];
    write_jsonl(
        &snap.join("test4.jsonl"),
        &[
            row("Sum two numbers A and B.", "", None, &sum_cases),
            row(
                "Double every number of nums.",
                STARTER,
                Some("double"),
                &[("[1, 2]", "[2, 4]"), ("[]", "[]"), ("[-3]", "[-6]")],
            ),
            row("Spin: print A plus B.", "", None, &sum_cases),
        ],
    );
    write_jsonl(
        &snap.join("test5.jsonl"),
        &[
            row("Hog: print A plus B.", "", None, &sum_cases),
            row("Words: print A plus B.", "", None, &sum_cases),
            row(
                "Minus: print A minus B.",
                "",
                None,
                &[("5 3\n", "2\n"), ("3 5\n", "-2\n")],
            ),
        ],
    );
    write_jsonl(
        &snap.join("test6.jsonl"),
        &[row("Not in v4_v5.", "", None, &sum_cases)],
    );
}

const REPLIES: &[(&str, &str)] = &[
    (
        "Sum two",
        "Read both and add.\n```python\na, b = map(int, input().split())\nprint(a + b)\n```\n",
    ),
    (
        "Double every",
        "```python\nclass Solution:\n    def double(self, nums: List[int]) -> List[int]:\n        return [2 * n for n in nums]\n```",
    ),
    ("Spin:", "```python\nwhile True:\n    pass\n```"),
    // 1 GiB before the right answer: past the 256 MiB limit it never gets there.
    (
        "Hog:",
        "```python\nhog = bytearray(1 << 30)\na, b = map(int, input().split())\nprint(a + b)\n```",
    ),
    ("Words:", "The answer is A plus B."),
    // Right on the public case, wrong on the private one.
    (
        "Minus:",
        "```python\na, b = map(int, input().split())\nprint(abs(a - b))\n```",
    ),
];

#[test]
fn lcb_code_is_run_and_graded() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_lcb(&home);
    let server = answering(REPLIES);
    let started = Instant::now();
    let out = profile_env(
        dir.path(),
        &server.url,
        &[
            "--endpoint-type",
            "chat",
            "--accuracy-benchmark",
            "lcb_codegeneration",
            "--request-count",
            "6",
        ],
        &[
            ("HF_HOME", &home),
            ("AIPERF_ACCURACY_LCB_CASE_TIMEOUT_S", Path::new("2")),
            ("AIPERF_ACCURACY_LCB_MEMORY_MB", Path::new("256")),
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    // The endless loop is stopped at 2 s; the run does not wait on it longer.
    assert!(started.elapsed() < Duration::from_secs(60), "{stderr}");
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,6,1,0.3333\nlcb_codegeneration,2,6,1,0.3333\n"
    );

    // lighteval's prompts: stdin scaffold, or the starter code; its generation size.
    let sent = bodies(&server);
    assert_eq!(sent.len(), 6);
    assert_eq!(
        sent[0]["messages"],
        json!([{"role": "user", "content": "You will be given a question (problem specification) and will generate a correct Python program that matches the specification and passes all tests.\n\nQuestion: Sum two numbers A and B.\n\nRead the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.\n```python\n# YOUR CODE HERE\n```\n\n"}])
    );
    assert_eq!(
        sent[1]["messages"][0]["content"],
        format!(
            "You will be given a question (problem specification) and will generate a correct Python program that matches the specification and passes all tests.\n\nQuestion: Double every number of nums.\n\nYou will use the following starter code to write the solution to the problem and enclose your code within delimiters.\n```python\n{STARTER}\n```\n\n"
        )
    );
    assert_eq!(sent[0]["max_completion_tokens"], 32768);
    assert!(!sent.iter().any(|b| b.to_string().contains("Not in v4_v5")));

    let lines = read_jsonl(&run.join("accuracy_export.jsonl"));
    assert_eq!(lines.len(), 6);
    let by_id = |id: &str| {
        lines
            .iter()
            .find(|l| l["conversation_id"] == id)
            .unwrap_or_else(|| panic!("no line for {id}"))
    };
    let line = |i: usize| by_id(&format!("lcb_codegeneration-{i}"));
    let explanation = |i: usize| line(i)["explanation"].as_str().unwrap().to_string();
    assert_eq!(line(0)["passed"], true);
    assert_eq!(
        line(0)["actual"],
        "a, b = map(int, input().split())\nprint(a + b)"
    );
    assert_eq!(line(0)["grader_name"], "code_execution");
    assert!(explanation(0).starts_with("passed all 3 test cases"));
    assert_eq!(line(1)["passed"], true, "{}", explanation(1));
    assert!(
        explanation(2).contains("test case 1 of 3: time limit (2.0 s) exceeded"),
        "{}",
        explanation(2)
    );
    assert!(
        explanation(3).contains("test case 1 of 3: runtime error")
            && explanation(3).contains("MemoryError"),
        "{}",
        explanation(3)
    );
    assert_eq!(
        (&line(4)["passed"], &line(4)["unparsed"]),
        (&json!(false), &json!(true))
    );
    assert!(explanation(4).starts_with("no code block extracted"));
    assert!(
        explanation(5).contains("test case 2 of 2: wrong answer"),
        "{}",
        explanation(5)
    );
    for i in [2, 3, 5] {
        assert_eq!(
            (&line(i)["passed"], &line(i)["unparsed"]),
            (&json!(false), &json!(false))
        );
    }
}

#[test]
fn lcb_flags_and_missing_release() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_lcb(&home);
    for (args, says) in [
        (
            &["--accuracy-n-shots", "2"][..],
            "--accuracy-n-shots: lighteval's task is zero-shot",
        ),
        (
            &["--accuracy-enable-cot"][..],
            "--accuracy-enable-cot: lighteval's prompt has no chain-of-thought trigger",
        ),
        (
            &["--accuracy-tasks", "lcb_codegeneration"][..],
            "--accuracy-tasks: the whole release is asked",
        ),
    ] {
        let mut all = vec!["--accuracy-benchmark", "lcb_codegeneration"];
        all.extend_from_slice(args);
        let out = profile_env(
            dir.path(),
            "http://127.0.0.1:9",
            &all,
            &[("HF_HOME", &home)],
        );
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // release_v6 needs test.jsonl to test6.jsonl; only 4 to 6 are cached.
    let out = profile_env(
        dir.path(),
        "http://127.0.0.1:9",
        &["--accuracy-benchmark", "lcb_codegeneration"],
        &[
            ("HF_HOME", &home),
            ("AIPERF_ACCURACY_LCB_RELEASE_TAG", Path::new("release_v6")),
        ],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("release release_v6 of dataset livecodebench/code_generation_lite needs test.jsonl, test2.jsonl, test3.jsonl, not in the Hugging Face cache"),
        "{stderr}"
    );
}
