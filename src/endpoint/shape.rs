//! How a response payload is read, per endpoint type. Text endpoints take the OpenAI
//! parser; embeddings and rankings count their results (nothing to tokenize); `raw` and
//! `template` find the text at `response_field`, or detect the shape, and take a body that
//! is not JSON as plain text.

use std::borrow::Cow;

use serde_json::Value;

use super::rankings::{self, RankingsApi};
use super::template::FieldPath;
use super::{
    ParsedEvent, StreamLead, embeddings, huggingface_generate, image_generation, image_retrieval,
    lenient, messages, parse_event, parse_event_after, responses, solido_rag,
};
use crate::record::Usage;

#[derive(Debug, Clone, Default, PartialEq)]
pub enum ResponseShape {
    /// Chat chunks, chat completions, text completions, `{"text"}`.
    #[default]
    OpenAi,
    Embeddings,
    Rankings(RankingsApi),
    Images,
    /// Auto-detected, or the value at the path when one is given.
    Auto(Option<FieldPath>),
    /// OpenAI Responses API events and bodies.
    Responses,
    /// Anthropic Messages API events and bodies.
    Messages,
    /// Hugging Face TGI: `token.text` per event, `generated_text` whole.
    HuggingfaceGenerate,
    /// NIM image retrieval: `data[]` counted.
    ImageRetrieval,
    /// SOLIDO RAG: `content`, whole or per event.
    SolidoRag,
}

impl ResponseShape {
    /// `parse` of a stream's next event: OpenAI chunks go on from the `lead` the stream's
    /// earlier ones left (`StreamLead`).
    pub fn parse_in_stream<'a>(
        &self,
        event: Option<&str>,
        data: &'a [u8],
        lead: &mut StreamLead,
    ) -> Result<ParsedEvent<'a>, serde_json::Error> {
        match self {
            ResponseShape::OpenAi => parse_event_after(data, lead),
            _ => self.parse(event, data),
        }
    }

    /// Parses one payload (an SSE event's name and `data:`, or a whole body with no name).
    /// Only invalid JSON is an error, and not for `Auto`, which reads it as text.
    pub fn parse<'a>(
        &self,
        event: Option<&str>,
        data: &'a [u8],
    ) -> Result<ParsedEvent<'a>, serde_json::Error> {
        match self {
            ResponseShape::OpenAi => parse_event(data),
            ResponseShape::Responses => responses::parse_event(event, data),
            ResponseShape::Messages => messages::parse_event(event, data),
            ResponseShape::Embeddings => {
                let v: Value = serde_json::from_slice(data)?;
                let mut out = metadata(&v);
                embeddings::parse(&v, &mut out);
                Ok(out)
            }
            ResponseShape::Rankings(api) => {
                let v: Value = serde_json::from_slice(data)?;
                let mut out = metadata(&v);
                rankings::parse(*api, &v, &mut out);
                Ok(out)
            }
            ResponseShape::Images => {
                let v: Value = serde_json::from_slice(data)?;
                let mut out = metadata(&v);
                image_generation::parse(&v, &mut out);
                Ok(out)
            }
            ResponseShape::Auto(field) => Ok(auto(data, field.as_ref())),
            ResponseShape::HuggingfaceGenerate => huggingface_generate::parse(data),
            ResponseShape::SolidoRag => solido_rag::parse(data),
            ResponseShape::ImageRetrieval => {
                let v: Value = serde_json::from_slice(data)?;
                let mut out = metadata(&v);
                image_retrieval::parse(&v, &mut out);
                Ok(out)
            }
        }
    }
}

impl ResponseShape {
    /// The event that closes a stream of an API whose events are all named and carry JSON
    /// (its `error` events too); `None` for OpenAI streams, which end with `[DONE]`.
    pub fn closing_event(&self) -> Option<&'static str> {
        match self {
            ResponseShape::Responses => Some("response.completed"),
            ResponseShape::Messages => Some("message_stop"),
            _ => None,
        }
    }

    /// What a complete stream ends with, for the error when it does not.
    pub fn stream_end(&self) -> &'static str {
        match self {
            ResponseShape::HuggingfaceGenerate => "final token (generated_text)",
            other => other.closing_event().unwrap_or("[DONE]"),
        }
    }

    /// True when closing the connection ends the stream (SOLIDO RAG documents no closing
    /// event): no `IncompleteStreamError` without `[DONE]`.
    pub fn ends_at_close(&self) -> bool {
        matches!(self, ResponseShape::SolidoRag)
    }

    /// A stream's usage so far after one more usage object: the Messages API sends it in
    /// parts (input at the start, output at the end); elsewhere the last object wins.
    pub fn merge_usage(&self, earlier: Option<Usage>, new: Usage) -> Usage {
        match self {
            ResponseShape::Messages => messages::merge_usage(earlier, new),
            _ => new,
        }
    }
}

/// The usage and error of a payload, without its text.
fn metadata(v: &Value) -> ParsedEvent<'static> {
    let mut out = lenient(v);
    out.text = None;
    out.reasoning = None;
    out
}

fn auto<'a>(data: &'a [u8], field: Option<&FieldPath>) -> ParsedEvent<'a> {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        // Not JSON: the body is the text.
        return ParsedEvent {
            text: Some(String::from_utf8_lossy(data)),
            ..ParsedEvent::default()
        };
    };
    if let Some(path) = field {
        let mut out = metadata(&v);
        match path.find(&v) {
            Some(Value::String(s)) => out.text = Some(Cow::Owned(s.clone())),
            Some(Value::Array(list)) if !list.is_empty() => out.items = list.len() as u64,
            Some(other) => {
                out.unexpected = Some(format!(
                    "response_field '{path}' is {other}, not a string or a list"
                ));
            }
            None => {
                out.unexpected = Some(format!("response_field '{path}' is not in the response"));
            }
        }
        return out;
    }
    if let Value::String(s) = v {
        return ParsedEvent {
            text: Some(Cow::Owned(s)),
            ..ParsedEvent::default()
        };
    }
    // OpenAI chat and completions shapes, and `{"text"}`.
    let mut out = lenient(&v);
    if out.has_content() {
        return out;
    }
    // Other common answer fields (TGI, Ollama-style servers, RAG services).
    let list_head = v.as_array().and_then(|l| l.first());
    for (at, key) in [
        (Some(&v), "generated_text"),
        (list_head, "generated_text"),
        (Some(&v), "output"),
        (Some(&v), "response"),
        (Some(&v), "content"),
        (Some(&v), "answer"),
    ] {
        if let Some(Value::String(s)) = at.and_then(|o| o.get(key)) {
            out.text = Some(Cow::Owned(s.clone()));
            return out;
        }
    }
    embeddings::parse(&v, &mut out);
    if out.items == 0 {
        for api in [RankingsApi::Nim, RankingsApi::HfTei] {
            rankings::parse(api, &v, &mut out);
            if out.items > 0 {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_detects_text_results_and_plain_bodies() {
        let auto = ResponseShape::Auto(None);
        let chat = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3}}"#;
        let e = auto.parse(None, chat).unwrap();
        assert_eq!(e.text.as_deref(), Some("hi"));
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(3));
        let e = auto.parse(None, br#"{"choices":[{"text":"t"}]}"#).unwrap();
        assert_eq!(e.text.as_deref(), Some("t"));
        assert_eq!(
            auto.parse(None, b"plain words").unwrap().text.as_deref(),
            Some("plain words")
        );
        let e = auto.parse(None, br#"[{"generated_text":"g"}]"#).unwrap();
        assert_eq!(e.text.as_deref(), Some("g"));
        let e = auto
            .parse(None, br#"{"data":[{"embedding":[1]}]}"#)
            .unwrap();
        assert_eq!((e.items, e.has_content()), (1, true));
        let e = auto.parse(None, br#"[{"index":0,"score":1}]"#).unwrap();
        assert_eq!(e.items, 1);
        assert!(!auto.parse(None, br#"{"nothing":1}"#).unwrap().has_content());
    }

    #[test]
    fn a_response_field_is_strict() {
        let shape = ResponseShape::Auto(Some(FieldPath::parse("out.text").unwrap()));
        let e = shape
            .parse(None, br#"{"out":{"text":"x"},"choices":[]}"#)
            .unwrap();
        assert_eq!(e.text.as_deref(), Some("x"));
        let e = shape.parse(None, br#"{"choices":[{"text":"t"}]}"#).unwrap();
        assert!(!e.has_content());
        assert!(e.unexpected.unwrap().contains("out.text"));
    }

    #[test]
    fn embeddings_and_rankings_keep_usage_not_text() {
        let e = ResponseShape::Embeddings
            .parse(
                None,
                br#"{"data":[{"embedding":[0.5]}],"usage":{"prompt_tokens":4,"total_tokens":4}}"#,
            )
            .unwrap();
        assert_eq!(e.items, 1);
        assert_eq!(e.text, None);
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(4));
        let e = ResponseShape::Rankings(RankingsApi::Cohere)
            .parse(None, br#"{"error":{"message":"no"}}"#)
            .unwrap();
        assert_eq!(e.error.as_deref(), Some("no"));
        assert!(ResponseShape::Embeddings.parse(None, b"nope").is_err());
    }
}
