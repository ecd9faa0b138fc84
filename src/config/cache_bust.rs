//! `--cache-bust` into the dataset's marker target, with its checks.

use super::{ConfigError, config_error};
use crate::cli::ProfileArgs;
use crate::cli::cache_bust::CacheBustTarget;
use crate::dataset::cache_bust::CacheBust;
use crate::endpoint::EndpointType;

pub(super) fn cache_bust(
    a: &ProfileArgs,
    endpoint: EndpointType,
) -> Result<Option<CacheBust>, ConfigError> {
    let Some(value) = a.cache_bust.cache_bust else {
        return Ok(None);
    };
    let target = match value {
        CacheBustTarget::None => return Ok(None),
        CacheBustTarget::SystemPrefix => CacheBust::SystemPrefix,
        CacheBustTarget::SystemSuffix => CacheBust::SystemSuffix,
        CacheBustTarget::FirstTurnPrefix => CacheBust::FirstTurnPrefix,
        CacheBustTarget::FirstTurnSuffix => CacheBust::FirstTurnSuffix,
        CacheBustTarget::WarmupIsolationSystem => CacheBust::WarmupIsolationSystem,
        CacheBustTarget::WarmupIsolationFirstTurn => CacheBust::WarmupIsolationFirstTurn,
    };
    if !matches!(
        endpoint,
        EndpointType::Chat | EndpointType::Responses | EndpointType::Messages
    ) {
        return Err(config_error(format!(
            "--cache-bust needs --endpoint-type chat, responses or messages: {} has no system message or user turn to put the marker in; drop --cache-bust",
            endpoint.as_str()
        )));
    }
    // AIPerf refuses it here too: synthetic prompts have no system message unless one is set.
    let synthetic = a.input_file.is_none() && a.public.public_dataset.is_none();
    let p = &a.prompt;
    let system = p.system_prompt.is_some()
        || p.system_prompt_file.is_some()
        || p.shared_system_prompt_length.is_some();
    if target == CacheBust::WarmupIsolationSystem && synthetic && !system {
        return Err(config_error(
            "--cache-bust warmup-isolation-system needs a system message to mark, and synthetic prompts have none: add --shared-system-prompt-length N or --system-prompt TEXT, or use --cache-bust warmup-isolation-first-turn",
        ));
    }
    Ok(Some(target))
}
