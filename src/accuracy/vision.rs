//! The vision sets no AIPerf peer grades: ChartQA, DocVQA, AI2D and MMMU. Each row's
//! images go as the chat message's image parts (as `mmstar`), after the prompt lmms-eval
//! uses for the set's default model (its task YAMLs and `utils.py`:
//! `lmms_eval/tasks/{chartqa,docvqa,ai2d,mmmu}`), zero-shot, with lmms-eval's generation
//! size as the output limit.

use super::Problem;
use super::datasets::{self, text};
use super::vision_graders::{MmmuGold, py_str_list};
use crate::dataset::EncodedImage;
use crate::dataset::public::rows::Cell;
use crate::tokenizer::HubEnv;

/// lmms-eval's post prompt for ChartQA and DocVQA (and MMMU's open questions).
const SHORT_ANSWER: &str = "Answer the question using a single word or phrase.";
/// lmms-eval's post prompt for AI2D and MMMU's multiple-choice questions.
const LETTER_ANSWER: &str = "Answer with the option's letter from the given choices directly.";

/// lmms-eval's `max_new_tokens`: chartqa 16, docvqa 128, ai2d 16, mmmu_val 16.
const CHARTQA_GENERATION: u64 = 16;
const DOCVQA_GENERATION: u64 = 128;
const AI2D_GENERATION: u64 = 16;
const MMMU_GENERATION: u64 = 16;

/// ChartQA's two test sets, by the row's `human_or_machine` (0: human-written questions,
/// 1: generated ones), as lmms-eval's `relaxed_human_split` / `relaxed_augmented_split`.
pub const CHARTQA_TASKS: &[&str] = &["human", "augmented"];
pub const DOCVQA_TASKS: &[&str] = &["docvqa"];
pub const AI2D_TASKS: &[&str] = &["ai2d"];
/// MMMU's 30 subjects: the dataset's configs.
pub const MMMU_SUBJECTS: &[&str] = &[
    "Accounting",
    "Agriculture",
    "Architecture_and_Engineering",
    "Art",
    "Art_Theory",
    "Basic_Medical_Science",
    "Biology",
    "Chemistry",
    "Clinical_Medicine",
    "Computer_Science",
    "Design",
    "Diagnostics_and_Laboratory_Medicine",
    "Economics",
    "Electronics",
    "Energy_and_Power",
    "Finance",
    "Geography",
    "History",
    "Literature",
    "Manage",
    "Marketing",
    "Materials",
    "Math",
    "Mechanical_Engineering",
    "Music",
    "Pharmacy",
    "Physics",
    "Psychology",
    "Public_Health",
    "Sociology",
];

/// The split of `repo` (config `config`) read from the hub cache.
fn read(
    env: &HubEnv,
    repo: &str,
    config: &str,
    split: &str,
    flag: &str,
) -> Result<Vec<Cell>, String> {
    let src = datasets::Source {
        repo,
        config,
        split,
        file: None,
        revision: "main",
    };
    datasets::read(env, src, flag)
}

/// The image in column `column` of the row (a Hugging Face `Image`).
fn image(row: &Cell, column: &str, at: &str) -> Result<EncodedImage, String> {
    crate::dataset::public::image_of(row, Some(column))
        .map_err(|e| format!("{at}: {e}"))?
        .ok_or_else(|| format!("{at}: no image in column '{column}'"))
}

/// The strings of list column `name`.
fn text_list(row: &Cell, name: &str, at: &str) -> Result<Vec<String>, String> {
    match row.get(name) {
        Some(Cell::List(items)) => Ok(items.iter().filter_map(Cell::scalar).collect()),
        _ => Err(format!(
            "{at}: no list column '{name}' (columns: {})",
            row.field_names().join(", ")
        )),
    }
}

fn question(id: String, task: &str, gold: String, prompt: String, max_tokens: u64) -> Problem {
    Problem {
        id,
        task: task.to_string(),
        ground_truth: gold,
        messages: vec![("user", prompt.clone())],
        prompt,
        max_tokens,
        stop: None,
        images: Vec::new(),
    }
}

/// `HuggingFaceM4/ChartQA`, `test` split: columns `image`, `query`, `label` (the answers),
/// `human_or_machine`. Prompt: `{query}\nAnswer the question using a single word or phrase.`
pub fn chartqa(env: &HubEnv, tasks: &[&str], flag: &str) -> Result<Vec<Problem>, String> {
    let rows = read(env, "HuggingFaceM4/ChartQA", "default", "test", flag)?;
    chartqa_problems(&rows, tasks)
}

fn chartqa_problems(rows: &[Cell], tasks: &[&str]) -> Result<Vec<Problem>, String> {
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let at = format!("HuggingFaceM4/ChartQA row {i}");
        let task = match row
            .get("human_or_machine")
            .and_then(Cell::scalar)
            .as_deref()
        {
            Some("0") => CHARTQA_TASKS[0],
            Some("1") => CHARTQA_TASKS[1],
            _ => return Err(format!("{at}: 'human_or_machine' is not 0 or 1")),
        };
        if !tasks.contains(&task) {
            continue;
        }
        let answers = text_list(row, "label", &at)?;
        if answers.is_empty() {
            return Err(format!("{at}: no answer in 'label'"));
        }
        let prompt = format!("{}\n{SHORT_ANSWER}", text(row, "query", &at)?);
        let gold = serde_json::to_string(&answers).expect("strings serialise");
        let mut p = question(
            format!("{task}-{i}"),
            task,
            gold,
            prompt,
            CHARTQA_GENERATION,
        );
        p.images = vec![image(row, "image", &at)?];
        out.push(p);
    }
    Ok(out)
}

/// `lmms-lab/DocVQA`, config `DocVQA`, `validation` split (the test split's answers are
/// withheld): columns `image`, `question`, `answers`. Prompt:
/// `{question}\nAnswer the question using a single word or phrase.`
pub fn docvqa(env: &HubEnv, flag: &str) -> Result<Vec<Problem>, String> {
    let rows = read(env, "lmms-lab/DocVQA", "DocVQA", "validation", flag)?;
    docvqa_problems(&rows)
}

fn docvqa_problems(rows: &[Cell]) -> Result<Vec<Problem>, String> {
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let at = format!("lmms-lab/DocVQA row {i}");
            let answers = text_list(row, "answers", &at)?;
            if answers.is_empty() {
                return Err(format!("{at}: no answer in 'answers'"));
            }
            let prompt = format!("{}\n{SHORT_ANSWER}", text(row, "question", &at)?);
            let gold = serde_json::to_string(&answers).expect("strings serialise");
            let mut p = question(
                format!("docvqa-{i}"),
                DOCVQA_TASKS[0],
                gold,
                prompt,
                DOCVQA_GENERATION,
            );
            p.images = vec![image(row, "image", &at)?];
            Ok(p)
        })
        .collect()
}

/// `A. first\nB. second...`
fn lettered(options: &[String]) -> String {
    options
        .iter()
        .take(26)
        .enumerate()
        .map(|(i, o)| format!("{}. {o}", char::from(b'A' + i as u8)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `lmms-lab/ai2d`, `test` split: columns `image`, `question`, `options`, `answer` (the
/// index of the right option). Prompt: `{question}\nA. ..\nB. ..\nAnswer with the option's
/// letter from the given choices directly.`; the gold is the letter.
pub fn ai2d(env: &HubEnv, flag: &str) -> Result<Vec<Problem>, String> {
    let rows = read(env, "lmms-lab/ai2d", "default", "test", flag)?;
    ai2d_problems(&rows)
}

fn ai2d_problems(rows: &[Cell]) -> Result<Vec<Problem>, String> {
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let at = format!("lmms-lab/ai2d row {i}");
            let options = text_list(row, "options", &at)?;
            let gold = row
                .get("answer")
                .and_then(Cell::scalar)
                .and_then(|a| a.trim().parse::<usize>().ok())
                .filter(|g| *g < options.len().min(26))
                .ok_or_else(|| format!("{at}: 'answer' is not the index of one of the options"))?;
            let prompt = format!(
                "{}\n{}\n{LETTER_ANSWER}",
                text(row, "question", &at)?,
                lettered(&options)
            );
            let letter = char::from(b'A' + gold as u8).to_string();
            let mut p = question(
                format!("ai2d-{i}"),
                AI2D_TASKS[0],
                letter,
                prompt,
                AI2D_GENERATION,
            );
            p.images = vec![image(row, "image", &at)?];
            Ok(p)
        })
        .collect()
}

/// `MMMU/MMMU`, one config per subject, `validation` split: columns `question`, `options`
/// (a Python list literal), `answer`, `question_type` (`multiple-choice` or `open`),
/// `image_1`..`image_7`. Prompts (lmms-eval's `construct_prompt`, `<image N>` left in the
/// text): `{question}\nA. ..\nB. ..\n\nAnswer with the option's letter from the given
/// choices directly.`, or `{question}\n\nAnswer the question using a single word or
/// phrase.`; the images are those the question and options name, in `<image N>` order.
pub fn mmmu(env: &HubEnv, subjects: &[&str], flag: &str) -> Result<Vec<Problem>, String> {
    let mut out = Vec::new();
    for subject in subjects {
        let rows = read(env, "MMMU/MMMU", subject, "validation", flag)?;
        out.extend(mmmu_problems(subject, &rows)?);
    }
    Ok(out)
}

/// The image columns `<image N>` names in `text`, distinct, in order of N.
fn image_columns(text: &str) -> Vec<String> {
    let mut found: Vec<u32> = text
        .match_indices("<image ")
        .filter_map(|(at, _)| {
            let rest = &text[at + "<image ".len()..];
            let end = rest.find('>')?;
            rest[..end].parse::<u32>().ok()
        })
        .collect();
    found.sort_unstable();
    found.dedup();
    found.into_iter().map(|n| format!("image_{n}")).collect()
}

fn mmmu_problems(subject: &str, rows: &[Cell]) -> Result<Vec<Problem>, String> {
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let at = format!("MMMU/MMMU {subject} row {i}");
            let q = text(row, "question", &at)?;
            let multiple_choice = text(row, "question_type", &at)? == "multiple-choice";
            let options = match multiple_choice {
                true => py_str_list(text(row, "options", &at)?)
                    .ok_or_else(|| format!("{at}: 'options' is not a list of strings"))?,
                false => Vec::new(),
            };
            let prompt = match multiple_choice {
                true => format!("{q}\n{}\n\n{LETTER_ANSWER}", lettered(&options)),
                false => format!("{q}\n\n{SHORT_ANSWER}"),
            };
            let gold = MmmuGold {
                multiple_choice,
                answer: text(row, "answer", &at)?.to_string(),
                options,
            };
            let mut p = question(
                format!("{subject}-{i}"),
                subject,
                gold.to_json(),
                prompt,
                MMMU_GENERATION,
            );
            p.images = image_columns(&p.prompt)
                .iter()
                .map(|column| image(row, column, &at))
                .collect::<Result<_, _>>()?;
            Ok(p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png() -> Cell {
        let img = image::RgbImage::from_pixel(2, 3, image::Rgb([1, 2, 3]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        Cell::Group(vec![
            ("bytes".into(), Cell::Bytes(out.into_inner())),
            ("path".into(), Cell::Null),
        ])
    }

    fn t(s: &str) -> Cell {
        Cell::Text(s.into())
    }

    fn list(items: &[&str]) -> Cell {
        Cell::List(items.iter().map(|s| t(s)).collect())
    }

    #[test]
    fn chartqa_rows_split_by_source() {
        let row = |q: &str, source: &str| {
            Cell::Group(vec![
                ("image".into(), png()),
                ("query".into(), t(q)),
                ("label".into(), list(&["12"])),
                ("human_or_machine".into(), Cell::Number(source.into())),
            ])
        };
        let rows = [row("How many?", "0"), row("Which year?", "1")];
        let all = chartqa_problems(&rows, CHARTQA_TASKS).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            all[0].prompt,
            "How many?\nAnswer the question using a single word or phrase."
        );
        assert_eq!(
            (all[0].task.as_str(), all[1].id.as_str()),
            ("human", "augmented-1")
        );
        assert_eq!(all[0].ground_truth, r#"["12"]"#);
        assert_eq!((all[0].images.len(), all[0].max_tokens), (1, 16));
        let human = chartqa_problems(&rows, &["human"]).unwrap();
        assert_eq!(human.len(), 1);
    }

    #[test]
    fn ai2d_prompt_letters_the_options() {
        let rows = [Cell::Group(vec![
            ("question".into(), t("Which eats grass?")),
            ("options".into(), list(&["hawk", "cow", "snake", "fox"])),
            ("answer".into(), t("1")),
            ("image".into(), png()),
        ])];
        let p = &ai2d_problems(&rows).unwrap()[0];
        assert_eq!(
            p.prompt,
            "Which eats grass?\nA. hawk\nB. cow\nC. snake\nD. fox\nAnswer with the option's letter from the given choices directly."
        );
        assert_eq!(p.ground_truth, "B");
    }

    #[test]
    fn mmmu_images_are_the_ones_named() {
        assert_eq!(
            image_columns("see <image 2> and <image 1>, again <image 2>"),
            ["image_1", "image_2"]
        );
        let rows = [Cell::Group(vec![
            ("id".into(), t("validation_Art_1")),
            ("question".into(), t("Which painting is older? <image 1>")),
            ("options".into(), t("['<image 2>', '<image 3>']")),
            ("image_1".into(), png()),
            ("image_2".into(), png()),
            ("image_3".into(), png()),
            ("image_4".into(), Cell::Null),
            ("answer".into(), t("B")),
            ("question_type".into(), t("multiple-choice")),
        ])];
        let p = &mmmu_problems("Art", &rows).unwrap()[0];
        assert_eq!(
            p.prompt,
            "Which painting is older? <image 1>\nA. <image 2>\nB. <image 3>\n\nAnswer with the option's letter from the given choices directly."
        );
        assert_eq!(p.images.len(), 3);
        assert_eq!(
            MmmuGold::parse(&p.ground_truth),
            MmmuGold {
                multiple_choice: true,
                answer: "B".into(),
                options: vec!["<image 2>".into(), "<image 3>".into()],
            }
        );
    }
}
