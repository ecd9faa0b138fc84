//! The phases of a run: an optional warmup, then profiling, each paced as configured.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::time::Instant;

use tracing::{debug, info, warn};

use super::collect::Collection;
use super::control_hooks;
use super::observe::Observers;
use crate::config::ProfileConfig;
use crate::load::pacing::PacingReport;
use crate::load::{self, LoadContext, Pacing, PhaseSpec};
use crate::metrics::live::LivePhase;
use crate::metrics::server_metrics::Window;
use crate::metrics::server_series::Phase as ScrapePhase;
use crate::record::Phase;

/// What the phases did.
pub(super) struct Ran {
    pub sent: u64,
    /// How well profiling kept its schedule (open loop and fixed schedule only).
    pub pacing: Option<PacingReport>,
    pub start_wall_ns: u64,
    pub end_wall_ns: u64,
    /// When the first phase started (a shared `--start-at`, or at once): the origin of
    /// its schedule.
    pub schedule_start_wall_ns: u64,
    /// The phases' spans on the run clock, for the server-side series scraped beside them.
    pub warmup_window: Option<Window>,
    pub profiling_window: Window,
}

/// Runs the warmup (when asked for) and profiling, sending finished records to `records`.
pub(super) fn run(
    runtime: &tokio::runtime::Runtime,
    cfg: &ProfileConfig,
    ctx: &Arc<LoadContext>,
    // A trace's send offsets, and the shared start (`--start-at`) of the first phase.
    (schedule, start): (Option<Arc<[u64]>>, Option<Instant>),
    warmup_requests: u64,
    collection: &Collection,
    observers: &Observers,
) -> anyhow::Result<Ran> {
    let records = collection.records.clone();
    let clock = ctx.clock;
    let start_wall_ns = clock.wall_ns(clock.now_ns());
    let schedule_start_wall_ns = start.map_or(start_wall_ns, |at| clock.wall_ns(clock.ns_of(at)));
    let pacing = match (schedule, cfg.load.rate) {
        (Some(offsets_ns), _) => Pacing::Fixed { offsets_ns },
        (None, Some((rate, pattern))) => Pacing::Rate { rate, pattern },
        (None, None) => match cfg.load.user_centric {
            Some(users) => Pacing::Users(users),
            None => Pacing::ClosedLoop,
        },
    };
    let mut sent = 0;
    let mut warmup_window = None;
    let shard = cfg.shard.shard;
    // The shared start goes to the first phase.
    let mut start = start;
    if let Some(mut warmup) = warmup_spec(cfg, &pacing, warmup_requests) {
        warmup.start = start.take();
        observers.mark_phase_boundary(runtime);
        let start_ns = clock.now_ns();
        observers.phase_started(ScrapePhase::Warmup, start_ns);
        collection.show_phase(LivePhase::Warmup, start_ns);
        let started = Instant::now();
        sent += runtime
            .block_on(load::run_phase(ctx.clone(), warmup, records.clone()))
            .sent;
        let end_ns = clock.now_ns();
        observers.phase_ended(ScrapePhase::Warmup, end_ns);
        warmup_window = Some(Window { start_ns, end_ns });
        debug!(
            "Warmup phase: {sent} sent in {:.3} s",
            started.elapsed().as_secs_f64()
        );
        collection.warmup_bar.finish_and_clear();
    }
    // The closed loop needs its slots; a rate or a schedule is capped only when asked.
    let cap = match pacing {
        Pacing::ClosedLoop => Some(cfg.concurrency),
        _ => cfg.load.concurrency_given.then_some(cfg.concurrency),
    }
    .map(|c| shard_share(cfg, c));
    if !ctx.stop.load(Ordering::Relaxed) {
        log_profiling(cfg, ctx, &pacing, cap);
    }
    let profiling = PhaseSpec {
        phase: Phase::Profiling,
        // A shard numbers its sends as the whole plan does: after every shard's warmup.
        first_send: match shard {
            Some(_) if cfg.warmup_request_count > 0 => cfg.warmup_request_count,
            _ => sent,
        },
        count: cfg.load.count_limit(cfg.request_count),
        sessions: cfg.load.sessions,
        duration: cfg.load.duration,
        grace: cfg.load.grace,
        concurrency: cap,
        pacing,
        cancellation: cfg.load.cancellation,
        seed: cfg.random_seed,
        ramps: cfg.load.ramps.clone(),
        prefill_concurrency: cfg.load.prefill_concurrency.map(|c| shard_share(cfg, c)),
        shard,
        start,
    };
    // The server's profiler covers the profiling phase only (after the warmup).
    let profiler = cfg.control_hooks.profiler.as_ref();
    if let Some(hooks) = profiler {
        runtime
            .block_on(control_hooks::start_profiler(&ctx.client, hooks))
            .map_err(anyhow::Error::msg)?;
    }
    // Server counters of the profiling phase start from a scrape taken after the warmup.
    observers.mark_phase_boundary(runtime);
    let profiling_start_ns = clock.now_ns();
    observers.phase_started(ScrapePhase::Profiling, profiling_start_ns);
    collection.show_phase(LivePhase::Profiling, profiling_start_ns);
    let started = Instant::now();
    let result = runtime.block_on(load::run_phase(ctx.clone(), profiling, records));
    let profiling_window = Window {
        start_ns: profiling_start_ns,
        end_ns: clock.now_ns(),
    };
    observers.phase_ended(ScrapePhase::Profiling, profiling_window.end_ns);
    collection.show_phase(LivePhase::Done, profiling_window.end_ns);
    if let Some(hooks) = profiler {
        runtime.block_on(control_hooks::stop_profiler(&ctx.client, hooks));
    }
    debug!(
        "Profiling phase: {} sent in {:.3} s",
        result.sent,
        started.elapsed().as_secs_f64()
    );
    Ok(Ran {
        sent: sent + result.sent,
        pacing: result.pacing,
        start_wall_ns,
        end_wall_ns: clock.wall_ns(clock.now_ns()),
        schedule_start_wall_ns,
        warmup_window,
        profiling_window,
    })
}

/// The warmup phase, when one was asked for; its rate and concurrency each fall back to
/// the profiling ones.
fn warmup_spec(cfg: &ProfileConfig, pacing: &Pacing, requests: u64) -> Option<PhaseSpec> {
    let w = &cfg.load.warmup;
    let warmup_on =
        cfg.warmup_request_count > 0 || cfg.load.warmup_duration.is_some() || w.sessions.is_some();
    if !warmup_on {
        if w.grace.is_some()
            || w.concurrency.is_some()
            || w.prefill_concurrency.is_some()
            || w.rate != cfg.load.rate
            || w.ramps_given
        {
            warn!(
                "--warmup-grace-period/--warmup-concurrency/--warmup-prefill-concurrency/--warmup-request-rate/--warmup-arrival-pattern/--warmup-*-ramp-duration apply to a warmup; none was asked for (--warmup-request-count, --warmup-duration or --num-warmup-sessions), so they are ignored"
            );
        }
        return None;
    }
    match (cfg.load.warmup_duration, w.sessions) {
        (Some(d), _) => info!("Warming up for {:.1} s", d.as_secs_f64()),
        (None, Some(n)) => info!("Warming up: {n} conversations ({requests} requests)"),
        (None, None) => info!("Warming up: {} requests", cfg.warmup_request_count),
    }
    let warmup_pacing = match (w.rate, pacing) {
        (Some((rate, pattern)), _) => Pacing::Rate { rate, pattern },
        (None, p) => p.clone(),
    };
    let concurrency = match warmup_pacing {
        Pacing::ClosedLoop => Some(w.concurrency.unwrap_or(cfg.concurrency)),
        // A rate is capped only when a concurrency was given (as for profiling).
        _ => w
            .concurrency
            .or(cfg.load.concurrency_given.then_some(cfg.concurrency)),
    };
    let concurrency = concurrency.map(|c| shard_share(cfg, c));
    Some(PhaseSpec {
        phase: Phase::Warmup,
        first_send: 0,
        count: (cfg.warmup_request_count > 0).then_some(cfg.warmup_request_count),
        sessions: w.sessions,
        duration: cfg.load.warmup_duration,
        // Without --warmup-grace-period, warmup requests in flight are waited for.
        grace: w.grace,
        concurrency,
        pacing: warmup_pacing,
        cancellation: cfg.load.cancellation,
        seed: cfg.random_seed ^ 0x3a7e_0001,
        ramps: w.ramps.clone(),
        prefill_concurrency: w
            .prefill_concurrency
            .or(cfg.load.prefill_concurrency)
            .map(|c| shard_share(cfg, c)),
        shard: cfg.shard.shard,
        start: None,
    })
}

/// This shard's part of a cap on requests in flight (the whole cap without shards); at
/// least 1, as `config` refuses caps below the shard count.
fn shard_share(cfg: &ProfileConfig, cap: u64) -> u64 {
    cfg.shard.shard.map_or(cap, |s| s.share_of(cap).max(1))
}

/// One line saying how profiling will run and what stops it.
fn log_profiling(cfg: &ProfileConfig, ctx: &LoadContext, pacing: &Pacing, cap: Option<u64>) {
    let how = match pacing {
        Pacing::ClosedLoop => format!("at concurrency {}", cfg.concurrency),
        Pacing::Rate { rate, pattern } => {
            let at = match &cfg.load.ramps.series {
                Some(s) => format!(
                    "on --request-rate-series ({} points, {} to {} requests/sec)",
                    s.points.len(),
                    s.points[0].1,
                    s.points[s.points.len() - 1].1
                ),
                None => format!("at {rate} requests/sec"),
            };
            format!(
                "{at} ({pattern:?}){}",
                cap.map_or(String::new(), |c| format!(", at most {c} in flight"))
            )
        }
        Pacing::Fixed { .. } => "on the input file's fixed schedule".to_string(),
        Pacing::Users(u) => format!(
            "with {} users at {} requests/sec in all ({:.3} s between a user's turns){}",
            u.users,
            u.qps,
            u.turn_gap().as_secs_f64(),
            cap.map_or(String::new(), |c| format!(", at most {c} in flight"))
        ),
    };
    let how = match cfg.load.prefill_concurrency {
        Some(n) => format!("{how}, at most {n} waiting for their first token"),
        None => how,
    };
    let mut limits = Vec::new();
    if let Some(n) = cfg.load.count_limit(cfg.request_count) {
        limits.push(format!("{n} requests"));
    }
    if let Some(n) = cfg.load.sessions {
        limits.push(format!("{n} conversations"));
    }
    if let Some(d) = cfg.load.duration {
        limits.push(format!("{:.1} s", d.as_secs_f64()));
    }
    let limit = match limits.is_empty() {
        true => "no limit".to_string(),
        false => limits.join(" or "),
    };
    info!("Profiling: {limit} {how} against {}", ctx.client.uri());
}
