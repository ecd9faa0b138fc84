//! One row per `aiperf profile` flag: what clap's definition does not say about it. Its
//! place in AIPerf's YAML config (schema 2.0), whether a comma list sweeps it and how the
//! run's echoed `input_config` shows it. The YAML reader (`config_file`), the sweep lists
//! (`sweep::lists`), the echo (`profile::report::input_config_json`) and `--help` all read
//! this table; a test checks that every flag has exactly one row and that every row with a
//! path round-trips through all of them.
//!
//! Paths are dotted under `benchmark:`, naming list elements by their name
//! (`datasets.main.prompts.isl.mean`, `phases.warmup.concurrency`); a leading `^` marks a
//! key of the file's top level, outside `benchmark:` (`^random_seed`).

use serde_json::{Map, Value};

/// What a flag's value is, for reading it from YAML and echoing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Text,
    /// A switch: `true` types the flag, `false` leaves it out.
    Switch,
    /// Several values: a YAML list gives the flag once per item, a mapping once per
    /// `key:value`.
    List,
    /// A switch that turns something off: `false` types it (`gpu_telemetry.enabled:
    /// false` is `--no-gpu-telemetry`).
    Off,
}

/// One flag's row.
#[derive(Debug)]
pub struct Flag {
    /// clap's id: the field name in the argument structs.
    pub id: &'static str,
    /// Where the value sits in AIPerf's YAML config; `None`: not a config key (flags of
    /// this build only, or process settings).
    pub path: Option<&'static str>,
    pub kind: Kind,
    /// A comma list runs one profile per value (`--concurrency 1,4,16`); only `Int` and
    /// `Float` flags.
    pub sweep: bool,
    /// Echoed as `***`.
    pub secret: bool,
}

const fn row(id: &'static str, path: &'static str, kind: Kind) -> Flag {
    Flag {
        id,
        path: Some(path),
        kind,
        sweep: false,
        secret: false,
    }
}

const fn sweep(id: &'static str, path: &'static str, kind: Kind) -> Flag {
    Flag {
        id,
        path: Some(path),
        kind,
        sweep: true,
        secret: false,
    }
}

const fn secret(id: &'static str, path: &'static str, kind: Kind) -> Flag {
    Flag {
        id,
        path: Some(path),
        kind,
        sweep: false,
        secret: true,
    }
}

/// A flag with no place in the config file.
const fn cli_only(id: &'static str, kind: Kind) -> Flag {
    Flag {
        id,
        path: None,
        kind,
        sweep: false,
        secret: false,
    }
}

use Kind::{Float, Int, List, Off, Switch, Text};

/// Every `aiperf profile` flag but `--help`. Paths are AIPerf's (its CLI-to-config
/// converter); a flag AIPerf maps onto a key another flag owns (`--verbose` sets
/// `logging.level`, `--fixed-schedule` sets `phases.profiling.type`) has none here.
pub const FLAGS: &[Flag] = &[
    // Endpoint
    row("model_names", "models.items", List),
    row("model_selection_strategy", "models.strategy", Text),
    row("endpoint_type", "endpoint.type", Text),
    row("custom_endpoint", "endpoint.path", Text),
    row("url", "endpoint.urls", List),
    row("url_strategy", "endpoint.url_strategy", Text),
    row("streaming", "endpoint.streaming", Switch),
    row("request_timeout_seconds", "endpoint.timeout", Float),
    // AIPerf's YAML turns these on by their sections' presence; a key inside one types
    // its flag, which turns it on too.
    cli_only("reset_kv_cache", Switch),
    row(
        "reset_kv_cache_timeout_seconds",
        "endpoint.reset_kv_cache.timeout_seconds",
        Float,
    ),
    row("reset_kv_cache_path", "endpoint.reset_kv_cache.path", Text),
    cli_only("server_profiler", Switch),
    row(
        "server_profiler_timeout_seconds",
        "endpoint.server_profiler.timeout_seconds",
        Float,
    ),
    row(
        "server_profiler_start_path",
        "endpoint.server_profiler.start_path",
        Text,
    ),
    row(
        "server_profiler_stop_path",
        "endpoint.server_profiler.stop_path",
        Text,
    ),
    row("transport", "endpoint.transport", Text),
    secret("api_key", "endpoint.api_key", Text),
    row(
        "use_server_token_count",
        "endpoint.use_server_token_count",
        Switch,
    ),
    row(
        "use_legacy_max_tokens",
        "endpoint.use_legacy_max_tokens",
        Switch,
    ),
    row(
        "connection_reuse_strategy",
        "endpoint.connection_reuse",
        Text,
    ),
    row("session_header", "endpoint.session_header", Text),
    row(
        "request_content_type",
        "endpoint.request_content_type",
        Text,
    ),
    row("uuid_and_strip", "endpoint.uuid_and_strip", Switch),
    row(
        "download_video_content",
        "endpoint.download_video_content",
        Switch,
    ),
    row("extra_inputs", "endpoint.extra", List),
    secret("headers", "endpoint.headers", List),
    row(
        "wait_for_model_timeout",
        "endpoint.wait_for_model_timeout",
        Float,
    ),
    row(
        "wait_for_model_interval",
        "endpoint.wait_for_model_interval",
        Float,
    ),
    row("wait_for_model_mode", "endpoint.wait_for_model_mode", Text),
    // This build's: a cap on one response, the built-in server.
    cli_only("max_response_bytes", Int),
    cli_only("mock_server", Switch),
    // Input
    row("random_seed", "^random_seed", Int),
    cli_only("config", Text),
    row("num_dataset_entries", "datasets.main.entries", Int),
    row("input_file", "datasets.main.path", Text),
    row("custom_dataset_type", "datasets.main.format", Text),
    row("dataset_sampling_strategy", "datasets.main.sampling", Text),
    row("public_dataset", "datasets.main.dataset", Text),
    row("hf_subset", "datasets.main.hf_subset", Text),
    row("dataset_filter", "datasets.main.filters", List),
    row(
        "ignore_trace_delays",
        "datasets.main.ignore_trace_delays",
        Switch,
    ),
    row(
        "use_think_time_only",
        "datasets.main.use_think_time_only",
        Switch,
    ),
    row(
        "max_context_length",
        "datasets.main.max_context_length",
        Int,
    ),
    row(
        "trace_session_sample_ratio",
        "datasets.main.trace_session_sample_ratio",
        Float,
    ),
    row(
        "allow_dataset_wrap",
        "datasets.main.synthesis.allow_dataset_wrap",
        Switch,
    ),
    cli_only("no_allow_dataset_wrap", Switch),
    // Tokenizer
    row("tokenizer", "tokenizer.name", Text),
    row("tokenizer_revision", "tokenizer.revision", Text),
    row(
        "tokenizer_trust_remote_code",
        "tokenizer.trust_remote_code",
        Switch,
    ),
    row(
        "apply_chat_template",
        "tokenizer.apply_chat_template",
        Switch,
    ),
    // Prompt
    sweep("isl_mean", "datasets.main.prompts.isl.mean", Int),
    sweep("isl_stddev", "datasets.main.prompts.isl.stddev", Float),
    sweep("osl_mean", "datasets.main.prompts.osl.mean", Int),
    sweep("osl_stddev", "datasets.main.prompts.osl.stddev", Float),
    row("isl_block_size", "datasets.main.prompts.block_size", Int),
    row("system_prompt", "datasets.main.system_prompt", Text),
    row(
        "system_prompt_file",
        "datasets.main.system_prompt_file",
        Text,
    ),
    row("prompt_batch_size", "datasets.main.prompts.batch_size", Int),
    row("prompt_corpus", "datasets.main.prompts.corpus", Text),
    row(
        "cache_bust",
        "datasets.main.prompts.cache_bust.target",
        Text,
    ),
    // Synthesis
    row(
        "synthesis_speedup_ratio",
        "datasets.main.synthesis.speedup_ratio",
        Float,
    ),
    row(
        "synthesis_prefix_len_multiplier",
        "datasets.main.synthesis.prefix_len_multiplier",
        Float,
    ),
    row(
        "synthesis_prefix_root_multiplier",
        "datasets.main.synthesis.prefix_root_multiplier",
        Int,
    ),
    row(
        "synthesis_prompt_len_multiplier",
        "datasets.main.synthesis.prompt_len_multiplier",
        Float,
    ),
    row(
        "synthesis_output_len_multiplier",
        "datasets.main.synthesis.output_len_multiplier",
        Float,
    ),
    row("synthesis_max_isl", "datasets.main.synthesis.max_isl", Int),
    row("synthesis_max_osl", "datasets.main.synthesis.max_osl", Int),
    // Accuracy
    row("accuracy_benchmark", "accuracy.benchmark", Text),
    row("accuracy_tasks", "accuracy.tasks", List),
    row("accuracy_n_shots", "accuracy.n_shots", Int),
    row("accuracy_enable_cot", "accuracy.enable_cot", Switch),
    cli_only("accuracy_no_enable_cot", Switch),
    row("accuracy_grader", "accuracy.grader", Text),
    row("accuracy_system_prompt", "accuracy.system_prompt", Text),
    row("accuracy_verbose", "accuracy.verbose", Switch),
    row(
        "shared_system_prompt_length",
        "datasets.main.prefix_prompts.shared_system_length",
        Int,
    ),
    row(
        "user_context_prompt_length",
        "datasets.main.prefix_prompts.user_context_length",
        Int,
    ),
    row(
        "prompt_prefix_pool_size",
        "datasets.main.prefix_prompts.pool_size",
        Int,
    ),
    row(
        "prompt_prefix_length",
        "datasets.main.prefix_prompts.length",
        Int,
    ),
    row(
        "seq_dist",
        "datasets.main.prompts.sequence_distribution",
        Text,
    ),
    cli_only("random_range_ratio", Float),
    // Image (sweeping them is this build's)
    sweep("image_width_mean", "datasets.main.images.width.mean", Int),
    row(
        "image_width_stddev",
        "datasets.main.images.width.stddev",
        Float,
    ),
    sweep("image_height_mean", "datasets.main.images.height.mean", Int),
    row(
        "image_height_stddev",
        "datasets.main.images.height.stddev",
        Float,
    ),
    sweep("image_batch_size", "datasets.main.images.batch_size", Int),
    row("image_format", "datasets.main.images.format", Text),
    row("image_source", "datasets.main.images.source", Text),
    row(
        "image_source_sampling",
        "datasets.main.images.source_sampling",
        Text,
    ),
    // Audio
    row(
        "audio_length_mean",
        "datasets.main.audio.length.mean",
        Float,
    ),
    row(
        "audio_length_stddev",
        "datasets.main.audio.length.stddev",
        Float,
    ),
    row("audio_batch_size", "datasets.main.audio.batch_size", Int),
    row("audio_format", "datasets.main.audio.format", Text),
    row("audio_depths", "datasets.main.audio.depths", List),
    row(
        "audio_sample_rates",
        "datasets.main.audio.sample_rates",
        List,
    ),
    row("audio_num_channels", "datasets.main.audio.channels", Int),
    // Video
    row("video_width", "datasets.main.video.width", Int),
    row("video_height", "datasets.main.video.height", Int),
    row("video_duration", "datasets.main.video.duration", Float),
    row("video_fps", "datasets.main.video.fps", Int),
    row("video_batch_size", "datasets.main.video.batch_size", Int),
    row("video_synth_type", "datasets.main.video.synth_type", Text),
    row("video_format", "datasets.main.video.format", Text),
    row("video_codec", "datasets.main.video.codec", Text),
    row(
        "video_audio_num_channels",
        "datasets.main.video.audio.channels",
        Int,
    ),
    row(
        "video_audio_sample_rate",
        "datasets.main.video.audio.sample_rate",
        Int,
    ),
    row("video_audio_depth", "datasets.main.video.audio.depth", Int),
    row("video_audio_codec", "datasets.main.video.audio.codec", Text),
    // Rankings
    row(
        "rankings_passages_mean",
        "datasets.main.rankings.passages.mean",
        Int,
    ),
    row(
        "rankings_passages_stddev",
        "datasets.main.rankings.passages.stddev",
        Int,
    ),
    row(
        "rankings_passages_prompt_token_mean",
        "datasets.main.rankings.passage_tokens.mean",
        Int,
    ),
    row(
        "rankings_passages_prompt_token_stddev",
        "datasets.main.rankings.passage_tokens.stddev",
        Int,
    ),
    row(
        "rankings_query_prompt_token_mean",
        "datasets.main.rankings.query_tokens.mean",
        Int,
    ),
    row(
        "rankings_query_prompt_token_stddev",
        "datasets.main.rankings.query_tokens.stddev",
        Int,
    ),
    // Conversations
    sweep("conversation_num", "phases.profiling.sessions", Int),
    sweep("conversation_turn_mean", "datasets.main.turns.mean", Int),
    row(
        "conversation_turn_stddev",
        "datasets.main.turns.stddev",
        Float,
    ),
    row(
        "conversation_turn_delay_mean",
        "datasets.main.turn_delay.mean",
        Float,
    ),
    row(
        "conversation_turn_delay_stddev",
        "datasets.main.turn_delay.stddev",
        Float,
    ),
    row(
        "conversation_turn_delay_ratio",
        "datasets.main.turn_delay_ratio",
        Float,
    ),
    // Load generator
    sweep("concurrency", "phases.profiling.concurrency", Int),
    sweep("request_count", "phases.profiling.requests", Int),
    sweep("request_rate", "phases.profiling.rate", Float),
    row("request_rate_mode", "phases.profiling.type", Text),
    row("arrival_smoothness", "phases.profiling.smoothness", Float),
    sweep("benchmark_duration", "phases.profiling.duration", Float),
    row(
        "benchmark_grace_period",
        "phases.profiling.grace_period",
        Float,
    ),
    row(
        "concurrency_ramp_duration",
        "phases.profiling.concurrency_ramp.duration",
        Float,
    ),
    row(
        "request_rate_ramp_duration",
        "phases.profiling.rate_ramp.duration",
        Float,
    ),
    sweep(
        "prefill_concurrency",
        "phases.profiling.prefill_concurrency",
        Int,
    ),
    row(
        "prefill_concurrency_ramp_duration",
        "phases.profiling.prefill_ramp.duration",
        Float,
    ),
    row("request_rate_series", "phases.profiling.rate_series", Text),
    // Agentic and weka trace replay (refused: those datasets are not read here).
    cli_only("trajectory_start_min_ratio", Float),
    cli_only("trajectory_start_max_ratio", Float),
    cli_only("burst_phase_starts", Switch),
    cli_only("trace_idle_gap_cap_seconds", Float),
    cli_only("system_idle_gap_cap_seconds", Float),
    cli_only("agentic_cache_warmup_duration", Float),
    cli_only("agentic_warmup_grace_period", Float),
    // Refused with the agentic and weka flags above.
    cli_only("hf_weka_dataset", Text),
    row("scenario", "scenario", Text),
    row("unsafe_override", "unsafe_override", Switch),
    row(
        "inter_turn_delay_cap_seconds",
        "datasets.main.inter_turn_delay_cap_seconds",
        Float,
    ),
    // Baseten trace replay. The positive switches are the defaults: the config key's
    // `false` is the `--no-` flag.
    row(
        "max_idle_gap_cap_seconds",
        "datasets.main.max_idle_gap_cap_seconds",
        Float,
    ),
    row("replay_speedup", "datasets.main.replay_speedup", Float),
    cli_only("open_loop_replay", Switch),
    row("no_open_loop_replay", "datasets.main.open_loop_replay", Off),
    row("open_loop_strict", "datasets.main.open_loop_strict", Switch),
    row("omit_kv_hints", "datasets.main.omit_kv_hints", Switch),
    cli_only("force_min_tokens", Switch),
    row("no_force_min_tokens", "datasets.main.force_min_tokens", Off),
    // AIPerf: `phases.profiling.rate` of a phase of type `user_centric`.
    cli_only("user_centric_rate", Float),
    sweep("num_users", "phases.profiling.users", Int),
    // AIPerf: `phases.profiling.type: fixed_schedule`.
    cli_only("fixed_schedule", Switch),
    cli_only("no_fixed_schedule", Switch),
    row(
        "fixed_schedule_auto_offset",
        "phases.profiling.auto_offset",
        Switch,
    ),
    row(
        "fixed_schedule_start_offset",
        "phases.profiling.start_offset",
        Int,
    ),
    row(
        "fixed_schedule_end_offset",
        "phases.profiling.end_offset",
        Int,
    ),
    row(
        "request_cancellation_rate",
        "phases.profiling.cancellation.rate",
        Float,
    ),
    row(
        "request_cancellation_delay",
        "phases.profiling.cancellation.delay",
        Float,
    ),
    row(
        "failed_request_threshold",
        "phases.profiling.failed_request_threshold",
        Float,
    ),
    cli_only("interrupt_grace_period", Float),
    // Warmup
    row("warmup_request_count", "phases.warmup.requests", Int),
    row("warmup_duration", "phases.warmup.duration", Float),
    row("num_warmup_sessions", "phases.warmup.sessions", Int),
    row("warmup_grace_period", "phases.warmup.grace_period", Float),
    row("warmup_concurrency", "phases.warmup.concurrency", Int),
    row("warmup_request_rate", "phases.warmup.rate", Float),
    row("warmup_arrival_pattern", "phases.warmup.type", Text),
    row(
        "warmup_prefill_concurrency",
        "phases.warmup.prefill_concurrency",
        Int,
    ),
    row(
        "warmup_concurrency_ramp_duration",
        "phases.warmup.concurrency_ramp.duration",
        Float,
    ),
    row(
        "warmup_prefill_concurrency_ramp_duration",
        "phases.warmup.prefill_ramp.duration",
        Float,
    ),
    row(
        "warmup_request_rate_ramp_duration",
        "phases.warmup.rate_ramp.duration",
        Float,
    ),
    // Goodput: `slos: {request_latency: 250}` is `--goodput "request_latency:250"`.
    row("goodput", "slos", Text),
    // Output
    row("artifact_dir", "artifacts.dir", Text),
    // AIPerf: two keys, `artifacts.records` and `artifacts.raw`.
    cli_only("export_level", Text),
    row("profile_export_prefix", "artifacts.prefix", Text),
    row(
        "export_outputs_json",
        "artifacts.export_outputs_json",
        Switch,
    ),
    row("export_http_trace", "artifacts.trace", Switch),
    row("show_trace_timing", "artifacts.show_trace_timing", Switch),
    row("slice_duration", "artifacts.slice_duration", Float),
    row("auto_plot", "artifacts.auto_plot", Switch),
    cli_only("no_auto_plot", Switch),
    row("plot_required", "artifacts.plot_required", Switch),
    cli_only("no_html_report", Switch),
    // This build's: the live Prometheus endpoint.
    cli_only("prometheus_port", Int),
    cli_only("prometheus_host", Text),
    row("mlflow_tracking_uri", "mlflow.tracking_uri", Text),
    row("mlflow_experiment", "mlflow.experiment", Text),
    row("mlflow_run_name", "mlflow.run_name", Text),
    row("mlflow_tags", "mlflow.tags", List),
    row("mlflow_parent_run_id", "mlflow.parent_run_id", Text),
    row("mlflow_artifact_globs", "mlflow.artifact_globs", List),
    row("wandb_project", "wandb.project", Text),
    row("wandb_entity", "wandb.entity", Text),
    row("wandb_run_name", "wandb.run_name", Text),
    row("wandb_tags", "wandb.tags", List),
    row("otel_url", "otel.metrics_url", Text),
    // AIPerf: two switches, `otel.stream_metrics_enabled` and `otel.stream_timing_enabled`.
    cli_only("stream", List),
    // AIPerf: a mapping, `otel.custom_resource_attributes`.
    cli_only("otel_resource_attributes", List),
    row("gen_ai_provider", "otel.gen_ai_provider", Text),
    row("ui_type", "runtime.ui", Text),
    row("log_level", "logging.level", Text),
    // AIPerf: `logging.level: DEBUG` / `TRACE`.
    cli_only("verbose", Switch),
    cli_only("extra_verbose", Switch),
    // GPU telemetry and server metrics
    row("gpu_telemetry", "gpu_telemetry.urls", List),
    row("no_gpu_telemetry", "gpu_telemetry.enabled", Off),
    row("server_metrics", "server_metrics.urls", List),
    row("no_server_metrics", "server_metrics.enabled", Off),
    row("server_metrics_formats", "server_metrics.formats", List),
    // AIPerf: `network_latency.enabled` also turns on with `mean_ms`.
    row(
        "network_latency_automatic",
        "network_latency.enabled",
        Switch,
    ),
    row("network_latency_mean", "network_latency.mean_ms", Float),
    row(
        "network_latency_ping_interval",
        "network_latency.ping_interval",
        Float,
    ),
    // AIPerf's process layout (accepted; this build is one process)
    row("zmq_host", "runtime.communication.host", Text),
    row("zmq_ipc_path", "runtime.communication.path", Text),
    cli_only("zmq_dual_bind", Switch),
    row("workers_max", "runtime.workers", Int),
    row(
        "record_processor_service_count",
        "runtime.record_processors",
        Int,
    ),
    row("api_port", "runtime.api_port", Int),
    row("api_host", "runtime.api_host", Text),
    row("stats_interval", "runtime.stats_interval", Float),
    // Multi-run
    row("num_profile_runs", "^multi_run.num_runs", Int),
    row(
        "profile_run_cooldown_seconds",
        "^multi_run.cooldown_seconds",
        Float,
    ),
    row("confidence_level", "^multi_run.confidence_level", Float),
    row(
        "profile_run_disable_warmup_after_first",
        "^multi_run.disable_warmup_after_first",
        Switch,
    ),
    cli_only("no_profile_run_disable_warmup_after_first", Switch),
    row(
        "set_consistent_seed",
        "^multi_run.set_consistent_seed",
        Switch,
    ),
    cli_only("no_set_consistent_seed", Switch),
    row(
        "vary_seed_per_trial",
        "^multi_run.vary_seed_per_trial",
        Switch,
    ),
    cli_only("no_vary_seed_per_trial", Switch),
    row("convergence_metric", "^multi_run.convergence.metric", Text),
    row("convergence_stat", "^multi_run.convergence.stat", Text),
    row(
        "convergence_threshold",
        "^multi_run.convergence.threshold",
        Float,
    ),
    row("convergence_mode", "^multi_run.convergence.mode", Text),
    // Sweeps and searches
    row(
        "parameter_sweep_cooldown_seconds",
        "^sweep.cooldown_seconds",
        Float,
    ),
    row("parameter_sweep_same_seed", "^sweep.same_seed", Switch),
    cli_only("no_parameter_sweep_same_seed", Switch),
    row("parameter_sweep_mode", "^sweep.iteration_order", Text),
    row("sweep_type", "^sweep.type", Text),
    row("no_sweep_table", "^no_sweep_table", Switch),
    // The adaptive search: AIPerf's `sweep:` block of type adaptive_search. The search
    // space, objective and tiers are lists of mappings there, not one value per key.
    cli_only("search_space", List),
    cli_only("search_metric", Text),
    cli_only("search_stat", Text),
    cli_only("search_direction", Text),
    row("search_max_iterations", "^sweep.max_iterations", Int),
    row("search_initial_points", "^sweep.n_initial_points", Int),
    row("search_random_seed", "^sweep.random_seed", Int),
    row("search_planner", "^sweep.planner", Text),
    row("optuna_sampler", "^sweep.optuna_sampler", Text),
    row("optuna_acquisition", "^sweep.optuna_acquisition", Text),
    row("optuna_terminator", "^sweep.optuna_terminator", Text),
    row(
        "search_percentile_pooling",
        "^sweep.objective_pooling",
        Text,
    ),
    row("bo_constraint_mode", "^sweep.constraint_mode", Text),
    cli_only("search_sla_tier", List),
    row("search_recipe", "^sweep.recipe_name", Text),
    row("search_sla", "^sweep.sla_filters", List),
    // AIPerf hands these to the recipe; they are not config keys.
    cli_only("search_style", Text),
    cli_only("ttft_sla_ms", Float),
    cli_only("itl_sla_ms", Float),
    cli_only("tpot_sla_ms", Float),
    cli_only("e2e_sla_ms", Float),
    cli_only("error_rate_sla", Float),
    cli_only("concurrency_min", Int),
    cli_only("concurrency_max", Int),
    cli_only("concurrency_steps", Int),
    cli_only("degradation_threshold", Float),
    cli_only("degradation_metric_tag", Text),
    cli_only("degradation_stat", Text),
    cli_only("isl_osl_pairs", Text),
    cli_only("slo_attainment_fraction", Float),
    cli_only("isl_min", Int),
    cli_only("isl_max", Int),
    cli_only("isl_steps", Int),
    cli_only("osl_min", Int),
    cli_only("osl_max", Int),
    cli_only("osl_steps", Int),
    // A YAML scenario sweep (`sweep.runs`) is shaped unlike the flag's strings.
    cli_only("variant", List),
    // Sharded load (this build's)
    cli_only("shard_index", Int),
    cli_only("shard_count", Int),
    cli_only("start_at", Text),
];

/// The row of clap id `id`.
pub fn by_id(id: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.id == id)
}

/// The row whose config path is `path`.
pub fn by_path(path: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.path == Some(path))
}

/// The keys one level below `prefix` (`"endpoint"` gives `url`, `type`, ...), for
/// naming what may sit at an unknown key's place.
pub fn keys_under(prefix: &str) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = FLAGS
        .iter()
        .filter_map(|f| f.path)
        .filter_map(|p| {
            let rest = if prefix.is_empty() {
                p
            } else {
                p.strip_prefix(prefix)?.strip_prefix('.')?
            };
            rest.split('.').next()
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The help line the table adds to a flag with a config path.
fn help_note(f: &Flag, help: &str) -> Option<String> {
    let path = f.path?;
    let path = match path.strip_prefix('^') {
        Some(top) => top.to_string(),
        None => format!("benchmark.{path}"),
    };
    // Most sweepable flags say so in their own words already.
    let sweep = if f.sweep && !help.contains("sweep") {
        " A comma list runs one profile per value (a sweep)."
    } else {
        ""
    };
    Some(format!("[config: {path}]{sweep}"))
}

/// `aiperf profile`'s clap command with the table's notes added to each flag's help.
/// In one pass over the arguments: `mut_arg` per flag removed and pushed back each of ~300
/// arguments, moving the others every time (about 45 M instructions, mostly `memcpy`, at
/// every start).
pub fn annotate(profile: clap::Command) -> clap::Command {
    let by_id: std::collections::HashMap<&str, &Flag> = FLAGS.iter().map(|f| (f.id, f)).collect();
    profile.mut_args(|a| {
        let Some(f) = by_id.get(a.get_id().as_str()) else {
            return a;
        };
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        match help_note(f, &help) {
            Some(note) => a.help(format!("{help} {note}")),
            None => a,
        }
    })
}

/// The value of a typed flag as the echoed config shows it.
pub fn echo_value(f: &Flag, raw: &[String]) -> Value {
    if f.secret {
        return Value::String("***".into());
    }
    let one = || raw.last().cloned().unwrap_or_default();
    match f.kind {
        Kind::Int => one()
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(one())),
        Kind::Float => one()
            .parse::<f64>()
            .ok()
            .and_then(|x| serde_json::Number::from_f64(x).map(Value::Number))
            .unwrap_or_else(|| Value::String(one())),
        Kind::Text => Value::String(one()),
        Kind::Switch => Value::Bool(true),
        Kind::Off => Value::Bool(false),
        Kind::List => Value::Array(raw.iter().cloned().map(Value::String).collect()),
    }
}

/// The place of config path `path` in an echoed config (`{"datasets": [{"name": "main",
/// ...}], "phases": [...], "endpoint": {...}}`), made when missing: `datasets.main.x` is
/// key `x` of the `datasets` element named `main`.
pub fn echo_slot<'a>(root: &'a mut Map<String, Value>, path: &str) -> &'a mut Value {
    let path = path.strip_prefix('^').unwrap_or(path);
    let mut parts = path.split('.').peekable();
    let first = parts.next().expect("a path has a first key");
    let mut at: &mut Value = root.entry(first).or_insert(Value::Null);
    let named_lists = ["datasets", "phases"];
    if named_lists.contains(&first)
        && let Some(name) = parts.next()
    {
        if !at.is_array() {
            *at = Value::Array(Vec::new());
        }
        let list = at.as_array_mut().expect("made an array above");
        let i = match list.iter().position(|e| e["name"] == name) {
            Some(i) => i,
            None => {
                list.push(serde_json::json!({ "name": name }));
                list.len() - 1
            }
        };
        at = &mut list[i];
    }
    for key in parts {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        at = at
            .as_object_mut()
            .expect("made an object above")
            .entry(key)
            .or_insert(Value::Null);
    }
    at
}

/// Sample values for each row, shared by the tests of the config file and of the echo.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Flag, Kind};
    use serde_json::Value;

    /// Values of the row's kind to try on its flag; a flag's parser takes at least one.
    fn samples(f: &Flag, arg: &clap::Arg) -> Vec<Value> {
        let choices = arg.get_possible_values();
        if !choices.is_empty() && !matches!(f.kind, Kind::Switch | Kind::Off) {
            return choices.iter().map(|v| Value::from(v.get_name())).collect();
        }
        match f.kind {
            // Small even numbers and shares fit most ranges (channels, pixels, ratios).
            Kind::Int => vec![Value::from(2)],
            Kind::Float => vec![Value::from(0.5)],
            Kind::Switch => vec![Value::Bool(true)],
            Kind::Off => vec![Value::Bool(false)],
            Kind::List => ["k:v", "16"].map(|v| Value::from(vec![v])).to_vec(),
            Kind::Text => ["t", "16", "k:v"].map(Value::from).to_vec(),
        }
    }

    /// `aiperf profile [--model m] ARGS`'s matches, if clap takes them.
    pub fn profile_matches(f: &Flag, args: &[String]) -> Result<clap::ArgMatches, clap::Error> {
        // `--model` is required; the models row gives its own.
        let model = ["--model", "m"]
            .into_iter()
            .filter(|_| f.id != "model_names");
        let argv = ["aiperf", "profile"].into_iter().chain(model);
        let argv = argv.map(String::from).chain(args.iter().cloned());
        let m = crate::cli::command().try_get_matches_from(argv)?;
        Ok(m.subcommand().unwrap().1.clone())
    }

    /// A value's arguments as typed (`["a", "b"]` for a list).
    pub fn raw(v: &Value) -> Vec<String> {
        match v {
            Value::Bool(_) => Vec::new(),
            Value::Array(items) => items.iter().map(|v| v.as_str().unwrap().into()).collect(),
            Value::String(v) => vec![v.clone()],
            v => vec![v.to_string()],
        }
    }

    /// The flag's arguments for `v`: `--x` for a switch, `--x=v` per value.
    pub fn typed(f: &Flag, v: &Value) -> Vec<String> {
        let long = long(f);
        match v {
            Value::Bool(_) => vec![format!("--{long}")],
            v => raw(v).iter().map(|r| format!("--{long}={r}")).collect(),
        }
    }

    fn long(f: &Flag) -> String {
        let cmd = crate::cli::command();
        let profile = cmd.find_subcommand("profile").unwrap();
        let arg = profile
            .get_arguments()
            .find(|a| a.get_id() == f.id)
            .unwrap();
        arg.get_long().unwrap().to_string()
    }

    /// The first sample of the row's kind that its flag takes on the command line.
    pub fn accepted_sample(f: &Flag) -> Value {
        let cmd = crate::cli::command();
        let profile = cmd.find_subcommand("profile").unwrap();
        let arg = profile
            .get_arguments()
            .find(|a| a.get_id() == f.id)
            .unwrap();
        samples(f, arg)
            .into_iter()
            .find(|v| profile_matches(f, &typed(f, v)).is_ok())
            .unwrap_or_else(|| panic!("{}: no sample value fits its flag", f.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_profile_flag_has_exactly_one_row() {
        let cmd = crate::cli::Cli::command();
        let profile = cmd.find_subcommand("profile").unwrap();
        let ids: Vec<String> = profile
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .filter(|id| id != "help")
            .collect();
        for id in &ids {
            let rows = FLAGS.iter().filter(|f| f.id == id).count();
            assert_eq!(rows, 1, "--{id}: {rows} rows in FLAGS");
        }
        for f in FLAGS {
            assert!(ids.iter().any(|id| id == f.id), "row {} has no flag", f.id);
        }
    }

    #[test]
    fn paths_are_distinct_and_sweeps_are_numbers_with_paths() {
        let mut paths: Vec<&str> = FLAGS.iter().filter_map(|f| f.path).collect();
        paths.sort_unstable();
        let n = paths.len();
        paths.dedup();
        assert_eq!(paths.len(), n, "two rows share a path");
        for f in FLAGS.iter().filter(|f| f.sweep) {
            assert!(f.path.is_some(), "{}", f.id);
            assert!(matches!(f.kind, Kind::Int | Kind::Float), "{}", f.id);
        }
        // No path is a prefix of another: a key holds a value or a mapping, not both.
        for a in &paths {
            for b in &paths {
                assert!(!b.starts_with(&format!("{a}.")), "{a} and {b}");
            }
        }
    }

    #[test]
    fn echo_slots_name_list_elements() {
        let mut root = Map::new();
        *echo_slot(&mut root, "datasets.main.prompts.isl.mean") = Value::from(64);
        *echo_slot(&mut root, "phases.warmup.concurrency") = Value::from(2);
        *echo_slot(&mut root, "phases.profiling.concurrency") = Value::from(8);
        *echo_slot(&mut root, "^random_seed") = Value::from(7);
        let v = Value::Object(root);
        assert_eq!(v["datasets"][0]["prompts"]["isl"]["mean"], 64);
        assert_eq!(v["phases"][0]["name"], "warmup");
        assert_eq!(v["phases"][1]["concurrency"], 8);
        assert_eq!(v["random_seed"], 7);
    }

    #[test]
    fn keys_under_a_prefix_are_the_next_segments() {
        let keys = keys_under("datasets.main.prompts.isl");
        assert_eq!(keys, ["mean", "stddev"]);
        assert!(keys_under("").contains(&"endpoint"));
        assert!(keys_under("").contains(&"^random_seed"));
    }
}
