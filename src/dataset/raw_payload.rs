//! `--custom-dataset-type raw_payload`: every line of the file is a whole request body,
//! sent as written (AIPerf's verbatim replay; with `--endpoint-type raw` to `--url` as
//! given). The input length counts the body's `messages` texts or its `prompt`.

use std::path::Path;

use serde_json::Value;

use super::custom::{InputError, own_text};
use super::{Conversation, Dataset, DatasetSampling, Entry, OwnRequest};
use crate::tokenizer::Tokenizer;

pub fn load(path: &Path, tokenizer: &Tokenizer) -> Result<Dataset, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--input-file: cannot read '{}': {e}", path.display()))?;
    let mut conversations = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        let body = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(body)) if !body.is_empty() => body,
            Ok(_) => {
                return Err(format!(
                    "{at}: a raw_payload line is a whole request body, a JSON object such as {{\"model\": \"m\", \"messages\": [...]}}"
                ));
            }
            Err(e) => return Err(format!("{at}: not valid JSON: {e}")),
        };
        let own = OwnRequest::Payload(body);
        let text = own_text(&own);
        let tokens = tokenizer.count(&text) as u64;
        let mut entry = Entry::synthetic(text, tokens, Vec::new(), None);
        entry.own = Some(own);
        conversations.push(Conversation {
            session_id: None,
            system: None,
            context: None,
            turns: vec![entry],
        });
    }
    if conversations.is_empty() {
        return Err(format!(
            "{}: no request bodies; write one JSON object per line",
            path.display()
        ));
    }
    Ok(Dataset {
        conversations,
        sampling: DatasetSampling::Sequential,
    })
}
