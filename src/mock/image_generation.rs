//! `/v1/images/generations`: `n` images (default 1), each the same small PNG, as
//! `b64_json` (or as a `url` with `response_format: url`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use image::ImageEncoder;
use serde_json::{Value, json};

/// Most images one request may ask for (OpenAI's limit).
const MAX_IMAGES: u64 = 10;

/// The answer and how many images it holds (for the delay).
pub fn answer(body: &[u8], _default_model: &str) -> Result<(Value, u64), String> {
    let req: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let prompt = req
        .get("prompt")
        .and_then(Value::as_str)
        .ok_or("'prompt' is required: a string")?;
    if prompt.is_empty() {
        return Err("'prompt' is empty".into());
    }
    let n = match req.get("n") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_IMAGES).contains(n))
            .ok_or(format!("'n' must be 1 to {MAX_IMAGES}"))?,
    };
    let item = match req.get("response_format").and_then(Value::as_str) {
        None | Some("b64_json") => json!({"b64_json": STANDARD.encode(png())}),
        Some("url") => json!({"url": "https://mock.invalid/image.png"}),
        Some(other) => return Err(format!("'response_format' {other}: give b64_json or url")),
    };
    let data: Vec<Value> = (0..n).map(|_| item.clone()).collect();
    Ok((json!({"created": 0, "data": data}), n))
}

/// `/v1/images/edits`: the multipart form's fields read as a generation request (`prompt`,
/// `n`, `response_format`), with a decodable `image` file or a `url` field required.
pub fn edit_answer(content_type: &str, body: &[u8]) -> Result<(Value, u64), String> {
    let parts = super::audio::form_parts(content_type, body)?;
    let mut req = serde_json::Map::new();
    let mut has_image = false;
    for p in &parts {
        match (p.name, p.filename) {
            ("image", Some(_)) => {
                crate::dataset::data_url::image_dimensions(p.data)
                    .ok_or("'image' is not a PNG or JPEG image")?;
                has_image = true;
            }
            ("url", None) => has_image = true,
            (name, None) => {
                let text = String::from_utf8_lossy(p.data).into_owned();
                let value = match name {
                    "n" => json!(text.parse::<u64>().map_err(|_| "'n' must be an integer")?),
                    _ => Value::String(text),
                };
                req.insert(name.to_string(), value);
            }
            _ => {}
        }
    }
    if !has_image {
        return Err("'image' is required: an image file (or a 'url' field)".into());
    }
    answer(Value::Object(req).to_string().as_bytes(), "")
}

/// A 2x2 grey PNG.
fn png() -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(&[128u8; 12], 2, 2, image::ExtendedColorType::Rgb8)
        .expect("encoding to memory does not fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_images_as_asked() {
        let (v, n) = answer(
            br#"{"prompt":"a cat","n":3,"response_format":"b64_json"}"#,
            "m",
        )
        .unwrap();
        assert_eq!(n, 3);
        let b64 = v["data"][2]["b64_json"].as_str().unwrap();
        assert!(STANDARD.decode(b64).unwrap().starts_with(b"\x89PNG"));
        assert!(answer(br#"{"prompt":"a","n":0}"#, "m").is_err());
        assert!(answer(br#"{"n":1}"#, "m").is_err());
    }
}
