//! The end of a run: statistics, the summary exports and the console report, and how the
//! run ended.

use std::io::Write;

use anyhow::Context;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::Outcome;
use super::control::StopReason;
use super::phases::Ran;
use crate::config::{ProfileConfig, is_secret_header, redacted_command_line};
use crate::endpoint::ModelSelection;
use crate::export::{self, RunInfo};
use crate::load::SendPlan;
use crate::metrics::Collector;
use crate::overhead::OverheadReport;
use crate::transport::ConnectionReuse;

/// Everything the exports need from the run.
pub(super) struct Finished<'a> {
    pub cfg: &'a ProfileConfig,
    pub argv: &'a [String],
    pub plan: &'a SendPlan,
    pub tokenizer: &'a str,
    pub ran: Ran,
    pub overhead: OverheadReport,
    pub stop_reason: Option<StopReason>,
    /// Requests sent again on a fresh connection (see `transport::conn`).
    pub retried: u64,
    /// How Image Token Count left out the chat template's tokens.
    pub template: serde_json::Value,
}

/// Computes the statistics, writes `inputs.json` and the summary exports, prints the
/// console report, and says how the run ended.
pub(super) fn finish(run: Finished, collector: Collector) -> anyhow::Result<Outcome> {
    let Finished {
        cfg,
        argv,
        plan,
        tokenizer,
        ran,
        overhead,
        stop_reason,
        retried,
        template,
    } = run;
    let sent = ran.sent;
    match stop_reason {
        Some(_) => warn!(
            "The profile run was cancelled early ({sent} requests sent). Results shown may be incomplete or inaccurate."
        ),
        None => info!("Benchmark completed ({sent} requests sent)"),
    }
    let summary = collector
        .finish()
        .context("cannot finish profile_export.jsonl")?;
    let failed = summary.error_request_count;
    let finished = failed + summary.request_count;
    if failed > 0 && summary.request_count > 0 {
        let hint = if cfg.failures.failed_request_threshold.is_none() {
            "; --failed-request-threshold makes such a run exit non-zero"
        } else {
            ""
        };
        warn!(
            "{failed} of {finished} requests failed ({:.1}%); see the Error Summary{hint}",
            failed as f64 * 100.0 / finished as f64
        );
    }
    if retried > 0 {
        warn!(
            "{retried} requests were sent again on a new connection: the server had closed the kept-alive connection before they reached it"
        );
    }
    if sent == 0 {
        warn!("No request was sent; no results were written");
    } else {
        let info = RunInfo {
            benchmark_id: crate::ids::uuid4(&mut rand::rng()),
            start_wall_ns: ran.start_wall_ns,
            end_wall_ns: ran.end_wall_ns,
            was_cancelled: stop_reason.is_some(),
            cli_command: redacted_command_line(argv, &cfg.secrets),
            input_config: input_config_json(cfg),
            random_seed: Some(cfg.random_seed),
            tokenizer: tokenizer.to_string(),
            template_overhead: Some(template),
            streaming: cfg.streaming,
            load_pacing: ran.pacing.as_ref().map(|p| p.to_json()),
            client_overhead: Some(overhead),
        };
        let inputs = export::write_inputs_json(&cfg.artifact_dir, plan);
        let mut console_text = export::render_console(&summary, &info);
        if let Some(p) = &ran.pacing {
            info!(
                "Pacing: {} scheduled sends, achieved {} requests/sec (target {}), send lag p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                p.sends,
                p.achieved_rate.map_or("n/a".into(), |r| format!("{r:.3}")),
                p.target_rate.map_or("n/a".into(), |r| format!("{r}")),
                p.send_lag_p50_ns / 1e6,
                p.send_lag_p99_ns / 1e6,
                p.send_lag_max_ns / 1e6
            );
            if let Some(w) = p.warning() {
                warn!("{w}");
                console_text.push_str(&format!("\nWarning: {w}\n"));
            }
        }
        let paths = export::write_summary(&cfg.artifact_dir, &summary, &info, &console_text);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{console_text}");
        // The table is shown even when the files could not be written (a full disk).
        inputs.context("cannot write inputs.json")?;
        let paths = paths.context("cannot write the summary exports")?;
        info!("Results saved to: {}", cfg.artifact_dir.display());
        let _ = writeln!(out, "CSV Export: {}", paths.csv.display());
        let _ = writeln!(out, "JSON Export: {}", paths.json.display());
        let _ = writeln!(
            out,
            "Log File: {}",
            export::log_file(&cfg.artifact_dir).display()
        );
        let _ = out.flush();
    }
    Ok(match stop_reason {
        Some(StopReason::Interrupted) => Outcome::Interrupted,
        Some(StopReason::ThresholdExceeded) => Outcome::ThresholdExceeded,
        Some(StopReason::ServerUnreachable) => Outcome::ServerUnreachable,
        Some(StopReason::ServerLost) => Outcome::ServerLost,
        Some(StopReason::Terminated) => Outcome::Terminated,
        Some(StopReason::WriteFailed) => Outcome::WriteFailed,
        None if summary.request_count == 0 => Outcome::AllFailed,
        None => Outcome::Success,
    })
}

/// The resolved configuration, secrets left out.
pub(super) fn input_config_json(cfg: &ProfileConfig) -> Value {
    let s = &cfg.synthetic;
    json!({
        "endpoint": {
            "model_names": cfg.models,
            "model_selection_strategy": match cfg.model_selection {
                ModelSelection::RoundRobin => "round_robin",
                ModelSelection::Random => "random",
            },
            "type": cfg.endpoint_type.as_str(),
            "url": cfg.request_uri.to_string(),
            "urls": cfg.request_uris.iter().map(|u| u.to_string()).collect::<Vec<_>>(),
            "url_selection_strategy": "round_robin",
            "connection_reuse_strategy": match cfg.connection_reuse {
                ConnectionReuse::Pooled => "pooled",
                ConnectionReuse::Never => "never",
                ConnectionReuse::StickySessions => "sticky-user-sessions",
            },
            "streaming": cfg.streaming,
            "timeout": cfg.request_timeout.as_secs_f64(),
            "api_key": cfg.api_key.as_ref().map(|_| "***"),
            "use_legacy_max_tokens": cfg.use_legacy_max_tokens,
            "use_server_token_count": cfg.use_server_token_count,
        },
        "input": {
            "random_seed": cfg.random_seed,
            "extra": cfg.extra_inputs,
            "headers": cfg.headers.iter().map(|(k, v)| {
                let shown = if is_secret_header(k.as_str()) { "***" } else { v.to_str().unwrap_or("") };
                (k.as_str().to_string(), Value::String(shown.to_string()))
            }).collect::<serde_json::Map<String, Value>>(),
            "num_dataset_entries": s.num_entries,
            "prompt": {
                "input_tokens": {"mean": s.isl_mean, "stddev": s.isl_stddev},
                "output_tokens": {"mean": s.osl_mean, "stddev": s.osl_stddev},
            },
            "image": {
                "width": {"mean": s.image_width_mean, "stddev": s.image_width_stddev},
                "height": {"mean": s.image_height_mean, "stddev": s.image_height_stddev},
                "batch_size": s.image_batch_size,
                "format": format!("{:?}", s.image_format).to_lowercase(),
            },
            "conversation": {
                "num": cfg.load.sessions,
                "turn": {"mean": s.turns.mean, "stddev": s.turns.stddev},
                "turn_delay": {
                    "mean": s.turns.delay_mean_ms,
                    "stddev": s.turns.delay_stddev_ms,
                    "ratio": s.turns.delay_ratio,
                },
            },
        },
        "tokenizer": {"name": cfg.tokenizer, "revision": cfg.tokenizer_revision},
        "loadgen": {
            "concurrency": cfg.concurrency,
            "request_count": cfg.request_count,
            "warmup_request_count": cfg.warmup_request_count,
            "request_rate": cfg.load.rate.map(|(r, _)| r),
            "arrival_pattern": cfg.load.rate.map(|(_, p)| format!("{p:?}").to_lowercase()),
            "fixed_schedule": cfg.load.fixed_schedule,
            "benchmark_duration": cfg.load.duration.map(|d| d.as_secs_f64()),
            "benchmark_grace_period": cfg.load.grace.map(|d| d.as_secs_f64()),
            "warmup_duration": cfg.load.warmup_duration.map(|d| d.as_secs_f64()),
            "num_warmup_sessions": cfg.load.warmup.sessions,
            "warmup_grace_period": cfg.load.warmup.grace.map(|d| d.as_secs_f64()),
            "warmup_concurrency": cfg.load.warmup.concurrency,
            "warmup_request_rate": cfg.load.warmup.rate.map(|(r, _)| r),
            "request_cancellation_rate": cfg.load.cancellation.map(|c| c.share * 100.0),
            "request_cancellation_delay": cfg.load.cancellation.map(|c| c.delay.as_secs_f64()),
        },
        "output": {"artifact_directory": cfg.artifact_dir.display().to_string()},
        "mock_server": cfg.mock_server,
    })
}
