//! Synthetic video: frames drawn here (moving shapes, a grid with clock hands, or noise),
//! encoded by the `ffmpeg` program into WebM or MP4, sent as a base64 data URL.
//!
//! ffmpeg is run once per clip with one thread; clips are encoded in parallel on the
//! dataset build threads. It writes into a temporary file (MP4 needs a seekable output for
//! its index), read back and removed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};

use super::audio;

/// What the frames show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoSynth {
    /// A red circle, a green square and a blue circle moving over black, wrapping around.
    MovingShapes,
    /// A dark grid with two clock hands turning, one step per frame.
    GridClock,
    /// Random RGB pixels (the hardest content to compress).
    Noise,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoContainer {
    Webm,
    Mp4,
}

impl VideoContainer {
    pub fn name(self) -> &'static str {
        match self {
            VideoContainer::Webm => "webm",
            VideoContainer::Mp4 => "mp4",
        }
    }
}

/// An audio track muxed into each clip (`--video-audio-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct VideoAudio {
    pub sample_rate_hz: u32,
    pub channels: u16,
    pub depth: u16,
    /// None = libvorbis for WebM, libopus for MP4.
    pub codec: Option<String>,
}

/// The `--video-*` flags.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoOptions {
    /// Clips per request.
    pub batch_size: usize,
    pub width: u32,
    pub height: u32,
    pub duration_s: f64,
    pub fps: u32,
    pub synth: VideoSynth,
    pub container: VideoContainer,
    /// ffmpeg's encoder name (`libvpx-vp9`, `libx264`, ...).
    pub codec: String,
    pub audio: Option<VideoAudio>,
}

impl VideoOptions {
    /// Frames per clip: duration x fps, rounded down (at least 1).
    pub fn frames(&self) -> u32 {
        ((self.duration_s * f64::from(self.fps)) as u32).max(1)
    }
}

/// One clip as sent.
#[derive(Debug, Clone)]
pub struct EncodedVideo {
    /// `data:video/<container>;base64,...` or an input file's http(s) URL.
    pub url: String,
}

/// The program run to encode: `ffmpeg` on the PATH.
const FFMPEG: &str = "ffmpeg";

/// Checks that ffmpeg runs; the error says which flag needs it and how to install it.
pub fn check_ffmpeg(flag: &str) -> Result<(), String> {
    let ok = Command::new(FFMPEG)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{flag}: synthetic video is encoded by the ffmpeg program, which was not found on the PATH; install it (Debian/Ubuntu: apt-get install ffmpeg; macOS: brew install ffmpeg) or drop the video flags"
        ))
    }
}

/// Every frame of one clip, packed RGB24, one after another.
pub fn frames(opts: &VideoOptions, seed: u64) -> Vec<u8> {
    let (w, h) = (opts.width as usize, opts.height as usize);
    let n = opts.frames() as usize;
    let mut out = vec![0u8; w * h * 3 * n];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for (i, frame) in out.chunks_exact_mut(w * h * 3).enumerate() {
        match opts.synth {
            VideoSynth::Noise => rng.fill_bytes(frame),
            VideoSynth::MovingShapes => moving_shapes(frame, w, h, i),
            VideoSynth::GridClock => grid_clock(frame, w, h, i, opts.fps),
        }
    }
    out
}

fn put(frame: &mut [u8], w: usize, x: usize, y: usize, rgb: [u8; 3]) {
    let at = (y * w + x) * 3;
    frame[at..at + 3].copy_from_slice(&rgb);
}

fn moving_shapes(frame: &mut [u8], w: usize, h: usize, i: usize) {
    let r = (w.min(h) / 10).max(1);
    // Each shape crosses the frame in about 40 frames.
    let step = |len: usize| (len / 40).max(1);
    let shapes = [
        ((i * step(w)) % w, h / 3, true, [255, 0, 0]),
        (w / 2, (i * step(h)) % h, false, [0, 255, 0]),
        ((i * step(w)) % w, (i * step(h)) % h, true, [0, 0, 255]),
    ];
    for (cx, cy, round, rgb) in shapes {
        for dy in 0..2 * r {
            for dx in 0..2 * r {
                let (ox, oy) = (dx as isize - r as isize, dy as isize - r as isize);
                if round && ox * ox + oy * oy > (r * r) as isize {
                    continue;
                }
                // Wraps around the edges.
                let x = (cx + w * 2 + dx - r) % w;
                let y = (cy + h * 2 + dy - r) % h;
                put(frame, w, x, y, rgb);
            }
        }
    }
}

fn grid_clock(frame: &mut [u8], w: usize, h: usize, i: usize, fps: u32) {
    let cell = (w.min(h) / 8).max(2);
    for y in 0..h {
        for x in 0..w {
            let line = x % cell == 0 || y % cell == 0;
            put(frame, w, x, y, if line { [70; 3] } else { [25; 3] });
        }
    }
    let (cx, cy) = (w as f64 / 2.0, h as f64 / 2.0);
    let radius = w.min(h) as f64 * 0.4;
    // The long hand turns once a second, the short one once a minute.
    let per_turn = f64::from(fps.max(1));
    for (turns, len, rgb) in [
        (i as f64 / per_turn, 1.0, [255, 255, 255]),
        (i as f64 / per_turn / 60.0, 0.6, [255, 200, 0]),
    ] {
        let angle = turns * std::f64::consts::TAU;
        let steps = (radius * len) as usize;
        for s in 0..steps {
            let x = cx + angle.sin() * s as f64;
            let y = cy - angle.cos() * s as f64;
            for (ox, oy) in [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0)] {
                let (px, py) = ((x + ox) as usize, (y + oy) as usize);
                if px < w && py < h {
                    put(frame, w, px, py, rgb);
                }
            }
        }
    }
}

/// A temporary path no other clip of this process uses.
fn temp_path(ext: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("aiperf-video-{}-{n}.{ext}", std::process::id()))
}

/// Removes a temporary file when dropped, whatever happened.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One synthetic clip, encoded by ffmpeg.
pub fn encode(opts: &VideoOptions, seed: u64) -> anyhow::Result<EncodedVideo> {
    let raw = frames(opts, seed);
    let out = TempFile(temp_path(opts.container.name()));
    let wav = match &opts.audio {
        Some(a) => {
            let frames = (opts.duration_s * f64::from(a.sample_rate_hz)) as u64;
            let bytes = audio::noise_wav(frames, a.sample_rate_hz, a.depth, a.channels, !seed);
            let file = TempFile(temp_path("wav"));
            std::fs::write(&file.0, bytes).context("cannot write the clip's audio track")?;
            Some(file)
        }
        None => None,
    };
    run_ffmpeg(opts, &raw, wav.as_ref().map(|f| f.0.as_path()), &out.0)?;
    let bytes = std::fs::read(&out.0).context("cannot read ffmpeg's output")?;
    let mut url = format!("data:video/{};base64,", opts.container.name());
    STANDARD.encode_string(&bytes, &mut url);
    Ok(EncodedVideo { url })
}

fn run_ffmpeg(
    opts: &VideoOptions,
    raw: &[u8],
    wav: Option<&Path>,
    out: &Path,
) -> anyhow::Result<()> {
    let mut cmd = Command::new(FFMPEG);
    cmd.args(["-hide_banner", "-loglevel", "error", "-nostdin", "-y"])
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24"])
        .args(["-s", &format!("{}x{}", opts.width, opts.height)])
        .args(["-framerate", &opts.fps.to_string(), "-i", "pipe:0"]);
    if let Some(wav) = wav {
        cmd.arg("-i").arg(wav);
    }
    cmd.args(["-c:v", &opts.codec, "-pix_fmt", "yuv420p", "-threads", "1"]);
    if opts.codec.starts_with("libvpx") {
        // libvpx's default ("good", slowest) takes ~30 s for a 512x512 noise clip of 20
        // frames; the realtime setting takes ~1.5 s for the same bytes on the wire, give or
        // take 1%.
        cmd.args(["-deadline", "realtime", "-cpu-used", "8"]);
    }
    if let Some(a) = &opts.audio {
        let codec = a.codec.as_deref().unwrap_or(match opts.container {
            VideoContainer::Webm => "libvorbis",
            VideoContainer::Mp4 => "libopus",
        });
        cmd.args(["-c:a", codec, "-shortest"]);
    }
    if opts.container == VideoContainer::Mp4 {
        cmd.args(["-movflags", "+faststart"]);
    }
    cmd.args(["-f", opts.container.name()]).arg(out);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .context("cannot start ffmpeg (is it installed? apt-get install ffmpeg)")?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // Written from another thread so ffmpeg's error output can never block the writer.
    let written = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(raw));
        let output = child.wait_with_output();
        (writer.join(), output)
    });
    let output = written.1.context("ffmpeg did not finish")?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        bail!(
            "ffmpeg failed ({}) encoding a {}x{} {} clip with -c:v {}: {}",
            output.status,
            opts.width,
            opts.height,
            opts.container.name(),
            opts.codec,
            err.trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(synth: VideoSynth) -> VideoOptions {
        VideoOptions {
            batch_size: 1,
            width: 64,
            height: 48,
            duration_s: 1.3,
            fps: 4,
            synth,
            container: VideoContainer::Webm,
            codec: "libvpx-vp9".into(),
            audio: None,
        }
    }

    #[test]
    fn frames_have_the_asked_size_and_move() {
        for synth in [
            VideoSynth::MovingShapes,
            VideoSynth::GridClock,
            VideoSynth::Noise,
        ] {
            let o = opts(synth);
            assert_eq!(o.frames(), 5);
            let all = frames(&o, 1);
            let one = 64 * 48 * 3;
            assert_eq!(all.len(), one * 5);
            // Consecutive frames differ: something moves.
            assert_ne!(all[..one], all[one..2 * one], "{synth:?}");
            assert_eq!(all, frames(&o, 1));
        }
        // Moving shapes draw on black with the three colours.
        let all = frames(&opts(VideoSynth::MovingShapes), 1);
        let first = &all[..64 * 48 * 3];
        for rgb in [[255, 0, 0], [0, 255, 0], [0, 0, 255], [0, 0, 0]] {
            assert!(first.chunks(3).any(|p| p == rgb), "{rgb:?}");
        }
    }
}
