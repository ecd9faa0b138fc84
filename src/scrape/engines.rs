//! The names inference engines give the few server figures every view shows (requests
//! running and waiting, KV-cache use, TTFT), first found wins: vLLM, SGLang, llama.cpp.

/// Requests the engine is running now (gauge).
pub const RUNNING: &[&str] = &[
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
    "llamacpp:requests_processing",
];
/// Requests queued (gauge).
pub const WAITING: &[&str] = &[
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "llamacpp:requests_deferred",
];
/// KV-cache use as a fraction (gauge; vLLM's name changed in 0.10, both are read).
pub const KV_CACHE: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "llamacpp:kv_cache_usage_ratio",
];
/// The server's TTFT (histogram, seconds).
pub const TTFT: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
];
