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
pub mod graders;
mod math;
pub mod prompts;
mod pyrandom;

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
    /// Vision (not in AIPerf): MMStar's multiple-choice questions about an image.
    Mmstar,
    /// LiveCodeBench code generation, graded by running the code.
    LcbCodegeneration,
    /// BIG-Bench Hard's 27 subtasks, with DeepEval's prompts.
    Bigbench,
}

const BUILT: &[Benchmark] = &[
    Benchmark::Gsm8k,
    Benchmark::Mmlu,
    Benchmark::MmluPro,
    Benchmark::Aime,
    Benchmark::GpqaDiamond,
    Benchmark::Mmstar,
    Benchmark::LcbCodegeneration,
    Benchmark::Bigbench,
];

/// AIPerf 0.13's other benchmarks: refused, saying this build does not have them.
const NOT_BUILT: &[&str] = &["aime24", "aime25", "hellaswag", "math_500"];

impl Benchmark {
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Gsm8k => "gsm8k",
            Benchmark::Mmlu => "mmlu",
            Benchmark::MmluPro => "mmlu_pro",
            Benchmark::Aime => "aime",
            Benchmark::GpqaDiamond => "gpqa_diamond",
            Benchmark::Mmstar => "mmstar",
            Benchmark::LcbCodegeneration => codegen::TASK,
            Benchmark::Bigbench => "bigbench",
        }
    }

    /// The benchmark called `name`, or why there is none.
    pub fn lookup(name: &str) -> Result<Benchmark, String> {
        let name = name.trim();
        if let Some(b) = BUILT.iter().find(|b| b.name().eq_ignore_ascii_case(name)) {
            return Ok(*b);
        }
        let built = BUILT
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ");
        let what = if NOT_BUILT.contains(&name.to_ascii_lowercase().as_str()) {
            "is an AIPerf benchmark that is not available in this build"
        } else {
            "is not a benchmark name"
        };
        Err(format!(
            "--accuracy-benchmark {name}: {what}; the benchmarks this build has are: {built}"
        ))
    }

    /// AIPerf's defaults for the benchmark (its plugin metadata); None when AIPerf's grader
    /// for it is not in this build (gpqa_diamond's lighteval_gpqa).
    pub fn default_grader(self) -> Option<Grader> {
        match self {
            Benchmark::Gsm8k => Some(Grader::Gsm8k),
            Benchmark::Mmlu | Benchmark::Mmstar => Some(Grader::MultipleChoice),
            Benchmark::MmluPro => Some(Grader::MmluPro),
            Benchmark::Aime => Some(Grader::Math),
            Benchmark::GpqaDiamond => None,
            Benchmark::LcbCodegeneration => Some(Grader::CodeExecution),
            Benchmark::Bigbench => Some(Grader::ExactMatch),
        }
    }

    pub fn default_n_shots(self) -> usize {
        match self {
            Benchmark::Gsm8k | Benchmark::GpqaDiamond => 0,
            Benchmark::Mmlu | Benchmark::MmluPro => 5,
            Benchmark::Aime => 8,
            Benchmark::Mmstar | Benchmark::LcbCodegeneration => 0,
            Benchmark::Bigbench => bigbench::MAX_SHOTS,
        }
    }

    /// The most few-shot examples it takes (AIME: the recipe's 8).
    pub fn max_n_shots(self) -> usize {
        match self {
            Benchmark::Aime => 8,
            // Each question has its own image: no examples.
            Benchmark::Mmstar => 0,
            // lighteval's task is zero-shot.
            Benchmark::LcbCodegeneration => 0,
            // DeepEval's prompt files hold 3 examples.
            Benchmark::Bigbench => bigbench::MAX_SHOTS,
            _ => 32,
        }
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

    /// Its tasks (subjects); one task named as the benchmark when it has none.
    pub fn tasks(self) -> &'static [&'static str] {
        match self {
            Benchmark::Gsm8k => &["gsm8k"],
            Benchmark::Mmlu => prompts::MMLU_SUBJECTS,
            Benchmark::MmluPro => prompts::MMLU_PRO_CATEGORIES,
            Benchmark::Aime => &["aime"],
            Benchmark::GpqaDiamond => &["gpqa_diamond"],
            Benchmark::Mmstar => prompts::MMSTAR_CATEGORIES,
            Benchmark::LcbCodegeneration => &[codegen::TASK],
            Benchmark::Bigbench => bigbench::TASKS,
        }
    }
}

/// The checked `--accuracy-*` flags, defaults resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyOptions {
    pub benchmark: Benchmark,
    /// The tasks asked, in the benchmark's order.
    pub tasks: Vec<&'static str>,
    pub n_shots: usize,
    pub cot: bool,
    pub grader: Grader,
    /// Sent as the first message: the user's, else the benchmark's.
    pub system_prompt: Option<String>,
    pub verbose: bool,
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
            prompts::mmlu_pro(&test, &validation, &opts.tasks, opts.n_shots, opts.cot)?
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
        Benchmark::Mmstar => {
            let src = datasets::Source {
                repo: "Lin-Chen/MMStar",
                config: "val",
                split: "val",
                file: Some("mmstar.parquet"),
                revision: "main",
            };
            prompts::mmstar(&datasets::read(env, src, &flag)?, &opts.tasks)?
        }
        Benchmark::LcbCodegeneration => codegen::load(env, &flag)?,
        Benchmark::Bigbench => bigbench::load(env, opts, &flag)?,
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
                    text,
                    input_tokens,
                    images: p.images.clone(),
                    audios: Vec::new(),
                    videos: Vec::new(),
                    max_output_tokens: Some(p.max_tokens),
                    extra_texts: Vec::new(),
                    role: None,
                    extra,
                    timestamp_ms: None,
                    delay: None,
                    own,
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
        let e = Benchmark::lookup("aime24").unwrap_err();
        assert!(e.contains("not available in this build"), "{e}");
        assert!(
            e.contains("gsm8k, mmlu, mmlu_pro, aime, gpqa_diamond, mmstar"),
            "{e}"
        );
        assert!(
            Benchmark::lookup("mmlu2")
                .unwrap_err()
                .contains("not a benchmark name")
        );
    }
}
