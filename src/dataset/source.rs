//! Where synthetic images come from: random noise (unbounded), the bundled photos, or the
//! user's own directory. Finite sources are sampled per `--image-source-sampling`; a photo is
//! decoded only when it is first selected, then resized to each requested size.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fast_image_resize as fr;
use rand::RngExt;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use tracing::warn;

use super::EncodedImage;
use super::image::{ImageEncoding, encode_image};

/// `--image-source`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ImageSource {
    /// Random pixels, a fresh image every time.
    #[default]
    Noise,
    /// The photos bundled in `assets/source_images/`.
    Assets,
    /// Every image file of a directory.
    Directory(PathBuf),
}

impl ImageSource {
    /// `noise`, `assets`, or anything else as a directory path.
    pub fn parse(s: &str) -> ImageSource {
        match s {
            "noise" => ImageSource::Noise,
            "assets" => ImageSource::Assets,
            dir => ImageSource::Directory(PathBuf::from(dir)),
        }
    }

    pub fn name(&self) -> String {
        match self {
            ImageSource::Noise => "noise".into(),
            ImageSource::Assets => "assets".into(),
            ImageSource::Directory(d) => d.display().to_string(),
        }
    }
}

/// `--image-source-sampling`: how a finite source's images are picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImageSampling {
    /// Each pick uniform over all images.
    #[default]
    RandomWithReplacement,
    /// Every image once, in a fresh random order each cycle.
    ShuffleCycle,
    /// Every image in sorted file-name order, wrapping around.
    SequentialCycle,
}

/// The bundled photos (public domain / CC0, see `assets/README.md`), sorted by name.
const BUNDLED: &[(&str, &[u8])] = &[
    (
        "astronaut.jpg",
        include_bytes!("../../assets/source_images/astronaut.jpg"),
    ),
    (
        "chelsea.jpg",
        include_bytes!("../../assets/source_images/chelsea.jpg"),
    ),
    (
        "coffee.jpg",
        include_bytes!("../../assets/source_images/coffee.jpg"),
    ),
    (
        "hubble_deep_field.jpg",
        include_bytes!("../../assets/source_images/hubble_deep_field.jpg"),
    ),
    (
        "rocket.jpg",
        include_bytes!("../../assets/source_images/rocket.jpg"),
    ),
];

/// File extensions indexed in a directory source (case-insensitive).
pub const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "webp", "gif", "bmp"];

/// A decoded source photo, shared by every image resized from it.
#[derive(Debug)]
pub struct SourcePhoto {
    /// The file's name, which the sampling tests check.
    #[cfg(test)]
    pub name: String,
    pub width: u32,
    pub height: u32,
    /// Packed RGB8.
    pub rgb: Vec<u8>,
}

enum Item {
    Bundled(&'static [u8]),
    File(PathBuf),
}

/// A finite source: the index is built up front (names only); photos are decoded on first
/// pick and kept. Files that cannot be decoded are dropped from the pool with a warning.
pub struct PhotoPool {
    names: Vec<String>,
    items: Vec<Item>,
    decoded: Vec<Option<Arc<SourcePhoto>>>,
    /// Indices still usable, in sorted name order.
    alive: Vec<usize>,
    sampling: ImageSampling,
    /// shuffle-cycle: what is left of the current cycle (popped from the end).
    deck: Vec<usize>,
    /// sequential-cycle: position in `alive`.
    cursor: usize,
    /// Where the pool came from, for messages.
    origin: String,
}

impl PhotoPool {
    pub fn bundled(sampling: ImageSampling) -> PhotoPool {
        let (names, items) = BUNDLED
            .iter()
            .map(|(n, b)| (n.to_string(), Item::Bundled(b)))
            .unzip();
        PhotoPool::new(names, items, sampling, "the bundled assets".into())
    }

    /// Indexes every image file directly in `dir` (not recursive), sorted by name. A missing
    /// or unreadable directory, or one without image files, is an error.
    pub fn directory(dir: &Path, sampling: ImageSampling) -> Result<PhotoPool, String> {
        let read = std::fs::read_dir(dir).map_err(|e| {
            format!(
                "--image-source: cannot read the directory '{}': {e}",
                dir.display()
            )
        })?;
        let mut files: Vec<PathBuf> = read
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_file() && has_image_extension(p))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(format!(
                "--image-source: no image files ({}) in '{}'",
                IMAGE_EXTENSIONS.join(", "),
                dir.display()
            ));
        }
        let names = files
            .iter()
            .map(|p| p.file_name().unwrap_or_default().to_string_lossy().into())
            .collect();
        let items = files.into_iter().map(Item::File).collect();
        Ok(PhotoPool::new(
            names,
            items,
            sampling,
            format!("'{}'", dir.display()),
        ))
    }

    fn new(
        names: Vec<String>,
        items: Vec<Item>,
        sampling: ImageSampling,
        origin: String,
    ) -> PhotoPool {
        let n = items.len();
        PhotoPool {
            names,
            items,
            decoded: (0..n).map(|_| None).collect(),
            alive: (0..n).collect(),
            sampling,
            deck: Vec::new(),
            cursor: 0,
            origin,
        }
    }

    #[cfg(test)]
    /// Number of indexed images (before any was found undecodable).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    #[cfg(test)]
    /// Whether image `i` has been decoded (for tests of the lazy loading).
    pub fn is_decoded(&self, i: usize) -> bool {
        self.decoded[i].is_some()
    }

    /// The next photo per the sampling mode, decoding it if needed. Errors only when no image
    /// of the source can be decoded.
    pub fn pick(&mut self, rng: &mut ChaCha8Rng) -> Result<Arc<SourcePhoto>, String> {
        loop {
            if self.alive.is_empty() {
                return Err(format!(
                    "--image-source: none of the {} image files in {} could be decoded",
                    self.items.len(),
                    self.origin
                ));
            }
            let pos = self.next_position(rng);
            let index = self.alive[pos];
            if let Some(photo) = &self.decoded[index] {
                return Ok(photo.clone());
            }
            match self.decode(index) {
                Ok(photo) => {
                    let photo = Arc::new(photo);
                    self.decoded[index] = Some(photo.clone());
                    return Ok(photo);
                }
                Err(e) => {
                    warn!(
                        "Skipping image '{}' from {}: cannot decode it ({e})",
                        self.names[index], self.origin
                    );
                    self.alive.remove(pos);
                    // Sequential: the next image has moved into `pos`; shuffle: the deck
                    // holds indices, drop the retired one.
                    if self.cursor > pos {
                        self.cursor -= 1;
                    }
                    self.deck.retain(|&i| i != index);
                }
            }
        }
    }

    /// Position in `alive` of the next pick.
    fn next_position(&mut self, rng: &mut ChaCha8Rng) -> usize {
        match self.sampling {
            ImageSampling::RandomWithReplacement => rng.random_range(0..self.alive.len()),
            ImageSampling::SequentialCycle => {
                if self.cursor >= self.alive.len() {
                    self.cursor = 0;
                }
                let pos = self.cursor;
                self.cursor += 1;
                pos
            }
            ImageSampling::ShuffleCycle => {
                if self.deck.is_empty() {
                    self.deck = self.alive.clone();
                    self.deck.shuffle(rng);
                }
                let index = self.deck.pop().expect("refilled above");
                self.alive
                    .iter()
                    .position(|&i| i == index)
                    .expect("the deck holds only alive images")
            }
        }
    }

    fn decode(&self, index: usize) -> Result<SourcePhoto, String> {
        let img = match &self.items[index] {
            Item::Bundled(bytes) => image::load_from_memory(bytes).map_err(|e| e.to_string())?,
            Item::File(path) => image::ImageReader::open(path)
                .map_err(|e| e.to_string())?
                .with_guessed_format()
                .map_err(|e| e.to_string())?
                .decode()
                .map_err(|e| e.to_string())?,
        };
        let rgb = img.to_rgb8();
        let (width, height) = rgb.dimensions();
        if width == 0 || height == 0 {
            return Err("the image is empty".into());
        }
        Ok(SourcePhoto {
            #[cfg(test)]
            name: self.names[index].clone(),
            width,
            height,
            rgb: rgb.into_raw(),
        })
    }
}

fn has_image_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Resizes a photo to exactly `width` x `height` (aspect ratio not kept, as AIPerf does)
/// with a Lanczos3 filter.
pub fn resize_rgb(photo: &SourcePhoto, width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    if (photo.width, photo.height) == (width, height) {
        return Ok(photo.rgb.clone());
    }
    let src =
        fr::images::ImageRef::new(photo.width, photo.height, &photo.rgb, fr::PixelType::U8x3)?;
    let mut dst = fr::images::Image::new(width, height, fr::PixelType::U8x3);
    let options =
        fr::ResizeOptions::new().resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3));
    fr::Resizer::new().resize(&src, &mut dst, &options)?;
    Ok(dst.into_vec())
}

/// A photo resized and encoded as a data URL.
pub fn photo_image(
    photo: &SourcePhoto,
    width: u32,
    height: u32,
    encoding: ImageEncoding,
) -> anyhow::Result<EncodedImage> {
    let pixels = resize_rgb(photo, width, height)?;
    encode_image(&pixels, width, height, encoding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn names(pool: &mut PhotoPool, n: usize, seed: u64) -> Vec<String> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| pool.pick(&mut rng).unwrap().name.clone())
            .collect()
    }

    fn write_png(path: &Path, w: u32, h: u32) {
        let pixels = super::super::image::noise_rgb(w, h, 1);
        let bytes = super::super::image::encode_rgb(&pixels, w, h, ImageEncoding::Png).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn bundled_photos_decode_and_are_natural() {
        let mut pool = PhotoPool::bundled(ImageSampling::SequentialCycle);
        assert!(pool.len() >= 4);
        let n = pool.len();
        let picked = names(&mut pool, n, 1);
        let expected: Vec<String> = BUNDLED.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(picked, expected, "sequential walks them in sorted order");
        let mut sorted = expected.clone();
        sorted.sort();
        assert_eq!(expected, sorted);
    }

    #[test]
    fn sequential_cycle_wraps() {
        let mut pool = PhotoPool::bundled(ImageSampling::SequentialCycle);
        let n = pool.len();
        let picked = names(&mut pool, 2 * n + 1, 1);
        assert_eq!(picked[..n], picked[n..2 * n]);
        assert_eq!(picked[0], picked[2 * n]);
    }

    #[test]
    fn shuffle_cycle_uses_every_image_once_per_cycle() {
        let mut pool = PhotoPool::bundled(ImageSampling::ShuffleCycle);
        let n = pool.len();
        let picked = names(&mut pool, 3 * n, 7);
        for cycle in picked.chunks(n) {
            let mut c = cycle.to_vec();
            c.sort();
            c.dedup();
            assert_eq!(c.len(), n, "{cycle:?}");
        }
        let mut again = PhotoPool::bundled(ImageSampling::ShuffleCycle);
        assert_eq!(picked, names(&mut again, 3 * n, 7), "seeded");
        // With 5 images, 3 cycles in the same sorted order is unlikely (1 in 120^3 per seed).
        let sorted: Vec<String> = BUNDLED.iter().map(|(n, _)| n.to_string()).collect();
        assert!(picked.chunks(n).any(|c| c != sorted.as_slice()));
    }

    #[test]
    fn random_with_replacement_repeats_and_is_seeded() {
        let mut pool = PhotoPool::bundled(ImageSampling::RandomWithReplacement);
        let picked = names(&mut pool, 40, 3);
        let mut distinct = picked.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() >= 3, "{distinct:?}");
        let mut again = PhotoPool::bundled(ImageSampling::RandomWithReplacement);
        assert_eq!(picked, names(&mut again, 40, 3));
    }

    #[test]
    fn directory_is_indexed_up_front_and_decoded_lazily() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("b.png"), 20, 10);
        write_png(&dir.path().join("a.PNG"), 8, 8);
        std::fs::write(dir.path().join("notes.txt"), "not an image").unwrap();
        let mut pool = PhotoPool::directory(dir.path(), ImageSampling::SequentialCycle).unwrap();
        assert_eq!(pool.len(), 2, "only image extensions are indexed");
        assert!(!pool.is_decoded(0) && !pool.is_decoded(1));
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let first = pool.pick(&mut rng).unwrap();
        assert_eq!((first.name.as_str(), first.width), ("a.PNG", 8));
        assert!(pool.is_decoded(0) && !pool.is_decoded(1));
    }

    #[test]
    fn corrupt_files_are_skipped_and_all_corrupt_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a_bad.jpg"), b"not a jpeg").unwrap();
        write_png(&dir.path().join("b_good.png"), 4, 4);
        let mut pool = PhotoPool::directory(dir.path(), ImageSampling::SequentialCycle).unwrap();
        assert_eq!(names(&mut pool, 3, 0), vec!["b_good.png"; 3]);

        let bad = tempfile::tempdir().unwrap();
        std::fs::write(bad.path().join("x.png"), b"garbage").unwrap();
        let mut pool = PhotoPool::directory(bad.path(), ImageSampling::ShuffleCycle).unwrap();
        let err = pool.pick(&mut ChaCha8Rng::seed_from_u64(0)).unwrap_err();
        assert!(err.contains("none of the 1 image files"), "{err}");
    }

    #[test]
    fn empty_or_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = PhotoPool::directory(dir.path(), ImageSampling::default())
            .err()
            .unwrap();
        assert!(err.contains("no image files"), "{err}");
        let err = PhotoPool::directory(&dir.path().join("nope"), ImageSampling::default())
            .err()
            .unwrap();
        assert!(err.contains("cannot read the directory"), "{err}");
    }

    #[test]
    fn resized_photos_have_the_asked_size_and_are_smaller_than_noise() {
        let mut pool = PhotoPool::bundled(ImageSampling::SequentialCycle);
        let photo = pool.pick(&mut ChaCha8Rng::seed_from_u64(0)).unwrap();
        let img = photo_image(&photo, 300, 200, ImageEncoding::Jpeg).unwrap();
        assert_eq!((img.width, img.height, img.format), (300, 200, "jpeg"));
        let b64 = img.data_url.split_once(',').unwrap().1;
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let decoded = image::load_from_memory(&bytes).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (300, 200));
        let noise = super::super::image::noise_image(300, 200, ImageEncoding::Jpeg, 1).unwrap();
        assert!(img.data_url.len() < noise.data_url.len() / 2);
    }
}
