//! Collects finished records into per-metric value arrays and summarizes them at the end.

use std::collections::HashMap;
use std::sync::Arc;

use super::CollectorOptions;
use super::catalog::{METRIC_COUNT, MetricDef, MetricId, MetricKind};
use super::column::{self, Column};
use super::goodput::Objective;
use super::live::LiveRecorder;
use super::record_metrics::{RecordMetrics, RecordOptions};
use super::slices::SliceLog;
use super::summary::{drop_output_token_metrics, summarize, sweep_results};
use super::sweep_line::{Span, SpanOrder, WeightedStats};
use crate::clock::Clock;
use crate::record::{ErrorDetails, Phase, RequestRecord};
use crate::spill::{Log, Spill, get_varint, put_varint};
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

/// What the sweep-line metrics need of one profiling request (wall-clock ns), as one item
/// of the collector's timelines log: flags, the start, the first token and the end after
/// it, the token counts, then the chunk gaps as the inter-chunk latency column encodes them.
struct Timeline {
    start: u64,
    generation_start: Option<u64>,
    end: u64,
    input_tokens: Option<f64>,
    output_tokens: Option<f64>,
}

const HAS_GENERATION: u8 = 1;
const HAS_INPUT: u8 = 2;
const HAS_OUTPUT: u8 = 4;

impl Timeline {
    fn write(&self, gaps: &[u8], out: &mut Vec<u8>) {
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        out.push(
            flag(self.generation_start.is_some(), HAS_GENERATION)
                | flag(self.input_tokens.is_some(), HAS_INPUT)
                | flag(self.output_tokens.is_some(), HAS_OUTPUT),
        );
        put_varint(out, u128::from(self.start));
        if let Some(g) = self.generation_start {
            put_varint(out, u128::from(g.wrapping_sub(self.start)));
        }
        put_varint(out, u128::from(self.end.wrapping_sub(self.start)));
        for v in [self.input_tokens, self.output_tokens]
            .into_iter()
            .flatten()
        {
            column::encode(out, v);
        }
        put_varint(out, gaps.len() as u128);
        out.extend_from_slice(gaps);
    }

    /// The timeline at the start of `bytes`, its gaps' bytes and its encoded length.
    fn read(bytes: &[u8]) -> (Timeline, &[u8], usize) {
        let flags = bytes[0];
        let mut at = 1;
        let mut varint = || {
            let (n, used) = get_varint(&bytes[at..]);
            at += used;
            n as u64
        };
        let start = varint();
        let generation_start = (flags & HAS_GENERATION != 0).then(|| start.wrapping_add(varint()));
        let end = start.wrapping_add(varint());
        let mut value = |on: bool| {
            on.then(|| {
                let (v, used) = column::decode_one(&bytes[at..]);
                at += used;
                v
            })
        };
        let input_tokens = value(flags & HAS_INPUT != 0);
        let output_tokens = value(flags & HAS_OUTPUT != 0);
        let (len, used) = get_varint(&bytes[at..]);
        at += used;
        let gaps = &bytes[at..at + len as usize];
        at += len as usize;
        let t = Timeline {
            start,
            generation_start,
            end,
            input_tokens,
            output_tokens,
        };
        (t, gaps, at)
    }

    /// The span the sweep reads: relative to the first start (f64 keeps ns exact there,
    /// not at epoch scale).
    fn span<'a>(&self, first: u64, gaps: &'a [u8]) -> Span<'a> {
        let rel = |t: u64| t.saturating_sub(first) as f64;
        Span {
            start: rel(self.start),
            generation_start: self.generation_start.map(rel),
            end: rel(self.end),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            chunk_gaps: gaps,
        }
    }
}

/// Per-request counts, summed over the run or over one time slice.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    pub requests: u64,
    pub errors: u64,
    pub good: u64,
    pub osl_mismatches: u64,
    pub usage_discrepancies: u64,
    /// Some response carried usage differences to count (`usage_discrepancy_count`).
    pub usage_compared: bool,
}

impl Counts {
    pub(super) fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.errors += o.errors;
        self.good += o.good;
        self.osl_mismatches += o.osl_mismatches;
        self.usage_discrepancies += o.usage_discrepancies;
        self.usage_compared |= o.usage_compared;
    }
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

/// Also sees each record with its metrics (a live exporter's feed); must never block.
pub trait RecordTap: Send {
    fn observe(&mut self, record: &RequestRecord, metrics: &RecordMetrics);
}

/// Receives finished records (off the hot path), computes their metrics, writes the
/// per-record JSONL, and keeps only the values the statistics need.
pub struct Collector {
    record_opts: RecordOptions,
    template_overhead: super::TemplateOverhead,
    /// `--apply-chat-template`: ISL through the chat template, from each body as sent.
    chat_isl: Option<super::ChatIsl>,
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
    /// Every profiling request's contribution to its time slice, kept only with time
    /// slices.
    slices: Option<SliceLog>,
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
    /// Each profiling request's [`Timeline`] for the sweep-line metrics.
    timelines: Log,
    /// A record's encoded chunk gaps, between the columns and logs that take them.
    gaps: Vec<u8>,
    osl_mismatch_examples: Vec<OslMismatch>,
    /// The live view's running figures, when something shows them.
    live: Option<LiveRecorder>,
    /// Sees each profiling record and its metrics.
    tap: Option<Box<dyn RecordTap>>,
    /// The mean network round trip (ns) the `network_adjusted_*` metrics subtract.
    network_rtt_ns: Option<f64>,
}

impl Collector {
    pub fn new(
        opts: CollectorOptions,
        tokenizer: Arc<Tokenizer>,
        clock: Clock,
        sink: Option<Box<dyn RecordSink>>,
    ) -> Self {
        // Where the per-request values go as the run grows.
        let spill = Spill::new();
        Collector {
            record_opts: RecordOptions {
                streaming: opts.streaming,
                use_server_token_count: opts.use_server_token_count,
                template_tokens: None,
                skip_tokenizer: false,
                no_output_tokens: opts.no_output_tokens,
                no_input_tokens: opts.no_input_tokens,
                templated_isl: None,
            },
            template_overhead: opts.template_overhead,
            chat_isl: opts.chat_isl,
            objectives: Objective::resolve(&opts.goodput),
            goodput_enabled: !opts.goodput.is_empty(),
            tokenizer,
            clock,
            sink,
            values: (0..METRIC_COUNT).map(|_| Column::new(&spill)).collect(),
            counts: Counts::default(),
            slice_ns: opts.slice_duration_ns,
            slices: opts.slice_duration_ns.map(|_| SliceLog::new(&spill)),
            min_start_wall_ns: None,
            max_end_wall_ns: None,
            errors: Vec::new(),
            error_rows: HashMap::new(),
            record_lag_ns: Column::new(&spill),
            warned_usage_missing: false,
            untokenized: 0,
            timelines: Log::new(&spill),
            gaps: Vec::new(),
            osl_mismatch_examples: Vec::new(),
            live: None,
            tap: None,
            network_rtt_ns: None,
        }
    }

    /// The statistics will also have the `network_adjusted_*` metrics, `rtt_ns` less than
    /// the send-anchored latencies, and `network_rtt` (AIPerf adds none for a round trip
    /// of 0: the adjusted metrics would repeat the raw ones).
    pub fn set_network_rtt(&mut self, rtt_ns: f64) {
        self.network_rtt_ns = (rtt_ns > 0.0).then_some(rtt_ns);
    }

    /// From now on each profiling record and its metrics also go to `tap`.
    pub fn tap(&mut self, tap: Box<dyn RecordTap>) {
        self.tap = Some(tap);
    }

    /// From now on each record also feeds `live` (the dashboard and live exporters).
    pub fn show_live(&mut self, live: LiveRecorder) {
        self.live = Some(live);
    }

    /// Publishes the live figures if the last snapshot is old enough (or `force`).
    pub fn publish_live(&mut self, force: bool) {
        let now = self.clock.now_ns();
        if let Some(live) = &mut self.live {
            live.publish(now, force);
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
        self.record_lag_ns.stats()
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
        let templated_isl = match (&self.chat_isl, &record.raw) {
            (Some(c), Some(raw)) if !self.record_opts.skip_tokenizer => {
                c.count(&raw.body, &self.tokenizer)
            }
            _ => None,
        };
        let opts = RecordOptions {
            template_tokens: self.template_overhead.for_record(&record.input),
            templated_isl,
            ..self.record_opts
        };
        self.untokenized += u64::from(opts.skip_tokenizer);
        if record.phase == Phase::Warmup {
            if let Some(live) = &mut self.live {
                live.observe_warmup(record);
            }
            // Warmup only shows up in the per-record file.
            if self.sink.is_some() {
                let m = RecordMetrics::compute(record, &self.tokenizer, opts);
                self.write_line(record, &m)?;
            }
            return Ok(());
        }

        let mut m = RecordMetrics::compute(record, &self.tokenizer, opts);
        // With --goodput each good line says whether it met every objective, as AIPerf's.
        if self.goodput_enabled && record.error.is_none() {
            m.set(
                MetricId::GoodRequestCount,
                Some(f64::from(u8::from(self.is_good(&m)))),
            );
        }
        if m.usage_missing && !self.warned_usage_missing {
            self.warned_usage_missing = true;
            tracing::warn!(
                "--use-server-token-count: a response had no usage token counts; ISL/OSL of such responses are counted with the client tokenizer (is stream_options.include_usage supported?)"
            );
        }
        let written = self.write_line(record, &m);
        self.add_metrics(&RecordFacts::of(record), &m);
        if let Some(live) = &mut self.live {
            live.observe(record, &m);
        }
        if let Some(tap) = &mut self.tap {
            tap.observe(record, &m);
        }
        written
    }

    /// The record meets every --goodput objective: its `good_request_count` when the line
    /// has one (set once in `add_record`, or read back by `aiperf merge`), else checked.
    fn is_good(&self, m: &RecordMetrics) -> bool {
        match m.get(MetricId::GoodRequestCount) {
            Some(good) => good > 0.0,
            None => self.objectives.iter().all(|o| o.passes(m.get(o.def.id))),
        }
    }

    /// Counts one profiling record given its metrics: what `add` does after computing
    /// them, and what `aiperf merge` does with the records it reads back.
    pub fn add_metrics(&mut self, record: &RecordFacts, m: &RecordMetrics) {
        // Only per-request distributions are kept: a run-level count's per-record value
        // (`good_request_count`) is counted below, not summarised.
        for (id, v) in m.scalars() {
            if id.def().kind == MetricKind::Record {
                self.values[id as usize].push(v);
            }
        }
        let icl = MetricId::InterChunkLatency as usize;
        self.gaps.clear();
        if let Some(gaps) = &m.inter_chunk_latency {
            // Encoded once, for the timeline and the metric's column alike.
            for &g in gaps {
                column::encode(&mut self.gaps, g);
            }
            self.values[icl].push_encoded(&self.gaps, gaps.len());
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
        let timeline = Timeline {
            start: record.start_wall_ns,
            generation_start: m
                .get(MetricId::TimeToFirstToken)
                .map(|ttft| record.start_wall_ns + ttft as u64),
            end: end_wall,
            input_tokens: m
                .get(MetricId::InputSequenceLength)
                .filter(|_| record.error.is_none()),
            output_tokens: m.get(MetricId::OutputSequenceLength),
        };
        timeline.write(&self.gaps, self.timelines.tail());
        self.timelines.end_item();

        match record.error {
            None => {
                counts.requests = 1;
                if self.goodput_enabled && self.is_good(m) {
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
        if let Some(slices) = &mut self.slices {
            slices.push(record.start_wall_ns, m, &self.gaps, &counts);
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
        // The sweeps first: over the whole run and each time slice's window, from one
        // set of curves.
        let mut swept = Vec::new();
        let mut slice_windows = Vec::new();
        if let Some((first, last)) = window {
            if let (Some(slices), Some(slice_ns)) = (&self.slices, self.slice_ns) {
                slice_windows = slices.windows(slice_ns, (first, last));
            }
            let rel = |t: u64| (t - first) as f64;
            let windows: Vec<(f64, f64)> = std::iter::once((0.0, rel(last)))
                .chain(slice_windows.iter().map(|w| (rel(w.from), rel(w.to))))
                .collect();
            swept = super::sweep_line::metrics(&self.ordered_spans(first), &windows);
        }
        let mut swept = swept.into_iter();
        let values = &self.values;
        let rtt = self.network_rtt_ns;
        let mut results = summarize(
            &mut |id| match (id.network_adjusted_source(), rtt) {
                (Some(source), Some(rtt)) => values[source as usize].stats_less(rtt),
                (None, Some(rtt)) if id == MetricId::NetworkRtt => Stats::compute(&mut [rtt]),
                _ => values[id as usize].stats(),
            },
            &self.counts,
            duration_ns,
            window.is_some(),
            self.goodput_enabled,
        );
        results.extend(swept.next().map(sweep_results).unwrap_or_default());
        if self.record_opts.no_output_tokens {
            drop_output_token_metrics(&mut results);
        }
        let timeslices = match (&self.slices, self.slice_ns, window) {
            (Some(slices), Some(slice_ns), Some((first, _))) => slices.slices(
                (slice_ns, first),
                slice_windows,
                swept.collect(),
                self.goodput_enabled,
                self.record_opts.no_output_tokens,
                rtt,
            ),
            _ => Vec::new(),
        };

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

    /// The requests' spans relative to `first` (the first start), in sweep order.
    fn ordered_spans(&self, first: u64) -> super::sweep_line::OrderedSpans {
        let mut order = SpanOrder::new();
        let mut reader = self.timelines.reader();
        while let Some(bytes) = reader.rest() {
            let (timeline, gaps, used) = Timeline::read(bytes);
            order.push(&timeline.span(first, gaps));
            reader.advance(used);
        }
        order.finish()
    }
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
