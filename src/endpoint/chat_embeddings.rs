//! Chat-style embeddings (`/v1/embeddings`, vLLM's multimodal embeddings): the chat body
//! (`messages` with text and image parts, `model`, `stream: false`), without an output
//! limit; the answer is read as OpenAI embeddings.

use serde_json::{Map, Value};

use super::{BodyOptions, chat};
use crate::dataset::Entry;

pub fn body(mut entry: Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    entry.max_output_tokens = None;
    let opts = BodyOptions {
        streaming: false,
        ..opts.clone()
    };
    chat::body(entry, system, &opts)
}
