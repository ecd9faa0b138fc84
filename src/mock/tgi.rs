//! `POST /generate` and `/generate_stream` in Hugging Face TGI's shapes.
//!
//! Request: `{"inputs": TEXT, "parameters": {"max_new_tokens": N, ...}}`. Prompt usage is
//! the text's tokens (no chat template). Whole answer: `{"generated_text"}`. Stream: one
//! `data:` event per token, `{"index", "token": {"id", "text", "logprob", "special"},
//! "generated_text": null, "details": null}`; the last token's event carries the whole
//! `generated_text` and `details` (TGI sends no `[DONE]`).

use bytes::Bytes;
use serde_json::{Value, json};

use super::request::{FinishReason, GenerationParams, PromptStats, text_tokens};
use super::response::{Api, ChunkWriter};
use super::words;

/// The model, prompt counts and generation settings of a request; `stream` is the route's.
pub fn parse_request(
    bytes: &[u8],
    stream: bool,
) -> Result<(Option<String>, PromptStats, GenerationParams), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("JSON decode error: {e}"))?;
    let inputs = v
        .get("inputs")
        .and_then(Value::as_str)
        .ok_or("inputs: Field required (a string)")?;
    let max_new_tokens = match v.get("parameters").and_then(|p| p.get("max_new_tokens")) {
        None | Some(Value::Null) => None,
        Some(n) => Some(n.as_u64().ok_or("parameters.max_new_tokens: an integer")?),
    };
    let stats = PromptStats {
        text_tokens: text_tokens(inputs),
        roles: vec!["user".into()],
        ..PromptStats::default()
    };
    let generation = GenerationParams {
        max_tokens: max_new_tokens,
        stream: Some(stream),
        ..GenerationParams::default()
    };
    Ok((None, stats, generation))
}

fn finish(finish: FinishReason) -> &'static str {
    match finish {
        FinishReason::Length => "length",
        FinishReason::Stop => "eos_token",
    }
}

/// One event per token; the last one carries the whole text and the details.
pub fn writer(tokens: u64, reason: FinishReason) -> ChunkWriter {
    let last = format!(
        "\",\"logprob\":0.0,\"special\":false}},\"generated_text\":{},\"details\":{{\"finish_reason\":\"{}\",\"generated_tokens\":{tokens},\"seed\":null}}}}\n\n",
        Value::String(words::text(tokens)),
        finish(reason)
    );
    ChunkWriter::events(
        Api::GenerateStream,
        Bytes::new(),
        Bytes::from_static(b"data: {\"index\":0,\"token\":{\"id\":0,\"text\":\""),
        b"\",\"logprob\":0.0,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        None,
    )
    .with_last_suffix(Bytes::from(last))
}

/// A whole answer.
pub fn full_body(tokens: u64) -> Bytes {
    Bytes::from(json!({"generated_text": words::text(tokens)}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers() {
        let (model, stats, g) = parse_request(
            br#"{"inputs":"hello there","parameters":{"max_new_tokens":3}}"#,
            true,
        )
        .unwrap();
        assert_eq!(model, None);
        assert_eq!(stats.text_tokens, text_tokens("hello there"));
        assert_eq!((g.max_output(), g.stream()), (Some(3), true));
        assert!(parse_request(br#"{"parameters":{}}"#, false).is_err());
        let w = writer(2, FinishReason::Length);
        let first: Value = serde_json::from_slice(&w.token_chunk(0, false)[6..]).unwrap();
        assert_eq!(first["token"]["text"], words::word(0));
        assert!(first["generated_text"].is_null());
        let last: Value = serde_json::from_slice(&w.token_chunk(1, true)[6..]).unwrap();
        assert_eq!(last["generated_text"], words::text(2));
        assert_eq!(last["details"]["generated_tokens"], 2);
        let whole: Value = serde_json::from_slice(&full_body(2)).unwrap();
        assert_eq!(whole["generated_text"], words::text(2));
    }
}
