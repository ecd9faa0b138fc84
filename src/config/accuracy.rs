//! `--accuracy-*` into the accuracy options, with AIPerf's checks: the benchmark and grader
//! exist (and are built here), few-shot count at most 32, tasks known, sequential order.

use super::{ConfigError, config_error};
use crate::accuracy::{AccuracyOptions, Benchmark, Grader};
use crate::cli::ProfileArgs;
use crate::cli::dataset::DatasetSamplingStrategy;
use crate::dataset::{SyntheticOptions, TurnOptions};
use crate::endpoint::EndpointType;

/// AIPerf's limit on `--accuracy-n-shots`.
const MAX_SHOTS: u32 = 32;

pub(super) fn accuracy(
    a: &ProfileArgs,
    synthetic: &SyntheticOptions,
    endpoint: EndpointType,
    fixed_schedule: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<AccuracyOptions>, ConfigError> {
    let acc = &a.accuracy;
    let enable_cot = match (acc.accuracy_enable_cot, acc.accuracy_no_enable_cot) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let Some(name) = &acc.accuracy_benchmark else {
        // Without a benchmark these would do nothing: say so instead (as AIPerf does).
        let given: Vec<&str> = [
            (!acc.accuracy_tasks.is_empty(), "--accuracy-tasks"),
            (acc.accuracy_n_shots.is_some(), "--accuracy-n-shots"),
            (enable_cot.is_some(), "--accuracy-enable-cot"),
            (acc.accuracy_grader.is_some(), "--accuracy-grader"),
            (
                acc.accuracy_system_prompt.is_some(),
                "--accuracy-system-prompt",
            ),
            (acc.accuracy_verbose, "--accuracy-verbose"),
        ]
        .into_iter()
        .filter_map(|(set, flag)| set.then_some(flag))
        .collect();
        if given.is_empty() {
            return Ok(None);
        }
        return Err(config_error(format!(
            "Accuracy options {} were set but --accuracy-benchmark is not; accuracy mode needs \
             --accuracy-benchmark to select a benchmark (this build has {})",
            given.join(", "),
            Benchmark::built_names()
        )));
    };
    let benchmark = Benchmark::lookup(name).map_err(config_error)?;
    let flag = format!("--accuracy-benchmark {}", benchmark.name());
    let grader = match &acc.accuracy_grader {
        Some(g) => Grader::lookup(g).map_err(config_error)?,
        None => benchmark.default_grader(),
    };
    if benchmark == Benchmark::LcbCodegeneration {
        // As AIPerf: lighteval's task is the whole split, zero-shot, one prompt.
        let refused = [
            (
                !acc.accuracy_tasks.is_empty(),
                "--accuracy-tasks: the whole release is asked (select the release with AIPERF_ACCURACY_LCB_RELEASE_TAG)",
            ),
            (
                acc.accuracy_n_shots.is_some_and(|n| n > 0),
                "--accuracy-n-shots: lighteval's task is zero-shot",
            ),
            (
                enable_cot == Some(true),
                "--accuracy-enable-cot: lighteval's prompt has no chain-of-thought trigger; the reply reasons before its code block as it likes",
            ),
        ];
        if let Some((_, why)) = refused.iter().find(|(given, _)| *given) {
            return Err(config_error(format!("{flag}: {why}")));
        }
    }
    if let Some(n) = acc.accuracy_n_shots
        && n > MAX_SHOTS
    {
        return Err(config_error(format!(
            "--accuracy-n-shots {n}: at most {MAX_SHOTS} few-shot examples"
        )));
    }
    if let Some(n) = acc.accuracy_n_shots
        && n as usize > benchmark.max_n_shots()
    {
        return Err(config_error(match benchmark.max_n_shots() {
            0 => format!(
                "--accuracy-n-shots {n}: {flag} is zero-shot (each question has its own image)"
            ),
            max => format!("--accuracy-n-shots {n}: {flag} takes at most {max} few-shot examples"),
        }));
    }
    if benchmark.has_images() && enable_cot == Some(true) {
        return Err(config_error(match benchmark.default_grader() {
            Grader::MultipleChoice | Grader::Mmmu => format!(
                "--accuracy-enable-cot: {flag} asks for the letter directly; ask for reasoning with --accuracy-system-prompt and --accuracy-grader mmlu_pro"
            ),
            _ => format!(
                "--accuracy-enable-cot: {flag} asks for a single word or phrase; its grader compares the whole reply"
            ),
        }));
    }
    let tasks = tasks(benchmark, &acc.accuracy_tasks)?;
    let n_shots = acc
        .accuracy_n_shots
        .map_or(benchmark.default_n_shots(), |n| n as usize);
    let fixed_prompt = benchmark.fixed_prompt();
    if fixed_prompt {
        // lighteval's tasks are zero-shot with one prompt: AIPerf ignores these; say so.
        if n_shots > 0 {
            warnings.push(format!(
                "--accuracy-n-shots {n_shots} is ignored: {flag} is zero-shot (lighteval's task has no few-shot examples)"
            ));
        }
        if enable_cot == Some(true) {
            warnings.push(format!(
                "--accuracy-enable-cot is ignored: {flag} has one prompt, as lighteval's; ask for reasoning with --accuracy-system-prompt"
            ));
        }
    }
    if benchmark == Benchmark::Hellaswag && enable_cot == Some(true) {
        warnings.push(format!(
            "--accuracy-enable-cot is ignored: {flag} has no chain-of-thought prompt (DeepEval's HellaSwag)"
        ));
    }
    // Zero-shot prompts take no examples; those and HellaSwag's have no reasoning variant.
    let n_shots = if fixed_prompt { 0 } else { n_shots };
    let cot = !fixed_prompt
        && benchmark != Benchmark::Hellaswag
        && enable_cot.unwrap_or(benchmark.default_cot());
    if benchmark.has_images() && endpoint != EndpointType::Chat {
        return Err(config_error(format!(
            "{flag}: its questions carry images, which need --endpoint-type chat, not {}",
            endpoint.as_str()
        )));
    }
    if !matches!(endpoint, EndpointType::Chat | EndpointType::Completions) {
        return Err(config_error(format!(
            "{flag}: accuracy mode sends the questions to --endpoint-type chat or completions, not {}",
            endpoint.as_str()
        )));
    }
    for (given, other) in [
        (a.input_file.is_some(), "--input-file"),
        (a.public.public_dataset.is_some(), "--public-dataset"),
    ] {
        if given {
            return Err(config_error(format!(
                "{flag} and {other} both give the requests; use one of them"
            )));
        }
    }
    let media = synthetic.images_enabled()
        || synthetic.media.audio.is_some()
        || synthetic.media.video.is_some();
    if media {
        return Err(config_error(format!(
            "--image-*/--audio-*/--video-*: synthetic media cannot be sent with {flag}; its questions are sent as the benchmark has them"
        )));
    }
    if synthetic.turns != TurnOptions::default() {
        return Err(config_error(format!(
            "--conversation-turn-*: these shape synthetic conversations; {flag} sends one turn per question"
        )));
    }
    if fixed_schedule {
        return Err(config_error(format!(
            "{flag}: accuracy mode requires sequential request order; fixed-schedule timing is not supported in accuracy mode"
        )));
    }
    if let Some(s) = a.dataset.dataset_sampling_strategy
        && s != DatasetSamplingStrategy::Sequential
    {
        return Err(config_error(format!(
            "{flag}: accuracy mode requires sequential request order; '{}' sampling is not supported; use --dataset-sampling-strategy sequential",
            format!("{s:?}").to_lowercase()
        )));
    }
    for (id, what) in [
        ("isl_mean", "--synthetic-input-tokens-mean/--isl"),
        ("osl_mean", "--output-tokens-mean/--osl"),
        ("num_dataset_entries", "--num-dataset-entries"),
    ] {
        if a.typed(id) {
            warnings.push(format!(
                "{what} is ignored: the requests are {flag}'s questions, each with the benchmark's output limit"
            ));
        }
    }
    Ok(Some(AccuracyOptions {
        benchmark,
        tasks,
        n_shots,
        cot,
        grader,
        system_prompt: acc
            .accuracy_system_prompt
            .clone()
            .or_else(|| benchmark.default_system_prompt().map(String::from)),
        verbose: acc.accuracy_verbose,
    }))
}

/// The tasks asked: all without `--accuracy-tasks` (or with `all`), else each one named,
/// known to the benchmark, in the order given.
fn tasks(benchmark: Benchmark, given: &[String]) -> Result<Vec<String>, ConfigError> {
    let known = benchmark.tasks();
    let given: Vec<&str> = given
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .collect();
    let all = given.iter().any(|t| t.eq_ignore_ascii_case("all"));
    if all && given.len() > 1 {
        return Err(config_error(format!(
            "--accuracy-tasks {}: 'all' cannot be mixed with task names; give 'all' alone (or no --accuracy-tasks) for every task, or list the tasks",
            given.join(",")
        )));
    }
    if given.is_empty() || all {
        return Ok(known.iter().map(|t| t.to_string()).collect());
    }
    if known.is_empty() {
        // Read from the data: checked when the benchmark is loaded.
        return Ok(given.iter().map(|t| t.to_string()).collect());
    }
    let mut out: Vec<String> = Vec::new();
    for t in given {
        let Some(k) = known.iter().find(|k| **k == t) else {
            let list = if known.len() > 8 {
                format!("{}, ... ({} in all)", known[..8].join(", "), known.len())
            } else {
                known.join(", ")
            };
            return Err(config_error(format!(
                "--accuracy-tasks {t}: not a task of {}; its tasks are: {list}",
                benchmark.name()
            )));
        };
        if !out.iter().any(|o| o == k) {
            out.push(k.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_checked() {
        assert_eq!(tasks(Benchmark::Mmlu, &[]).unwrap().len(), 57);
        assert_eq!(
            tasks(Benchmark::Mmlu, &["anatomy".into(), "anatomy".into()]).unwrap(),
            vec!["anatomy"]
        );
        let e = tasks(Benchmark::Mmlu, &["anatomyy".into()]).unwrap_err().0;
        assert!(
            e.contains("not a task of mmlu") && e.contains("57 in all"),
            "{e}"
        );
        assert_eq!(
            tasks(Benchmark::Gsm8k, &["all".into()]).unwrap(),
            vec!["gsm8k"]
        );
    }
}
