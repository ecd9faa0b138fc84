//! Image accounting: header-only size parsing, data-URL decoding and Qwen2-VL's token cost.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Qwen2-VL merges 2x2 patches of 14 px, so one token covers a 28x28 square.
const FACTOR: u32 = 28;
/// Qwen2-VL image processor defaults (`min_pixels`, `max_pixels`).
const MIN_PIXELS: u64 = 56 * 56;
const MAX_PIXELS: u64 = 28 * 28 * 1280;
/// `<|vision_start|>` and `<|vision_end|>` around every image.
const VISION_DELIMITERS: u64 = 2;

/// Width and height of a PNG or JPEG, read from its header (PNG IHDR, JPEG SOFn) without
/// decoding pixels. `None` for anything else or a truncated header.
pub fn image_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png_dimensions(bytes)
    } else if bytes.starts_with(&[0xFF, 0xD8]) {
        jpeg_dimensions(bytes)
    } else {
        None
    }
}

fn png_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    // Signature (8), then the IHDR chunk: length (4), "IHDR" (4), width (4), height (4).
    if bytes.get(12..16)? != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?);
    let h = u32::from_be_bytes(bytes.get(20..24)?.try_into().ok()?);
    (w > 0 && h > 0).then_some((w, h))
}

fn jpeg_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        // Markers may be preceded by any number of 0xFF fill bytes.
        if *bytes.get(i)? != 0xFF {
            return None;
        }
        while *bytes.get(i)? == 0xFF {
            i += 1;
        }
        let marker = *bytes.get(i)?;
        i += 1;
        // Standalone markers carry no length field.
        if marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
            continue;
        }
        let len = u16::from_be_bytes([*bytes.get(i)?, *bytes.get(i + 1)?]) as usize;
        if len < 2 {
            return None;
        }
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            // Length (2), precision (1), height (2), width (2).
            let h = u16::from_be_bytes([*bytes.get(i + 3)?, *bytes.get(i + 4)?]) as u32;
            let w = u16::from_be_bytes([*bytes.get(i + 5)?, *bytes.get(i + 6)?]) as u32;
            return (w > 0 && h > 0).then_some((w, h));
        }
        if marker == 0xDA || marker == 0xD9 {
            // Start of scan or end of image before any frame header.
            return None;
        }
        i += len;
    }
}

/// Prompt tokens Qwen2-VL spends on one image of `width` x `height` pixels: the image is
/// resized the way `smart_resize` does (sides rounded to multiples of 28, area kept within
/// [56*56, 28*28*1280]), then each 28x28 square is one token, plus 2 delimiter tokens.
/// A 512x512 image costs 18*18 + 2 = 326.
pub fn qwen2_vl_image_tokens(width: u32, height: u32) -> u64 {
    let (h, w) = smart_resize(height.max(1), width.max(1));
    (h / FACTOR) as u64 * (w / FACTOR) as u64 + VISION_DELIMITERS
}

/// Qwen2-VL's `smart_resize(height, width, factor=28, min_pixels=56*56, max_pixels=28*28*1280)`,
/// returning the resized (height, width).
fn smart_resize(height: u32, width: u32) -> (u32, u32) {
    let f = FACTOR as f64;
    let (hf, wf) = (height as f64, width as f64);
    // Python's round() rounds halves to even.
    let mut h_bar = (FACTOR as f64 * (hf / f).round_ties_even()).max(f);
    let mut w_bar = (FACTOR as f64 * (wf / f).round_ties_even()).max(f);
    if h_bar * w_bar > MAX_PIXELS as f64 {
        let beta = (hf * wf / MAX_PIXELS as f64).sqrt();
        h_bar = ((hf / beta / f).floor() * f).max(f);
        w_bar = ((wf / beta / f).floor() * f).max(f);
    } else if h_bar * w_bar < MIN_PIXELS as f64 {
        let beta = (MIN_PIXELS as f64 / (hf * wf)).sqrt();
        h_bar = (hf * beta / f).ceil() * f;
        w_bar = (wf * beta / f).ceil() * f;
    }
    (h_bar as u32, w_bar as u32)
}

/// Why an image part could not be used (becomes a 400 answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("invalid data URL: expected 'data:<media type>;base64,<data>'")]
    NotBase64DataUrl,
    #[error("invalid base64 image data: {0}")]
    BadBase64(String),
    #[error("cannot identify image file: only PNG and JPEG are supported")]
    UnknownFormat,
}

/// Lenient about padding (clients differ), strict about the alphabet.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes a `data:` URL's base64 payload and returns the image's (width, height).
pub fn data_url_dimensions(url: &str) -> Result<(u32, u32), ImageError> {
    let rest = url
        .strip_prefix("data:")
        .ok_or(ImageError::NotBase64DataUrl)?;
    let (meta, payload) = rest.split_once(',').ok_or(ImageError::NotBase64DataUrl)?;
    if !meta.ends_with(";base64") {
        return Err(ImageError::NotBase64DataUrl);
    }
    let bytes = BASE64
        .decode(payload.trim_end())
        .map_err(|e| ImageError::BadBase64(e.to_string()))?;
    image_dimensions(&bytes).ok_or(ImageError::UnknownFormat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use std::io::Cursor;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbImage::from_pixel(w, h, image::Rgb([10, 200, 30]));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    fn jpeg(w: u16, h: u16) -> Vec<u8> {
        let pixels = vec![128u8; w as usize * h as usize * 3];
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, 75)
            .encode(&pixels, w, h, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        out
    }

    #[test]
    fn png_header_gives_size() {
        assert_eq!(image_dimensions(&png(512, 300)), Some((512, 300)));
        assert_eq!(image_dimensions(&png(1, 7)), Some((1, 7)));
    }

    #[test]
    fn jpeg_header_gives_size() {
        assert_eq!(image_dimensions(&jpeg(1000, 700)), Some((1000, 700)));
        assert_eq!(image_dimensions(&jpeg(33, 17)), Some((33, 17)));
    }

    #[test]
    fn jpeg_sof_after_app_segments_and_fill_bytes() {
        // SOI, APP1 with 6 bytes of payload, fill bytes, SOF2 (progressive) 640x480.
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x08, 1, 2, 3, 4, 5, 6];
        b.extend_from_slice(&[0xFF, 0xFF, 0xC2, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80]);
        assert_eq!(image_dimensions(&b), Some((640, 480)));
        // DHT (0xC4) is not a frame header.
        let b = [
            0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x02, 0xFF, 0xC0, 0, 8, 8, 0, 5, 0, 9,
        ];
        assert_eq!(image_dimensions(&b), Some((9, 5)));
    }

    #[test]
    fn other_or_truncated_bytes_give_none() {
        assert_eq!(image_dimensions(b"GIF89a\x01\x00\x01\x00"), None);
        assert_eq!(image_dimensions(b""), None);
        assert_eq!(image_dimensions(&png(4, 4)[..20]), None);
        assert_eq!(image_dimensions(&[0xFF, 0xD8, 0xFF, 0xE0, 0x00]), None);
        assert_eq!(
            image_dimensions(&[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x08]),
            None
        );
    }

    #[test]
    fn qwen2_vl_token_counts() {
        assert_eq!(qwen2_vl_image_tokens(512, 512), 18 * 18 + 2);
        // 1000/28 = 35.7 -> 36 columns, 700/28 = 25 rows.
        assert_eq!(qwen2_vl_image_tokens(1000, 700), 36 * 25 + 2);
        // Ties round to even: 42/28 = 1.5 -> 2, 70/28 = 2.5 -> 2.
        assert_eq!(smart_resize(42, 70), (56, 56));
        // Too small: scaled up to at least 56*56 pixels.
        assert_eq!(smart_resize(1, 1), (56, 56));
        assert_eq!(qwen2_vl_image_tokens(1, 1), 4 + 2);
        // Too large: scaled down (floor) below 28*28*1280 pixels.
        let (h, w) = smart_resize(3000, 4000);
        assert_eq!((h, w), (840, 1148));
        assert!(h as u64 * w as u64 <= MAX_PIXELS);
        assert_eq!(qwen2_vl_image_tokens(4000, 3000), 30 * 41 + 2);
    }

    #[test]
    fn data_urls() {
        let url = format!("data:image/png;base64,{}", STANDARD.encode(png(512, 512)));
        assert_eq!(data_url_dimensions(&url), Ok((512, 512)));
        let unpadded = format!(
            "data:image/jpeg;base64,{}",
            STANDARD.encode(jpeg(20, 10)).trim_end_matches('=')
        );
        assert_eq!(data_url_dimensions(&unpadded), Ok((20, 10)));
        assert!(matches!(
            data_url_dimensions("data:image/png;base64,@@@@"),
            Err(ImageError::BadBase64(_))
        ));
        assert_eq!(
            data_url_dimensions("data:image/png,rawbytes"),
            Err(ImageError::NotBase64DataUrl)
        );
        let gif = format!("data:image/gif;base64,{}", STANDARD.encode(b"GIF89a...."));
        assert_eq!(data_url_dimensions(&gif), Err(ImageError::UnknownFormat));
    }
}
