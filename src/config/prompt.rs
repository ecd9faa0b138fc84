//! `--system-prompt*`, `--shared-system-prompt-length`, `--user-context-prompt-length` and
//! the prefix prompt pool, into the dataset's prompt shaping, with their checks.

use super::limits;
use super::{ConfigError, config_error};
use crate::cli::prompt::PromptCorpus;
use crate::cli::{CustomDatasetType, ProfileArgs};
use crate::dataset::MAX_INPUT_TOKENS;
use crate::dataset::prompt::Corpus;
use crate::dataset::seq_dist::SeqDist;
use crate::dataset::shaping::{PrefixPool, PromptShaping};
use crate::endpoint::EndpointType;

/// Most prefixes in the pool: each is generated before the run.
const MAX_PREFIX_POOL: u64 = 100_000;

pub(super) fn prompt_shaping(
    a: &ProfileArgs,
    endpoint: EndpointType,
) -> Result<PromptShaping, ConfigError> {
    let p = &a.prompt;
    let corpus = prompt_corpus(a, endpoint)?;
    let system_text = match (&p.system_prompt, &p.system_prompt_file) {
        (Some(_), Some(_)) => {
            return Err(config_error(
                "--system-prompt and --system-prompt-file cannot be used together; give the text one way",
            ));
        }
        (Some(text), None) if text.is_empty() => {
            return Err(config_error(
                "--system-prompt: the text is empty; give the system prompt, or drop the flag",
            ));
        }
        (Some(text), None) => Some(text.clone()),
        (None, Some(path)) => Some(read_system_prompt(path)?),
        (None, None) => None,
    };
    let shared_system_tokens = length(
        "--shared-system-prompt-length",
        p.shared_system_prompt_length,
    )?;
    let user_context_tokens = length("--user-context-prompt-length", p.user_context_prompt_length)?;
    let prefix_pool = prefix_pool(p.prompt_prefix_pool_size, p.prompt_prefix_length)?;

    let verbatim = if p.system_prompt.is_some() {
        "--system-prompt"
    } else {
        "--system-prompt-file"
    };
    if system_text.is_some() && shared_system_tokens.is_some() {
        return Err(config_error(format!(
            "{verbatim} and --shared-system-prompt-length cannot be used together: both set the system message; keep one"
        )));
    }
    if system_text.is_some() && prefix_pool.is_some() {
        return Err(config_error(format!(
            "{verbatim} and --prompt-prefix-pool-size/--prompt-prefix-length cannot be used together; keep one"
        )));
    }
    if prefix_pool.is_some() {
        for (flag, given) in [
            (
                "--shared-system-prompt-length",
                shared_system_tokens.is_some(),
            ),
            (
                "--user-context-prompt-length",
                user_context_tokens.is_some(),
            ),
        ] {
            if given {
                return Err(config_error(format!(
                    "{flag} and --prompt-prefix-pool-size/--prompt-prefix-length cannot be used together: \
                     both put shared text before the prompts; keep one"
                )));
            }
        }
    }
    if user_context_tokens.is_some() && !a.typed("num_dataset_entries") {
        return Err(config_error(
            "--user-context-prompt-length requires --num-dataset-entries: each dataset entry gets its own context, \
             so give the number of entries (e.g. --num-dataset-entries 100)",
        ));
    }

    let shaping = PromptShaping {
        system_text,
        shared_system_tokens,
        user_context_tokens,
        prefix_pool,
        corpus: Corpus::Sonnet,
    };
    if shaping == PromptShaping::default() {
        return Ok(PromptShaping { corpus, ..shaping });
    }
    let given = given_flags(a);
    if endpoint == EndpointType::AudioTranscription {
        return Err(config_error(format!(
            "{given}: a transcription request has no prompt text; use --endpoint-type chat or completions"
        )));
    }
    if a.input_file.is_some() {
        let synthetic = shaping.shared_system_tokens.is_some()
            || shaping.user_context_tokens.is_some()
            || shaping.prefix_pool.is_some();
        if synthetic {
            return Err(config_error(format!(
                "{given}: these shape synthetic prompts and cannot be used with --input-file (--system-prompt can)"
            )));
        }
        if a.custom_dataset_type == Some(CustomDatasetType::MooncakeTrace) {
            return Err(config_error(format!(
                "{given} cannot be used with --custom-dataset-type mooncake_trace: trace rows may carry whole request bodies, which are sent as written"
            )));
        }
    }
    Ok(PromptShaping { corpus, ..shaping })
}

/// `--prompt-corpus`: coding and random shape synthetic prompts only.
fn prompt_corpus(a: &ProfileArgs, endpoint: EndpointType) -> Result<Corpus, ConfigError> {
    let (corpus, name) = match a.prompt.prompt_corpus {
        None | Some(PromptCorpus::Sonnet) => return Ok(Corpus::Sonnet),
        Some(PromptCorpus::Coding) => (Corpus::Coding, "coding"),
        Some(PromptCorpus::Random) => (Corpus::Random, "random"),
    };
    let refused = if a.input_file.is_some() {
        Some("--input-file (its prompts come from the file)")
    } else if a.public.public_dataset.is_some() {
        Some("--public-dataset (its prompts come from the dataset)")
    } else if endpoint.rankings_api().is_some() {
        Some("the rankings endpoint types (their queries and passages are cut from sonnet)")
    } else if endpoint == EndpointType::AudioTranscription {
        Some("--endpoint-type audio_transcription (its requests have no prompt text)")
    } else {
        None
    };
    match refused {
        Some(why) => Err(config_error(format!(
            "--prompt-corpus {name} shapes synthetic prompts and cannot be used with {why}; drop --prompt-corpus"
        ))),
        None => Ok(corpus),
    }
}

/// `--seq-dist`, parsed; refused with input files. It overrides the length flags (a
/// warning: `unused_flag_warnings`).
pub(super) fn seq_dist(a: &ProfileArgs) -> Result<Option<SeqDist>, ConfigError> {
    let Some(text) = &a.prompt.seq_dist else {
        return Ok(None);
    };
    let dist =
        SeqDist::parse(text).map_err(|e| config_error(format!("--seq-dist '{text}': {e}")))?;
    if a.input_file.is_some() {
        return Err(config_error(
            "--seq-dist shapes synthetic prompts and cannot be used with --input-file",
        ));
    }
    Ok(Some(dist))
}

/// `--random-range-ratio R`: (ratio, output mean), checked; needs --isl and --osl typed.
pub(super) fn range_ratio(a: &ProfileArgs) -> Result<Option<f64>, ConfigError> {
    let Some(r) = a.prompt.random_range_ratio else {
        return Ok(None);
    };
    if !(r.is_finite() && (0.0..1.0).contains(&r)) {
        return Err(config_error(format!(
            "--random-range-ratio: {r} is not allowed; give a ratio >= 0 and below 1 (e.g. 0.5)"
        )));
    }
    for (id, flag) in [("isl_mean", "--isl"), ("osl_mean", "--osl")] {
        if !a.typed(id) {
            return Err(config_error(format!(
                "--random-range-ratio needs {flag}: the lengths are drawn around --isl and --osl; give both"
            )));
        }
    }
    let conflicts = [
        ("seq_dist", "--seq-dist"),
        ("isl_stddev", "--isl-stddev"),
        ("osl_stddev", "--osl-stddev"),
        ("input_file", "--input-file"),
    ];
    if let Some((_, flag)) = conflicts.iter().find(|(id, _)| a.typed(id)) {
        return Err(config_error(format!(
            "--random-range-ratio cannot be used with {flag}: both set how the lengths vary; keep one"
        )));
    }
    let low = (a.isl_mean as f64 * (1.0 - r)).floor();
    if low < 1.0 {
        return Err(config_error(format!(
            "--random-range-ratio {r} with --isl {}: the shortest input would be {low} tokens; give a larger --isl or a smaller ratio",
            a.isl_mean
        )));
    }
    Ok(Some(r))
}

/// Most texts per request.
const MAX_PROMPT_BATCH: u64 = 10_000;

/// `-b/--prompt-batch-size`: texts per synthetic turn, for chat and completions.
pub(super) fn prompt_batch_size(
    a: &ProfileArgs,
    endpoint: EndpointType,
) -> Result<usize, ConfigError> {
    let b = a.prompt.prompt_batch_size;
    limits::count(
        "--prompt-batch-size",
        b,
        MAX_PROMPT_BATCH,
        "texts per request",
        "",
    )?;
    if b > 1 {
        if a.input_file.is_some() {
            return Err(config_error(format!(
                "--prompt-batch-size {b} shapes synthetic prompts and cannot be used with --input-file (give several \"texts\" in a line instead)"
            )));
        }
        if endpoint == EndpointType::AudioTranscription {
            return Err(config_error(format!(
                "--prompt-batch-size {b}: a transcription request has no prompt text; use --endpoint-type chat or completions"
            )));
        }
        if endpoint.rankings_api().is_some() {
            return Err(config_error(format!(
                "--prompt-batch-size {b}: --endpoint-type {} takes a query and passages (see --rankings-passages-mean), not a batch of texts",
                endpoint.as_str()
            )));
        }
    }
    Ok(b as usize)
}

/// The shaping flags typed, for messages.
fn given_flags(a: &ProfileArgs) -> String {
    let p = &a.prompt;
    [
        ("--system-prompt", p.system_prompt.is_some()),
        ("--system-prompt-file", p.system_prompt_file.is_some()),
        (
            "--shared-system-prompt-length",
            p.shared_system_prompt_length.is_some(),
        ),
        (
            "--user-context-prompt-length",
            p.user_context_prompt_length.is_some(),
        ),
        ("--prompt-prefix-pool-size", p.prompt_prefix_pool_size > 0),
        ("--prompt-prefix-length", p.prompt_prefix_length > 0),
    ]
    .into_iter()
    .filter(|(_, given)| *given)
    .map(|(flag, _)| flag)
    .collect::<Vec<_>>()
    .join("/")
}

fn read_system_prompt(path: &std::path::Path) -> Result<String, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| {
        config_error(format!(
            "--system-prompt-file: cannot read '{}': {e}",
            path.display()
        ))
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        config_error(format!(
            "--system-prompt-file: '{}' is not UTF-8 text (invalid byte at offset {}); save it as UTF-8",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    if text.is_empty() {
        return Err(config_error(format!(
            "--system-prompt-file: '{}' is empty; write the system prompt into it",
            path.display()
        )));
    }
    Ok(text)
}

/// A token length of 1 or more, when given.
fn length(flag: &str, value: Option<u64>) -> Result<Option<usize>, ConfigError> {
    match value {
        None => Ok(None),
        Some(n) => {
            limits::count(flag, n, MAX_INPUT_TOKENS, "tokens", "")?;
            Ok(Some(n as usize))
        }
    }
}

/// Both flags or neither: one without the other would do nothing.
fn prefix_pool(size: u64, tokens: u64) -> Result<Option<PrefixPool>, ConfigError> {
    match (size, tokens) {
        (0, 0) => Ok(None),
        (0, l) => Err(config_error(format!(
            "--prompt-prefix-length {l} needs --prompt-prefix-pool-size: give the number of prefixes (e.g. 1), or drop it"
        ))),
        (p, 0) => Err(config_error(format!(
            "--prompt-prefix-pool-size {p} needs --prompt-prefix-length: give the tokens per prefix (e.g. 128), or drop it"
        ))),
        (p, l) => {
            limits::count(
                "--prompt-prefix-pool-size",
                p,
                MAX_PREFIX_POOL,
                "prefixes",
                "",
            )?;
            limits::count("--prompt-prefix-length", l, MAX_INPUT_TOKENS, "tokens", "")?;
            Ok(Some(PrefixPool {
                size: p as usize,
                tokens: l as usize,
            }))
        }
    }
}
