//! The reranking routes, each in its API's shape: NIM `/v1/ranking`
//! (`{"query": {"text"}, "passages": [{"text"}]}` -> `{"rankings": [{"index", "logit"}]}`),
//! Cohere `/v2/rerank` (`{"query", "documents"}` -> `{"results": [{"index",
//! "relevance_score"}]}`) and Hugging Face TEI `/rerank` (`{"query", "texts"}` ->
//! `[{"index", "score"}]`). Scores come from a hash of the query and passage; results are
//! sorted best first, as the real servers sort them.

use serde_json::{Value, json};

use crate::hash::splitmix64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerankApi {
    Nim,
    Cohere,
    Tei,
}

/// The answer and how many passages it ranked (for the delay).
pub fn answer(api: RerankApi, body: &[u8], default_model: &str) -> Result<(Value, u64), String> {
    let req: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let strings = |v: Option<&Value>, what: &str| -> Result<Vec<String>, String> {
        v.and_then(Value::as_array)
            .ok_or_else(|| format!("'{what}' is required: a list"))?
            .iter()
            .map(|p| match (api, p) {
                (RerankApi::Nim, _) => p.get("text").and_then(Value::as_str),
                (_, Value::String(s)) => Some(s.as_str()),
                _ => None,
            })
            .map(|t| {
                t.map(str::to_string).ok_or_else(|| match api {
                    RerankApi::Nim => format!("each of '{what}' must be {{\"text\": \"...\"}}"),
                    _ => format!("each of '{what}' must be a string"),
                })
            })
            .collect()
    };
    let (query, passages) = match api {
        RerankApi::Nim => (
            req.pointer("/query/text").and_then(Value::as_str),
            strings(req.get("passages"), "passages")?,
        ),
        RerankApi::Cohere => (
            req.get("query").and_then(Value::as_str),
            strings(req.get("documents"), "documents")?,
        ),
        RerankApi::Tei => (
            req.get("query").and_then(Value::as_str),
            strings(req.get("texts"), "texts")?,
        ),
    };
    let query = query.ok_or(match api {
        RerankApi::Nim => "'query' is required: {\"text\": \"...\"}",
        _ => "'query' is required: a string",
    })?;
    let mut scored: Vec<(usize, f64)> = passages
        .iter()
        .enumerate()
        .map(|(i, p)| (i, score(query, p)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    let model = req
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(default_model);
    let answer = match api {
        RerankApi::Nim => json!({
            "rankings": scored.iter().map(|(i, s)| json!({"index": i, "logit": s * 20.0 - 10.0})).collect::<Vec<_>>(),
        }),
        RerankApi::Cohere => json!({
            "id": format!("rerank-{:016x}", splitmix64(scored.len() as u64)),
            "results": scored.iter().map(|(i, s)| json!({"index": i, "relevance_score": s})).collect::<Vec<_>>(),
            "meta": {"api_version": {"version": "2"}, "model": model},
        }),
        RerankApi::Tei => Value::Array(
            scored
                .iter()
                .map(|(i, s)| json!({"index": i, "score": s}))
                .collect(),
        ),
    };
    Ok((answer, passages.len() as u64))
}

/// A relevance in [0, 1) from the pair's hash.
fn score(query: &str, passage: &str) -> f64 {
    let h = query
        .bytes()
        .chain([0])
        .chain(passage.bytes())
        .fold(0x9e37_79b9u64, |h, b| splitmix64(h ^ u64::from(b)));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_answers_in_its_shape() {
        let (v, n) = answer(
            RerankApi::Nim,
            br#"{"model":"r","query":{"text":"q"},"passages":[{"text":"a"},{"text":"b"}]}"#,
            "m",
        )
        .unwrap();
        assert_eq!(n, 2);
        let list = v["rankings"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert!(list[0]["logit"].as_f64() >= list[1]["logit"].as_f64());
        let (v, _) = answer(
            RerankApi::Cohere,
            br#"{"model":"r","query":"q","documents":["a","b","c"]}"#,
            "m",
        )
        .unwrap();
        assert_eq!(v["results"].as_array().unwrap().len(), 3);
        let (v, _) = answer(RerankApi::Tei, br#"{"query":"q","texts":["a"]}"#, "m").unwrap();
        assert_eq!(v[0]["index"], 0);
        assert!(answer(RerankApi::Nim, br#"{"query":"q","passages":[]}"#, "m").is_err());
        assert!(answer(RerankApi::Cohere, br#"{"query":"q","texts":["a"]}"#, "m").is_err());
    }
}
