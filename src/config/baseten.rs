//! The `baseten_trace` replay knobs (`--replay-speedup`, `--max-idle-gap-cap-seconds`,
//! `--open-loop-replay`, `--open-loop-strict`, `--omit-kv-hints`, `--force-min-tokens`,
//! `--trace-session-sample-ratio`): checked into `BasetenReplay`, and refused for any other
//! input, as AIPerf refuses them.

use serde_json::{Map, Value};

use super::{ConfigError, config_error};
use crate::cli::ProfileArgs;
use crate::dataset::custom::{BasetenReplay, CustomDatasetType};

/// AIPerf's setting of which session column groups a trace that has both.
const SESSION_COLUMN_ENV: &str = "AIPERF_DATASET_BASETEN_SESSION_COLUMN";

/// The knobs for `kind`; Err when one is given for another input or out of range, or when
/// `--extra-inputs` sets a field the replay writes into every body.
pub(super) fn replay(
    a: &ProfileArgs,
    kind: Option<CustomDatasetType>,
    extra_inputs: &Map<String, Value>,
) -> Result<BasetenReplay, ConfigError> {
    let l = &a.load;
    let given: Vec<&str> = [
        (
            "--trace-session-sample-ratio",
            l.trace_session_sample_ratio.is_some(),
        ),
        ("--replay-speedup", l.replay_speedup.is_some()),
        (
            "--max-idle-gap-cap-seconds",
            l.max_idle_gap_cap_seconds.is_some(),
        ),
        (
            "--open-loop-replay/--no-open-loop-replay",
            l.open_loop_replay || l.no_open_loop_replay,
        ),
        ("--open-loop-strict", l.open_loop_strict),
        ("--omit-kv-hints", l.omit_kv_hints),
        (
            "--force-min-tokens/--no-force-min-tokens",
            l.force_min_tokens || l.no_force_min_tokens,
        ),
    ]
    .into_iter()
    .filter_map(|(flag, on)| on.then_some(flag))
    .collect();
    if kind != Some(CustomDatasetType::BasetenTrace) {
        if given.is_empty() {
            return Ok(BasetenReplay::default());
        }
        let what = match kind {
            None => "there is no --input-file".to_string(),
            Some(k) => format!("the input is {}", k.as_str()),
        };
        return Err(config_error(format!(
            "{} applies to baseten_trace datasets only, and {what}; give a Parquet trace with --input-file and --custom-dataset-type baseten_trace, or drop the flag",
            given.join(", ")
        )));
    }
    let positive = |flag: &str, v: Option<f64>| -> Result<Option<f64>, ConfigError> {
        match v {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                Err(config_error(format!("{flag} {x}: give a number above 0")))
            }
            v => Ok(v),
        }
    };
    let speedup = positive("--replay-speedup", l.replay_speedup)?.unwrap_or(1.0);
    let gap_s = positive("--max-idle-gap-cap-seconds", l.max_idle_gap_cap_seconds)?;
    let ratio = positive("--trace-session-sample-ratio", l.trace_session_sample_ratio)?;
    if let Some(r) = ratio.filter(|&r| r > 1.0) {
        return Err(config_error(format!(
            "--trace-session-sample-ratio {r}: give a share of sessions above 0 and at most 1"
        )));
    }
    let open_loop = !l.no_open_loop_replay;
    if l.open_loop_strict && !open_loop {
        return Err(config_error(
            "--open-loop-strict applies to open-loop replay, and --no-open-loop-replay asks for closed-loop; drop one",
        ));
    }
    // The schedule window is in recorded ms, the compressed times are not.
    if speedup != 1.0
        && (a.fixed_schedule_start_offset.is_some() || a.fixed_schedule_end_offset.is_some())
    {
        return Err(config_error(
            "--fixed-schedule-start-offset/--fixed-schedule-end-offset cannot be used with --replay-speedup: the window would be compared with compressed times; drop one",
        ));
    }
    let prefer_poor_man = match std::env::var(SESSION_COLUMN_ENV).ok().as_deref() {
        None | Some("" | "provided_session_id") => false,
        Some("poor_man_session_id") => true,
        Some(other) => {
            return Err(config_error(format!(
                "{SESSION_COLUMN_ENV}={other}: give provided_session_id or poor_man_session_id"
            )));
        }
    };
    let out = BasetenReplay {
        speedup,
        idle_gap_cap_ms: gap_s.map(|s| s * 1000.0),
        open_loop,
        strict: l.open_loop_strict,
        omit_kv_hints: l.omit_kv_hints,
        force_min_tokens: !l.no_force_min_tokens,
        sample_ratio: ratio,
        window: (a.fixed_schedule_start_offset, a.fixed_schedule_end_offset),
        prefer_poor_man,
    };
    // The replay writes these into every body, over --extra-inputs.
    let mut collisions = Vec::new();
    if out.force_min_tokens && extra_inputs.contains_key("min_tokens") {
        collisions.push(("min_tokens", "--no-force-min-tokens"));
    }
    if !out.omit_kv_hints {
        for key in ["hash_ids", "block_size"] {
            if extra_inputs.contains_key(key) {
                collisions.push((key, "--omit-kv-hints"));
            }
        }
    }
    if !collisions.is_empty() {
        let said: Vec<String> = collisions
            .iter()
            .map(|(key, flag)| {
                format!(
                    "--extra-inputs {key} is overwritten per turn by the baseten_trace replay; pass {flag} to send your value instead"
                )
            })
            .collect();
        return Err(config_error(said.join("; ")));
    }
    Ok(out)
}
