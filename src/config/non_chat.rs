//! Checks of the non-chat endpoint types (embeddings, rankings, template, raw): whether
//! they stream, the template keys of `--extra-inputs`, and `--rankings-*`.

use serde_json::{Map, Value};

use super::{ConfigError, config_error};
use crate::cli::ProfileArgs;
use crate::dataset::rankings::RankingsOptions;
use crate::endpoint::EndpointType;
use crate::endpoint::template::{PAYLOAD_TEMPLATE, PayloadTemplate, spec_of};

/// Whether the run streams: `--streaming`, turned off with a warning for an endpoint type
/// that answers in one piece.
pub(super) fn streaming(
    a: &ProfileArgs,
    endpoint: EndpointType,
    warnings: &mut Vec<String>,
) -> Result<bool, ConfigError> {
    if !a.streaming {
        return Ok(false);
    }
    if endpoint == EndpointType::ImageGeneration {
        return Err(config_error(
            "--streaming: streamed image generation (partial images) is not supported by this build; drop --streaming",
        ));
    }
    if !endpoint.produces_tokens() {
        warnings.push(format!(
            "--streaming is ignored: --endpoint-type {} answers in one piece, so the run does not stream",
            endpoint.as_str()
        ));
        return Ok(false);
    }
    Ok(true)
}

/// The synthetic rankings options (None unless a rankings type makes synthetic data).
pub(super) fn check(
    a: &ProfileArgs,
    endpoint: EndpointType,
    extra_inputs: &Map<String, Value>,
) -> Result<Option<RankingsOptions>, ConfigError> {
    endpoint
        .response_shape(extra_inputs)
        .map_err(config_error)?;
    if endpoint == EndpointType::Template {
        match extra_inputs.get(PAYLOAD_TEMPLATE) {
            Some(spec) => {
                PayloadTemplate::new(&spec_of(spec))
                    .map_err(|e| config_error(format!("--extra-inputs payload_template: {e}")))?;
            }
            None => {
                return Err(config_error(
                    "--endpoint-type template needs a template: give --extra-inputs payload_template:nv-embedqa, a template file, or an inline template",
                ));
            }
        }
    }
    let no_limit = matches!(
        endpoint,
        EndpointType::ChatEmbeddings
            | EndpointType::NimEmbeddings
            | EndpointType::ImageRetrieval
            | EndpointType::ImageEdit
            | EndpointType::SolidoRag
            | EndpointType::VideoGeneration
    );
    if no_limit && a.osl_mean.is_some() {
        return Err(config_error(format!(
            "--output-tokens-mean: --endpoint-type {} has no output limit to send; drop it",
            endpoint.as_str()
        )));
    }
    if endpoint == EndpointType::ImageEdit
        && let Some(key) = crate::endpoint::image_edit::RESERVED
            .iter()
            .find(|k| extra_inputs.contains_key(**k))
    {
        return Err(config_error(format!(
            "--extra-inputs {key}: image_edit fills the prompt, image, url and mask fields itself; drop it"
        )));
    }
    if matches!(
        endpoint,
        EndpointType::ImageRetrieval | EndpointType::ImageEdit
    ) && a.input_file.is_none()
        && (a.image_width_mean <= 0.0 || a.image_height_mean <= 0.0)
    {
        return Err(config_error(format!(
            "--endpoint-type {} sends images: give --image-width-mean and --image-height-mean (synthetic images), or an --input-file whose lines have \"image\"",
            endpoint.as_str()
        )));
    }
    rankings_options(a, endpoint)
}

fn rankings_options(
    a: &ProfileArgs,
    endpoint: EndpointType,
) -> Result<Option<RankingsOptions>, ConfigError> {
    let r = &a.rankings;
    let given = [
        (
            "--rankings-passages-mean",
            r.rankings_passages_mean.is_some(),
        ),
        (
            "--rankings-passages-stddev",
            r.rankings_passages_stddev.is_some(),
        ),
        (
            "--rankings-passages-prompt-token-mean",
            r.rankings_passages_prompt_token_mean.is_some(),
        ),
        (
            "--rankings-passages-prompt-token-stddev",
            r.rankings_passages_prompt_token_stddev.is_some(),
        ),
        (
            "--rankings-query-prompt-token-mean",
            r.rankings_query_prompt_token_mean.is_some(),
        ),
        (
            "--rankings-query-prompt-token-stddev",
            r.rankings_query_prompt_token_stddev.is_some(),
        ),
    ];
    let first_given = given.iter().find(|(_, g)| *g).map(|(f, _)| *f);
    if endpoint.rankings_api().is_none() {
        return match first_given {
            Some(flag) => Err(config_error(format!(
                "{flag}: synthetic passages are for --endpoint-type nim_rankings, cohere_rankings or hf_tei_rankings, not {}",
                endpoint.as_str()
            ))),
            None => Ok(None),
        };
    }
    if a.input_file.is_some() {
        return match first_given {
            Some(flag) => Err(config_error(format!(
                "{flag}: the input file's texts are the query and passages (the first text is the query); drop {flag} or --input-file"
            ))),
            None => Ok(None),
        };
    }
    let stddev = |flag: &str, v: Option<f64>| match v {
        Some(s) if !s.is_finite() || s < 0.0 => Err(config_error(format!(
            "{flag} {s}: give a standard deviation >= 0"
        ))),
        Some(s) => Ok(s),
        None => Ok(0.0),
    };
    Ok(Some(RankingsOptions {
        passages_mean: r.rankings_passages_mean.unwrap_or(10) as f64,
        passages_stddev: stddev("--rankings-passages-stddev", r.rankings_passages_stddev)?,
        passage_tokens_mean: r.rankings_passages_prompt_token_mean.unwrap_or(128) as f64,
        passage_tokens_stddev: stddev(
            "--rankings-passages-prompt-token-stddev",
            r.rankings_passages_prompt_token_stddev,
        )?,
        query_tokens_mean: r.rankings_query_prompt_token_mean.unwrap_or(32) as f64,
        query_tokens_stddev: stddev(
            "--rankings-query-prompt-token-stddev",
            r.rankings_query_prompt_token_stddev,
        )?,
    }))
}
