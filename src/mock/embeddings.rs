//! `/v1/embeddings`: one 768-number vector per input (`input`: a string or a list of them;
//! `text`, as NVIDIA's embedqa template sends, is taken too), made from a hash of the input
//! so equal inputs get equal vectors; `usage` counts the inputs' tokens. NIM's image inputs
//! (`<img src='DATA_URL'/>` in an input) count Qwen2-VL's tokens for the image. A chat-style
//! request (`messages`, vLLM's multimodal embeddings) gets one vector for the whole
//! conversation, its usage counting the text parts and images.

use serde_json::{Value, json};

use super::image::qwen2_vl_image_tokens;
use super::request::text_tokens;
use crate::dataset::data_url::image_size;
use crate::hash::splitmix64;

/// Numbers per vector.
pub const DIMENSIONS: usize = 768;

/// The answer and how many inputs it embedded (for the delay).
pub fn answer(body: &[u8], default_model: &str) -> Result<(Value, u64), String> {
    let req: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    if let Some(messages) = req.get("messages") {
        return chat(&req, messages, default_model);
    }
    let inputs: Vec<&str> = match req.get("input").or_else(|| req.get("text")) {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().ok_or("'input' must hold strings"))
            .collect::<Result<_, _>>()?,
        _ => return Err("'input' is required: a string or a list of strings".into()),
    };
    if inputs.is_empty() {
        return Err("'input' is an empty list".into());
    }
    let tokens: u64 = inputs
        .iter()
        .map(|t| input_tokens(t))
        .sum::<Result<u64, String>>()?;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": vector(text)}))
        .collect();
    let model = req
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(default_model);
    let answer = json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    });
    Ok((answer, inputs.len() as u64))
}

/// A text's tokens, an `<img src='URL'/>` tag in it counted as its image's tokens.
fn input_tokens(input: &str) -> Result<u64, String> {
    let mut tokens = 0;
    let mut rest = input;
    while let Some(at) = rest.find("<img src='") {
        tokens += text_tokens(&rest[..at]);
        let tag = &rest[at + "<img src='".len()..];
        let end = tag
            .find("'/>")
            .ok_or("an <img src='...'/> tag is not closed")?;
        let (w, h) = image_size(&tag[..end]).map_err(|e| format!("<img>: {e}"))?;
        tokens += qwen2_vl_image_tokens(w, h);
        rest = &tag[end + 3..];
    }
    Ok(tokens + text_tokens(rest))
}

/// One vector for a chat-style request: its text parts' tokens and its images' tokens.
fn chat(req: &Value, messages: &Value, default_model: &str) -> Result<(Value, u64), String> {
    let messages = messages
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("'messages' must be a non-empty list")?;
    let mut tokens = 0;
    let mut key = String::new();
    for m in messages {
        match m.get("content") {
            Some(Value::String(s)) => {
                tokens += text_tokens(s);
                key.push_str(s);
            }
            Some(Value::Array(parts)) => {
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        tokens += text_tokens(t);
                        key.push_str(t);
                    } else if let Some(url) = p.pointer("/image_url/url").and_then(Value::as_str) {
                        let (w, h) = image_size(url).map_err(|e| format!("image_url: {e}"))?;
                        tokens += qwen2_vl_image_tokens(w, h);
                        key.push_str(url);
                    }
                }
            }
            _ => return Err("each message needs 'content': a string or a list of parts".into()),
        }
    }
    let model = req
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(default_model);
    let answer = json!({
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": vector(&key)}],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    });
    Ok((answer, 1))
}

/// Numbers in [-1, 1) from the text's hash.
fn vector(text: &str) -> Vec<f32> {
    let mut h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        splitmix64(h ^ u64::from(b))
    });
    (0..DIMENSIONS)
        .map(|_| {
            h = splitmix64(h);
            ((h >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_vector_per_input_and_usage() {
        let (v, n) = answer(br#"{"model":"e","input":["a b","a b","c"]}"#, "m").unwrap();
        assert_eq!(n, 3);
        assert_eq!(v["data"].as_array().unwrap().len(), 3);
        assert_eq!(
            v["data"][0]["embedding"].as_array().unwrap().len(),
            DIMENSIONS
        );
        assert_eq!(v["data"][0]["embedding"], v["data"][1]["embedding"]);
        assert_ne!(v["data"][0]["embedding"], v["data"][2]["embedding"]);
        let t = text_tokens("a b") * 2 + text_tokens("c");
        assert_eq!(v["usage"]["prompt_tokens"], t);
        assert_eq!(v["model"], "e");
        assert!(answer(br#"{"input":5}"#, "m").is_err());
        assert!(answer(br#"{"input":[]}"#, "m").is_err());
    }
}
