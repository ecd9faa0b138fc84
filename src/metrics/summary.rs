//! The summary of a set of requests (the run, or one time slice): the record metrics'
//! statistics, the run-level values derived from them and the counts, and the sweep-line
//! metrics as results.

use super::catalog::{CATALOG, METRIC_COUNT, MetricId, MetricKind};
use super::collector::{Counts, MetricResult, MetricValue};
use super::sweep_line::WeightedStats;
use crate::stats::Stats;

/// The sweep-line metrics of one window as results.
pub(super) fn sweep_results(swept: Vec<(MetricId, WeightedStats)>) -> Vec<MetricResult> {
    swept
        .into_iter()
        .map(|(id, stats)| MetricResult {
            def: id.def(),
            value: MetricValue::TimeWeighted(stats),
        })
        .collect()
}

/// Run-level metrics that count output tokens (alone or with input tokens) or split
/// requests at their first token: without tokens (embeddings, rankings) they would show
/// zeros or input tokens only, so they go.
pub(super) fn drop_output_token_metrics(results: &mut Vec<MetricResult>) {
    use MetricId as M;
    const OUTPUT: &[MetricId] = &[
        M::TotalTokenThroughput,
        M::EffectivePrefillConcurrency,
        M::EffectivePrefillThroughput,
        M::EffectivePrefillThroughputPerUser,
        M::ActivePrefillThroughput,
        M::ActivePrefillThroughputPerUser,
        M::EffectiveDecodeConcurrency,
        M::EffectiveDecodeThroughput,
        M::EffectiveTotalThroughput,
        M::EffectiveDecodeThroughputPerUser,
        M::TokensInFlight,
        M::ActiveDecodeThroughput,
        M::ActiveTotalThroughput,
        M::ActiveDecodeThroughputPerUser,
    ];
    results.retain(|r| !OUTPUT.contains(&r.def.id));
}

/// Statistics of the record metrics and the run-level values over `duration_ns` (the
/// benchmark window, or one time slice). `stats` gives one record metric's statistics at a
/// time (`None` without values). `any_record`: some request was counted (the duration is
/// meaningful).
pub(super) fn summarize(
    stats: &mut dyn FnMut(MetricId) -> Option<Stats>,
    counts: &Counts,
    duration_ns: u64,
    any_record: bool,
    goodput_enabled: bool,
) -> Vec<MetricResult> {
    let mut results = Vec::new();
    let mut sums = [None::<f64>; METRIC_COUNT];
    for def in CATALOG.iter().filter(|d| d.kind == MetricKind::Record) {
        if let Some(stats) = stats(def.id) {
            sums[def.id as usize] = Some(stats.sum);
            results.push(MetricResult {
                def,
                value: MetricValue::Distribution(stats),
            });
        }
    }

    let duration_s = duration_ns as f64 / 1e9;
    let per_second = |count: f64| (duration_ns > 0).then(|| count / duration_s);
    let sum = |id: MetricId| sums[id as usize];

    let mut scalar = |id: MetricId, value: Option<f64>| {
        if let Some(v) = value {
            results.push(MetricResult {
                def: id.def(),
                value: MetricValue::Scalar(v),
            });
        }
    };
    let total_osl = sum(MetricId::OutputSequenceLength);
    scalar(
        MetricId::OutputTokenThroughput,
        total_osl.and_then(per_second),
    );
    scalar(
        MetricId::RequestThroughput,
        per_second(counts.requests as f64),
    );
    if goodput_enabled {
        scalar(MetricId::Goodput, per_second(counts.good as f64));
    }
    scalar(MetricId::RequestCount, Some(counts.requests as f64));
    if counts.errors > 0 {
        scalar(MetricId::ErrorRequestCount, Some(counts.errors as f64));
    }
    if goodput_enabled {
        scalar(MetricId::GoodRequestCount, Some(counts.good as f64));
    }
    if any_record {
        scalar(MetricId::BenchmarkDuration, Some(duration_ns as f64));
    }
    scalar(MetricId::TotalOsl, total_osl);
    scalar(MetricId::TotalIsl, sum(MetricId::InputSequenceLength));
    scalar(MetricId::TotalOutputTokens, sum(MetricId::OutputTokenCount));
    scalar(
        MetricId::TotalReasoningTokens,
        sum(MetricId::ReasoningTokenCount),
    );
    scalar(MetricId::TotalErrorIsl, sum(MetricId::ErrorIsl));
    scalar(MetricId::TotalNumImages, sum(MetricId::NumImages));

    // AIPerf 0.13's run-level additions.
    let completed = counts.requests + counts.errors;
    scalar(MetricId::CompletedRequestCount, Some(completed as f64));
    scalar(
        MetricId::RequestErrorRate,
        (completed > 0).then(|| counts.errors as f64 * 100.0 / completed as f64),
    );
    // Counted when some request asked for an output length.
    if sum(MetricId::OslMismatchDiffPct).is_some() {
        scalar(
            MetricId::OslMismatchCount,
            Some(counts.osl_mismatches as f64),
        );
    }
    if counts.usage_compared {
        scalar(
            MetricId::UsageDiscrepancyCount,
            Some(counts.usage_discrepancies as f64),
        );
    }
    let total_isl = sum(MetricId::InputSequenceLength);
    scalar(
        MetricId::InputTokenThroughput,
        total_isl.and_then(per_second),
    );
    let total_tokens = match (total_isl, total_osl) {
        (None, None) => None,
        (isl, osl) => Some(isl.unwrap_or(0.0) + osl.unwrap_or(0.0)),
    };
    scalar(
        MetricId::TotalTokenThroughput,
        total_tokens.and_then(per_second),
    );
    scalar(
        MetricId::TotalUsagePromptTokens,
        sum(MetricId::UsagePromptTokens),
    );
    scalar(
        MetricId::TotalUsageCompletionTokens,
        sum(MetricId::UsageCompletionTokens),
    );
    scalar(
        MetricId::TotalUsageTotalTokens,
        sum(MetricId::UsageTotalTokens),
    );
    if goodput_enabled {
        let fraction = if completed > 0 {
            counts.good as f64 / completed as f64
        } else {
            0.0
        };
        scalar(MetricId::GoodRequestFraction, Some(fraction));
    }
    results
}
