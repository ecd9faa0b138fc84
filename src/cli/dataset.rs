//! Flags about how the dataset is used.

use clap::{Args, ValueEnum};

/// How the entries of the dataset are used, one send after the other.
#[derive(Debug, Clone, Default, Args)]
pub struct DatasetArgs {
    /// Order in which dataset entries (conversations) are sent: `sequential` (in order,
    /// wrapping around), `shuffle` (each entry once per round, in a fresh random order every
    /// round) or `random` (drawn with replacement). Default: `random` for random_pool input
    /// files, `sequential` otherwise (synthetic data too). Not with a fixed schedule.
    #[arg(long, value_enum, help_heading = "Input")]
    pub dataset_sampling_strategy: Option<DatasetSamplingStrategy>,
}

/// `--dataset-sampling-strategy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DatasetSamplingStrategy {
    Sequential,
    Random,
    Shuffle,
}
