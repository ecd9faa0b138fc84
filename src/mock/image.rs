//! Image accounting: Qwen2-VL's token cost of an image (its size is read by
//! `dataset::data_url`, as every reader of data URLs does).

/// Qwen2-VL merges 2x2 patches of 14 px, so one token covers a 28x28 square.
const FACTOR: u32 = 28;
/// Qwen2-VL image processor defaults (`min_pixels`, `max_pixels`).
const MIN_PIXELS: u64 = 56 * 56;
const MAX_PIXELS: u64 = 28 * 28 * 1280;
/// `<|vision_start|>` and `<|vision_end|>` around every image.
const VISION_DELIMITERS: u64 = 2;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
