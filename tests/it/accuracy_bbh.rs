//! `bigbench` end to end: BIG-Bench Hard subtasks as Parquet in a Hugging Face cache, prompt
//! files and confinement statements of this test's own (standing in for DeepEval's, through
//! AIPERF_BBH_PROMPTS_DIR and AIPERF_BBH_CONFINEMENT_FILE), the exact prompts the server
//! receives and the exact-match grades.

use std::path::Path;

use serde_json::json;

use super::accuracy::{answering, bodies, profile_env, snapshot, texts, write_parquet};
use crate::common::stderr_text;

/// lukaemon/bbh, one config per subtask, split test: (input, target).
fn cache_bbh(home: &Path, task: &str, rows: &[(&str, &str)]) {
    let file = snapshot(home, "lukaemon/bbh").join(format!("{task}/test-00000-of-00001.parquet"));
    let schema =
        "message schema { optional binary input (STRING); optional binary target (STRING); }";
    let input: Vec<&str> = rows.iter().map(|r| r.0).collect();
    let target: Vec<&str> = rows.iter().map(|r| r.1).collect();
    write_parquet(&file, schema, vec![texts(&input), texts(&target)]);
}

/// A prompts directory laid out as DeepEval's package (a description, then examples, one
/// section per blank line; CRLF in one file, as a Windows checkout would have it), and a
/// confinement file.
fn fake_deepeval(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let prompts = dir.join("bbh");
    for folder in ["cot_prompts", "shot_prompts"] {
        std::fs::create_dir_all(prompts.join(folder)).unwrap();
    }
    let walk = |reason: bool| {
        (1..=4)
            .map(|k| match reason {
                true => format!("Q: Walk {k}?\nA: Let's think. So the answer is Yes."),
                false => format!("Q: Walk {k}?\nA: Yes"),
            })
            .collect::<Vec<_>>()
    };
    let file =
        |sections: Vec<String>| format!("Decide where you end up.\n\n{}\n", sections.join("\n\n"));
    std::fs::write(prompts.join("cot_prompts/navigate.txt"), file(walk(true))).unwrap();
    std::fs::write(prompts.join("shot_prompts/navigate.txt"), file(walk(false))).unwrap();
    std::fs::write(
        prompts.join("cot_prompts/boolean_expressions.txt"),
        "Evaluate.\r\n\r\nQ: True or False\r\nA: True\r\n",
    )
    .unwrap();
    let confinement = dir.join("confinement.json");
    std::fs::write(
        &confinement,
        json!({"navigate": "\n\nSay Yes or No.", "boolean_expressions": "\n\nSay True or False."})
            .to_string(),
    )
    .unwrap();
    (prompts, confinement)
}

const REPLIES: &[(&str, &str)] = &[
    ("Turn left. Turn around.", "No"),
    ("Step ahead. Step back.", "  Yes\n"),
    ("not True and False", "The answer is False."),
];

#[test]
fn bigbench_prompts_come_from_deepeval_files_and_grade_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_bbh(
        &home,
        "navigate",
        &[
            ("Turn left. Turn around.", "No"),
            ("Step ahead. Step back.", "Yes"),
        ],
    );
    cache_bbh(
        &home,
        "boolean_expressions",
        &[("not True and False", "False")],
    );
    let (prompts, confinement) = fake_deepeval(dir.path());
    let env = [
        ("HF_HOME", home.as_path()),
        ("AIPERF_BBH_PROMPTS_DIR", prompts.as_path()),
        ("AIPERF_BBH_CONFINEMENT_FILE", confinement.as_path()),
    ];
    let server = answering(REPLIES);
    let args = [
        "--endpoint-type",
        "chat",
        "--accuracy-benchmark",
        "bigbench",
        "--accuracy-tasks",
        "navigate,boolean_expressions",
        "--request-count",
        "3",
    ];
    let out = profile_env(dir.path(), &server.url, &args, &env);
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,3,0,0.6667\nboolean_expressions,0,1,0,0.0000\nnavigate,2,2,0,1.0000\n"
    );
    let sent = bodies(&server);
    assert_eq!(sent.len(), 3);
    // Chain of thought and 3 shots by default: the description and the first 3 examples.
    assert_eq!(
        sent[0]["messages"],
        json!([{"role": "user", "content": "Task description: Decide where you end up.\n\nQ: Walk 1?\nA: Let's think. So the answer is Yes.\n\nQ: Walk 2?\nA: Let's think. So the answer is Yes.\n\nQ: Walk 3?\nA: Let's think. So the answer is Yes.\n\nQ: Turn left. Turn around.\nA: \n\nSay Yes or No."}])
    );
    assert_eq!(
        sent[2]["messages"][0]["content"],
        "Task description: Evaluate.\n\nQ: True or False\nA: True\n\n\nQ: not True and False\nA: \n\nSay True or False."
    );
    assert_eq!(sent[0]["max_completion_tokens"], 1024);

    // One shot without chain of thought: the plain-answer file.
    let server = answering(REPLIES);
    let mut one_shot = args.to_vec();
    one_shot.extend([
        "--accuracy-n-shots",
        "1",
        "--accuracy-no-enable-cot",
        "--accuracy-tasks",
        "navigate",
    ]);
    one_shot.retain(|a| *a != "navigate,boolean_expressions");
    let pos = one_shot
        .iter()
        .position(|a| *a == "--accuracy-tasks")
        .unwrap();
    one_shot.remove(pos);
    let out = profile_env(dir.path(), &server.url, &one_shot, &env);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(
        bodies(&server)[0]["messages"][0]["content"],
        "Task description: Decide where you end up.\n\nQ: Walk 1?\nA: Yes\n\nQ: Turn left. Turn around.\nA: \n\nSay Yes or No."
    );
}

#[test]
fn bigbench_without_deepeval_says_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_bbh(&home, "navigate", &[("Turn left.", "No")]);
    // A python3 without DeepEval (the one on PATH is replaced by a stand-in).
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let python = bin.join("python3");
    std::fs::write(
        &python,
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'deepeval'\" >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = profile_env(
        dir.path(),
        "http://127.0.0.1:9",
        &[
            "--accuracy-benchmark",
            "bigbench",
            "--accuracy-tasks",
            "navigate",
        ],
        &[("HF_HOME", home.as_path()), ("PATH", bin.as_path())],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("python3 cannot import (ModuleNotFoundError: No module named 'deepeval')")
            && stderr.contains("pip install deepeval"),
        "{stderr}"
    );
    // At most 3 shots, DeepEval's limit.
    let out = profile_env(
        dir.path(),
        "http://127.0.0.1:9",
        &[
            "--accuracy-benchmark",
            "bigbench",
            "--accuracy-n-shots",
            "4",
        ],
        &[("HF_HOME", home.as_path())],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("takes at most 3 few-shot examples"),
        "{stderr}"
    );
}
