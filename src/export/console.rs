//! The console report: AIPerf's metrics table(s), the error summary and a short footer.

use super::RunInfo;
use super::table::{Justify, Table};
use crate::metrics::{ConsoleGroup, MetricResult, MetricValue, MetricsSummary};

/// Table width the report is laid out for. At this width a typical run renders exactly
/// like the transcripts in AIPerf's documentation (long labels wrap onto a second line).
pub const CONSOLE_WIDTH: usize = 101;

const STAT_COLUMNS: [&str; 7] = ["avg", "min", "max", "p99", "p90", "p50", "std"];

/// Python's `f"{v:,.2f}"`: two decimals with thousands separators.
pub fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return python_non_finite(v).to_string();
    }
    let fixed = format!("{:.2}", v.abs());
    let (int_part, frac) = fixed.split_once('.').unwrap_or((&fixed, "00"));
    let grouped = group_thousands(int_part);
    let sign = if v.is_sign_negative() { "-" } else { "" };
    format!("{sign}{grouped}.{frac}")
}

/// Python spells non-finite floats `nan`, `inf` and `-inf`.
pub fn python_non_finite(v: f64) -> &'static str {
    if v.is_nan() {
        "nan"
    } else if v > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// AIPerf's row label: `Header (unit)`, the unit on its own line when the header is long.
fn label(result: &MetricResult) -> String {
    let def = result.def;
    let separator = if def.header.len() > 30 { "\n" } else { " " };
    format!("{}{separator}({})", def.header, def.unit)
}

fn metric_row(result: &MetricResult) -> Vec<String> {
    let mut row = vec![label(result)];
    match result.display() {
        MetricValue::Distribution(s) => {
            for v in [s.avg, s.min, s.max, s.p99(), s.p90(), s.p50(), s.std] {
                row.push(format_number(v));
            }
        }
        MetricValue::Scalar(v) => {
            row.push(format_number(v));
            row.extend(std::iter::repeat_n(
                "N/A".to_string(),
                STAT_COLUMNS.len() - 1,
            ));
        }
        MetricValue::TimeWeighted(w) => {
            for v in [w.avg, w.min, w.max, w.p99, w.p90, w.p50, w.std] {
                row.push(format_number(v));
            }
        }
    }
    row
}

fn metrics_table(
    summary: &MetricsSummary,
    streaming: bool,
    group: ConsoleGroup,
    title: &str,
) -> Table {
    let mut table = Table::new(title).column("Metric", Justify::Right);
    for name in STAT_COLUMNS {
        table = table.column(name, Justify::Right);
    }
    let mut shown: Vec<&MetricResult> = summary
        .results
        .iter()
        .filter(|r| r.def.console == group && !r.def.error_only)
        .filter(|r| streaming || !r.def.streaming_only)
        .collect();
    shown.sort_by_key(|r| r.def.display_order);
    for result in shown {
        table.row(metric_row(result));
    }
    table
}

fn error_table(summary: &MetricsSummary) -> Table {
    let mut table = Table::new("NVIDIA AIPerf | Error Summary")
        .column("Code", Justify::Right)
        .column("Type", Justify::Right)
        .column("Message", Justify::Left)
        .column("Count", Justify::Right);
    for e in &summary.error_summary {
        let d = &e.details;
        table.row(vec![
            d.code.map_or("N/A".to_string(), |c| c.to_string()),
            if d.kind.is_empty() {
                "N/A".to_string()
            } else {
                d.kind.clone()
            },
            d.message.clone(),
            format_count(e.count),
        ]);
    }
    table
}

/// Inserts a comma between groups of three digits.
fn group_thousands(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Python's `f"{n:,}"` for a count.
pub fn format_count(n: u64) -> String {
    group_thousands(&n.to_string())
}

/// Renders the report for a console `width` columns wide.
pub fn render(summary: &MetricsSummary, info: &RunInfo, width: usize) -> String {
    let mut out = String::new();
    // The endpoint type's title ("LLM Metrics", "Embeddings Metrics", ...).
    let title = info.input_config["endpoint"]["type"]
        .as_str()
        .and_then(crate::endpoint::EndpointType::from_name)
        .map_or("LLM Metrics", |t| t.metrics_title());
    // AIPerf's table order: Effective, Active, Usage, then the main table.
    let tables = [
        metrics_table(
            summary,
            info.streaming,
            ConsoleGroup::Effective,
            &format!("NVIDIA AIPerf | {title}: Effective"),
        ),
        metrics_table(
            summary,
            info.streaming,
            ConsoleGroup::Active,
            &format!("NVIDIA AIPerf | {title}: Active"),
        ),
        metrics_table(
            summary,
            info.streaming,
            ConsoleGroup::Usage,
            &format!("NVIDIA AIPerf | {title}: Usage"),
        ),
        metrics_table(
            summary,
            info.streaming,
            ConsoleGroup::Default,
            &format!("NVIDIA AIPerf | {title}"),
        ),
        error_table(summary),
    ];
    for table in tables.iter().filter(|t| !t.is_empty()) {
        out.push('\n');
        out.push_str(&table.render(width));
    }
    out.push('\n');
    if !info.cli_command.is_empty() {
        out.push_str(&format!("CLI Command: {}\n", info.cli_command));
    }
    out.push_str(&format!(
        "Benchmark Duration: {:.2} sec{}\n",
        summary.benchmark_duration_ns as f64 / 1e9,
        if info.was_cancelled {
            " (cancelled early)"
        } else {
            ""
        }
    ));
    if info.was_cancelled {
        out.push_str(
            "The profile run was cancelled early. Results shown may be incomplete or inaccurate.\n",
        );
    }
    out.push_str(&failed_line(summary));
    out.push_str(&osl_mismatch_warning(
        summary,
        info.output_limit_is_a_ceiling,
    ));
    out
}

/// Says when responses missed the output length they asked for (`--osl`), with examples
/// and what to do about it. When the limit is only a ceiling (accuracy mode), replies that
/// stop early are expected and the advice to force the length would spoil the answers.
pub fn osl_mismatch_warning(summary: &MetricsSummary, limit_is_a_ceiling: bool) -> String {
    let n = summary.osl_mismatch_count;
    if n == 0 {
        return String::new();
    }
    let total = summary.request_count;
    let examples: Vec<String> = summary
        .osl_mismatch_examples
        .iter()
        .map(|m| m.describe())
        .collect();
    if limit_is_a_ceiling {
        return format!(
            "Output lengths: {n} of {total} replies were not the length of their max_tokens, e.g. {}.              Expected here: max_tokens is each question's ceiling and the model stops when it has              answered (do not add ignore_eos or min_tokens, which would change the answers).\n",
            examples.join("; ")
        );
    }
    format!(
        "OSL Mismatch Warning: {n} of {total} requests did not get the output length they asked for \
         (more than min(5%, 50 tokens) off), e.g. {}. A server that stops at an end-of-sequence token \
         ignores --osl: add --extra-inputs ignore_eos:true (or min_tokens:<n>) to get the full length; \
         if only the tokenizers differ, --use-server-token-count counts the server's tokens.\n",
        examples.join("; ")
    )
}

/// Says how many requests failed, if any: a run with some failures still exits 0 unless
/// `--failed-request-threshold` is passed, so the footer must not leave them to the table.
fn failed_line(summary: &MetricsSummary) -> String {
    let failed = summary.error_request_count;
    if failed == 0 {
        return String::new();
    }
    let total = failed + summary.request_count;
    format!(
        "{failed} of {total} requests failed ({:.1}%); see the Error Summary. \
         --failed-request-threshold sets the failed share above which a run exits 1.\n",
        failed as f64 * 100.0 / total as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{ErrorCount, MetricId, MetricResult};
    use crate::record::ErrorDetails;
    use crate::stats::Stats;

    #[test]
    fn numbers_look_like_python() {
        assert_eq!(format_number(0.0), "0.00");
        assert_eq!(format_number(19.994), "19.99");
        assert_eq!(format_number(2940.386), "2,940.39");
        assert_eq!(format_number(1234567.891), "1,234,567.89");
        assert_eq!(format_number(-1234.5), "-1,234.50");
        assert_eq!(format_number(-0.001), "-0.00");
        assert_eq!(format_number(f64::NAN), "nan");
        assert_eq!(format_count(1234567), "1,234,567");
        assert_eq!(format_count(12), "12");
    }

    fn dist(id: MetricId, ms: [f64; 7]) -> MetricResult {
        // [avg, min, max, p99, p90, p50, std] in display units.
        let scale = id.def().scale;
        let [avg, min, max, p99, p90, p50, std] = ms.map(|v| v * scale);
        let mut percentiles = [0.0; 9];
        percentiles[8] = p99;
        percentiles[6] = p90;
        percentiles[4] = p50;
        MetricResult {
            def: id.def(),
            value: MetricValue::Distribution(Stats {
                avg,
                min,
                max,
                percentiles,
                std,
                count: 20,
                sum: avg * 20.0,
            }),
        }
    }

    fn summary(results: Vec<MetricResult>, errors: Vec<ErrorCount>) -> MetricsSummary {
        MetricsSummary {
            results,
            error_summary: errors,
            request_count: 20,
            error_request_count: 0,
            benchmark_duration_ns: 15_810_000_000,
            osl_mismatch_count: 0,
            osl_mismatch_examples: Vec::new(),
            timeslices: Vec::new(),
        }
    }

    fn info() -> RunInfo {
        RunInfo {
            benchmark_id: "id".into(),
            start_wall_ns: 0,
            end_wall_ns: 0,
            was_cancelled: false,
            is_complete: true,
            cli_command: "aiperf profile --model m --streaming".into(),
            input_config: serde_json::json!({}),
            random_seed: None,
            tokenizer: "builtin".into(),
            template_overhead: None,
            streaming: true,
            load_pacing: None,
            client_overhead: None,
            gpu_telemetry: None,
            output_limit_is_a_ceiling: false,
            extra_metrics: Vec::new(),
            extra: Vec::new(),
        }
    }

    #[test]
    fn reproduces_the_documented_transcript() {
        // The transcript in AIPerf's custom-dataset tutorial, rows given in scrambled order.
        let s = summary(
            vec![
                MetricResult {
                    def: MetricId::RequestThroughput.def(),
                    value: MetricValue::Scalar(0.63),
                },
                dist(
                    MetricId::RequestLatency,
                    [
                        2940.39, 1536.67, 7319.35, 7034.86, 4474.42, 2239.67, 1611.04,
                    ],
                ),
                dist(
                    MetricId::TimeToFirstToken,
                    [19.99, 12.53, 49.62, 48.89, 42.24, 13.93, 12.92],
                ),
            ],
            vec![],
        );
        let expected = "
                                     NVIDIA AIPerf | LLM Metrics
┏━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┓
┃               Metric ┃      avg ┃      min ┃      max ┃      p99 ┃      p90 ┃      p50 ┃      std ┃
┡━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━┩
│  Time to First Token │    19.99 │    12.53 │    49.62 │    48.89 │    42.24 │    13.93 │    12.92 │
│                 (ms) │          │          │          │          │          │          │          │
│ Request Latency (ms) │ 2,940.39 │ 1,536.67 │ 7,319.35 │ 7,034.86 │ 4,474.42 │ 2,239.67 │ 1,611.04 │
│   Request Throughput │     0.63 │      N/A │      N/A │      N/A │      N/A │      N/A │      N/A │
│       (requests/sec) │          │          │          │          │          │          │          │
└──────────────────────┴──────────┴──────────┴──────────┴──────────┴──────────┴──────────┴──────────┘

CLI Command: aiperf profile --model m --streaming
Benchmark Duration: 15.81 sec
";
        assert_eq!(render(&s, &info(), CONSOLE_WIDTH), expected);
    }

    #[test]
    fn error_summary_and_cancellation() {
        let s = summary(
            vec![MetricResult {
                def: MetricId::RequestCount.def(),
                value: MetricValue::Scalar(1234.0),
            }],
            vec![
                ErrorCount {
                    details: ErrorDetails {
                        code: Some(500),
                        kind: "Internal Server Error".into(),
                        message: "boom".into(),
                    },
                    count: 1200,
                },
                ErrorCount {
                    details: ErrorDetails {
                        code: None,
                        kind: String::new(),
                        message: "connection refused by the server at 127.0.0.1:9".into(),
                    },
                    count: 3,
                },
            ],
        );
        let mut run = info();
        run.was_cancelled = true;
        run.cli_command.clear();
        // Narrow enough that the long label and the long message wrap.
        let text = render(&s, &run, 70);
        let expected = "
                     NVIDIA AIPerf | LLM Metrics
┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━┳━━━━━┳━━━━━┳━━━━━┳━━━━━┳━━━━━┓
┃              Metric ┃      avg ┃ min ┃ max ┃ p99 ┃ p90 ┃ p50 ┃ std ┃
┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━╇━━━━━╇━━━━━╇━━━━━╇━━━━━╇━━━━━┩
│       Request Count │ 1,234.00 │ N/A │ N/A │ N/A │ N/A │ N/A │ N/A │
│          (requests) │          │     │     │     │     │     │     │
└─────────────────────┴──────────┴─────┴─────┴─────┴─────┴─────┴─────┘

                    NVIDIA AIPerf | Error Summary
┏━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┓
┃ Code ┃                  Type ┃ Message                     ┃ Count ┃
┡━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━┩
│  500 │ Internal Server Error │ boom                        │ 1,200 │
│  N/A │                   N/A │ connection refused by the   │     3 │
│      │                       │ server at 127.0.0.1:9       │       │
└──────┴───────────────────────┴─────────────────────────────┴───────┘

Benchmark Duration: 15.81 sec (cancelled early)
The profile run was cancelled early. Results shown may be incomplete or inaccurate.
";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_footer_counts_failed_requests() {
        let mut s = summary(vec![], vec![]);
        assert!(!render(&s, &info(), CONSOLE_WIDTH).contains("failed"));
        s.request_count = 13;
        s.error_request_count = 7;
        let text = render(&s, &info(), CONSOLE_WIDTH);
        assert!(
            text.ends_with(
                "Benchmark Duration: 15.81 sec\n7 of 20 requests failed (35.0%); see the Error Summary. \
                 --failed-request-threshold sets the failed share above which a run exits 1.\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn streaming_rows_hidden_when_not_streaming_and_order_follows_aiperf() {
        let s = summary(
            vec![
                MetricResult {
                    def: MetricId::RequestCount.def(),
                    value: MetricValue::Scalar(2.0),
                },
                dist(MetricId::InputSequenceLength, [550.0; 7]),
                dist(MetricId::ImageTokenCount, [512.0; 7]),
                dist(MetricId::TimeToFirstToken, [1.0; 7]),
                dist(MetricId::OutputTokenCount, [9.0; 7]),
                dist(MetricId::UsagePromptTokens, [1062.0; 7]),
            ],
            vec![],
        );
        let mut run = info();
        run.streaming = false;
        let text = render(&s, &run, 200);
        assert!(!text.contains("Time to First Token"));
        assert!(!text.contains("Output Token Count"), "hidden metric shown");
        let isl = text.find("Input Sequence Length").unwrap();
        let image = text.find("Image Token Count").unwrap();
        let count = text.find("Request Count").unwrap();
        assert!(isl < image && image < count);
        // The Usage table comes before the main one, as in AIPerf.
        let usage = text.find("NVIDIA AIPerf | LLM Metrics: Usage").unwrap();
        let main = text.find("NVIDIA AIPerf | LLM Metrics\n").unwrap();
        let prompt = text.find("Usage Prompt Tokens").unwrap();
        assert!(usage < prompt && prompt < main && main < isl);
    }
}
