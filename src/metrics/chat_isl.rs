//! `--apply-chat-template`: a chat request's input sequence length counted as the server's
//! prompt has it, from the body as sent. Its `messages` (or the Responses API's `input`
//! items) with their text parts joined are rendered through the tokenizer's chat template
//! with the assistant prompt at the end, and the rendered text's tokens are the ISL
//! (AIPerf's `apply_chat_template(tokenize=True, add_generation_prompt=True)`). Images,
//! audio and video parts are left out, as AIPerf leaves them out. A body without such
//! messages, or one the template fails on, keeps the plain text count.
//!
//! Runs on the collector's thread, after the request: later turns carry replies known only
//! then.

use std::sync::Arc;

use serde_json::Value;

use crate::tokenizer::Tokenizer;
use crate::tokenizer::chat_template::{ChatMessage, ChatTemplate, MessageContent};

/// The chat template ISL is counted with.
#[derive(Debug, Clone)]
pub struct ChatIsl {
    template: Arc<ChatTemplate>,
}

impl ChatIsl {
    pub fn new(template: Arc<ChatTemplate>) -> ChatIsl {
        ChatIsl { template }
    }

    /// Tokens of `body`'s messages through the template; `None` when the body has none or
    /// the template refuses them.
    pub fn count(&self, body: &[u8], tokenizer: &Tokenizer) -> Option<u64> {
        let messages = chat_messages(body)?;
        let text = self.template.render(&messages).ok()?;
        Some(tokenizer.count(&text) as u64)
    }
}

/// Text part types of the chat, Responses and Messages APIs.
const TEXT_PARTS: [&str; 3] = ["text", "input_text", "output_text"];

/// The role/content view of a body's `messages` or `input` items: each item with a string
/// role, its text parts joined (templates expect string content).
fn chat_messages(body: &[u8]) -> Option<Vec<ChatMessage>> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let mut out = Vec::new();
    for field in ["messages", "input"] {
        let Some(items) = body.get(field).and_then(Value::as_array) else {
            continue;
        };
        for item in items {
            let Some(role) = item.get("role").and_then(Value::as_str) else {
                continue;
            };
            let text = match item.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter(|p| {
                        p.get("type")
                            .and_then(Value::as_str)
                            .is_some_and(|t| TEXT_PARTS.contains(&t))
                    })
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
                _ => String::new(),
            };
            out.push(ChatMessage {
                role: role.to_string(),
                content: MessageContent::Text(text),
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::template_overhead::tests::chatml_tokenizer_dir;
    use serde_json::json;

    #[test]
    fn a_chat_body_is_counted_through_the_template_by_hand() {
        let dir = chatml_tokenizer_dir();
        let tok = Tokenizer::from_file(dir.path()).unwrap();
        let isl = ChatIsl::new(Arc::new(tok.chat_template().unwrap().unwrap()));
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Hello"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": " world"},
            ]},
            {"role": "assistant", "content": "Hi"},
            {"role": "user", "content": "Bye"},
        ]});
        // Default system message 11, then `<|im_start|> user \n Hello  world <|im_end|> \n`
        // 7, `<|im_start|> ass istant \n Hi <|im_end|> \n` 7,
        // `<|im_start|> user \n B ye <|im_end|> \n` 7, assistant prompt 4.
        assert_eq!(
            [tok.count("Hello world"), tok.count("Hi"), tok.count("Bye")],
            [2, 1, 2]
        );
        assert_eq!(
            isl.count(&serde_json::to_vec(&body).unwrap(), &tok),
            Some(11 + 7 + 7 + 7 + 4)
        );
        // No messages (a completions body) or no JSON: no templated count.
        assert_eq!(isl.count(br#"{"prompt": "Hello"}"#, &tok), None);
        assert_eq!(isl.count(b"--boundary", &tok), None);
        // The Responses API's input items.
        let body = json!({"input": [{"role": "user", "content": [{"type": "input_text", "text": "Bye"}]}]});
        assert_eq!(
            isl.count(&serde_json::to_vec(&body).unwrap(), &tok),
            Some(11 + 7 + 4)
        );
    }
}
