//! Audio clips and video clips of synthetic entries, drawn per entry from their own seeded
//! streams (so adding them changes no prompt or image) and encoded on the build threads.

use std::time::Instant;

use anyhow::Context;
use rand::rngs::ChaCha8Rng;
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

use super::audio::{self, AudioOptions, EncodedAudio};
use super::video::{self, EncodedVideo, VideoOptions};
use super::{BuildError, Entry, derive_seed, parallel_map};

/// `--audio-*` and `--video-*`: None = no clips of that kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MediaOptions {
    pub audio: Option<AudioOptions>,
    pub video: Option<VideoOptions>,
}

const STREAM_AUDIO: u64 = 20;
const STREAM_VIDEO: u64 = 21;

/// Most draws for a clip length at or above the minimum before the minimum is taken.
const MAX_LENGTH_DRAWS: usize = 1000;

enum Clip {
    Audio {
        seconds: f64,
        rate: u32,
        bits: u16,
        seed: u64,
    },
    Video {
        seed: u64,
    },
}

enum Encoded {
    Audio(EncodedAudio),
    Video(EncodedVideo),
}

/// Adds each entry's audio clips and video clips, built on up to `threads` threads.
/// Logs how long it took and how many bytes the clips are.
pub fn attach(
    entries: &mut [Entry],
    opts: &MediaOptions,
    master_seed: u64,
    threads: usize,
) -> Result<(), BuildError> {
    if opts.audio.is_none() && opts.video.is_none() {
        return Ok(());
    }
    if opts.video.is_some() {
        video::check_ffmpeg("--video-width/--video-height").map_err(BuildError::Input)?;
    }
    let started = Instant::now();
    let mut clips: Vec<(usize, Clip)> = Vec::new();
    for i in 0..entries.len() {
        if let Some(a) = &opts.audio {
            let mut rng =
                ChaCha8Rng::seed_from_u64(derive_seed(master_seed, STREAM_AUDIO, i as u64));
            let length = Normal::new(a.length_mean_s, a.length_stddev_s)
                .map_err(|e| BuildError::Input(format!("--audio-length-stddev: {e}")))?;
            for _ in 0..a.batch_size {
                // Drawn again below the minimum, as AIPerf does.
                let seconds = (0..MAX_LENGTH_DRAWS)
                    .map(|_| length.sample(&mut rng))
                    .find(|&s| s >= audio::MIN_SECONDS)
                    .unwrap_or(audio::MIN_SECONDS);
                let rate = a.sample_rates_hz[rng.random_range(0..a.sample_rates_hz.len())];
                let bits = a.depths[rng.random_range(0..a.depths.len())];
                let seed = rng.next_u64();
                clips.push((
                    i,
                    Clip::Audio {
                        seconds,
                        rate,
                        bits,
                        seed,
                    },
                ));
            }
        }
        if let Some(v) = &opts.video {
            for j in 0..v.batch_size {
                let index = (i * v.batch_size + j) as u64;
                let seed = derive_seed(master_seed, STREAM_VIDEO, index);
                clips.push((i, Clip::Video { seed }));
            }
        }
    }
    tracing::info!(
        "Building {} media clips (audio and video) on {} threads",
        clips.len(),
        threads.clamp(1, clips.len().max(1))
    );
    let channels = opts.audio.as_ref().map_or(1, |a| a.channels);
    let built = parallel_map(clips.len(), threads, |k| match &clips[k].1 {
        Clip::Audio {
            seconds,
            rate,
            bits,
            seed,
        } => {
            let frames = (seconds * f64::from(*rate)) as u64;
            let wav = audio::noise_wav(frames, *rate, *bits, channels, *seed);
            Ok(Encoded::Audio(audio::encode(
                &wav,
                frames as f64 / f64::from(*rate),
            )))
        }
        Clip::Video { seed } => {
            let v = opts.video.as_ref().expect("video clips need video options");
            video::encode(v, *seed)
                .with_context(|| format!("cannot encode a {}x{} video clip", v.width, v.height))
                .map(Encoded::Video)
        }
    });
    let (mut audio_bytes, mut video_bytes) = (0usize, 0usize);
    for ((i, _), clip) in clips.iter().zip(built) {
        match clip? {
            Encoded::Audio(a) => {
                audio_bytes += a.base64.len();
                entries[*i].audios.push(a);
            }
            Encoded::Video(v) => {
                video_bytes += v.url.len();
                entries[*i].videos.push(v);
            }
        }
    }
    tracing::info!(
        "Built {} media clips in {:.1} s on {} threads: audio {:.1} MB, video {:.1} MB (base64)",
        clips.len(),
        started.elapsed().as_secs_f64(),
        threads.clamp(1, clips.len().max(1)),
        audio_bytes as f64 / 1e6,
        video_bytes as f64 / 1e6
    );
    Ok(())
}

/// An input file's audio: a local `.wav`/`.mp3` file (read, checked, base64), a
/// `data:audio/<fmt>;base64,` URL, or AIPerf's `<fmt>,<base64>` form. `path` is the value
/// resolved as a file path.
pub fn audio_from_input(value: &str, path: &std::path::Path) -> Result<EncodedAudio, String> {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    let inline = value
        .strip_prefix("data:audio/")
        .and_then(|rest| rest.split_once(";base64,"))
        .or_else(|| {
            value
                .split_once(',')
                .filter(|(f, _)| *f == "wav" || *f == "mp3")
        });
    let (format, bytes) = match inline {
        Some((format, b64)) => {
            let bytes = STANDARD
                .decode(b64.trim())
                .map_err(|e| format!("invalid base64 audio: {e}"))?;
            (format.to_ascii_lowercase(), bytes)
        }
        None => {
            if !path.is_file() {
                return Err(format!(
                    "audio file '{value}' does not exist; give a .wav or .mp3 file, data:audio/wav;base64,<data> or wav,<base64>"
                ));
            }
            let bytes = std::fs::read(path)
                .map_err(|e| format!("cannot read audio file '{value}': {e}"))?;
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            (ext.to_ascii_lowercase(), bytes)
        }
    };
    let (format, duration_s) = match format.as_str() {
        "wav" | "wave" | "x-wav" => {
            let info = audio::wav_info(&bytes)
                .ok_or_else(|| format!("'{}' is not a WAV (RIFF/WAVE) file", short(value)))?;
            ("wav", Some(info.duration_s()))
        }
        "mp3" | "mpeg" => ("mp3", None),
        other => {
            return Err(format!(
                "audio format '{other}' is not supported; give WAV or MP3"
            ));
        }
    };
    Ok(EncodedAudio {
        base64: STANDARD.encode(&bytes),
        format,
        duration_s,
    })
}

/// An input file's video: an http(s) URL or a `data:video/...` URL (sent as given), or a
/// local `.webm`/`.mp4` file (read, sent as a base64 data URL).
pub fn video_from_input(value: &str, path: &std::path::Path) -> Result<EncodedVideo, String> {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    if value.starts_with("http://") || value.starts_with("https://") {
        return Ok(EncodedVideo { url: value.into() });
    }
    if let Some(rest) = value.strip_prefix("data:video/") {
        if !rest.contains(";base64,") {
            return Err("data URL is not base64; give data:video/<fmt>;base64,<data>".into());
        }
        return Ok(EncodedVideo { url: value.into() });
    }
    if !path.is_file() {
        return Err(format!(
            "video file '{value}' does not exist; give a .webm or .mp4 file, an http(s) URL or data:video/<fmt>;base64,<data>"
        ));
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !matches!(ext.as_str(), "webm" | "mp4" | "mov" | "mkv" | "avi") {
        return Err(format!(
            "video file '{value}': unknown type '.{ext}'; give .webm, .mp4, .mov, .mkv or .avi"
        ));
    }
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read video file '{value}': {e}"))?;
    let mime = if ext == "mov" {
        "quicktime".to_string()
    } else {
        ext
    };
    let mut url = format!("data:video/{mime};base64,");
    STANDARD.encode_string(&bytes, &mut url);
    Ok(EncodedVideo { url })
}

/// The start of a long value, for error messages.
fn short(value: &str) -> &str {
    match value.char_indices().nth(40) {
        Some((i, _)) => &value[..i],
        None => value,
    }
}
