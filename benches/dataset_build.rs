//! Dataset build timings: builtin tokenizer load, token-exact prompts, noise images on one
//! thread vs all cores. Run with `cargo bench --bench dataset_build`. Best-of-3 wall times;
//! on a busy machine compare the ratios printed next to each figure. Without `--bench` (as
//! `cargo test --benches` runs it) everything is scaled down to a smoke run of seconds.

use std::path::Path;
use std::time::{Duration, Instant};

use aiperf::api::Tokenizer;
use aiperf::api::{ImageFormat, InputOptions, SyntheticOptions, build_synthetic};

fn options(entries: usize, isl: f64, image_batch: usize, size: f64) -> SyntheticOptions {
    SyntheticOptions {
        num_entries: entries,
        isl_mean: isl,
        isl_stddev: 0.0,
        osl_mean: None,
        osl_stddev: 0.0,
        image_width_mean: size,
        image_width_stddev: 0.0,
        image_height_mean: size,
        image_height_stddev: 0.0,
        image_format: ImageFormat::Png,
        image_batch_size: image_batch,
        seed: Some(1),
        turns: Default::default(),
        media: Default::default(),
    }
}

/// Best of `runs` wall times.
fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs this benchmark binary again with `mode` and returns the milliseconds it prints:
/// start-up costs are only visible in a fresh process.
fn fresh_process_ms(mode: &str) -> f64 {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .arg(mode)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn best_fresh_ms(mode: &str, runs: usize) -> f64 {
    (0..runs)
        .map(|_| fresh_process_ms(mode))
        .fold(f64::INFINITY, f64::min)
}

/// The reference for images per second: a straightforward encoder, one image after another
/// on one thread: a seeded RNG fills the pixels, PNG at the usual default deflate level
/// (zlib's 6, what PIL's `save` uses, so what AIPerf does), base64 makes the data URL.
fn naive_noise_pngs(count: usize, size: u32) -> usize {
    use base64::Engine;
    use image::ImageEncoder;
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(1);
    let mut total = 0;
    for _ in 0..count {
        let mut pixels = vec![0u8; (size * size * 3) as usize];
        rng.fill_bytes(&mut pixels);
        let mut png = Vec::new();
        use image::codecs::png::{CompressionType, FilterType, PngEncoder};
        PngEncoder::new_with_quality(&mut png, CompressionType::Default, FilterType::Adaptive)
            .write_image(&pixels, size, size, image::ExtendedColorType::Rgb8)
            .unwrap();
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        );
        total += url.len();
    }
    total
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match std::env::args().nth(1).as_deref() {
        // Builtin tokenizer from `builtin()` until it can count.
        Some("child-load") => {
            let t = Instant::now();
            Tokenizer::builtin().unwrap().count("warm up");
            println!("{}", ms(t.elapsed()));
            return;
        }
        // What a 20-request vision run pays before its first request: the builtin tokenizer
        // loads on its own thread while the images encode.
        // `child-startup-sequential` waits for the tokenizer first: the reference.
        Some(mode @ ("child-startup" | "child-startup-sequential")) => {
            let t = Instant::now();
            let builtin = Tokenizer::builtin().unwrap();
            if mode == "child-startup-sequential" {
                builtin.count("wait for the load");
            }
            let entries = build_synthetic(
                &options(20, 550.0, 1, 512.0),
                &InputOptions::default(),
                &builtin,
                cores,
                &(),
            )
            .unwrap();
            assert_eq!(entries.len(), 20);
            println!("{}", ms(t.elapsed()));
            return;
        }
        _ => {}
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it and
    // expects a quick smoke run: one run of each, and a tenth (or less) of the work.
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = if quick { 1 } else { 3 };
    let prompts = if quick { 10 } else { 100 };
    let isls: &[f64] = if quick {
        &[100.0]
    } else {
        &[100.0, 550.0, 2000.0]
    };

    println!(
        "builtin o200k_base tokenizer, builtin() until it counts (fresh process, best of {runs}): {:.1} ms",
        best_fresh_ms("child-load", runs)
    );
    let overlapped = best_fresh_ms("child-startup", runs);
    let sequential = best_fresh_ms("child-startup-sequential", runs);
    println!(
        "start-up, builtin tokenizer + 20 entries (ISL 550, one 512x512 PNG each), fresh process: \
         {overlapped:.1} ms with the load overlapping image encoding, {sequential:.1} ms load first ({:.2}x)",
        sequential / overlapped
    );
    let builtin = Tokenizer::builtin().unwrap();
    builtin.count("warm up");

    let gpt2_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2");
    let t = Instant::now();
    let gpt2 = Tokenizer::from_file(&gpt2_path).unwrap();
    println!("HF GPT-2 tokenizer.json load: {:.1} ms", ms(t.elapsed()));

    for (name, tok) in [("builtin", &builtin), ("gpt2", &gpt2)] {
        for &isl in isls {
            let o = options(prompts, isl, 0, 0.0);
            let one = best_of(runs, || {
                drop(build_synthetic(&o, &InputOptions::default(), tok, 1, &()).unwrap())
            });
            let all = best_of(runs, || {
                drop(build_synthetic(&o, &InputOptions::default(), tok, cores, &()).unwrap())
            });
            println!(
                "{prompts} prompts ISL {isl} ({name}): {:.1} ms on 1 thread, {:.1} ms on {cores} ({:.2}x)",
                ms(one),
                ms(all),
                ms(one) / ms(all)
            );
        }
    }

    // Images per second for 1,000 of the vision command's images (512x512 noise PNG).
    let n = std::env::var("BENCH_IMAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 20 } else { 1000 });
    let o = options(n, 1.0, 1, 512.0);
    let t = Instant::now();
    drop(build_synthetic(&o, &InputOptions::default(), &builtin, cores, &()).unwrap());
    let ours = n as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    drop(build_synthetic(&o, &InputOptions::default(), &builtin, 1, &()).unwrap());
    let ours_one = n as f64 / t.elapsed().as_secs_f64();
    // The naive encoder is slow: 100 images give its rate.
    let naive_n = n.min(if quick { 5 } else { 100 });
    let t = Instant::now();
    naive_noise_pngs(naive_n, 512);
    let naive = naive_n as f64 / t.elapsed().as_secs_f64();
    println!(
        "{n} noise images 512x512 PNG (with prompts): {ours:.0} images/s on {cores} threads, \
         {ours_one:.0} on 1; naive single-threaded encoder (default deflate level) {naive:.0} \
         images/s: {:.1}x faster",
        ours / naive
    );

    for format in [ImageFormat::Png, ImageFormat::Jpeg] {
        let o = SyntheticOptions {
            image_format: format,
            ..options(prompts, 1.0, 1, 512.0)
        };
        let one = best_of(runs, || {
            drop(build_synthetic(&o, &InputOptions::default(), &builtin, 1, &()).unwrap())
        });
        let all = best_of(runs, || {
            drop(build_synthetic(&o, &InputOptions::default(), &builtin, cores, &()).unwrap())
        });
        let bytes: usize = build_synthetic(&o, &InputOptions::default(), &builtin, cores, &())
            .unwrap()
            .iter()
            .map(|e| e.images[0].data_url.len())
            .sum();
        println!(
            "{prompts} noise images 512x512 {format:?}: {:.1} ms on 1 thread, {:.1} ms on {cores} ({:.2}x), {:.0} KB data URL each",
            ms(one),
            ms(all),
            ms(one) / ms(all),
            bytes as f64 / prompts as f64 / 1024.0
        );
    }
}
