//! Accuracy mode (`--accuracy-benchmark`): a benchmark's questions are the run's requests,
//! timed like any other, and each reply is graded against the question's answer, as
//! AIPerf's accuracy mode does.
//!
//! `datasets` reads a benchmark's split from the Hugging Face cache, `prompts` turns rows
//! into the questions AIPerf asks, `graders` checks replies, `export` grades the records
//! as they arrive and writes `accuracy_export.jsonl`, `accuracy_results.csv` and the
//! console table.

pub mod bigbench;
pub mod codegen;
pub mod datasets;
pub mod export;
mod extractive;
pub mod graders;
mod math;
mod mathexpr;
pub mod prompts;
mod pyrandom;
pub mod vision;
pub mod vision_graders;

use std::collections::HashMap;

use serde_json::{Value, json};

pub use self::graders::Grader;
use crate::dataset::{
    ChatMessages, Conversation, Dataset, DatasetSampling, EncodedImage, Entry, OwnRequest,
};
use crate::tokenizer::{HubEnv, Tokenizer};

/// A benchmark this build grades.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    Gsm8k,
    Mmlu,
    MmluPro,
    Aime,
    GpqaDiamond,
    Aime24,
    Aime25,
    Math500,
    Hellaswag,
    /// Vision (not in AIPerf): MMStar's multiple-choice questions about an image.
    Mmstar,
    /// LiveCodeBench code generation, graded by running the code.
    LcbCodegeneration,
    /// BIG-Bench Hard's 27 subtasks, with DeepEval's prompts.
    Bigbench,
    /// Vision (not in AIPerf): ChartQA, graded by relaxed accuracy.
    ChartQa,
    /// Vision (not in AIPerf): DocVQA's validation split, graded by ANLS.
    DocVqa,
    /// Vision (not in AIPerf): AI2D's diagram questions, multiple choice.
    Ai2d,
    /// Vision (not in AIPerf): MMMU's validation split, graded by MMMU's answer parsers.
    Mmmu,
}

const BUILT: &[Benchmark] = &[
    Benchmark::Gsm8k,
    Benchmark::Mmlu,
    Benchmark::MmluPro,
    Benchmark::Aime,
    Benchmark::GpqaDiamond,
    Benchmark::Aime24,
    Benchmark::Aime25,
    Benchmark::Math500,
    Benchmark::Hellaswag,
    Benchmark::Mmstar,
    Benchmark::LcbCodegeneration,
    Benchmark::Bigbench,
    Benchmark::ChartQa,
    Benchmark::DocVqa,
    Benchmark::Ai2d,
    Benchmark::Mmmu,
];

impl Benchmark {
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Gsm8k => "gsm8k",
            Benchmark::Mmlu => "mmlu",
            Benchmark::MmluPro => "mmlu_pro",
            Benchmark::Aime => "aime",
            Benchmark::GpqaDiamond => "gpqa_diamond",
            Benchmark::Aime24 => "aime24",
            Benchmark::Aime25 => "aime25",
            Benchmark::Math500 => "math_500",
            Benchmark::Hellaswag => "hellaswag",
            Benchmark::Mmstar => "mmstar",
            Benchmark::LcbCodegeneration => codegen::TASK,
            Benchmark::Bigbench => "bigbench",
            Benchmark::ChartQa => "chartqa",
            Benchmark::DocVqa => "docvqa",
            Benchmark::Ai2d => "ai2d",
            Benchmark::Mmmu => "mmmu",
        }
    }

    /// The names of the benchmarks this build has, comma-separated.
    pub fn built_names() -> String {
        BUILT
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The benchmark called `name`, or why there is none.
    pub fn lookup(name: &str) -> Result<Benchmark, String> {
        let name = name.trim();
        if let Some(b) = BUILT.iter().find(|b| b.name().eq_ignore_ascii_case(name)) {
            return Ok(*b);
        }
        let built = Benchmark::built_names();
        Err(format!(
            "--accuracy-benchmark {name}: is not a benchmark name; the benchmarks are: {built}"
        ))
    }

    /// AIPerf's grader for the benchmark (its plugin metadata).
    pub fn default_grader(self) -> Grader {
        match self {
            Benchmark::Gsm8k => Grader::Gsm8k,
            Benchmark::Mmlu | Benchmark::Mmstar => Grader::MultipleChoice,
            Benchmark::MmluPro => Grader::MmluPro,
            Benchmark::Aime => Grader::Math,
            Benchmark::GpqaDiamond => Grader::LightevalGpqa,
            Benchmark::Aime24 | Benchmark::Aime25 => Grader::LightevalExpr,
            Benchmark::Math500 => Grader::LightevalLatex,
            Benchmark::Hellaswag => Grader::ExactMatch,
            Benchmark::LcbCodegeneration => Grader::CodeExecution,
            Benchmark::Bigbench => Grader::ExactMatch,
            Benchmark::ChartQa => Grader::RelaxedAccuracy,
            Benchmark::DocVqa => Grader::Anls,
            Benchmark::Ai2d => Grader::MultipleChoice,
            Benchmark::Mmmu => Grader::Mmmu,
        }
    }

    pub fn default_n_shots(self) -> usize {
        match self {
            Benchmark::Gsm8k | Benchmark::GpqaDiamond => 0,
            Benchmark::Mmlu | Benchmark::MmluPro => 5,
            Benchmark::Aime => 8,
            Benchmark::Hellaswag => 10,
            Benchmark::Aime24
            | Benchmark::Aime25
            | Benchmark::Math500
            | Benchmark::Mmstar
            | Benchmark::LcbCodegeneration => 0,
            Benchmark::Bigbench => bigbench::MAX_SHOTS,
            Benchmark::ChartQa | Benchmark::DocVqa | Benchmark::Ai2d | Benchmark::Mmmu => 0,
        }
    }

    /// The most few-shot examples it takes (AIME: the recipe's 8).
    pub fn max_n_shots(self) -> usize {
        match self {
            Benchmark::Aime => 8,
            // DeepEval's limit.
            Benchmark::Hellaswag => 15,
            // Each question has its own image: no examples.
            Benchmark::Mmstar => 0,
            // lighteval's task is zero-shot.
            Benchmark::LcbCodegeneration => 0,
            // DeepEval's prompt files hold 3 examples.
            Benchmark::Bigbench => bigbench::MAX_SHOTS,
            Benchmark::ChartQa | Benchmark::DocVqa | Benchmark::Ai2d | Benchmark::Mmmu => 0,
            _ => 32,
        }
    }

    /// Whether the benchmark has one fixed zero-shot prompt (lighteval's tasks), so that
    /// `--accuracy-n-shots` and `--accuracy-enable-cot` change nothing (and are warned about).
    pub fn fixed_prompt(self) -> bool {
        matches!(
            self,
            Benchmark::Gsm8k
                | Benchmark::GpqaDiamond
                | Benchmark::Aime24
                | Benchmark::Aime25
                | Benchmark::Math500
        )
    }

    /// Chain of thought unless told otherwise: MMLU-Pro, AIME and BIG-Bench Hard.
    pub fn default_cot(self) -> bool {
        matches!(
            self,
            Benchmark::MmluPro | Benchmark::Aime | Benchmark::Bigbench
        )
    }

    /// The system prompt sent when none is given (AIPerf's plugin metadata).
    pub fn default_system_prompt(self) -> Option<&'static str> {
        match self {
            Benchmark::Aime => {
                Some("Please reason step by step, and put your final answer within \\boxed{}.")
            }
            _ => None,
        }
    }

    /// Its tasks (subjects); one task named as the benchmark when it has none; empty when
    /// they are read from the data (HellaSwag's activities, checked when it is loaded).
    pub fn tasks(self) -> &'static [&'static str] {
        match self {
            Benchmark::Gsm8k => &["gsm8k"],
            Benchmark::Mmlu => prompts::MMLU_SUBJECTS,
            Benchmark::MmluPro => prompts::MMLU_PRO_CATEGORIES,
            Benchmark::Aime => &["aime"],
            Benchmark::GpqaDiamond => &["gpqa_diamond"],
            Benchmark::Aime24 => &["aime24"],
            Benchmark::Aime25 => &["aime25"],
            Benchmark::Math500 => prompts::MATH_SUBJECTS,
            Benchmark::Hellaswag => &[],
            Benchmark::Mmstar => prompts::MMSTAR_CATEGORIES,
            Benchmark::LcbCodegeneration => &[codegen::TASK],
            Benchmark::Bigbench => bigbench::TASKS,
            Benchmark::ChartQa => vision::CHARTQA_TASKS,
            Benchmark::DocVqa => vision::DOCVQA_TASKS,
            Benchmark::Ai2d => vision::AI2D_TASKS,
            Benchmark::Mmmu => vision::MMMU_SUBJECTS,
        }
    }

    /// Its questions carry images (sent only to the chat endpoint, zero-shot).
    pub fn has_images(self) -> bool {
        matches!(
            self,
            Benchmark::Mmstar
                | Benchmark::ChartQa
                | Benchmark::DocVqa
                | Benchmark::Ai2d
                | Benchmark::Mmmu
        )
    }
}

/// The checked `--accuracy-*` flags, defaults resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyOptions {
    pub benchmark: Benchmark,
    /// The tasks asked, in the benchmark's order; empty for all of a benchmark whose tasks
    /// are read from the data.
    pub tasks: Vec<String>,
    pub n_shots: usize,
    pub cot: bool,
    pub grader: Grader,
    /// Sent as the first message: the user's, else the benchmark's.
    pub system_prompt: Option<String>,
    pub verbose: bool,
}

impl AccuracyOptions {
    pub fn task_names(&self) -> Vec<&str> {
        self.tasks.iter().map(String::as_str).collect()
    }
}

/// One question, as sent and as graded.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The question's id, sent as the conversation id (`<task>-<row>`).
    pub id: String,
    pub task: String,
    pub ground_truth: String,
    /// The chat messages (role, content), few-shot turns included.
    pub messages: Vec<(&'static str, String)>,
    /// The same as one text, for the completions endpoint.
    pub prompt: String,
    pub max_tokens: u64,
    /// Stop sequences (MMLU without chain of thought stops at the first newline).
    pub stop: Option<Vec<String>>,
    /// The question's images, sent after its text as the chat message's image parts.
    pub images: Vec<EncodedImage>,
}

/// The run's questions, found by the id each request carries.
#[derive(Debug)]
pub struct Questions {
    pub problems: Vec<Problem>,
    by_id: HashMap<String, usize>,
}

impl Questions {
    pub fn new(problems: Vec<Problem>) -> Questions {
        let by_id = problems
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id.clone(), i))
            .collect();
        Questions { problems, by_id }
    }

    /// The position of the question `id` in `problems`.
    pub fn index(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }
}

/// Reads the benchmark's questions from the Hugging Face cache (downloading them the first
/// time unless `HF_HUB_OFFLINE` is set).
pub fn load(opts: &AccuracyOptions, env: &HubEnv) -> Result<Vec<Problem>, String> {
    let flag = format!("--accuracy-benchmark {}", opts.benchmark.name());
    let problems = match opts.benchmark {
        Benchmark::Gsm8k => {
            let src = datasets::Source {
                repo: "openai/gsm8k",
                config: "main",
                split: "test",
                file: None,
                revision: "main",
            };
            prompts::gsm8k(&datasets::read(env, src, &flag)?)?
        }
        Benchmark::Mmlu => {
            let mut all = Vec::new();
            for subject in &opts.tasks {
                let src = |split| datasets::Source {
                    repo: "lighteval/mmlu",
                    config: subject,
                    split,
                    file: None,
                    revision: "main",
                };
                let test = datasets::read(env, src("test"), &flag)?;
                let dev = match opts.n_shots {
                    0 => Vec::new(),
                    _ => datasets::read(env, src("dev"), &flag)?,
                };
                all.extend(prompts::mmlu(subject, &test, &dev, opts.n_shots, opts.cot)?);
            }
            all
        }
        Benchmark::MmluPro => {
            let src = |split| datasets::Source {
                repo: "TIGER-Lab/MMLU-Pro",
                config: "default",
                split,
                file: None,
                revision: "main",
            };
            let test = datasets::read(env, src("test"), &flag)?;
            let validation = match opts.n_shots {
                0 => Vec::new(),
                _ => datasets::read(env, src("validation"), &flag)?,
            };
            prompts::mmlu_pro(
                &test,
                &validation,
                &opts.task_names(),
                opts.n_shots,
                opts.cot,
            )?
        }
        Benchmark::Aime => {
            let src = datasets::Source {
                repo: "Maxwell-Jia/AIME_2024",
                config: "default",
                split: "train",
                file: None,
                revision: "main",
            };
            prompts::aime(&datasets::read(env, src, &flag)?, opts.n_shots, opts.cot)?
        }
        Benchmark::GpqaDiamond => {
            // The repository holds CSV files: its Parquet conversion is read.
            let src = datasets::Source {
                repo: "Idavidrein/gpqa",
                config: "gpqa_diamond",
                split: "train",
                file: None,
                revision: "refs/convert/parquet",
            };
            prompts::gpqa_diamond(&datasets::read(env, src, &flag)?)?
        }
        Benchmark::Aime24 | Benchmark::Aime25 | Benchmark::Math500 => {
            let (repo, split, gold, by_subject) = match opts.benchmark {
                Benchmark::Aime24 => ("HuggingFaceH4/aime_2024", "train", "answer", false),
                Benchmark::Aime25 => ("yentinglin/aime_2025", "train", "answer", false),
                _ => ("HuggingFaceH4/MATH-500", "test", "solution", true),
            };
            let src = datasets::Source {
                repo,
                config: "default",
                split,
                file: None,
                revision: "main",
            };
            let rows = datasets::read(env, src, &flag)?;
            let tasks = if by_subject { &opts.tasks[..] } else { &[] };
            prompts::bare_problems(&rows, repo, opts.benchmark.name(), gold, by_subject, tasks)?
        }
        Benchmark::Hellaswag => {
            let src = |split| datasets::Source {
                repo: "Rowan/hellaswag",
                config: "default",
                split,
                file: None,
                revision: "main",
            };
            let train = match opts.n_shots {
                0 => Vec::new(),
                _ => datasets::read(env, src("train"), &flag)?,
            };
            let validation = datasets::read(env, src("validation"), &flag)?;
            prompts::hellaswag(&train, &validation, &opts.tasks, opts.n_shots)?
        }
        Benchmark::Mmstar => {
            let src = datasets::Source {
                repo: "Lin-Chen/MMStar",
                config: "val",
                split: "val",
                file: Some("mmstar.parquet"),
                revision: "main",
            };
            prompts::mmstar(&datasets::read(env, src, &flag)?, &opts.task_names())?
        }
        Benchmark::LcbCodegeneration => codegen::load(env, &flag)?,
        Benchmark::Bigbench => bigbench::load(env, opts, &flag)?,
        Benchmark::ChartQa => vision::chartqa(env, &opts.task_names(), &flag)?,
        Benchmark::DocVqa => vision::docvqa(env, &flag)?,
        Benchmark::Ai2d => vision::ai2d(env, &flag)?,
        Benchmark::Mmmu => vision::mmmu(env, &opts.task_names(), &flag)?,
    };
    if problems.is_empty() {
        return Err(format!(
            "{flag}: the dataset has no questions (tasks: {})",
            opts.tasks.join(", ")
        ));
    }
    Ok(problems)
}

/// The questions as single-turn conversations, in dataset order, each with its question id.
/// Chat: the messages (after the system prompt); completions: one prompt text (the system
/// prompt, a blank line, the prompt), as AIPerf sends them.
pub fn dataset(
    problems: &[Problem],
    opts: &AccuracyOptions,
    chat: bool,
    tokenizer: &Tokenizer,
) -> Dataset {
    let system = opts.system_prompt.as_deref().filter(|s| !s.is_empty());
    let conversations = problems
        .iter()
        .map(|p| {
            let mut extra = serde_json::Map::new();
            if let Some(stop) = &p.stop {
                extra.insert("stop".into(), json!(stop));
            }
            let (text, own) = if !p.images.is_empty() {
                // One user message of text and image parts, built as for synthetic images.
                (p.prompt.clone(), None)
            } else if chat {
                let list: Vec<Value> = system
                    .map(|s| ("system", s))
                    .into_iter()
                    .chain(p.messages.iter().map(|(r, c)| (*r, c.as_str())))
                    .map(|(role, content)| json!({"role": role, "content": content}))
                    .collect();
                let text = system
                    .into_iter()
                    .chain(p.messages.iter().map(|(_, c)| c.as_str()))
                    .collect::<Vec<_>>()
                    .join(" ");
                let own = OwnRequest::Messages(ChatMessages { list, delta: false });
                (text, Some(own))
            } else {
                let text = match system {
                    Some(s) => format!("{s}\n\n{}", p.prompt),
                    None => p.prompt.clone(),
                };
                (text, None)
            };
            let input_tokens = tokenizer.count(&text) as u64;
            Conversation {
                session_id: Some(p.id.clone()),
                system: system.filter(|_| !p.images.is_empty()).map(String::from),
                context: None,
                turns: vec![Entry {
                    extra,
                    own,
                    ..Entry::synthetic(text, input_tokens, p.images.clone(), Some(p.max_tokens))
                }],
            }
        })
        .collect();
    Dataset {
        conversations,
        // Questions go out in dataset order (AIPerf requires sequential sampling).
        sampling: DatasetSampling::Sequential,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_names() {
        assert_eq!(Benchmark::lookup("GSM8K").unwrap(), Benchmark::Gsm8k);
        assert_eq!(Benchmark::lookup("bigbench").unwrap(), Benchmark::Bigbench);
        assert_eq!(Benchmark::lookup("aime24").unwrap(), Benchmark::Aime24);
        let e = Benchmark::lookup("mmlu2").unwrap_err();
        assert!(e.contains("not a benchmark name"), "{e}");
        assert!(e.contains(&Benchmark::built_names()), "{e}");
        assert!(
            e.contains("math_500") && e.contains("lcb_codegeneration"),
            "{e}"
        );
    }
}
