//! `--accuracy-*`: grade the model on a benchmark's questions while the run measures it.

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct AccuracyArgs {
    /// Grade the model on a benchmark while profiling: the benchmark's questions are the
    /// run's requests (in dataset order) and each reply is graded. AIPerf's gsm8k, mmlu,
    /// mmlu_pro, aime, aime24, aime25, math_500, gpqa_diamond, hellaswag, bigbench (DeepEval's
    /// prompt files, read from an installed deepeval) and lcb_codegeneration (code run in a
    /// sandboxed python3), and the vision sets mmstar, chartqa, docvqa, ai2d and mmmu (images
    /// sent as image parts, chat only; not in AIPerf). Datasets are read from the Hugging Face
    /// cache ($HF_HOME/hub or $HF_HUB_CACHE), downloaded the first time.
    #[arg(long, value_name = "NAME", help_heading = "Accuracy")]
    pub accuracy_benchmark: Option<String>,

    /// Only these tasks (subjects) of the benchmark, comma-separated or repeated, e.g.
    /// `abstract_algebra,anatomy`; `all` alone (or none given) is every task.
    #[arg(
        long,
        value_name = "TASK",
        value_delimiter = ',',
        help_heading = "Accuracy"
    )]
    pub accuracy_tasks: Vec<String>,

    /// Few-shot examples in each prompt (0 to 32); the benchmark's default when not given
    /// (mmlu and mmlu_pro 5, aime 8 at most 8, hellaswag 10 at most 15; the lighteval sets
    /// gsm8k, aime24, aime25, math_500 and gpqa_diamond are zero-shot).
    #[arg(long, value_name = "N", help_heading = "Accuracy")]
    pub accuracy_n_shots: Option<u32>,

    /// Ask for chain-of-thought reasoning in the prompt (the benchmark's default when
    /// neither this nor --accuracy-no-enable-cot is given: on for mmlu_pro and aime, off for mmlu).
    #[arg(
        long,
        overrides_with = "accuracy_no_enable_cot",
        help_heading = "Accuracy"
    )]
    pub accuracy_enable_cot: bool,

    /// No chain-of-thought instruction in the prompt.
    #[arg(
        long,
        overrides_with = "accuracy_enable_cot",
        help_heading = "Accuracy"
    )]
    pub accuracy_no_enable_cot: bool,

    /// The grader, in place of the benchmark's own: lighteval_gsm8k, multiple_choice,
    /// mmlu_pro, exact_match, math (AIPerf's, as it runs without sympy), lighteval_expr,
    /// lighteval_latex, lighteval_gpqa (lighteval's extractive match, values compared by
    /// this build's own parser, not sympy), code_execution (LiveCodeBench's test cases), and
    /// for the vision sets relaxed_accuracy (ChartQA), anls (DocVQA) and mmmu.
    #[arg(long, value_name = "GRADER", help_heading = "Accuracy")]
    pub accuracy_grader: Option<String>,

    /// A system message sent before each question (in place of the benchmark's own: aime
    /// asks to reason step by step and box the answer).
    #[arg(long, value_name = "TEXT", help_heading = "Accuracy")]
    pub accuracy_system_prompt: Option<String>,

    /// Log every graded reply: the answer extracted, the expected one and why it was
    /// counted right, wrong or unparsed.
    #[arg(long, help_heading = "Accuracy")]
    pub accuracy_verbose: bool,
}
