//! OpenAI image edits (`/v1/images/edits`, SGLang's and FLUX.2's image-to-image): a
//! multipart/form-data body with `prompt` (the entry's first text), `model`,
//! `response_format: b64_json`, `n: 1`, the entry's first image as the `image` file (or an
//! http(s) image as the `url` field), then `--extra-inputs` and the entry's own `extra`
//! (AIPerf's field order). The answer's images are counted as image generation's are.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;

use super::audio_transcription::{BOUNDARY, field, form_value};
use super::{BodyOptions, EndpointMismatch, EndpointType, PreparedRequest};
use crate::dataset::Entry;

/// Form fields the endpoint fills itself: `--extra-inputs` may not set them.
pub const RESERVED: [&str; 4] = ["prompt", "image", "url", "mask"];

pub fn prepare(
    mut entry: Entry,
    opts: &BodyOptions,
    model: Option<&str>,
) -> Result<PreparedRequest, EndpointMismatch> {
    if entry.images.is_empty() || entry.text.is_empty() {
        return Err(EndpointMismatch::NeedsImages(EndpointType::ImageEdit));
    }
    let image = entry.images.swap_remove(0);
    // The form in AIPerf's (dict) order: an extra input naming a field replaces its value
    // in place, others follow.
    let mut fields: Vec<(String, Option<String>)> = vec![
        ("prompt".into(), Some(std::mem::take(&mut entry.text))),
        (
            "model".into(),
            Some(model.unwrap_or(&opts.model).to_string()),
        ),
        ("response_format".into(), Some("b64_json".into())),
        ("n".into(), Some("1".into())),
    ];
    let file = match image.data_url.split_once(',') {
        Some((head, b64)) if head.starts_with("data:") => {
            let mime = head
                .trim_start_matches("data:")
                .split(';')
                .next()
                .filter(|m| m.starts_with("image/"))
                .unwrap_or("image/png")
                .to_string();
            let ext = match mime.trim_start_matches("image/") {
                "jpeg" => "jpg".to_string(),
                other => other.split('+').next().unwrap_or("png").to_string(),
            };
            let bytes = STANDARD
                .decode(b64.as_bytes())
                .map_err(|_| EndpointMismatch::NeedsImages(EndpointType::ImageEdit))?;
            // The file's place in the order; its bytes are written there.
            fields.push(("image".into(), None));
            Some((ext, mime, bytes))
        }
        _ => {
            fields.push(("url".into(), Some(image.data_url)));
            None
        }
    };
    let mut extras = opts.extra_inputs.clone();
    extras.extend(std::mem::take(&mut entry.extra));
    for (k, v) in &extras {
        let value = Some(form_value(v));
        match fields.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = value,
            None => fields.push((k.clone(), value)),
        }
    }
    let mut out = Vec::with_capacity(image_len(&file) + 1024);
    for (name, value) in &fields {
        match (value, &file) {
            (Some(v), _) => field(&mut out, name, v),
            (None, Some((ext, mime, bytes))) => {
                out.extend_from_slice(
                    format!(
                        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"image.{ext}\"\r\nContent-Type: {mime}\r\n\r\n"
                    )
                    .as_bytes(),
                );
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            (None, None) => {}
        }
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    Ok(PreparedRequest {
        body: Bytes::from(out),
        input_tokens: entry.input_tokens,
        // Counted are the images answered, as for image generation.
        num_images: 0,
        max_output_tokens: None,
        audio_seconds: None,
    })
}

fn image_len(file: &Option<(String, String, Vec<u8>)>) -> usize {
    file.as_ref().map_or(0, |f| f.2.len())
}
