//! `POST /v1/responses` in the OpenAI Responses API's shapes.
//!
//! Request: `input` (a string, or message items whose content is a string or `input_text`,
//! `output_text`, `input_image` and `input_audio` parts), `instructions`,
//! `max_output_tokens`, `stream`. Prompt usage is counted as for chat (the instructions
//! count as one message).
//!
//! Streamed answer: `response.created`, `response.in_progress`, `response.output_item.added`,
//! `response.content_part.added`, one `response.output_text.delta` per token on the chat
//! schedule, then `response.output_text.done`, `response.content_part.done`,
//! `response.output_item.done` and `response.completed` with the usage.

use bytes::Bytes;
use serde_json::{Value, json};

use super::audio::input_audio_tokens;
use super::messages::{count_content, count_image, event};
use super::request::{ChatCosts, GenerationParams, PromptStats, text_tokens};
use super::response::{Api, ChunkWriter, ResponseHeader, UsageCounts};
use super::words;

/// The name that starts the last event of a stream, which `--truncate-rate` leaves out.
pub const COMPLETED_EVENT: &[u8] = b"event: response.completed\n";

/// Events before the first token delta.
const LEAD_EVENTS: u64 = 4;

fn count_part(p: &Value, costs: ChatCosts, stats: &mut PromptStats) -> Result<(), String> {
    match p.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => {
            let text = p.get("text").and_then(Value::as_str);
            stats.text_tokens += text_tokens(text.ok_or("a text part needs 'text'")?);
        }
        Some("input_image") => {
            let url = p.get("image_url").and_then(Value::as_str);
            count_image(
                url.ok_or("an input_image part needs 'image_url'")?,
                costs,
                stats,
            )?;
        }
        Some("input_audio") => {
            let audio = p.get("input_audio");
            let field = |k: &str| audio.and_then(|a| a.get(k)).and_then(Value::as_str);
            let data = field("data").ok_or("an input_audio part needs 'input_audio.data'")?;
            stats.media_tokens += input_audio_tokens(data, field("format"))?.0;
        }
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
    let input = v.get("input").ok_or("input: Field required")?;
    let mut stats = PromptStats::default();
    let count = |p: &Value, s: &mut PromptStats| count_part(p, costs, s);
    if let Some(instructions) = v.get("instructions").filter(|i| !i.is_null()) {
        count_content(Some(instructions), &mut stats, count)
            .map_err(|e| format!("instructions{e}"))?;
        stats.roles.push("system".into());
    }
    match input {
        Value::String(s) => {
            stats.text_tokens += text_tokens(s);
            stats.roles.push("user".into());
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                count_content(item.get("content"), &mut stats, count)
                    .map_err(|e| format!("input[{i}].content{e}"))?;
                let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
                stats.roles.push(role.to_string());
            }
        }
        _ => return Err("input must be a string or a list of items".into()),
    }
    stats.template_tokens = costs.template_tokens_per_message * stats.roles.len() as u64;
    let generation = GenerationParams {
        max_tokens: v.get("max_output_tokens").and_then(Value::as_u64),
        stream: v.get("stream").and_then(Value::as_bool),
        ..GenerationParams::default()
    };
    let model = v.get("model").and_then(Value::as_str).map(str::to_string);
    Ok((model, stats, generation))
}

/// The id of the answer's one message item.
fn item_id(header: &ResponseHeader) -> String {
    format!("msg_{}", header.id.trim_start_matches("resp_"))
}

/// The response object, with `output` and `usage` as given.
fn response_object(header: &ResponseHeader, status: &str, output: Value, usage: Value) -> Value {
    json!({
        "id": header.id, "object": "response", "created_at": header.created,
        "status": status, "model": header.model, "output": output, "usage": usage,
    })
}

fn message_item(header: &ResponseHeader, status: &str, text: Option<&str>) -> Value {
    let content = match text {
        Some(t) => json!([{"type": "output_text", "text": t, "annotations": []}]),
        None => json!([]),
    };
    json!({"id": item_id(header), "type": "message", "status": status,
           "role": "assistant", "content": content})
}

fn usage_json(usage: UsageCounts) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

/// The opening events and the shape of each token's event.
pub fn writer(header: &ResponseHeader) -> ChunkWriter {
    let pending = response_object(header, "in_progress", json!([]), Value::Null);
    let id = item_id(header);
    let lead = [
        event(
            "response.created",
            &json!({"type": "response.created", "sequence_number": 0, "response": pending}),
        ),
        event(
            "response.in_progress",
            &json!({"type": "response.in_progress", "sequence_number": 1, "response": pending}),
        ),
        event(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
                    "item": message_item(header, "in_progress", None)}),
        ),
        event(
            "response.content_part.added",
            &json!({"type": "response.content_part.added", "sequence_number": 3, "item_id": id,
                    "output_index": 0, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
        ),
    ]
    .concat();
    let prefix = format!(
        "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"{id}\",\"output_index\":0,\"content_index\":0,\"delta\":\""
    );
    ChunkWriter::events(
        Api::Responses,
        Bytes::from(lead),
        Bytes::from(prefix),
        b"",
        Some(LEAD_EVENTS),
    )
}

/// What follows the last of `tokens` deltas: the text, part and item done, then
/// `response.completed` with the usage.
pub fn tail(header: &ResponseHeader, tokens: u64, usage: UsageCounts) -> Bytes {
    let text = words::text(tokens);
    let seq = LEAD_EVENTS + tokens;
    let id = item_id(header);
    let part = json!({"type": "output_text", "text": text, "annotations": []});
    let item = message_item(header, "completed", Some(&text));
    let done = response_object(header, "completed", json!([item]), usage_json(usage));
    [
        event(
            "response.output_text.done",
            &json!({"type": "response.output_text.done", "sequence_number": seq, "item_id": id,
                    "output_index": 0, "content_index": 0, "text": text}),
        ),
        event(
            "response.content_part.done",
            &json!({"type": "response.content_part.done", "sequence_number": seq + 1,
                    "item_id": id, "output_index": 0, "content_index": 0, "part": part}),
        ),
        event(
            "response.output_item.done",
            &json!({"type": "response.output_item.done", "sequence_number": seq + 2,
                    "output_index": 0, "item": item}),
        ),
        event(
            "response.completed",
            &json!({"type": "response.completed", "sequence_number": seq + 3, "response": done}),
        ),
    ]
    .concat()
    .into()
}

/// A whole (non-streamed) response.
pub fn full_body(header: &ResponseHeader, tokens: u64, usage: UsageCounts) -> Bytes {
    let item = message_item(header, "completed", Some(&words::text(tokens)));
    let body = response_object(header, "completed", json!([item]), usage_json(usage));
    Bytes::from(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted() {
        let costs = ChatCosts {
            remote_image_tokens: 3,
            template_tokens_per_message: 1,
        };
        let body = json!({"model": "m", "max_output_tokens": 4, "instructions": "sys",
            "input": [{"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "hi you"},
                {"type": "input_image", "image_url": "https://x/i.png"}]},
                {"role": "assistant", "content": "ok"}]});
        let (_, stats, generation) = parse_request(body.to_string().as_bytes(), costs).unwrap();
        assert_eq!(
            stats.text_tokens,
            text_tokens("sys") + text_tokens("hi you") + text_tokens("ok")
        );
        assert_eq!((stats.image_tokens, stats.template_tokens), (3, 3));
        assert_eq!(generation.max_output(), Some(4));
        assert!(!generation.stream());
        let (_, stats, _) = parse_request(br#"{"input":"abc"}"#, costs).unwrap();
        assert_eq!(stats.text_tokens, text_tokens("abc"));
        assert_eq!(
            parse_request(b"{}", costs).unwrap_err(),
            "input: Field required"
        );
    }

    #[test]
    fn stream_events_are_numbered_in_order() {
        let header = ResponseHeader {
            api: Api::Responses,
            id: "resp_ab".into(),
            created: 1,
            model: "m".into(),
        };
        let w = writer(&header);
        let mut stream = w.role_chunk().unwrap().to_vec();
        for i in 0..2 {
            stream.extend_from_slice(&w.token_chunk(i, i == 1));
        }
        let usage = UsageCounts {
            prompt_tokens: 5,
            completion_tokens: 2,
            cached_tokens: None,
        };
        stream.extend_from_slice(&tail(&header, 2, usage));
        let text = String::from_utf8(stream).unwrap();
        let events: Vec<Value> = text
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| serde_json::from_str(e.split_once("\ndata: ").unwrap().1).unwrap())
            .collect();
        let seq: Vec<u64> = events
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(seq, (0..10).collect::<Vec<_>>());
        assert_eq!(events[4]["delta"], " the");
        assert_eq!(events[5]["item_id"], "msg_ab");
        assert_eq!(events[9]["type"], "response.completed");
        assert_eq!(events[9]["response"]["usage"]["total_tokens"], 7);
        assert_eq!(
            events[9]["response"]["output"][0]["content"][0]["text"],
            " the of"
        );
    }
}
