//! Images given as `data:` URLs: the one reader of their size, for the input files, the
//! report's charts and the mock server alike. Base64 is read leniently about padding
//! (clients differ) and surrounding whitespace, strictly about the alphabet; PNG and JPEG
//! sizes come from their headers without decoding pixels, other formats (WebP, GIF, BMP)
//! from the `image` crate's header reading.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Why a data URL gives no image size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataUrlError {
    #[error("invalid data URL: expected 'data:<media type>;base64,<data>'")]
    NotBase64DataUrl,
    #[error("invalid base64 image data: {0}")]
    BadBase64(String),
    #[error("cannot identify image file: not a PNG, JPEG, WebP, GIF or BMP image")]
    UnknownFormat,
}

const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The (width, height) of the image in a `data:<type>;base64,<data>` URL.
pub fn image_size(url: &str) -> Result<(u32, u32), DataUrlError> {
    let rest = url
        .strip_prefix("data:")
        .ok_or(DataUrlError::NotBase64DataUrl)?;
    let (meta, payload) = rest.split_once(',').ok_or(DataUrlError::NotBase64DataUrl)?;
    if !meta.ends_with(";base64") {
        return Err(DataUrlError::NotBase64DataUrl);
    }
    let bytes = BASE64
        .decode(payload.trim())
        .map_err(|e| DataUrlError::BadBase64(e.to_string()))?;
    image_dimensions(&bytes)
        .or_else(|| {
            image::ImageReader::new(std::io::Cursor::new(&bytes))
                .with_guessed_format()
                .ok()?
                .into_dimensions()
                .ok()
                .filter(|&(w, h)| w > 0 && h > 0)
        })
        .ok_or(DataUrlError::UnknownFormat)
}

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
    fn data_urls_padded_or_not_with_whitespace_in_any_format() {
        let url = format!("data:image/png;base64,{}", STANDARD.encode(png(512, 512)));
        assert_eq!(image_size(&url), Ok((512, 512)));
        let unpadded = format!(
            "data:image/jpeg;base64,{}",
            STANDARD.encode(jpeg(20, 10)).trim_end_matches('=')
        );
        assert_eq!(image_size(&unpadded), Ok((20, 10)));
        assert_eq!(image_size(&format!("{url}\n ")), Ok((512, 512)));
        let mut gif = Vec::new();
        image::DynamicImage::new_rgb8(7, 3)
            .write_to(&mut Cursor::new(&mut gif), image::ImageFormat::Gif)
            .unwrap();
        let gif = format!("data:image/gif;base64,{}", STANDARD.encode(gif));
        assert_eq!(image_size(&gif), Ok((7, 3)));
        assert!(matches!(
            image_size("data:image/png;base64,@@@@"),
            Err(DataUrlError::BadBase64(_))
        ));
        assert_eq!(
            image_size("data:image/png,rawbytes"),
            Err(DataUrlError::NotBase64DataUrl)
        );
        assert_eq!(
            image_size("http://x/y.png"),
            Err(DataUrlError::NotBase64DataUrl)
        );
        let text = format!("data:image/png;base64,{}", STANDARD.encode(b"not an image"));
        assert_eq!(image_size(&text), Err(DataUrlError::UnknownFormat));
    }
}
