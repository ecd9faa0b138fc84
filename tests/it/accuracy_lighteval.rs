//! Accuracy mode end to end for the benchmarks graded by lighteval's extractive match and
//! DeepEval's templates (gpqa_diamond, aime24/aime25, math_500, hellaswag): the same offline
//! hub cache and answering server as `accuracy.rs`.

use crate::common;

use std::path::{Path, PathBuf};

use super::accuracy::{
    COMMIT, answering, bodies, profile, snapshot, text_lists, text_schema, texts, write_parquet,
    write_parquet_schema,
};
use common::{read_jsonl, stderr_text};
use serde_json::json;

/// Idavidrein/gpqa keeps CSV files: its Parquet conversion (`refs/convert/parquet`,
/// `gpqa_diamond/train/0000.parquet`).
fn cache_gpqa(home: &Path, rows: &[[&str; 5]]) {
    let dir = home.join("hub").join("datasets--Idavidrein--gpqa");
    // huggingface_hub keeps the ref `refs/convert/parquet` at `refs/refs/convert/parquet`.
    let ref_file = dir.join("refs/refs/convert/parquet");
    std::fs::create_dir_all(ref_file.parent().unwrap()).unwrap();
    std::fs::write(&ref_file, COMMIT).unwrap();
    let file = dir
        .join("snapshots")
        .join(COMMIT)
        .join("gpqa_diamond/train/0000.parquet");
    let schema = text_schema(&[
        "Question",
        "Correct Answer",
        "Incorrect Answer 1",
        "Incorrect Answer 2",
        "Incorrect Answer 3",
    ]);
    let column = |k: usize| texts(&rows.iter().map(|r| r[k]).collect::<Vec<_>>());
    write_parquet_schema(&file, schema, (0..5).map(column).collect());
}

/// The electron's answer lands on D and the gas's on A (AIPerf's seeded shuffle): one
/// right "Answer: D" (a fallback for multiple_choice: unparsed) and one wrong letter.
const GPQA_REPLIES: &[(&str, &str)] = &[
    ("electron", "It is negative.\nAnswer: D"),
    ("plants absorb", "B"),
];

#[test]
fn gpqa_diamond_letters_are_graded_by_lighteval_extraction_and_shuffled_as_aiperf() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_gpqa(
        &home,
        &[
            ["What is the charge of an electron?", "-e", "+e", "0", "2e"],
            ["Which gas do plants absorb?", "CO2", "O2", "N2", "He"],
        ],
    );
    let server = answering(GPQA_REPLIES);
    // AIPerf's grader, lighteval's letter extraction: "Answer: D" is where it looks.
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "gpqa_diamond",
            "--request-count",
            "2",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,1,2,0,0.5000\ngpqa_diamond,1,2,0,0.5000\n"
    );
    let graded = read_jsonl(&dir.path().join("run/accuracy_export.jsonl"));
    assert!(graded.iter().all(|l| l["grader_name"] == "lighteval_gpqa"));
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "gpqa_diamond",
            "--accuracy-grader",
            "multiple_choice",
            "--request-count",
            "2",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,1,2,1,0.5000\ngpqa_diamond,1,2,1,0.5000\n"
    );
    let sent = bodies(&server);
    let electron = sent
        .iter()
        .find(|b| b.to_string().contains("electron"))
        .unwrap();
    assert!(
        electron["messages"][0]["content"]
            .as_str()
            .unwrap()
            .ends_with("electron?\n\nA) +e\nB) 0\nC) 2e\nD) -e")
    );
    assert_eq!(electron["max_completion_tokens"], 32768);
}

/// `repo`'s Parquet conversion (`refs/convert/parquet`): `<config>/<split>/0000.parquet`.
fn converted(home: &Path, repo: &str, config: &str, split: &str) -> PathBuf {
    let dir = home
        .join("hub")
        .join(format!("datasets--{}", repo.replace('/', "--")));
    let ref_file = dir.join("refs/refs/convert/parquet");
    std::fs::create_dir_all(ref_file.parent().unwrap()).unwrap();
    std::fs::write(&ref_file, COMMIT).unwrap();
    dir.join("snapshots")
        .join(COMMIT)
        .join(format!("{config}/{split}/0000.parquet"))
}

/// An AIME set as HuggingFaceH4 and yentinglin keep it: (problem, answer) at main.
fn cache_aime_lighteval(home: &Path, repo: &str, rows: &[(&str, &str)]) {
    let file = snapshot(home, repo).join("data/train-00000-of-00001.parquet");
    let schema = text_schema(&["problem", "answer"]);
    let column = |k: usize| {
        texts(
            &rows
                .iter()
                .map(|r| if k == 0 { r.0 } else { r.1 })
                .collect::<Vec<_>>(),
        )
    };
    write_parquet_schema(&file, schema, (0..2).map(column).collect());
}

/// A boxed right answer, a right one after "The answer is", a boxed wrong one, and none.
const AIME24_REPLIES: &[(&str, &str)] = &[
    (
        "triples",
        "Counting cases, the final answer is $\\boxed{601}$.",
    ),
    ("torus", "Subtracting the radii, the answer is 127."),
    ("hexagon", "So the side is \\boxed{81}."),
    ("lattice", "I am not sure how to proceed."),
    ("parabola", "Answer: 0.50"),
];

#[test]
fn aime24_and_aime25_are_graded_by_lighteval_expression_match() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_aime_lighteval(
        &home,
        "HuggingFaceH4/aime_2024",
        &[
            ("Find the number of triples of nonnegative integers.", "601"),
            ("A torus is made by revolving a circle.", "127"),
            ("An equilateral hexagon has opposite sides parallel.", "80"),
            ("Count the lattice points inside the region.", "33"),
        ],
    );
    cache_aime_lighteval(
        &home,
        "yentinglin/aime_2025",
        &[("The parabola meets the line twice: find the slope.", "1/2")],
    );
    let server = answering(AIME24_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "aime24",
            "--accuracy-n-shots",
            "3",
            "--request-count",
            "4",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("--accuracy-n-shots 3 is ignored: --accuracy-benchmark aime24 is zero-shot"),
        "{stderr}"
    );
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,4,1,0.5000\naime24,2,4,1,0.5000\n"
    );
    // lighteval's prompt: the bare problem as the one user message.
    let sent = bodies(&server);
    assert_eq!(sent.len(), 4);
    assert_eq!(
        sent[0]["messages"],
        json!([{"role": "user", "content": "Find the number of triples of nonnegative integers."}])
    );
    assert_eq!(sent[0]["max_completion_tokens"], 32768);
    let graded = read_jsonl(&run.join("accuracy_export.jsonl"));
    let hexagon = graded
        .iter()
        .find(|l| l["conversation_id"] == "aime24-2")
        .unwrap();
    assert_eq!(
        (
            &hexagon["actual"],
            &hexagon["passed"],
            &hexagon["grader_name"]
        ),
        (&json!("81"), &json!(false), &json!("lighteval_expr"))
    );
    // AIME 2025: "0.50" equals the gold 1/2 at lighteval's 5 decimals.
    let again = dir.path().join("aime25");
    std::fs::create_dir_all(&again).unwrap();
    let out = profile(
        &again,
        &home,
        &server.url,
        &["--accuracy-benchmark", "aime25", "--request-count", "1"],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(
        std::fs::read_to_string(again.join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,1,1,0,1.0000\naime25,1,1,0,1.0000\n"
    );
}

/// HuggingFaceH4/MATH-500 keeps JSON Lines: read from its Parquet conversion.
fn cache_math500(home: &Path, rows: &[(&str, &str, &str)]) {
    let file = converted(home, "HuggingFaceH4/MATH-500", "default", "test");
    let schema = text_schema(&["problem", "solution", "subject"]);
    let column = |k: usize| texts(&rows.iter().map(|r| [r.0, r.1, r.2][k]).collect::<Vec<_>>());
    write_parquet_schema(&file, schema, (0..3).map(column).collect());
}

const MATH500_REPLIES: &[(&str, &str)] = &[
    (
        "polar",
        "Therefore the point is $\\boxed{(3, \\frac{\\pi}{2})}$.",
    ),
    ("Expand", "$\\boxed{x(x+2)}$"),
    ("fourteen", "\\boxed{4.67}"),
    ("hours", "No idea."),
];

#[test]
fn math_500_solutions_boxes_are_compared_as_values_per_subject() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    cache_math500(
        &home,
        &[
            (
                "Convert the point $(0,3)$ to polar coordinates.",
                "We have $r = 3$ and $\\theta = \\frac{\\pi}{2}$, so $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$",
                "Precalculus",
            ),
            (
                "Expand $x$ times $x+2$.",
                "Distributing gives $\\boxed{x^2+2x}$.",
                "Algebra",
            ),
            (
                "Write fourteen thirds as a fraction.",
                "It is $\\boxed{\\dfrac{14}{3}}$.",
                "Algebra",
            ),
            (
                "How many hours does the trip take?",
                "It takes $\\boxed{5\\text{ hours}}$.",
                "Prealgebra",
            ),
        ],
    );
    let server = answering(MATH500_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &["--accuracy-benchmark", "math_500", "--request-count", "4"],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,4,1,0.5000\n\
         Algebra,1,2,0,0.5000\nPrealgebra,0,1,1,0.0000\nPrecalculus,1,1,0,1.0000\n"
    );
    let graded = read_jsonl(&run.join("accuracy_export.jsonl"));
    let polar = graded
        .iter()
        .find(|l| l["conversation_id"] == "Precalculus-0")
        .unwrap();
    assert_eq!(
        (&polar["expected"], &polar["passed"], &polar["grader_name"]),
        (
            &json!("( 3, \\frac{\\pi}{2} )"),
            &json!(true),
            &json!("lighteval_latex")
        )
    );
    // A subject alone.
    let again = dir.path().join("algebra");
    std::fs::create_dir_all(&again).unwrap();
    let out = profile(
        &again,
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "math_500",
            "--accuracy-tasks",
            "Algebra",
            "--request-count",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(
        std::fs::read_to_string(again.join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,1,2,0,0.5000\nAlgebra,1,2,0,0.5000\n"
    );
}

/// Rowan/hellaswag, one split: (activity, context, four endings, label).
fn cache_hellaswag(home: &Path, split: &str, rows: &[(&str, &str, [&str; 4], &str)]) {
    let file = converted(home, "Rowan/hellaswag", "default", split);
    let schema = "message schema {
        optional binary activity_label (STRING);
        optional binary ctx (STRING);
        optional group endings (LIST) { repeated group list { optional binary element (STRING); } }
        optional binary label (STRING);
    }";
    write_parquet(
        &file,
        schema,
        vec![
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.1).collect::<Vec<_>>()),
            text_lists(&rows.iter().map(|r| r.2.to_vec()).collect::<Vec<_>>()),
            texts(&rows.iter().map(|r| r.3).collect::<Vec<_>>()),
        ],
    );
}

/// Exact match: a bare right letter, a right one with spaces around it, a wordy right one
/// and a hedge (both wrong to exact match). An empty reply is a failed request, not graded.
const HELLASWAG_REPLIES: &[(&str, &str)] = &[
    ("pours flour", "B"),
    ("splashes water", " D \n"),
    ("rinses the towel", "The answer is A"),
    ("cracks an egg", "C or maybe D"),
];

#[test]
fn hellaswag_prompts_are_deepevals_and_letters_match_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hf");
    let e = ["one", "two", "three", "four"];
    cache_hellaswag(
        &home,
        "train",
        &[
            ("Baking cookies", "A woman mixes dough.", e, "2"),
            ("Baking cookies", "A man preheats the oven.", e, "0"),
            ("Washing face", "A boy turns on the tap.", e, "1"),
        ],
    );
    cache_hellaswag(
        &home,
        "validation",
        &[
            ("Baking cookies", "She pours flour.", e, "1"),
            ("Washing face", "He splashes water.", e, "3"),
            ("Baking cookies", "He reads the recipe.", e, ""),
            ("Washing face", "She rinses the towel.", e, "0"),
            ("Baking cookies", "She cracks an egg.", e, "2"),
        ],
    );
    let server = answering(HELLASWAG_REPLIES);
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "hellaswag",
            "--accuracy-n-shots",
            "2",
            "--accuracy-enable-cot",
            "--request-count",
            "4",
        ],
    );
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--accuracy-enable-cot is ignored"),
        "{stderr}"
    );
    let run = dir.path().join("run");
    assert_eq!(
        std::fs::read_to_string(run.join("accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,2,4,0,0.5000\n\
         Baking cookies,1,2,0,0.5000\nWashing face,1,2,0,0.5000\n"
    );
    let sent = bodies(&server);
    // Activities in the order they first appear; the unlabelled row is not asked.
    assert_eq!(sent.len(), 4);
    let flour = sent[0]["messages"][0]["content"].as_str().unwrap();
    assert_eq!(
        flour,
        "The following are multiple choice questions (with answers) are sentence completion problems about Baking cookies.\n\n\
         A woman mixes dough.\nA. one\nB. two\nC. three\nD. four\nAnswer: C\n\n\
         A boy turns on the tap.\nA. one\nB. two\nC. three\nD. four\nAnswer: B\n\n\
         She pours flour.\nA. one\nB. two\nC. three\nD. four\nAnswer:\n\n\
         Output 'A', 'B', 'C', or 'D'. Full answer not needed."
    );
    assert_eq!(sent[0]["max_completion_tokens"], 5);
    assert!(
        sent[2]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("He splashes water.")
    );
    // Activities are named as in the data, case aside; an unknown one is refused.
    let again = dir.path().join("face");
    std::fs::create_dir_all(&again).unwrap();
    let out = profile(
        &again,
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "hellaswag",
            "--accuracy-tasks",
            "washing face",
            "--request-count",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(
        std::fs::read_to_string(again.join("run/accuracy_results.csv")).unwrap(),
        "task,correct,total,unparsed,accuracy\nOVERALL,1,2,0,0.5000\nWashing face,1,2,0,0.5000\n"
    );
    let out = profile(
        dir.path(),
        &home,
        &server.url,
        &[
            "--accuracy-benchmark",
            "hellaswag",
            "--accuracy-tasks",
            "Juggling",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("--accuracy-tasks Juggling: not an activity of hellaswag"),
        "{}",
        stderr_text(&out)
    );
}
