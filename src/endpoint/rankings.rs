//! Reranking APIs: an entry's first text is the query, its other texts the passages.
//! - NIM (`/v1/ranking`): `{"model", "query": {"text"}, "passages": [{"text"}]}` ->
//!   `{"rankings": [{"index", "logit"}]}`;
//! - Cohere (`/v2/rerank`): `{"model", "query", "documents": [text]}` ->
//!   `{"results": [{"index", "relevance_score"}]}`;
//! - Hugging Face TEI (`/rerank`): `{"query", "texts": [text]}` (no model) ->
//!   `[{"index", "score"}]`.
//!
//! The scores are counted, not read.

use serde_json::{Map, Value, json};

use super::ParsedEvent;
use crate::dataset::Entry;

/// Which reranking API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankingsApi {
    Nim,
    Cohere,
    HfTei,
}

/// The body for `api`: the entry's text is the query, its further texts the passages.
pub fn body(api: RankingsApi, entry: Entry, model: &str) -> Map<String, Value> {
    let query = entry.text;
    let passages = entry.extra_texts;
    let mut body = Map::new();
    match api {
        RankingsApi::Nim => {
            body.insert("model".into(), json!(model));
            body.insert("query".into(), json!({ "text": query }));
            let list = passages.into_iter().map(|p| json!({ "text": p })).collect();
            body.insert("passages".into(), Value::Array(list));
        }
        RankingsApi::Cohere => {
            body.insert("model".into(), json!(model));
            body.insert("query".into(), json!(query));
            body.insert("documents".into(), json!(passages));
        }
        RankingsApi::HfTei => {
            body.insert("query".into(), json!(query));
            body.insert("texts".into(), json!(passages));
        }
    }
    body
}

/// Counts the ranked passages of a response.
pub fn parse(api: RankingsApi, v: &Value, out: &mut ParsedEvent<'_>) {
    let list = match (api, v) {
        (RankingsApi::HfTei, Value::Array(_)) => Some(v),
        (RankingsApi::Nim, _) => v.get("rankings"),
        // TEI servers behind a proxy may wrap the list as Cohere does.
        (RankingsApi::Cohere | RankingsApi::HfTei, _) => v.get("results"),
    };
    match list {
        Some(Value::Array(items)) => {
            out.items = items.iter().filter(|i| i.is_object()).count() as u64;
        }
        Some(other) => out.unexpected = Some(format!("the rankings are {other}, not a list")),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_counts_its_own_list() {
        let cases = [
            (
                RankingsApi::Nim,
                r#"{"rankings":[{"index":1,"logit":2.5},{"index":0,"logit":-1.0}]}"#,
                2,
            ),
            (
                RankingsApi::Cohere,
                r#"{"id":"x","results":[{"index":0,"relevance_score":0.9}]}"#,
                1,
            ),
            (
                RankingsApi::HfTei,
                r#"[{"index":0,"score":0.5},{"index":2,"score":0.1},{"index":1,"score":0.0}]"#,
                3,
            ),
            (RankingsApi::Nim, r#"{"results":[{"index":0}]}"#, 0),
        ];
        for (api, text, n) in cases {
            let v: Value = serde_json::from_str(text).unwrap();
            let mut e = ParsedEvent::default();
            parse(api, &v, &mut e);
            assert_eq!(e.items, n, "{api:?} {text}");
        }
    }
}
