//! `--audio-*` and `--video-*` into the dataset's media options, with their checks.

use super::{ConfigError, config_error};
use crate::cli::ProfileArgs;
use crate::cli::media::{AudioFormat, MediaArgs, VideoFormat, VideoSynthType};
use crate::dataset::MAX_IMAGE_SIDE;
use crate::dataset::audio::{AudioOptions, DEPTHS, MIN_SECONDS};
use crate::dataset::media::MediaOptions;
use crate::dataset::video::{VideoAudio, VideoContainer, VideoOptions, VideoSynth};
use crate::endpoint::EndpointType;

/// Highest sample rate accepted (Hz).
const MAX_SAMPLE_RATE: f64 = 384_000.0;
/// Most frames a clip may have: beyond, the frames alone would take gigabytes.
const MAX_FRAMES: f64 = 10_000.0;

const AUDIO_SHAPE_FLAGS: [&str; 6] = [
    "audio_length_stddev",
    "audio_format",
    "audio_depths",
    "audio_sample_rates",
    "audio_num_channels",
    "audio_batch_size",
];
const VIDEO_SHAPE_FLAGS: [&str; 10] = [
    "video_duration",
    "video_fps",
    "video_batch_size",
    "video_synth_type",
    "video_format",
    "video_codec",
    "video_audio_num_channels",
    "video_audio_sample_rate",
    "video_audio_depth",
    "video_audio_codec",
];

fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// Checks the media flags against each other and the endpoint.
pub(super) fn media_options(
    a: &ProfileArgs,
    endpoint: EndpointType,
) -> Result<MediaOptions, ConfigError> {
    let m = &a.media;
    if m.audio_format == AudioFormat::Mp3 {
        return Err(config_error(
            "--audio-format mp3: this build has no MP3 encoder; use --audio-format wav (the default)",
        ));
    }
    let audio = audio_options(a, m)?;
    let video = video_options(a, m)?;
    if audio.is_some()
        && !matches!(
            endpoint,
            EndpointType::Chat | EndpointType::AudioTranscription | EndpointType::Responses
        )
    {
        return Err(config_error(format!(
            "--audio-length-mean: audio needs --endpoint-type chat, responses or audio_transcription, not {}",
            endpoint.as_str()
        )));
    }
    if video.is_some() && endpoint != EndpointType::Chat {
        return Err(config_error(format!(
            "--video-width/--video-height: video needs --endpoint-type chat, not {}",
            endpoint.as_str()
        )));
    }
    if endpoint == EndpointType::AudioTranscription {
        if a.osl_mean.is_some() {
            return Err(config_error(
                "--output-tokens-mean: a transcription request has no output limit; drop it",
            ));
        }
        if audio.is_none() && a.input_file.is_none() {
            return Err(config_error(
                "--endpoint-type audio_transcription needs audio: give --audio-length-mean SECONDS (> 0), or an --input-file whose lines have \"audio\"",
            ));
        }
    }
    Ok(MediaOptions { audio, video })
}

fn audio_options(a: &ProfileArgs, m: &MediaArgs) -> Result<Option<AudioOptions>, ConfigError> {
    let mean = m.audio_length_mean;
    if !mean.is_finite() || mean < 0.0 {
        return Err(config_error(format!(
            "--audio-length-mean {mean}: give a length in seconds >= 0 (0 sends no audio)"
        )));
    }
    if mean > 0.0 && mean < MIN_SECONDS {
        return Err(config_error(format!(
            "--audio-length-mean {mean}: clips are at least {MIN_SECONDS} s; give 0.01 or more (or 0 for no audio)"
        )));
    }
    super::check_stddev("--audio-length-stddev", m.audio_length_stddev)?;
    if !(1..=2).contains(&m.audio_num_channels) {
        return Err(config_error(format!(
            "--audio-num-channels {}: give 1 (mono) or 2 (stereo)",
            m.audio_num_channels
        )));
    }
    if let Some(d) = m.audio_depths.iter().find(|d| !DEPTHS.contains(d)) {
        return Err(config_error(format!(
            "--audio-depths {d}: give bit depths among 8, 16, 24 and 32"
        )));
    }
    let mut rates = Vec::with_capacity(m.audio_sample_rates.len());
    for &khz in &m.audio_sample_rates {
        let hz = khz * 1000.0;
        if !(1000.0..=MAX_SAMPLE_RATE).contains(&hz) {
            return Err(config_error(format!(
                "--audio-sample-rates {khz}: give rates in kHz from 1 to 384, e.g. 16 or 44.1"
            )));
        }
        rates.push(hz.round() as u32);
    }
    let on = mean > 0.0 && m.audio_batch_size > 0;
    if mean == 0.0
        && let Some(id) = AUDIO_SHAPE_FLAGS.iter().find(|id| a.typed(id))
    {
        return Err(config_error(format!(
            "{}: audio is off because --audio-length-mean is 0; give --audio-length-mean SECONDS, or drop it",
            flag(id)
        )));
    }
    if on && a.input_file.is_some() {
        return Err(config_error(
            "--audio-length-mean: synthetic audio cannot be used with --input-file; the file's \"audio\" fields are sent instead",
        ));
    }
    Ok(on.then(|| AudioOptions {
        batch_size: m.audio_batch_size,
        length_mean_s: mean,
        length_stddev_s: m.audio_length_stddev,
        sample_rates_hz: rates,
        depths: m.audio_depths.clone(),
        channels: m.audio_num_channels,
    }))
}

fn video_options(a: &ProfileArgs, m: &MediaArgs) -> Result<Option<VideoOptions>, ConfigError> {
    let (width, height) = match (m.video_width, m.video_height) {
        (None, None) => {
            if let Some(id) = VIDEO_SHAPE_FLAGS.iter().find(|id| a.typed(id)) {
                return Err(config_error(format!(
                    "{}: video is off because --video-width and --video-height are not given; give both, or drop it",
                    flag(id)
                )));
            }
            return Ok(None);
        }
        (Some(w), Some(h)) => (w, h),
        _ => {
            return Err(config_error(
                "--video-width/--video-height: give both a width and a height, or neither",
            ));
        }
    };
    for (name, v) in [("--video-width", width), ("--video-height", height)] {
        if !(2..=MAX_IMAGE_SIDE).contains(&v) || v % 2 == 1 {
            return Err(config_error(format!(
                "{name} {v}: give an even number of pixels from 2 to {MAX_IMAGE_SIDE} (frames are encoded as yuv420p, which needs even sides)"
            )));
        }
    }
    let d = m.video_duration;
    if !d.is_finite() || d <= 0.0 {
        return Err(config_error(format!(
            "--video-duration {d}: give a length in seconds > 0"
        )));
    }
    if m.video_fps == 0 {
        return Err(config_error(
            "--video-fps 0: give 1 or more frames per second",
        ));
    }
    let frames = d * f64::from(m.video_fps);
    if !(1.0..=MAX_FRAMES).contains(&frames) {
        return Err(config_error(format!(
            "--video-duration {d} x --video-fps {}: {frames} frames per clip; give between 1 and {MAX_FRAMES}",
            m.video_fps
        )));
    }
    if m.video_codec.trim().is_empty() {
        return Err(config_error(
            "--video-codec: empty; give an ffmpeg encoder, e.g. libvpx-vp9",
        ));
    }
    if a.input_file.is_some() {
        return Err(config_error(
            "--video-width/--video-height: synthetic video cannot be used with --input-file; the file's \"video\" fields are sent instead",
        ));
    }
    let audio = match m.video_audio_num_channels {
        0 => None,
        1 | 2 => {
            let rate = m.video_audio_sample_rate;
            let hz = if rate <= 1000.0 { rate * 1000.0 } else { rate };
            if !(1000.0..=MAX_SAMPLE_RATE).contains(&hz) {
                return Err(config_error(format!(
                    "--video-audio-sample-rate {rate}: give a rate in Hz from 1000 to 384000 (or kHz up to 1000)"
                )));
            }
            if !DEPTHS.contains(&m.video_audio_depth) {
                return Err(config_error(format!(
                    "--video-audio-depth {}: give 8, 16, 24 or 32",
                    m.video_audio_depth
                )));
            }
            Some(VideoAudio {
                sample_rate_hz: hz.round() as u32,
                channels: m.video_audio_num_channels,
                depth: m.video_audio_depth,
                codec: m.video_audio_codec.clone().filter(|c| !c.trim().is_empty()),
            })
        }
        n => {
            return Err(config_error(format!(
                "--video-audio-num-channels {n}: give 0 (no audio track), 1 or 2"
            )));
        }
    };
    Ok((m.video_batch_size > 0).then(|| VideoOptions {
        batch_size: m.video_batch_size,
        width,
        height,
        duration_s: d,
        fps: m.video_fps,
        synth: match m.video_synth_type {
            VideoSynthType::MovingShapes => VideoSynth::MovingShapes,
            VideoSynthType::GridClock => VideoSynth::GridClock,
            VideoSynthType::Noise => VideoSynth::Noise,
        },
        container: match m.video_format {
            VideoFormat::Webm => VideoContainer::Webm,
            VideoFormat::Mp4 => VideoContainer::Mp4,
        },
        codec: m.video_codec.trim().to_string(),
        audio,
    }))
}
