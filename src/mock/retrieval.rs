//! `POST /v1/infer` in NVIDIA NIM image retrieval's shape: `{"input": [{"type":
//! "image_url", "url"}]}` in, one result per image out (`{"data": [{"index", "text"}],
//! "usage"}`), after the first-token delay plus one inter-token delay per image.

use serde_json::{Value, json};

use crate::dataset::data_url::image_size;

/// The answer and how many images it read (for the delay).
pub fn answer(body: &[u8]) -> Result<(Value, u64), String> {
    let req: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let input = req
        .get("input")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or("'input' is required: a list of {\"type\": \"image_url\", \"url\": ...} items")?;
    let mut data = Vec::with_capacity(input.len());
    for (i, item) in input.iter().enumerate() {
        let url = item
            .get("url")
            .and_then(Value::as_str)
            .filter(|_| item.get("type").and_then(Value::as_str) == Some("image_url"))
            .ok_or_else(|| format!("input[{i}]: give {{\"type\": \"image_url\", \"url\": ...}}"))?;
        let (w, h) = image_size(url).map_err(|e| format!("input[{i}]: {e}"))?;
        data.push(json!({"index": i, "object": "retrieval", "text": format!("a {w}x{h} image")}));
    }
    let n = data.len() as u64;
    Ok((
        json!({"data": data, "usage": {"images_size_mb": 0.0, "num_images": n}}),
        n,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_are_refused() {
        assert!(answer(br#"{"input":[]}"#).is_err());
        assert!(answer(br#"{"input":[{"type":"text","url":"x"}]}"#).is_err());
        assert!(
            answer(br#"{"input":[{"type":"image_url","url":"data:image/png;base64,AA"}]}"#)
                .is_err()
        );
    }
}
