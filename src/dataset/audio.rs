//! Synthetic audio: Gaussian noise written as a PCM WAV file, and the header facts of WAV
//! files given in an input file.
//!
//! Samples are N(0, 0.3) clipped to [-1, 1] and scaled to the bit depth's largest value, as
//! AIPerf makes them; 8-bit samples are stored unsigned (WAV's 8-bit PCM).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, Normal};

/// The `--audio-*` flags.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioOptions {
    /// Clips per request.
    pub batch_size: usize,
    /// Clip length ~ Normal(mean, stddev) seconds, drawn again below `MIN_SECONDS`.
    pub length_mean_s: f64,
    pub length_stddev_s: f64,
    /// Picked uniformly per clip.
    pub sample_rates_hz: Vec<u32>,
    /// Bits per sample, picked uniformly per clip: 8, 16, 24 or 32.
    pub depths: Vec<u16>,
    pub channels: u16,
}

/// The shortest clip AIPerf makes.
pub const MIN_SECONDS: f64 = 0.01;

/// Bit depths WAV PCM is written with.
pub const DEPTHS: [u16; 4] = [8, 16, 24, 32];

/// One audio clip as sent: base64 of the file and its format name.
#[derive(Debug, Clone)]
pub struct EncodedAudio {
    pub base64: String,
    /// "wav" or "mp3".
    pub format: &'static str,
    /// Seconds of sound, when known (synthetic clips and WAV files).
    pub duration_s: Option<f64>,
}

/// What a WAV header says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WavInfo {
    pub sample_rate: u32,
    pub channels: u16,
    pub bits: u16,
    /// Samples per channel.
    pub frames: u64,
}

impl WavInfo {
    pub fn duration_s(&self) -> f64 {
        self.frames as f64 / f64::from(self.sample_rate.max(1))
    }
}

/// A clip of noise: `frames` samples per channel at `sample_rate` Hz, `bits` per sample.
pub fn noise_wav(frames: u64, sample_rate: u32, bits: u16, channels: u16, seed: u64) -> Vec<u8> {
    let bytes_per_sample = usize::from(bits / 8);
    let samples = frames as usize * usize::from(channels);
    let data_len = samples * bytes_per_sample;
    let mut out = Vec::with_capacity(44 + data_len);
    wav_header(&mut out, sample_rate, bits, channels, data_len as u32);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let normal = Normal::new(0.0f64, 0.3).expect("a valid normal");
    // 8-bit is scaled as 16-bit, then kept in its high byte and made unsigned.
    let max = ((1u64 << (bits.max(16) - 1)) - 1) as f64;
    for _ in 0..samples {
        let v = (normal.sample(&mut rng).clamp(-1.0, 1.0) * max) as i64;
        match bits {
            8 => out.push(((v >> 8) + 128) as u8),
            16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            24 => out.extend_from_slice(&(v as i32).to_le_bytes()[..3]),
            _ => out.extend_from_slice(&(v as i32).to_le_bytes()),
        }
    }
    out
}

fn wav_header(out: &mut Vec<u8>, sample_rate: u32, bits: u16, channels: u16, data_len: u32) {
    let block_align = channels * (bits / 8);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&sample_rate.to_le_bytes());
    out.extend_from_slice(&(sample_rate * u32::from(block_align)).to_le_bytes());
    out.extend_from_slice(&block_align.to_le_bytes());
    out.extend_from_slice(&bits.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
}

/// Reads a WAV file's format and length from its chunks (`fmt ` and `data`), without
/// touching the samples. None when it is not a RIFF/WAVE file.
pub fn wav_info(bytes: &[u8]) -> Option<WavInfo> {
    if bytes.get(0..4)? != b"RIFF" || bytes.get(8..12)? != b"WAVE" {
        return None;
    }
    let (mut at, mut fmt) = (12usize, None);
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().ok()?) as usize;
        let body = at + 8;
        if id == b"fmt " {
            let f = bytes.get(body..body + 16)?;
            let channels = u16::from_le_bytes([f[2], f[3]]);
            let sample_rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
            let bits = u16::from_le_bytes([f[14], f[15]]);
            fmt = Some((sample_rate, channels, bits));
        } else if id == b"data" {
            let (sample_rate, channels, bits) = fmt?;
            let frame_bytes = u64::from(channels) * u64::from(bits).div_ceil(8);
            // A streamed file may give a bogus length: count what is there.
            let data = (len as u64).min((bytes.len() - body) as u64);
            return Some(WavInfo {
                sample_rate,
                channels,
                bits,
                frames: data / frame_bytes.max(1),
            });
        }
        at = body + len + (len & 1);
    }
    None
}

/// A clip as sent: its base64 text.
pub fn encode(wav: &[u8], duration_s: f64) -> EncodedAudio {
    EncodedAudio {
        base64: STANDARD.encode(wav),
        format: "wav",
        duration_s: Some(duration_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_says_what_was_asked_for() {
        for bits in DEPTHS {
            for channels in [1, 2] {
                let wav = noise_wav(1600, 16_000, bits, channels, 7);
                assert_eq!(wav.len(), 44 + 1600 * usize::from(channels * bits / 8));
                let info = wav_info(&wav).unwrap();
                assert_eq!(
                    info,
                    WavInfo {
                        sample_rate: 16_000,
                        channels,
                        bits,
                        frames: 1600
                    }
                );
                assert!((info.duration_s() - 0.1).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn samples_are_noise_of_the_right_spread() {
        let wav = noise_wav(20_000, 16_000, 16, 1, 3);
        let samples: Vec<f64> = wav[44..]
            .chunks(2)
            .map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])) / 32767.0)
            .collect();
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let std =
            (samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / samples.len() as f64).sqrt();
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((std - 0.3).abs() < 0.01, "{std}");
        // 8-bit: unsigned around 128.
        let eight = noise_wav(5000, 8000, 8, 1, 3);
        let avg = eight[44..].iter().map(|&b| f64::from(b)).sum::<f64>() / 5000.0;
        assert!((avg - 128.0).abs() < 2.0, "{avg}");
        // Same seed, same bytes.
        assert_eq!(
            noise_wav(100, 8000, 24, 2, 9),
            noise_wav(100, 8000, 24, 2, 9)
        );
        assert_ne!(
            noise_wav(100, 8000, 24, 2, 9),
            noise_wav(100, 8000, 24, 2, 10)
        );
    }

    #[test]
    fn non_wav_bytes_have_no_info() {
        assert_eq!(wav_info(b"ID3\x04 not a wav"), None);
        assert_eq!(wav_info(b"RIFF\0\0\0\0WAVE"), None);
    }
}
