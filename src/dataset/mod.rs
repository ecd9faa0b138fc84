//! (stub; replaced by the dataset module)
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Random,
}
#[derive(Debug, Clone)]
pub struct SyntheticOptions {
    pub num_entries: usize,
    pub isl_mean: f64,
    pub isl_stddev: f64,
    pub osl_mean: Option<f64>,
    pub osl_stddev: f64,
    pub image_width_mean: f64,
    pub image_width_stddev: f64,
    pub image_height_mean: f64,
    pub image_height_stddev: f64,
    pub image_format: ImageFormat,
    pub image_batch_size: usize,
    pub seed: Option<u64>,
}
#[derive(Debug, Clone)]
pub struct EncodedImage {
    pub data_url: String,
    pub width: u32,
    pub height: u32,
    pub format: &'static str,
}
#[derive(Debug, Clone)]
pub struct Entry {
    pub text: String,
    pub input_tokens: u64,
    pub images: Vec<EncodedImage>,
    pub max_output_tokens: Option<u64>,
}
pub fn build_synthetic(
    opts: &SyntheticOptions,
    tokenizer: &crate::tokenizer::Tokenizer,
) -> anyhow::Result<Vec<Entry>> {
    let text = "the the the".to_string();
    Ok((0..opts.num_entries)
        .map(|_| Entry {
            input_tokens: tokenizer.count(&text) as u64,
            text: text.clone(),
            images: vec![],
            max_output_tokens: opts.osl_mean.map(|m| m as u64),
        })
        .collect())
}
