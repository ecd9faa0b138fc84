//! Per-request metrics, computed from one finished record (AIPerf's record metrics).

use super::catalog::{METRIC_COUNT, MetricId};
use crate::record::RequestRecord;
use crate::tokenizer::Tokenizer;

/// What decides which metrics a record gets.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordOptions {
    /// The run asked for streaming responses (streaming-only metrics need it).
    pub streaming: bool,
    /// ISL/OSL from the server's `usage` instead of the client tokenizer.
    pub use_server_token_count: bool,
    /// This request's chat-template tokens (see `template_overhead`), left out of
    /// Image Token Count; `None` when unknown.
    pub template_tokens: Option<i64>,
    /// Leave out the counts that need the client tokenizer (ISL of a later turn, OSL):
    /// a run that must end now cannot wait for megabytes of text to be tokenized.
    pub skip_tokenizer: bool,
    /// The endpoint answers with vectors or scores (embeddings, rankings): no output-token
    /// metrics, rather than zeros.
    pub no_output_tokens: bool,
    /// The request carries no text (audio transcription): no input sequence length.
    pub no_input_tokens: bool,
    /// This request's prompt counted through the chat template (`--apply-chat-template`):
    /// the ISL in place of the plain text count.
    pub templated_isl: Option<u64>,
}

/// One request's metric values in base units (ns, tokens, images/sec, ns/image).
#[derive(Debug, Clone)]
pub struct RecordMetrics {
    scalars: [Option<f64>; METRIC_COUNT],
    /// Gaps between consecutive content responses (ns); only for streamed records.
    pub inter_chunk_latency: Option<Vec<f64>>,
    /// Server token counts were asked for but the response had none: the client tokenizer
    /// counted instead.
    pub usage_missing: bool,
}

impl Default for RecordMetrics {
    fn default() -> Self {
        RecordMetrics {
            scalars: [None; METRIC_COUNT],
            inter_chunk_latency: None,
            usage_missing: false,
        }
    }
}

impl RecordMetrics {
    pub fn get(&self, id: MetricId) -> Option<f64> {
        self.scalars[id as usize]
    }

    pub(super) fn set(&mut self, id: MetricId, value: Option<f64>) {
        self.scalars[id as usize] = value;
    }

    /// Metrics read back from a per-record export, where they are in display units (ms,
    /// tokens/sec, ...): each scaled back to base units.
    pub fn from_display(
        values: impl IntoIterator<Item = (MetricId, f64)>,
        inter_chunk_latency: Option<Vec<f64>>,
    ) -> RecordMetrics {
        let mut m = RecordMetrics::default();
        for (id, v) in values {
            m.set(id, Some(v * id.def().scale));
        }
        let scale = MetricId::InterChunkLatency.def().scale;
        m.inter_chunk_latency =
            inter_chunk_latency.map(|gaps| gaps.into_iter().map(|g| g * scale).collect());
        m
    }

    /// Scalar values present, in catalogue order.
    pub fn scalars(&self) -> impl Iterator<Item = (MetricId, f64)> + '_ {
        crate::metrics::catalog::CATALOG
            .iter()
            .filter_map(|d| self.get(d.id).map(|v| (d.id, v)))
    }

    /// A scalar in display units (ms, tokens, ...): what the per-record file holds.
    pub fn display(&self, id: MetricId) -> Option<f64> {
        self.get(id).map(|v| v / id.def().scale)
    }

    /// Scalar values present, in catalogue order, in display units.
    pub fn display_scalars(
        &self,
    ) -> impl Iterator<Item = (&'static crate::metrics::catalog::MetricDef, f64)> + '_ {
        (crate::metrics::catalog::CATALOG.iter()).filter_map(|d| self.display(d.id).map(|v| (d, v)))
    }

    /// Computes every metric AIPerf defines for this record. Failed requests only get
    /// `error_isl`; the rest need a valid response.
    pub fn compute(
        record: &RequestRecord,
        tokenizer: &Tokenizer,
        opts: RecordOptions,
    ) -> RecordMetrics {
        let mut m = RecordMetrics::default();
        let usage = record.usage.unwrap_or_default();
        let to_f = |v: Option<u64>| v.map(|v| v as f64);
        // Server counts when asked for and sent; else (with usage_missing set) the client
        // tokenizer, so ISL/OSL and throughput are never silently dropped.
        let counted_isl = || {
            let counted = || {
                let text = record.input.history_text.as_deref()?;
                if opts.skip_tokenizer {
                    return None;
                }
                Some(tokenizer.count(text) as u64)
            };
            to_f(
                opts.templated_isl
                    .or(record.input.input_tokens)
                    .or_else(counted),
            )
        };
        let server_isl = usage.prompt_tokens.filter(|_| opts.use_server_token_count);
        let isl = server_isl
            .map(|n| n as f64)
            .or_else(counted_isl)
            .filter(|_| !opts.no_input_tokens);

        if !record.is_valid() {
            m.set(MetricId::ErrorIsl, isl);
            return m;
        }

        // Latency ends at the last content response; a trailing usage-only chunk or [DONE]
        // is not a response. Without any content, the end of the response counts.
        let start = record.start_perf_ns;
        let end = record
            .responses
            .last()
            .map_or(record.end_perf_ns, |r| r.perf_ns);
        let latency = end.saturating_sub(start) as f64;
        m.set(MetricId::RequestLatency, Some(latency));
        super::http_trace::add(record, &mut m);

        let streamed = opts.streaming && record.streamed;
        let ttft = record
            .responses
            .first()
            .filter(|_| streamed)
            .map(|r| r.perf_ns.saturating_sub(start) as f64);
        m.set(MetricId::TimeToFirstToken, ttft);
        if streamed && record.responses.len() >= 2 {
            let times: Vec<u64> = record.responses.iter().map(|r| r.perf_ns).collect();
            m.set(
                MetricId::TimeToSecondToken,
                Some(times[1].saturating_sub(times[0]) as f64),
            );
            m.inter_chunk_latency = Some(
                times
                    .windows(2)
                    .map(|w| w[1].saturating_sub(w[0]) as f64)
                    .collect(),
            );
        }

        // Output tokens: text and reasoning are each tokenized once, joined, as AIPerf does.
        m.usage_missing = opts.use_server_token_count
            && (usage.prompt_tokens.is_none()
                || (usage.completion_tokens.is_none() && !opts.no_output_tokens));
        let (output, reasoning, osl) = if opts.no_output_tokens {
            (None, None, None)
        } else if opts.use_server_token_count && usage.completion_tokens.is_some() {
            let reasoning = to_f(usage.reasoning_tokens);
            let osl = to_f(usage.completion_tokens);
            let output = osl.map(|o| o - reasoning.unwrap_or(0.0));
            (output, reasoning, osl)
        } else if opts.skip_tokenizer {
            (None, None, None)
        } else {
            let output = tokenizer.count(&record.output_text) as f64;
            let reasoning_text = &record.reasoning_text;
            let reasoning =
                (!reasoning_text.is_empty()).then(|| tokenizer.count(reasoning_text) as f64);
            (
                Some(output),
                reasoning,
                Some(output + reasoning.unwrap_or(0.0)),
            )
        };
        m.set(MetricId::OutputTokenCount, output);
        m.set(MetricId::ReasoningTokenCount, reasoning);
        m.set(MetricId::OutputSequenceLength, osl);
        m.set(MetricId::InputSequenceLength, isl);

        // ITL excludes the first token: (latency - TTFT) / (OSL - 1).
        if let (Some(ttft), Some(osl)) = (ttft, osl)
            && osl >= 2.0
        {
            let itl = (latency - ttft) / (osl - 1.0);
            m.set(MetricId::InterTokenLatency, Some(itl));
            if itl > 0.0 {
                m.set(MetricId::OutputTokenThroughputPerUser, Some(1e9 / itl));
            }
        }

        // Images sent, or images generated (image generation answers).
        let generated: u32 = record.responses.iter().map(|r| r.images).sum();
        let images = record.input.num_images + generated;
        if images > 0 {
            let n = f64::from(images);
            m.set(MetricId::NumImages, Some(n));
            if latency > 0.0 {
                m.set(MetricId::ImageThroughput, Some(n / (latency / 1e9)));
            }
            m.set(MetricId::ImageLatency, Some(latency / n));
            // What the server counted beyond the client's text tokens and the chat template:
            // the image tokens. Negative values reveal a tokenizer mismatch.
            if let (Some(prompt), Some(text)) = (usage.prompt_tokens, record.input.input_tokens)
                && generated == 0
            {
                let template = opts.template_tokens.unwrap_or(0);
                let images = prompt as f64 - text as f64 - template as f64;
                m.set(MetricId::ImageTokenCount, Some(images));
            }
        }

        // Audio seconds per second of request latency: above 1 is faster than real time.
        if let Some(seconds) = record.input.audio_seconds.filter(|s| *s > 0.0) {
            m.set(MetricId::AudioDuration, Some(seconds));
            if latency > 0.0 {
                m.set(MetricId::Rtfx, Some(seconds / (latency / 1e9)));
            }
        }

        // What a completed video job reported (SGLang's fields).
        if let Some(v) = record.video {
            let ns = v
                .inference_time_s
                .filter(|s| s.is_finite())
                .map(|s| s * 1e9);
            m.set(MetricId::VideoInferenceTime, ns);
            m.set(
                MetricId::VideoPeakMemory,
                v.peak_memory_mb.filter(|m| m.is_finite()),
            );
        }

        m.set_aiperf_013(record, &opts, (ttft, latency, isl, osl, reasoning), usage);

        m.set(MetricId::UsagePromptTokens, to_f(usage.prompt_tokens));
        m.set(
            MetricId::UsageCompletionTokens,
            to_f(usage.completion_tokens),
        );
        m.set(MetricId::UsageReasoningTokens, to_f(usage.reasoning_tokens));
        m.set(MetricId::UsageTotalTokens, to_f(usage.total_tokens));
        m
    }
}

/// `abs(server - client) / client` in percent; `None` without both or with no client tokens.
fn diff_pct(server: Option<u64>, client: Option<f64>) -> Option<f64> {
    let client = client.filter(|&c| c > 0.0)?;
    Some((server? as f64 - client).abs() / client * 100.0)
}

impl RecordMetrics {
    /// The record metrics AIPerf 0.13 added: time to first output token, decode duration,
    /// prefill and end-to-end throughput per user, OSL mismatch, usage differences and the
    /// wait between the scheduled and the actual send.
    fn set_aiperf_013(
        &mut self,
        record: &RequestRecord,
        opts: &RecordOptions,
        (ttft, latency, isl, osl, reasoning): (
            Option<f64>,
            f64,
            Option<f64>,
            Option<f64>,
            Option<f64>,
        ),
        usage: crate::record::Usage,
    ) {
        let start = record.start_perf_ns;
        let streamed = opts.streaming && record.streamed;
        // The first response with answer text (reasoning-only chunks come before it).
        let ttfo = record
            .responses
            .iter()
            .find(|r| r.text_len > 0)
            .filter(|_| streamed)
            .map(|r| r.perf_ns.saturating_sub(start) as f64);
        self.set(MetricId::TimeToFirstOutputToken, ttfo);
        if let Some(ttft) = ttft {
            self.set(MetricId::DecodeDuration, Some(latency - ttft));
            if ttft > 0.0 {
                self.set(
                    MetricId::PrefillThroughputPerUser,
                    isl.map(|i| i / (ttft / 1e9)),
                );
            }
        }
        if latency > 0.0 {
            self.set(
                MetricId::E2eOutputTokenThroughput,
                osl.map(|o| o / (latency / 1e9)),
            );
        }
        if let (Some(asked), Some(got)) = (record.input.requested_output_tokens, osl)
            && asked > 0
        {
            let asked = asked as f64;
            self.set(
                MetricId::OslMismatchDiffPct,
                Some((got - asked) / asked * 100.0),
            );
        }
        self.set(
            MetricId::UsagePromptTokensDiffPct,
            diff_pct(usage.prompt_tokens, isl),
        );
        self.set(
            MetricId::UsageCompletionTokensDiffPct,
            diff_pct(usage.completion_tokens, osl),
        );
        self.set(
            MetricId::UsageReasoningTokensDiffPct,
            diff_pct(usage.reasoning_tokens, reasoning),
        );
        // From the release of the send (its credit) to the send, and to the last response.
        let issued = record.issued_perf_ns();
        self.set(
            MetricId::CreditToStartLatency,
            Some(record.start_perf_ns.saturating_sub(issued) as f64),
        );
        self.set(
            MetricId::EffectiveLatency,
            Some(record.end_perf_ns.saturating_sub(issued) as f64),
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{ErrorDetails, Phase, RequestInput, RequestRecord, Usage};

    /// A streamed record that started at 1 ms, with one content chunk per entry of
    /// `chunk_ms` (ms since the monotonic anchor), each carrying " the".
    pub fn streamed_record(chunk_ms: &[u64]) -> RequestRecord {
        let ms = 1_000_000;
        let mut r = RequestRecord {
            phase: Phase::Profiling,
            input: RequestInput {
                session_num: 3,
                conversation_id: "conv-3".into(),
                correlation_id: "session-3".into(),
                turn_index: 0,
                input_tokens: Some(550),
                history_text: None,
                num_images: 0,
                requested_output_tokens: None,
                audio_seconds: None,
                timing: Default::default(),
                cache_bust: None,
            },
            x_request_id: "req-3".into(),
            start_perf_ns: ms,
            sent_perf_ns: None,
            ack_perf_ns: Some(2 * ms),
            http: None,
            end_perf_ns: chunk_ms.last().copied().unwrap_or(1) * ms + 500_000,
            start_wall_ns: 1_700_000_000_000_000_000 + ms,
            end_wall_ns: 1_700_000_000_000_000_000 + chunk_ms.last().copied().unwrap_or(1) * ms,
            status: Some(200),
            streamed: true,
            responses: Vec::new(),
            output_text: String::new(),
            reasoning_text: String::new(),
            last_event_perf_ns: chunk_ms.last().map(|t| t * ms + 400_000),
            usage: None,
            error: None,
            was_cancelled: false,
            cancellation_perf_ns: None,
            raw: None,
            video: None,
        };
        for &t in chunk_ms {
            r.push_response(t * ms, " the", "", 0);
        }
        r
    }

    fn tokenizer() -> Tokenizer {
        Tokenizer::builtin().unwrap()
    }

    /// Options of a streamed run counting tokens with the client tokenizer.
    pub const STREAMING: RecordOptions = RecordOptions {
        streaming: true,
        use_server_token_count: false,
        template_tokens: None,
        skip_tokenizer: false,
        no_output_tokens: false,
        no_input_tokens: false,
        templated_isl: None,
    };

    #[test]
    fn ttft_latency_and_itl_from_a_streamed_record() {
        // Start at 1 ms; chunks at 21, 26, 31, 41 ms; one token each.
        let m =
            RecordMetrics::compute(&streamed_record(&[21, 26, 31, 41]), &tokenizer(), STREAMING);
        assert_eq!(m.get(MetricId::TimeToFirstToken), Some(20e6));
        assert_eq!(m.get(MetricId::TimeToSecondToken), Some(5e6));
        // The trailing usage-only event (last_event_perf_ns) does not extend latency.
        assert_eq!(m.get(MetricId::RequestLatency), Some(40e6));
        assert_eq!(m.get(MetricId::OutputSequenceLength), Some(4.0));
        assert_eq!(m.get(MetricId::OutputTokenCount), Some(4.0));
        assert_eq!(m.get(MetricId::ReasoningTokenCount), None);
        // (40 - 20) ms / (4 - 1) tokens.
        let itl = m.get(MetricId::InterTokenLatency).unwrap();
        assert!((itl - 20e6 / 3.0).abs() < 1e-6);
        let tps = m.get(MetricId::OutputTokenThroughputPerUser).unwrap();
        assert!((tps - 150.0).abs() < 1e-9);
        assert_eq!(m.inter_chunk_latency, Some(vec![5e6, 5e6, 10e6]));
        assert_eq!(m.get(MetricId::InputSequenceLength), Some(550.0));
        assert_eq!(m.get(MetricId::NumImages), None);
    }

    #[test]
    fn a_later_turn_counts_its_whole_history() {
        let t = tokenizer();
        let mut r = streamed_record(&[21, 26]);
        r.input.input_tokens = None;
        r.input.history_text = Some("What is in the picture? A cat. And behind it?".into());
        let m = RecordMetrics::compute(&r, &t, STREAMING);
        let expected = t.count("What is in the picture? A cat. And behind it?") as f64;
        assert_eq!(m.get(MetricId::InputSequenceLength), Some(expected));
        assert!(expected > 8.0);
    }

    #[test]
    fn non_streaming_run_has_no_streaming_metrics() {
        let mut r = streamed_record(&[41]);
        r.streamed = false;
        let opts = RecordOptions::default();
        let m = RecordMetrics::compute(&r, &tokenizer(), opts);
        assert_eq!(m.get(MetricId::RequestLatency), Some(40e6));
        assert_eq!(m.get(MetricId::TimeToFirstToken), None);
        assert_eq!(m.get(MetricId::InterTokenLatency), None);
        assert!(m.inter_chunk_latency.is_none());
    }

    #[test]
    fn single_token_has_no_itl() {
        let m = RecordMetrics::compute(&streamed_record(&[21]), &tokenizer(), STREAMING);
        assert_eq!(m.get(MetricId::TimeToFirstToken), Some(20e6));
        assert_eq!(m.get(MetricId::TimeToSecondToken), None);
        assert_eq!(m.get(MetricId::InterTokenLatency), None);
        assert_eq!(m.get(MetricId::OutputTokenThroughputPerUser), None);
    }

    #[test]
    fn no_content_falls_back_to_end_of_response() {
        let mut r = streamed_record(&[]);
        r.end_perf_ns = 9_000_000;
        let m = RecordMetrics::compute(&r, &tokenizer(), STREAMING);
        assert_eq!(m.get(MetricId::RequestLatency), Some(8e6));
        assert_eq!(m.get(MetricId::TimeToFirstToken), None);
        assert_eq!(m.get(MetricId::OutputSequenceLength), Some(0.0));
    }

    #[test]
    fn reasoning_adds_to_osl() {
        let mut r = streamed_record(&[]);
        r.push_response(21_000_000, "", " the the", 0);
        r.push_response(26_000_000, " the", "", 0);
        let m = RecordMetrics::compute(&r, &tokenizer(), STREAMING);
        assert_eq!(m.get(MetricId::ReasoningTokenCount), Some(2.0));
        assert_eq!(m.get(MetricId::OutputTokenCount), Some(1.0));
        assert_eq!(m.get(MetricId::OutputSequenceLength), Some(3.0));
    }

    #[test]
    fn images_and_image_tokens() {
        let mut r = streamed_record(&[21, 26, 31, 41]);
        r.input.num_images = 2;
        r.usage = Some(Usage {
            prompt_tokens: Some(550 + 2 * 256),
            completion_tokens: Some(4),
            total_tokens: Some(550 + 512 + 4),
            reasoning_tokens: None,
        });
        let m = RecordMetrics::compute(&r, &tokenizer(), STREAMING);
        assert_eq!(m.get(MetricId::NumImages), Some(2.0));
        // 2 images in 40 ms = 50 images/sec; 20 ms/image (base unit ns/image).
        assert!((m.get(MetricId::ImageThroughput).unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(m.get(MetricId::ImageLatency), Some(20e6));
        assert_eq!(m.get(MetricId::ImageTokenCount), Some(512.0));
        assert_eq!(m.get(MetricId::UsagePromptTokens), Some(1062.0));
        assert_eq!(m.get(MetricId::UsageTotalTokens), Some(1066.0));
        assert_eq!(m.get(MetricId::UsageReasoningTokens), None);

        // The chat template's tokens are not image tokens.
        let opts = RecordOptions {
            template_tokens: Some(20),
            ..STREAMING
        };
        let m = RecordMetrics::compute(&r, &tokenizer(), opts);
        assert_eq!(m.get(MetricId::ImageTokenCount), Some(492.0));
        assert_eq!(m.get(MetricId::UsagePromptTokens), Some(1062.0));
    }

    #[test]
    fn server_token_counts_replace_the_tokenizer() {
        let mut r = streamed_record(&[21, 26, 31, 41]);
        r.usage = Some(Usage {
            prompt_tokens: Some(600),
            completion_tokens: Some(9),
            total_tokens: Some(609),
            reasoning_tokens: Some(3),
        });
        let opts = RecordOptions {
            streaming: true,
            use_server_token_count: true,
            template_tokens: None,
            skip_tokenizer: false,
            no_output_tokens: false,
            no_input_tokens: false,
            templated_isl: None,
        };
        let m = RecordMetrics::compute(&r, &tokenizer(), opts);
        assert_eq!(m.get(MetricId::InputSequenceLength), Some(600.0));
        assert_eq!(m.get(MetricId::OutputSequenceLength), Some(9.0));
        assert_eq!(m.get(MetricId::ReasoningTokenCount), Some(3.0));
        assert_eq!(m.get(MetricId::OutputTokenCount), Some(6.0));
        // ITL uses the server's OSL: 20 ms / 8.
        assert_eq!(m.get(MetricId::InterTokenLatency), Some(2.5e6));
    }

    #[test]
    fn failed_request_only_gets_error_isl() {
        let mut r = streamed_record(&[21]);
        r.error = Some(ErrorDetails {
            code: Some(500),
            kind: "Internal Server Error".into(),
            message: "boom".into(),
        });
        let m = RecordMetrics::compute(&r, &tokenizer(), STREAMING);
        assert_eq!(m.get(MetricId::ErrorIsl), Some(550.0));
        assert_eq!(m.scalars().count(), 1);
        assert!(m.inter_chunk_latency.is_none());
    }
}
