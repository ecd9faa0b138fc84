//! Video accounting: frame size and frame count read from a WebM (Matroska) or MP4 file's
//! structure, without decoding, and Qwen2-VL's token cost.
//!
//! Token rule: frames go in pairs (Qwen2-VL's temporal patch of 2; an odd last frame is
//! paired with itself), each pair costs what one image of the frame size costs (resized as
//! images are, one token per 28x28 square), plus 2 for `<|vision_start|>`/`<|vision_end|>`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::image::qwen2_vl_image_tokens;

/// What the mock reads from a clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoFacts {
    pub width: u32,
    pub height: u32,
    pub frames: u64,
}

/// Prompt tokens of a clip.
pub fn video_tokens(v: VideoFacts) -> u64 {
    let per_pair = qwen2_vl_image_tokens(v.width, v.height) - 2;
    v.frames.div_ceil(2) * per_pair + 2
}

/// Tokens of a `video_url` part: a base64 data URL is read (WebM or MP4); an http(s) URL is
/// not fetched and costs nothing. Errors are 400 messages.
pub fn video_url_tokens(url: &str) -> Result<u64, String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(0);
    }
    let b64 = url
        .strip_prefix("data:")
        .and_then(|r| r.split_once(";base64,"))
        .map(|(_, b)| b)
        .ok_or("video_url: give a data:video/<fmt>;base64,<data> URL or an http(s) URL")?;
    let bytes = STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("video_url: invalid base64: {e}"))?;
    let facts = webm_facts(&bytes)
        .or_else(|| mp4_facts(&bytes))
        .ok_or("video_url: cannot read the clip: only WebM and MP4 are supported")?;
    Ok(video_tokens(facts))
}

/// An EBML variable-length number at `at`: (value, length). `keep_marker` for element ids.
fn vint(b: &[u8], at: usize, keep_marker: bool) -> Option<(u64, usize)> {
    let first = *b.get(at)?;
    let len = first.leading_zeros() as usize + 1;
    if len > 8 {
        return None;
    }
    let mut v = if keep_marker {
        u64::from(first)
    } else {
        u64::from(first) & ((1u64 << (8 - len)) - 1)
    };
    for i in 1..len {
        v = (v << 8) | u64::from(*b.get(at + i)?);
    }
    Some((v, len))
}

fn uint(b: &[u8]) -> u64 {
    b.iter().fold(0, |v, &x| (v << 8) | u64::from(x))
}

#[derive(Default)]
struct Matroska {
    /// (track number, is video, width, height) of the track entry being read.
    entry: (u64, bool, u32, u32),
    video_track: Option<(u64, u32, u32)>,
    /// Blocks per track number.
    blocks: std::collections::HashMap<u64, u64>,
}

const SEGMENT: u64 = 0x1853_8067;
const TRACKS: u64 = 0x1654_AE6B;
const TRACK_ENTRY: u64 = 0xAE;
const VIDEO: u64 = 0xE0;
const CLUSTER: u64 = 0x1F43_B675;
const BLOCK_GROUP: u64 = 0xA0;

fn walk(b: &[u8], mut at: usize, end: usize, m: &mut Matroska) -> Option<()> {
    while at < end {
        let (id, id_len) = vint(b, at, true)?;
        let (size, size_len) = vint(b, at + id_len, false)?;
        let start = at + id_len + size_len;
        let unknown = size == (1u64 << (7 * size_len)) - 1;
        let stop = if unknown {
            end
        } else {
            start.saturating_add(size as usize).min(end)
        };
        let data = b.get(start..stop)?;
        match id {
            SEGMENT | TRACKS | VIDEO | CLUSTER | BLOCK_GROUP => walk(b, start, stop, m)?,
            TRACK_ENTRY => {
                m.entry = (0, false, 0, 0);
                walk(b, start, stop, m)?;
                let (n, video, w, h) = m.entry;
                if video && m.video_track.is_none() {
                    m.video_track = Some((n, w, h));
                }
            }
            0xD7 => m.entry.0 = uint(data),
            0x83 => m.entry.1 = uint(data) == 1,
            0xB0 => m.entry.2 = uint(data) as u32,
            0xBA => m.entry.3 = uint(data) as u32,
            // SimpleBlock and Block start with their track number.
            0xA3 | 0xA1 => {
                let (track, _) = vint(data, 0, false)?;
                *m.blocks.entry(track).or_default() += 1;
            }
            _ => {}
        }
        at = stop;
    }
    Some(())
}

/// Frame size and count of a WebM/Matroska file's first video track.
pub fn webm_facts(b: &[u8]) -> Option<VideoFacts> {
    if !b.starts_with(&[0x1A, 0x45, 0xDF, 0xA3]) {
        return None;
    }
    let mut m = Matroska::default();
    walk(b, 0, b.len(), &mut m)?;
    let (track, width, height) = m.video_track?;
    Some(VideoFacts {
        width,
        height,
        frames: m.blocks.get(&track).copied().unwrap_or(0),
    })
}

/// Frame size (`tkhd`) and sample count (`stsz`) of an MP4 file's first video track
/// (`hdlr` = `vide`).
pub fn mp4_facts(b: &[u8]) -> Option<VideoFacts> {
    if b.get(4..8)? != b"ftyp" {
        return None;
    }
    let mut found = None;
    mp4_walk(b, 0, b.len(), &mut Mp4Track::default(), &mut found);
    found
}

#[derive(Default, Clone, Copy)]
struct Mp4Track {
    video: bool,
    width: u32,
    height: u32,
    samples: u64,
}

fn mp4_walk(b: &[u8], mut at: usize, end: usize, t: &mut Mp4Track, found: &mut Option<VideoFacts>) {
    while at + 8 <= end && found.is_none() {
        let size32 = uint(&b[at..at + 4]) as usize;
        let kind = &b[at + 4..at + 8];
        let (header, size) = match size32 {
            0 => (8, end - at),
            1 if at + 16 <= end => (16, uint(&b[at + 8..at + 16]) as usize),
            s => (8, s),
        };
        if size < header {
            return;
        }
        let stop = at.saturating_add(size).min(end);
        let body = &b[(at + header).min(stop)..stop];
        match kind {
            b"moov" | b"mdia" | b"minf" | b"stbl" => mp4_walk(b, at + header, stop, t, found),
            b"trak" => {
                let mut track = Mp4Track::default();
                mp4_walk(b, at + header, stop, &mut track, found);
                if track.video && found.is_none() {
                    *found = Some(VideoFacts {
                        width: track.width,
                        height: track.height,
                        frames: track.samples,
                    });
                }
            }
            // Width and height are 16.16 fixed point, the last 8 bytes of the box.
            b"tkhd" if body.len() >= 8 => {
                let n = body.len();
                t.width = (uint(&body[n - 8..n - 4]) >> 16) as u32;
                t.height = (uint(&body[n - 4..n]) >> 16) as u32;
            }
            b"hdlr" if body.len() >= 12 => t.video = &body[8..12] == b"vide",
            b"stsz" if body.len() >= 12 => t.samples = uint(&body[8..12]),
            _ => {}
        }
        at = stop;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_pair_frames_and_resize_like_images() {
        // 512x512 -> 504x504 = 18x18 tokens per pair of frames.
        let v = VideoFacts {
            width: 512,
            height: 512,
            frames: 20,
        };
        assert_eq!(video_tokens(v), 10 * 324 + 2);
        assert_eq!(video_tokens(VideoFacts { frames: 3, ..v }), 2 * 324 + 2);
    }

    #[test]
    fn a_hand_made_webm_is_read() {
        fn el(id: &[u8], data: &[u8]) -> Vec<u8> {
            let mut v = id.to_vec();
            v.push(0x80 | data.len() as u8);
            v.extend_from_slice(data);
            v
        }
        let video = el(
            &[0xE0],
            &[el(&[0xB0], &[0x01, 0x40]), el(&[0xBA], &[0xF0])].concat(),
        );
        let entry = el(
            &[0xAE],
            &[el(&[0xD7], &[1]), el(&[0x83], &[1]), video].concat(),
        );
        let tracks = el(&[0x16, 0x54, 0xAE, 0x6B], &entry);
        let block = el(&[0xA3], &[0x81, 0, 0, 0x80, 9, 9]);
        let cluster = el(
            &[0x1F, 0x43, 0xB6, 0x75],
            &[block.clone(), block.clone(), block].concat(),
        );
        let segment = el(&[0x18, 0x53, 0x80, 0x67], &[tracks, cluster].concat());
        let file = [el(&[0x1A, 0x45, 0xDF, 0xA3], &[]), segment].concat();
        assert_eq!(
            webm_facts(&file),
            Some(VideoFacts {
                width: 320,
                height: 240,
                frames: 3
            })
        );
        assert_eq!(mp4_facts(&file), None);
    }
}
