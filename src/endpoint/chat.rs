//! OpenAI chat completions request bodies: the optional system message, then one message
//! whose content is the text parts followed by the image, audio and video parts (plain
//! string content when there is exactly one text and nothing else).

use serde_json::{Map, Value, json};

use super::{BodyOptions, common_fields};
use crate::dataset::{Entry, OwnRequest};

/// The message objects of one turn, comma-separated, as they sit inside a messages array:
/// the input file's own messages, or the one message built from the entry.
pub fn turn_messages(entry: &mut Entry) -> Vec<u8> {
    match entry.own.take() {
        Some(OwnRequest::Messages(own)) => {
            let list = serde_json::to_vec(&own.list).expect("JSON values always serialize");
            list[1..list.len() - 1].to_vec()
        }
        _ => serde_json::to_vec(&message(entry)).expect("JSON values always serialize"),
    }
}

/// The message object of one turn.
pub fn message(entry: &mut Entry) -> Value {
    let text = std::mem::take(&mut entry.text);
    let extra_texts = std::mem::take(&mut entry.extra_texts);
    let images = std::mem::take(&mut entry.images);
    let audios = std::mem::take(&mut entry.audios);
    let videos = std::mem::take(&mut entry.videos);
    let content = if images.is_empty()
        && extra_texts.is_empty()
        && audios.is_empty()
        && videos.is_empty()
    {
        Value::String(text)
    } else {
        let mut parts = Vec::with_capacity(1 + extra_texts.len() + images.len());
        for t in std::iter::once(text).chain(extra_texts) {
            if !t.is_empty() {
                parts.push(json!({"type": "text", "text": t}));
            }
        }
        for image in images {
            let mut part = json!({"type": "image_url", "image_url": {"url": image.data_url}});
            if let Some(uuid) = image.uuid {
                part["uuid"] = Value::String(uuid);
            }
            parts.push(part);
        }
        for audio in audios {
            parts.push(json!({"type": "input_audio", "input_audio": {"data": audio.base64, "format": audio.format}}));
        }
        for video in videos {
            parts.push(json!({"type": "video_url", "video_url": {"url": video.url}}));
        }
        Value::Array(parts)
    };
    let role = entry.role.take().unwrap_or_else(|| "user".into());
    json!({"role": role, "content": content})
}

/// The system message of a conversation.
pub fn system_message(text: &str) -> Value {
    json!({"role": "system", "content": text})
}

/// Every field but `messages`.
pub fn body_fields(entry: &Entry, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    let key = if opts.use_legacy_max_tokens {
        "max_tokens"
    } else {
        "max_completion_tokens"
    };
    common_fields(&mut body, opts, key, entry.max_output_tokens);
    body
}

pub fn body(mut entry: Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = body_fields(&entry, opts);
    let mut messages = Vec::with_capacity(2);
    if let Some(s) = system {
        messages.push(system_message(s));
    }
    match entry.own.take() {
        // An input file's own messages go out as written.
        Some(OwnRequest::Messages(own)) => messages.extend(own.list),
        _ => messages.push(message(&mut entry)),
    }
    body.insert("messages".into(), Value::Array(messages));
    body
}
