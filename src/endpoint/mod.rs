//! API shapes: request bodies out (built before the run), parsed response events in.
//!
//! One file per request shape; the OpenAI response shapes (chat chunks, chat completions,
//! text completions) share one parser since they differ only in where the text sits.

pub mod chat;
pub mod completions;

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::cli::EndpointType;
use crate::dataset::Entry;
use crate::record::Usage;

/// A request ready to send: the exact body bytes plus what the record needs to know.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    pub body: Bytes,
    pub input_tokens: u64,
    pub num_images: u32,
    pub requested_output_tokens: Option<u64>,
}

/// Body settings shared by every request of a run.
#[derive(Debug, Clone)]
pub struct BodyOptions {
    pub model: String,
    pub streaming: bool,
    pub use_legacy_max_tokens: bool,
    /// Merged at top level last, so they override anything above.
    pub extra_inputs: Map<String, Value>,
}

/// Serializes one body per entry, consuming the entries (the image data moves into the body).
pub fn prepare(
    endpoint: EndpointType,
    entries: Vec<Entry>,
    opts: &BodyOptions,
) -> Vec<PreparedRequest> {
    entries
        .into_iter()
        .map(|entry| {
            let input_tokens = entry.input_tokens;
            let num_images = entry.images.len() as u32;
            let requested_output_tokens = entry.max_output_tokens;
            let mut body = match endpoint {
                EndpointType::Chat => chat::body(entry, opts),
                EndpointType::Completions => completions::body(entry, opts),
            };
            for (k, v) in &opts.extra_inputs {
                body.insert(k.clone(), v.clone());
            }
            let bytes = serde_json::to_vec(&body).expect("a JSON map always serializes");
            PreparedRequest {
                body: Bytes::from(bytes),
                input_tokens,
                num_images,
                requested_output_tokens,
            }
        })
        .collect()
}

/// `stream`, `stream_options` and the token limit, common to both shapes.
fn common_fields(
    body: &mut Map<String, Value>,
    opts: &BodyOptions,
    max_tokens_key: &str,
    max: Option<u64>,
) {
    body.insert("model".into(), Value::String(opts.model.clone()));
    body.insert("stream".into(), Value::Bool(opts.streaming));
    if opts.streaming {
        let mut so = Map::new();
        so.insert("include_usage".into(), Value::Bool(true));
        body.insert("stream_options".into(), Value::Object(so));
    }
    if let Some(n) = max {
        body.insert(max_tokens_key.into(), Value::from(n));
    }
}

/// What one response event (an SSE `data:` payload, or a whole non-streamed body) carried.
#[derive(Debug, Default, PartialEq)]
pub struct ParsedEvent<'a> {
    pub text: Option<Cow<'a, str>>,
    pub reasoning: Option<Cow<'a, str>>,
    pub usage: Option<Usage>,
    /// An error object sent inside the stream (`{"error": {...}}`).
    pub error: Option<String>,
}

impl ParsedEvent<'_> {
    /// True when the event carries text or reasoning (a token-bearing event).
    pub fn has_content(&self) -> bool {
        self.text.as_deref().is_some_and(|t| !t.is_empty())
            || self.reasoning.as_deref().is_some_and(|t| !t.is_empty())
    }
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(default, borrow)]
    choices: Vec<WireChoice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    message: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    completion_tokens_details: Option<WireCompletionDetails>,
}

#[derive(Deserialize)]
struct WireCompletionDetails {
    reasoning_tokens: Option<u64>,
}

/// Parses one OpenAI response payload. Only the fields the metrics need are read.
pub fn parse_event(data: &[u8]) -> Result<ParsedEvent<'_>, serde_json::Error> {
    let wire: WireEvent<'_> = serde_json::from_slice(data)?;
    let mut out = ParsedEvent::default();
    if let Some(choice) = wire.choices.into_iter().next() {
        let msg = choice.delta.or(choice.message);
        if let Some(m) = msg {
            out.text = m.content;
            out.reasoning = m.reasoning_content.or(m.reasoning);
        }
        if out.text.is_none() {
            out.text = choice.text;
        }
    }
    out.usage = wire.usage.map(|u| Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
        reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
    });
    out.error = wire.error.filter(|e| !e.is_null()).map(|e| match &e {
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_chunk_with_content() {
        let e = parse_event(br#"{"id":"x","choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}]}"#).unwrap();
        assert_eq!(e.text.as_deref(), Some(" the"));
        assert!(e.has_content());
        assert_eq!(e.usage, None);
    }

    #[test]
    fn role_only_and_usage_only_chunks_have_no_content() {
        let role =
            parse_event(br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert!(!role.has_content());
        let usage = parse_event(
            br#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"completion_tokens_details":{"reasoning_tokens":1}}}"#,
        )
        .unwrap();
        assert!(!usage.has_content());
        assert_eq!(
            usage.usage,
            Some(Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(3),
                total_tokens: Some(13),
                reasoning_tokens: Some(1)
            })
        );
    }

    #[test]
    fn reasoning_escapes_completions_and_errors() {
        let r =
            parse_event(br#"{"choices":[{"delta":{"reasoning_content":"hm\n\"q\""}}]}"#).unwrap();
        assert_eq!(r.reasoning.as_deref(), Some("hm\n\"q\""));
        assert!(r.has_content());
        let c = parse_event(br#"{"choices":[{"text":"abc","index":0}]}"#).unwrap();
        assert_eq!(c.text.as_deref(), Some("abc"));
        let m = parse_event(br#"{"choices":[{"message":{"role":"assistant","content":"full"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#).unwrap();
        assert_eq!(m.text.as_deref(), Some("full"));
        let err = parse_event(br#"{"error":{"message":"boom","code":500}}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("boom"));
        assert!(parse_event(b"{not json").is_err());
    }
}
