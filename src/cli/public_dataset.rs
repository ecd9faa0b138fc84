//! `--public-dataset`, `--hf-subset` and `--dataset-filter`.

use clap::Args;

/// Benchmark datasets from the Hugging Face hub.
#[derive(Debug, Clone, Default, Args)]
pub struct PublicDatasetArgs {
    /// A public benchmark dataset from the Hugging Face hub, used in place of synthetic
    /// prompts: sharegpt, mmstar, vision_arena, llava_onevision, mmvu, aimo, aimo_aime,
    /// aimo_numina_cot, aimo_numina_1_5, spec_al_gsm8k, spec_al_math500, spec_al_humaneval,
    /// spec_al_mbpp, instruct_coder. One single-turn request per row (for the vision sets
    /// with the row's image, sent as a data URL of its stored bytes; for mmvu the question
    /// with its choices and the video's URL), in dataset order.
    /// Downloaded once into the Hugging Face cache ($HF_HOME/hub; HF_ENDPOINT, HF_TOKEN and
    /// HF_HUB_OFFLINE=1 are honoured); only as many rows as can be sent are read. AIPerf's
    /// other names (exgentic, ASR sets, traces, ...) are refused.
    #[arg(long, value_name = "NAME", help_heading = "Input")]
    pub public_dataset: Option<String>,

    /// The dataset's subset (Hugging Face config) to read instead of its default, e.g.
    /// `--public-dataset llava_onevision --hf-subset "CLEVR-Math(MathV360K)"`.
    #[arg(long, value_name = "SUBSET", help_heading = "Input")]
    pub hf_subset: Option<String>,

    /// Keep only the --public-dataset rows whose COLUMN equals VALUE (text, number or
    /// true/false, compared as written); repeat it to require several. AIPerf's flag is
    /// loader-specific; filtering any public dataset by a column is an extension of this
    /// build.
    #[arg(long, value_name = "COLUMN=VALUE", help_heading = "Input")]
    pub dataset_filter: Vec<String>,
}
