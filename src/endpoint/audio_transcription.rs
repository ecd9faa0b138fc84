//! OpenAI audio transcription requests (`/v1/audio/transcriptions`): a multipart/form-data
//! body with the entry's first audio clip as `file` (named `audio.<format>`), `model`, then
//! `--extra-inputs` and the entry's own `extra` as further form fields. The answer is
//! `{"text": ...}`, read by the common response parser.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde_json::Value;

use super::{BodyOptions, PreparedRequest};
use crate::dataset::Entry;

/// The form's boundary, the same for every request of a run so one `Content-Type` header
/// serves them all. Long and arbitrary: the chance that audio bytes contain it is nil.
pub const BOUNDARY: &str = "aiperf-form-boundary-5f3a9c2e7b1d4086a4e2c9b7";

/// The `Content-Type` of every transcription request.
pub fn content_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

fn mime(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        _ => "audio/wav",
    }
}

pub(super) fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
            .as_bytes(),
    );
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A form value: strings as they are, anything else as JSON.
pub(super) fn form_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The whole body of one transcription request (the endpoint check made sure there is an
/// audio clip).
pub fn prepare(mut entry: Entry, opts: &BodyOptions, model: Option<&str>) -> PreparedRequest {
    let audio = entry.audios.swap_remove(0);
    let bytes = STANDARD
        .decode(audio.base64.as_bytes())
        .expect("clips are base64 made or checked by the dataset");
    let mut out = Vec::with_capacity(bytes.len() + 512);
    out.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.{0}\"\r\nContent-Type: {1}\r\n\r\n",
            audio.format,
            mime(audio.format)
        )
        .as_bytes(),
    );
    out.extend_from_slice(&bytes);
    out.extend_from_slice(b"\r\n");
    field(&mut out, "model", model.unwrap_or(&opts.model));
    // The entry's own fields win over --extra-inputs, as in JSON bodies.
    let mut extras = opts.extra_inputs.clone();
    extras.extend(std::mem::take(&mut entry.extra));
    for (k, v) in &extras {
        field(&mut out, k, &form_value(v));
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    PreparedRequest {
        body: Bytes::from(out),
        // The entry's text is not sent (the form has no prompt), so no input tokens.
        input_tokens: 0,
        num_images: 0,
        max_output_tokens: entry.max_output_tokens,
        audio_seconds: audio.duration_s,
    }
}

/// A form built by `prepare` as JSON, for `inputs.json`: each field by name, the file as
/// `{"filename", "content_type", "base64"}`. None when `body` is not such a form.
pub fn form_as_json(body: &[u8]) -> Option<Value> {
    let delimiter = format!("--{BOUNDARY}");
    let rest = body.strip_prefix(delimiter.as_bytes())?;
    let mut out = serde_json::Map::new();
    let finder = memchr::memmem::Finder::new(delimiter.as_bytes());
    let mut at = 0;
    while let Some(next) = finder.find(&rest[at..]) {
        let part = rest[at..at + next]
            .strip_prefix(b"\r\n")?
            .strip_suffix(b"\r\n")?;
        at += next + delimiter.len();
        let split = memchr::memmem::find(part, b"\r\n\r\n")?;
        let headers = std::str::from_utf8(&part[..split]).ok()?;
        let data = &part[split + 4..];
        let param = |key: &str| {
            let from = headers.find(key)? + key.len();
            let len = headers[from..].find('"')?;
            Some(headers[from..from + len].to_string())
        };
        let name = param("name=\"")?;
        let value = match param("filename=\"") {
            Some(filename) => serde_json::json!({
                "filename": filename,
                "content_type": headers.split("Content-Type: ").nth(1).unwrap_or("").trim(),
                "base64": STANDARD.encode(data),
            }),
            None => Value::String(String::from_utf8_lossy(data).into_owned()),
        };
        out.insert(name, value);
    }
    Some(Value::Object(out))
}

/// A request with a tenth of a second of noise, for the readiness probe.
pub fn probe_body(model: &str) -> Bytes {
    let wav = crate::dataset::audio::noise_wav(1600, 16_000, 16, 1, 0);
    let opts = BodyOptions {
        model: model.to_string(),
        streaming: false,
        use_legacy_max_tokens: false,
        extra_inputs: serde_json::Map::new(),
    };
    let entry = Entry {
        text: String::new(),
        input_tokens: 0,
        images: Vec::new(),
        audios: vec![crate::dataset::audio::encode(&wav, 0.1)],
        videos: Vec::new(),
        max_output_tokens: None,
        extra_texts: Vec::new(),
        role: None,
        extra: serde_json::Map::new(),
        timestamp_ms: None,
        delay: None,
        own: None,
    };
    prepare(entry, &opts, None).body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::audio::{EncodedAudio, noise_wav};
    use serde_json::{Map, json};

    #[test]
    fn the_form_holds_the_file_the_model_and_the_extras() {
        let wav = noise_wav(160, 16_000, 16, 1, 1);
        let mut entry = Entry {
            text: String::new(),
            input_tokens: 0,
            images: Vec::new(),
            audios: vec![EncodedAudio {
                base64: STANDARD.encode(&wav),
                format: "wav",
                duration_s: Some(0.01),
            }],
            videos: Vec::new(),
            max_output_tokens: None,
            extra_texts: Vec::new(),
            role: None,
            extra: Map::new(),
            timestamp_ms: None,
            delay: None,
            own: None,
        };
        entry.extra.insert("language".into(), json!("en"));
        let mut extra_inputs = Map::new();
        extra_inputs.insert("temperature".into(), json!(0.2));
        extra_inputs.insert("language".into(), json!("fr"));
        let opts = BodyOptions {
            model: "whisper".into(),
            streaming: false,
            use_legacy_max_tokens: false,
            extra_inputs,
        };
        let req = prepare(entry, &opts, None);
        assert_eq!(req.audio_seconds, Some(0.01));
        let json = form_as_json(&req.body).unwrap();
        assert_eq!(json["model"], "whisper");
        assert_eq!(json["language"], "en");
        assert_eq!(json["temperature"], "0.2");
        assert_eq!(json["file"]["filename"], "audio.wav");
        assert_eq!(json["file"]["content_type"], "audio/wav");
        assert_eq!(json["file"]["base64"], STANDARD.encode(&wav));
        assert_eq!(form_as_json(b"{}"), None);
        let body = req.body.as_ref();
        let head = format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\nContent-Type: audio/wav\r\n\r\n"
        );
        assert!(body.starts_with(head.as_bytes()));
        assert_eq!(&body[head.len()..head.len() + wav.len()], &wav[..]);
        let tail = String::from_utf8_lossy(&body[head.len() + wav.len()..]).to_string();
        assert_eq!(
            tail,
            format!(
                "\r\n--{B}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n\
                 --{B}\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n\
                 --{B}\r\nContent-Disposition: form-data; name=\"temperature\"\r\n\r\n0.2\r\n--{B}--\r\n",
                B = BOUNDARY
            )
        );
    }
}
