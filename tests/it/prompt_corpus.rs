//! `--prompt-corpus coding|random` end to end: the real binary against the mock server,
//! each prompt's token count checked exactly with the builtin tokenizer, the text checked
//! to look like its corpus, and the bodies checked to repeat under the same --random-seed.

use crate::common;

use aiperf::api::Tokenizer;
use common::{MockChild, read_json, read_jsonl, run_aiperf_in, stderr_text};
use serde_json::Value;

/// The sonnet corpus, which these prompts must not come from.
const SONNET: &str = include_str!("../../assets/shakespeare.txt");

/// The user texts sent (from `inputs.json`) and each record's input sequence length.
fn run(corpus: &str, seed: &str, extra: &[&str]) -> (Vec<String>, Vec<u64>) {
    let tmp = tempfile::tempdir().unwrap();
    let server = MockChild::spawn(&["--fast"]);
    let mut args = vec![
        "profile",
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        &server.url,
        "--artifact-dir",
        "run",
        "--random-seed",
        seed,
        "--prompt-corpus",
        corpus,
        "--request-count",
        "6",
        "--num-dataset-entries",
        "6",
    ];
    args.extend_from_slice(extra);
    let out = run_aiperf_in(tmp.path(), &args);
    server.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let dir = tmp.path().join("run");
    let texts = read_json(&dir.join("inputs.json"))["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["payloads"][0]["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let isls = read_jsonl(&dir.join("profile_export.jsonl"))
        .iter()
        .map(|r: &Value| {
            assert!(r["error"].is_null(), "{r}");
            r["metrics"]["input_sequence_length"]["value"]
                .as_u64()
                .unwrap()
        })
        .collect();
    (texts, isls)
}

#[test]
fn coding_prompts_are_code_of_the_exact_length_and_repeat_under_a_seed() {
    let t = Tokenizer::builtin().unwrap();
    let (texts, isls) = run("coding", "7", &["--isl", "300"]);
    assert_eq!(texts.len(), 6);
    assert_eq!(isls, vec![300; 6]);
    for text in &texts {
        assert_eq!(t.count(text), 300, "{text:?}");
        // Code-like lines: indentation, brackets and assignments, several lines.
        assert!(text.lines().count() >= 5, "{text:?}");
        assert!(text.contains("    ") || text.contains('\t'), "{text:?}");
        assert!(text.contains('(') && text.contains(')'), "{text:?}");
        assert!(!SONNET.contains(text.as_str()));
    }
    let joined = texts.join("\n");
    let markers = [
        "def ",
        "fn ",
        "func ",
        "function ",
        "$ ",
        "\"id\":",
        "diff --git",
        "SELECT ",
        "Traceback",
        "import ",
    ];
    assert!(
        markers.iter().filter(|m| joined.contains(*m)).count() >= 3,
        "{joined}"
    );
    assert_eq!(run("coding", "7", &["--isl", "300"]).0, texts);
    assert_ne!(run("coding", "8", &["--isl", "300"]).0, texts);
}

#[test]
fn random_prompts_are_vocabulary_runs_of_the_exact_length_and_repeat_under_a_seed() {
    let t = Tokenizer::builtin().unwrap();
    let (texts, isls) = run("random", "7", &["--isl", "64", "--isl-stddev", "10"]);
    assert_eq!(texts.len(), 6);
    for (text, isl) in texts.iter().zip(&isls) {
        assert_eq!(t.count(text) as u64, *isl, "{text:?}");
        assert!(!SONNET.contains(text.as_str()));
        // No special token text slips in.
        assert!(!text.contains("<|endoftext|>"), "{text:?}");
    }
    assert!(isls.iter().any(|&l| l != 64), "{isls:?}");
    let again = run("random", "7", &["--isl", "64", "--isl-stddev", "10"]);
    assert_eq!(again, (texts.clone(), isls));
    assert_ne!(
        run("random", "9", &["--isl", "64", "--isl-stddev", "10"]).0,
        texts
    );
}

#[test]
fn the_shaping_texts_come_from_the_corpus_too() {
    let t = Tokenizer::builtin().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let server = MockChild::spawn(&["--fast"]);
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--url",
            &server.url,
            "--artifact-dir",
            "run",
            "--random-seed",
            "3",
            "--prompt-corpus",
            "coding",
            "--isl",
            "40",
            "--shared-system-prompt-length",
            "120",
            "--request-count",
            "2",
        ],
    );
    server.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let inputs = read_json(&tmp.path().join("run/inputs.json"));
    let system = inputs["data"][0]["payloads"][0]["messages"][0]["content"]
        .as_str()
        .unwrap();
    assert_eq!(t.count(system), 120);
    assert!(!SONNET.contains(system));
}

fn refused(args: &[&str], needle: &str) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("in.jsonl"), "{\"text\": \"hi\"}\n").unwrap();
    let mut all = vec![
        "profile",
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        "http://127.0.0.1:9",
    ];
    all.extend_from_slice(args);
    let out = run_aiperf_in(tmp.path(), &all);
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {needle:?} not in {stderr}"
    );
}

#[test]
fn other_corpora_are_refused_where_prompts_are_not_synthetic() {
    refused(
        &["--prompt-corpus", "coding", "--input-file", "in.jsonl"],
        "--prompt-corpus coding shapes synthetic prompts and cannot be used with --input-file",
    );
    refused(
        &[
            "--prompt-corpus",
            "random",
            "--endpoint-type",
            "nim_rankings",
        ],
        "--prompt-corpus random shapes synthetic prompts and cannot be used with the rankings endpoint types",
    );
}
