//! Response bytes in vLLM's shapes: SSE chunks written by a small formatter (the words and ids
//! need no escaping; the model name is escaped once per request), whole JSON bodies and error
//! bodies through serde_json.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;

use super::request::FinishReason;
use super::words;

/// Which OpenAI API shape is being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completions,
    /// OpenAI Responses API (see `mock::responses`).
    Responses,
    /// Anthropic Messages API (see `mock::messages`).
    Messages,
    /// Hugging Face TGI, whole and streamed (see `mock::tgi`).
    Generate,
    GenerateStream,
    /// SOLIDO RAG (see `mock::solido`).
    Solido,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Generate => "generate",
            Api::GenerateStream => "generate_stream",
            Api::Solido => "solido_rag",
        }
    }
}

pub const DONE_EVENT: &[u8] = b"data: [DONE]\n\n";

/// Per-request identity stamped on every chunk.
#[derive(Debug, Clone)]
pub struct ResponseHeader {
    pub api: Api,
    /// "chatcmpl-<hex>" or "cmpl-<hex>".
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
}

impl ResponseHeader {
    fn object(&self, streaming: bool) -> &'static str {
        match (self.api, streaming) {
            (Api::Chat, true) => "chat.completion.chunk",
            (Api::Chat, false) => "chat.completion",
            (Api::Completions, _) => "text_completion",
            (Api::Responses, _) => "response",
            (Api::Messages, _) => "message",
            (Api::Generate | Api::GenerateStream | Api::Solido, _) => "",
        }
    }

    /// `{"id":..,"object":..,"created":..,"model":..,"choices":[` for a streamed chunk.
    fn chunk_start(&self) -> Vec<u8> {
        let model = serde_json::to_string(&self.model).expect("a string always serializes");
        format!(
            "data: {{\"id\":\"{}\",\"object\":\"{}\",\"created\":{},\"model\":{model},\"choices\":[",
            self.id,
            self.object(true),
            self.created
        )
        .into_bytes()
    }
}

/// Token usage as reported in `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageCounts {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the prefix cache (`--prefix-cache-blocks`), reported as
    /// `prompt_tokens_details.cached_tokens`; None when the cache is off.
    pub cached_tokens: Option<u64>,
}

impl UsageCounts {
    fn to_json(self) -> serde_json::Value {
        let mut usage = json!({
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "completion_tokens": self.completion_tokens,
        });
        if let Some(cached) = self.cached_tokens {
            usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
        }
        usage
    }
}

/// Writes the SSE chunks of one streamed response. Everything that does not change from token
/// to token is formatted once, up front.
#[derive(Debug, Clone)]
pub struct ChunkWriter {
    /// `data: {"id":...,"choices":[{"index":0,"delta":{"content":"` (or `"text":"`).
    token_prefix: Bytes,
    /// Closes a token chunk that is not the last.
    token_suffix: &'static [u8],
    /// Closes the last token chunk, carrying the finish reason as vLLM does.
    last_token_suffix: Bytes,
    chunk_start: Bytes,
    api: Api,
    /// The opening events of the Responses and Messages APIs, sent before the first token.
    lead: Option<Bytes>,
    /// Responses API: token `i`'s event carries `"sequence_number": sequence_from + i`.
    sequence_from: Option<u64>,
}

impl ChunkWriter {
    pub fn new(header: &ResponseHeader, finish: FinishReason) -> Self {
        debug_assert!(
            matches!(header.api, Api::Chat | Api::Completions),
            "the other APIs' writers are in their own modules"
        );
        let chunk_start = Bytes::from(header.chunk_start());
        let mut prefix = chunk_start.to_vec();
        let chat = header.api == Api::Chat;
        prefix.extend_from_slice(if chat {
            b"{\"index\":0,\"delta\":{\"content\":\""
        } else {
            b"{\"index\":0,\"text\":\""
        });
        let token_suffix: &'static [u8] = if chat {
            b"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n"
        } else {
            b"\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}\n\n"
        };
        let close = if chat { "\"}" } else { "\"" };
        let last_token_suffix = format!(
            "{close},\"logprobs\":null,\"finish_reason\":\"{}\",\"stop_reason\":null}}]}}\n\n",
            finish.as_str()
        );
        ChunkWriter {
            token_prefix: Bytes::from(prefix),
            token_suffix,
            last_token_suffix: Bytes::from(last_token_suffix),
            chunk_start,
            api: header.api,
            lead: None,
            sequence_from: None,
        }
    }

    /// A writer whose token events are `token_prefix`, the word, then `token_suffix` (or,
    /// with `sequence_from`, `","sequence_number":N}` and a blank line), after `lead`.
    pub(super) fn events(
        api: Api,
        lead: Bytes,
        token_prefix: Bytes,
        token_suffix: &'static [u8],
        sequence_from: Option<u64>,
    ) -> Self {
        ChunkWriter {
            token_prefix,
            token_suffix,
            last_token_suffix: Bytes::from_static(token_suffix),
            chunk_start: Bytes::new(),
            api,
            lead: Some(lead),
            sequence_from,
        }
    }

    /// The last token's event closes with `suffix` instead (TGI's carries the whole text).
    pub(super) fn with_last_suffix(mut self, suffix: Bytes) -> Self {
        self.last_token_suffix = suffix;
        self
    }

    /// The assistant-role chunk that opens a chat stream, or the opening events of the
    /// Responses and Messages APIs (`None` for completions, TGI and SOLIDO).
    pub fn role_chunk(&self) -> Option<Bytes> {
        if let Some(lead) = &self.lead {
            return (!lead.is_empty()).then(|| lead.clone());
        }
        (self.api == Api::Chat).then(|| {
            let mut b = self.chunk_start.to_vec();
            b.extend_from_slice(
                b"{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
            );
            Bytes::from(b)
        })
    }

    /// The chunk carrying output token `i`; the last one also carries the finish reason.
    pub fn token_chunk(&self, i: u64, last: bool) -> Bytes {
        let word = words::word(i).as_bytes();
        let suffix: &[u8] = if last {
            &self.last_token_suffix
        } else {
            self.token_suffix
        };
        let mut b = BytesMut::with_capacity(self.token_prefix.len() + word.len() + suffix.len());
        b.put_slice(&self.token_prefix);
        b.put_slice(word);
        match self.sequence_from {
            Some(from) => {
                b.put_slice(format!("\",\"sequence_number\":{}}}\n\n", from + i).as_bytes())
            }
            None => b.put_slice(suffix),
        }
        b.freeze()
    }

    /// What follows the last token: the usage-only chunk (if asked for) and `data: [DONE]`.
    pub fn tail(&self, usage: Option<UsageCounts>) -> Bytes {
        let mut b = Vec::new();
        if let Some(u) = usage {
            b.extend_from_slice(&self.chunk_start);
            b.extend_from_slice(b"],\"usage\":");
            b.extend_from_slice(u.to_json().to_string().as_bytes());
            b.extend_from_slice(b"}\n\n");
        }
        b.extend_from_slice(DONE_EVENT);
        Bytes::from(b)
    }
}

/// A whole (non-streamed) response body with `tokens` output tokens.
pub fn full_body(
    header: &ResponseHeader,
    tokens: u64,
    finish: FinishReason,
    usage: UsageCounts,
) -> Bytes {
    let text = words::text(tokens);
    let choice = match header.api {
        Api::Responses => return super::responses::full_body(header, tokens, usage),
        Api::Messages => return super::messages::full_body(header, tokens, finish, usage),
        Api::Generate | Api::GenerateStream => return super::tgi::full_body(tokens),
        Api::Solido => return super::solido::full_body(tokens),
        Api::Chat => json!({
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": null,
            "finish_reason": finish.as_str(),
            "stop_reason": null,
        }),
        Api::Completions => json!({
            "index": 0,
            "text": text,
            "logprobs": null,
            "finish_reason": finish.as_str(),
            "stop_reason": null,
        }),
    };
    let body = json!({
        "id": header.id,
        "object": header.object(false),
        "created": header.created,
        "model": header.model,
        "choices": [choice],
        "usage": usage.to_json(),
    });
    Bytes::from(body.to_string())
}

/// vLLM's error body: `{"error":{"message":..,"type":..,"param":null,"code":<status>}}`.
pub fn error_body(status: u16, kind: &str, message: &str) -> Bytes {
    let body = json!({
        "error": {"message": message, "type": kind, "param": null, "code": status}
    });
    Bytes::from(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn header(api: Api) -> ResponseHeader {
        ResponseHeader {
            api,
            id: "chatcmpl-abc".into(),
            created: 1700000000,
            model: "m\"odel".into(),
        }
    }

    fn event_json(b: &[u8]) -> Value {
        let s = std::str::from_utf8(b).unwrap();
        let payload = s
            .strip_prefix("data: ")
            .unwrap()
            .strip_suffix("\n\n")
            .unwrap();
        serde_json::from_str(payload).unwrap()
    }

    #[test]
    fn chat_chunks_have_vllm_shape() {
        let w = ChunkWriter::new(&header(Api::Chat), FinishReason::Length);
        let role = event_json(&w.role_chunk().unwrap());
        assert_eq!(
            role,
            json!({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,
                   "model":"m\"odel","choices":[{"index":0,"delta":{"role":"assistant","content":""},
                   "logprobs":null,"finish_reason":null}]})
        );
        let t = event_json(&w.token_chunk(1, false));
        assert_eq!(t["choices"][0]["delta"], json!({"content": " of"}));
        assert_eq!(t["choices"][0]["finish_reason"], Value::Null);
        let last = event_json(&w.token_chunk(2, true));
        assert_eq!(last["choices"][0]["delta"]["content"], " and");
        assert_eq!(last["choices"][0]["finish_reason"], "length");
    }

    #[test]
    fn tail_with_and_without_usage() {
        let w = ChunkWriter::new(&header(Api::Chat), FinishReason::Stop);
        let tail = w.tail(Some(UsageCounts {
            prompt_tokens: 10,
            completion_tokens: 3,
            cached_tokens: None,
        }));
        let s = std::str::from_utf8(&tail).unwrap();
        let (usage, done) = s.split_at(s.find("data: [DONE]").unwrap());
        assert_eq!(done, "data: [DONE]\n\n");
        let u = event_json(usage.as_bytes());
        assert_eq!(u["choices"], json!([]));
        assert_eq!(
            u["usage"],
            json!({"prompt_tokens":10,"completion_tokens":3,"total_tokens":13})
        );
        assert_eq!(&w.tail(None)[..], DONE_EVENT);
    }

    #[test]
    fn completion_chunks_and_bodies() {
        let w = ChunkWriter::new(&header(Api::Completions), FinishReason::Stop);
        assert!(w.role_chunk().is_none());
        let t = event_json(&w.token_chunk(0, true));
        assert_eq!(t["object"], "text_completion");
        assert_eq!(t["choices"][0]["text"], " the");
        assert_eq!(t["choices"][0]["finish_reason"], "stop");

        let usage = UsageCounts {
            prompt_tokens: 4,
            completion_tokens: 2,
            cached_tokens: None,
        };
        let body: Value = serde_json::from_slice(&full_body(
            &header(Api::Completions),
            2,
            FinishReason::Length,
            usage,
        ))
        .unwrap();
        assert_eq!(body["choices"][0]["text"], " the of");
        assert_eq!(body["usage"]["total_tokens"], 6);
        let body: Value =
            serde_json::from_slice(&full_body(&header(Api::Chat), 3, FinishReason::Stop, usage))
                .unwrap();
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(body["choices"][0]["message"]["content"], " the of and");
        assert_eq!(body["choices"][0]["message"]["role"], "assistant");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn error_body_shape() {
        let v: Value =
            serde_json::from_slice(&error_body(400, "BadRequestError", "x \"y\"")).unwrap();
        assert_eq!(
            v,
            json!({"error":{"message":"x \"y\"","type":"BadRequestError","param":null,"code":400}})
        );
    }
}
