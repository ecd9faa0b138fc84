//! Counts, sizes, images, input-file and conversation-shape flags, into the dataset's options.

use crate::cli::ProfileArgs;
use crate::config::limits::{self as limits, Zero};
use crate::dataset::custom::CustomDatasetType;
use crate::dataset::source::{ImageSampling, ImageSource};
use crate::dataset::{DatasetSampling, InputOptions};
use crate::dataset::{MAX_IMAGE_SIDE, SyntheticOptions, TurnOptions};

use super::*;

/// Request, conversation and concurrency counts: 1 or more, and few enough to plan in
/// memory.
pub(super) fn check_counts(a: &ProfileArgs) -> Result<(), ConfigError> {
    let longer = "; for longer runs use --benchmark-duration";
    let requests = limits::MAX_REQUESTS;
    if let Some(c) = a.concurrency {
        limits::count(
            "--concurrency",
            c,
            limits::MAX_CONCURRENCY,
            "requests in flight",
            "",
        )?;
    }
    if let Some(n) = a.request_count {
        limits::count("--request-count", n, requests, "requests", longer)?;
    }
    if a.warmup_request_count > 0 {
        limits::count(
            "--warmup-request-count",
            a.warmup_request_count,
            requests,
            "requests",
            "",
        )?;
    }
    if let Some(n) = a.conversation_num
        && n > 0
    {
        limits::count("--conversation-num", n, requests, "conversations", longer)?;
    }
    if let Some(n) = a.num_warmup_sessions
        && n > 0
    {
        limits::count("--num-warmup-sessions", n, requests, "conversations", "")?;
    }
    Ok(())
}

/// Image sides from 0 (off) to `MAX_IMAGE_SIDE`, and at most `MAX_IMAGE_PIXELS` each.
pub(super) fn check_image_size(a: &ProfileArgs) -> Result<(), ConfigError> {
    let max = f64::from(MAX_IMAGE_SIDE);
    for (flag, v) in [
        ("--image-width-mean", a.image_width_mean),
        ("--image-height-mean", a.image_height_mean),
    ] {
        if !(v.is_finite() && (0.0..=max).contains(&v)) {
            return Err(config_error(format!(
                "{flag}: {v} is not allowed; give a width/height in pixels from 0 to {MAX_IMAGE_SIDE} (0 disables images)"
            )));
        }
    }
    let pixels = a.image_width_mean * a.image_height_mean;
    if pixels > limits::MAX_IMAGE_PIXELS as f64 {
        return Err(config_error(format!(
            "--image-width-mean {} x --image-height-mean {}: {pixels} pixels per image is not allowed; give at most {} (e.g. 8192 x 8192)",
            a.image_width_mean,
            a.image_height_mean,
            limits::MAX_IMAGE_PIXELS
        )));
    }
    Ok(())
}

/// Estimates the memory the synthetic dataset takes once built (each prompt and image is
/// held twice: as built and inside its request body) and refuses a dataset that would not
/// fit in the memory available, instead of aborting halfway through building it.
pub(super) fn check_dataset_memory(s: &SyntheticOptions) -> Result<(), ConfigError> {
    let Some(available) = limits::available_memory() else {
        return Ok(());
    };
    // About 4 bytes of text a token; noise images barely compress (3 bytes a pixel, then
    // base64 adds a third).
    let text = s.isl_mean * 4.0;
    let image = s.image_width_mean * s.image_height_mean * 3.0 * 4.0 / 3.0;
    let per_turn = 2.0 * (text + s.image_batch_size as f64 * image);
    let total = per_turn * s.turns.mean as f64 * s.num_entries as f64;
    if total > available as f64 {
        return Err(config_error(format!(
            "--num-dataset-entries {} x --image-batch-size {} x --image-width-mean {} x --image-height-mean {} (and --isl {}): the synthetic dataset would take about {}, more than the {} of memory available; lower the image size, --image-batch-size, --num-dataset-entries or --isl",
            s.num_entries,
            s.image_batch_size,
            s.image_width_mean,
            s.image_height_mean,
            s.isl_mean,
            limits::gib(total),
            limits::gib(available as f64)
        )));
    }
    Ok(())
}

/// `--image-source*`, `--input-file`, `--custom-dataset-type`, `--isl-block-size`.
pub(super) fn input_options(a: &ProfileArgs) -> Result<InputOptions, ConfigError> {
    let image_source = ImageSource::parse(a.image_source.trim());
    let image_sampling = ImageSampling::from(a.image_source_sampling);
    match &image_source {
        ImageSource::Noise if image_sampling != ImageSampling::RandomWithReplacement => {
            return Err(config_error(
                "--image-source-sampling: only random-with-replacement applies to --image-source noise; \
                 use --image-source assets or a directory to pick images in cycles",
            ));
        }
        ImageSource::Directory(d) if !d.is_dir() => {
            return Err(config_error(format!(
                "--image-source: '{}' is not 'noise', 'assets' or an existing directory",
                d.display()
            )));
        }
        _ => {}
    }
    if a.isl_block_size == Some(0) {
        return Err(config_error(
            "--isl-block-size: 0 is not allowed; give 1 or more tokens",
        ));
    }
    let input_file = match (
        &a.input_file,
        a.custom_dataset_type.map(CustomDatasetType::from),
    ) {
        (None, None) => None,
        (None, Some(t)) => {
            return Err(config_error(format!(
                "--custom-dataset-type {} needs --input-file",
                t.as_str()
            )));
        }
        (Some(p), kind) => {
            // A Parquet (or Arrow) file can only be a Baseten trace, as AIPerf detects it.
            let kind = kind.unwrap_or(if crate::dataset::custom::is_trace_file(p) {
                CustomDatasetType::BasetenTrace
            } else {
                CustomDatasetType::SingleTurn
            });
            if !p.exists() {
                return Err(config_error(format!(
                    "--input-file: '{}' does not exist",
                    p.display()
                )));
            }
            if p.is_dir() && kind != CustomDatasetType::RandomPool {
                return Err(config_error(format!(
                    "--input-file: '{}' is a directory; only --custom-dataset-type random_pool reads a directory",
                    p.display()
                )));
            }
            // Synthetic media shapes have no meaning for entries read from a file.
            let synthetic_flags = [
                ("--image-width-mean", a.image_width_mean != 0.0),
                ("--image-height-mean", a.image_height_mean != 0.0),
                ("--image-width-stddev", a.image_width_stddev.is_some()),
                ("--image-height-stddev", a.image_height_stddev.is_some()),
                ("--image-source", image_source != ImageSource::Noise),
                ("--image-format", a.typed("image_format")),
                (
                    "--image-source-sampling",
                    image_sampling != ImageSampling::RandomWithReplacement,
                ),
            ];
            if let Some((flag, _)) = synthetic_flags.iter().find(|(_, given)| *given) {
                return Err(config_error(format!(
                    "{flag} applies to synthetic data only and cannot be used with --input-file; \
                     images come from the input file"
                )));
            }
            Some((p.clone(), kind))
        }
    };
    let kind = input_file.as_ref().map(|(_, k)| *k);
    let synthesis = synthesis(a, kind)?;
    check_uuid_and_strip(a, kind)?;
    let baseten = super::baseten::replay(a, kind, &parse_extra_inputs(&a.extra_inputs)?)?;
    Ok(InputOptions {
        image_source,
        image_sampling,
        input_file,
        synthesis,
        baseten,
        isl_block_size: a.isl_block_size,
        sampling: a
            .dataset
            .dataset_sampling_strategy
            .map(DatasetSampling::from),
        shaping: Default::default(),
        seq_dist: None,
        prompt_batch_size: 1,
        range_ratio: None,
        public: None,
        cache_bust: None,
        uuid_and_strip: a.load.uuid_and_strip,
        // Measured once the tokenizer is loaded (`profile::prepare`).
        chat_template_overhead: None,
    })
}

/// `--uuid-and-strip` strips images repeated by `image_uuids` id within a session: only a
/// chat request has a `uuid`, and only single_turn rows carry ids and share sessions.
fn check_uuid_and_strip(
    a: &ProfileArgs,
    kind: Option<CustomDatasetType>,
) -> Result<(), ConfigError> {
    if !a.load.uuid_and_strip {
        return Ok(());
    }
    if a.endpoint_type != crate::endpoint::EndpointType::Chat {
        return Err(config_error(format!(
            "--uuid-and-strip needs --endpoint-type chat (image parts with a `uuid`), not {}; drop the flag",
            a.endpoint_type.as_str()
        )));
    }
    match kind {
        Some(CustomDatasetType::SingleTurn) => Ok(()),
        Some(CustomDatasetType::MultiTurn) => Err(config_error(
            "--uuid-and-strip is not supported with --custom-dataset-type multi_turn (as in AIPerf); \
             use single_turn rows grouped by session_id",
        )),
        other => Err(config_error(format!(
            "--uuid-and-strip strips images repeated by their image_uuids id within a session of a \
             single_turn --input-file; {} has none to strip: drop the flag or give such a file",
            other.map_or("synthetic data".to_string(), |k| format!(
                "--custom-dataset-type {}",
                k.as_str()
            ))
        ))),
    }
}

/// `--synthesis-*`, checked as AIPerf's bounds have them; they reshape a mooncake trace
/// and are refused with any other input.
fn synthesis(
    a: &ProfileArgs,
    kind: Option<CustomDatasetType>,
) -> Result<crate::dataset::Synthesis, ConfigError> {
    let f = &a.synthesis;
    let out = crate::dataset::Synthesis {
        speedup_ratio: f.synthesis_speedup_ratio,
        prefix_len_multiplier: f.synthesis_prefix_len_multiplier,
        prefix_root_multiplier: f.synthesis_prefix_root_multiplier,
        prompt_len_multiplier: f.synthesis_prompt_len_multiplier,
        output_len_multiplier: f.synthesis_output_len_multiplier,
        max_isl: f.synthesis_max_isl,
        max_osl: f.synthesis_max_osl,
    };
    for (flag, value) in [
        ("--synthesis-speedup-ratio", out.speedup_ratio),
        (
            "--synthesis-prefix-len-multiplier",
            out.prefix_len_multiplier,
        ),
        (
            "--synthesis-prompt-len-multiplier",
            out.prompt_len_multiplier,
        ),
        (
            "--synthesis-output-len-multiplier",
            out.output_len_multiplier,
        ),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(config_error(format!(
                "{flag} {value}: give a number of 0 or more (1 changes nothing)"
            )));
        }
    }
    for (flag, value) in [
        (
            "--synthesis-prefix-root-multiplier",
            Some(u64::from(out.prefix_root_multiplier)),
        ),
        ("--synthesis-max-isl", out.max_isl),
        ("--synthesis-max-osl", out.max_osl),
    ] {
        if value == Some(0) {
            return Err(config_error(format!("{flag} 0: give 1 or more")));
        }
    }
    if kind == Some(CustomDatasetType::BasetenTrace) {
        if out.speedup_ratio != 1.0 {
            return Err(config_error(
                "--synthesis-speedup-ratio cannot be used with a baseten_trace; use --replay-speedup to scale replay pacing",
            ));
        }
        for (flag, set) in [
            (
                "--synthesis-prefix-len-multiplier",
                out.prefix_len_multiplier != 1.0,
            ),
            (
                "--synthesis-prefix-root-multiplier",
                out.prefix_root_multiplier != 1,
            ),
            (
                "--synthesis-prompt-len-multiplier",
                out.prompt_len_multiplier != 1.0,
            ),
        ] {
            if set {
                return Err(config_error(format!(
                    "{flag} cannot be used with a baseten_trace: it replays the recorded prompts verbatim, so reshaping would change nothing sent and desync the hash_ids KV hints; drop it"
                )));
            }
        }
        // --synthesis-output-len-multiplier, --synthesis-max-isl and --synthesis-max-osl apply.
        return Ok(out);
    }
    if out.is_set() && kind != Some(CustomDatasetType::MooncakeTrace) {
        return Err(config_error(
            "--synthesis-*: these reshape a trace; give --input-file with --custom-dataset-type mooncake_trace",
        ));
    }
    Ok(out)
}

/// The failure-handling flags, and input combinations that would otherwise be silently
/// ignored (image settings while images are off).
pub(super) fn check_failures_and_inputs(a: &ProfileArgs) -> Result<FailureOptions, ConfigError> {
    let wait = limits::seconds(
        "--wait-for-model-timeout",
        a.wait_for_model_timeout,
        Zero::Allowed,
    )?;
    let interval = limits::seconds(
        "--wait-for-model-interval",
        a.wait_for_model_interval,
        Zero::Refused,
    )?;
    let grace = limits::seconds(
        "--interrupt-grace-period",
        a.interrupt_grace_period,
        Zero::Allowed,
    )?;
    if let Some(t) = a.failed_request_threshold
        && !(t.is_finite() && (0.0..=1.0).contains(&t))
    {
        return Err(config_error(format!(
            "--failed-request-threshold: {t} is not allowed; give a share of failed requests from 0 to 1 (e.g. 0.1)"
        )));
    }

    let images_on = a.image_width_mean > 0.0 || a.image_height_mean > 0.0;
    if !images_on && a.image_batch_size > 1 {
        return Err(config_error(format!(
            "--image-batch-size {}: images are off because --image-width-mean and --image-height-mean are 0; give both sizes > 0, or drop --image-batch-size",
            a.image_batch_size
        )));
    }
    for (flag, stddev, mean_flag, mean) in [
        (
            "--image-width-stddev",
            a.image_width_stddev,
            "--image-width-mean",
            a.image_width_mean,
        ),
        (
            "--image-height-stddev",
            a.image_height_stddev,
            "--image-height-mean",
            a.image_height_mean,
        ),
    ] {
        if let Some(sd) = stddev
            && sd > 0.0
            && mean == 0.0
        {
            return Err(config_error(format!(
                "{flag} {sd} needs {mean_flag}: give a mean > 0 as well, or drop the stddev"
            )));
        }
    }

    Ok(FailureOptions {
        wait_for_model: (!wait.is_zero()).then_some(wait),
        wait_for_model_interval: interval,
        wait_for_model_mode: a.wait_for_model_mode.into(),
        failed_request_threshold: a.failed_request_threshold,
        grace_period: grace,
    })
}

/// `--conversation-turn-delay-ratio` above this would stretch a think time past any run.
pub(super) const MAX_DELAY_RATIO: f64 = 1000.0;

/// `--conversation-turn-*`: the shape of synthetic conversations.
pub(super) fn check_turns(a: &ProfileArgs) -> Result<TurnOptions, ConfigError> {
    if a.conversation_turn_mean == 0 {
        return Err(config_error(
            "--conversation-turn-mean: 0 is not allowed; give 1 or more turns per conversation",
        ));
    }
    check_stddev("--conversation-turn-stddev", a.conversation_turn_stddev)?;
    let delay = limits::millis(
        "--conversation-turn-delay-mean",
        a.conversation_turn_delay_mean,
    )?;
    limits::millis(
        "--conversation-turn-delay-stddev",
        a.conversation_turn_delay_stddev,
    )?;
    // Bounded too: it multiplies every think time.
    let ratio = a.conversation_turn_delay_ratio;
    if !(ratio.is_finite() && ratio > 0.0 && ratio <= MAX_DELAY_RATIO) {
        return Err(config_error(format!(
            "--conversation-turn-delay-ratio: {ratio} is not allowed; give a multiplier > 0 and at most {MAX_DELAY_RATIO} (1 keeps the delays)"
        )));
    }
    let turns = TurnOptions {
        mean: a.conversation_turn_mean,
        stddev: a.conversation_turn_stddev,
        delay_mean_ms: delay,
        delay_stddev_ms: a.conversation_turn_delay_stddev,
        delay_ratio: ratio,
    };
    if a.input_file.is_some() && turns != TurnOptions::default() {
        return Err(config_error(
            "--conversation-turn-*: these shape synthetic conversations; with --input-file the file's sessions give the turns and their \"delay\"",
        ));
    }
    Ok(turns)
}

pub(super) fn check_stddev(flag: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(config_error(format!(
            "{flag}: {v} is not allowed; give a number >= 0"
        )))
    }
}

/// Image flags while synthetic images are off (both sizes 0) would do nothing.
pub(super) fn check_image_flags_used(a: &ProfileArgs, images_on: bool) -> Result<(), ConfigError> {
    if images_on || a.input_file.is_some() {
        return Ok(());
    }
    let given = ["image_format", "image_source", "image_source_sampling"];
    match given.iter().find(|id| a.typed(id)) {
        Some(id) => Err(config_error(format!(
            "--{}: images are off because --image-width-mean and --image-height-mean are 0; give both sizes > 0, or drop it",
            id.replace('_', "-")
        ))),
        None => Ok(()),
    }
}

/// Flags AIPerf accepts that have no effect in this combination: a warning each, and the
/// run goes on.
pub(super) fn unused_flag_warnings(a: &ProfileArgs, turns: &TurnOptions) -> Vec<String> {
    let mut out = Vec::new();
    if a.typed("wait_for_model_interval") && a.wait_for_model_timeout == 0.0 {
        out.push("--wait-for-model-interval is ignored: it is the poll interval of --wait-for-model-timeout, which is not set".to_string());
    }
    if a.typed("wait_for_model_mode") && a.wait_for_model_timeout == 0.0 {
        out.push("--wait-for-model-mode is ignored: it says what --wait-for-model-timeout waits for, which is not set".to_string());
    }
    if a.input_file.is_some() {
        let synthetic = [
            ("isl_mean", "--synthetic-input-tokens-mean/--isl"),
            ("isl_stddev", "--synthetic-input-tokens-stddev/--isl-stddev"),
            ("osl_stddev", "--output-tokens-stddev/--osl-stddev"),
            ("num_dataset_entries", "--num-dataset-entries"),
        ];
        for (id, flag) in synthetic {
            if a.typed(id) {
                out.push(format!(
                    "{flag} is ignored: it shapes synthetic prompts, and the requests come from --input-file"
                ));
            }
        }
    }
    if a.prompt.seq_dist.is_some() {
        let lengths = [
            ("isl_mean", "--synthetic-input-tokens-mean/--isl"),
            ("isl_stddev", "--synthetic-input-tokens-stddev/--isl-stddev"),
            ("osl_mean", "--output-tokens-mean/--osl"),
            ("osl_stddev", "--output-tokens-stddev/--osl-stddev"),
        ];
        for (id, flag) in lengths {
            if a.typed(id) {
                out.push(format!(
                    "{flag} is ignored: --seq-dist gives each request its input and output lengths"
                ));
            }
        }
    }
    let mooncake = a.custom_dataset_type == Some(crate::cli::CustomDatasetType::MooncakeTrace);
    if a.isl_block_size.is_some() && !mooncake {
        out.push("--isl-block-size is ignored: it sizes the hash_ids blocks of --custom-dataset-type mooncake_trace only".to_string());
    }
    let one_turn = turns.mean == 1 && turns.stddev == 0.0;
    let delays = [
        "conversation_turn_delay_mean",
        "conversation_turn_delay_stddev",
        "conversation_turn_delay_ratio",
    ];
    if one_turn && delays.iter().any(|id| a.typed(id)) {
        out.push("--conversation-turn-delay-* is ignored: think times come before later turns, and every conversation has one turn (raise --conversation-turn-mean)".to_string());
    }
    out
}
