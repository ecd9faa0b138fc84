//! The chat-template overhead: prompt tokens a server adds around a chat request's messages
//! (role markers, a default system prompt, the assistant header). Image Token Count is the
//! server's prompt tokens minus the client's text tokens, so without subtracting this it
//! counts the template too.
//!
//! How it is known, chosen once before the run:
//! - `chat_template`: the tokenizer's directory has the model's chat template; it is rendered
//!   for each dataset entry's messages (image parts left out) and the overhead is the tokens
//!   of that text minus the entry's text tokens;
//! - `server_probe`: no template; the first request with images is sent once without its
//!   images and with a one-token limit, and the overhead is its `usage.prompt_tokens` minus
//!   its text tokens (see `profile::template_probe`);
//! - `none`: neither worked (or no request has images); Image Token Count includes it.
//!
//! Only first turns get an overhead: later turns carry a history whose messages (and so
//! template tokens) are only known during the run, and get no Image Token Count either.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::record::RequestInput;
use crate::tokenizer::Tokenizer;
use crate::tokenizer::chat_template::{
    ChatMessage, ChatTemplate, ChatTemplateError, MessageContent,
};

/// What the run subtracts from Image Token Count, and how it was found.
#[derive(Debug, Clone)]
pub enum TemplateOverhead {
    /// No request has images, so there is no Image Token Count to correct.
    NoImages,
    /// Not measured: Image Token Count includes the template's tokens.
    Unmeasured { reason: String },
    /// Rendered from the model's chat template, per dataset entry (by conversation id).
    ChatTemplate {
        source: String,
        by_conversation: HashMap<String, i64>,
    },
    /// Measured once with a text-only request to the server.
    ServerProbe { tokens: i64 },
}

impl Default for TemplateOverhead {
    fn default() -> Self {
        TemplateOverhead::Unmeasured {
            reason: "not measured".into(),
        }
    }
}

/// Why the chat template could not give an overhead.
#[derive(Debug, thiserror::Error)]
pub enum OverheadError {
    #[error("the request of conversation {conversation} has no readable messages: {source}")]
    Body {
        conversation: String,
        source: serde_json::Error,
    },
    #[error("conversation {conversation}: {source}")]
    Render {
        conversation: String,
        source: ChatTemplateError,
    },
}

/// One dataset entry's first request, as far as the overhead needs it.
pub struct EntryRequest<'a> {
    pub conversation_id: &'a str,
    pub body: &'a [u8],
    /// The client's text tokens of this request (its ISL).
    pub input_tokens: u64,
}

impl TemplateOverhead {
    /// `chat_template` / `server_probe` / `none`, as exported.
    pub fn method(&self) -> &'static str {
        match self {
            TemplateOverhead::NoImages | TemplateOverhead::Unmeasured { .. } => "none",
            TemplateOverhead::ChatTemplate { .. } => "chat_template",
            TemplateOverhead::ServerProbe { .. } => "server_probe",
        }
    }

    /// Renders `template` for each entry's messages and counts what it adds to the text.
    pub fn from_chat_template<'a>(
        template: &ChatTemplate,
        tokenizer: &Tokenizer,
        entries: impl IntoIterator<Item = EntryRequest<'a>>,
    ) -> Result<TemplateOverhead, OverheadError> {
        let mut by_conversation = HashMap::new();
        for e in entries {
            let conversation = e.conversation_id.to_string();
            let messages = text_only_messages(e.body).map_err(|source| OverheadError::Body {
                conversation: conversation.clone(),
                source,
            })?;
            let prompt = template
                .render(&messages)
                .map_err(|source| OverheadError::Render {
                    conversation: conversation.clone(),
                    source,
                })?;
            let overhead = tokenizer.count(&prompt) as i64 - e.input_tokens as i64;
            by_conversation.insert(conversation, overhead);
        }
        Ok(TemplateOverhead::ChatTemplate {
            source: template.source().display().to_string(),
            by_conversation,
        })
    }

    /// Tokens to subtract from this request's Image Token Count; `None` when unknown.
    pub fn for_record(&self, input: &RequestInput) -> Option<i64> {
        if input.turn_index != 0 {
            return None;
        }
        match self {
            TemplateOverhead::NoImages | TemplateOverhead::Unmeasured { .. } => None,
            TemplateOverhead::ChatTemplate {
                by_conversation, ..
            } => by_conversation.get(&input.conversation_id).copied(),
            TemplateOverhead::ServerProbe { tokens } => Some(*tokens),
        }
    }

    /// Smallest and largest overhead over the entries.
    fn range(&self) -> Option<(i64, i64)> {
        match self {
            TemplateOverhead::NoImages | TemplateOverhead::Unmeasured { .. } => None,
            TemplateOverhead::ChatTemplate {
                by_conversation, ..
            } => {
                let min = by_conversation.values().min()?;
                let max = by_conversation.values().max()?;
                Some((*min, *max))
            }
            TemplateOverhead::ServerProbe { tokens } => Some((*tokens, *tokens)),
        }
    }

    /// One line for the log at the start of the run; none for a run without images.
    pub fn describe(&self) -> Option<String> {
        let tokens = match self.range() {
            Some((min, max)) if min == max => format!("{min} tokens per request"),
            Some((min, max)) => format!("{min} to {max} tokens per request"),
            None => String::new(),
        };
        Some(match self {
            TemplateOverhead::NoImages => return None,
            TemplateOverhead::Unmeasured { reason } => format!(
                "Image Token Count: chat-template overhead not measured ({reason}); it includes the template's tokens"
            ),
            TemplateOverhead::ChatTemplate { source, .. } => format!(
                "Image Token Count: subtracting the chat template's overhead, {tokens} (rendered from {source})"
            ),
            TemplateOverhead::ServerProbe { .. } => format!(
                "Image Token Count: subtracting the chat template's overhead, {tokens} (measured with a text-only probe request to the server)"
            ),
        })
    }

    /// The `chat_template_overhead` object of the JSON export.
    pub fn to_json(&self) -> Value {
        let mut out = json!({"method": self.method()});
        if let Some((min, max)) = self.range() {
            out["tokens"] = json!({"min": min, "max": max});
        }
        match self {
            TemplateOverhead::NoImages => out["reason"] = json!("no request has images"),
            TemplateOverhead::Unmeasured { reason } => out["reason"] = json!(reason),
            TemplateOverhead::ChatTemplate { source, .. } => out["source"] = json!(source),
            TemplateOverhead::ServerProbe { .. } => {}
        }
        out
    }
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    messages: Vec<Message<'a>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    role: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(#[serde(borrow)] std::borrow::Cow<'a, str>),
    Parts(#[serde(borrow)] Vec<Part<'a>>),
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
}

/// A chat body's messages with only their text: what the template renders apart from the
/// images, whose tokens (markers included) are what Image Token Count is meant to show.
/// One text part becomes plain string content, which every template accepts.
pub fn text_only_messages(body: &[u8]) -> Result<Vec<ChatMessage>, serde_json::Error> {
    let body: Body<'_> = serde_json::from_slice(body)?;
    Ok(body
        .messages
        .into_iter()
        .map(|m| {
            let content = match m.content {
                None => MessageContent::Text(String::new()),
                Some(Content::Text(t)) => MessageContent::Text(t.into_owned()),
                Some(Content::Parts(parts)) => {
                    let mut texts: Vec<String> = parts
                        .into_iter()
                        .filter(|p| p.kind == "text")
                        .filter_map(|p| p.text.map(|t| t.into_owned()))
                        .collect();
                    match texts.len() {
                        0 => MessageContent::Text(String::new()),
                        1 => MessageContent::Text(texts.remove(0)),
                        _ => MessageContent::TextParts(texts),
                    }
                }
            };
            ChatMessage {
                role: m.role.into_owned(),
                content,
            }
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::Path;

    /// The GPT-2 fixture tokenizer with the ChatML markers as special tokens, and the
    /// Qwen2-VL-style template beside it.
    pub(crate) fn chatml_tokenizer_dir() -> tempfile::TempDir {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let dir = tempfile::tempdir().unwrap();
        let mut t = tokenizers::Tokenizer::from_file(fixtures.join("gpt2/tokenizer.json")).unwrap();
        t.add_special_tokens([
            tokenizers::AddedToken::from("<|im_start|>", true),
            tokenizers::AddedToken::from("<|im_end|>", true),
        ])
        .unwrap();
        t.save(dir.path().join("tokenizer.json"), false).unwrap();
        std::fs::copy(
            fixtures.join("qwen2-vl/tokenizer_config.json"),
            dir.path().join("tokenizer_config.json"),
        )
        .unwrap();
        dir
    }

    const PNG_URL: &str = "data:image/png;base64,iVBORw0KGgo=";

    pub(crate) fn body_with_image(text: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "model": "m",
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
            ]}],
            "max_completion_tokens": 10,
        }))
        .unwrap()
    }

    #[test]
    fn images_are_dropped_and_one_text_part_becomes_a_string() {
        let messages = text_only_messages(&body_with_image("Describe it.")).unwrap();
        assert_eq!(
            messages,
            vec![ChatMessage {
                role: "user".into(),
                content: MessageContent::Text("Describe it.".into()),
            }]
        );
        let body = json!({"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": PNG_URL}}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG_URL}}]},
        ]});
        let messages = text_only_messages(&serde_json::to_vec(&body).unwrap()).unwrap();
        let contents: Vec<_> = messages.into_iter().map(|m| m.content).collect();
        assert_eq!(
            contents,
            vec![
                MessageContent::Text("Be brief.".into()),
                MessageContent::TextParts(vec!["a".into(), "b".into()]),
                MessageContent::Text(String::new()),
                MessageContent::Text(String::new()),
            ]
        );
    }

    #[test]
    fn qwen2_vl_template_overhead_per_entry() {
        let dir = chatml_tokenizer_dir();
        let tokenizer = Tokenizer::from_file(dir.path()).unwrap();
        let template = tokenizer.chat_template().unwrap().unwrap();
        let text = "What is in this picture?";
        let isl = tokenizer.count(text) as u64;
        assert_eq!(isl, 6);
        let body = body_with_image(text);
        let overhead = TemplateOverhead::from_chat_template(
            &template,
            &tokenizer,
            [EntryRequest {
                conversation_id: "c0",
                body: &body,
                input_tokens: isl,
            }],
        )
        .unwrap();
        // <|im_start|> system \n You are a helpful assistant . <|im_end|> \n = 11,
        // <|im_start|> user \n … <|im_end|> \n = 5, and <|im_start|> ass istant \n = 4
        // (GPT-2 has no token for "assistant" without a leading space).
        let input = RequestInput {
            conversation_id: "c0".into(),
            ..Default::default()
        };
        assert_eq!(overhead.for_record(&input), Some(11 + 5 + 4));
        assert_eq!(overhead.method(), "chat_template");
        let exported = overhead.to_json();
        assert_eq!(exported["tokens"], json!({"min": 20, "max": 20}));
        assert!(
            exported["source"]
                .as_str()
                .unwrap()
                .ends_with("tokenizer_config.json")
        );
        let line = overhead.describe().unwrap();
        assert!(line.contains("20 tokens per request"), "{line}");

        // Later turns and unknown conversations get nothing subtracted.
        let later = RequestInput {
            turn_index: 1,
            ..input.clone()
        };
        assert_eq!(overhead.for_record(&later), None);
        let other = RequestInput {
            conversation_id: "c9".into(),
            ..input
        };
        assert_eq!(overhead.for_record(&other), None);
    }

    #[test]
    fn probe_and_unmeasured_records() {
        let input = RequestInput::default();
        let probe = TemplateOverhead::ServerProbe { tokens: 8 };
        assert_eq!(probe.for_record(&input), Some(8));
        assert_eq!(
            probe.to_json(),
            json!({"method": "server_probe", "tokens": {"min": 8, "max": 8}})
        );
        let none = TemplateOverhead::Unmeasured {
            reason: "HTTP 500".into(),
        };
        assert_eq!(none.for_record(&input), None);
        assert_eq!(
            none.to_json(),
            json!({"method": "none", "reason": "HTTP 500"})
        );
        assert!(none.describe().unwrap().contains("not measured (HTTP 500)"));
        assert_eq!(TemplateOverhead::NoImages.describe(), None);
        assert_eq!(TemplateOverhead::NoImages.for_record(&input), None);
    }

    #[test]
    fn unreadable_bodies_are_errors() {
        let dir = chatml_tokenizer_dir();
        let tokenizer = Tokenizer::from_file(dir.path()).unwrap();
        let template = tokenizer.chat_template().unwrap().unwrap();
        let err = TemplateOverhead::from_chat_template(
            &template,
            &tokenizer,
            [EntryRequest {
                conversation_id: "c0",
                body: br#"{"prompt": "completions have no messages"}"#,
                input_tokens: 3,
            }],
        )
        .unwrap_err();
        assert!(matches!(err, OverheadError::Body { .. }), "{err}");
        assert!(err.to_string().contains("conversation c0"), "{err}");
    }
}
