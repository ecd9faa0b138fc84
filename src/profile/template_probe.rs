//! The server probe for the chat-template overhead (see `metrics::TemplateOverhead`): one
//! request shaped like the run's first image request, sent before the run without its images
//! and with a one-token limit. Its `usage.prompt_tokens` minus its text tokens is what the
//! server's template adds. Same messages, roles and extra inputs as the real request, so the
//! server applies the same template to them.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};

use tracing::warn;

use crate::clock::Clock;
use crate::load::{LoadContext, SendPlan};
use crate::metrics::{EntryRequest, TemplateOverhead};
use crate::record::{Phase, RequestInput};
use crate::tokenizer::Tokenizer;
use crate::transport::HttpClient;

/// Sent as `X-Request-ID`, so the probe is easy to tell apart in server logs.
pub const PROBE_REQUEST_ID: &str = "aiperf-template-overhead-probe";

/// A probe waits at most this long: it must not hold the run for the request timeout.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the probe gave no overhead; the run goes on without one.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("the request body is not a chat body: {0}")]
    Body(String),
    #[error("no answer within {} s", PROBE_TIMEOUT.as_secs())]
    Timeout,
    #[error("the probe request failed: {0}")]
    Failed(String),
    #[error("the server's answer has no usage.prompt_tokens")]
    NoUsage,
}

/// `body` without its image parts, not streamed, limited to one output token.
pub fn probe_body(body: &[u8]) -> Result<Vec<u8>, ProbeError> {
    let mut body: Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| ProbeError::Body(e.to_string()))?;
    // The Responses API's list is `input`, its text parts `input_text`.
    let list = if body.contains_key("messages") {
        "messages"
    } else {
        "input"
    };
    let messages = body
        .get_mut(list)
        .and_then(Value::as_array_mut)
        .ok_or_else(|| ProbeError::Body("no 'messages' list".into()))?;
    for message in messages {
        if let Some(parts) = message.get_mut("content").and_then(Value::as_array_mut) {
            parts.retain(|p| p["type"] == "text" || p["type"] == "input_text");
            if parts.is_empty() {
                message["content"] = Value::String(String::new());
            }
        }
    }
    body.insert("stream".into(), Value::Bool(false));
    body.remove("stream_options");
    // A minimum above the one-token limit would be refused.
    body.remove("min_tokens");
    let key = if body.contains_key("max_tokens") {
        "max_tokens"
    } else if list == "input" {
        "max_output_tokens"
    } else {
        "max_completion_tokens"
    };
    body.insert(key.into(), Value::from(1));
    Ok(serde_json::to_vec(&body).expect("a JSON map always serializes"))
}

/// Sends the probe for `body`, whose text has `input_tokens` client tokens, and returns the
/// tokens the server counted beyond them.
pub async fn measure(
    client: &HttpClient,
    clock: &Clock,
    body: &[u8],
    input_tokens: u64,
) -> Result<i64, ProbeError> {
    let probe = probe_body(body)?;
    let input = RequestInput {
        correlation_id: PROBE_REQUEST_ID.into(),
        ..RequestInput::default()
    };
    let exchange = client.exchange(
        clock,
        Phase::Warmup,
        input,
        PROBE_REQUEST_ID.into(),
        Bytes::from(probe),
    );
    let record = tokio::time::timeout(PROBE_TIMEOUT, exchange)
        .await
        .map_err(|_| ProbeError::Timeout)?;
    if let Some(e) = &record.error {
        let code = e.code.map_or(String::new(), |c| format!("{c} "));
        return Err(ProbeError::Failed(format!(
            "{code}{}: {}",
            e.kind, e.message
        )));
    }
    let prompt = record
        .usage
        .and_then(|u| u.prompt_tokens)
        .ok_or(ProbeError::NoUsage)?;
    Ok(prompt as i64 - input_tokens as i64)
}

/// Finds the overhead for a run: the chat template when the tokenizer has one, else a probe
/// of the server, else none. Only entries with images matter (only they get the metric).
/// Template problems are logged and fall through to the probe.
pub async fn find_overhead(tokenizer: &Tokenizer, ctx: &LoadContext) -> TemplateOverhead {
    let overhead = choose_overhead(tokenizer, &ctx.plan, &ctx.client, &ctx.clock).await;
    if let Some(line) = overhead.describe() {
        tracing::info!("{line}");
    }
    overhead
}

/// [`find_overhead`] before its log line.
async fn choose_overhead(
    tokenizer: &Tokenizer,
    plan: &SendPlan,
    client: &HttpClient,
    clock: &Clock,
) -> TemplateOverhead {
    let entries = || {
        plan.requests
            .iter()
            .zip(&plan.conversation_ids)
            .filter(|(r, _)| r.num_images > 0)
            .map(|(r, id)| EntryRequest {
                conversation_id: id,
                body: &r.body,
                input_tokens: r.input_tokens,
            })
    };
    let Some(first) = entries().next() else {
        return TemplateOverhead::NoImages;
    };
    let template = match tokenizer.chat_template() {
        Ok(t) => t,
        Err(e) => {
            warn!("Cannot use the tokenizer's chat template: {e}");
            None
        }
    };
    if let Some(template) = template {
        match TemplateOverhead::from_chat_template(&template, tokenizer, entries()) {
            Ok(overhead) => return overhead,
            Err(e) => warn!(
                "Cannot render the chat template {}: {e}",
                template.source().display()
            ),
        }
    }
    match measure(client, clock, first.body, first.input_tokens).await {
        Ok(tokens) => TemplateOverhead::ServerProbe { tokens },
        Err(e) => TemplateOverhead::Unmeasured {
            reason: format!("no chat template, and the server probe failed: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::template_overhead::tests::{body_with_image, chatml_tokenizer_dir};
    use crate::record::RequestInput;
    use serde_json::json;

    #[test]
    fn probe_body_keeps_the_text_and_drops_images_and_streaming() {
        let body = json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is it?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ]},
                {"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ]},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": 200,
            "min_tokens": 200,
            "temperature": 0,
        });
        let probe: Value =
            serde_json::from_slice(&probe_body(&serde_json::to_vec(&body).unwrap()).unwrap())
                .unwrap();
        assert_eq!(
            probe,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [{"type": "text", "text": "What is it?"}]},
                    {"role": "user", "content": ""},
                ],
                "stream": false,
                "max_completion_tokens": 1,
                "temperature": 0,
            })
        );
        // --use-legacy-max-tokens bodies keep their key.
        let legacy = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9});
        let probe: Value =
            serde_json::from_slice(&probe_body(&serde_json::to_vec(&legacy).unwrap()).unwrap())
                .unwrap();
        assert_eq!(probe["max_tokens"], 1);
        assert!(probe.get("max_completion_tokens").is_none());

        assert!(matches!(
            probe_body(br#"{"prompt": "x"}"#),
            Err(ProbeError::Body(_))
        ));
    }

    #[test]
    fn measures_the_mock_servers_template_tokens() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut args = crate::mock::MockServerArgs::fast_defaults();
            args.chat_template_tokens = 8;
            let server = crate::mock::start(args).await.unwrap();
            let uri = format!("{}/v1/chat/completions", server.url())
                .parse()
                .unwrap();
            let client = HttpClient::new(uri, &[], Duration::from_secs(10)).unwrap();
            let body = json!({"model": "m", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "the of and to"},
            ]});
            let clock = Clock::new();
            // The mock counts "the of and to" as 4 tokens; "Be brief." is not in our
            // count, so it shows as overhead with the 2 x 8 template tokens.
            let system = crate::mock::request::text_tokens("Be brief.") as i64;
            let overhead = measure(&client, &clock, &serde_json::to_vec(&body).unwrap(), 4)
                .await
                .unwrap();
            assert_eq!(overhead, 2 * 8 + system);
            server.shutdown().await;
        });
    }

    /// A plan of one request per body, with `images` images each.
    fn plan(bodies: &[Vec<u8>], input_tokens: u64, images: u32) -> SendPlan {
        let requests = bodies
            .iter()
            .map(|b| crate::endpoint::PreparedRequest {
                body: bytes::Bytes::from(b.clone()),
                input_tokens,
                num_images: images,
                max_output_tokens: None,
                audio_seconds: None,
            })
            .collect();
        SendPlan::new(requests, bodies.len() as u64, 1)
    }

    fn client(url: &str) -> HttpClient {
        let uri = format!("{url}/v1/chat/completions").parse().unwrap();
        HttpClient::new(uri, &[], std::time::Duration::from_secs(5)).unwrap()
    }

    /// A URL nothing listens on.
    fn dead_url() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    }

    #[test]
    fn measure_picks_the_template_then_the_probe_then_none() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let clock = Clock::new();
        let builtin = Tokenizer::builtin().unwrap();
        let text = "What is in this picture?";
        let isl = builtin.count(text) as u64;
        let with_image = plan(&[body_with_image(text)], isl, 1);
        runtime.block_on(async {
            let dead = client(&dead_url());
            // Without images there is nothing to measure, and nothing is sent.
            let text_only = plan(&[body_with_image(text)], isl, 0);
            let m = choose_overhead(&builtin, &text_only, &dead, &clock).await;
            assert!(matches!(m, TemplateOverhead::NoImages), "{m:?}");

            // A tokenizer with a chat template needs no server.
            let dir = chatml_tokenizer_dir();
            let chatml = Tokenizer::from_file(dir.path()).unwrap();
            let gpt2_plan = plan(&[body_with_image(text)], chatml.count(text) as u64, 1);
            let m = choose_overhead(&chatml, &gpt2_plan, &dead, &clock).await;
            assert_eq!(m.method(), "chat_template", "{m:?}");

            // No template: the server is asked; the mock charges 8 per message.
            let server = crate::mock::start(crate::mock::MockServerArgs::fast_defaults())
                .await
                .unwrap();
            let m = choose_overhead(&builtin, &with_image, &client(&server.url()), &clock).await;
            assert_eq!(m.for_record(&RequestInput::default()), Some(8), "{m:?}");
            assert_eq!(m.method(), "server_probe");
            server.shutdown().await;

            // No template and no answer: not measured, and the reason says why.
            let m = choose_overhead(&builtin, &with_image, &dead, &clock).await;
            let TemplateOverhead::Unmeasured { reason } = &m else {
                panic!("{m:?}");
            };
            assert!(reason.contains("the server probe failed"), "{reason}");
        });
    }
}
