//! `aiperf synthesize agentic-code`: synthetic agentic-coding sessions written as a
//! mooncake trace (`dataset.jsonl`) with `manifest.json` (seed and settings) and
//! `quality.json` (each distribution against its target), in a run directory of their own;
//! the trace is then checked as `aiperf validate mooncake-trace` checks it.

mod params;
mod sessions;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use self::params::Params;
use self::sessions::{EndReason, Session, Synthesizer};
use crate::cli::synthesize::{SynthTarget, SynthesizeArgs};

/// Bundled settings, by name.
const BUNDLED: [(&str, &str); 1] = [(
    "default",
    include_str!("../../assets/synthesize/default.json"),
)];

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// Bad command line or settings: exit 2.
    #[error("{0}")]
    Input(String),
    /// The trace could not be written, or failed its check: exit 1.
    #[error("{0}")]
    Other(String),
}

pub fn run(a: &SynthesizeArgs) -> Result<(), SynthError> {
    match a.target {
        SynthTarget::AgenticCode => {}
    }
    let (params, name) = settings(a)?;
    let stamp = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string();
    let dir = a
        .output
        .join(format!("{name}_{}s_seed{}_{stamp}", a.num_sessions, a.seed));
    println!(
        "Generating {} sessions (seed={})...",
        a.num_sessions, a.seed
    );
    let mut synth = Synthesizer::new(&params, a.seed).map_err(SynthError::Input)?;
    let sessions = synth
        .sessions(a.num_sessions as usize)
        .map_err(SynthError::Input)?;
    let other = |e: std::io::Error, p: &Path| {
        SynthError::Other(format!("cannot write {}: {e}", p.display()))
    };
    std::fs::create_dir_all(&dir).map_err(|e| other(e, &dir))?;
    let jsonl = dir.join("dataset.jsonl");
    std::fs::write(&jsonl, trace(&sessions, params.block_size)).map_err(|e| other(e, &jsonl))?;
    let manifest = dir.join("manifest.json");
    let doc = json!({
        "seed": a.seed,
        "num_sessions": sessions.len(),
        "config_name": name,
        "generation_params": params,
    });
    std::fs::write(&manifest, pretty(&doc)).map_err(|e| other(e, &manifest))?;
    let quality = dir.join("quality.json");
    std::fs::write(&quality, pretty(&quality_report(&sessions, &params)))
        .map_err(|e| other(e, &quality))?;
    let rows = validate(&jsonl, params.block_size)?;
    let turns: usize = sessions.iter().map(|s| s.turns.len()).sum();
    println!("Run directory: {}", dir.display());
    println!("  JSONL:       {} ({turns} turns)", jsonl.display());
    println!("  Manifest:    {}", manifest.display());
    println!("  Quality:     {}", quality.display());
    println!("  Validation:  Mooncake trace ({rows} rows)");
    let blocks = match params.block_size {
        512 => String::new(),
        n => format!(" --isl-block-size {n}"),
    };
    println!(
        "Replay it with `aiperf profile --input-file {} --custom-dataset-type mooncake_trace{blocks}`",
        jsonl.display()
    );
    Ok(())
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("plain values") + "\n"
}

/// The settings (`--config`: a bundled name or a JSON file) with `--max-isl`/`--max-osl`,
/// and the name the run directory starts with.
fn settings(a: &SynthesizeArgs) -> Result<(Params, String), SynthError> {
    let input = |e: String| SynthError::Input(e);
    let (params, name) = match &a.config {
        None => (Params::defaults().map_err(input)?, "default".to_string()),
        Some(c) => {
            let (text, source, name) = match BUNDLED.iter().find(|(n, _)| n == c) {
                Some((n, text)) => (
                    text.to_string(),
                    format!("bundled config {n}"),
                    n.to_string(),
                ),
                None => {
                    let path = PathBuf::from(c);
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        let names: Vec<&str> = BUNDLED.iter().map(|(n, _)| *n).collect();
                        input(format!(
                            "--config {c}: cannot read it ({e}); give a JSON file or a bundled name ({})",
                            names.join(", ")
                        ))
                    })?;
                    let stem = path
                        .file_stem()
                        .map_or(c.clone(), |s| s.to_string_lossy().into_owned());
                    (text, format!("--config {c}"), stem)
                }
            };
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                input(format!(
                    "{source}: not JSON (line {}, column {}): {e}",
                    e.line(),
                    e.column()
                ))
            })?;
            let p = Params::from_value(v).map_err(|e| input(format!("{source}: {e}")))?;
            (p, name)
        }
    };
    let params = params
        .with_limits(a.max_isl, a.max_osl)
        .map_err(|e| input(format!("with --max-isl/--max-osl: {e}")))?;
    Ok((params, name))
}

/// Mooncake rows: each turn's new tokens with that many blocks' ids; turn 0 keeps the
/// prefix ids (shared with other sessions), later turns take fresh ids from one counter.
fn trace(sessions: &[Session], block: u64) -> String {
    let mut out = String::new();
    let mut next = 0u64;
    for s in sessions {
        for t in &s.turns {
            let ids: Vec<u64> = if t.index == 0 {
                if let Some(m) = t.hash_ids.iter().max() {
                    next = next.max(m + 1);
                }
                t.hash_ids.clone()
            } else {
                let n = t.new_tokens.div_ceil(block);
                next += n;
                (next - n..next).collect()
            };
            // AIPerf's key order: the row's own fields, then when it is sent.
            out.push_str(&format!(
                "{{\"session_id\":{},\"input_length\":{},\"output_length\":{},\"hash_ids\":{}",
                json!(s.id),
                t.new_tokens,
                t.output_length,
                json!(ids)
            ));
            if t.index == 0 {
                out.push_str(&format!(
                    ",\"timestamp\":{},\"group_id\":{}",
                    json!(round1(t.timestamp_ms)),
                    s.group
                ));
                if s.restart {
                    out.push_str(",\"is_restart\":true");
                }
            } else {
                out.push_str(&format!(",\"delay\":{}", json!(round1(t.delay_ms))));
            }
            out.push('}');
            out.push('\n');
        }
    }
    out
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn round_to(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// count, mean, std, median, p05..p99 (numpy's linear percentiles), rounded to 2 places.
fn percentile_stats(values: &[f64]) -> Value {
    if values.is_empty() {
        return json!({"count": 0, "mean": 0.0, "std": 0.0, "median": 0.0, "p05": 0.0, "p25": 0.0, "p75": 0.0, "p95": 0.0, "p99": 0.0});
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mean = sorted.iter().sum::<f64>() / n;
    let std = (sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let p = |q: f64| round_to(crate::stats::percentile_sorted(&sorted, q), 2);
    json!({
        "count": sorted.len(),
        "mean": round_to(mean, 2),
        "std": round_to(std, 2),
        "median": p(50.0),
        "p05": p(5.0),
        "p25": p(25.0),
        "p75": p(75.0),
        "p95": p(95.0),
        "p99": p(99.0),
    })
}

/// Observed against target, with the absolute error of mean and median in percent.
fn metric(values: &[f64], target: Option<(f64, f64)>) -> Value {
    let observed = percentile_stats(values);
    let err = |t: f64, o: &Value| {
        let o = o.as_f64().unwrap_or(0.0);
        if t == 0.0 {
            0.0
        } else {
            round_to((o - t).abs() / t * 100.0, 2)
        }
    };
    json!({
        "target_mean": target.map(|t| t.0),
        "target_median": target.map(|t| t.1),
        "pct_error_mean": target.map(|t| err(t.0, &observed["mean"])),
        "pct_error_median": target.map(|t| err(t.1, &observed["median"])),
        "observed": observed,
    })
}

fn quality_report(sessions: &[Session], p: &Params) -> Value {
    let (mut initial, mut new_tokens, mut outputs, mut delays, mut turns, mut utilization) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let count = |r: EndReason| sessions.iter().filter(|s| s.end == r).count();
    for s in sessions {
        turns.push(s.turns.len() as f64);
        let last = s.turns.last().expect("a session has a turn");
        utilization.push(last.input_length as f64 / p.max_prompt_tokens as f64);
        for t in &s.turns {
            if t.index == 0 {
                initial.push(t.input_length as f64);
            } else {
                new_tokens.push(t.new_tokens as f64);
                delays.push(t.delay_ms);
            }
            outputs.push(t.output_length as f64);
        }
    }
    let c = &p.cache;
    let fixed = (c.layer1_tokens + c.layer1_5_tokens) as f64;
    let mut observed = Map::new();
    let mut add = |name: &str, values: &[f64], target: Option<(f64, f64)>| {
        if !values.is_empty() {
            observed.insert(name.into(), metric(values, target));
        }
    };
    add(
        "initial_context",
        &initial,
        Some((fixed + c.layer2.mean, fixed + c.layer2.median)),
    );
    add(
        "generation_length",
        &outputs,
        Some((p.generation_length.mean, p.generation_length.median)),
    );
    add(
        "new_tokens_per_turn",
        &new_tokens,
        Some((p.new_tokens_per_turn.mean, p.new_tokens_per_turn.median)),
    );
    add("inter_turn_delay_ms", &delays, None);
    add(
        "turns_per_session",
        &turns,
        p.turns.as_ref().map(|t| (t.mean as f64, t.median as f64)),
    );
    let total = sessions.len();
    let share = |n: usize| round_to(n as f64 / total.max(1) as f64, 4);
    let (retires, resets, targets, splits) = (
        count(EndReason::ForcedRetire),
        count(EndReason::ProbabilisticReset),
        count(EndReason::TargetTurnCount),
        count(EndReason::RestartSplit),
    );
    json!({
        "config_summary": config_summary(p),
        "observed_vs_target": observed,
        "session_stats": percentile_stats(&turns),
        "session_end_stats": {
            "total_sessions": total,
            "forced_retires": retires,
            "probabilistic_resets": resets,
            "target_turn_completions": targets,
            "restart_splits": splits,
            "retire_fraction": share(retires),
            "reset_fraction": share(resets),
            "target_turn_fraction": share(targets),
            "restart_split_fraction": share(splits),
            "final_context_utilization": percentile_stats(&utilization),
        },
    })
}

fn config_summary(p: &Params) -> Value {
    let c = &p.cache;
    let fixed = (c.layer1_tokens + c.layer1_5_tokens) as f64;
    let d = &p.inter_turn_delay;
    let mut s = json!({
        "initial_context_mean": fixed + c.layer2.mean,
        "initial_context_median": fixed + c.layer2.median,
        "layer1_tokens": c.layer1_tokens,
        "layer1_5_tokens": c.layer1_5_tokens,
        "layer2_mean": c.layer2.mean,
        "layer2_median": c.layer2.median,
        "num_groups": c.layer1_5_groups.num_groups,
        "zipf_alpha": c.layer1_5_groups.zipf_alpha,
        "new_tokens_per_turn_mean": p.new_tokens_per_turn.mean,
        "new_tokens_per_turn_median": p.new_tokens_per_turn.median,
        "generation_length_mean": p.generation_length.mean,
        "generation_length_median": p.generation_length.median,
        "max_prompt_tokens": p.max_prompt_tokens,
        "block_size": p.block_size,
        "inter_turn_delay_agentic_fraction": d.agentic_fraction,
        "inter_turn_delay_agentic_mean_ms": d.agentic_delay.mean,
        "inter_turn_delay_human_mean_ms": d.human_delay.mean,
        "turn_mode_enabled": u8::from(p.turns.is_some()),
    });
    if let Some(r) = &p.reset {
        s["reset_base_probability"] = json!(r.base_probability);
        s["reset_context_scaling"] = json!(r.context_scaling);
    }
    if let Some(t) = &p.turns {
        s["turns_mean"] = json!(t.mean);
        s["turns_median"] = json!(t.median);
        s["turns_min"] = json!(t.min);
        s["turns_max"] = json!(t.max);
        s["turns_allow_truncation"] = json!(u8::from(t.allow_truncation));
        if let Some(n) = t.max_session_attempts {
            s["turns_max_session_attempts"] = json!(n);
        }
    }
    s
}

/// Checks the written trace as `aiperf validate mooncake-trace` does: its row count.
fn validate(path: &Path, block: u64) -> Result<usize, SynthError> {
    let blocks = crate::dataset::custom::Blocks {
        size: block as usize,
        flag: "block_size",
    };
    let check = crate::dataset::custom::check_mooncake_file(path, blocks)
        .map_err(|e| SynthError::Other(format!("the written trace does not validate: {e}")))?;
    if let Some(p) = check.problems.first() {
        return Err(SynthError::Other(format!(
            "the written trace does not validate ({} problems), first: {p}",
            check.problems.len()
        )));
    }
    Ok(check.rows.len())
}
