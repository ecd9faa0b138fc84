//! Anthropic Messages API (`/v1/messages`) request bodies and response events.
//!
//! Body: `messages` (text and `image` blocks, or a plain string for a lone text), `model`,
//! `max_tokens` (required by the API: the requested output length, else 1024 as AIPerf
//! sends), `stream`, and the system text as top-level `system`. Requests carry
//! `x-api-key` and `anthropic-version` instead of a bearer token (see `transport`).
//!
//! Streams: `message_start` (usage with the input tokens), `content_block_start`,
//! `content_block_delta` (`text_delta`, `thinking_delta`), `content_block_stop`,
//! `message_delta` (usage with the output tokens), `message_stop` (the end), `ping`, `error`.
//! A whole response is a `message` object with `content` blocks and `usage`.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::{BodyOptions, ParsedEvent};
use crate::dataset::Entry;
use crate::record::Usage;

/// `max_tokens` when the request asks for no output length: the API requires one.
pub const DEFAULT_MAX_TOKENS: u64 = 1024;

/// The version header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// One content part, for the dialects to render in their own shapes.
pub enum Part {
    Text(String),
    Image(String),
    /// Base64 data and format.
    Audio(String, &'static str),
}

/// A turn's content: its text as a plain string when it is the only part (as AIPerf sends
/// it), else its texts, images and audio clips as rendered parts, in that order.
pub fn content(entry: &mut Entry, render: impl Fn(Part) -> Value) -> Value {
    let text = std::mem::take(&mut entry.text);
    let extra_texts = std::mem::take(&mut entry.extra_texts);
    let images = std::mem::take(&mut entry.images);
    let audios = std::mem::take(&mut entry.audios);
    if images.is_empty() && extra_texts.is_empty() && audios.is_empty() {
        return Value::String(text);
    }
    let texts = std::iter::once(text)
        .chain(extra_texts)
        .filter(|t| !t.is_empty())
        .map(Part::Text);
    let images = images.into_iter().map(|i| Part::Image(i.data_url));
    let audios = audios.into_iter().map(|a| Part::Audio(a.base64, a.format));
    Value::Array(texts.chain(images).chain(audios).map(render).collect())
}

/// An image block: a data URL as a base64 source with its media type, any other URL as a
/// URL source.
fn image_block(url: String) -> Value {
    match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
    {
        Some((header, data)) => {
            let media_type = header.split(';').next().filter(|m| !m.is_empty());
            json!({"type": "image", "source": {
                "type": "base64",
                "media_type": media_type.unwrap_or("image/png"),
                "data": data,
            }})
        }
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

/// The message of one turn (the endpoint check keeps audio and video away).
pub fn message(entry: &mut Entry) -> Value {
    let content = content(entry, |part| match part {
        Part::Text(t) => json!({"type": "text", "text": t}),
        Part::Image(url) => image_block(url),
        Part::Audio(..) => unreachable!("audio is refused for --endpoint-type messages"),
    });
    let role = entry.role.take().unwrap_or_else(|| "user".into());
    json!({"role": role, "content": content})
}

/// Every field but `messages`.
pub fn body_fields(entry: &Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(opts.model.clone()));
    body.insert("stream".into(), Value::Bool(opts.streaming));
    let max = entry.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    body.insert("max_tokens".into(), Value::from(max));
    if let Some(s) = system {
        body.insert("system".into(), Value::String(s.to_string()));
    }
    body
}

pub fn body(mut entry: Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(vec![message(&mut entry)]));
    body.extend(body_fields(&entry, system, opts));
    body
}

/// A one-token request for the readiness probe.
pub fn probe_body(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 1})
}

/// A token count: a number, or a number sent as a string.
pub(super) fn count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `usage`: `input_tokens` and `output_tokens` (Anthropic reports no total).
fn usage(u: &Value) -> Option<Box<Usage>> {
    let field = |k: &str| u.get(k).and_then(count);
    u.is_object().then(|| {
        Box::new(Usage {
            prompt_tokens: field("input_tokens"),
            completion_tokens: field("output_tokens"),
            total_tokens: None,
            reasoning_tokens: None,
        })
    })
}

/// Reads one SSE event or a whole body by its `type`.
pub fn parse_event<'a>(
    event: Option<&str>,
    data: &'a [u8],
) -> Result<ParsedEvent<'a>, serde_json::Error> {
    let v: Value = serde_json::from_slice(data)?;
    let mut out = ParsedEvent::default();
    let string = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| Cow::Owned(s.to_string()))
    };
    match v.get("type").and_then(Value::as_str).or(event) {
        Some("content_block_delta") => {
            let delta = v.get("delta");
            match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                Some("text_delta") => out.text = string(delta.and_then(|d| d.get("text"))),
                Some("thinking_delta") => {
                    out.reasoning = string(delta.and_then(|d| d.get("thinking")))
                }
                // A tool call's arguments: generated tokens like any text.
                Some("input_json_delta") => {
                    out.text = string(delta.and_then(|d| d.get("partial_json")))
                }
                _ => {}
            }
        }
        Some("message_start") => out.usage = v.pointer("/message/usage").and_then(usage),
        Some("message_delta") => out.usage = v.get("usage").and_then(usage),
        Some("message_stop") => out.end = true,
        Some("error") => {
            out.error = Some(
                v.get("error")
                    .and_then(super::error_message)
                    .unwrap_or_else(|| v.to_string()),
            )
        }
        Some("message") => {
            let mut text: Option<String> = None;
            let mut reasoning: Option<String> = None;
            let blocks = v.get("content").and_then(Value::as_array);
            for block in blocks.into_iter().flatten() {
                let (key, into) = match block.get("type").and_then(Value::as_str) {
                    Some("text") => ("text", &mut text),
                    Some("thinking") => ("thinking", &mut reasoning),
                    _ => continue,
                };
                if let Some(t) = block.get(key).and_then(Value::as_str) {
                    into.get_or_insert_with(String::new).push_str(t);
                }
            }
            out.text = text.map(Cow::Owned);
            out.reasoning = reasoning.map(Cow::Owned);
            out.usage = v.get("usage").and_then(usage);
        }
        // ping, content_block_start/stop, and bodies of other shapes.
        _ => out.error = v.get("error").and_then(super::error_message),
    }
    Ok(out)
}

/// Usage sent in parts (`message_start` has the input, `message_delta` the output): each
/// field the newer object gives replaces the older one.
pub fn merge_usage(old: Option<Usage>, new: Usage) -> Usage {
    let Some(old) = old else { return new };
    Usage {
        prompt_tokens: new.prompt_tokens.or(old.prompt_tokens),
        completion_tokens: new.completion_tokens.or(old.completion_tokens),
        total_tokens: new.total_tokens.or(old.total_tokens),
        reasoning_tokens: new.reasoning_tokens.or(old.reasoning_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_events_and_usage_in_parts() {
        let start = parse_event(
            Some("message_start"),
            br#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
        )
        .unwrap();
        assert!(!start.has_content());
        let delta = parse_event(
            Some("content_block_delta"),
            br#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        )
        .unwrap();
        assert_eq!(delta.text.as_deref(), Some("Hi"));
        let thinking = parse_event(
            None,
            br#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
        )
        .unwrap();
        assert_eq!(thinking.reasoning.as_deref(), Some("hm"));
        let end = parse_event(
            Some("message_delta"),
            br#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        )
        .unwrap();
        let usage = merge_usage(start.usage.as_deref().copied(), *end.usage.unwrap());
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(25), Some(15))
        );
        assert!(
            parse_event(Some("message_stop"), br#"{"type":"message_stop"}"#)
                .unwrap()
                .end
        );
        assert_eq!(
            parse_event(Some("ping"), br#"{"type": "ping"}"#).unwrap(),
            ParsedEvent::default()
        );
        let err = parse_event(
            Some("error"),
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap();
        assert_eq!(err.error.as_deref(), Some("Overloaded"));
    }

    #[test]
    fn whole_message() {
        let e = parse_event(
            None,
            br#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":3}}"#,
        )
        .unwrap();
        assert_eq!(
            (e.text.as_deref(), e.reasoning.as_deref()),
            (Some("Hello"), Some("t"))
        );
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(10));
    }

    #[test]
    fn image_blocks() {
        assert_eq!(
            image_block("data:image/jpeg;base64,QUJD".into()),
            json!({"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"QUJD"}})
        );
        assert_eq!(
            image_block("https://x/y.png".into()),
            json!({"type":"image","source":{"type":"url","url":"https://x/y.png"}})
        );
    }
}
