//! The command line's value enums, mapped to the stages' own types.

use super::ReadinessProbe;
use crate::cli::{self};
use crate::dataset::custom::CustomDatasetType;
use crate::dataset::source::ImageSampling;
use crate::dataset::{DatasetSampling, ImageFormat};
use crate::endpoint::ModelSelection;
use crate::transport::ConnectionReuse;
use crate::ui::UiType;

impl From<cli::WaitForModelMode> for ReadinessProbe {
    fn from(v: cli::WaitForModelMode) -> Self {
        match v {
            cli::WaitForModelMode::Models => ReadinessProbe::Models,
            cli::WaitForModelMode::Inference => ReadinessProbe::Inference,
            cli::WaitForModelMode::Both => ReadinessProbe::Both,
        }
    }
}

impl From<cli::UiType> for UiType {
    fn from(v: cli::UiType) -> Self {
        match v {
            cli::UiType::Dashboard => UiType::Dashboard,
            cli::UiType::Simple => UiType::Simple,
            cli::UiType::None => UiType::None,
        }
    }
}

impl From<cli::ImageFormat> for ImageFormat {
    fn from(v: cli::ImageFormat) -> Self {
        match v {
            cli::ImageFormat::Png => ImageFormat::Png,
            cli::ImageFormat::Jpeg => ImageFormat::Jpeg,
            cli::ImageFormat::Random => ImageFormat::Random,
        }
    }
}

impl From<cli::ImageSampling> for ImageSampling {
    fn from(v: cli::ImageSampling) -> Self {
        match v {
            cli::ImageSampling::RandomWithReplacement => ImageSampling::RandomWithReplacement,
            cli::ImageSampling::ShuffleCycle => ImageSampling::ShuffleCycle,
            cli::ImageSampling::SequentialCycle => ImageSampling::SequentialCycle,
        }
    }
}

impl From<cli::CustomDatasetType> for CustomDatasetType {
    fn from(v: cli::CustomDatasetType) -> Self {
        match v {
            cli::CustomDatasetType::SingleTurn => CustomDatasetType::SingleTurn,
            cli::CustomDatasetType::MultiTurn => CustomDatasetType::MultiTurn,
            cli::CustomDatasetType::RandomPool => CustomDatasetType::RandomPool,
            cli::CustomDatasetType::MooncakeTrace => CustomDatasetType::MooncakeTrace,
            cli::CustomDatasetType::RawPayload => CustomDatasetType::RawPayload,
            cli::CustomDatasetType::BasetenTrace => CustomDatasetType::BasetenTrace,
        }
    }
}

impl From<cli::dataset::DatasetSamplingStrategy> for DatasetSampling {
    fn from(v: cli::dataset::DatasetSamplingStrategy) -> Self {
        match v {
            cli::dataset::DatasetSamplingStrategy::Sequential => DatasetSampling::Sequential,
            cli::dataset::DatasetSamplingStrategy::Random => DatasetSampling::Random,
            cli::dataset::DatasetSamplingStrategy::Shuffle => DatasetSampling::Shuffle,
        }
    }
}

impl From<cli::load::ModelSelection> for ModelSelection {
    fn from(v: cli::load::ModelSelection) -> Self {
        match v {
            cli::load::ModelSelection::RoundRobin => ModelSelection::RoundRobin,
            cli::load::ModelSelection::Random => ModelSelection::Random,
        }
    }
}

impl From<cli::load::ConnectionReuse> for ConnectionReuse {
    fn from(v: cli::load::ConnectionReuse) -> Self {
        match v {
            cli::load::ConnectionReuse::Pooled => ConnectionReuse::Pooled,
            cli::load::ConnectionReuse::Never => ConnectionReuse::Never,
            cli::load::ConnectionReuse::StickyUserSessions => ConnectionReuse::StickySessions,
        }
    }
}
