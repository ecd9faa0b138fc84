//! BIG-Bench Hard (`bigbench`), as AIPerf asks it through DeepEval's `BigBenchHard`: the test
//! split of each subtask of `lukaemon/bbh`, DeepEval's prompt (its few-shot prompt file for
//! the subtask, chain-of-thought or not, cut to `n_shots` examples, then the question, then
//! the subtask's confinement statement) and the `exact_match` grader.
//!
//! The prompt files and confinement statements are DeepEval's package data: they are read at
//! run time from an installed `deepeval` (found by asking `python3`), or from
//! `AIPERF_BBH_PROMPTS_DIR` (a directory with `cot_prompts/<subtask>.txt` and
//! `shot_prompts/<subtask>.txt`) and `AIPERF_BBH_CONFINEMENT_FILE` (a JSON object of
//! subtask name to statement).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::datasets::{self, text};
use super::{AccuracyOptions, Problem};
use crate::tokenizer::HubEnv;

pub const PROMPTS_DIR_ENV: &str = "AIPERF_BBH_PROMPTS_DIR";
pub const CONFINEMENT_ENV: &str = "AIPERF_BBH_CONFINEMENT_FILE";
/// DeepEval's examples per prompt file (its limit on `n_shots`).
pub const MAX_SHOTS: usize = 3;
/// AIPerf's output limit for the benchmark.
const GENERATION: u64 = 1024;

/// DeepEval's BigBenchHardTask values, in its order.
pub const TASKS: &[&str] = &[
    "boolean_expressions",
    "causal_judgement",
    "date_understanding",
    "disambiguation_qa",
    "dyck_languages",
    "formal_fallacies",
    "geometric_shapes",
    "hyperbaton",
    "logical_deduction_five_objects",
    "logical_deduction_seven_objects",
    "logical_deduction_three_objects",
    "movie_recommendation",
    "multistep_arithmetic_two",
    "navigate",
    "object_counting",
    "penguins_in_a_table",
    "reasoning_about_colored_objects",
    "ruin_names",
    "salient_translation_error_detection",
    "snarks",
    "sports_understanding",
    "temporal_sequences",
    "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects",
    "web_of_lies",
    "word_sorting",
];

/// Where the prompt files are and each subtask's confinement statement.
struct Templates {
    dir: PathBuf,
    confinement: HashMap<String, String>,
}

/// Asks `python3` for DeepEval's BBH package directory and confinement statements.
fn from_deepeval() -> Result<(PathBuf, HashMap<String, String>), String> {
    const SCRIPT: &str = "import json, os\n\
        import deepeval.benchmarks.big_bench_hard.big_bench_hard as m\n\
        print(json.dumps({'dir': os.path.dirname(m.__file__), 'confinement': \
        {t.value: s for t, s in m.bbh_confinement_statements_dict.items()}}))";
    let how = format!(
        "install DeepEval (`pip install deepeval`) for the python3 on PATH, or set {PROMPTS_DIR_ENV} and {CONFINEMENT_ENV}"
    );
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .env("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("BIG-Bench Hard's prompts come from DeepEval, and python3 cannot be run ({e}): {how}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.trim().lines().last().unwrap_or_default().to_string();
        return Err(format!(
            "BIG-Bench Hard's prompts come from DeepEval, which python3 cannot import ({last}): {how}"
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.trim().lines().last().unwrap_or_default();
    #[derive(serde::Deserialize)]
    struct Found {
        dir: PathBuf,
        confinement: HashMap<String, String>,
    }
    let found: Found = serde_json::from_str(line).map_err(|e| {
        format!("DeepEval's BBH data could not be read from python3's answer ({e}): {line}")
    })?;
    Ok((found.dir, found.confinement))
}

fn templates() -> Result<Templates, String> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let (dir, confinement_file) = (var(PROMPTS_DIR_ENV), var(CONFINEMENT_ENV));
    let deepeval = match (&dir, &confinement_file) {
        (Some(_), Some(_)) => None,
        _ => Some(from_deepeval()?),
    };
    let confinement = match confinement_file {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!("{CONFINEMENT_ENV}={}: cannot read it: {e}", path.display())
            })?;
            serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{CONFINEMENT_ENV}={}: not a JSON object of subtask to statement: {e}",
                    path.display()
                )
            })?
        }
        None => deepeval.as_ref().expect("asked above").1.clone(),
    };
    let dir = dir.unwrap_or_else(|| deepeval.expect("asked above").0);
    Ok(Templates { dir, confinement })
}

/// DeepEval's prompt file cut into sections (blank-line separated), newlines as Python's
/// text mode reads them.
fn sections(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the prompt file {}: {e}", path.display()))?;
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    Ok(text.split("\n\n").map(String::from).collect())
}

/// DeepEval's `generate_output` plus the confinement statement AIPerf appends.
pub fn prompt(sections: &[String], n_shots: usize, input: &str, confinement: &str) -> String {
    let shots = sections[..sections.len().min(n_shots + 1)].join("\n\n");
    format!("Task description: {shots}\n\nQ: {input}\nA: {confinement}")
}

/// The questions of `opts.tasks`, subtask by subtask.
pub fn load(env: &HubEnv, opts: &AccuracyOptions, flag: &str) -> Result<Vec<Problem>, String> {
    let t = templates().map_err(|e| format!("{flag}: {e}"))?;
    let folder = if opts.cot {
        "cot_prompts"
    } else {
        "shot_prompts"
    };
    let mut problems = Vec::new();
    for task in &opts.tasks {
        let sections = sections(&t.dir.join(folder).join(format!("{task}.txt")))
            .map_err(|e| format!("{flag}: {e}"))?;
        let confinement = t
            .confinement
            .get(task)
            .ok_or_else(|| format!("{flag}: no confinement statement for subtask {task}"))?;
        let src = datasets::Source {
            repo: "lukaemon/bbh",
            config: task,
            split: "test",
            file: None,
            revision: "main",
        };
        for (i, row) in datasets::read(env, src, flag)?.iter().enumerate() {
            let at = format!("lukaemon/bbh {task} test row {i}");
            let prompt = prompt(
                &sections,
                opts.n_shots,
                text(row, "input", &at)?,
                confinement,
            );
            problems.push(Problem {
                id: format!("{task}-{i}"),
                task: task.to_string(),
                ground_truth: row
                    .get("target")
                    .and_then(|c| c.scalar())
                    .ok_or_else(|| format!("{at}: no column 'target'"))?,
                messages: vec![("user", prompt.clone())],
                prompt,
                max_tokens: GENERATION,
                stop: None,
                images: Vec::new(),
            });
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_takes_n_shots_plus_the_description() {
        let sections: Vec<String> = ["Desc.", "Q: a\nA: 1", "Q: b\nA: 2", "Q: c\nA: 3"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            prompt(&sections, 2, "d?", "\n\nSay it."),
            "Task description: Desc.\n\nQ: a\nA: 1\n\nQ: b\nA: 2\n\nQ: d?\nA: \n\nSay it."
        );
        assert_eq!(
            prompt(&sections, 0, "d?", ""),
            "Task description: Desc.\n\nQ: d?\nA: "
        );
        assert_eq!(prompt(&sections, 9, "x", "").matches("Q: ").count(), 4);
        assert_eq!(TASKS.len(), 27);
    }
}
