//! Flags for several servers and models, connection handling, session headers and trace
//! replay knobs (AIPerf's names and defaults). Parsing only; `config` checks them.

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// How requests are spread over several --url servers: `round_robin` sends request i
    /// to server i mod N.
    #[arg(long, value_enum, default_value_t = UrlStrategy::RoundRobin, help_heading = "Endpoint")]
    pub url_strategy: UrlStrategy,

    /// How each request's model is picked from several --model names: in turn
    /// (`round_robin`) or uniformly at random from --random-seed (`random`).
    #[arg(long, value_enum, default_value_t = ModelSelection::RoundRobin, help_heading = "Endpoint")]
    pub model_selection_strategy: ModelSelection,

    /// Connection use: `pooled` reuses kept-alive connections, `never` opens one per
    /// request, `sticky-user-sessions` sends every turn of a conversation on its own
    /// connection.
    #[arg(long, value_enum, default_value_t = ConnectionReuse::Pooled, help_heading = "Endpoint")]
    pub connection_reuse_strategy: ConnectionReuse,

    /// Header that carries the session id (the same on every turn of a conversation).
    #[arg(long, default_value = "X-Correlation-ID", help_heading = "Endpoint")]
    pub session_header: String,

    /// Content-Type of request bodies: JSON, except for audio_transcription, image_edit and
    /// video_generation, which send multipart/form-data (and refuse application/json given
    /// here).
    #[arg(long, default_value = "application/json", help_heading = "Endpoint")]
    pub request_content_type: String,

    /// vLLM's multimodal cache: an image whose `image_uuids` id an earlier row of the same
    /// session already sent goes with its `uuid` and an empty url (the server reuses what it
    /// cached). Needs --endpoint-type chat and a single_turn --input-file whose rows share
    /// `session_id`s; ids written in the file are sent with or without this flag.
    #[arg(long, help_heading = "Endpoint")]
    pub uuid_and_strip: bool,

    /// Video generation: after the job completes, download the video
    /// (`GET /v1/videos/{id}/content`, or the job's `url`); the request then ends when the
    /// download does. Needs --endpoint-type video_generation.
    #[arg(long, help_heading = "Endpoint")]
    pub download_video_content: bool,

    /// Seconds over which the number of requests in flight grows from 1 to --concurrency,
    /// one more at evenly spaced times.
    #[arg(long, help_heading = "Load Generator")]
    pub concurrency_ramp_duration: Option<f64>,

    /// Seconds over which the request rate grows linearly from a tenth of a second's worth
    /// of load to --request-rate.
    #[arg(long, help_heading = "Load Generator")]
    pub request_rate_ramp_duration: Option<f64>,

    /// Most requests sent but still waiting for their first token (the server's prefill
    /// queue); a request frees its slot at its first streamed token. Needs --streaming and
    /// is at most --concurrency.
    #[arg(long, help_heading = "Load Generator")]
    pub prefill_concurrency: Option<u64>,

    /// Requests per second over all --num-users simulated users: each user sends its
    /// conversation's turns num_users/QPS seconds apart, never before the previous reply;
    /// a user whose conversation ended is replaced by a new one on the same schedule.
    /// Needs multi-turn conversations (--conversation-turn-mean 2 or more).
    #[arg(long, value_name = "QPS", help_heading = "Load Generator")]
    pub user_centric_rate: Option<f64>,

    /// Simulated users of --user-centric-rate.
    #[arg(long, help_heading = "Load Generator")]
    pub num_users: Option<u64>,

    /// Seconds over which --prefill-concurrency grows from 1 to its value, one more slot
    /// at evenly spaced times.
    #[arg(long, help_heading = "Load Generator")]
    pub prefill_concurrency_ramp_duration: Option<f64>,

    /// JSON file of request-rate points, `{"points": [{"time_s": 0, "qps": 10}, ...]}` (or
    /// the bare list): the rate follows straight lines between them (after any
    /// --request-rate-ramp-duration), holding the first rate before the first point and the
    /// last after the last. Takes the place of --request-rate.
    #[arg(long, value_name = "PATH", help_heading = "Load Generator")]
    pub request_rate_series: Option<std::path::PathBuf>,

    /// Agentic trace replay only; refused for the dataset types read here.
    #[arg(long, help_heading = "Load Generator")]
    pub trajectory_start_min_ratio: Option<f64>,

    /// Agentic trace replay only; refused for the dataset types read here.
    #[arg(long, help_heading = "Load Generator")]
    pub trajectory_start_max_ratio: Option<f64>,

    /// Agentic trace replay only; refused for the dataset types read here.
    #[arg(long, help_heading = "Load Generator")]
    pub burst_phase_starts: bool,

    /// Per-trace idle-gap cap of weka traces only; refused for the dataset types read here.
    #[arg(long, help_heading = "Load Generator")]
    pub trace_idle_gap_cap_seconds: Option<f64>,

    /// Agentic trace replay only; refused for the dataset types read here.
    #[arg(long, help_heading = "Load Generator")]
    pub system_idle_gap_cap_seconds: Option<f64>,

    /// --prefill-concurrency for the warmup phase (default: the profiling value).
    #[arg(long, help_heading = "Warmup")]
    pub warmup_prefill_concurrency: Option<u64>,

    /// --concurrency-ramp-duration for the warmup phase (default: the profiling value).
    #[arg(long, help_heading = "Warmup")]
    pub warmup_concurrency_ramp_duration: Option<f64>,

    /// --prefill-concurrency-ramp-duration for the warmup phase (default: the profiling
    /// value).
    #[arg(long, help_heading = "Warmup")]
    pub warmup_prefill_concurrency_ramp_duration: Option<f64>,

    /// --request-rate-ramp-duration for the warmup phase (default: the profiling value).
    /// Needs a warmup rate.
    #[arg(long, help_heading = "Warmup")]
    pub warmup_request_rate_ramp_duration: Option<f64>,

    /// Agentic trace replay only; refused for the dataset types read here.
    #[arg(long, help_heading = "Warmup")]
    pub agentic_cache_warmup_duration: Option<f64>,

    /// Agentic trace replay only; refused for the dataset types read here.
    #[arg(long, help_heading = "Warmup")]
    pub agentic_warmup_grace_period: Option<f64>,

    /// Seconds: every turn delay of the --input-file (`delay`, ms) longer than this is
    /// cut to it, so one long recorded wait does not stall a conversation. The number cut
    /// is logged.
    #[arg(long, help_heading = "Conversation Input")]
    pub inter_turn_delay_cap_seconds: Option<f64>,

    /// Baseten trace replay: every gap between consecutive requests (across sessions)
    /// longer than this many seconds of replay time is cut to it, after --replay-speedup,
    /// so a sparse or sampled trace does not replay dead air. Closed-loop replay cuts the
    /// gaps between session starts only. baseten_trace only.
    #[arg(long, help_heading = "Conversation Input")]
    pub max_idle_gap_cap_seconds: Option<f64>,

    /// Baseten trace replay: compress wall-clock time by this factor (10 = ten times
    /// faster than recorded); divides the timestamps and think times, never the prompts or
    /// KV hints. Default: real time. baseten_trace only.
    #[arg(long, help_heading = "Conversation Input")]
    pub replay_speedup: Option<f64>,

    /// Baseten trace replay (the default): each session starts at its recorded time and
    /// each later turn goes at its recorded time, but never before the previous reply.
    /// baseten_trace only.
    #[arg(
        long,
        overrides_with = "no_open_loop_replay",
        help_heading = "Conversation Input"
    )]
    pub open_loop_replay: bool,

    /// Baseten trace replay, closed loop: a later turn goes a think time after the previous
    /// reply (the recorded start-to-start gap minus the previous turn's recorded
    /// duration_e2e_ms, capped by --inter-turn-delay-cap-seconds). baseten_trace only.
    #[arg(
        long,
        overrides_with = "open_loop_replay",
        help_heading = "Conversation Input"
    )]
    pub no_open_loop_replay: bool,

    /// Baseten trace replay, open loop: every row is a one-turn session of its own sent at
    /// its recorded time (no session grouping, no waiting for replies). baseten_trace only.
    #[arg(long, help_heading = "Conversation Input")]
    pub open_loop_strict: bool,

    /// Baseten trace replay: leave the recorded KV-cache hints (`hash_ids` from
    /// total_hashes, `block_size`) out of the bodies, for servers that refuse unknown
    /// fields. baseten_trace only.
    #[arg(long, help_heading = "Conversation Input")]
    pub omit_kv_hints: bool,

    /// Baseten trace replay (the default): send `min_tokens` equal to the recorded output
    /// length, so replies are as long as recorded. baseten_trace only.
    #[arg(
        long,
        overrides_with = "no_force_min_tokens",
        help_heading = "Conversation Input"
    )]
    pub force_min_tokens: bool,

    /// Baseten trace replay: no `min_tokens`; replies end where the model stops (for
    /// servers that refuse `min_tokens`). baseten_trace only.
    #[arg(
        long,
        overrides_with = "force_min_tokens",
        help_heading = "Conversation Input"
    )]
    pub no_force_min_tokens: bool,

    /// Send requests at the input file's pace only when --fixed-schedule says so: a
    /// timestamped file is then sent with the chosen load mode (--concurrency,
    /// --request-rate).
    #[arg(long, help_heading = "Fixed Schedule")]
    pub no_fixed_schedule: bool,

    /// Drop the input file's timestamps and delays: turns are sent without waiting (not
    /// with a fixed schedule).
    #[arg(long, help_heading = "Input")]
    pub ignore_trace_delays: bool,

    /// Trace replay of weka traces only; refused for the dataset types read here.
    #[arg(long, help_heading = "Input")]
    pub use_think_time_only: bool,

    /// Context cap of weka traces only; refused for the dataset types read here.
    #[arg(long, help_heading = "Input")]
    pub max_context_length: Option<u64>,

    /// Baseten trace replay: keep this share (0 to 1] of the sessions, each whole, drawn
    /// from --random-seed (at least one is kept); rows without a session id are kept one by
    /// one at the same share. baseten_trace only.
    #[arg(long, help_heading = "Input")]
    pub trace_session_sample_ratio: Option<f64>,

    /// Agentic trace replay only (start the dataset over when it runs out); refused for
    /// the dataset types read here.
    #[arg(long, overrides_with = "no_allow_dataset_wrap", help_heading = "Input")]
    pub allow_dataset_wrap: bool,

    /// The default: the dataset is not started over (the last of the two flags wins).
    #[arg(long, overrides_with = "allow_dataset_wrap", help_heading = "Input")]
    pub no_allow_dataset_wrap: bool,

    /// AIPerf's generic Weka trace loader (`weka_hf`) over a hub repo; refused: Weka
    /// agentic traces are not read here.
    #[arg(long, value_name = "REPO", help_heading = "Input")]
    pub hf_weka_dataset: Option<String>,

    /// Lock a named benchmark scenario's invariants. AIPerf 0.13 has one,
    /// `inferencex-agentx-mvp`, an agentic replay of Weka traces: refused, as those are not
    /// read here; any other name is refused with the list.
    #[arg(long, value_name = "NAME", help_heading = "Scenario")]
    pub scenario: Option<String>,

    /// With --scenario, turn its lock errors into warnings (the run is marked not valid for
    /// submission). Nothing to do without --scenario (a warning says so).
    #[arg(long, help_heading = "Scenario")]
    pub unsafe_override: bool,
}

/// `--url-strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum UrlStrategy {
    /// Server i mod N for request i.
    RoundRobin,
}

/// `--model-selection-strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum ModelSelection {
    /// Models in turn, request by request.
    RoundRobin,
    /// A uniform draw per request (from --random-seed).
    Random,
}

/// `--connection-reuse-strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "kebab-case")]
pub enum ConnectionReuse {
    /// A shared pool of kept-alive connections.
    Pooled,
    /// A new connection for every request, closed after it.
    Never,
    /// One connection per conversation, for all of its turns.
    StickyUserSessions,
}
