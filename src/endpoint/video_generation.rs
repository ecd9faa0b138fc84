//! OpenAI/SGLang video generation (`/v1/videos`): a multipart/form-data body with `prompt`
//! (the entry's first text) and `model`, then `--extra-inputs` and the entry's own `extra`
//! (`size`, `seconds`, `seed`, `num_inference_steps`, ...), in AIPerf's field order. The job
//! it starts is followed by the transport (`transport::video`).

use bytes::Bytes;

use super::audio_transcription::{BOUNDARY, field, form_value};
use super::{BodyOptions, EndpointMismatch, EndpointType, PreparedRequest};
use crate::dataset::Entry;

pub fn prepare(
    mut entry: Entry,
    opts: &BodyOptions,
    model: Option<&str>,
) -> Result<PreparedRequest, EndpointMismatch> {
    if entry.text.is_empty() {
        return Err(EndpointMismatch::NeedsPrompt(EndpointType::VideoGeneration));
    }
    // An extra input naming a field replaces its value in place, others follow.
    let mut fields: Vec<(String, String)> = vec![
        ("prompt".into(), std::mem::take(&mut entry.text)),
        ("model".into(), model.unwrap_or(&opts.model).to_string()),
    ];
    let mut extras = opts.extra_inputs.clone();
    extras.extend(std::mem::take(&mut entry.extra));
    for (k, v) in &extras {
        let value = form_value(v);
        match fields.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = value,
            None => fields.push((k.clone(), value)),
        }
    }
    let mut out = Vec::with_capacity(512 + fields.iter().map(|f| f.1.len()).sum::<usize>());
    for (name, value) in &fields {
        field(&mut out, name, value);
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    Ok(PreparedRequest {
        body: Bytes::from(out),
        input_tokens: entry.input_tokens,
        num_images: 0,
        max_output_tokens: None,
        audio_seconds: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::audio_transcription::form_as_json;
    use serde_json::{Map, json};

    #[test]
    fn the_form_has_the_prompt_the_model_and_the_extra_inputs_in_order() {
        let mut extra_inputs = Map::new();
        extra_inputs.insert("size".into(), json!("1280x720"));
        extra_inputs.insert("seconds".into(), json!(4));
        extra_inputs.insert("model".into(), json!("override"));
        let opts = BodyOptions {
            model: "m".into(),
            streaming: false,
            use_legacy_max_tokens: false,
            extra_inputs,
        };
        let entry = Entry::synthetic("a cat".into(), 2, Vec::new(), None);
        let req = prepare(entry, &opts, None).unwrap();
        assert_eq!(req.input_tokens, 2);
        let form = form_as_json(&req.body).unwrap();
        assert_eq!(
            form,
            json!({"prompt": "a cat", "model": "override", "size": "1280x720", "seconds": "4"})
        );
        // The prompt and the model first, the model replaced in its place.
        let text = String::from_utf8(req.body.to_vec()).unwrap();
        let order: Vec<usize> = ["\"prompt\"", "\"model\"", "\"seconds\"", "\"size\""]
            .iter()
            .map(|f| text.find(f).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert_eq!(text.matches("name=\"model\"").count(), 1);

        let empty = Entry::synthetic(String::new(), 0, Vec::new(), None);
        assert!(prepare(empty, &opts, None).is_err());
    }
}
