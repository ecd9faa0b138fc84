//! Flags for the requests a run sends to the server besides its load: a KV-cache reset
//! before the run and a profiler started and stopped around the profiling phase (vLLM's
//! `/reset_prefix_cache`, `/start_profile`, `/stop_profile`), and the transport. Parsing
//! only; `config` checks them.

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Default, Args)]
pub struct ControlHookArgs {
    /// Before the run (each point of a sweep, each repeat), POST the server's KV-cache
    /// reset (--reset-kv-cache-path, default /reset_prefix_cache) at each --url's origin;
    /// busy answers (409, 423, 429, 503) and timeouts are retried for up to 60 s, any
    /// other failure stops the run. Given by any --reset-kv-cache-* flag too.
    #[arg(long, help_heading = "Endpoint")]
    pub reset_kv_cache: bool,

    /// Seconds each KV-cache reset POST may take (default 30).
    #[arg(long, value_name = "SECONDS", help_heading = "Endpoint")]
    pub reset_kv_cache_timeout_seconds: Option<f64>,

    /// Path of the KV-cache reset, from the server's origin (default /reset_prefix_cache).
    #[arg(long, value_name = "PATH", help_heading = "Endpoint")]
    pub reset_kv_cache_path: Option<String>,

    /// POST the server's profiler start before the profiling phase and its stop after it
    /// (--server-profiler-start-path/-stop-path, default /start_profile and /stop_profile)
    /// at each --url's origin. A failed start stops the run; a failed stop is a warning.
    /// Given by any --server-profiler-* flag too.
    #[arg(long, help_heading = "Endpoint")]
    pub server_profiler: bool,

    /// Seconds each profiler POST may take (default 30).
    #[arg(long, value_name = "SECONDS", help_heading = "Endpoint")]
    pub server_profiler_timeout_seconds: Option<f64>,

    /// Path of the profiler start, from the server's origin (default /start_profile).
    #[arg(long, value_name = "PATH", help_heading = "Endpoint")]
    pub server_profiler_start_path: Option<String>,

    /// Path of the profiler stop, from the server's origin (default /stop_profile).
    #[arg(long, value_name = "PATH", help_heading = "Endpoint")]
    pub server_profiler_stop_path: Option<String>,

    /// The transport: `http` (HTTP/1.1 over TCP, TLS for https URLs), the only one, as in
    /// AIPerf; the default follows the URL's scheme.
    #[arg(
        long,
        visible_alias = "transport-type",
        value_enum,
        help_heading = "Endpoint"
    )]
    pub transport: Option<Transport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    Http,
}
