//! Builds a request body around its image and video data instead of copying them into it.
//!
//! An image's data URL is most of a vision body (~1 MB for a 512x512 PNG). Serializing the
//! body the plain way copies every URL into a new buffer and frees the original, so for a
//! while each image exists twice, and the freed URL, allocated by the thread that encoded
//! it, mostly stays resident in that thread's allocator arena. Instead the body is
//! serialized with a short placeholder in place of each URL, then assembled inside the
//! largest URL's own buffer (its image is moved into place, the rest written around it):
//! the bytes are the same as the plain serialization's.

use std::sync::OnceLock;

use memchr::memmem;
use rand::Rng;
use serde_json::Value;

use crate::dataset::EncodedImage;
use crate::dataset::video::EncodedVideo;

/// The text standing in for image `i`'s URL: with a random number drawn once per process,
/// so no input can contain it by chance or on purpose.
fn placeholder(i: usize) -> String {
    static NONCE: OnceLock<u64> = OnceLock::new();
    let nonce = NONCE.get_or_init(|| rand::rng().next_u64());
    format!("aiperf-image-{nonce:016x}-{i}")
}

/// True when JSON would escape some byte of `s` (serde_json escapes only these).
fn needs_escape(s: &str) -> bool {
    s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Swaps each image's URL, then each video's, for its placeholder and returns them with
/// their URLs (videos as URL-only images), or None (nothing swapped) when there is nothing
/// to gain: no image or video, or a URL JSON would escape, which the plain serialization
/// handles.
pub fn take_urls(
    images: &mut [EncodedImage],
    videos: &mut [EncodedVideo],
) -> Option<Vec<EncodedImage>> {
    if (images.is_empty() && videos.is_empty())
        || images.iter().any(|img| needs_escape(&img.data_url))
        || videos.iter().any(|v| needs_escape(&v.url))
    {
        return None;
    }
    let mut taken: Vec<EncodedImage> = images
        .iter_mut()
        .enumerate()
        .map(|(i, img)| EncodedImage {
            data_url: std::mem::replace(&mut img.data_url, placeholder(i)),
            width: img.width,
            height: img.height,
            format: img.format,
            uuid: img.uuid.clone(),
        })
        .collect();
    for v in videos.iter_mut() {
        let i = taken.len();
        taken.push(EncodedImage {
            data_url: std::mem::replace(&mut v.url, placeholder(i)),
            width: 0,
            height: 0,
            format: "video",
            uuid: None,
        });
    }
    Some(taken)
}

/// The body `skeleton` (serialized with placeholders) with each placeholder replaced by its
/// image's URL, assembled in the largest URL's buffer. Gives the images back when some
/// placeholder is not found exactly once (which no input can cause; kept as a safety net).
pub fn assemble(
    skeleton: &[u8],
    mut images: Vec<EncodedImage>,
) -> Result<Vec<u8>, Vec<EncodedImage>> {
    // (where the placeholder's text starts in the skeleton, its length, image index)
    let mut holes = Vec::with_capacity(images.len());
    for i in 0..images.len() {
        let quoted = serde_json::to_string(&placeholder(i)).expect("a string serializes");
        let needle = format!("\"url\":{quoted}");
        let mut found = memmem::find_iter(skeleton, needle.as_bytes());
        match (found.next(), found.next()) {
            (Some(at), None) => {
                holes.push((at + needle.len() - quoted.len() + 1, quoted.len() - 2, i))
            }
            _ => return Err(images),
        }
    }
    holes.sort_unstable();

    let url_lens: Vec<usize> = images.iter().map(|img| img.data_url.len()).collect();
    let total = skeleton.len() + url_lens.iter().sum::<usize>()
        - holes.iter().map(|&(_, len, _)| len).sum::<usize>();
    let host = (0..images.len())
        .max_by_key(|&i| url_lens[i])
        .expect("there is an image");

    // Where each image's URL lands in the body.
    let mut starts = vec![0; images.len()];
    let (mut from, mut to) = (0, 0);
    for &(at, len, i) in &holes {
        to += at - from;
        starts[i] = to;
        to += url_lens[i];
        from = at + len;
    }

    let mut body = std::mem::take(&mut images[host].data_url).into_bytes();
    body.reserve_exact(total - body.len());
    body.resize(total, 0);
    // Move the host image to its place first; everything else is written around it.
    body.copy_within(0..url_lens[host], starts[host]);
    let (mut from, mut to) = (0, 0);
    for &(at, len, i) in &holes {
        body[to..to + at - from].copy_from_slice(&skeleton[from..at]);
        to += at - from;
        if i != host {
            body[to..to + url_lens[i]].copy_from_slice(images[i].data_url.as_bytes());
        }
        to += url_lens[i];
        from = at + len;
    }
    body[to..].copy_from_slice(&skeleton[from..]);
    Ok(body)
}

/// Puts the URLs back into a body value that still holds placeholders (the fallback when
/// `assemble` cannot place them).
pub fn restore_urls(value: &mut Value, images: &mut [EncodedImage]) {
    match value {
        Value::String(s) => {
            if let Some(img) = (0..images.len())
                .find(|&i| *s == placeholder(i))
                .map(|i| &mut images[i])
            {
                *s = std::mem::take(&mut img.data_url);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| restore_urls(v, images)),
        Value::Object(map) => map.values_mut().for_each(|v| restore_urls(v, images)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::image::{ImageEncoding, data_url};
    use crate::dataset::{Conversation, Dataset, DatasetSampling, Entry};
    use crate::endpoint::request::merge_extras;
    use crate::endpoint::{BodyOptions, EndpointType, chat, prepare_dataset};
    use serde_json::{Map, json};

    fn image(len: usize, seed: u8) -> EncodedImage {
        let bytes: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect();
        EncodedImage {
            data_url: data_url(ImageEncoding::Png, &bytes),
            width: 8,
            height: 8,
            format: "png",
            // Some images carry an input file's id, which both paths must send.
            uuid: (seed % 2 == 1).then(|| format!("id-{seed}")),
        }
    }

    fn entry(text: &str, images: Vec<EncodedImage>) -> Entry {
        Entry {
            text: text.into(),
            input_tokens: 3,
            images,
            audios: Vec::new(),
            videos: Vec::new(),
            max_output_tokens: Some(7),
            extra_texts: Vec::new(),
            role: None,
            extra: Map::new(),
            timestamp_ms: None,
            delay: None,
            own: None,
        }
    }

    fn options() -> BodyOptions {
        let mut extra_inputs = Map::new();
        extra_inputs.insert("temperature".into(), json!(0.5));
        extra_inputs.insert("zeta".into(), json!({"url": "not an image", "n": [1, 2]}));
        BodyOptions {
            model: "m".into(),
            streaming: true,
            use_legacy_max_tokens: false,
            extra_inputs,
        }
    }

    /// The body the plain way: serialize the whole value, URLs included.
    fn plain_body(mut entry: Entry, system: Option<&str>, opts: &BodyOptions) -> Vec<u8> {
        let extra = std::mem::take(&mut entry.extra);
        let mut body = chat::body(entry, system, opts);
        merge_extras(&mut body, opts, extra);
        serde_json::to_vec(&body).unwrap()
    }

    fn prepared_body(entry: Entry, system: Option<&str>, opts: &BodyOptions) -> bytes::Bytes {
        let dataset = Dataset {
            conversations: vec![Conversation {
                session_id: None,
                system: system.map(str::to_string),
                context: None,
                turns: vec![entry],
            }],
            sampling: DatasetSampling::Sequential,
        };
        let mut convs = prepare_dataset(EndpointType::Chat, dataset, opts).unwrap();
        convs.remove(0).first.body
    }

    #[test]
    fn assembled_bodies_equal_the_plain_serialization() {
        let opts = options();
        let mut with_everything = entry("say \"hi\"\n\tand é 🎉", vec![image(900, 1)]);
        with_everything.extra_texts = vec!["more \\ text".into(), String::new()];
        with_everything.role = Some("user".into());
        with_everything.extra.insert("top_p".into(), json!(0.9));
        let video = |n: usize| EncodedVideo {
            url: format!("data:video/webm;base64,{}", "QUJD".repeat(n)),
        };
        let mut with_video = entry("v", vec![image(300, 8)]);
        with_video.videos = vec![video(5000), video(10)];
        with_video.audios = vec![crate::dataset::audio::encode(b"RIFFxxxx", 0.5)];
        let mut video_only = entry("only", Vec::new());
        video_only.videos = vec![video(20)];
        let cases = vec![
            (entry("no images", Vec::new()), None),
            (entry("one", vec![image(3000, 1)]), None),
            (
                entry("one with system", vec![image(10, 2)]),
                Some("be \"brief\""),
            ),
            // The largest image is not the first: it hosts the body from the middle.
            (
                entry("three", vec![image(100, 3), image(5000, 4), image(2000, 5)]),
                None,
            ),
            (entry("", vec![image(1, 6), image(1, 7)]), None),
            (with_everything, Some("sys")),
            // Videos are spliced like images, after them; audio goes the plain way.
            (with_video, None),
            (video_only, None),
        ];
        for (e, system) in cases {
            let expected = plain_body(e.clone(), system, &opts);
            let body = prepared_body(e, system, &opts);
            assert_eq!(
                String::from_utf8_lossy(&body),
                String::from_utf8_lossy(&expected)
            );
        }
    }

    #[test]
    fn the_body_is_built_in_the_largest_image_buffer() {
        let opts = options();
        let small = image(500, 1);
        let large = image(40_000, 2);
        let large_buffer = large.data_url.as_ptr();
        assert!(large.data_url.capacity() >= large.data_url.len() + 4096);
        let body = prepared_body(entry("x", vec![small, large]), Some("s"), &opts);
        assert_eq!(body.as_ptr(), large_buffer, "the body was copied");
    }

    #[test]
    fn a_video_hosts_the_body_too() {
        let url = format!("data:video/mp4;base64,{}", "QUJD".repeat(20_000));
        let mut url = url.into_bytes();
        url.reserve(8192);
        let url = String::from_utf8(url).unwrap();
        let buffer = url.as_ptr();
        let mut e = entry("x", vec![image(500, 1)]);
        e.videos = vec![EncodedVideo { url }];
        let body = prepared_body(e, None, &options());
        assert_eq!(body.as_ptr(), buffer, "the body was copied");
    }

    #[test]
    fn urls_that_need_escaping_take_the_plain_path() {
        let opts = options();
        let quoted = EncodedImage {
            data_url: "https://example.com/a\"b\\c".into(),
            width: 1,
            height: 1,
            format: "png",
            uuid: None,
        };
        assert!(take_urls(&mut [quoted.clone()], &mut []).is_none());
        let e = entry("t", vec![image(50, 1), quoted]);
        let expected = plain_body(e.clone(), None, &opts);
        assert_eq!(prepared_body(e, None, &opts), expected);
    }

    #[test]
    fn missing_placeholders_give_the_images_back() {
        let mut images = vec![image(20, 1), image(30, 2)];
        let urls: Vec<String> = images.iter().map(|i| i.data_url.clone()).collect();
        let taken = take_urls(&mut images, &mut []).unwrap();
        assert_eq!(images[1].data_url, placeholder(1));
        // A skeleton without the second placeholder.
        let skeleton = serde_json::to_vec(&json!({"a": {"url": placeholder(0)}})).unwrap();
        let mut back = assemble(&skeleton, taken).unwrap_err();
        let mut value = json!({"a": {"url": placeholder(0)}, "b": [placeholder(1)]});
        restore_urls(&mut value, &mut back);
        assert_eq!(value["a"]["url"], urls[0]);
        assert_eq!(value["b"][0], urls[1]);
    }
}
