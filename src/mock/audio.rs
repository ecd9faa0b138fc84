//! Audio accounting and `/v1/audio/transcriptions`.
//!
//! Token rule (Qwen2-Audio's encoder: 100 mel frames a second, halved by its convolution,
//! halved again by pooling): 25 tokens per second of sound, rounded up, plus 2 for
//! `<|audio_bos|>` and `<|audio_eos|>`. The length is read from a WAV header; other formats
//! (MP3) are accepted and cost nothing, as the mock cannot decode them.
//!
//! A transcription answers `{"text": ..., "usage": {...}}` with a transcript of 2.5 words a
//! second of audio (at least one) and the prompt's audio tokens in `usage.prompt_tokens`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// Audio tokens per second of sound.
pub const TOKENS_PER_SECOND: f64 = 25.0;
/// `<|audio_bos|>` and `<|audio_eos|>`.
const AUDIO_DELIMITERS: u64 = 2;

/// Seconds of sound in a WAV file (its `data` chunk over its `fmt ` chunk's byte rate), or
/// None when the bytes are not a WAV file.
pub fn wav_seconds(bytes: &[u8]) -> Option<f64> {
    if bytes.get(0..4)? != b"RIFF" || bytes.get(8..12)? != b"WAVE" {
        return None;
    }
    let (mut at, mut frame_rate) = (12usize, None);
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().ok()?) as usize;
        let body = at + 8;
        match &bytes[at..at + 4] {
            b"fmt " => {
                let f = bytes.get(body..body + 16)?;
                let channels = u16::from_le_bytes([f[2], f[3]]) as f64;
                let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]) as f64;
                let bits = u16::from_le_bytes([f[14], f[15]]).div_ceil(8) as f64;
                frame_rate = Some(rate * channels * bits);
            }
            b"data" => {
                let data = len.min(bytes.len() - body) as f64;
                return frame_rate.filter(|r| *r > 0.0).map(|r| data / r);
            }
            _ => {}
        }
        at = body + len + (len & 1);
    }
    None
}

/// Prompt tokens for `seconds` of audio.
pub fn audio_tokens(seconds: f64) -> u64 {
    (seconds * TOKENS_PER_SECOND - 1e-9).ceil().max(0.0) as u64 + AUDIO_DELIMITERS
}

/// Tokens of an `input_audio` part's base64 data (a `data:audio/...;base64,` prefix is
/// allowed). Errors are 400 messages.
pub fn input_audio_tokens(data: &str, format: Option<&str>) -> Result<(u64, f64), String> {
    let b64 = match data.strip_prefix("data:") {
        Some(rest) => rest.split_once(";base64,").map(|(_, b)| b).ok_or(
            "input_audio.data: a data URL must be data:audio/<fmt>;base64,<data>".to_string(),
        )?,
        None => data,
    };
    let bytes = STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("input_audio.data: invalid base64: {e}"))?;
    match wav_seconds(&bytes) {
        Some(s) => Ok((audio_tokens(s), s)),
        None if format == Some("wav") => {
            Err("input_audio: format is wav but the data is not a WAV file".into())
        }
        None => Ok((0, 0.0)),
    }
}

/// One part of a multipart/form-data body.
pub struct FormPart<'a> {
    pub name: &'a str,
    pub filename: Option<&'a str>,
    pub data: &'a [u8],
}

/// Splits a multipart/form-data body given its `Content-Type` header.
pub fn form_parts<'a>(content_type: &str, body: &'a [u8]) -> Result<Vec<FormPart<'a>>, String> {
    let boundary = content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"'))
        .filter(|_| content_type.trim_start().starts_with("multipart/form-data"))
        .ok_or("Content-Type must be multipart/form-data with a boundary")?;
    let delimiter = format!("--{boundary}");
    let finder = memchr::memmem::Finder::new(delimiter.as_bytes());
    let starts: Vec<usize> = finder.find_iter(body).collect();
    let mut parts = Vec::new();
    for pair in starts.windows(2) {
        let (from, to) = (pair[0] + delimiter.len(), pair[1]);
        let chunk = body[from..to]
            .strip_prefix(b"\r\n")
            .and_then(|c| c.strip_suffix(b"\r\n"))
            .ok_or("malformed multipart body: a part does not start and end with CRLF")?;
        let split = memchr::memmem::find(chunk, b"\r\n\r\n")
            .ok_or("malformed multipart body: a part has no blank line after its headers")?;
        let headers = std::str::from_utf8(&chunk[..split])
            .map_err(|_| "malformed multipart body: headers are not UTF-8")?;
        let disposition = headers
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))
            .ok_or("malformed multipart body: a part has no Content-Disposition")?;
        let param = |key: &str| {
            disposition
                .split(';')
                .map(str::trim)
                .find_map(|p| p.strip_prefix(key))
                .map(|v| v.trim_matches('"'))
        };
        parts.push(FormPart {
            name: param("name=").ok_or("a form part has no name")?,
            filename: param("filename="),
            data: &chunk[split + 4..],
        });
    }
    if starts.is_empty() {
        return Err("malformed multipart body: the boundary does not occur".into());
    }
    Ok(parts)
}

/// What a transcription request asked for.
#[derive(Debug, PartialEq)]
pub struct Transcription {
    pub model: Option<String>,
    pub seconds: f64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
}

/// Reads a transcription form: `file` (required) and `model`.
pub fn transcription(content_type: &str, body: &[u8]) -> Result<Transcription, String> {
    let parts = form_parts(content_type, body)?;
    let file = parts
        .iter()
        .find(|p| p.name == "file")
        .ok_or("the form has no 'file' part")?;
    let model = parts
        .iter()
        .find(|p| p.name == "model")
        .map(|p| String::from_utf8_lossy(p.data).into_owned());
    let wav = file.filename.is_some_and(|f| f.ends_with(".wav"));
    let seconds = match wav_seconds(file.data) {
        Some(s) => s,
        None if wav => return Err("file: named .wav but not a WAV file".into()),
        None => 0.0,
    };
    Ok(Transcription {
        model,
        seconds,
        prompt_tokens: if seconds > 0.0 {
            audio_tokens(seconds)
        } else {
            0
        },
        output_tokens: ((seconds * 2.5).ceil() as u64).max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(seconds_frames: u32, rate: u32) -> Vec<u8> {
        let data = seconds_frames * 2;
        let mut v = b"RIFF".to_vec();
        v.extend_from_slice(&(36 + data).to_le_bytes());
        v.extend_from_slice(b"WAVEfmt ");
        v.extend_from_slice(&16u32.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&rate.to_le_bytes());
        v.extend_from_slice(&(rate * 2).to_le_bytes());
        v.extend_from_slice(&2u16.to_le_bytes());
        v.extend_from_slice(&16u16.to_le_bytes());
        v.extend_from_slice(b"data");
        v.extend_from_slice(&data.to_le_bytes());
        v.resize(44 + data as usize, 0);
        v
    }

    #[test]
    fn tokens_follow_the_length() {
        assert_eq!(wav_seconds(&wav(16_000, 16_000)), Some(1.0));
        assert_eq!(audio_tokens(1.0), 27);
        assert_eq!(audio_tokens(2.5), 65);
        assert_eq!(audio_tokens(0.01), 3);
        let b64 = STANDARD.encode(wav(8000, 16_000));
        assert_eq!(input_audio_tokens(&b64, Some("wav")), Ok((15, 0.5)));
        let url = format!("data:audio/wav;base64,{b64}");
        assert_eq!(input_audio_tokens(&url, None), Ok((15, 0.5)));
        assert!(input_audio_tokens("!!", None).is_err());
        assert!(input_audio_tokens(&STANDARD.encode(b"not wav"), Some("wav")).is_err());
    }

    #[test]
    fn forms_are_split_into_parts() {
        let audio = wav(32_000, 16_000);
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\nContent-Type: audio/wav\r\n\r\n".to_vec();
        body.extend_from_slice(&audio);
        body.extend_from_slice(b"\r\n--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--XyZ--\r\n");
        let t = transcription("multipart/form-data; boundary=XyZ", &body).unwrap();
        assert_eq!(
            t,
            Transcription {
                model: Some("whisper".into()),
                seconds: 2.0,
                prompt_tokens: 52,
                output_tokens: 5
            }
        );
        assert!(transcription("application/json", &body).is_err());
        assert!(transcription("multipart/form-data; boundary=other", &body).is_err());
    }
}
