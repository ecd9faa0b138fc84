//! Load-mode, stop-condition, warmup and cancellation flags, into `load::LoadOptions`.

use crate::cli::load::LoadArgs;
use crate::cli::{ArrivalMode, ProfileArgs};
use crate::config::limits::{self as limits, Zero};
use crate::endpoint::ModelSelection;
use std::sync::Arc;

use crate::load::ramp::RateSeries;
use crate::load::schedule::ArrivalPattern;
use crate::load::{Cancellation, Ramps, ScheduleWindow, UserCentric};
use crate::transport::ConnectionReuse;

use super::*;

/// The artifact directory's stimulus part, as AIPerf names it: `concurrency<N>`,
/// `request_rate<R>`, `concurrency<N>-request_rate<R>` or `fixed_schedule`.
pub fn stimulus_name(load: &LoadOptions, concurrency: u64) -> String {
    if load.fixed_schedule {
        return "fixed_schedule".into();
    }
    match (load.rate, load.concurrency_given) {
        (Some((r, _)), true) => format!("concurrency{concurrency}-request_rate{}", python_float(r)),
        (Some((r, _)), false) => format!("request_rate{}", python_float(r)),
        (None, _) => format!("concurrency{concurrency}"),
    }
}

/// A float as Python's `repr` writes it for ordinary values: `5.0`, `0.5`, `2.25`.
pub(super) fn python_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

const CONCURRENCY_BURST_WITH_RATE: &str = "--request-rate-mode concurrency_burst is closed-loop \
--concurrency and cannot pace --request-rate; drop the mode, or pick constant, poisson or gamma";

/// Load mode, stop-condition, warmup-duration and cancellation flags; `streaming` is
/// whether the run streams.
pub(super) fn check_load_modes(
    a: &ProfileArgs,
    streaming: bool,
    warnings: &mut Vec<String>,
) -> Result<LoadOptions, ConfigError> {
    let series = a
        .load
        .request_rate_series
        .as_deref()
        .map(read_rate_series)
        .transpose()?;
    if series.is_some() && a.request_rate.is_some() {
        return Err(config_error(
            "--request-rate and --request-rate-series both set the request rate; give one (the series' first point is its starting rate)",
        ));
    }
    // The name of the flag that set the rate, for the messages below.
    let rate_flag = match series {
        Some(_) => "--request-rate-series",
        None => "--request-rate",
    };
    let rate = match series.as_ref().map(|s| s.points[0].1).or(a.request_rate) {
        None => None,
        Some(r) if !(r.is_finite() && r > 0.0) => {
            return Err(config_error(format!(
                "--request-rate: {r} is not allowed; give requests per second > 0 (e.g. 5 or 0.5)"
            )));
        }
        Some(r) => Some(r),
    };
    let pattern = match (a.request_rate_mode, a.arrival_smoothness) {
        (_, Some(s)) if !(s.is_finite() && s > 0.0) => {
            return Err(config_error(format!(
                "--arrival-smoothness: {s} is not allowed; give a gamma shape > 0 (1 is Poisson)"
            )));
        }
        (ArrivalMode::Gamma, s) => ArrivalPattern::Gamma {
            shape: s.unwrap_or(1.0),
        },
        (_, Some(_)) => {
            return Err(config_error(
                "--arrival-smoothness applies to --request-rate-mode gamma only; add --request-rate-mode gamma or drop it",
            ));
        }
        (ArrivalMode::Constant, None) => ArrivalPattern::Constant,
        (ArrivalMode::Poisson, None) => ArrivalPattern::Poisson,
        (ArrivalMode::ConcurrencyBurst, None) if rate.is_some() => {
            return Err(config_error(CONCURRENCY_BURST_WITH_RATE));
        }
        // Closed-loop concurrency: no arrival pattern is drawn.
        (ArrivalMode::ConcurrencyBurst, None) => ArrivalPattern::Poisson,
    };
    if rate.is_none()
        && !matches!(
            a.request_rate_mode,
            ArrivalMode::Poisson | ArrivalMode::ConcurrencyBurst
        )
    {
        return Err(config_error(
            "--request-rate-mode needs --request-rate: give a rate, or drop the mode",
        ));
    }
    let schedule_window = ScheduleWindow {
        auto_offset: a.fixed_schedule_auto_offset,
        start_ms: a.fixed_schedule_start_offset,
        end_ms: a.fixed_schedule_end_offset,
    };
    if let (Some(s), Some(e)) = (schedule_window.start_ms, schedule_window.end_ms)
        && s > e
    {
        return Err(config_error(format!(
            "--fixed-schedule-start-offset {s} is after --fixed-schedule-end-offset {e}; give start <= end"
        )));
    }
    if a.fixed_schedule_auto_offset && a.fixed_schedule_start_offset.is_some() {
        return Err(config_error(
            "--fixed-schedule-auto-offset and --fixed-schedule-start-offset both set where the schedule starts; give one",
        ));
    }
    check_trace_flags(a, warnings)?;
    // AIPerf's rule: a timestamp on the first record of the input file means a replay,
    // unless --no-fixed-schedule (or --ignore-trace-delays) keeps the chosen load mode.
    let keep_mode = a.load.no_fixed_schedule || a.load.ignore_trace_delays;
    let fixed_schedule = a.fixed_schedule
        || (!keep_mode
            && a.input_file
                .as_deref()
                .is_some_and(first_record_has_timestamp));
    let why = if a.fixed_schedule {
        "--fixed-schedule"
    } else {
        "the input file's timestamps (a fixed schedule)"
    };
    if fixed_schedule {
        if a.input_file.is_none() {
            return Err(config_error(
                "--fixed-schedule needs --input-file with a timestamp on each entry",
            ));
        }
        if rate.is_some() {
            return Err(config_error(format!(
                "{rate_flag} cannot be used with {why}: the file's timestamps set the send times"
            )));
        }
    }
    check_schedule_flags_used(a, fixed_schedule)?;
    let duration = a
        .benchmark_duration
        .map(|d| limits::seconds("--benchmark-duration", d, Zero::Refused))
        .transpose()?;
    if duration.is_none() && a.typed("benchmark_grace_period") {
        return Err(config_error(format!(
            "--benchmark-grace-period {} applies to --benchmark-duration only (it is how long requests in flight may finish after it); add --benchmark-duration or drop it",
            a.benchmark_grace_period
        )));
    }
    let user_centric = check_user_centric(a, rate.map(|_| rate_flag), fixed_schedule)?;
    let grace = match user_centric {
        // AIPerf's default here: the users' replies are all waited for.
        Some(_) if !a.typed("benchmark_grace_period") => None,
        _ => limits::grace_seconds("--benchmark-grace-period", a.benchmark_grace_period)?,
    };
    let warmup_duration = a
        .warmup_duration
        .map(|d| limits::seconds("--warmup-duration", d, Zero::Refused))
        .transpose()?;
    if let Some(g) = a.warmup_grace_period
        && warmup_duration.is_none()
    {
        return Err(config_error(format!(
            "--warmup-grace-period {g} applies to --warmup-duration only (a counted warmup waits for all its requests); add --warmup-duration or drop it"
        )));
    }
    if warmup_duration.is_some() && a.warmup_request_count > 0 {
        return Err(config_error(
            "--warmup-duration and --warmup-request-count both end the warmup; give one",
        ));
    }
    if fixed_schedule && (warmup_duration.is_some() || a.warmup_request_count > 0) {
        return Err(config_error(format!(
            "--warmup-request-count/--warmup-duration cannot be used with {why}: a replayed trace has no warmup"
        )));
    }
    let cancellation = match a.request_cancellation_rate {
        None if a.typed("request_cancellation_delay") => {
            return Err(config_error(format!(
                "--request-cancellation-delay {} needs --request-cancellation-rate: give the share of requests to cancel, or drop the delay",
                a.request_cancellation_delay
            )));
        }
        None => None,
        Some(p) if !(p.is_finite() && p > 0.0 && p <= 100.0) => {
            return Err(config_error(format!(
                "--request-cancellation-rate: {p} is not allowed; give a percentage in (0, 100]"
            )));
        }
        Some(p) => {
            let delay = limits::seconds(
                "--request-cancellation-delay",
                a.request_cancellation_delay,
                Zero::Allowed,
            )?;
            Some(Cancellation {
                share: p / 100.0,
                delay,
            })
        }
    };
    if a.conversation_num == Some(0) {
        return Err(config_error(
            "--conversation-num: 0 is not allowed; give 1 or more conversations",
        ));
    }
    if fixed_schedule && a.conversation_num.is_some() {
        return Err(config_error(format!(
            "--conversation-num cannot be used with {why}: the schedule sends every conversation in its window"
        )));
    }
    let ramps = check_ramps(a, rate.is_some(), series)?;
    let warmup = check_warmup(a, rate.map(|r| (r, pattern)), &ramps, streaming, warnings)?;
    // The warmup's ramps follow the profiling ones unless its own were given.
    let own_warmup = WarmupOptions {
        ramps: Ramps::default(),
        ..warmup.clone()
    };
    if fixed_schedule && own_warmup != WarmupOptions::default() {
        return Err(config_error(format!(
            "--num-warmup-sessions/--warmup-*: cannot be used with {why}: a replayed trace has no warmup"
        )));
    }
    Ok(LoadOptions {
        rate: rate.map(|r| (r, pattern)),
        concurrency_given: a.concurrency.is_some(),
        fixed_schedule,
        schedule_window,
        // A replay sends every entry in its window, whatever --request-count says (AIPerf
        // ignores it too; config warns).
        request_count_given: a.request_count.filter(|_| !fixed_schedule),
        duration,
        grace,
        warmup_duration,
        cancellation,
        sessions: a.conversation_num,
        warmup,
        ignore_trace_delays: a.load.ignore_trace_delays,
        turn_delay_cap: check_turn_delay_cap(a)?,
        ramps,
        prefill_concurrency: check_prefill(
            "--prefill-concurrency",
            a.load.prefill_concurrency,
            a.concurrency,
            "--concurrency",
            streaming,
            rate.is_some() || fixed_schedule || user_centric.is_some(),
            warnings,
        )?,
        user_centric,
    })
}

/// `--request-rate-series PATH`, read and checked as AIPerf does: a JSON list of points or
/// `{"points": [...]}`, each exactly `{"time_s": >= 0, "qps": > 0}`, two or more, with
/// strictly increasing times.
fn read_rate_series(path: &std::path::Path) -> Result<Arc<RateSeries>, ConfigError> {
    let flag = format!("--request-rate-series {}", path.display());
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error(format!("{flag}: cannot read the file: {e}")))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| config_error(format!("{flag}: not valid JSON: {e}")))?;
    let shape = "give a JSON list of points or {\"points\": [...]}, each {\"time_s\": seconds, \"qps\": rate}";
    let points = match &doc {
        serde_json::Value::Array(p) => p,
        serde_json::Value::Object(o) if o.len() == 1 => match o.get("points") {
            Some(serde_json::Value::Array(p)) => p,
            Some(_) => {
                return Err(config_error(format!(
                    "{flag}: points must be a list; {shape}"
                )));
            }
            None => {
                return Err(config_error(format!(
                    "{flag}: the one top-level key must be points; {shape}"
                )));
            }
        },
        _ => return Err(config_error(format!("{flag}: {shape}"))),
    };
    let mut out = Vec::with_capacity(points.len());
    for (i, p) in points.iter().enumerate() {
        let bad = |why: &str| config_error(format!("{flag}: point {i}: {why}; {shape}"));
        let obj = p.as_object().ok_or_else(|| bad("not an object"))?;
        if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "time_s" | "qps")) {
            return Err(bad(&format!("unknown key {k:?}")));
        }
        let num = |k: &str| {
            obj.get(k)
                .and_then(serde_json::Value::as_f64)
                .ok_or_else(|| bad(&format!("{k} must be a number")))
        };
        let (t, q) = (num("time_s")?, num("qps")?);
        if !(t.is_finite() && t >= 0.0) {
            return Err(bad(&format!("time_s {t} must be >= 0")));
        }
        if !(q.is_finite() && q > 0.0) {
            return Err(bad(&format!("qps {q} must be > 0")));
        }
        if t > limits::MAX_SECONDS {
            return Err(bad(&format!("time_s {t} is more than one year")));
        }
        if let Some(&(prev, _)) = out.last()
            && t <= prev
        {
            return Err(bad(&format!(
                "time_s {t} is not after the previous point's {prev}: times must be strictly increasing"
            )));
        }
        out.push((t, q));
    }
    if out.len() < 2 {
        return Err(config_error(format!(
            "{flag}: {} point(s); a series needs at least two",
            out.len()
        )));
    }
    Ok(Arc::new(RateSeries { points: out }))
}

/// `--inter-turn-delay-cap-seconds`: the input file's turn delays, cut to the cap.
fn check_turn_delay_cap(a: &ProfileArgs) -> Result<Option<std::time::Duration>, ConfigError> {
    let Some(cap) = a.load.inter_turn_delay_cap_seconds else {
        return Ok(None);
    };
    let cap = limits::seconds("--inter-turn-delay-cap-seconds", cap, Zero::Allowed)?;
    if a.input_file.is_none() {
        return Err(config_error(
            "--inter-turn-delay-cap-seconds caps the turn delays of an --input-file (synthetic conversations draw theirs from --conversation-turn-delay-*); add --input-file or drop it",
        ));
    }
    if a.load.ignore_trace_delays {
        return Err(config_error(
            "--inter-turn-delay-cap-seconds changes nothing with --ignore-trace-delays, which drops every turn delay; give one",
        ));
    }
    Ok(Some(cap))
}

/// A planned run longer than this is announced with its expected length.
const LONG_PLAN_S: f64 = 3600.0;

/// `--request-rate` with a request count and no `--benchmark-duration`: the sends span
/// (count - 1) / rate seconds (the first goes at once). A tiny rate would otherwise send one
/// request and then wait silently for days: a span past the one-year bound is refused, one
/// past an hour gets a warning with its length.
pub(super) fn check_rate_span(
    load: &LoadOptions,
    count: u64,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let (Some((rate, _)), None, false) = (load.rate, load.duration, load.fixed_schedule) else {
        return Ok(());
    };
    // Where the last arrival falls once the ramp and any rate series have shaped the rate.
    let full_rate_ns = (count.saturating_sub(1) as f64 / rate * 1e9).min(u64::MAX as f64);
    let span = load.ramps.arrival_offset_ns(full_rate_ns as u64, rate) as f64 / 1e9;
    let what = format!(
        "--request-rate {rate:?}: {count} requests take about {} to send",
        limits::about(span)
    );
    if span > limits::MAX_SECONDS {
        return Err(config_error(format!(
            "{what}, more than one year; raise the rate (it is requests per second) or lower --request-count"
        )));
    }
    if span > LONG_PLAN_S {
        warnings.push(format!(
            "{what}; the rate is requests per second (--benchmark-duration bounds the run)"
        ));
    }
    Ok(())
}

/// The warmup's own stop condition, grace period and load settings.
pub(super) fn check_warmup(
    a: &ProfileArgs,
    rate: Option<(f64, ArrivalPattern)>,
    ramps: &Ramps,
    streaming: bool,
    warnings: &mut Vec<String>,
) -> Result<WarmupOptions, ConfigError> {
    if a.num_warmup_sessions == Some(0) {
        return Err(config_error(
            "--num-warmup-sessions: 0 is not allowed; give 1 or more, or drop it for no warmup",
        ));
    }
    if a.num_warmup_sessions.is_some() && a.warmup_request_count > 0 {
        return Err(config_error(
            "--num-warmup-sessions and --warmup-request-count both end the warmup; give one",
        ));
    }
    let grace = match a.warmup_grace_period {
        None => None,
        Some(g) => limits::grace_seconds("--warmup-grace-period", g)?,
    };
    if a.warmup_concurrency == Some(0) {
        return Err(config_error(
            "--warmup-concurrency: 0 is not allowed; give 1 or more requests in flight",
        ));
    }
    let warmup_rate = match a.warmup_request_rate {
        Some(r) if !(r.is_finite() && r > 0.0) => {
            return Err(config_error(format!(
                "--warmup-request-rate: {r} is not allowed; give requests per second > 0"
            )));
        }
        given => given.or(rate.map(|(r, _)| r)),
    };
    let pattern = match a.warmup_arrival_pattern {
        Some(ArrivalMode::Constant) => Some(ArrivalPattern::Constant),
        Some(ArrivalMode::Poisson) => Some(ArrivalPattern::Poisson),
        Some(ArrivalMode::Gamma) => Some(ArrivalPattern::Gamma {
            shape: a.arrival_smoothness.unwrap_or(1.0),
        }),
        Some(ArrivalMode::ConcurrencyBurst) if warmup_rate.is_some() => {
            return Err(config_error(
                CONCURRENCY_BURST_WITH_RATE
                    .replace("--request-rate-mode", "--warmup-arrival-pattern"),
            ));
        }
        Some(ArrivalMode::ConcurrencyBurst) | None => None,
    };
    if pattern.is_some() && warmup_rate.is_none() {
        return Err(config_error(
            "--warmup-arrival-pattern needs a rate: give --warmup-request-rate or --request-rate",
        ));
    }
    let prefill_concurrency = check_prefill(
        "--warmup-prefill-concurrency",
        a.load.warmup_prefill_concurrency,
        a.warmup_concurrency.or(a.concurrency),
        "--warmup-concurrency/--concurrency",
        streaming,
        warmup_rate.is_some(),
        warnings,
    )?;
    let warmup_prefill = prefill_concurrency.or(a.load.prefill_concurrency).is_some();
    let l = &a.load;
    Ok(WarmupOptions {
        sessions: a.num_warmup_sessions,
        grace,
        concurrency: a.warmup_concurrency,
        prefill_concurrency,
        ramps: check_warmup_ramps(a, ramps, warmup_rate.is_some(), warmup_prefill)?,
        ramps_given: l.warmup_concurrency_ramp_duration.is_some()
            || l.warmup_prefill_concurrency_ramp_duration.is_some()
            || l.warmup_request_rate_ramp_duration.is_some(),
        rate: warmup_rate.map(|r| {
            let main = rate.map(|(_, p)| p).unwrap_or(ArrivalPattern::Poisson);
            (r, pattern.unwrap_or(main))
        }),
    })
}

/// `--fixed-schedule-*` shape a fixed schedule: without one (`--fixed-schedule` or a
/// timestamped input file) they would do nothing.
pub(super) fn check_schedule_flags_used(
    a: &ProfileArgs,
    fixed_schedule: bool,
) -> Result<(), ConfigError> {
    let given = [
        ("--fixed-schedule-auto-offset", a.fixed_schedule_auto_offset),
        (
            "--fixed-schedule-start-offset",
            a.fixed_schedule_start_offset.is_some(),
        ),
        (
            "--fixed-schedule-end-offset",
            a.fixed_schedule_end_offset.is_some(),
        ),
    ];
    match given.iter().find(|(_, g)| *g) {
        Some((flag, _)) if !fixed_schedule => Err(config_error(format!(
            "{flag} applies to a fixed schedule only; add --fixed-schedule with a timestamped --input-file, or drop it"
        ))),
        _ => Ok(()),
    }
}

/// Servers, models, connection use and the session header, checked.
pub(super) struct ServerOptions {
    pub(super) models: Vec<String>,
    pub(super) model_selection: ModelSelection,
    pub(super) connection_reuse: ConnectionReuse,
    pub(super) session_header: http::HeaderName,
}

/// `--model` (several), `--model-selection-strategy`, `--connection-reuse-strategy`,
/// `--session-header` and `--request-content-type`.
pub(super) fn check_servers_and_models(
    a: &ProfileArgs,
    endpoint: crate::endpoint::EndpointType,
    warnings: &mut Vec<String>,
) -> Result<ServerOptions, ConfigError> {
    let l = &a.load;
    let models: Vec<String> = a
        .model_names
        .iter()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    let model_selection: ModelSelection = l.model_selection_strategy.into();
    if models.len() < 2 && a.typed("model_selection_strategy") {
        warnings.push(format!(
            "--model-selection-strategy {} is ignored: it picks among several models, and every request names the one given",
            model_selection.as_str()
        ));
    }
    let session_header = check_session_header_and_content_type(
        &l.session_header,
        &l.request_content_type,
        a.typed("request_content_type"),
        endpoint,
    )?;
    Ok(ServerOptions {
        models,
        model_selection,
        connection_reuse: l.connection_reuse_strategy.into(),
        session_header,
    })
}

const AGENTIC: &str = "agentic trace replay (dag_jsonl)";

/// Trace knobs of dataset types that are not read here (weka, agentic replay)
/// are refused rather than ignored; `--ignore-trace-delays` and `--no-fixed-schedule`
/// are checked against the schedule.
pub(super) fn check_trace_flags(
    a: &ProfileArgs,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let l = &a.load;
    check_scenario(l, warnings)?;
    let foreign = [
        ("--use-think-time-only", l.use_think_time_only, "weka_trace"),
        (
            "--max-context-length",
            l.max_context_length.is_some(),
            "weka_trace",
        ),
        ("--allow-dataset-wrap", l.allow_dataset_wrap, AGENTIC),
        (
            "--trajectory-start-min-ratio",
            l.trajectory_start_min_ratio.is_some(),
            AGENTIC,
        ),
        (
            "--trajectory-start-max-ratio",
            l.trajectory_start_max_ratio.is_some(),
            AGENTIC,
        ),
        ("--burst-phase-starts", l.burst_phase_starts, AGENTIC),
        (
            "--system-idle-gap-cap-seconds",
            l.system_idle_gap_cap_seconds.is_some(),
            AGENTIC,
        ),
        (
            "--agentic-cache-warmup-duration",
            l.agentic_cache_warmup_duration.is_some(),
            AGENTIC,
        ),
        (
            "--agentic-warmup-grace-period",
            l.agentic_warmup_grace_period.is_some(),
            AGENTIC,
        ),
        (
            "--trace-idle-gap-cap-seconds",
            l.trace_idle_gap_cap_seconds.is_some(),
            "weka_trace",
        ),
        (
            "--hf-weka-dataset",
            l.hf_weka_dataset.is_some(),
            "weka_hf (Weka agentic trace)",
        ),
    ];
    if let Some((flag, _, kind)) = foreign.iter().find(|(_, given, _)| *given) {
        return Err(config_error(format!(
            "{flag} applies to {kind} datasets only, which this aiperf does not read (it reads single_turn, multi_turn, random_pool, mooncake_trace, raw_payload and baseten_trace); drop the flag"
        )));
    }
    if l.no_fixed_schedule && a.fixed_schedule {
        return Err(config_error(
            "--no-fixed-schedule and --fixed-schedule contradict each other; give one",
        ));
    }
    if l.ignore_trace_delays && a.fixed_schedule {
        return Err(config_error(
            "--ignore-trace-delays cannot be used with --fixed-schedule: a fixed schedule sends at the file's timestamps; drop one",
        ));
    }
    if l.ignore_trace_delays && a.input_file.is_none() {
        return Err(config_error(
            "--ignore-trace-delays applies to an --input-file with timestamps or delays; add --input-file or drop it",
        ));
    }
    Ok(())
}

/// AIPerf 0.13's scenarios: each locks a benchmark's invariants.
const SCENARIOS: [&str; 1] = ["inferencex-agentx-mvp"];

/// `--scenario` and `--unsafe-override`: AIPerf's only scenario replays Weka agentic
/// traces, which are not read here, so a known name is refused for that, an unknown one
/// with the list.
fn check_scenario(l: &LoadArgs, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    let Some(name) = &l.scenario else {
        if l.unsafe_override {
            warnings.push(
                "--unsafe-override has no effect without --scenario (it turns a scenario's lock errors into warnings)"
                    .to_string(),
            );
        }
        return Ok(());
    };
    if !SCENARIOS.contains(&name.as_str()) {
        return Err(config_error(format!(
            "--scenario {name:?}: unknown scenario; AIPerf 0.13's scenarios: {}",
            SCENARIOS.join(", ")
        )));
    }
    Err(config_error(format!(
        "--scenario {name} locks agentic replay of Weka traces (weka_trace, weka_hf and the semianalysis_cc_traces_weka_* sets), which this aiperf does not read; --unsafe-override cannot lift that; drop --scenario"
    )))
}

/// `--concurrency-ramp-duration` needs `--concurrency`, `--prefill-concurrency-ramp-duration`
/// `--prefill-concurrency`, `--request-rate-ramp-duration` a rate; `series` is
/// `--request-rate-series`, which takes over where the rate ramp ends.
pub(super) fn check_ramps(
    a: &ProfileArgs,
    rate_given: bool,
    series: Option<Arc<RateSeries>>,
) -> Result<Ramps, ConfigError> {
    let l = &a.load;
    let ramp = |flag: &str, v: Option<f64>, needs: Option<(bool, &str)>| {
        let d = v
            .map(|d| limits::seconds(flag, d, Zero::Refused))
            .transpose()?;
        match needs {
            Some((false, what)) if d.is_some() => Err(config_error(format!(
                "{flag} ramps {what} up to its value; add {what} or drop the ramp"
            ))),
            _ => Ok(d),
        }
    };
    Ok(Ramps {
        concurrency: ramp(
            "--concurrency-ramp-duration",
            l.concurrency_ramp_duration,
            Some((a.concurrency.is_some(), "--concurrency")),
        )?,
        prefill: ramp(
            "--prefill-concurrency-ramp-duration",
            l.prefill_concurrency_ramp_duration,
            Some((l.prefill_concurrency.is_some(), "--prefill-concurrency")),
        )?,
        rate: ramp(
            "--request-rate-ramp-duration",
            l.request_rate_ramp_duration,
            Some((rate_given, "--request-rate")),
        )?,
        series,
    })
}

/// The warmup's ramps: each `--warmup-*-ramp-duration`, else the profiling one, applied
/// only where the warmup has what it ramps (a rate ramp given for the warmup itself needs
/// a warmup rate).
fn check_warmup_ramps(
    a: &ProfileArgs,
    profiling: &Ramps,
    warmup_rate: bool,
    warmup_prefill: bool,
) -> Result<Ramps, ConfigError> {
    let l = &a.load;
    let own = |flag: &str, v: Option<f64>| {
        v.map(|d| limits::seconds(flag, d, Zero::Refused))
            .transpose()
    };
    let concurrency = own(
        "--warmup-concurrency-ramp-duration",
        l.warmup_concurrency_ramp_duration,
    )?;
    if concurrency.is_some() && a.warmup_concurrency.or(a.concurrency).is_none() {
        return Err(config_error(
            "--warmup-concurrency-ramp-duration ramps the warmup's concurrency up to its value; add --warmup-concurrency N (or --concurrency N) or drop the ramp",
        ));
    }
    let prefill = own(
        "--warmup-prefill-concurrency-ramp-duration",
        l.warmup_prefill_concurrency_ramp_duration,
    )?;
    if prefill.is_some() && !warmup_prefill {
        return Err(config_error(
            "--warmup-prefill-concurrency-ramp-duration ramps the warmup's prefill concurrency up to its value; add --warmup-prefill-concurrency N (or --prefill-concurrency N) or drop the ramp",
        ));
    }
    let rate = own(
        "--warmup-request-rate-ramp-duration",
        l.warmup_request_rate_ramp_duration,
    )?;
    if rate.is_some() && !warmup_rate {
        return Err(config_error(
            "--warmup-request-rate-ramp-duration needs a warmup paced by a rate; add --warmup-request-rate (or --request-rate), or drop the ramp",
        ));
    }
    Ok(Ramps {
        concurrency: concurrency.or(profiling.concurrency),
        prefill: prefill.or(profiling.prefill.filter(|_| warmup_prefill)),
        rate: rate.or(profiling.rate.filter(|_| warmup_rate)),
        series: None,
    })
}

/// `--prefill-concurrency N` (or its warmup twin): the first token is only seen in a
/// stream, and N prefills cannot outnumber the requests in flight: the concurrency given, or
/// the closed loop's default of 1. At that number the gate never closes (a warning).
fn check_prefill(
    flag: &str,
    n: Option<u64>,
    concurrency: Option<u64>,
    concurrency_flag: &str,
    streaming: bool,
    open_loop: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<u64>, ConfigError> {
    let Some(n) = n else {
        return Ok(None);
    };
    if n == 0 {
        return Err(config_error(format!(
            "{flag}: 0 is not allowed; give 1 or more requests waiting for their first token"
        )));
    }
    if !streaming {
        return Err(config_error(format!(
            "{flag} needs --streaming: a slot is freed at the first streamed token; add --streaming or drop {flag}"
        )));
    }
    let (c, in_flight) = match concurrency {
        Some(c) => (c, format!("{concurrency_flag} ({c})")),
        None if !open_loop => (1, format!("the concurrency (1 without {concurrency_flag})")),
        None => return Ok(Some(n)),
    };
    if n > c {
        return Err(config_error(format!(
            "{flag} ({n}) cannot be greater than {in_flight}; lower it or raise the concurrency"
        )));
    }
    if n == c {
        warnings.push(format!(
            "{flag} {n} changes nothing: it equals {in_flight}, and no more requests than that are ever in flight"
        ));
    }
    Ok(Some(n))
}

/// `--user-centric-rate QPS --num-users U`, with AIPerf's rules: both or neither, no other
/// pacing, and conversations of two or more turns (one turn per user would just be a rate).
fn check_user_centric(
    a: &ProfileArgs,
    rate_flag: Option<&str>,
    fixed_schedule: bool,
) -> Result<Option<UserCentric>, ConfigError> {
    let (qps, users) = match (a.load.user_centric_rate, a.load.num_users) {
        (None, None) => return Ok(None),
        (None, Some(_)) => {
            return Err(config_error(
                "--num-users applies to --user-centric-rate only; add --user-centric-rate QPS or drop it",
            ));
        }
        (Some(_), None) => {
            return Err(config_error(
                "--user-centric-rate needs --num-users: give how many users share the rate (e.g. --num-users 15)",
            ));
        }
        (Some(q), Some(u)) => (q, u),
    };
    if !(qps.is_finite() && qps > 0.0) {
        return Err(config_error(format!(
            "--user-centric-rate: {qps} is not allowed; give requests per second > 0 (e.g. 1 or 0.5)"
        )));
    }
    if users == 0 {
        return Err(config_error(
            "--num-users: 0 is not allowed; give 1 or more users",
        ));
    }
    if rate_flag.is_some() || a.typed("request_rate_mode") {
        return Err(config_error(format!(
            "--user-centric-rate cannot be used with {} or --request-rate-mode/--arrival-pattern: it sets its own send times; give one of them",
            rate_flag.unwrap_or("--request-rate")
        )));
    }
    if fixed_schedule {
        return Err(config_error(
            "--user-centric-rate cannot be used with a fixed schedule (--fixed-schedule or a timestamped input file); add --no-fixed-schedule or drop it",
        ));
    }
    if a.conversation_turn_mean < 2 {
        return Err(config_error(format!(
            "--user-centric-rate needs multi-turn conversations: --conversation-turn-mean (--session-turns-mean) is {}; give 2 or more, or use --request-rate for single requests",
            a.conversation_turn_mean
        )));
    }
    if let Some(n) = a.conversation_num.filter(|&n| n < users) {
        return Err(config_error(format!(
            "--conversation-num ({n}) cannot be less than --num-users ({users}): every user needs a conversation"
        )));
    }
    if let Some(n) = a.request_count.filter(|&n| n < users) {
        return Err(config_error(format!(
            "--request-count ({n}) cannot be less than --num-users ({users}): every user needs a request"
        )));
    }
    Ok(Some(UserCentric { qps, users }))
}
