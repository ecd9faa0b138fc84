//! Synthetic images: random-noise RGB pixels encoded as PNG or JPEG into a base64 data URL.
//!
//! Noise is incompressible, so payload sizes are the worst case for the server's image
//! pipeline and identical images never repeat (no server-side dedupe).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use image::ImageEncoder;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};

use super::EncodedImage;

/// JPEG quality and full-resolution chroma (4:4:4), the settings AIPerf saves JPEGs with:
/// a 512x512 noise image is then about 0.55 M base64 characters in both.
pub const JPEG_QUALITY: u8 = 85;

/// A concrete encoding (the `random` choice is made before an image is built).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageEncoding {
    Png,
    Jpeg,
}

impl ImageEncoding {
    pub fn name(self) -> &'static str {
        match self {
            ImageEncoding::Png => "png",
            ImageEncoding::Jpeg => "jpeg",
        }
    }
}

/// The MIME subtype of an image format sent as it is (PNG, JPEG, WebP, GIF, BMP); None for
/// the others.
pub(crate) fn sent_format(format: image::ImageFormat) -> Option<&'static str> {
    match format {
        image::ImageFormat::Png => Some("png"),
        image::ImageFormat::Jpeg => Some("jpeg"),
        image::ImageFormat::WebP => Some("webp"),
        image::ImageFormat::Gif => Some("gif"),
        image::ImageFormat::Bmp => Some("bmp"),
        _ => None,
    }
}

/// An image file sent as it is: its bytes in a base64 data URL of its own type (PNG, JPEG,
/// WebP, GIF or BMP), as an input file's image paths are. The error names the file as
/// `shown`.
pub fn file_image(path: &std::path::Path, shown: &str) -> Result<EncodedImage, String> {
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read image file '{shown}': {e}"))?;
    let unreadable = |e: &dyn std::fmt::Display| format!("cannot decode image file '{shown}': {e}");
    let format = image::guess_format(&bytes).map_err(|e| unreadable(&e))?;
    let decoded =
        image::load_from_memory_with_format(&bytes, format).map_err(|e| unreadable(&e))?;
    let name =
        sent_format(format).ok_or_else(|| unreadable(&format!("unsupported format {format:?}")))?;
    Ok(EncodedImage {
        data_url: data_url_of(name, &bytes),
        width: decoded.width(),
        height: decoded.height(),
        format: name,
        uuid: None,
    })
}

/// `width * height` RGB pixels of noise from a generator seeded with `seed`.
pub fn noise_rgb(width: u32, height: u32, seed: u64) -> Vec<u8> {
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    Xoshiro256PlusPlus::seed_from_u64(seed).fill_bytes(&mut pixels);
    pixels
}

/// A noise image encoded as a data URL.
pub fn noise_image(
    width: u32,
    height: u32,
    encoding: ImageEncoding,
    seed: u64,
) -> anyhow::Result<EncodedImage> {
    encode_image(&noise_rgb(width, height, seed), width, height, encoding)
}

/// Packed RGB8 pixels encoded as a data URL.
pub fn encode_image(
    pixels: &[u8],
    width: u32,
    height: u32,
    encoding: ImageEncoding,
) -> anyhow::Result<EncodedImage> {
    let bytes = encode_rgb(pixels, width, height, encoding)?;
    Ok(EncodedImage {
        data_url: data_url(encoding, &bytes),
        width,
        height,
        format: encoding.name(),
        uuid: None,
    })
}

/// Encodes packed RGB8 pixels: PNG with the fast deflate setting (the default level is
/// 15x slower on noise for the same size), JPEG with jpeg-encoder (SIMD; AIPerf's quality and 4:4:4 chroma).
pub fn encode_rgb(
    pixels: &[u8],
    width: u32,
    height: u32,
    encoding: ImageEncoding,
) -> anyhow::Result<Vec<u8>> {
    // Noise does not compress: a PNG is slightly larger than the pixels, a q85 4:4:4 JPEG
    // about half of them. Reserving that avoids regrowing the buffer.
    let capacity = match encoding {
        ImageEncoding::Png => pixels.len() + pixels.len() / 64 + 1024,
        ImageEncoding::Jpeg => pixels.len() * 9 / 16 + 1024,
    };
    let mut out = Vec::with_capacity(capacity);
    match encoding {
        ImageEncoding::Png => {
            PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Adaptive)
                .write_image(pixels, width, height, image::ExtendedColorType::Rgb8)?;
        }
        ImageEncoding::Jpeg => {
            let (w, h) = match (u16::try_from(width), u16::try_from(height)) {
                (Ok(w), Ok(h)) => (w, h),
                _ => {
                    anyhow::bail!("JPEG images are limited to 65535 px; asked for {width}x{height}")
                }
            };
            let mut encoder = jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY);
            encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_1_1);
            encoder.encode(pixels, w, h, jpeg_encoder::ColorType::Rgb)?;
        }
    }
    Ok(out)
}

/// Spare capacity of a data URL: the request body is later assembled in the URL's own
/// buffer (see `endpoint::splice`), and the rest of a typical body fits in this.
pub const BODY_ROOM: usize = 4096;

/// `data:image/{png|jpeg};base64,<bytes>`.
pub fn data_url(encoding: ImageEncoding, bytes: &[u8]) -> String {
    let name = match encoding {
        ImageEncoding::Png => "png",
        ImageEncoding::Jpeg => "jpeg",
    };
    data_url_of(name, bytes)
}

/// `data:image/<name>;base64,<bytes>`, with room for the request body around it.
pub(crate) fn data_url_of(name: &str, bytes: &[u8]) -> String {
    let prefix = format!("data:image/{name};base64,");
    let mut url = String::with_capacity(prefix.len() + bytes.len().div_ceil(3) * 4 + BODY_ROOM);
    url.push_str(&prefix);
    STANDARD.encode_string(bytes, &mut url);
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_data_url(url: &str) -> (String, Vec<u8>) {
        let (head, b64) = url.split_once(',').unwrap();
        (head.to_string(), STANDARD.decode(b64).unwrap())
    }

    #[test]
    fn png_round_trips_exactly() {
        let img = noise_image(37, 21, ImageEncoding::Png, 1).unwrap();
        assert_eq!((img.width, img.height, img.format), (37, 21, "png"));
        let (head, bytes) = decode_data_url(&img.data_url);
        assert_eq!(head, "data:image/png;base64");
        let decoded = image::load_from_memory(&bytes).unwrap().to_rgb8();
        assert_eq!(decoded.dimensions(), (37, 21));
        assert_eq!(decoded.into_raw(), noise_rgb(37, 21, 1));
    }

    #[test]
    fn jpeg_decodes_to_the_right_size() {
        let img = noise_image(64, 48, ImageEncoding::Jpeg, 2).unwrap();
        assert_eq!(img.format, "jpeg");
        let (head, bytes) = decode_data_url(&img.data_url);
        assert_eq!(head, "data:image/jpeg;base64");
        assert_eq!(&bytes[..2], &[0xFF, 0xD8], "JPEG SOI marker");
        let decoded = image::load_from_memory(&bytes).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (64, 48));
    }

    #[test]
    fn noise_depends_only_on_the_seed() {
        assert_eq!(noise_rgb(8, 8, 5), noise_rgb(8, 8, 5));
        assert_ne!(noise_rgb(8, 8, 5), noise_rgb(8, 8, 6));
        // Noise is not a constant fill: many distinct byte values.
        let mut seen = [false; 256];
        for b in noise_rgb(32, 32, 5) {
            seen[b as usize] = true;
        }
        assert!(seen.iter().filter(|&&s| s).count() > 200);
    }

    #[test]
    fn oversized_jpeg_is_an_error() {
        let pixels = vec![0u8; 70_000 * 3];
        let err = encode_rgb(&pixels, 70_000, 1, ImageEncoding::Jpeg).unwrap_err();
        assert!(err.to_string().contains("65535"), "{err}");
    }

    #[test]
    fn data_url_is_plain_base64() {
        assert_eq!(
            data_url(ImageEncoding::Png, b"abc"),
            "data:image/png;base64,YWJj"
        );
        assert_eq!(
            data_url(ImageEncoding::Jpeg, b"ab"),
            "data:image/jpeg;base64,YWI="
        );
    }
}
