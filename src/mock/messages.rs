//! `POST /v1/messages` in the Anthropic Messages API's shapes.
//!
//! Request: `messages` (string content, or `text` and `image` blocks with a base64 or URL
//! source), `system` (string or text blocks), `max_tokens` (required, as the API has it),
//! `stream`. Prompt usage is counted as for chat: text tokens, Qwen2-VL image tokens and the
//! template cost per message (the system text counts as one).
//!
//! Streamed answer: `message_start` (input tokens), `content_block_start`, `ping`, one
//! `content_block_delta` per token on the chat schedule, `content_block_stop`,
//! `message_delta` (output tokens), `message_stop`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::image::qwen2_vl_image_tokens;
use super::request::{ChatCosts, FinishReason, GenerationParams, PromptStats, text_tokens};
use super::response::{Api, ChunkWriter, ResponseHeader, UsageCounts};
use super::words;
use crate::dataset::data_url::image_size;

/// The last event of a stream, which `--truncate-rate` leaves out.
pub const STOP_EVENT: &[u8] = b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// One SSE event with its name.
pub(super) fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Counts one image URL (a data URL by its size, an http(s) URL at the fixed remote cost).
pub(super) fn count_image(
    url: &str,
    costs: ChatCosts,
    stats: &mut PromptStats,
) -> Result<(), String> {
    if url.starts_with("data:") {
        let (w, h) = image_size(url).map_err(|e| e.to_string())?;
        stats.image_tokens += qwen2_vl_image_tokens(w, h);
        stats.image_sizes.push((w, h));
    } else if url.starts_with("http://") || url.starts_with("https://") {
        stats.image_tokens += costs.remote_image_tokens;
        stats.image_sizes.push((0, 0));
    } else {
        return Err("image URL must be a data URL or an http(s) URL".into());
    }
    Ok(())
}

/// Counts a string or a list of blocks; `block` counts one block. Errors start with what
/// follows the field's name (`[2]: ...` or `: ...`).
pub(super) fn count_content(
    content: Option<&Value>,
    stats: &mut PromptStats,
    mut block: impl FnMut(&Value, &mut PromptStats) -> Result<(), String>,
) -> Result<(), String> {
    match content {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) => {
            stats.text_tokens += text_tokens(s);
            Ok(())
        }
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .try_for_each(|(i, b)| block(b, stats).map_err(|e| format!("[{i}]: {e}"))),
        Some(_) => Err(": must be a string or a list of blocks".into()),
    }
}

fn count_block(b: &Value, costs: ChatCosts, stats: &mut PromptStats) -> Result<(), String> {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => {
            let text = b.get("text").and_then(Value::as_str);
            stats.text_tokens += text_tokens(text.ok_or("a text block needs 'text'")?);
        }
        Some("image") => {
            let source = b.get("source").ok_or("an image block needs 'source'")?;
            let field = |k: &str| source.get(k).and_then(Value::as_str);
            match field("type") {
                Some("base64") => {
                    let media = field("media_type").ok_or("source.media_type: Field required")?;
                    let data = field("data").ok_or("source.data: Field required")?;
                    count_image(&format!("data:{media};base64,{data}"), costs, stats)?;
                }
                Some("url") => count_image(field("url").unwrap_or(""), costs, stats)?,
                _ => return Err("source.type must be 'base64' or 'url'".into()),
            }
        }
        // Other blocks (tool results, documents) are accepted and not counted.
        _ => {}
    }
    Ok(())
}

/// What the mock reads from a request: its model, prompt counts and output limit.
pub fn parse_request(
    bytes: &[u8],
    costs: ChatCosts,
) -> Result<(Option<String>, PromptStats, GenerationParams), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("JSON decode error: {e}"))?;
    let messages = v
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: List should have at least 1 item".into());
    }
    let max_tokens = v
        .get("max_tokens")
        .and_then(Value::as_u64)
        .ok_or("max_tokens: Field required")?;
    let mut stats = PromptStats::default();
    let system = v.get("system").filter(|s| !s.is_null());
    let count = |b: &Value, s: &mut PromptStats| count_block(b, costs, s);
    if system.is_some() {
        count_content(system, &mut stats, count).map_err(|e| format!("system{e}"))?;
        stats.roles.push("system".into());
    }
    for (i, m) in messages.iter().enumerate() {
        count_content(m.get("content"), &mut stats, count)
            .map_err(|e| format!("messages[{i}].content{e}"))?;
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        stats.roles.push(role.to_string());
    }
    stats.template_tokens = costs.template_tokens_per_message * stats.roles.len() as u64;
    let generation = GenerationParams {
        max_tokens: Some(max_tokens),
        stream: v.get("stream").and_then(Value::as_bool),
        ..GenerationParams::default()
    };
    let model = v.get("model").and_then(Value::as_str).map(str::to_string);
    Ok((model, stats, generation))
}

fn stop_reason(finish: FinishReason) -> &'static str {
    match finish {
        FinishReason::Length => "max_tokens",
        FinishReason::Stop => "end_turn",
    }
}

/// The opening events (with the input tokens) and the shape of each token's event.
pub fn writer(header: &ResponseHeader, usage: UsageCounts) -> ChunkWriter {
    let start = json!({"type": "message_start", "message": {
        "id": header.id, "type": "message", "role": "assistant", "content": [],
        "model": header.model, "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": usage.prompt_tokens, "output_tokens": 0},
    }});
    let lead = [
        event("message_start", &start),
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event("ping", &json!({"type": "ping"})),
    ]
    .concat();
    ChunkWriter::events(
        Api::Messages,
        Bytes::from(lead),
        Bytes::from_static(
            b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"",
        ),
        b"\"}}\n\n",
        None,
    )
}

/// What follows the last token: the block's end, the output usage and `message_stop`.
pub fn tail(usage: UsageCounts, finish: FinishReason) -> Bytes {
    let delta = json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(finish), "stop_sequence": null},
        "usage": {"output_tokens": usage.completion_tokens}});
    let mut out = event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    );
    out.push_str(&event("message_delta", &delta));
    let mut out = out.into_bytes();
    out.extend_from_slice(STOP_EVENT);
    Bytes::from(out)
}

/// A whole (non-streamed) message.
pub fn full_body(
    header: &ResponseHeader,
    tokens: u64,
    finish: FinishReason,
    usage: UsageCounts,
) -> Bytes {
    let body = json!({
        "id": header.id, "type": "message", "role": "assistant", "model": header.model,
        "content": [{"type": "text", "text": words::text(tokens)}],
        "stop_reason": stop_reason(finish), "stop_sequence": null,
        "usage": {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens},
    });
    Bytes::from(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_and_need_max_tokens() {
        let costs = ChatCosts {
            remote_image_tokens: 7,
            template_tokens_per_message: 2,
        };
        let body = json!({"model": "m", "max_tokens": 5, "stream": true, "system": "be brief",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"},
                {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}]}]});
        let (model, stats, generation) = parse_request(body.to_string().as_bytes(), costs).unwrap();
        assert_eq!(model.as_deref(), Some("m"));
        assert_eq!(
            stats.text_tokens,
            text_tokens("be brief") + text_tokens("hello there")
        );
        assert_eq!((stats.image_tokens, stats.template_tokens), (7, 4));
        assert_eq!(stats.roles, ["system", "user"]);
        assert_eq!(
            (generation.max_output(), generation.stream()),
            (Some(5), true)
        );
        let e = parse_request(br#"{"messages":[{"role":"user","content":"x"}]}"#, costs);
        assert_eq!(e.unwrap_err(), "max_tokens: Field required");
        let e = parse_request(
            br#"{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file"}}]}]}"#,
            costs,
        );
        assert!(e.unwrap_err().starts_with("messages[0].content[0]: "));
    }
}
