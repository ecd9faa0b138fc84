//! Files of sweeps, repeated runs and searches besides the aggregates: each run's
//! `run_config.json` and the search results.

use std::path::Path;

use serde_json::Value;

/// Each run directory of a sweep or repeated run: what that run was asked to do.
pub const RUN_CONFIG_FILE: &str = "run_config.json";
/// The points a `max-concurrency-under-sla` search tried, in order, and its answer.
pub const SEARCH_HISTORY_FILE: &str = "search_history.json";
/// The grid style of `max-concurrency-under-sla`: the last point meeting every SLA and the
/// first breaking one (in the sweep aggregate directory).
pub const SLA_BREACH_FILE: &str = "sla_breach.json";
/// `concurrency-ramp`: the first point whose latency degraded (in the sweep aggregate
/// directory).
pub const DEGRADATION_KNEE_FILE: &str = "degradation_knee.json";

/// `prefill-ttft-curve`: TTFT fitted against ISL (in the sweep aggregate directory).
pub const PREFILL_CURVE_FILE: &str = "prefill_curve.json";
/// `decode-itl-curve`: the measured ITL over concurrency x OSL (sweep aggregate directory).
pub const DECODE_ITL_SURFACE_FILE: &str = "decode_itl_surface.json";
/// `pareto-sweep`: every (shape, concurrency) point marked Pareto-optimal or not.
pub const PARETO_SWEEP_FILE: &str = "pareto_sweep.json";
/// Why a recipe's derived file could not be made (beside the sweep aggregate).
pub const POST_PROCESS_ERRORS_FILE: &str = "post_process_errors.json";

/// Writes `value` as 2-space indented JSON to `dir/name`, creating `dir`.
pub fn write_json_file(dir: &Path, name: &str, value: &Value) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    std::fs::write(dir.join(name), text)
}
