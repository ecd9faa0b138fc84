//! `aiperf merge`: the artifacts of N shards as those of one run. Every metric is
//! recomputed from the union of the shards' per-record lines through the collector, the
//! same code a single run uses (percentiles are never averaged), and written with the
//! same exporters, plus a table of how each shard kept its schedule.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::cli::shard::MergeArgs;
use crate::clock::Clock;
use crate::export::read::{ReadRecord, read_records, read_summary};
use crate::export::table::{Justify, Table};
use crate::export::{self, FileNames, RunInfo};
use crate::load::pacing::{PacingReport, SendSample};
use crate::metrics::catalog::by_tag;
use crate::metrics::{Collector, CollectorOptions, RecordFacts, RecordMetrics, parse_goodput};
use crate::tokenizer::Tokenizer;

mod wait;

/// Why a merge failed: bad input (exit 2) or anything else (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

fn input(msg: impl Into<String>) -> MergeError {
    MergeError::Input(msg.into())
}

/// One shard's artifacts, read.
struct ShardRun {
    dir: PathBuf,
    summary: Value,
    index: u64,
    count: u64,
    plan_hash: String,
    records: Vec<ReadRecord>,
}

pub fn run(args: &MergeArgs) -> Result<(), MergeError> {
    if let Some(shards) = args.wait_for_shards {
        wait::wait_for_shards(&args.dirs, &wait_of(args, shards)?)?;
    }
    let dirs = shard_dirs(&args.dirs)?;
    let mut shards = Vec::with_capacity(dirs.len());
    for dir in dirs {
        shards.push(read_shard(dir)?);
    }
    check_plan(&mut shards)?;
    check_unique_ids(&shards)?;
    for shard in &shards {
        check_count(shard)?;
    }
    check_output(&args.output, &args.dirs, &shards)?;
    let first = &shards[0];
    let block = &first.summary["shard"];

    let goodput = match block["goodput"].as_str() {
        Some(spec) => parse_goodput(spec).map_err(|e| input(format!("goodput: {e}")))?,
        None => Vec::new(),
    };
    let endpoint = first.summary["input_config"]["endpoint"]["type"]
        .as_str()
        .and_then(crate::endpoint::EndpointType::from_name);
    let options = CollectorOptions {
        streaming: first.summary["input_config"]["endpoint"]["streaming"] == json!(true),
        goodput,
        slice_duration_ns: block["slice_duration_ns"].as_u64(),
        // Embeddings and rankings shards: no output-token metrics in the merge either.
        no_output_tokens: endpoint.is_some_and(|t| !t.produces_tokens()),
        no_input_tokens: endpoint.is_some_and(|t| !t.tokenizes_input()),
        ..CollectorOptions::default()
    };
    // The records carry their token counts: the tokenizer is never asked.
    let tokenizer = Arc::new(Tokenizer::builtin()?);
    let mut collector = Collector::new(options, tokenizer, Clock::new(), None);
    let mut samples = Vec::new();
    for shard in &shards {
        for r in shard.records.iter().filter(|r| !r.warmup) {
            collector.add_metrics(&facts(r), &metrics_of(r, &shard.dir)?);
            samples.extend(sample_of(r));
        }
    }
    let summary = collector.finish().map_err(anyhow::Error::from)?;

    let target_rate = profiling_rate(&first.summary);
    let pacing = PacingReport::from_samples(&samples, target_rate);
    let mut input_config = first.summary["input_config"].clone();
    input_config["artifacts"]["dir"] = json!(args.output.display().to_string());
    let records = shards.iter().flat_map(|s| s.records.iter());
    let start_wall_ns = records.clone().map(|r| r.start_wall_ns).min().unwrap_or(0);
    let end_wall_ns = records.map(|r| r.end_wall_ns).max().unwrap_or(0);
    let info = RunInfo {
        benchmark_id: crate::ids::uuid4(&mut rand::rng()),
        start_wall_ns,
        end_wall_ns,
        was_cancelled: shards
            .iter()
            .any(|s| s.summary["was_cancelled"] == json!(true)),
        is_complete: shards
            .iter()
            .all(|s| s.summary["is_complete"] == json!(true)),
        cli_command: first.summary["run_info"]["cli_command"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        input_config,
        random_seed: first.summary["run_info"]["random_seed"].as_u64(),
        tokenizer: first.summary["tokenizer"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        template_overhead: first.summary.get("chat_template_overhead").cloned(),
        streaming: options_streaming(&first.summary),
        load_pacing: pacing.as_ref().map(PacingReport::to_json),
        client_overhead: None,
        gpu_telemetry: None,
        output_limit_is_a_ceiling: false,
        extra_metrics: Vec::new(),
        extra: vec![
            (
                "shard",
                json!({"count": first.count, "plan_hash": first.plan_hash, "merged": true}),
            ),
            (
                "merged_shards",
                Value::Array(shards.iter().map(shard_row).collect()),
            ),
        ],
    };
    let mut console_text = export::render_console(&summary, &info);
    console_text.push_str(&shard_table(&shards));
    let summary_files = export::SummaryFiles {
        names: &FileNames::default(),
        summary: &summary,
        info: &info,
        console_text: &console_text,
    };
    let exported = export::export_all(&args.output, &[&summary_files])
        .map_err(|e| anyhow::anyhow!("cannot write to {}: {e:#}", args.output.display()))?;
    if let Some(e) = exported.first_failure() {
        return Err(e
            .context(format!("cannot write to {}", args.output.display()))
            .into());
    }
    let written = exported.written;
    let jsonl = write_merged_records(&shards, &args.output)?;
    crate::report::write_run_or_warn(&args.output, &FileNames::default(), None);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{console_text}");
    let _ = writeln!(
        out,
        "Merged {} shards ({} requests)",
        shards.len(),
        summary.request_count + summary.error_request_count
    );
    for w in &written {
        if let Some(label) = w.label {
            let _ = writeln!(out, "{label}: {}", w.path.display());
        }
    }
    let _ = writeln!(out, "Records: {}", jsonl.display());
    Ok(())
}

fn wait_of(args: &MergeArgs, shards: u64) -> Result<wait::Wait, MergeError> {
    if shards == 0 {
        return Err(input(
            "--wait-for-shards 0: give the number of shards, 1 or more",
        ));
    }
    use crate::config::limits::{Zero, seconds};
    let timeout = seconds("--wait-timeout", args.wait_timeout, Zero::Allowed)
        .map_err(|e| input(e.to_string()))?;
    let since = args
        .wait_since
        .as_deref()
        .map(|t| crate::config::parse_wall_time("--wait-since", t))
        .transpose()
        .map_err(input)?
        .map(|ns| UNIX_EPOCH + Duration::from_nanos(ns));
    Ok(wait::Wait {
        shards,
        timeout,
        since,
    })
}

/// Every shard's record lines in one `profile_export.jsonl`, ordered by send time, so the
/// merged directory plots and reports like a single run's (lines are copied unchanged).
fn write_merged_records(shards: &[ShardRun], output: &Path) -> Result<PathBuf, MergeError> {
    let mut lines: Vec<(u64, String)> = Vec::new();
    for shard in shards {
        let path = shard.dir.join(export::JSONL_FILE);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let start = serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|v| v["metadata"]["request_start_ns"].as_u64())
                .unwrap_or(0);
            lines.push((start, line.to_string()));
        }
    }
    lines.sort_by_key(|(start, _)| *start);
    let mut text = String::with_capacity(lines.iter().map(|(_, l)| l.len() + 1).sum());
    for (_, line) in &lines {
        text.push_str(line);
        text.push('\n');
    }
    let path = output.join(export::JSONL_FILE);
    std::fs::write(&path, text)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

fn options_streaming(summary: &Value) -> bool {
    summary["input_config"]["endpoint"]["streaming"] == json!(true)
}

/// The profiling phase's `--request-rate`, if it had one (the merged target).
fn profiling_rate(summary: &Value) -> Option<f64> {
    summary["input_config"]["phases"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == "profiling")?["rate"]
        .as_f64()
}

/// Each argument is a shard's directory, or a directory of shard directories.
fn shard_dirs(args: &[PathBuf]) -> Result<Vec<PathBuf>, MergeError> {
    let mut dirs = Vec::new();
    for dir in args {
        if dir.join(export::JSON_FILE).is_file() {
            dirs.push(dir.clone());
            continue;
        }
        let entries = std::fs::read_dir(dir)
            .map_err(|e| input(format!("{}: cannot read it: {e}", dir.display())))?;
        let mut inner: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join(export::JSON_FILE).is_file() && !is_merged(p))
            .collect();
        if inner.is_empty() {
            return Err(input(format!(
                "{}: no {} in it or in its subdirectories; give the shards' artifact directories",
                dir.display(),
                export::JSON_FILE
            )));
        }
        inner.sort();
        dirs.extend(inner);
    }
    Ok(dirs)
}

/// An earlier merge's output (written beside the shards it merged).
fn is_merged(dir: &Path) -> bool {
    read_summary(&dir.join(export::JSON_FILE)).is_ok_and(|s| s.get("merged_shards").is_some())
}

fn read_shard(dir: PathBuf) -> Result<ShardRun, MergeError> {
    let summary = read_summary(&dir.join(export::JSON_FILE)).map_err(input)?;
    let block = &summary["shard"];
    let (Some(index), Some(count), Some(plan_hash)) = (
        block["index"].as_u64(),
        block["count"].as_u64(),
        block["plan_hash"].as_str(),
    ) else {
        return Err(input(format!(
            "{}: {} has no shard block; it was not run with --shard-index/--shard-count",
            dir.display(),
            export::JSON_FILE
        )));
    };
    let jsonl = dir.join(export::JSONL_FILE);
    if !jsonl.is_file() {
        return Err(input(format!(
            "{}: no {}; shards must keep their records (--export-level records, the default)",
            dir.display(),
            export::JSONL_FILE
        )));
    }
    let records = read_records(&jsonl).map_err(input)?;
    Ok(ShardRun {
        plan_hash: plan_hash.to_string(),
        dir,
        summary,
        index,
        count,
        records,
    })
}

/// Every shard of one plan, each index once, none missing; sorted by index.
fn check_plan(shards: &mut [ShardRun]) -> Result<(), MergeError> {
    shards.sort_by_key(|s| s.index);
    let first = &shards[0];
    for s in shards.iter() {
        if s.plan_hash != first.plan_hash || s.count != first.count {
            return Err(input(format!(
                "{} (plan {}, {} shards) and {} (plan {}, {} shards) ran different plans: options, seed or shard count differ; merge only shards of one run",
                first.dir.display(),
                first.plan_hash,
                first.count,
                s.dir.display(),
                s.plan_hash,
                s.count
            )));
        }
    }
    for w in shards.windows(2) {
        if w[0].index == w[1].index {
            return Err(input(format!(
                "shard {} appears twice: {} and {}",
                w[0].index,
                w[0].dir.display(),
                w[1].dir.display()
            )));
        }
    }
    let missing: Vec<String> = (0..first.count)
        .filter(|i| !shards.iter().any(|s| s.index == *i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(input(format!(
            "shard(s) {} of {} missing; give every shard's directory",
            missing.join(", "),
            first.count
        )));
    }
    Ok(())
}

/// The records file holds as many profiling records as the summary counts: a cut or
/// emptied file (a full disk, a copy gone wrong) would merge as a smaller run.
fn check_count(shard: &ShardRun) -> Result<(), MergeError> {
    let (dir, summary) = (&shard.dir, &shard.summary);
    let counted = ["request_count", "error_request_count"]
        .iter()
        .map(|tag| summary[tag]["avg"].as_f64().unwrap_or(0.0))
        .sum::<f64>();
    let read = shard.records.iter().filter(|r| !r.warmup).count();
    if counted != read as f64 {
        return Err(input(format!(
            "{}: {read} profiling records, but {} counts {counted} requests; the records file is cut or from another run, so the merge would be wrong (re-run the shard, or restore its files)",
            dir.join(export::JSONL_FILE).display(),
            dir.join(export::JSON_FILE).display(),
        )));
    }
    Ok(())
}

/// Each request once: a request id seen twice (a shard given under two names, a line
/// repeated) would be counted twice.
fn check_unique_ids(shards: &[ShardRun]) -> Result<(), MergeError> {
    let mut seen: HashMap<&str, (&Path, usize)> = HashMap::new();
    for shard in shards {
        for r in &shard.records {
            let Some(id) = r.request_id.as_deref() else {
                continue;
            };
            if let Some((dir, line)) = seen.insert(id, (&shard.dir, r.line)) {
                return Err(input(format!(
                    "request {id} appears twice: {}:{line} and {}:{}; merge each shard's records once",
                    dir.join(export::JSONL_FILE).display(),
                    shard.dir.join(export::JSONL_FILE).display(),
                    r.line
                )));
            }
        }
    }
    Ok(())
}

/// The output is a directory of its own: written into a shard (or a directory named on
/// the command line), the merge would overwrite the files it reads.
fn check_output(output: &Path, args: &[PathBuf], shards: &[ShardRun]) -> Result<(), MergeError> {
    let Ok(out) = output.canonicalize() else {
        return Ok(()); // not there yet: it clashes with nothing
    };
    let inputs = args.iter().chain(shards.iter().map(|s| &s.dir));
    for dir in inputs {
        if dir.canonicalize().is_ok_and(|d| d == out) {
            return Err(input(format!(
                "--output {}: it is {}, a directory being merged, whose files the merge would overwrite; give a new directory",
                output.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

fn facts(r: &ReadRecord) -> RecordFacts<'_> {
    RecordFacts {
        start_wall_ns: r.start_wall_ns,
        end_wall_ns: r.end_wall_ns,
        error: r.error.as_ref(),
        requested_output_tokens: r.requested_output_tokens,
    }
}

fn metrics_of(r: &ReadRecord, dir: &Path) -> Result<RecordMetrics, MergeError> {
    let mut values = Vec::with_capacity(r.metrics.len());
    for (tag, v) in &r.metrics {
        let def = by_tag(tag).ok_or_else(|| {
            input(format!(
                "{}: metric {tag} is not one this build knows; merge with the aiperf that wrote it",
                dir.display()
            ))
        })?;
        values.push((def.id, *v));
    }
    Ok(RecordMetrics::from_display(
        values,
        r.inter_chunk_latency.clone(),
    ))
}

/// A scheduled send, on the wall clock of the shard that made it.
fn sample_of(r: &ReadRecord) -> Option<SendSample> {
    Some(SendSample {
        scheduled_ns: r.scheduled_ns?,
        actual_ns: r.start_wall_ns,
        slot_wait_ns: r.slot_wait_ns,
    })
}

/// One shard's line of `merged_shards`.
fn shard_row(s: &ShardRun) -> Value {
    let pacing = &s.summary["load_pacing"];
    json!({
        "index": s.index,
        "dir": s.dir.display().to_string(),
        "requests": s.records.iter().filter(|r| !r.warmup).count(),
        "achieved_request_rate": pacing["achieved_request_rate"],
        "target_request_rate": pacing["target_request_rate"],
        "send_lag_ms": pacing["send_lag"],
        "clock_offset": s.summary["shard"]["clock_offset"],
        "start_at": s.summary["shard"]["start_at"],
    })
}

/// The console's per-shard table: requests, achieved rate, send lag and clock offset.
fn shard_table(shards: &[ShardRun]) -> String {
    let mut t = Table::new("Shards")
        .column("Shard", Justify::Left)
        .column("Requests", Justify::Right)
        .column("Rate (req/s)", Justify::Right)
        .column("Send lag p50 (ms)", Justify::Right)
        .column("Send lag p99 (ms)", Justify::Right)
        .column("Clock offset (ms)", Justify::Right);
    let num =
        |v: &Value, digits: usize| v.as_f64().map_or("n/a".into(), |x| format!("{x:.digits$}"));
    for s in shards {
        let p = &s.summary["load_pacing"];
        let o = &s.summary["shard"]["clock_offset"];
        let offset = match (o["offset_ms"].as_f64(), o["uncertainty_ms"].as_f64()) {
            (Some(x), Some(u)) => format!("{x:+.1} ± {u:.1}"),
            _ => "n/a".into(),
        };
        t.row(vec![
            format!("{} of {}", s.index, s.count),
            s.records.iter().filter(|r| !r.warmup).count().to_string(),
            num(&p["achieved_request_rate"], 3),
            num(&p["send_lag"]["p50"], 3),
            num(&p["send_lag"]["p99"], 3),
            offset,
        ]);
    }
    format!("\n{}", t.render(export::console::CONSOLE_WIDTH))
}
