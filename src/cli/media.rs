//! Audio and video input flags (AIPerf's `--audio-*` and `--video-*`).

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Default, Args)]
pub struct MediaArgs {
    /// Mean audio clip length in seconds (0, the default, sends no audio). Clips are
    /// Gaussian noise; lengths below 0.01 s are drawn again.
    #[arg(long, default_value_t = 0.0, help_heading = "Audio")]
    pub audio_length_mean: f64,
    /// Standard deviation of the audio clip length in seconds.
    #[arg(long, default_value_t = 0.0, help_heading = "Audio")]
    pub audio_length_stddev: f64,
    /// Audio clips per request.
    #[arg(long, visible_aliases = ["batch-size-audio"], default_value_t = 1, help_heading = "Audio")]
    pub audio_batch_size: usize,
    /// File format of the clips: `wav` (PCM). `mp3` is refused: this build has no MP3
    /// encoder.
    #[arg(long, value_enum, default_value_t = AudioFormat::Wav, help_heading = "Audio")]
    pub audio_format: AudioFormat,
    /// Bits per sample, one picked at random per clip: 8, 16, 24 or 32.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [16u16], help_heading = "Audio")]
    pub audio_depths: Vec<u16>,
    /// Sample rates in kHz, one picked at random per clip (16 = 16000 Hz).
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [16.0f64], help_heading = "Audio")]
    pub audio_sample_rates: Vec<f64>,
    /// Channels per clip: 1 (mono) or 2 (stereo).
    #[arg(long, default_value_t = 1, help_heading = "Audio")]
    pub audio_num_channels: u16,

    /// Video frame width in pixels; with --video-height, turns synthetic video on (each clip
    /// encoded by the ffmpeg program, which must be installed).
    #[arg(long, help_heading = "Video")]
    pub video_width: Option<u32>,
    /// Video frame height in pixels.
    #[arg(long, help_heading = "Video")]
    pub video_height: Option<u32>,
    /// Seconds per clip; frames = duration x fps, rounded down.
    #[arg(long, default_value_t = 5.0, help_heading = "Video")]
    pub video_duration: f64,
    /// Frames per second.
    #[arg(long, default_value_t = 4, help_heading = "Video")]
    pub video_fps: u32,
    /// Video clips per request.
    #[arg(long, visible_aliases = ["batch-size-video"], default_value_t = 1, help_heading = "Video")]
    pub video_batch_size: usize,
    /// What the frames show: `moving-shapes` (coloured shapes over black), `grid-clock` (a
    /// grid with turning clock hands) or `noise` (random pixels, the largest files).
    #[arg(long, value_enum, default_value_t = VideoSynthType::MovingShapes, help_heading = "Video")]
    pub video_synth_type: VideoSynthType,
    /// Container: `webm` or `mp4`.
    #[arg(long, value_enum, default_value_t = VideoFormat::Webm, help_heading = "Video")]
    pub video_format: VideoFormat,
    /// ffmpeg video encoder, e.g. `libvpx-vp9` (the default), `libvpx`, `libx264`.
    #[arg(long, default_value = "libvpx-vp9", help_heading = "Video")]
    pub video_codec: String,
    /// Audio track per clip: 0 (none, the default), 1 or 2 channels of noise.
    #[arg(long, default_value_t = 0, help_heading = "Video")]
    pub video_audio_num_channels: u16,
    /// Sample rate of the clips' audio track in Hz (values up to 1000 are taken as kHz).
    #[arg(long, default_value_t = 44100.0, help_heading = "Video")]
    pub video_audio_sample_rate: f64,
    /// Bits per sample of the audio track: 8, 16, 24 or 32.
    #[arg(long, default_value_t = 16, help_heading = "Video")]
    pub video_audio_depth: u16,
    /// ffmpeg audio encoder of the track (default: libvorbis for webm, libopus for mp4).
    #[arg(long, help_heading = "Video")]
    pub video_audio_codec: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum AudioFormat {
    #[default]
    Wav,
    Mp3,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum VideoSynthType {
    #[default]
    MovingShapes,
    GridClock,
    Noise,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum VideoFormat {
    #[default]
    Webm,
    Mp4,
}
