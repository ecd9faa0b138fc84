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
use crate::export::{self, Exporter, RunInfo};
use crate::load::SendPlan;
use crate::metrics::{Collector, MetricsSummary};
use crate::overhead::OverheadReport;

/// Everything the exports need from the run.
pub(super) struct Finished<'a> {
    pub cfg: &'a ProfileConfig,
    pub argv: &'a [String],
    pub plan: &'a SendPlan,
    pub tokenizer: &'a str,
    pub ran: Ran,
    pub overhead: OverheadReport,
    pub stop_reason: Option<StopReason>,
    /// Requests written again on a fresh connection, the server having closed the first
    /// one unread, and kept-alive connections found closed before a request was written
    /// (see `transport::conn`).
    pub resent: u64,
    pub found_closed: u64,
    /// How Image Token Count left out the chat template's tokens.
    pub template: serde_json::Value,
    /// What the side collectors scraped (server metrics, GPU telemetry).
    pub observed: super::observe::Observed,
    /// The run's clock (the scrapes are stamped on it).
    pub clock: crate::clock::Clock,
    /// A sharded (or `--start-at`) run's start: what its `shard` block reports.
    pub start: Option<super::shard::Start>,
    /// What the HTML report charts of the profiling records, when it will be written.
    pub chart_rows: Option<super::collect::ChartColumns>,
    /// `--accuracy-benchmark`: the grades, for the CSV and the console table.
    pub accuracy: Option<crate::accuracy::export::Grading>,
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
        resent,
        found_closed,
        template,
        observed,
        clock,
        start,
        chart_rows,
        accuracy,
    } = run;
    let sent = ran.sent;
    match stop_reason {
        Some(_) => warn!(
            "The profile run was cancelled early ({sent} requests sent). Results shown may be incomplete or inaccurate."
        ),
        None => info!("Benchmark completed ({sent} requests sent)"),
    }
    let mut collector = collector;
    if let Some(rtt_ns) = network_rtt_ns(cfg, &observed) {
        collector.set_network_rtt(rtt_ns);
    }
    let summary = collector
        .finish()
        .context("cannot finish profile_export.jsonl")?;
    let failed = summary.error_request_count;
    let finished = failed + summary.request_count;
    let resent_line = warn_of_losses(cfg, &summary, resent, found_closed);
    let gpu_telemetry = super::gpu_telemetry::summarise(
        cfg,
        &observed,
        (ran.profiling_window.start_ns, ran.profiling_window.end_ns),
        clock,
    );
    if sent == 0 {
        warn!("No request was sent; no results were written");
    } else {
        let input_config = input_config_json(cfg);
        let info = RunInfo {
            benchmark_id: plan.benchmark_id.clone(),
            start_wall_ns: ran.start_wall_ns,
            end_wall_ns: ran.end_wall_ns,
            was_cancelled: stop_reason.is_some(),
            is_complete: stop_reason.is_none(),
            cli_command: redacted_command_line(argv, &cfg.secrets),
            input_config: input_config.clone(),
            random_seed: Some(cfg.random_seed),
            tokenizer: tokenizer.to_string(),
            template_overhead: Some(template),
            streaming: cfg.streaming,
            load_pacing: ran.pacing.as_ref().map(|p| p.to_json()),
            client_overhead: Some(overhead),
            gpu_telemetry: gpu_telemetry.clone(),
            output_limit_is_a_ceiling: cfg.accuracy.is_some(),
            extra_metrics: accuracy
                .as_ref()
                .map_or(Vec::new(), |g| g.tally().metrics()),
            // Not in AIPerf's schema: requests that went out twice (see `resent_line`).
            extra: [("resent_requests", json!(resent))]
                .into_iter()
                .chain(start.as_ref().map(|start| {
                    let schedule_start = ran.schedule_start_wall_ns;
                    let block = super::shard::block(cfg, &input_config, start, schedule_start);
                    ("shard", block)
                }))
                .collect(),
        };
        let mut console_text = export::render_console(&summary, &info);
        let server_metrics = super::server_metrics::summarise(cfg, &ran, &observed, &summary);
        if let Some(sm) = &server_metrics {
            console_text.push_str(&sm.console);
        }
        if cfg.export.show_trace_timing {
            console_text.push_str(&export::render_trace_timing(&summary));
        }
        if let Some(t) = &gpu_telemetry {
            let output_tokens = summary.get("total_output_tokens").map(|r| r.display_avg());
            console_text.push_str(&export::render_gpu_telemetry(t, output_tokens));
        }
        if let Some(grading) = &accuracy {
            let table = grading
                .finish(&cfg.artifact_dir)
                .context("cannot write accuracy_results.csv")?;
            console_text.push_str(&table);
        }
        if let Some(line) = &resent_line {
            console_text.push_str(&format!("\n{line}\n"));
        }
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
        let mut out = std::io::stdout().lock();
        // The table is shown even when the files cannot be written (a full disk).
        let _ = writeln!(out, "{console_text}");
        let names = &cfg.export.names;
        let server_files = server_metrics
            .as_ref()
            .and_then(|sm| super::server_metrics::files(cfg, &info, &ran, &observed, sm, clock));
        let mut exporters: Vec<&dyn Exporter> = Vec::new();
        let summary_files = export::SummaryFiles {
            names,
            summary: &summary,
            info: &info,
            console_text: &console_text,
        };
        let inputs = export::InputsJson(plan);
        let gpu_jsonl = export::GpuTelemetryJsonl {
            names,
            telemetry: gpu_telemetry.is_some(),
            spools: &observed.gpu_jsonl,
        };
        let network_jsonl = super::network_probe::NetworkLatencyJsonl {
            names,
            probed: observed.network.as_ref(),
        };
        exporters.extend([
            &summary_files as &dyn Exporter,
            &inputs,
            &gpu_jsonl,
            &network_jsonl,
        ]);
        if let Some(files) = &server_files {
            exporters.push(files);
        }
        let exported = export::export_all(&cfg.artifact_dir, &exporters)?;
        let failed_exporters: Vec<&str> = exported.failed.iter().map(|(what, _)| *what).collect();
        // From the files above, off the run's hot path; a failure only warns.
        if cfg.export.html_report {
            let mut chart_rows = chart_rows;
            let kept = chart_rows.as_mut().map(|rows| rows.kept());
            crate::report::write_run_or_warn(&cfg.artifact_dir, names, kept);
        }
        // Last, and only when every artifact above is complete (the per-record files were
        // closed when the collector finished; after a failed write they are cut short).
        if stop_reason != Some(StopReason::WriteFailed) {
            export::write_results_ready(&cfg.artifact_dir, info.was_cancelled, &failed_exporters)
                .context("cannot write .aiperf_results_ready.json")?;
        }
        // The others were written; the marker says which failed (`partial`).
        if let Some(e) = exported.first_failure() {
            return Err(e);
        }
        info!("Results saved to: {}", cfg.artifact_dir.display());
        list_files(&mut out, cfg, &exported.written, failed, finished);
    }
    Ok(outcome(stop_reason, &summary))
}

/// One line each in the log for what the run lost or worked around: output lengths other
/// than asked, failed requests, requests sent again, connections found closed. Gives the
/// resent line, which the console repeats.
fn warn_of_losses(
    cfg: &ProfileConfig,
    summary: &MetricsSummary,
    resent: u64,
    found_closed: u64,
) -> Option<String> {
    if summary.osl_mismatch_count > 0 && cfg.accuracy.is_none() {
        let examples: Vec<String> = summary
            .osl_mismatch_examples
            .iter()
            .map(|m| m.describe())
            .collect();
        warn!(
            "OSL mismatch: {} requests got a different output length than requested, e.g. {}",
            summary.osl_mismatch_count,
            examples.join("; ")
        );
    }
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
    let resent_line = (resent > 0).then(|| {
        format!(
            "{resent} requests were sent again on a new connection: the server had closed the kept-alive connection without taking them in"
        )
    });
    if let Some(line) = &resent_line {
        warn!("{line}");
    }
    if found_closed > 0 {
        info!(
            "{found_closed} kept-alive connections were found closed by the server before a request was written on them; those requests went on new connections"
        );
    }
    resent_line
}

/// The files written, the log, and a last line when requests failed: where a glance at the
/// end of the output lands.
/// The round trip the `network_adjusted_*` metrics subtract: the one given, or the mean of
/// the probes (a warning when none succeeded).
fn network_rtt_ns(cfg: &ProfileConfig, observed: &super::observe::Observed) -> Option<f64> {
    use crate::config::NetworkLatency;
    match cfg.network_latency? {
        NetworkLatency::Fixed { mean_ms } => {
            info!(
                "Network latency: subtracting the given mean round trip of {mean_ms:.3} ms from request latency, TTFT and TTFO (network_adjusted_* metrics)"
            );
            Some(mean_ms * 1e6)
        }
        NetworkLatency::Probed { .. } => {
            let probed = observed.network.as_ref()?;
            match probed.mean_rtt_ns() {
                Some(rtt) => {
                    info!(
                        "Network latency: subtracting the measured mean round trip of {:.3} ms ({} TCP handshakes, {} failed) from request latency, TTFT and TTFO (network_adjusted_* metrics)",
                        rtt / 1e6,
                        probed.successes(),
                        probed.failures()
                    );
                    Some(rtt)
                }
                None => {
                    warn!(
                        "Network latency: none of the {} probes connected; no network_adjusted_* metrics",
                        probed.failures()
                    );
                    None
                }
            }
        }
    }
}

fn list_files(
    out: &mut impl Write,
    cfg: &ProfileConfig,
    written: &[export::Written],
    failed: u64,
    finished: u64,
) {
    for w in written {
        if let Some(label) = w.label {
            let _ = writeln!(out, "{label}: {}", w.path.display());
        }
    }
    let _ = writeln!(
        out,
        "Log File: {}",
        export::log_file(&cfg.artifact_dir).display()
    );
    // Last, where a glance at the end of the output lands.
    if failed > 0 {
        let _ = writeln!(
            out,
            "FAILED REQUESTS: {failed} of {finished} ({:.1}%); see the Error Summary above",
            failed as f64 * 100.0 / finished as f64
        );
    }
    let _ = out.flush();
}

/// How the run ended, for the exit code.
fn outcome(stop_reason: Option<StopReason>, summary: &MetricsSummary) -> Outcome {
    match stop_reason {
        Some(StopReason::Interrupted) => Outcome::Interrupted,
        Some(StopReason::ThresholdExceeded) => Outcome::ThresholdExceeded,
        Some(StopReason::ServerUnreachable) => Outcome::ServerUnreachable,
        Some(StopReason::ServerLost) => Outcome::ServerLost,
        Some(StopReason::Terminated) => Outcome::Terminated,
        Some(StopReason::WriteFailed) => Outcome::WriteFailed,
        None if summary.request_count == 0 => Outcome::AllFailed,
        None => Outcome::Success,
    }
}

/// Before the run: `--osl` asks for an output length, but a server stops at its
/// end-of-sequence token unless told not to (`ignore_eos` or `min_tokens`).
pub(super) fn osl_advisory(cfg: &ProfileConfig) -> Option<String> {
    let osl = cfg.synthetic.osl_mean?;
    let forced = ["ignore_eos", "min_tokens"]
        .iter()
        .any(|k| cfg.extra_inputs.contains_key(*k));
    (!forced).then(|| {
        format!(
            "--osl {osl} sets max_tokens only: the server may stop earlier at an end-of-sequence token. \
             Add --extra-inputs ignore_eos:true (vLLM, TensorRT-LLM, SGLang) or --extra-inputs min_tokens:{osl} \
             to get the requested length"
        )
    })
}

/// The resolved configuration in AIPerf 0.13's layout (`models.items[]`, `endpoint.urls[]`,
/// `datasets[]`, `phases[]`, `artifacts.dir`), secrets left out.
pub(super) fn input_config_json(cfg: &ProfileConfig) -> Value {
    let s = &cfg.synthetic;
    let headers: serde_json::Map<String, Value> = cfg
        .headers
        .iter()
        .map(|(k, v)| {
            let shown = if is_secret_header(k.as_str()) {
                "***"
            } else {
                v.to_str().unwrap_or("")
            };
            (k.as_str().to_string(), Value::String(shown.to_string()))
        })
        .collect();
    let models: Vec<Value> = cfg.models.iter().map(|m| json!({"name": m})).collect();
    let urls: Vec<String> = cfg.request_uris.iter().map(|u| u.to_string()).collect();
    let dataset = match &cfg.inputs.input_file {
        Some((path, kind)) => json!({
            "name": "main",
            "type": "file",
            "path": path.display().to_string(),
            "format": kind.as_str(),
            "random_seed": cfg.random_seed,
        }),
        None => json!({
            "name": "main",
            "type": "synthetic",
            "entries": s.num_entries,
            "random_seed": cfg.random_seed,
            "prompts": {
                "isl": {"mean": s.isl_mean, "stddev": s.isl_stddev},
                "osl": {"mean": s.osl_mean, "stddev": s.osl_stddev},
                "cache_bust": {"target": cfg.inputs.cache_bust.map_or("none", |t| t.as_str())},
            },
            "images": {
                "width": {"mean": s.image_width_mean, "stddev": s.image_width_stddev},
                "height": {"mean": s.image_height_mean, "stddev": s.image_height_stddev},
                "batch_size": s.image_batch_size,
                "format": format!("{:?}", s.image_format).to_lowercase(),
            },
            "turns": {"mean": s.turns.mean, "stddev": s.turns.stddev},
            "turn_delay": {
                "mean": s.turns.delay_mean_ms,
                "stddev": s.turns.delay_stddev_ms,
            },
            "turn_delay_ratio": s.turns.delay_ratio,
        }),
    };
    let dataset = cfg.inputs.public.as_ref().map_or(dataset, |p| {
        json!({
            "name": "main",
            "type": "public",
            "dataset": p.spec.name,
            "hf_subset": p.subset.as_deref(),
            "filters": p.filters.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "random_seed": cfg.random_seed,
        })
    });
    let load = &cfg.load;
    // AIPerf's phase type: the arrival pattern of a rate, or how else requests are paced.
    let pattern = |rate: Option<(f64, crate::load::schedule::ArrivalPattern)>| {
        rate.map(|(_, p)| p.as_str().to_string())
    };
    let profiling_type = if load.fixed_schedule {
        "fixed_schedule".to_string()
    } else if load.user_centric.is_some() {
        "user_centric".to_string()
    } else {
        pattern(load.rate).unwrap_or_else(|| "concurrency".into())
    };
    let mut phases = Vec::new();
    let warmup = &load.warmup;
    if cfg.warmup_request_count > 0 || load.warmup_duration.is_some() || warmup.sessions.is_some() {
        phases.push(json!({
            "name": "warmup",
            "kind": "warmup",
            "type": pattern(warmup.rate).unwrap_or_else(|| "concurrency".into()),
            "requests": (cfg.warmup_request_count > 0).then_some(cfg.warmup_request_count),
            "sessions": warmup.sessions,
            "duration": load.warmup_duration.map(|d| d.as_secs_f64()),
            "grace_period": warmup.grace.map(|d| d.as_secs_f64()),
            "concurrency": warmup.concurrency.unwrap_or(cfg.concurrency),
            "rate": warmup.rate.map(|(r, _)| r),
        }));
    }
    phases.push(json!({
        "name": "profiling",
        "kind": "profiling",
        "type": profiling_type,
        "dataset": "main",
        "requests": cfg.request_count,
        "sessions": load.sessions,
        "concurrency": cfg.concurrency,
        "rate": load.rate.map(|(r, _)| r),
        "duration": load.duration.map(|d| d.as_secs_f64()),
        "grace_period": load.grace.map(|d| d.as_secs_f64()),
        "cancellation": load.cancellation.map(|c| json!({
            "rate": c.share * 100.0,
            "delay": c.delay.as_secs_f64(),
        })),
    }));
    let mut echo = json!({
        "models": {
            "items": models,
            "strategy": cfg.model_selection.as_str(),
        },
        "endpoint": {
            "urls": urls,
            "url_strategy": "round_robin",
            "connection_reuse": cfg.connection_reuse.as_str(),
            "type": cfg.endpoint_type.as_str(),
            "streaming": cfg.streaming,
            "timeout": cfg.request_timeout.as_secs_f64(),
            "api_key": cfg.api_key.as_ref().map(|_| "***"),
            "headers": headers,
            "extra": cfg.extra_inputs,
            "use_legacy_max_tokens": cfg.use_legacy_max_tokens,
            "use_server_token_count": cfg.use_server_token_count,
        },
        "datasets": [dataset],
        "phases": phases,
        "tokenizer": {"name": cfg.tokenizer, "revision": cfg.tokenizer_revision},
        "artifacts": {"dir": cfg.artifact_dir.display().to_string()},
        "random_seed": cfg.random_seed,
        "mock_server": cfg.mock_server,
    });
    // Every other typed setting at its AIPerf config path; the values above (resolved,
    // redacted) stand where both speak.
    let root = echo.as_object_mut().expect("an object");
    for (flag, raw) in &cfg.typed_settings {
        let path = flag.path.expect("typed_settings keeps rows with a path");
        // A phase this run does not have (a repeat after the first skips the warmup).
        if let Some(phase) = path
            .strip_prefix("phases.")
            .and_then(|p| p.split('.').next())
            && !root["phases"]
                .as_array()
                .is_some_and(|list| list.iter().any(|p| p["name"] == phase))
        {
            continue;
        }
        let slot = crate::cli::flags::echo_slot(root, path);
        if slot.is_null() {
            // Credentials inside a value (a scrape URL's user:password) are shown as `***`.
            let raw: Vec<String> = raw
                .iter()
                .map(|v| {
                    cfg.secrets
                        .iter()
                        .fold(v.clone(), |v, s| v.replace(s.as_str(), "***"))
                })
                .collect();
            *slot = crate::cli::flags::echo_value(flag, &raw);
        }
    }
    // Sections AIPerf 0.13 writes in every run, at what this run did where no flag above
    // set them (a run without a terminal shows no UI).
    let mut defaults = vec![
        ("gpu_telemetry.enabled", json!(cfg.gpu_telemetry.is_some())),
        (
            "server_metrics.enabled",
            json!(cfg.server_metrics.is_some()),
        ),
        ("server_metrics.urls", json!([])),
        (
            "network_latency.enabled",
            json!(cfg.network_latency.is_some()),
        ),
        ("artifacts.auto_plot", json!(false)),
        ("artifacts.plot_required", json!(false)),
    ];
    if cfg.ui == crate::ui::UiType::None {
        defaults.push(("runtime.ui", json!("none")));
    }
    // A control hook turned on by its switch alone is its section, empty (AIPerf's shape).
    if cfg.control_hooks.reset_kv_cache.is_some() {
        defaults.push(("endpoint.reset_kv_cache", json!({})));
    }
    if cfg.control_hooks.profiler.is_some() {
        defaults.push(("endpoint.server_profiler", json!({})));
    }
    for (path, value) in defaults {
        let slot = crate::cli::flags::echo_slot(root, path);
        if slot.is_null() {
            *slot = value;
        }
    }
    echo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::flags::{self, testing};
    use crate::cli::{Cli, Command};

    /// Partners that make most flags valid: a rate for its mode, sizes for media options.
    const PARTNERS: &[&str] = &[
        "--streaming",
        "--request-rate=5",
        "--request-rate-mode=gamma",
        "--image-width-mean=8",
        "--image-height-mean=8",
        "--audio-length-mean=1",
        "--video-width=8",
        "--video-height=8",
        "--num-dataset-entries=4",
        "--output-tokens-mean=5",
        "--prompt-prefix-length=4",
        "--prompt-prefix-pool-size=1",
        "--benchmark-duration=5",
        "--warmup-duration=1",
        "--concurrency=2",
        "--request-cancellation-rate=10",
    ];

    /// `flag`'s echo after `aiperf profile [--model m] ARGS`, or why the config is invalid.
    fn echo_of(f: &flags::Flag, args: &[String]) -> Result<Value, String> {
        let model = ["--model", "m"]
            .into_iter()
            .filter(|_| f.id != "model_names");
        let argv = ["aiperf", "profile"]
            .into_iter()
            .chain(model)
            .map(String::from);
        let argv: Vec<String> = argv.chain(args.iter().cloned()).collect();
        let Command::Profile(parsed) = Cli::parse_with_sources(&argv)
            .map_err(|e| e.to_string())?
            .command
        else {
            unreachable!()
        };
        let cfg = ProfileConfig::from_args(&parsed, false).map_err(|e| e.to_string())?;
        Ok(input_config_json(&cfg))
    }

    /// Every row with a path, typed alone or with partners: the echoed config holds a value
    /// at that path. Flags that need a file or another endpoint type are counted apart.
    #[test]
    fn every_typed_flag_is_echoed_at_its_path() {
        let (mut echoed, mut invalid) = (0, Vec::new());
        for f in flags::FLAGS {
            let Some(path) = f.path else { continue };
            let typed = testing::typed(f, &testing::accepted_sample(f));
            let long = typed[0].split('=').next().unwrap().to_string();
            let partners = PARTNERS.iter().filter(|p| !p.starts_with(&long));
            let with_partners: Vec<String> = partners
                .map(|p| p.to_string())
                .chain(typed.clone())
                .collect();
            // Alone first; with partners when alone is invalid or shows nothing there (a
            // warmup setting without a warmup length has no warmup phase to sit in).
            let at_path = |args: &[String]| {
                echo_of(f, args)
                    .map(|mut echo| flags::echo_slot(echo.as_object_mut().unwrap(), path).clone())
            };
            let value = match at_path(&typed) {
                Ok(v) if !v.is_null() => Ok(v),
                _ => at_path(&with_partners),
            };
            match value {
                Ok(v) => assert!(!v.is_null(), "{typed:?}: nothing at {path}"),
                Err(e) => {
                    invalid.push((f.id, e));
                    continue;
                }
            }
            echoed += 1;
        }
        // These need a file, a public dataset, another endpoint type or schedule, or a value
        // of their own shape; a flag that joins them must be added here knowingly.
        let need_more = [
            "url",
            "reset_kv_cache_path",
            "server_profiler_start_path",
            "server_profiler_stop_path",
            "request_content_type",
            // A single_turn --input-file with image ids; --endpoint-type video_generation
            // (tested in tests/it/endpoint_flags.rs).
            "uuid_and_strip",
            "download_video_content",
            "input_file",
            "custom_dataset_type",
            "public_dataset",
            "hf_subset",
            "dataset_filter",
            "ignore_trace_delays",
            "use_think_time_only",
            "max_context_length",
            "trace_session_sample_ratio",
            "allow_dataset_wrap",
            "system_prompt_file",
            // A mooncake trace to reshape (tested in tests/it/custom_dataset.rs).
            "synthesis_speedup_ratio",
            "synthesis_prefix_len_multiplier",
            "synthesis_prefix_root_multiplier",
            "synthesis_prompt_len_multiplier",
            "synthesis_output_len_multiplier",
            "synthesis_max_isl",
            "synthesis_max_osl",
            // A benchmark name first (tested in tests/it/accuracy.rs).
            "accuracy_benchmark",
            "accuracy_tasks",
            "accuracy_n_shots",
            "accuracy_enable_cot",
            "accuracy_grader",
            "accuracy_system_prompt",
            "accuracy_verbose",
            "user_context_prompt_length",
            "seq_dist",
            "image_source",
            "rankings_passages_mean",
            "rankings_passages_stddev",
            "rankings_passages_prompt_token_mean",
            "rankings_passages_prompt_token_stddev",
            "rankings_query_prompt_token_mean",
            "rankings_query_prompt_token_stddev",
            // What they ramp, a file, an --input-file.
            "prefill_concurrency_ramp_duration",
            "request_rate_series",
            // Refused for what it locks (tested in tests/it/load_shapes.rs).
            "scenario",
            "inter_turn_delay_cap_seconds",
            // A baseten_trace (tested in tests/it/baseten_trace.rs).
            "max_idle_gap_cap_seconds",
            "replay_speedup",
            "no_open_loop_replay",
            "open_loop_strict",
            "omit_kv_hints",
            "no_force_min_tokens",
            "num_users",
            "fixed_schedule_auto_offset",
            "fixed_schedule_start_offset",
            "fixed_schedule_end_offset",
            "warmup_prefill_concurrency_ramp_duration",
            "goodput",
            "mlflow_tracking_uri",
            "mlflow_experiment",
            "mlflow_run_name",
            "mlflow_tags",
            "mlflow_parent_run_id",
            "mlflow_artifact_globs",
            "wandb_entity",
            "wandb_run_name",
            "wandb_tags",
            "gen_ai_provider",
            "server_metrics_formats",
            // Needs --network-latency-automatic (tested in tests/it/network_latency.rs).
            "network_latency_ping_interval",
        ];
        let ids: Vec<&str> = invalid.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, need_more, "{invalid:#?}");
        assert!(echoed > 100, "{echoed}");
    }
}
