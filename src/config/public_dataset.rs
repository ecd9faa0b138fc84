//! `--public-dataset`, `--hf-subset` and `--dataset-filter` into the dataset's options, and
//! the flags that cannot go with them.

use crate::cli::ProfileArgs;
use crate::dataset::public::{self, PublicOptions, Shape};
use crate::dataset::{SyntheticOptions, TurnOptions};
use crate::endpoint::EndpointType;

use super::*;

/// The public dataset to read, with as many rows as can be sent (`rows`); warnings for the
/// synthetic-prompt flags it makes useless.
pub(super) fn public_options(
    a: &ProfileArgs,
    synthetic: &SyntheticOptions,
    endpoint_type: EndpointType,
    rows: usize,
    warnings: &mut Vec<String>,
) -> Result<Option<PublicOptions>, ConfigError> {
    let p = &a.public;
    let Some(name) = &p.public_dataset else {
        if p.hf_subset.is_some() {
            return Err(config_error(
                "--hf-subset needs --public-dataset: it picks the subset of that dataset",
            ));
        }
        if !p.dataset_filter.is_empty() {
            return Err(config_error(
                "--dataset-filter needs --public-dataset: it keeps the rows of that dataset whose column equals the value",
            ));
        }
        return Ok(None);
    };
    let spec = public::lookup(name).map_err(config_error)?;
    if a.input_file.is_some() {
        return Err(config_error(format!(
            "--public-dataset {} and --input-file both give the requests; use one of them",
            spec.name
        )));
    }
    if spec.shape == Shape::ShareGpt && p.hf_subset.is_some() {
        return Err(config_error(
            "--hf-subset: ShareGPT is one JSON file without subsets; drop --hf-subset",
        ));
    }
    if let Some(s) = &p.hf_subset
        && (s.trim().is_empty() || s.contains(['/', '\\']) || s.starts_with('.'))
    {
        return Err(config_error(format!(
            "--hf-subset '{s}': not a subset name; give a config name of the dataset, e.g. sharegpt4o"
        )));
    }
    let filters = p
        .dataset_filter
        .iter()
        .map(|f| public::parse_filter(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(config_error)?;
    if synthetic.images_enabled() {
        return Err(config_error(format!(
            "--image-width-mean/--image-height-mean: synthetic images cannot be used with --public-dataset {}; its rows give the images",
            spec.name
        )));
    }
    if synthetic.media.audio.is_some() || synthetic.media.video.is_some() {
        return Err(config_error(format!(
            "--audio-*/--video-*: synthetic audio and video cannot be used with --public-dataset {}; drop them",
            spec.name
        )));
    }
    if synthetic.turns != TurnOptions::default() {
        return Err(config_error(format!(
            "--conversation-turn-*: these shape synthetic conversations; --public-dataset {} sends one turn per row",
            spec.name
        )));
    }
    let pr = &a.prompt;
    for (given, flag) in [
        (pr.prompt_batch_size > 1, "-b/--prompt-batch-size"),
        (pr.seq_dist.is_some(), "--seq-dist"),
        (pr.random_range_ratio.is_some(), "--random-range-ratio"),
        (pr.prompt_prefix_pool_size > 0, "--prompt-prefix-pool-size"),
        (
            pr.shared_system_prompt_length.is_some(),
            "--shared-system-prompt-length",
        ),
        (
            pr.user_context_prompt_length.is_some(),
            "--user-context-prompt-length",
        ),
    ] {
        if given {
            return Err(config_error(format!(
                "{flag} shapes synthetic prompts; --public-dataset {} sends its rows' own texts (--system-prompt and --system-prompt-file do apply)",
                spec.name
            )));
        }
    }
    let has_media = matches!(
        spec.shape,
        Shape::Instruction { image: Some(_), .. }
            | Shape::Messages { image: Some(_), .. }
            | Shape::Video { .. }
    );
    if has_media && endpoint_type != EndpointType::Chat {
        return Err(config_error(format!(
            "--public-dataset {}: its rows carry images or video, which need --endpoint-type chat, not {}",
            spec.name,
            endpoint_type.as_str()
        )));
    }
    for (id, flag) in [
        ("isl_mean", "--synthetic-input-tokens-mean/--isl"),
        ("isl_stddev", "--synthetic-input-tokens-stddev/--isl-stddev"),
        ("num_dataset_entries", "--num-dataset-entries"),
    ] {
        if a.typed(id) {
            warnings.push(format!(
                "{flag} is ignored: it shapes synthetic prompts, and the requests come from --public-dataset {}",
                spec.name
            ));
        }
    }
    Ok(Some(PublicOptions {
        spec,
        subset: p.hf_subset.clone(),
        filters,
        max_rows: rows.max(1),
    }))
}
