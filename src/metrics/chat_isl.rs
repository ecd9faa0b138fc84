//! `--apply-chat-template`: a chat request's input sequence length counted as the server's
//! prompt has it, from the body as sent. Its `messages` (or the Responses API's `input`
//! items) with their text parts joined, and a replayed assistant turn's `tool_calls`, are
//! rendered through the tokenizer's chat template with the assistant prompt at the end
//! (AIPerf's `apply_chat_template(tokenize=True, add_generation_prompt=True)`); the text of
//! the `tools` schemas and of Responses function-call items, which that view leaves out, is
//! counted on top, as AIPerf counts it. Images, audio and video parts are left out, as AIPerf
//! leaves them out. A body without such messages, or one the template fails on, keeps the
//! plain text count.
//!
//! Runs on the collector's thread, after the request: later turns carry replies known only
//! then.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::tokenizer::Tokenizer;
use crate::tokenizer::chat_template::ChatTemplate;

/// The chat template ISL is counted with.
#[derive(Debug, Clone)]
pub struct ChatIsl {
    template: Arc<ChatTemplate>,
}

impl ChatIsl {
    pub fn new(template: Arc<ChatTemplate>) -> ChatIsl {
        ChatIsl { template }
    }

    /// Tokens of `body`'s messages through the template, plus its tool text; `None` when
    /// the body has no messages or the template refuses them.
    pub fn count(&self, body: &[u8], tokenizer: &Tokenizer) -> Option<u64> {
        let body: Value = serde_json::from_slice(body).ok()?;
        let (messages, tool_texts) = chat_view(&body)?;
        let text = self.template.render_json(&messages).ok()?;
        let tools = match tool_texts.is_empty() {
            true => 0,
            false => tokenizer.count(&tool_texts.join(" ")),
        };
        Some((tokenizer.count(&text) + tools) as u64)
    }
}

/// Text part types of the chat, Responses and Messages APIs.
const TEXT_PARTS: [&str; 3] = ["text", "input_text", "output_text"];

/// The role/content view of a body's `messages` or `input` items (each item with a string
/// role, its text parts joined as templates expect string content, its `tool_calls` kept),
/// and the tool text outside it. `None` when there are no such items.
fn chat_view(body: &Value) -> Option<(Vec<Value>, Vec<String>)> {
    let mut messages = Vec::new();
    let mut tool_texts = Vec::new();
    for field in ["messages", "input"] {
        let Some(items) = body.get(field).and_then(Value::as_array) else {
            continue;
        };
        for item in items {
            let Some(role) = item.get("role").and_then(Value::as_str) else {
                function_call_texts(item, &mut tool_texts);
                continue;
            };
            let text: String = match item.get("content") {
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
            let mut message = json!({"role": role, "content": text});
            if let Some(calls) = item
                .get("tool_calls")
                .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
            {
                message["tool_calls"] = calls.clone();
            }
            messages.push(message);
        }
    }
    if messages.is_empty() {
        return None;
    }
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = tool.get("function").and_then(Value::as_object);
        for source in function.into_iter().chain(tool.as_object()) {
            schema_texts(source, &mut tool_texts);
        }
    }
    Some((messages, tool_texts))
}

/// A tool schema's `name`, `description` and serialized `parameters`.
fn schema_texts(source: &Map<String, Value>, out: &mut Vec<String>) {
    for key in ["name", "description"] {
        if let Some(s) = source
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            out.push(s.to_string());
        }
    }
    if let Some(p) = source.get("parameters").filter(|p| p.is_object()) {
        out.push(p.to_string());
    }
}

/// A Responses `function_call` item's name and arguments, a `function_call_output`'s output.
fn function_call_texts(item: &Value, out: &mut Vec<String>) {
    let keys: &[&str] = match item.get("type").and_then(Value::as_str) {
        Some("function_call") => &["name", "arguments"],
        Some("function_call_output") => &["output"],
        _ => &[],
    };
    for key in keys {
        if let Some(s) = item
            .get(*key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            out.push(s.to_string());
        }
    }
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
        // Tool schemas are counted on top; an assistant turn's tool_calls go to the
        // template (this one does not render them).
        let with_tools = json!({"messages": [
            {"role": "user", "content": "Bye"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get", "arguments": "{}"}}]},
        ], "tools": [{"type": "function", "function": {"name": "get", "description": "Get it"}}]});
        assert_eq!(
            isl.count(&serde_json::to_vec(&with_tools).unwrap(), &tok),
            Some(11 + 7 + 6 + 4 + tok.count("get Get it") as u64)
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
