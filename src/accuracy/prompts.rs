//! Questions as AIPerf asks them: lighteval's prompt functions (gsm8k, mmlu), its few-shot
//! selection, and the chat messages lighteval's chat template would send.

use std::collections::BTreeMap;

use super::Problem;
use super::datasets::text;
use super::pyrandom::PyRandom;
use crate::dataset::public::rows::Cell;

/// lighteval's gsm8k task: `generation_size=256`.
const GSM8K_GENERATION: u64 = 256;
/// MMLU: a letter and a newline (the stop), or a whole reasoning with chain of thought.
const MMLU_GENERATION: u64 = 5;
const MMLU_COT_GENERATION: u64 = 4000;

/// lighteval's `prompt.gsm8k`: `Question: {question}\nAnswer:`, zero-shot; the gold is the
/// whole answer (ending in `#### <number>`).
pub fn gsm8k(rows: &[Cell]) -> Result<Vec<Problem>, String> {
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let at = format!("openai/gsm8k row {i}");
            let prompt = format!("Question: {}\nAnswer:", text(row, "question", &at)?);
            Ok(Problem {
                id: format!("gsm8k-{i}"),
                task: "gsm8k".into(),
                ground_truth: text(row, "answer", &at)?.to_string(),
                messages: vec![("user", prompt.clone())],
                prompt,
                max_tokens: GSM8K_GENERATION,
                stop: None,
                images: Vec::new(),
            })
        })
        .collect()
}

/// One MMLU row: the question, its choices and the gold index.
struct McRow {
    question: String,
    choices: Vec<String>,
    gold: usize,
}

fn mc_row(row: &Cell, at: &str) -> Result<McRow, String> {
    let question = text(row, "question", at)?.to_string();
    let choices: Vec<String> = match row.get("choices") {
        Some(Cell::List(items)) => items.iter().filter_map(Cell::scalar).collect(),
        _ => return Err(format!("{at}: no list column 'choices'")),
    };
    // An index, or a letter in some copies of the set.
    let gold = match row.get("answer") {
        Some(Cell::Number(n)) => n.parse::<usize>().ok(),
        Some(Cell::Text(t)) => t
            .trim()
            .chars()
            .next()
            .filter(char::is_ascii_uppercase)
            .map(|c| (c as u8 - b'A') as usize),
        _ => None,
    }
    .filter(|g| *g < choices.len().min(26))
    .ok_or_else(|| format!("{at}: 'answer' is not the index of one of the choices"))?;
    Ok(McRow {
        question,
        choices,
        gold,
    })
}

const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";

fn letter(i: usize) -> char {
    LETTERS[i] as char
}

/// `\nA. first\nB. second...`
fn choices_block(choices: &[String]) -> String {
    choices
        .iter()
        .take(LETTERS.len())
        .enumerate()
        .map(|(i, c)| format!("\n{}. {c}", letter(i)))
        .collect()
}

/// lighteval's balanced few-shot sampler (`variance_seed=0`): examples grouped by their
/// gold answer's text, the groups ordered by size (largest first, ties shuffled), then one
/// drawn from each group in turn.
fn balanced_few_shots(dev: &[McRow], n_shots: usize) -> Vec<usize> {
    if n_shots == 0 {
        return Vec::new();
    }
    let mut by_label: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, row) in dev.iter().enumerate() {
        by_label
            .entry(row.choices[row.gold].as_str())
            .or_default()
            .push(i);
    }
    let mut by_count: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (label, indices) in &by_label {
        by_count.entry(indices.len()).or_default().push(label);
    }
    let mut rng = PyRandom::new(0);
    let mut labels = Vec::new();
    for (_, mut group) in by_count.into_iter().rev() {
        rng.shuffle(&mut group);
        labels.extend(group);
    }
    let mut chosen = Vec::new();
    let mut remaining = dev.len().min(n_shots + 1);
    let mut next = 0;
    while remaining > 0 && !labels.is_empty() {
        let label = labels[next % labels.len()];
        next += 1;
        let pool = by_label.get_mut(label).expect("a label of the map");
        if pool.is_empty() {
            continue;
        }
        let i = rng.randrange(pool.len());
        chosen.push(pool.remove(i));
        remaining -= 1;
    }
    chosen.truncate(n_shots);
    chosen
}

/// lighteval's `mmlu_prompt` for one subject: the instruction, `n_shots` balanced
/// examples from the dev split, then each test question; as chat messages, each example is
/// a user turn answered by an assistant turn (the instruction in the first user turn).
pub fn mmlu(
    subject: &str,
    test: &[Cell],
    dev: &[Cell],
    n_shots: usize,
    cot: bool,
) -> Result<Vec<Problem>, String> {
    let dev: Vec<McRow> = dev
        .iter()
        .enumerate()
        .map(|(i, r)| mc_row(r, &format!("lighteval/mmlu {subject} dev row {i}")))
        .collect::<Result<_, _>>()?;
    let shots: Vec<&McRow> = balanced_few_shots(&dev, n_shots)
        .into_iter()
        .map(|i| &dev[i])
        .collect();
    let mut instruction = format!(
        "The following are multiple choice questions (with answers) about {}.",
        subject.replace('_', " ")
    );
    if cot {
        instruction.push_str(
            " Think step by step and then output the answer in the format of \"The answer is (X)\" at the end.",
        );
    }
    instruction.push_str("\n\n");
    let query = |r: &McRow| {
        format!(
            "Question: {}{}\nAnswer:",
            r.question,
            choices_block(&r.choices)
        )
    };
    let gold = |r: &McRow| format!(" {}", letter(r.gold));
    let few_shot_text: String = shots
        .iter()
        .map(|r| format!("{}{}\n\n", query(r), gold(r)))
        .collect();
    test.iter()
        .enumerate()
        .map(|(i, row)| {
            let r = mc_row(row, &format!("lighteval/mmlu {subject} test row {i}"))?;
            let main = if cot {
                format!(
                    "Question: {}{}\nLet's think step by step.\nAnswer:",
                    r.question,
                    choices_block(&r.choices)
                )
            } else {
                query(&r)
            };
            let mut messages = Vec::new();
            for (k, shot) in shots.iter().enumerate() {
                let q = if k == 0 {
                    format!("{instruction}{}", query(shot))
                } else {
                    query(shot)
                };
                messages.push(("user", q));
                messages.push(("assistant", gold(shot)));
            }
            let last = if shots.is_empty() {
                format!("{instruction}{main}")
            } else {
                main.clone()
            };
            messages.push(("user", last));
            Ok(Problem {
                id: format!("{subject}-{i}"),
                task: subject.to_string(),
                ground_truth: gold(&r),
                prompt: format!("{instruction}{few_shot_text}{main}"),
                messages,
                max_tokens: if cot {
                    MMLU_COT_GENERATION
                } else {
                    MMLU_GENERATION
                },
                stop: (!cot).then(|| vec!["\n".to_string()]),
                images: Vec::new(),
            })
        })
        .collect()
}

/// The recipe's AIME output limit.
const AIME_GENERATION: u64 = 32768;

/// The trt-llm recipe's `AIMETemplate` (AIPerf's `aime`): with examples, a header and the
/// first `n_shots` problems of the set (with their solutions under chain of thought), then
/// `**Problem**: ...\n**Answer**: \n\n` and the step-by-step (or number-only) line.
pub fn aime(rows: &[Cell], n_shots: usize, cot: bool) -> Result<Vec<Problem>, String> {
    let field = |row: &Cell, name: &str, i: usize| -> Result<String, String> {
        row.get(name).and_then(Cell::scalar).ok_or_else(|| {
            format!(
                "Maxwell-Jia/AIME_2024 row {i}: no column '{name}' (columns: {})",
                row.field_names().join(", ")
            )
        })
    };
    let mut shots = String::new();
    for (i, row) in rows.iter().take(n_shots).enumerate() {
        if i == 0 {
            shots.push_str(
                "The following are problems from the American Invitational Mathematics Examination (AIME) 2024. AIME is a prestigious high school mathematics competition known for its challenging mathematical problems.\n\n",
            );
        }
        shots.push_str(&format!("**Problem**: {}\n", field(row, "Problem", i)?));
        if cot {
            let solution = row
                .get("Solution")
                .and_then(Cell::scalar)
                .unwrap_or_default();
            shots.push_str(&format!("**Solution**: {solution}\n"));
        }
        shots.push_str(&format!("**Answer**: {}\n\n", field(row, "Answer", i)?));
    }
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let prompt = format!(
                "{shots}**Problem**: {}\n**Answer**: \n\n{}",
                field(row, "Problem", i)?,
                if cot {
                    "Let's think step-by-step."
                } else {
                    "No explanation needed. Just return a number."
                }
            );
            Ok(Problem {
                id: format!("aime-{i}"),
                task: "aime".into(),
                ground_truth: field(row, "Answer", i)?,
                messages: vec![("user", prompt.clone())],
                prompt,
                max_tokens: AIME_GENERATION,
                stop: None,
                images: Vec::new(),
            })
        })
        .collect()
}

/// lighteval's gpqa:diamond output limit.
const GPQA_GENERATION: u64 = 32768;

/// The positions of the four answers: Python's `random.Random(seed).shuffle` of 0..4, the
/// seed the last 32 bits of SHA-256(question) (AIPerf's deterministic shuffle).
fn gpqa_order(question: &str) -> Vec<usize> {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(question.as_bytes());
    let seed = u32::from_be_bytes(digest[28..32].try_into().expect("4 bytes"));
    let mut order: Vec<usize> = (0..4).collect();
    PyRandom::new(seed).shuffle(&mut order);
    order
}

/// simple-evals' GPQA template (lighteval's `gpqa_prompt_fn`) with AIPerf's seeded
/// shuffle of the correct and three incorrect answers; the gold is the correct one's letter.
pub fn gpqa_diamond(rows: &[Cell]) -> Result<Vec<Problem>, String> {
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let at = format!("Idavidrein/gpqa gpqa_diamond row {i}");
            let question = text(row, "Question", &at)?;
            let raw = [
                text(row, "Correct Answer", &at)?,
                text(row, "Incorrect Answer 1", &at)?,
                text(row, "Incorrect Answer 2", &at)?,
                text(row, "Incorrect Answer 3", &at)?,
            ];
            let order = gpqa_order(question);
            let gold = order.iter().position(|&k| k == 0).expect("a permutation of 0..4");
            let prompt = format!(
                "Answer the following multiple choice question. The last line of your response should be of the following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step before answering.\n\n{question}\n\nA) {}\nB) {}\nC) {}\nD) {}",
                raw[order[0]], raw[order[1]], raw[order[2]], raw[order[3]]
            );
            Ok(Problem {
                id: format!("gpqa_diamond-{i}"),
                task: "gpqa_diamond".into(),
                ground_truth: letter(gold).to_string(),
                messages: vec![("user", prompt.clone())],
                prompt,
                max_tokens: GPQA_GENERATION,
                stop: None,
                images: Vec::new(),
            })
        })
        .collect()
}

/// MMStar's six categories.
pub const MMSTAR_CATEGORIES: &[&str] = &[
    "coarse perception",
    "fine-grained perception",
    "instance reasoning",
    "logical reasoning",
    "math",
    "science & technology",
];

/// The multiple-choice instruction LLaVA and lmms-eval append to MMStar's question.
const MMSTAR_SUFFIX: &str = "Answer with the option's letter from the given choices directly.";
/// A letter, with room for a model that adds a word or two.
const MMSTAR_GENERATION: u64 = 16;

/// MMStar (a vision set, beyond AIPerf): the row's question (which lists its options
/// `A: ...`) and lmms-eval's instruction, the row's image as an image part; the answer is
/// its letter. Rows of the `categories` asked, in dataset order.
pub fn mmstar(rows: &[Cell], categories: &[&str]) -> Result<Vec<Problem>, String> {
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let at = format!("Lin-Chen/MMStar row {i}");
        let category = text(row, "category", &at)?;
        if !categories.contains(&category) {
            continue;
        }
        let image = crate::dataset::public::image_of(row, Some("image"))
            .map_err(|e| format!("{at}: {e}"))?
            .ok_or_else(|| format!("{at}: no image"))?;
        let prompt = format!("{}\n{MMSTAR_SUFFIX}", text(row, "question", &at)?.trim());
        out.push(Problem {
            id: format!("{}-{i}", category.replace([' ', '&'], "_")),
            task: category.to_string(),
            ground_truth: text(row, "answer", &at)?.trim().to_string(),
            messages: vec![("user", prompt.clone())],
            prompt,
            max_tokens: MMSTAR_GENERATION,
            stop: None,
            images: vec![image],
        });
    }
    Ok(out)
}

/// MMLU-Pro's output limit (TIGER-AI-Lab's evaluate_from_api.py).
const MMLU_PRO_GENERATION: u64 = 4000;

/// MMLU-Pro's 14 categories.
pub const MMLU_PRO_CATEGORIES: &[&str] = &[
    "biology",
    "business",
    "chemistry",
    "computer science",
    "economics",
    "engineering",
    "health",
    "history",
    "law",
    "math",
    "philosophy",
    "physics",
    "psychology",
    "other",
];

/// One MMLU-Pro row: its options without the "N/A" fillers.
struct ProRow<'a> {
    question: &'a str,
    options: Vec<String>,
    answer: &'a str,
    cot_content: &'a str,
    category: &'a str,
}

fn pro_row<'a>(row: &'a Cell, at: &str) -> Result<ProRow<'a>, String> {
    let options = match row.get("options") {
        Some(Cell::List(items)) => items
            .iter()
            .filter_map(Cell::scalar)
            .filter(|o| o != "N/A")
            .collect(),
        _ => return Err(format!("{at}: no list column 'options'")),
    };
    Ok(ProRow {
        question: text(row, "question", at)?,
        options,
        answer: text(row, "answer", at)?,
        cot_content: row.get("cot_content").and_then(Cell::as_text).unwrap_or(""),
        category: text(row, "category", at)?,
    })
}

/// `Question: ...\nOptions: A. x\nB. y\n...Answer: <answer>\n\n` (the reference's
/// `format_example`: an empty answer is the step-by-step primer).
fn pro_example(r: &ProRow, answer: &str) -> String {
    let answer = match answer {
        "" => "Let's think step by step.",
        a => a.strip_prefix("A: ").unwrap_or(a),
    };
    format!("{}{answer}\n\n", pro_question(r))
}

fn pro_question(r: &ProRow) -> String {
    let mut out = format!("Question: {}\nOptions: ", r.question);
    for (i, o) in r.options.iter().take(10).enumerate() {
        out.push_str(&format!("{}. {o}\n", letter(i)));
    }
    out.push_str("Answer: ");
    out
}

/// TIGER-AI-Lab's MMLU-Pro prompt, as AIPerf builds it: the category's instruction, its
/// first `n_shots` validation examples (with their reasoning under chain of thought, else
/// the bare letter), then the question; one user message. Rows of the `categories` asked,
/// in dataset order.
pub fn mmlu_pro(
    test: &[Cell],
    validation: &[Cell],
    categories: &[&str],
    n_shots: usize,
    cot: bool,
) -> Result<Vec<Problem>, String> {
    let mut shots: BTreeMap<&str, Vec<ProRow>> = BTreeMap::new();
    for (i, row) in validation.iter().enumerate() {
        let r = pro_row(row, &format!("TIGER-Lab/MMLU-Pro validation row {i}"))?;
        shots.entry(r.category).or_default().push(r);
    }
    let mut out = Vec::new();
    for (i, row) in test.iter().enumerate() {
        let r = pro_row(row, &format!("TIGER-Lab/MMLU-Pro test row {i}"))?;
        if !categories.contains(&r.category) {
            continue;
        }
        let mut prompt = format!(
            "The following are multiple choice questions (with answers) about {}.",
            r.category
        );
        prompt.push_str(if cot {
            " Think step by step and then output the answer in the format of \"The answer is (X)\" at the end.\n\n"
        } else {
            "\n\n"
        });
        for ex in shots.get(r.category).into_iter().flatten().take(n_shots) {
            prompt.push_str(&pro_example(
                ex,
                if cot { ex.cot_content } else { ex.answer },
            ));
        }
        if cot {
            prompt.push_str(&pro_example(&r, ""));
        } else {
            prompt.push_str(&pro_question(&r));
            prompt.push_str("\n\n");
        }
        out.push(Problem {
            id: format!("{}-{i}", r.category.replace(' ', "_")),
            task: r.category.to_string(),
            ground_truth: r.answer.to_string(),
            messages: vec![("user", prompt.clone())],
            prompt,
            max_tokens: MMLU_PRO_GENERATION,
            stop: None,
            images: Vec::new(),
        });
    }
    Ok(out)
}

/// MMLU's 57 subjects (lighteval's list).
pub const MMLU_SUBJECTS: &[&str] = &[
    "abstract_algebra",
    "anatomy",
    "astronomy",
    "business_ethics",
    "clinical_knowledge",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_medicine",
    "college_physics",
    "computer_security",
    "conceptual_physics",
    "econometrics",
    "electrical_engineering",
    "elementary_mathematics",
    "formal_logic",
    "global_facts",
    "high_school_biology",
    "high_school_chemistry",
    "high_school_computer_science",
    "high_school_european_history",
    "high_school_geography",
    "high_school_government_and_politics",
    "high_school_macroeconomics",
    "high_school_mathematics",
    "high_school_microeconomics",
    "high_school_physics",
    "high_school_psychology",
    "high_school_statistics",
    "high_school_us_history",
    "high_school_world_history",
    "human_aging",
    "human_sexuality",
    "international_law",
    "jurisprudence",
    "logical_fallacies",
    "machine_learning",
    "management",
    "marketing",
    "medical_genetics",
    "miscellaneous",
    "moral_disputes",
    "moral_scenarios",
    "nutrition",
    "philosophy",
    "prehistory",
    "professional_accounting",
    "professional_law",
    "professional_medicine",
    "professional_psychology",
    "public_relations",
    "security_studies",
    "sociology",
    "us_foreign_policy",
    "virology",
    "world_religions",
];

/// lighteval's zero-shot math tasks (aime24, aime25, math_500): the bare problem as one
/// user message, 32768 tokens to answer in.
const LIGHTEVAL_MATH_GENERATION: u64 = 32768;

/// A lighteval zero-shot math set: each row's `problem`; the gold is `answer` (AIME) or the
/// whole `solution` (MATH-500, whose boxed answer the grader finds). `task` names each row:
/// the benchmark, or the row's `subject` when `by_subject` (MATH-500), kept when it is in
/// `tasks` (all when `tasks` is empty).
pub fn bare_problems(
    rows: &[Cell],
    repo: &str,
    benchmark: &str,
    gold_column: &str,
    by_subject: bool,
    tasks: &[String],
) -> Result<Vec<Problem>, String> {
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let at = format!("{repo} row {i}");
        let task = match by_subject {
            true => text(row, "subject", &at)?.to_string(),
            false => benchmark.to_string(),
        };
        if !tasks.is_empty() && !tasks.contains(&task) {
            continue;
        }
        let prompt = text(row, "problem", &at)?.to_string();
        let ground_truth = row.get(gold_column).and_then(Cell::scalar).ok_or_else(|| {
            format!(
                "{at}: no column '{gold_column}' (columns: {})",
                row.field_names().join(", ")
            )
        })?;
        out.push(Problem {
            id: format!("{}-{i}", task.replace([' ', '&'], "_")),
            task,
            ground_truth,
            messages: vec![("user", prompt.clone())],
            prompt,
            max_tokens: LIGHTEVAL_MATH_GENERATION,
            stop: None,
            images: Vec::new(),
        });
    }
    Ok(out)
}

/// MATH-500's subjects (its `subject` column), the tasks `--accuracy-tasks` can pick.
pub const MATH_SUBJECTS: &[&str] = &[
    "Algebra",
    "Counting & Probability",
    "Geometry",
    "Intermediate Algebra",
    "Number Theory",
    "Prealgebra",
    "Precalculus",
];

/// HellaSwag's answer is one letter.
const HELLASWAG_GENERATION: u64 = 5;
/// DeepEval's instruction, added when the model cannot be given an output schema.
const HELLASWAG_CONFINEMENT: &str = "Output 'A', 'B', 'C', or 'D'. Full answer not needed.";

/// DeepEval's HellaSwag question: the context, the four endings lettered, `Answer:`, and
/// for a few-shot example its letter and a blank line.
fn hellaswag_question(row: &Cell, at: &str, with_answer: bool) -> Result<String, String> {
    let mut q = text(row, "ctx", at)?.to_string();
    let endings: Vec<String> = match row.get("endings") {
        Some(Cell::List(items)) => items.iter().filter_map(Cell::scalar).collect(),
        _ => Vec::new(),
    };
    if endings.len() != 4 {
        return Err(format!(
            "{at}: 'endings' should hold 4 endings, not {}",
            endings.len()
        ));
    }
    for (letter, ending) in ["A", "B", "C", "D"].iter().zip(&endings) {
        q.push_str(&format!("\n{letter}. {ending}"));
    }
    q.push_str("\nAnswer:");
    if with_answer {
        q.push_str(&format!(
            " {}\n\n",
            hellaswag_letter(row, at)?.unwrap_or("")
        ));
    }
    Ok(q)
}

/// The row's gold letter; None for an unlabelled row.
fn hellaswag_letter(row: &Cell, at: &str) -> Result<Option<&'static str>, String> {
    let Some(label) = row
        .get("label")
        .and_then(Cell::scalar)
        .filter(|l| !l.is_empty())
    else {
        return Ok(None);
    };
    match label.trim().parse::<usize>() {
        Ok(i) if i < 4 => Ok(Some(["A", "B", "C", "D"][i])),
        _ => Err(format!("{at}: label '{label}' is not 0-3")),
    }
}

/// Rowan/hellaswag as DeepEval asks it: the validation rows of each activity asked (all in
/// the order they first appear when `tasks` is empty; names match case-insensitively), each
/// after the first `n_shots` of the train split's first-row-per-activity examples.
pub fn hellaswag(
    train: &[Cell],
    validation: &[Cell],
    tasks: &[String],
    n_shots: usize,
) -> Result<Vec<Problem>, String> {
    let mut shots = Vec::new();
    let mut seen = Vec::new();
    for (i, row) in train.iter().enumerate() {
        let at = format!("Rowan/hellaswag train row {i}");
        let label = text(row, "activity_label", &at)?;
        if !seen.contains(&label) {
            seen.push(label);
            if shots.len() < n_shots {
                shots.push(hellaswag_question(row, &at, true)?);
            }
        }
    }
    let mut by_label: Vec<(&str, Vec<(usize, &Cell)>)> = Vec::new();
    for (i, row) in validation.iter().enumerate() {
        let label = text(
            row,
            "activity_label",
            &format!("Rowan/hellaswag validation row {i}"),
        )?;
        match by_label.iter_mut().find(|(l, _)| *l == label) {
            Some((_, rows)) => rows.push((i, row)),
            None => by_label.push((label, vec![(i, row)])),
        }
    }
    let chosen: Vec<&(&str, Vec<(usize, &Cell)>)> = if tasks.is_empty() {
        by_label.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for t in tasks {
            let found = by_label.iter().find(|(l, _)| {
                l.eq_ignore_ascii_case(t) || l.replace(' ', "_").eq_ignore_ascii_case(t)
            });
            match found {
                Some(f) => chosen.push(f),
                None => {
                    let mut known: Vec<&str> = by_label.iter().map(|(l, _)| *l).collect();
                    known.sort_unstable();
                    return Err(format!(
                        "--accuracy-tasks {t}: not an activity of hellaswag's validation split; \
                         its {} activities include: {}",
                        known.len(),
                        known.iter().take(8).copied().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
        chosen
    };
    let mut out = Vec::new();
    for (label, rows) in chosen {
        let header = format!(
            "The following are multiple choice questions (with answers) are sentence completion problems about {label}.\n\n{}",
            shots.concat()
        );
        for (i, row) in rows {
            let at = format!("Rowan/hellaswag validation row {i}");
            let Some(letter) = hellaswag_letter(row, &at)? else {
                continue;
            };
            let prompt = format!(
                "{header}{}\n\n{HELLASWAG_CONFINEMENT}",
                hellaswag_question(row, &at, false)?
            );
            out.push(Problem {
                id: format!("{}-{i}", label.replace([' ', '&', ','], "_")),
                task: label.to_string(),
                ground_truth: letter.to_string(),
                messages: vec![("user", prompt.clone())],
                prompt,
                max_tokens: HELLASWAG_GENERATION,
                stop: None,
                images: Vec::new(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(q: &str, choices: &[&str], answer: usize) -> Cell {
        Cell::Group(vec![
            ("question".into(), Cell::Text(q.into())),
            (
                "choices".into(),
                Cell::List(choices.iter().map(|c| Cell::Text(c.to_string())).collect()),
            ),
            ("answer".into(), Cell::Number(answer.to_string())),
        ])
    }

    #[test]
    fn mmlu_zero_shot_prompt_is_lightevals() {
        let test = [row("1+1?", &["1", "2", "3", "4"], 1)];
        let p = &mmlu("college_mathematics", &test, &[], 0, false).unwrap()[0];
        let expected = "The following are multiple choice questions (with answers) about college mathematics.\n\nQuestion: 1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer:";
        assert_eq!(p.prompt, expected);
        assert_eq!(p.messages, vec![("user", expected.to_string())]);
        assert_eq!(p.ground_truth, " B");
        assert_eq!(p.stop, Some(vec!["\n".to_string()]));
        assert_eq!((p.id.as_str(), p.max_tokens), ("college_mathematics-0", 5));
    }

    #[test]
    fn mmlu_chain_of_thought_asks_for_the_answer_line() {
        let test = [row("1+1?", &["1", "2", "3", "4"], 1)];
        let p = &mmlu("anatomy", &test, &[], 0, true).unwrap()[0];
        assert!(p.prompt.contains(
            "about anatomy. Think step by step and then output the answer in the format of \"The answer is (X)\" at the end.\n\n"
        ));
        assert!(
            p.prompt
                .ends_with("D. 4\nLet's think step by step.\nAnswer:")
        );
        assert_eq!((p.max_tokens, p.stop.clone()), (4000, None));
    }

    #[test]
    fn mmlu_few_shots_are_user_assistant_pairs() {
        let dev: Vec<Cell> = (0..5)
            .map(|i| row(&format!("d{i}"), &["w", "x", "y", "z"], i % 4))
            .collect();
        let test = [row("q", &["a", "b", "c", "d"], 3)];
        let p = &mmlu("anatomy", &test, &dev, 2, false).unwrap()[0];
        assert_eq!(p.messages.len(), 5);
        assert!(p.messages[0].1.starts_with("The following are"));
        assert!(p.messages[0].1.ends_with("\nAnswer:"));
        assert_eq!(p.messages[1].0, "assistant");
        assert!(p.messages[1].1.starts_with(' '));
        assert!(p.messages[2].1.starts_with("Question: d"));
        assert_eq!(
            p.messages[4],
            (
                "user",
                "Question: q\nA. a\nB. b\nC. c\nD. d\nAnswer:".into()
            )
        );
    }

    #[test]
    fn balanced_sampling_matches_aiperf() {
        // AIPerf's MMLUBenchmark._balanced_sample_indices on golds [w,x,y,z,w,x,y,w]
        // (w three times, x and y twice, z once) with n_shots=4 gives [4, 1, 6, 3].
        let golds = [0usize, 1, 2, 3, 0, 1, 2, 0];
        let dev: Vec<McRow> = golds
            .iter()
            .map(|&g| McRow {
                question: String::new(),
                choices: ["w", "x", "y", "z"].map(String::from).to_vec(),
                gold: g,
            })
            .collect();
        assert_eq!(balanced_few_shots(&dev, 4), vec![4, 1, 6, 3]);
        assert!(balanced_few_shots(&dev, 0).is_empty());
    }

    #[test]
    fn mmlu_pro_prompt_is_the_references() {
        let row = |q: &str, cat: &str, cot: &str| {
            Cell::Group(vec![
                ("question".into(), Cell::Text(q.into())),
                (
                    "options".into(),
                    Cell::List(
                        ["p", "N/A", "r"]
                            .iter()
                            .map(|o| Cell::Text(o.to_string()))
                            .collect(),
                    ),
                ),
                ("answer".into(), Cell::Text("B".into())),
                ("cot_content".into(), Cell::Text(cot.into())),
                ("category".into(), Cell::Text(cat.into())),
            ])
        };
        let validation = [row("v?", "law", "A: Because. The answer is (B).")];
        let test = [row("t?", "law", ""), row("x?", "math", "")];
        let p = mmlu_pro(&test, &validation, &["law"], 5, true).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].prompt,
            "The following are multiple choice questions (with answers) about law. Think step by step and then output the answer in the format of \"The answer is (X)\" at the end.\n\n\
             Question: v?\nOptions: A. p\nB. r\nAnswer: Because. The answer is (B).\n\n\
             Question: t?\nOptions: A. p\nB. r\nAnswer: Let's think step by step.\n\n"
        );
        assert_eq!(
            (p[0].ground_truth.as_str(), p[0].id.as_str()),
            ("B", "law-0")
        );
        let plain = mmlu_pro(&test, &validation, &["law"], 1, false).unwrap();
        assert!(
            plain[0]
                .prompt
                .ends_with("Answer: B\n\nQuestion: t?\nOptions: A. p\nB. r\nAnswer: \n\n")
        );
    }

    #[test]
    fn aime_prompt_is_the_recipes() {
        let row = |p: &str, s: &str, a: i64| {
            Cell::Group(vec![
                ("ID".into(), Cell::Text("2024-I-1".into())),
                ("Problem".into(), Cell::Text(p.into())),
                ("Solution".into(), Cell::Text(s.into())),
                ("Answer".into(), Cell::Number(a.to_string())),
            ])
        };
        let rows = [row("P1", "S1", 204), row("P2", "S2", 25)];
        let p = aime(&rows, 1, true).unwrap();
        assert_eq!(
            p[1].prompt,
            "The following are problems from the American Invitational Mathematics Examination (AIME) 2024. AIME is a prestigious high school mathematics competition known for its challenging mathematical problems.\n\n\
             **Problem**: P1\n**Solution**: S1\n**Answer**: 204\n\n**Problem**: P2\n**Answer**: \n\nLet's think step-by-step."
        );
        assert_eq!((p[1].ground_truth.as_str(), p[1].max_tokens), ("25", 32768));
        let plain = aime(&rows, 0, false).unwrap();
        assert_eq!(
            plain[0].prompt,
            "**Problem**: P1\n**Answer**: \n\nNo explanation needed. Just return a number."
        );
    }

    #[test]
    fn gpqa_shuffle_is_aiperfs() {
        // python3: seed = int(sha256(q).hexdigest(), 16) % 2**32 (1560464524);
        // random.Random(seed).shuffle([0, 1, 2, 3]) gives [1, 2, 3, 0].
        assert_eq!(
            gpqa_order("What is the charge of an electron?"),
            vec![1, 2, 3, 0]
        );
        let row = Cell::Group(vec![
            (
                "Question".into(),
                Cell::Text("What is the charge of an electron?".into()),
            ),
            ("Correct Answer".into(), Cell::Text("-e".into())),
            ("Incorrect Answer 1".into(), Cell::Text("+e".into())),
            ("Incorrect Answer 2".into(), Cell::Text("0".into())),
            ("Incorrect Answer 3".into(), Cell::Text("2e".into())),
        ]);
        let p = &gpqa_diamond(&[row]).unwrap()[0];
        assert!(
            p.prompt.ends_with("electron?\n\nA) +e\nB) 0\nC) 2e\nD) -e"),
            "{}",
            p.prompt
        );
        assert_eq!(p.ground_truth, "D");
    }

    #[test]
    fn gsm8k_prompt() {
        let rows = [Cell::Group(vec![
            ("question".into(), Cell::Text("How many?".into())),
            ("answer".into(), Cell::Text("2+2=4\n#### 4".into())),
        ])];
        let p = &gsm8k(&rows).unwrap()[0];
        assert_eq!(p.prompt, "Question: How many?\nAnswer:");
        assert_eq!(p.ground_truth, "2+2=4\n#### 4");
        assert_eq!((p.max_tokens, p.stop.clone()), (256, None));
    }
}
