//! Collects finished records into per-metric value arrays and summarizes them at the end.

use std::collections::HashMap;
use std::sync::Arc;

use super::CollectorOptions;
use super::catalog::{CATALOG, METRIC_COUNT, MetricDef, MetricId, MetricKind};
use super::column::Column;
use super::goodput::Objective;
use super::record_metrics::{RecordMetrics, RecordOptions};
use super::sweep::{self, Span, SpanSource, WeightedStats};
use crate::clock::Clock;
use crate::record::{ErrorDetails, Phase, RequestRecord};
use crate::stats::Stats;
use crate::tokenizer::Tokenizer;

/// A metric's result over the run, in base units.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricValue {
    /// Record metrics: statistics over all requests.
    Distribution(Stats),
    /// Aggregate and derived metrics: one number.
    Scalar(f64),
    /// Sweep-line metrics: time-weighted statistics (already in the display unit).
    TimeWeighted(WeightedStats),
}

#[derive(Debug, Clone)]
pub struct MetricResult {
    pub def: &'static MetricDef,
    /// Base units (ns, tokens, ...); see [`MetricResult::display`].
    pub value: MetricValue,
}

impl MetricResult {
    /// The value converted to the display unit (`def.unit`).
    pub fn display(&self) -> MetricValue {
        match &self.value {
            MetricValue::Distribution(s) => MetricValue::Distribution(s.scaled(self.def.scale)),
            MetricValue::Scalar(v) => MetricValue::Scalar(v / self.def.scale),
            MetricValue::TimeWeighted(w) => MetricValue::TimeWeighted(*w),
        }
    }

    /// Average (or the single value) in display units.
    pub fn display_avg(&self) -> f64 {
        match self.display() {
            MetricValue::Distribution(s) => s.avg,
            MetricValue::Scalar(v) => v,
            MetricValue::TimeWeighted(w) => w.avg,
        }
    }
}

/// A request whose output length missed the one it asked for (`--osl`), beyond AIPerf's
/// tolerance of min(5%, 50 tokens).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OslMismatch {
    pub requested: u64,
    pub received: f64,
}

impl OslMismatch {
    /// AIPerf's wording: `got 106 tokens (requested 100, diff 6.0%)`.
    pub fn describe(&self) -> String {
        let diff = (self.received - self.requested as f64) / self.requested as f64 * 100.0;
        format!(
            "got {} tokens (requested {}, diff {diff:.1}%)",
            self.received, self.requested
        )
    }
}

/// Share of the requested tokens a response may miss by (AIPerf's default 5%), capped
/// at `OSL_MISMATCH_MAX_TOKENS`.
const OSL_MISMATCH_PCT: f64 = 5.0;
const OSL_MISMATCH_MAX_TOKENS: f64 = 50.0;
/// Usage differences above this percentage count as a discrepancy (AIPerf's default).
const USAGE_DIFF_PCT: f64 = 10.0;
/// OSL mismatches kept as examples for the end-of-run summary.
const OSL_EXAMPLES: usize = 5;

/// What the sweep-line metrics need of one profiling request, wall-clock ns: 48 bytes,
/// kept for every request of the run.
#[derive(Debug, Clone)]
struct Timeline {
    start: u64,
    /// Valid when `HAS_GENERATION` is set in `gaps_at`.
    generation_start: u64,
    end: u64,
    /// Valid when `HAS_INPUT` is set.
    input_tokens: f64,
    /// Valid when `HAS_OUTPUT` is set.
    output_tokens: f64,
    /// Where this request's inter-chunk gaps start in the inter-chunk latency column
    /// (they end where the next request's start), with the three flags in its top bits.
    gaps_at: u64,
}

const HAS_GENERATION: u64 = 1 << 63;
const HAS_INPUT: u64 = 1 << 62;
const HAS_OUTPUT: u64 = 1 << 61;
const FLAGS: u64 = HAS_GENERATION | HAS_INPUT | HAS_OUTPUT;

impl Timeline {
    fn new(
        start: u64,
        generation_start: Option<u64>,
        end: u64,
        input_tokens: Option<f64>,
        output_tokens: Option<f64>,
        gaps_at: usize,
    ) -> Timeline {
        let flag = |on: bool, f: u64| if on { f } else { 0 };
        Timeline {
            start,
            generation_start: generation_start.unwrap_or(0),
            end,
            input_tokens: input_tokens.unwrap_or(0.0),
            output_tokens: output_tokens.unwrap_or(0.0),
            gaps_at: gaps_at as u64
                | flag(generation_start.is_some(), HAS_GENERATION)
                | flag(input_tokens.is_some(), HAS_INPUT)
                | flag(output_tokens.is_some(), HAS_OUTPUT),
        }
    }

    fn gaps_at(&self) -> usize {
        (self.gaps_at & !FLAGS) as usize
    }

    fn has(&self, flag: u64) -> bool {
        self.gaps_at & flag != 0
    }
}

/// The collected requests as the sweep reads them: relative to the first start (f64 keeps
/// ns exact there, not at epoch scale), chunk gaps read from the inter-chunk latency
/// column in place.
struct Spans<'a> {
    timelines: &'a [Timeline],
    gaps: &'a [u8],
    first: u64,
}

impl SpanSource for Spans<'_> {
    fn count(&self) -> usize {
        self.timelines.len()
    }

    fn span(&self, i: usize) -> Span<'_> {
        let rel = |t: u64| t.saturating_sub(self.first) as f64;
        let t = &self.timelines[i];
        let gaps_end = self
            .timelines
            .get(i + 1)
            .map_or(self.gaps.len(), Timeline::gaps_at);
        Span {
            start: rel(t.start),
            generation_start: t.has(HAS_GENERATION).then(|| rel(t.generation_start)),
            end: rel(t.end),
            input_tokens: t.has(HAS_INPUT).then_some(t.input_tokens),
            output_tokens: t.has(HAS_OUTPUT).then_some(t.output_tokens),
            chunk_gaps: &self.gaps[t.gaps_at()..gaps_end],
        }
    }
}

/// Per-request counts, summed over the run or over one time slice.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    requests: u64,
    errors: u64,
    good: u64,
    osl_mismatches: u64,
    usage_discrepancies: u64,
    /// Some response carried usage differences to count (`usage_discrepancy_count`).
    usage_compared: bool,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.errors += o.errors;
        self.good += o.good;
        self.osl_mismatches += o.osl_mismatches;
        self.usage_discrepancies += o.usage_discrepancies;
        self.usage_compared |= o.usage_compared;
    }
}

/// What one profiling request adds to its time slice (`--slice-duration`).
#[derive(Debug, Clone)]
struct SliceEntry {
    start: u64,
    /// The record's metric values (only those it has, to keep memory down).
    values: Vec<(MetricId, f64)>,
    inter_chunk_latency: Vec<f64>,
    counts: Counts,
}

/// The metrics of the requests that started in one window of the run (`--slice-duration`).
#[derive(Debug, Clone)]
pub struct TimeSlice {
    /// Window start, wall-clock ns.
    pub start_ns: u64,
    /// Window end, wall-clock ns; the last window ends at the run's last response.
    pub end_ns: u64,
    /// False for the last window when the run ended before its full length.
    pub is_complete: bool,
    /// Metrics over the window's requests; throughputs per second of the window.
    pub results: Vec<MetricResult>,
}

impl TimeSlice {
    #[cfg(test)]
    pub fn get(&self, tag: &str) -> Option<&MetricResult> {
        self.results.iter().find(|r| r.def.tag == tag)
    }
}

/// One row of the error summary: how many failed requests shared these details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCount {
    pub details: ErrorDetails,
    pub count: u64,
}

/// Everything the exporters need about a finished run.
#[derive(Debug, Clone)]
pub struct MetricsSummary {
    /// Metrics with a value, in catalogue order.
    pub results: Vec<MetricResult>,
    /// Distinct errors in order of first occurrence.
    pub error_summary: Vec<ErrorCount>,
    /// Successful profiling requests.
    pub request_count: u64,
    /// Failed profiling requests.
    pub error_request_count: u64,
    /// Max response end minus min request start over profiling records (wall clock).
    pub benchmark_duration_ns: u64,
    /// Requests whose output length missed `--osl` (`osl_mismatch_count`).
    pub osl_mismatch_count: u64,
    /// The first few of them, for the end-of-run summary.
    pub osl_mismatch_examples: Vec<OslMismatch>,
    /// Per-window metrics with `--slice-duration`, in time order (empty windows left out).
    pub timeslices: Vec<TimeSlice>,
}

impl MetricsSummary {
    pub fn get(&self, tag: &str) -> Option<&MetricResult> {
        self.results.iter().find(|r| r.def.tag == tag)
    }
}

/// What the statistics need of a record besides its metrics.
#[derive(Debug, Clone, Copy)]
pub struct RecordFacts<'a> {
    pub start_wall_ns: u64,
    pub end_wall_ns: u64,
    pub error: Option<&'a ErrorDetails>,
    /// The output length the request asked for (`--osl`), for the OSL mismatch count.
    pub requested_output_tokens: Option<u64>,
}

impl<'a> RecordFacts<'a> {
    pub fn of(record: &'a RequestRecord) -> Self {
        RecordFacts {
            start_wall_ns: record.start_wall_ns,
            end_wall_ns: record.end_wall_ns,
            error: record.error.as_ref(),
            requested_output_tokens: record.input.requested_output_tokens,
        }
    }
}

/// Where the collector hands each record and its metrics: the per-record export in a run.
pub trait RecordSink: Send {
    fn write(&mut self, record: &RequestRecord, metrics: &RecordMetrics) -> std::io::Result<()>;
    /// Flushes everything written to durable storage.
    fn finish(self: Box<Self>) -> std::io::Result<()>;
}

/// Receives finished records (off the hot path), computes their metrics, writes the
/// per-record JSONL, and keeps only the values the statistics need.
pub struct Collector {
    record_opts: RecordOptions,
    template_overhead: super::TemplateOverhead,
    objectives: Vec<Objective>,
    goodput_enabled: bool,
    tokenizer: Arc<Tokenizer>,
    clock: Clock,
    /// Takes each record's line (the per-record export).
    sink: Option<Box<dyn RecordSink>>,
    /// Per record metric (indexed by `MetricId`), base units, compactly encoded.
    values: Vec<Column>,
    counts: Counts,
    /// `--slice-duration` in ns; `None` without time slices.
    slice_ns: Option<u64>,
    /// Every profiling request's contribution, kept only with time slices.
    slice_entries: Vec<SliceEntry>,
    min_start_wall_ns: Option<u64>,
    max_end_wall_ns: Option<u64>,
    errors: Vec<ErrorCount>,
    error_rows: HashMap<ErrorDetails, usize>,
    /// Per record (warmup included): ns from its last chunk (or its end) to the moment its
    /// metrics and JSONL line were done. Shows whether the collector keeps up.
    record_lag_ns: Column,
    /// The missing-usage warning is logged once.
    warned_usage_missing: bool,
    /// Records added after `skip_tokenizer`, written without token counts.
    untokenized: u64,
    timelines: Vec<Timeline>,
    osl_mismatch_examples: Vec<OslMismatch>,
}

impl Collector {
    pub fn new(
        opts: CollectorOptions,
        tokenizer: Arc<Tokenizer>,
        clock: Clock,
        sink: Option<Box<dyn RecordSink>>,
    ) -> Self {
        Collector {
            record_opts: RecordOptions {
                streaming: opts.streaming,
                use_server_token_count: opts.use_server_token_count,
                template_tokens: None,
                skip_tokenizer: false,
                no_output_tokens: opts.no_output_tokens,
                no_input_tokens: opts.no_input_tokens,
            },
            template_overhead: opts.template_overhead,
            objectives: Objective::resolve(&opts.goodput),
            goodput_enabled: !opts.goodput.is_empty(),
            tokenizer,
            clock,
            sink,
            values: vec![Column::default(); METRIC_COUNT],
            counts: Counts::default(),
            slice_ns: opts.slice_duration_ns,
            slice_entries: Vec::new(),
            min_start_wall_ns: None,
            max_end_wall_ns: None,
            errors: Vec::new(),
            error_rows: HashMap::new(),
            record_lag_ns: Column::default(),
            warned_usage_missing: false,
            untokenized: 0,
            timelines: Vec::new(),
            osl_mismatch_examples: Vec::new(),
        }
    }

    /// Counts the record and writes its line. A write error is returned once; the record
    /// (and every later one) still counts in the statistics.
    pub fn add(&mut self, record: &RequestRecord) -> std::io::Result<()> {
        let written = self.add_record(record);
        let last_chunk = record.last_event_perf_ns.unwrap_or(record.end_perf_ns);
        let lag = self.clock.now_ns().saturating_sub(last_chunk);
        self.record_lag_ns.push(lag as f64);
        written
    }

    /// Statistics (ns) of the time from each record's last chunk to the record being
    /// complete, over the records added so far; `None` before the first.
    pub fn record_lag(&self) -> Option<Stats> {
        Stats::compute(&mut self.record_lag_ns.to_vec())
    }

    /// From now on records get no token counts from the client tokenizer: the run must end
    /// now, and tokenizing a backlog of large responses could take minutes.
    pub fn skip_tokenizer(&mut self) {
        self.record_opts.skip_tokenizer = true;
    }

    /// Records added after `skip_tokenizer`.
    pub fn untokenized(&self) -> u64 {
        self.untokenized
    }

    /// Flushes the per-record export and closes it; later records only count in the
    /// statistics.
    pub fn close_sink(&mut self) -> std::io::Result<()> {
        match self.sink.take() {
            Some(out) => out.finish(),
            None => Ok(()),
        }
    }

    /// Hands the record's line to the sink. After a failed write the sink is dropped (the
    /// statistics go on), so the error is returned once.
    fn write_line(&mut self, record: &RequestRecord, m: &RecordMetrics) -> std::io::Result<()> {
        let Some(out) = &mut self.sink else {
            return Ok(());
        };
        let written = out.write(record, m);
        if written.is_err() {
            self.sink = None;
        }
        written
    }

    fn add_record(&mut self, record: &RequestRecord) -> std::io::Result<()> {
        let opts = RecordOptions {
            template_tokens: self.template_overhead.for_record(&record.input),
            ..self.record_opts
        };
        self.untokenized += u64::from(opts.skip_tokenizer);
        if record.phase == Phase::Warmup {
            // Warmup only shows up in the per-record file.
            if self.sink.is_some() {
                let m = RecordMetrics::compute(record, &self.tokenizer, opts);
                self.write_line(record, &m)?;
            }
            return Ok(());
        }

        let m = RecordMetrics::compute(record, &self.tokenizer, opts);
        if m.usage_missing && !self.warned_usage_missing {
            self.warned_usage_missing = true;
            tracing::warn!(
                "--use-server-token-count: a response had no usage token counts; ISL/OSL of such responses are counted with the client tokenizer (is stream_options.include_usage supported?)"
            );
        }
        let written = self.write_line(record, &m);
        self.add_metrics(&RecordFacts::of(record), &m);
        written
    }

    /// Counts one profiling record given its metrics: what `add` does after computing
    /// them, and what `aiperf merge` does with the records it reads back.
    pub fn add_metrics(&mut self, record: &RecordFacts, m: &RecordMetrics) {
        for (id, v) in m.scalars() {
            self.values[id as usize].push(v);
        }
        let icl = MetricId::InterChunkLatency as usize;
        let gaps_at = self.values[icl].position();
        if let Some(gaps) = &m.inter_chunk_latency {
            self.values[icl].extend(gaps);
        }
        let mut counts = self.count_mismatches(record, m);

        // A response ends at its last content response (start + latency), as AIPerf's
        // max_response_timestamp; a failed request ends when it failed.
        let end_wall = match (&record.error, m.get(MetricId::RequestLatency)) {
            (None, Some(latency)) => record.start_wall_ns + latency as u64,
            _ => record.end_wall_ns.max(record.start_wall_ns),
        };
        self.min_start_wall_ns = Some(
            self.min_start_wall_ns
                .map_or(record.start_wall_ns, |t| t.min(record.start_wall_ns)),
        );
        self.max_end_wall_ns = Some(self.max_end_wall_ns.map_or(end_wall, |t| t.max(end_wall)));
        self.timelines.push(Timeline::new(
            record.start_wall_ns,
            m.get(MetricId::TimeToFirstToken)
                .map(|ttft| record.start_wall_ns + ttft as u64),
            end_wall,
            m.get(MetricId::InputSequenceLength)
                .filter(|_| record.error.is_none()),
            m.get(MetricId::OutputSequenceLength),
            gaps_at,
        ));

        match record.error {
            None => {
                counts.requests = 1;
                if self.goodput_enabled && self.objectives.iter().all(|o| o.passes(m.get(o.def.id)))
                {
                    counts.good = 1;
                }
            }
            Some(details) => {
                counts.errors = 1;
                match self.error_rows.get(details) {
                    Some(&row) => self.errors[row].count += 1,
                    None => {
                        self.error_rows.insert(details.clone(), self.errors.len());
                        self.errors.push(ErrorCount {
                            details: details.clone(),
                            count: 1,
                        });
                    }
                }
            }
        }
        self.counts.add(&counts);
        if self.slice_ns.is_some() {
            self.slice_entries.push(SliceEntry {
                start: record.start_wall_ns,
                values: m.scalars().collect(),
                inter_chunk_latency: m.inter_chunk_latency.clone().unwrap_or_default(),
                counts,
            });
        }
    }

    /// OSL mismatches (AIPerf's `osl_mismatch_count`) and usage discrepancies
    /// (`usage_discrepancy_count`) of one valid record.
    fn count_mismatches(&mut self, record: &RecordFacts, m: &RecordMetrics) -> Counts {
        let mut counts = Counts::default();
        if let (Some(asked), Some(got)) = (
            record.requested_output_tokens,
            m.get(MetricId::OutputSequenceLength),
        ) && asked > 0
        {
            let allowed = (asked as f64 * OSL_MISMATCH_PCT / 100.0).min(OSL_MISMATCH_MAX_TOKENS);
            if (got - asked as f64).abs() > allowed {
                counts.osl_mismatches = 1;
                if self.osl_mismatch_examples.len() < OSL_EXAMPLES {
                    self.osl_mismatch_examples.push(OslMismatch {
                        requested: asked,
                        received: got,
                    });
                }
            }
        }
        let prompt = m.get(MetricId::UsagePromptTokensDiffPct);
        let completion = m.get(MetricId::UsageCompletionTokensDiffPct);
        if let (Some(prompt), Some(completion)) = (prompt, completion) {
            counts.usage_compared = true;
            let reasoning = m.get(MetricId::UsageReasoningTokensDiffPct).unwrap_or(0.0);
            if prompt > USAGE_DIFF_PCT || completion > USAGE_DIFF_PCT || reasoning > USAGE_DIFF_PCT
            {
                counts.usage_discrepancies = 1;
            }
        }
        counts
    }

    #[cfg(test)]
    /// Profiling records seen so far (valid and failed).
    pub fn completed(&self) -> u64 {
        self.counts.requests + self.counts.errors
    }

    /// Flushes the JSONL and computes the statistics.
    pub fn finish(mut self) -> std::io::Result<MetricsSummary> {
        if let Some(out) = self.sink.take() {
            out.finish()?;
        }
        let window = self.min_start_wall_ns.zip(self.max_end_wall_ns);
        let duration_ns = window.map_or(0, |(start, end)| end.saturating_sub(start));
        // The sweeps first, while the timelines and the chunk gaps they read are there;
        // then the timelines go before the columns are decoded one by one.
        let (swept, timeslices) = match window {
            Some((first, last)) => {
                let spans = Spans {
                    timelines: &self.timelines,
                    gaps: self.values[MetricId::InterChunkLatency as usize].bytes(),
                    first,
                };
                let swept = sweep_results(&spans, 0.0, (last - first) as f64);
                let slices = match self.slice_ns {
                    Some(slice_ns) => self.time_slices(slice_ns, &spans, (first, last)),
                    None => Vec::new(),
                };
                (swept, slices)
            }
            None => (Vec::new(), Vec::new()),
        };
        self.timelines = Vec::new();
        let values = &mut self.values;
        let mut results = summarize(
            &mut |id| std::mem::take(&mut values[id as usize]).to_vec(),
            &self.counts,
            duration_ns,
            window.is_some(),
            self.goodput_enabled,
        );
        results.extend(swept);
        if self.record_opts.no_output_tokens {
            drop_output_token_metrics(&mut results);
        }

        Ok(MetricsSummary {
            results,
            error_summary: self.errors,
            request_count: self.counts.requests,
            error_request_count: self.counts.errors,
            benchmark_duration_ns: duration_ns,
            osl_mismatch_count: self.counts.osl_mismatches,
            osl_mismatch_examples: self.osl_mismatch_examples,
            timeslices,
        })
    }

    /// AIPerf's time slices: windows of `slice_ns` from the first request's start, each
    /// request in the window its start falls in; windows without a request are left out,
    /// and the last one ends at the run's last response. The sweep-line metrics are the
    /// whole run's curves over each window.
    fn time_slices(&self, slice_ns: u64, spans: &Spans, window: (u64, u64)) -> Vec<TimeSlice> {
        let (first, last) = window;
        let mut groups: std::collections::BTreeMap<u64, Vec<&SliceEntry>> = Default::default();
        for e in &self.slice_entries {
            groups
                .entry(e.start.saturating_sub(first) / slice_ns)
                .or_default()
                .push(e);
        }
        let icl = MetricId::InterChunkLatency as usize;
        groups
            .into_iter()
            .map(|(index, entries)| {
                let from = first + index * slice_ns;
                let full_end = from + slice_ns;
                let to = full_end.min(last.max(from));
                let mut values = vec![Vec::new(); METRIC_COUNT];
                let mut counts = Counts::default();
                for e in entries {
                    for &(id, v) in &e.values {
                        values[id as usize].push(v);
                    }
                    values[icl].extend_from_slice(&e.inter_chunk_latency);
                    counts.add(&e.counts);
                }
                let mut results = summarize(
                    &mut |id| std::mem::take(&mut values[id as usize]),
                    &counts,
                    to - from,
                    true,
                    self.goodput_enabled,
                );
                results.extend(sweep_results(
                    spans,
                    (from - first) as f64,
                    (to - first) as f64,
                ));
                if self.record_opts.no_output_tokens {
                    drop_output_token_metrics(&mut results);
                }
                TimeSlice {
                    start_ns: from,
                    end_ns: to,
                    is_complete: full_end <= last,
                    results,
                }
            })
            .collect()
    }
}

/// The sweep-line metrics over `[from, to]` (ns relative to the spans' anchor).
fn sweep_results(spans: &Spans, from: f64, to: f64) -> Vec<MetricResult> {
    sweep::metrics(spans, from, to)
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
fn drop_output_token_metrics(results: &mut Vec<MetricResult>) {
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
/// benchmark window, or one time slice). `values` hands over one metric's values at a time
/// (decoded, so only one is whole at once). `any_record`: some request was counted (the
/// duration is meaningful).
fn summarize(
    values: &mut dyn FnMut(MetricId) -> Vec<f64>,
    counts: &Counts,
    duration_ns: u64,
    any_record: bool,
    goodput_enabled: bool,
) -> Vec<MetricResult> {
    let mut results = Vec::new();
    let mut sums = [None::<f64>; METRIC_COUNT];
    for def in CATALOG.iter().filter(|d| d.kind == MetricKind::Record) {
        // The values are freed as soon as their statistics exist.
        if let Some(stats) = Stats::compute(&mut values(def.id)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::JsonlWriter;
    use crate::metrics::goodput::parse_goodput;
    use crate::metrics::record_metrics::tests::streamed_record;
    use std::path::Path;

    fn collector(goodput: &str, jsonl_dir: Option<&Path>) -> Collector {
        let opts = CollectorOptions {
            streaming: true,
            use_server_token_count: false,
            goodput: if goodput.is_empty() {
                Vec::new()
            } else {
                parse_goodput(goodput).unwrap()
            },
            ..Default::default()
        };
        Collector::new(
            opts,
            Arc::new(Tokenizer::builtin().unwrap()),
            Clock::new(),
            jsonl_dir.map(|dir| {
                Box::new(JsonlWriter::create(dir, Clock::new()).unwrap()) as Box<dyn RecordSink>
            }),
        )
    }

    fn failed(code: Option<u16>, kind: &str, message: &str) -> RequestRecord {
        let mut r = streamed_record(&[]);
        r.error = Some(ErrorDetails {
            code,
            kind: kind.into(),
            message: message.into(),
        });
        r
    }

    fn scalar(s: &MetricsSummary, tag: &str) -> f64 {
        match s.get(tag).unwrap_or_else(|| panic!("{tag} missing")).value {
            MetricValue::Scalar(v) => v,
            _ => panic!("{tag} is not a single value"),
        }
    }

    fn dist(s: &MetricsSummary, tag: &str) -> Stats {
        match s.get(tag).unwrap_or_else(|| panic!("{tag} missing")).value {
            MetricValue::Distribution(d) => d,
            _ => panic!("{tag} is not a distribution"),
        }
    }

    #[test]
    fn aiperf_013_run_metrics() {
        let mut c = collector("", None);
        // A: asked for 4 tokens, got 4 over 40 ms. B: asked for 4, got 2 over 60 ms, 1 s later.
        let mut a = streamed_record(&[21, 26, 31, 41]);
        a.input.requested_output_tokens = Some(4);
        c.add(&a).unwrap();
        let mut b = streamed_record(&[31, 61]);
        b.input.requested_output_tokens = Some(4);
        b.start_wall_ns += 1_000_000_000;
        c.add(&b).unwrap();
        c.add(&failed(Some(500), "Internal Server Error", "x"))
            .unwrap();
        let s = c.finish().unwrap();

        assert_eq!(scalar(&s, "completed_request_count"), 3.0);
        assert!((scalar(&s, "request_error_rate") - 100.0 / 3.0).abs() < 1e-12);
        // Only B missed its length by more than min(5% of 4, 50) tokens.
        assert_eq!(scalar(&s, "osl_mismatch_count"), 1.0);
        assert_eq!(s.osl_mismatch_count, 1);
        assert_eq!(
            s.osl_mismatch_examples[0].describe(),
            "got 2 tokens (requested 4, diff -50.0%)"
        );
        assert_eq!(dist(&s, "osl_mismatch_diff_pct").min, -50.0);
        assert!((scalar(&s, "input_token_throughput") - 1100.0 / 1.06).abs() < 1e-9);
        assert!((scalar(&s, "total_token_throughput") - 1106.0 / 1.06).abs() < 1e-9);
        // 40 + 60 ms busy of a 1.06 s window (the failure took no time).
        let MetricValue::TimeWeighted(conc) = s.get("effective_concurrency").unwrap().value else {
            panic!("effective_concurrency is not time-weighted");
        };
        assert!((conc.avg - 0.1 / 1.06).abs() < 1e-12, "{conc:?}");
        assert_eq!((conc.min, conc.max, conc.p50), (0.0, 1.0, 0.0));
        // No goodput objectives: no good_request_fraction.
        assert!(s.get("good_request_fraction").is_none());
    }

    #[test]
    fn time_slices_group_requests_by_start() {
        let mut c = Collector::new(
            CollectorOptions {
                streaming: true,
                slice_duration_ns: Some(1_000_000_000),
                ..Default::default()
            },
            Arc::new(Tokenizer::builtin().unwrap()),
            Clock::new(),
            None,
        );
        // Latencies 40, 60, 60 and 40 ms; starts at 0, 1.0, 1.5 and 3.2 s from the first.
        let a = streamed_record(&[21, 26, 31, 41]);
        let first = a.start_wall_ns;
        let at = |mut r: RequestRecord, ms: u64| {
            r.start_wall_ns = first + ms * 1_000_000;
            r
        };
        c.add(&at(streamed_record(&[31, 61]), 1000)).unwrap();
        c.add(&a).unwrap();
        c.add(&at(streamed_record(&[31, 61]), 1500)).unwrap();
        c.add(&at(streamed_record(&[21, 26, 31, 41]), 3200))
            .unwrap();
        let s = c.finish().unwrap();
        // The window 2..3 s has no request and is left out.
        let windows: Vec<(u64, u64, bool)> = s
            .timeslices
            .iter()
            .map(|t| (t.start_ns - first, t.end_ns - first, t.is_complete))
            .collect();
        assert_eq!(
            windows,
            [
                (0, 1_000_000_000, true),
                (1_000_000_000, 2_000_000_000, true),
                (3_000_000_000, 3_240_000_000, false)
            ]
        );
        let slice_scalar = |i: usize, tag: &str| match s.timeslices[i].get(tag).unwrap().value {
            MetricValue::Scalar(v) => v,
            _ => panic!("{tag} is not a single value"),
        };
        let counts: Vec<f64> = (0..3).map(|i| slice_scalar(i, "request_count")).collect();
        assert_eq!(counts, [1.0, 2.0, 1.0]);
        // Throughputs per second of the window itself.
        assert!((slice_scalar(1, "request_throughput") - 2.0).abs() < 1e-12);
        assert!((slice_scalar(2, "request_throughput") - 1.0 / 0.24).abs() < 1e-9);
        assert!((slice_scalar(1, "output_token_throughput") - 4.0).abs() < 1e-12);
        let MetricValue::Distribution(lat) = s.timeslices[1].get("request_latency").unwrap().value
        else {
            panic!("request_latency is not a distribution");
        };
        assert_eq!((lat.count, lat.avg), (2, 60e6));
        // Time-weighted metrics over the window: 60 + 60 ms busy of 1 s.
        let MetricValue::TimeWeighted(conc) =
            s.timeslices[1].get("effective_concurrency").unwrap().value
        else {
            panic!("effective_concurrency is not time-weighted");
        };
        assert!((conc.avg - 0.12).abs() < 1e-9, "{conc:?}");
        // The whole run is unchanged by slicing.
        assert_eq!(scalar(&s, "request_count"), 4.0);
        assert_eq!(s.benchmark_duration_ns, 3_240_000_000);
    }

    #[test]
    fn no_time_slices_without_the_flag() {
        let mut c = collector("", None);
        c.add(&streamed_record(&[21])).unwrap();
        assert!(c.finish().unwrap().timeslices.is_empty());
    }

    #[test]
    fn run_level_metrics_from_two_requests() {
        let mut c = collector("", None);
        // Request A: start 1 ms, chunks 21..41 ms (4 tokens, latency 40 ms).
        c.add(&streamed_record(&[21, 26, 31, 41])).unwrap();
        // Request B: starts 1 s later, latency 60 ms, 2 tokens.
        let mut b = streamed_record(&[31, 61]);
        b.start_wall_ns += 1_000_000_000;
        c.add(&b).unwrap();
        assert_eq!(c.completed(), 2);
        let s = c.finish().unwrap();

        assert_eq!(s.request_count, 2);
        // Duration: from A's start to B's start + 60 ms.
        assert_eq!(s.benchmark_duration_ns, 1_060_000_000);
        assert_eq!(scalar(&s, "benchmark_duration"), 1.06e9);
        assert!((scalar(&s, "request_throughput") - 2.0 / 1.06).abs() < 1e-12);
        assert_eq!(scalar(&s, "total_osl"), 6.0);
        assert!((scalar(&s, "output_token_throughput") - 6.0 / 1.06).abs() < 1e-12);
        assert_eq!(scalar(&s, "total_isl"), 1100.0);
        assert_eq!(scalar(&s, "request_count"), 2.0);
        assert!(s.get("error_request_count").is_none());
        assert!(s.get("goodput").is_none());

        let latency = dist(&s, "request_latency");
        assert_eq!((latency.min, latency.max, latency.avg), (40e6, 60e6, 50e6));
        assert_eq!(latency.count, 2);
        // Inter-chunk gaps of both requests are flattened: 5, 5, 10 and 30 ms.
        let icl = dist(&s, "inter_chunk_latency");
        assert_eq!(icl.count, 4);
        assert_eq!(icl.sum, 50e6);
        // Display conversion happens only on request.
        assert_eq!(s.get("request_latency").unwrap().display_avg(), 50.0);
    }

    #[test]
    fn goodput_counts_requests_meeting_every_objective() {
        let mut c = collector("request_latency:50 time_to_first_token:25", None);
        c.add(&streamed_record(&[21, 26, 31, 41])).unwrap(); // 40 ms, TTFT 20: good
        c.add(&streamed_record(&[31, 61])).unwrap(); // 60 ms: too slow
        c.add(&streamed_record(&[30, 51])).unwrap(); // 50 ms but TTFT 29 ms: not good
        c.add(&failed(Some(500), "Internal Server Error", "x"))
            .unwrap(); // errors are never good
        let s = c.finish().unwrap();
        assert_eq!(scalar(&s, "good_request_count"), 1.0);
        let duration_s = s.benchmark_duration_ns as f64 / 1e9;
        assert!((scalar(&s, "goodput") - 1.0 / duration_s).abs() < 1e-9);
    }

    #[test]
    fn errors_are_grouped_by_code_type_and_message() {
        let mut c = collector("", None);
        c.add(&failed(Some(500), "Internal Server Error", "boom"))
            .unwrap();
        c.add(&failed(None, "ConnectionError", "refused")).unwrap();
        c.add(&failed(Some(500), "Internal Server Error", "boom"))
            .unwrap();
        c.add(&failed(Some(500), "Internal Server Error", "other"))
            .unwrap();
        c.add(&streamed_record(&[21])).unwrap();
        let s = c.finish().unwrap();
        let rows: Vec<(Option<u16>, &str, u64)> = s
            .error_summary
            .iter()
            .map(|e| (e.details.code, e.details.message.as_str(), e.count))
            .collect();
        assert_eq!(
            rows,
            vec![
                (Some(500), "boom", 2),
                (None, "refused", 1),
                (Some(500), "other", 1)
            ]
        );
        assert_eq!(s.error_request_count, 4);
        assert_eq!(scalar(&s, "error_request_count"), 4.0);
        assert_eq!(scalar(&s, "request_count"), 1.0);
        assert_eq!(dist(&s, "error_isl").count, 4);
        assert_eq!(scalar(&s, "total_error_isl"), 2200.0);
        // Only the valid request has a latency.
        assert_eq!(dist(&s, "request_latency").count, 1);
    }

    #[test]
    fn warmup_is_written_but_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile_export.jsonl");
        let mut c = collector("", Some(dir.path()));
        let mut w = streamed_record(&[21]);
        w.phase = Phase::Warmup;
        c.add(&w).unwrap();
        c.add(&streamed_record(&[21, 26])).unwrap();
        assert_eq!(c.completed(), 1);
        let s = c.finish().unwrap();
        assert_eq!(s.request_count, 1);
        assert_eq!(dist(&s, "time_to_first_token").count, 1);

        let text = std::fs::read_to_string(&path).unwrap();
        let phases: Vec<String> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["metadata"]["benchmark_phase"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(phases, ["warmup", "profiling"]);
    }

    #[test]
    fn record_lag_is_measured_from_the_last_chunk() {
        let mut c = collector("", None);
        assert!(c.record_lag().is_none());
        let clock = c.clock;
        std::thread::sleep(std::time::Duration::from_millis(3));
        // The last chunk arrived at 1 ms on the run's clock; the lag is from then to now.
        let mut r = streamed_record(&[21]);
        r.last_event_perf_ns = Some(1_000_000);
        let before = clock.now_ns();
        c.add(&r).unwrap();
        let after = clock.now_ns();
        // Without any event, the record's end counts.
        let mut f = failed(None, "ConnectionError", "refused");
        f.last_event_perf_ns = None;
        f.end_perf_ns = after;
        c.add(&f).unwrap();
        let done = clock.now_ns();
        let lag = c.record_lag().unwrap();
        assert_eq!(lag.count, 2);
        assert!(lag.max >= (before - 1_000_000) as f64, "{lag:?}");
        assert!(lag.max <= (after - 1_000_000) as f64, "{lag:?}");
        assert!(lag.min <= (done - after) as f64, "{lag:?}");
    }

    #[test]
    fn collector_can_move_to_another_thread() {
        fn is_send<T: Send>() {}
        is_send::<Collector>();
        is_send::<MetricsSummary>();
    }

    #[test]
    fn all_failed_run_still_summarizes() {
        let mut c = collector("", None);
        c.add(&failed(Some(408), "RequestTimeoutError", "timed out"))
            .unwrap();
        let s = c.finish().unwrap();
        assert_eq!(scalar(&s, "request_count"), 0.0);
        assert_eq!(scalar(&s, "error_request_count"), 1.0);
        assert!(s.get("request_latency").is_none());
        assert!(s.get("benchmark_duration").is_some());
    }
}
