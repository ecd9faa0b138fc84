//! NVIDIA NIM embeddings (`/v1/embeddings`): the OpenAI body with multimodal inputs. Each
//! text is an input; images alone are `<img src='URL'/>` inputs; texts with as many images
//! are paired as `TEXT <img src='URL'/>` (AIPerf's NIM shape). The answer is read as
//! OpenAI embeddings.

use serde_json::{Map, Value};

use super::EndpointMismatch;
use crate::dataset::Entry;

pub fn body(entry: Entry, model: &str) -> Result<Map<String, Value>, EndpointMismatch> {
    let texts: Vec<String> = std::iter::once(entry.text)
        .chain(entry.extra_texts)
        .filter(|t| !t.is_empty())
        .collect();
    let images: Vec<String> = entry.images.into_iter().map(|i| i.data_url).collect();
    let inputs: Vec<Value> = match (texts.is_empty(), images.is_empty()) {
        (_, true) => texts.into_iter().map(Value::String).collect(),
        (true, false) => images
            .iter()
            .map(|url| Value::String(format!("<img src='{url}'/>")))
            .collect(),
        (false, false) if texts.len() != images.len() => {
            return Err(EndpointMismatch::NimEmbeddingsPairs(
                texts.len(),
                images.len(),
            ));
        }
        (false, false) => texts
            .iter()
            .zip(&images)
            .map(|(t, url)| Value::String(format!("{t} <img src='{url}'/>")))
            .collect(),
    };
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_string()));
    body.insert("input".into(), Value::Array(inputs));
    Ok(body)
}
