//! OpenAI Responses API (`/v1/responses`) request bodies and response events.
//!
//! Body: `input` (message items whose content is `input_text`, `input_image` and
//! `input_audio` parts, or a plain string for a lone text), `model`, `stream`, the system
//! text as `instructions` and the output limit as `max_output_tokens`. Earlier turns of a
//! conversation go back in `input` (the full history; AIPerf chains with
//! `previous_response_id` only when the server stores responses).
//!
//! Streams are SSE events named by their `type`: text arrives in
//! `response.output_text.delta`, reasoning in `response.reasoning_text.delta` or
//! `response.reasoning_summary_text.delta`, usage in `response.completed`, which ends the
//! stream. A whole response is an `output` list of message items with `output_text` parts.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::{BodyOptions, ParsedEvent};
use crate::dataset::Entry;
use crate::record::Usage;

/// The message item of one turn.
pub fn message(entry: &mut Entry) -> Value {
    let content = super::messages::content(entry, |part| match part {
        super::messages::Part::Text(t) => json!({"type": "input_text", "text": t}),
        // The Responses API takes the URL as a plain string, not nested as in chat.
        super::messages::Part::Image(url) => json!({"type": "input_image", "image_url": url}),
        super::messages::Part::Audio(data, format) => {
            json!({"type": "input_audio", "input_audio": {"data": data, "format": format}})
        }
    });
    let role = entry.role.take().unwrap_or_else(|| "user".into());
    json!({"role": role, "content": content, "type": "message"})
}

/// Every field but `input`: model, stream, instructions and the output limit.
pub fn body_fields(entry: &Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(opts.model.clone()));
    body.insert("stream".into(), Value::Bool(opts.streaming));
    if let Some(s) = system {
        body.insert("instructions".into(), Value::String(s.to_string()));
    }
    if let Some(n) = entry.max_output_tokens {
        body.insert("max_output_tokens".into(), Value::from(n));
    }
    body
}

pub fn body(mut entry: Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("input".into(), Value::Array(vec![message(&mut entry)]));
    body.extend(body_fields(&entry, system, opts));
    body
}

/// A one-token request for the readiness probe.
pub fn probe_body(model: &str) -> Value {
    json!({"model": model, "input": "Hello", "max_output_tokens": 1})
}

/// Reads one SSE event or a whole body. The event's kind is its `type` field (the SSE
/// `event:` name says the same); unknown kinds carry nothing.
pub fn parse_event<'a>(
    event: Option<&str>,
    data: &'a [u8],
) -> Result<ParsedEvent<'a>, serde_json::Error> {
    let v: Value = serde_json::from_slice(data)?;
    let mut out = ParsedEvent::default();
    let kind = v.get("type").and_then(Value::as_str).or(event);
    let text = |key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(|s| Cow::Owned(s.to_string()))
    };
    match kind {
        Some("response.output_text.delta") => out.text = text("delta"),
        Some("response.reasoning_text.delta" | "response.reasoning_summary_text.delta") => {
            out.reasoning = text("delta")
        }
        Some("response.completed" | "response.incomplete") => {
            out.usage = v.pointer("/response/usage").and_then(usage);
            out.end = true;
        }
        Some("response.failed") => {
            out.error = Some(
                v.pointer("/response/error")
                    .and_then(super::error_message)
                    .unwrap_or_else(|| "the server reported response.failed".into()),
            );
            out.end = true;
        }
        Some("error") => {
            out.error = v
                .get("error")
                .and_then(super::error_message)
                .or_else(|| text("message").map(Cow::into_owned))
                .or_else(|| Some(v.to_string()));
        }
        Some(_) => {}
        // No type: a whole (non-streamed) response object, or an error body.
        None => {
            let (text, reasoning) = output_texts(&v);
            out.text = text.map(Cow::Owned);
            out.reasoning = reasoning.map(Cow::Owned);
            out.usage = v.get("usage").and_then(usage);
            out.error = v.get("error").and_then(super::error_message);
        }
    }
    Ok(out)
}

/// The `output_text` parts of the message items and the `summary_text` parts of the
/// reasoning items of a whole response, each joined.
fn output_texts(v: &Value) -> (Option<String>, Option<String>) {
    let mut text: Option<String> = None;
    let mut reasoning: Option<String> = None;
    let items = v.get("output").and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        let (parts, part_type, into) = match item.get("type").and_then(Value::as_str) {
            Some("message") => (item.get("content"), "output_text", &mut text),
            Some("reasoning") => (item.get("summary"), "summary_text", &mut reasoning),
            _ => continue,
        };
        for part in parts.and_then(Value::as_array).into_iter().flatten() {
            if part.get("type").and_then(Value::as_str) == Some(part_type)
                && let Some(t) = part.get("text").and_then(Value::as_str)
            {
                into.get_or_insert_with(String::new).push_str(t);
            }
        }
    }
    if text.is_none() {
        text = v
            .get("output_text")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    (text, reasoning)
}

/// `usage`: input, output and total tokens, and the reasoning share of the output.
fn usage(u: &Value) -> Option<Box<Usage>> {
    let count = |p: &str| u.pointer(p).and_then(super::messages::count);
    u.is_object().then(|| {
        Box::new(Usage {
            prompt_tokens: count("/input_tokens"),
            completion_tokens: count("/output_tokens"),
            total_tokens: count("/total_tokens"),
            reasoning_tokens: count("/output_tokens_details/reasoning_tokens"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_events() {
        let e = parse_event(
            Some("response.output_text.delta"),
            br#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":" the","sequence_number":4}"#,
        )
        .unwrap();
        assert_eq!(e.text.as_deref(), Some(" the"));
        assert!(e.has_content() && !e.end);
        let r = parse_event(
            None,
            br#"{"type":"response.reasoning_summary_text.delta","delta":"hm"}"#,
        )
        .unwrap();
        assert_eq!(r.reasoning.as_deref(), Some("hm"));
        let done = parse_event(
            Some("response.completed"),
            br#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":12,"output_tokens":5,"total_tokens":17,"output_tokens_details":{"reasoning_tokens":2}}}}"#,
        )
        .unwrap();
        assert!(done.end && !done.has_content());
        assert_eq!(
            done.usage.as_deref(),
            Some(&Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(5),
                total_tokens: Some(17),
                reasoning_tokens: Some(2)
            })
        );
        let created = parse_event(
            Some("response.created"),
            br#"{"type":"response.created","response":{"id":"resp_1","usage":null}}"#,
        )
        .unwrap();
        assert_eq!(created, ParsedEvent::default());
        let failed = parse_event(
            None,
            br#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}"#,
        )
        .unwrap();
        assert_eq!((failed.error.as_deref(), failed.end), (Some("boom"), true));
        let err = parse_event(
            Some("error"),
            br#"{"type":"error","code":"x","message":"bad","param":null}"#,
        )
        .unwrap();
        assert_eq!(err.error.as_deref(), Some("bad"));
        assert!(parse_event(None, b"{oops").is_err());
    }

    #[test]
    fn whole_response() {
        let e = parse_event(
            None,
            br#"{"id":"resp_1","object":"response","status":"completed","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"think"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a b","annotations":[]},{"type":"output_text","text":" c"}]}],"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}"#,
        )
        .unwrap();
        assert_eq!(e.text.as_deref(), Some("a b c"));
        assert_eq!(e.reasoning.as_deref(), Some("think"));
        assert_eq!(e.usage.unwrap().completion_tokens, Some(4));
        let err = parse_event(None, br#"{"error":{"message":"nope"}}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("nope"));
    }
}
