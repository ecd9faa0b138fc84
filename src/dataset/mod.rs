//! Everything built before the first request: synthetic prompts of exact token length and
//! synthetic images (noise or resized photos), generated deterministically from one seed, or
//! the entries of a custom input file.

pub mod audio;
pub mod batch;
pub mod cache_bust;
pub mod coding;
pub mod custom;
pub use custom::Synthesis;
pub mod data_url;
pub mod image;
pub mod input_lines;
pub mod media;
pub mod prompt;
pub mod public;
pub mod rankings;
pub mod raw_payload;
pub mod seq_dist;
pub mod shaping;
pub mod source;
pub mod video;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use rand::rngs::ChaCha8Rng;
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

use self::custom::CustomDatasetType;
use self::image::ImageEncoding;
use self::prompt::PromptBuilder;
use self::source::{ImageSampling, ImageSource, PhotoPool, SourcePhoto};
use crate::hash::splitmix64;
use crate::tokenizer::Tokenizer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Jpeg,
    /// PNG or JPEG, chosen uniformly per image.
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
    /// Images per entry; images are enabled only if > 0 and both means are > 0.
    pub image_batch_size: usize,
    /// None = from entropy.
    pub seed: Option<u64>,
    /// Turns per conversation and think time (multi-turn); the default is one turn.
    pub turns: TurnOptions,
    /// Audio and video clips per entry.
    pub media: media::MediaOptions,
}

/// The shape of synthetic conversations: `--conversation-turn-*` and
/// `--conversation-turn-delay-*`.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOptions {
    /// Turns per conversation ~ Normal(mean, stddev), rounded, at least 1.
    pub mean: u64,
    pub stddev: f64,
    /// Think time before each later turn ~ Normal(mean, stddev) ms, rounded, at least 1 ms,
    /// times `delay_ratio`; no delay when the mean is 0.
    pub delay_mean_ms: f64,
    pub delay_stddev_ms: f64,
    pub delay_ratio: f64,
}

impl Default for TurnOptions {
    fn default() -> Self {
        TurnOptions {
            mean: 1,
            stddev: 0.0,
            delay_mean_ms: 0.0,
            delay_stddev_ms: 0.0,
            delay_ratio: 1.0,
        }
    }
}

impl TurnOptions {
    /// True when conversations can have more than one turn.
    pub fn is_multi_turn(&self) -> bool {
        self.mean > 1 || self.stddev > 0.0
    }
}

impl SyntheticOptions {
    /// Whether entries carry images at all.
    pub fn images_enabled(&self) -> bool {
        self.image_batch_size > 0 && self.image_width_mean > 0.0 && self.image_height_mean > 0.0
    }
}

#[derive(Debug, Clone)]
pub struct EncodedImage {
    pub data_url: String,
    pub width: u32,
    pub height: u32,
    /// "png" | "jpeg"
    pub format: &'static str,
    /// The input file's id for this image (`image_uuids`), sent as the part's `uuid` so
    /// servers can cache by it.
    pub uuid: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Entry {
    /// The prompt text.
    pub text: String,
    /// `tokenizer.count(&text)`.
    pub input_tokens: u64,
    pub images: Vec<EncodedImage>,
    /// Audio clips, sent after the images.
    pub audios: Vec<audio::EncodedAudio>,
    /// Video clips, sent after the audio clips.
    pub videos: Vec<video::EncodedVideo>,
    /// Sampled OSL (>= 1); None when `osl_mean` is None.
    pub max_output_tokens: Option<u64>,
    /// Further text parts after `text` (a custom entry's `texts` list).
    pub extra_texts: Vec<String>,
    /// The message role; None = `user`.
    pub role: Option<String>,
    /// Fields merged at top level into this entry's body, over `--extra-inputs`.
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// A trace's send time in ms from the start of the trace (kept; sent closed-loop for now).
    pub timestamp_ms: Option<u64>,
    /// Wait before this turn is sent, counted from the previous turn's reply.
    pub delay: Option<std::time::Duration>,
    /// The input file's own messages or whole body, sent in place of `text` and `images`
    /// (`text` then holds their texts, for counting).
    pub own: Option<OwnRequest>,
}

/// What a trace row gives instead of a prompt.
#[derive(Debug, Clone)]
pub enum OwnRequest {
    Messages(ChatMessages),
    /// A whole request body (`payload`), sent as written.
    Payload(serde_json::Map<String, serde_json::Value>),
    /// A recorded prompt that already holds its conversation (a Baseten trace row): the
    /// turn is sent as a request of its own (its `text`), without earlier turns or replies.
    Prompt,
}

/// A trace row's OpenAI `messages` array.
#[derive(Debug, Clone)]
pub struct ChatMessages {
    pub list: Vec<serde_json::Value>,
    /// `message_mode: delta`: the row adds to the live conversation (earlier rows and the
    /// replies received); otherwise it is sent verbatim, without history.
    pub delta: bool,
}

impl Entry {
    /// A user turn of `text` (and `images`) with nothing else set.
    pub(crate) fn synthetic(
        text: String,
        input_tokens: u64,
        images: Vec<EncodedImage>,
        max_output_tokens: Option<u64>,
    ) -> Entry {
        Entry {
            text,
            input_tokens,
            images,
            audios: Vec::new(),
            videos: Vec::new(),
            max_output_tokens,
            extra_texts: Vec::new(),
            role: None,
            extra: serde_json::Map::new(),
            timestamp_ms: None,
            delay: None,
            own: None,
        }
    }
}

/// One session: its turns are sent one after another, each with the history before it.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// The input file's session id; None = a generated id.
    pub session_id: Option<String>,
    /// Sent as the leading system message of every turn.
    pub system: Option<String>,
    /// `--user-context-prompt-length`: a user message sent after the system message and
    /// before every turn.
    pub context: Option<String>,
    pub turns: Vec<Entry>,
}

/// In which order conversations are used when requests outnumber them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetSampling {
    /// Dataset order (file order, or the order synthetic entries were made), wrapping
    /// around.
    Sequential,
    /// Every conversation once per cycle, reshuffled each cycle.
    Shuffle,
    /// Uniform draws with replacement.
    Random,
}

#[derive(Debug, Clone)]
pub struct Dataset {
    pub conversations: Vec<Conversation>,
    pub sampling: DatasetSampling,
}

impl Dataset {
    /// True when some conversation has more than one turn.
    #[cfg(test)]
    pub fn is_multi_turn(&self) -> bool {
        self.conversations.iter().any(|c| c.turns.len() > 1)
    }
}

/// Where the dataset comes from, besides the synthetic shape options.
#[derive(Debug, Clone, Default)]
pub struct InputOptions {
    pub image_source: ImageSource,
    pub image_sampling: ImageSampling,
    /// `--input-file` and its `--custom-dataset-type`.
    pub input_file: Option<(std::path::PathBuf, CustomDatasetType)>,
    /// `--synthesis-*`: how a mooncake trace is reshaped.
    pub synthesis: Synthesis,
    /// `--replay-speedup` and the other `baseten_trace` knobs.
    pub baseten: custom::BasetenReplay,
    /// `--isl-block-size`.
    pub isl_block_size: Option<usize>,
    /// `--dataset-sampling-strategy`; None = the source's default.
    pub sampling: Option<DatasetSampling>,
    /// System prompt, user context and prefix pool added to the prompts.
    pub shaping: shaping::PromptShaping,
    /// `--seq-dist`: input/output lengths drawn per turn from pairs, in place of the means.
    pub seq_dist: Option<seq_dist::SeqDist>,
    /// `--prompt-batch-size`: texts per synthetic turn (0 or 1: one).
    pub prompt_batch_size: usize,
    /// `--random-range-ratio R`: lengths uniform in [floor(L(1-R)), ceil(L(1+R))] around
    /// the ISL and OSL means, in place of the normal spread.
    pub range_ratio: Option<f64>,
    /// `--public-dataset` with its subset and filters.
    pub public: Option<public::PublicOptions>,
    /// `--cache-bust`: a marker in each conversation's system message or first turn.
    pub cache_bust: Option<cache_bust::CacheBust>,
    /// `--uuid-and-strip`: images a session already sent (same `uuid`) go without data.
    pub uuid_and_strip: bool,
    /// `--apply-chat-template`: the template's tokens (per request, per message), taken out
    /// of synthetic prompts so the templated ISL matches the length asked for.
    pub chat_template_overhead: Option<(u64, u64)>,
}

/// Why the dataset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Bad input (file contents, image directory): nothing is sent, exit code 2.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Told how far a synthetic build is: its number of jobs (images and prompts) once, then
/// each job done, from any build thread. `()` ignores it.
pub trait BuildProgress: Sync {
    fn begin(&self, _jobs: u64) {}
    fn advance(&self) {}
}

impl BuildProgress for () {}

/// Builds the run's dataset: the custom input file when one is given, synthetic otherwise
/// (reporting its progress to `progress`).
pub fn build(
    synthetic: &SyntheticOptions,
    inputs: &InputOptions,
    tokenizer: &Tokenizer,
    progress: &dyn BuildProgress,
) -> Result<Dataset, BuildError> {
    if let Some(public) = &inputs.public {
        let env = crate::tokenizer::HubEnv::from_process_env();
        let default_output_tokens = synthetic.osl_mean.map(|m| (m.round() as u64).max(1));
        let mut dataset = public::load(public, &env, tokenizer, default_output_tokens, progress)
            .map_err(BuildError::Input)?;
        dataset.sampling = inputs.sampling.unwrap_or(dataset.sampling);
        // Only the system prompt applies (config refuses the synthetic shaping flags).
        let seed = synthetic.seed.unwrap_or_else(|| rand::rng().next_u64());
        shaping::apply(&mut dataset, &inputs.shaping, tokenizer, seed);
        mark_cache_bust(&mut dataset, inputs, tokenizer)?;
        return Ok(dataset);
    }
    if let Some((path, kind)) = &inputs.input_file {
        let seed = synthetic.seed.unwrap_or_else(|| rand::rng().next_u64());
        let opts = custom::CustomOptions {
            path,
            kind: *kind,
            tokenizer,
            default_output_tokens: synthetic.osl_mean.map(|m| (m.round() as u64).max(1)),
            block_size: inputs.isl_block_size,
            pool_draws: synthetic.num_entries,
            seed,
            synthesis: inputs.synthesis.clone(),
            baseten: inputs.baseten.clone(),
        };
        let mut dataset = custom::load(&opts).map_err(BuildError::Input)?;
        if inputs.uuid_and_strip {
            custom::strip_repeated_images(&mut dataset);
        }
        dataset.sampling = inputs.sampling.unwrap_or(dataset.sampling);
        shaping::apply(&mut dataset, &inputs.shaping, tokenizer, seed);
        mark_cache_bust(&mut dataset, inputs, tokenizer)?;
        return Ok(dataset);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The turn counts decide how many entries to build, so the seed is fixed here.
    let mut synthetic = synthetic.clone();
    let master_seed = *synthetic.seed.get_or_insert_with(|| rand::rng().next_u64());
    let shapes = plan_conversations(&synthetic, master_seed)?;
    synthetic.num_entries = shapes.iter().map(|c| c.delays.len()).sum();
    // A `[rid:]` marker takes its tokens from the first turn or the shared system prompt.
    let mut shaping = inputs.shaping.clone();
    let first_turn_cut = match inputs.cache_bust.map(|target| {
        let verbatim = shaping.system_text.is_some();
        let shared = shaping.shared_system_tokens.is_some();
        cache_bust::budget(target, tokenizer, verbatim, shared)
    }) {
        Some(cache_bust::Budget::FirstTurn(cost)) => cost,
        Some(cache_bust::Budget::SharedSystem(cost)) => {
            shaping.shared_system_tokens = shaping
                .shared_system_tokens
                .map(|n| n.saturating_sub(cost).max(1));
            0
        }
        _ => 0,
    };
    let mut first_turns = Vec::with_capacity(synthetic.num_entries);
    for shape in &shapes {
        first_turns.extend((0..shape.delays.len()).map(|t| t == 0));
    }
    // As AIPerf: the per-request cost comes out of the first turn, a message's wrap out of
    // every turn.
    let (fixed, wrap) = inputs.chat_template_overhead.unwrap_or((0, 0));
    let (fixed, wrap) = (fixed as usize, wrap as usize);
    let cut = |i: usize| match first_turns[i] {
        true => first_turn_cut + fixed + wrap,
        false => wrap,
    };
    let mut entries = build_synthetic_cut(&synthetic, inputs, tokenizer, threads, progress, &cut)?;
    batch::add_texts(
        &mut entries,
        inputs.prompt_batch_size,
        &synthetic,
        tokenizer,
        inputs.shaping.corpus,
        master_seed,
    )?;
    media::attach(&mut entries, &synthetic.media, master_seed, threads)?;
    let mut entries = entries.into_iter();
    let conversations = shapes
        .into_iter()
        .map(|shape| Conversation {
            session_id: None,
            system: None,
            context: None,
            turns: shape
                .delays
                .into_iter()
                .map(|delay| Entry {
                    delay,
                    ..entries.next().expect("one entry per turn")
                })
                .collect(),
        })
        .collect();
    let mut dataset = Dataset {
        conversations,
        // AIPerf sends synthetic entries in the order they were made.
        sampling: inputs.sampling.unwrap_or(DatasetSampling::Sequential),
    };
    shaping::apply(&mut dataset, &shaping, tokenizer, master_seed);
    mark_cache_bust(&mut dataset, inputs, tokenizer)?;
    Ok(dataset)
}

/// `--cache-bust`: the marker in every conversation (see `cache_bust`).
fn mark_cache_bust(
    dataset: &mut Dataset,
    inputs: &InputOptions,
    tokenizer: &Tokenizer,
) -> Result<(), BuildError> {
    match inputs.cache_bust {
        Some(target) => cache_bust::mark(dataset, target, tokenizer),
        None => Ok(()),
    }
}

/// One synthetic conversation's shape: per turn, the think time before it.
struct ConversationShape {
    delays: Vec<Option<std::time::Duration>>,
}

/// Draws each conversation's turn count and think times from their own streams, so a
/// single-turn dataset is the same as without them.
fn plan_conversations(
    opts: &SyntheticOptions,
    master_seed: u64,
) -> Result<Vec<ConversationShape>, BuildError> {
    let t = &opts.turns;
    let turns = normal("turns per conversation", t.mean as f64, t.stddev)?;
    let delay = normal("turn delay", t.delay_mean_ms, t.delay_stddev_ms)?;
    Ok((0..opts.num_entries as u64)
        .map(|i| {
            let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(master_seed, STREAM_TURNS, i));
            let n = sample_at_least_one(&turns, &mut rng).min(MAX_TURNS) as usize;
            let delays = (0..n)
                .map(|turn| {
                    (turn > 0 && t.delay_mean_ms > 0.0).then(|| {
                        let ms = sample_at_least_one(&delay, &mut rng) as f64 * t.delay_ratio;
                        std::time::Duration::from_secs_f64(ms / 1e3)
                    })
                })
                .collect();
            ConversationShape { delays }
        })
        .collect())
}

/// Synthetic entries with images from `inputs.image_source`, built before the run on at
/// most `threads` threads. Deterministic (byte-identical) for a given seed, whatever
/// `threads` is.
pub fn build_synthetic(
    opts: &SyntheticOptions,
    inputs: &InputOptions,
    tokenizer: &Tokenizer,
    threads: usize,
    progress: &dyn BuildProgress,
) -> Result<Vec<Entry>, BuildError> {
    build_synthetic_cut(opts, inputs, tokenizer, threads, progress, &|_| 0)
}

/// `build_synthetic`, entry `i`'s input length shortened by `cut(i)` tokens (at least 1
/// is left): room for a cache-bust marker.
fn build_synthetic_cut(
    opts: &SyntheticOptions,
    inputs: &InputOptions,
    tokenizer: &Tokenizer,
    threads: usize,
    progress: &dyn BuildProgress,
    cut: &dyn Fn(usize) -> usize,
) -> Result<Vec<Entry>, BuildError> {
    let master_seed = opts.seed.unwrap_or_else(|| rand::rng().next_u64());
    let mut pool = match &inputs.image_source {
        _ if !opts.images_enabled() => None,
        ImageSource::Noise => None,
        ImageSource::Assets => Some(PhotoPool::bundled(inputs.image_sampling)),
        ImageSource::Directory(dir) => {
            Some(PhotoPool::directory(dir, inputs.image_sampling).map_err(BuildError::Input)?)
        }
    };
    let mut plan = plan_entries(opts, master_seed, pool.as_mut(), inputs)?;
    for (i, p) in plan.iter_mut().enumerate() {
        let cut = cut(i);
        if cut > 0 {
            p.input_tokens = p.input_tokens.saturating_sub(cut).max(1);
        }
    }
    let images: Vec<&ImagePlan> = plan.iter().flat_map(|e| &e.images).collect();
    let builder = PromptBuilder::for_corpus(tokenizer, inputs.shaping.corpus);

    // Images go first: the builtin tokenizer may still be loading on its own thread.
    let jobs = images.len() + plan.len();
    progress.begin(jobs as u64);
    let mut results = parallel_map(jobs, threads, |job| {
        let built = if job < images.len() {
            let p = images[job];
            match &p.photo {
                Some(photo) => source::photo_image(photo, p.width, p.height, p.encoding),
                None => image::noise_image(p.width, p.height, p.encoding, p.noise_seed),
            }
            .with_context(|| format!("cannot encode a {}x{} image", p.width, p.height))
            .map(Built::Image)
        } else {
            let p = &plan[job - images.len()];
            let mut rng = ChaCha8Rng::seed_from_u64(p.prompt_seed);
            Ok(Built::Prompt(builder.build(p.input_tokens, &mut rng)))
        };
        progress.advance();
        built
    })
    .into_iter();

    let mut encoded: Vec<EncodedImage> = Vec::with_capacity(images.len());
    for result in results.by_ref().take(images.len()) {
        match result? {
            Built::Image(img) => encoded.push(img),
            Built::Prompt(_) => unreachable!("image jobs come first"),
        }
    }
    let mut encoded = encoded.into_iter();
    let mut entries = Vec::with_capacity(plan.len());
    for (p, result) in plan.iter().zip(results) {
        let Built::Prompt(prompt) = result? else {
            unreachable!("prompt jobs come last")
        };
        entries.push(Entry::synthetic(
            prompt.text,
            prompt.tokens as u64,
            encoded.by_ref().take(p.images.len()).collect(),
            p.max_output_tokens,
        ));
    }
    Ok(entries)
}

enum Built {
    Image(EncodedImage),
    Prompt(prompt::Prompt),
}

/// Everything random about one entry, drawn up front from seeds derived per entry and per
/// image, so the work can then run on any number of threads with the same result.
struct EntryPlan {
    input_tokens: usize,
    max_output_tokens: Option<u64>,
    prompt_seed: u64,
    images: Vec<ImagePlan>,
}

struct ImagePlan {
    width: u32,
    height: u32,
    encoding: ImageEncoding,
    noise_seed: u64,
    /// The photo to resize, for a finite image source; None = noise.
    photo: Option<std::sync::Arc<SourcePhoto>>,
}

/// Independent random streams, so adding images does not change the prompts.
const STREAM_ENTRY: u64 = 1;
const STREAM_IMAGE: u64 = 2;
const STREAM_PHOTO: u64 = 3;
const STREAM_TURNS: u64 = 4;
const STREAM_SEQ_DIST: u64 = 5;
const STREAM_RANGE: u64 = 7;

/// Most turns a synthetic conversation gets, whatever its distribution draws: a huge
/// stddev must not turn into billions of entries.
pub const MAX_TURNS: u64 = 10_000;

/// Largest prompt, in tokens, built for one request (a sampled length above is capped):
/// beyond the longest context windows, and small enough to build in memory.
pub const MAX_INPUT_TOKENS: u64 = 2_000_000;

/// Largest output length, in tokens, asked of the server (a sampled length above is
/// capped): the longest context window any model offers. A larger `--osl` is a typo.
pub const MAX_OUTPUT_TOKENS: u64 = 10_000_000;

/// Largest image side in pixels (a sampled side above is capped).
pub const MAX_IMAGE_SIDE: u32 = 16_384;

/// Photos are picked here, in image order from one seeded stream, so the choice (and which
/// files turn out undecodable) does not depend on the thread count.
fn plan_entries(
    opts: &SyntheticOptions,
    master_seed: u64,
    mut pool: Option<&mut PhotoPool>,
    inputs: &InputOptions,
) -> Result<Vec<EntryPlan>, BuildError> {
    let mut photo_rng = ChaCha8Rng::seed_from_u64(derive_seed(master_seed, STREAM_PHOTO, 0));
    let isl = normal("input tokens", opts.isl_mean, opts.isl_stddev)?;
    let osl = match opts.osl_mean {
        Some(mean) => Some(normal("output tokens", mean, opts.osl_stddev)?),
        None => None,
    };
    let images_per_entry = if opts.images_enabled() {
        opts.image_batch_size
    } else {
        0
    };
    let width = normal(
        "image width",
        opts.image_width_mean,
        opts.image_width_stddev,
    )?;
    let height = normal(
        "image height",
        opts.image_height_mean,
        opts.image_height_stddev,
    )?;

    let mut plans = Vec::with_capacity(opts.num_entries);
    for i in 0..opts.num_entries {
        let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(master_seed, STREAM_ENTRY, i as u64));
        let mut input_tokens = sample_at_least_one(&isl, &mut rng).min(MAX_INPUT_TOKENS) as usize;
        let mut max_output_tokens = osl
            .as_ref()
            .map(|d| sample_at_least_one(d, &mut rng).min(MAX_OUTPUT_TOKENS));
        if let Some(r) = inputs.range_ratio {
            let seed = derive_seed(master_seed, STREAM_RANGE, i as u64);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let isl = opts.isl_mean;
            let low = ((isl * (1.0 - r)).floor() as u64).max(1);
            let high = ((isl * (1.0 + r)).ceil() as u64).clamp(low, MAX_INPUT_TOKENS);
            input_tokens = rng.random_range(low..=high) as usize;
            if let Some(osl) = opts.osl_mean {
                let low = ((osl * (1.0 - r)).floor() as u64).max(1);
                let high = ((osl * (1.0 + r)).ceil() as u64).clamp(low, MAX_OUTPUT_TOKENS);
                max_output_tokens = Some(rng.random_range(low..=high));
            }
        }
        if let Some(dist) = &inputs.seq_dist {
            let seed = derive_seed(master_seed, STREAM_SEQ_DIST, i as u64);
            let (isl, osl) = dist.sample(&mut ChaCha8Rng::seed_from_u64(seed));
            (input_tokens, max_output_tokens) = (isl as usize, Some(osl));
        }
        let prompt_seed = rng.next_u64();
        let mut images = Vec::with_capacity(images_per_entry);
        for j in 0..images_per_entry {
            let photo = match pool.as_deref_mut() {
                Some(pool) => Some(pool.pick(&mut photo_rng).map_err(BuildError::Input)?),
                None => None,
            };
            images.push({
                let index = (i * images_per_entry + j) as u64;
                let mut rng =
                    ChaCha8Rng::seed_from_u64(derive_seed(master_seed, STREAM_IMAGE, index));
                let max_side = u64::from(MAX_IMAGE_SIDE);
                let width = sample_at_least_one(&width, &mut rng).min(max_side) as u32;
                let height = sample_at_least_one(&height, &mut rng).min(max_side) as u32;
                let encoding = match opts.image_format {
                    ImageFormat::Png => ImageEncoding::Png,
                    ImageFormat::Jpeg => ImageEncoding::Jpeg,
                    ImageFormat::Random if rng.random_bool(0.5) => ImageEncoding::Png,
                    ImageFormat::Random => ImageEncoding::Jpeg,
                };
                ImagePlan {
                    width,
                    height,
                    encoding,
                    noise_seed: rng.next_u64(),
                    photo,
                }
            });
        }
        plans.push(EntryPlan {
            input_tokens,
            max_output_tokens,
            prompt_seed,
            images,
        });
    }
    Ok(plans)
}

fn normal(what: &str, mean: f64, stddev: f64) -> anyhow::Result<Normal<f64>> {
    if !mean.is_finite() || !stddev.is_finite() || stddev < 0.0 {
        bail!("{what}: mean {mean} and stddev {stddev} must be finite with stddev >= 0");
    }
    Ok(Normal::new(mean, stddev)?)
}

/// A normal sample rounded to an integer, at least 1. A zero stddev gives the mean exactly.
fn sample_at_least_one(dist: &Normal<f64>, rng: &mut impl Rng) -> u64 {
    let x = if dist.std_dev() == 0.0 {
        dist.mean()
    } else {
        dist.sample(rng)
    };
    // `as` saturates: huge values clamp to u64::MAX, NaN cannot occur for finite parameters.
    (x.round() as u64).max(1)
}

/// A seed for item `index` of random stream `stream`, mixed from the master seed
/// (SplitMix64 finalizer) so neighbouring items get unrelated seeds.
fn derive_seed(master: u64, stream: u64, index: u64) -> u64 {
    // `index + 1` times the golden ratio, which splitmix64 adds itself: the mix of
    // `master ^ stream * K + index * golden` (the same values as before it was shared).
    let z = master
        ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03)
        ^ index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    splitmix64(z.wrapping_sub(0x9E37_79B9_7F4A_7C15))
}

/// `f(0..count)` on up to `threads` scoped threads, results in index order. Workers take the
/// next index from a shared counter, so uneven jobs (big images, long prompts) balance out.
fn parallel_map<T: Send>(count: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = threads.clamp(1, count.max(1));
    if threads == 1 {
        return (0..count).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<T>>> = Mutex::new((0..count).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let value = f(i);
                    slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(value);
                }
            });
        }
    });
    slots
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|slot| slot.expect("every index was computed"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic entries from noise images, on two threads.
    fn synthetic(o: &SyntheticOptions, t: &Tokenizer) -> Result<Vec<Entry>, BuildError> {
        build_synthetic(o, &InputOptions::default(), t, 2, &())
    }

    fn opts() -> SyntheticOptions {
        SyntheticOptions {
            num_entries: 12,
            isl_mean: 120.0,
            isl_stddev: 30.0,
            osl_mean: Some(50.0),
            osl_stddev: 10.0,
            image_width_mean: 64.0,
            image_width_stddev: 8.0,
            image_height_mean: 48.0,
            image_height_stddev: 0.0,
            image_format: ImageFormat::Random,
            image_batch_size: 2,
            seed: Some(42),
            turns: TurnOptions::default(),
            media: media::MediaOptions::default(),
        }
    }

    fn fingerprint(entries: &[Entry]) -> Vec<(String, u64, Option<u64>, Vec<String>)> {
        entries
            .iter()
            .map(|e| {
                let urls = e.images.iter().map(|i| i.data_url.clone()).collect();
                (e.text.clone(), e.input_tokens, e.max_output_tokens, urls)
            })
            .collect()
    }

    #[test]
    fn same_seed_gives_identical_dataset_on_any_thread_count() {
        let t = Tokenizer::builtin().unwrap();
        let one = build_synthetic(&opts(), &InputOptions::default(), &t, 1, &()).unwrap();
        let three = build_synthetic(&opts(), &InputOptions::default(), &t, 3, &()).unwrap();
        let default = synthetic(&opts(), &t).unwrap();
        assert_eq!(fingerprint(&one), fingerprint(&three));
        assert_eq!(fingerprint(&one), fingerprint(&default));

        let other = synthetic(
            &SyntheticOptions {
                seed: Some(43),
                ..opts()
            },
            &t,
        )
        .unwrap();
        assert_ne!(fingerprint(&one), fingerprint(&other));
    }

    #[test]
    fn entries_match_the_options() {
        let t = Tokenizer::builtin().unwrap();
        let entries = synthetic(&opts(), &t).unwrap();
        assert_eq!(entries.len(), 12);
        let mut formats = std::collections::HashSet::new();
        for e in &entries {
            assert_eq!(e.input_tokens, t.count(&e.text) as u64);
            assert!(e.input_tokens >= 1);
            assert!(e.max_output_tokens.unwrap() >= 1);
            assert_eq!(e.images.len(), 2);
            for img in &e.images {
                assert_eq!(img.height, 48, "zero stddev gives the mean exactly");
                assert!((20..=110).contains(&img.width), "{}", img.width);
                let prefix = format!("data:image/{};base64,", img.format);
                assert!(img.data_url.starts_with(&prefix));
                formats.insert(img.format);
            }
        }
        // 24 images with a fair coin: both formats appear.
        assert_eq!(formats.len(), 2, "{formats:?}");
        // The ISL distribution is honoured: not all the same length.
        let lengths: std::collections::HashSet<u64> =
            entries.iter().map(|e| e.input_tokens).collect();
        assert!(lengths.len() > 3);
    }

    #[test]
    fn fixed_lengths_without_stddev() {
        let t = Tokenizer::builtin().unwrap();
        let o = SyntheticOptions {
            isl_stddev: 0.0,
            osl_stddev: 0.0,
            image_batch_size: 0,
            ..opts()
        };
        for e in synthetic(&o, &t).unwrap() {
            assert_eq!(e.input_tokens, 120);
            assert_eq!(e.max_output_tokens, Some(50));
            assert!(e.images.is_empty());
        }
    }

    #[test]
    fn images_need_batch_size_and_both_means() {
        let t = Tokenizer::builtin().unwrap();
        let no_osl = SyntheticOptions {
            osl_mean: None,
            image_height_mean: 0.0,
            num_entries: 3,
            ..opts()
        };
        assert!(!no_osl.images_enabled());
        for e in synthetic(&no_osl, &t).unwrap() {
            assert!(e.images.is_empty());
            assert_eq!(e.max_output_tokens, None);
        }
    }

    #[test]
    fn images_do_not_change_prompts() {
        let t = Tokenizer::builtin().unwrap();
        let with = synthetic(&opts(), &t).unwrap();
        let without = synthetic(
            &SyntheticOptions {
                image_batch_size: 0,
                ..opts()
            },
            &t,
        )
        .unwrap();
        let texts = |v: &[Entry]| v.iter().map(|e| e.text.clone()).collect::<Vec<_>>();
        assert_eq!(texts(&with), texts(&without));
    }

    #[test]
    fn fixed_format_is_used_for_every_image() {
        let t = Tokenizer::builtin().unwrap();
        let o = SyntheticOptions {
            image_format: ImageFormat::Jpeg,
            num_entries: 3,
            ..opts()
        };
        for e in synthetic(&o, &t).unwrap() {
            assert!(e.images.iter().all(|i| i.format == "jpeg"));
        }
    }

    #[test]
    fn invalid_distributions_are_errors() {
        let t = Tokenizer::builtin().unwrap();
        let negative = SyntheticOptions {
            isl_stddev: -1.0,
            ..opts()
        };
        assert!(synthetic(&negative, &t).is_err());
        let nan = SyntheticOptions {
            osl_mean: Some(f64::NAN),
            ..opts()
        };
        assert!(synthetic(&nan, &t).is_err());
    }

    #[test]
    fn samples_round_and_clamp_to_one() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            sample_at_least_one(&Normal::new(2.5, 0.0).unwrap(), &mut rng),
            3
        );
        assert_eq!(
            sample_at_least_one(&Normal::new(-5.0, 0.0).unwrap(), &mut rng),
            1
        );
        let d = Normal::new(1000.0, 100.0).unwrap();
        let mean = (0..2000)
            .map(|_| sample_at_least_one(&d, &mut rng) as f64)
            .sum::<f64>()
            / 2000.0;
        assert!((mean - 1000.0).abs() < 15.0, "{mean}");
    }

    #[test]
    fn derived_seeds_differ_per_stream_and_index() {
        let seeds: std::collections::HashSet<u64> = (0..1000)
            .flat_map(|i| {
                [
                    derive_seed(7, STREAM_ENTRY, i),
                    derive_seed(7, STREAM_IMAGE, i),
                ]
            })
            .collect();
        assert_eq!(seeds.len(), 2000);
        assert_ne!(derive_seed(7, 1, 0), derive_seed(8, 1, 0));
    }

    #[test]
    fn parallel_map_keeps_order() {
        let squares = parallel_map(100, 4, |i| i * i);
        assert_eq!(squares, (0..100).map(|i| i * i).collect::<Vec<_>>());
        assert!(parallel_map(0, 4, |i| i).is_empty());
    }

    fn text_only(num_entries: usize, turns: TurnOptions) -> SyntheticOptions {
        SyntheticOptions {
            num_entries,
            isl_stddev: 0.0,
            image_batch_size: 0,
            turns,
            ..opts()
        }
    }

    #[test]
    fn one_turn_conversations_are_the_single_turn_entries() {
        let t = Tokenizer::builtin().unwrap();
        let o = opts();
        let dataset = build(&o, &InputOptions::default(), &t, &()).unwrap();
        assert!(!dataset.is_multi_turn());
        let firsts: Vec<Entry> = dataset
            .conversations
            .into_iter()
            .map(|mut c| c.turns.remove(0))
            .collect();
        assert_eq!(
            fingerprint(&firsts),
            fingerprint(&synthetic(&o, &t).unwrap())
        );
    }

    #[test]
    fn conversations_get_their_turns_and_think_times() {
        let t = Tokenizer::builtin().unwrap();
        let turns = TurnOptions {
            mean: 3,
            delay_mean_ms: 40.0,
            delay_ratio: 0.5,
            ..TurnOptions::default()
        };
        let dataset = build(&text_only(5, turns), &InputOptions::default(), &t, &()).unwrap();
        assert!(dataset.is_multi_turn());
        assert_eq!(dataset.conversations.len(), 5);
        let mut texts = std::collections::HashSet::new();
        for c in &dataset.conversations {
            assert_eq!(c.turns.len(), 3);
            // No wait before the first turn; 40 ms x 0.5 before the others.
            let delays: Vec<_> = c.turns.iter().map(|e| e.delay).collect();
            let d = Some(std::time::Duration::from_millis(20));
            assert_eq!(delays, vec![None, d, d]);
            for e in &c.turns {
                assert_eq!(e.input_tokens, 120);
                texts.insert(e.text.clone());
            }
        }
        // Every turn is its own prompt.
        assert_eq!(texts.len(), 15);
    }

    #[test]
    fn a_huge_turn_stddev_is_bounded() {
        let turns = TurnOptions {
            mean: 2,
            stddev: 1e12,
            ..TurnOptions::default()
        };
        let o = SyntheticOptions {
            isl_mean: 1.0,
            ..text_only(6, turns)
        };
        let shapes = plan_conversations(&o, 9).unwrap();
        let counts: Vec<usize> = shapes.iter().map(|c| c.delays.len()).collect();
        assert!(
            counts
                .iter()
                .all(|&n| (1..=MAX_TURNS as usize).contains(&n)),
            "{counts:?}"
        );
        assert!(counts.contains(&(MAX_TURNS as usize)), "{counts:?}");
    }

    #[test]
    fn turn_counts_and_delays_follow_their_normal_distributions() {
        let t = Tokenizer::builtin().unwrap();
        let turns = TurnOptions {
            mean: 4,
            stddev: 1.5,
            delay_mean_ms: 100.0,
            delay_stddev_ms: 20.0,
            delay_ratio: 1.0,
        };
        let o = SyntheticOptions {
            isl_mean: 5.0,
            ..text_only(400, turns)
        };
        let dataset = build(&o, &InputOptions::default(), &t, &()).unwrap();
        let counts: Vec<f64> = dataset
            .conversations
            .iter()
            .map(|c| c.turns.len() as f64)
            .collect();
        let mean = counts.iter().sum::<f64>() / counts.len() as f64;
        let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / counts.len() as f64;
        assert!((mean - 4.0).abs() < 0.25, "mean {mean}");
        assert!((var.sqrt() - 1.5).abs() < 0.3, "stddev {}", var.sqrt());
        assert!(counts.iter().all(|&c| c >= 1.0));
        let delays: Vec<f64> = dataset
            .conversations
            .iter()
            .flat_map(|c| c.turns.iter().skip(1))
            .map(|e| e.delay.expect("later turns wait").as_secs_f64() * 1e3)
            .collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((mean - 100.0).abs() < 3.0, "delay mean {mean}");
        // Whole milliseconds, as AIPerf samples them.
        assert!(delays.iter().all(|d| (d - d.round()).abs() < 1e-6));

        // The same seed gives the same conversations.
        let again = build(&o, &InputOptions::default(), &t, &()).unwrap();
        let shape = |d: &Dataset| -> Vec<Vec<Option<std::time::Duration>>> {
            d.conversations
                .iter()
                .map(|c| c.turns.iter().map(|e| e.delay).collect())
                .collect()
        };
        assert_eq!(shape(&dataset), shape(&again));
    }
}
