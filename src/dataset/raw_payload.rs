//! `--custom-dataset-type raw_payload`: every line of the file is a whole request body,
//! sent as written (AIPerf's verbatim replay; with `--endpoint-type raw` to `--url` as
//! given). The input length counts the body's `messages` texts or its `prompt`.

use std::path::Path;

use serde_json::Value;

use super::custom::{InputError, own_text};
use super::input_lines::{Next, for_each_line};
use super::{Conversation, Dataset, DatasetSampling, Entry, OwnRequest};
use crate::tokenizer::Tokenizer;

pub fn load(path: &Path, tokenizer: &Tokenizer) -> Result<Dataset, InputError> {
    let mut conversations = Vec::new();
    for_each_line(path, |number, line| {
        let line = line.trim();
        if line.is_empty() {
            return Ok(Next::More);
        }
        let at = format!("{}:{number}", path.display());
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
        Ok(Next::More)
    })?;
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
