//! Everything built before the first request: the tokenizer, the dataset, the request
//! bodies and the send plan (with its fixed schedule, when replaying a trace).

use std::sync::Arc;
use std::time::Instant;

use tracing::{info, warn};

use super::{ProfileError, Reuse};
use crate::config::{ConfigError, ProfileConfig};
use crate::dataset::DatasetSampling;
use crate::endpoint::{self, BodyOptions, ModelPicker, PreparedConversation};
use crate::load::SendPlan;
use crate::load::cache_bust::CacheBustPlan;
use crate::tokenizer::{self, Tokenizer};
use crate::{dataset, ui};

pub(super) struct Prepared {
    pub tokenizer: Arc<Tokenizer>,
    pub plan: SendPlan,
    /// Send offsets (ns) of a fixed schedule.
    pub schedule: Option<Arc<[u64]>>,
    /// Requests of the warmup phase (its turns, when counted in conversations).
    pub warmup_requests: u64,
    /// `--accuracy-benchmark`: the questions sent, to grade the replies against.
    pub questions: Option<Arc<crate::accuracy::Questions>>,
}

/// Builds what the run sends. Counts that depend on the drawn plan (conversations counted
/// in turns, a schedule's window) are written back into `cfg.request_count`.
/// What `reuse` holds from an earlier run of this process (a sweep's) is used again: the
/// tokenizer when it is the same one, the request bodies when every option they are built
/// from, seed included, is the same (repeated runs of a point).
pub(super) fn prepare(
    cfg: &mut ProfileConfig,
    reuse: &mut Reuse,
) -> Result<Prepared, ProfileError> {
    let tokenizer = match &reuse.tokenizer {
        Some((name, revision, tok))
            if *name == cfg.tokenizer && *revision == cfg.tokenizer_revision =>
        {
            info!("Using tokenizer: {} (loaded by an earlier run)", tok.name());
            tok.clone()
        }
        _ => {
            let tok = tokenizer::resolve(&cfg.tokenizer, &cfg.tokenizer_revision)
                .map_err(|e| ConfigError(format!("--tokenizer: '{}': {e:#}", cfg.tokenizer)))?;
            if let Some(w) = &tok.warning {
                warn!("{w}");
            }
            let tokenizer = Arc::new(tok.tokenizer);
            match tokenizer.how() {
                Some(how) => info!("Using tokenizer: {} ({how})", tokenizer.name()),
                None => info!("Using tokenizer: {}", tokenizer.name()),
            }
            reuse.tokenizer = Some((
                cfg.tokenizer.clone(),
                cfg.tokenizer_revision.clone(),
                tokenizer.clone(),
            ));
            tokenizer
        }
    };

    if cfg.apply_chat_template {
        chat_template_overhead(cfg, &tokenizer)?;
    }

    let t_dataset = Instant::now();
    let body_opts = BodyOptions {
        model: cfg.model.clone(),
        streaming: cfg.streaming,
        use_legacy_max_tokens: cfg.use_legacy_max_tokens,
        extra_inputs: cfg.extra_inputs.clone(),
    };
    // Everything the bodies are made from; with a seed, the same key gives the same bytes.
    let key = cfg.synthetic.seed.map(|_| {
        format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}",
            cfg.synthetic,
            cfg.inputs,
            body_opts,
            cfg.endpoint_type,
            cfg.models,
            cfg.model_selection,
            cfg.random_seed,
            tokenizer.name(),
            &cfg.rankings
        )
    });
    let mut questions = None;
    let (conversations, sampling) = match (&key, &reuse.dataset) {
        _ if cfg.accuracy.is_some() => {
            let (built, q) = accuracy_conversations(cfg, &tokenizer, &body_opts)?;
            questions = Some(q);
            built
        }
        (Some(k), Some((built, conversations, sampling))) if k == built => {
            info!("Reusing the dataset of an earlier run (same options and seed)");
            (conversations.clone(), *sampling)
        }
        _ => {
            let built = build_conversations(cfg, &tokenizer, &body_opts)?;
            if let Some(k) = key {
                reuse.dataset = Some((k, built.0.clone(), built.1));
            }
            built
        }
    };
    let warmup_sessions = cfg.load.warmup.sessions.unwrap_or(0);
    let total_sends = cfg.warmup_request_count + warmup_sessions + cfg.request_count;
    let mut plan =
        SendPlan::from_conversations(conversations, sampling, total_sends, cfg.random_seed);
    if cfg.load.ignore_trace_delays {
        plan.drop_delays();
        info!("--ignore-trace-delays: the input's timestamps and turn delays are not waited for");
    }
    if let Some(cap) = cfg.load.turn_delay_cap {
        let (cut, longest) = plan.cap_delays(cap);
        if cut > 0 {
            info!(
                "--inter-turn-delay-cap-seconds {}: {cut} turn delays cut to the cap (the longest was {:.3} s)",
                cap.as_secs_f64(),
                longest.as_secs_f64()
            );
        }
    }
    // Counted in conversations: the requests are every turn of the conversations drawn,
    // unless a request count ends profiling first.
    if let Some(n) = cfg.load.sessions {
        let turns = plan.turns_of_sessions(warmup_sessions, n);
        cfg.request_count = match cfg.load.request_count_given {
            None => turns,
            Some(m) if m < turns => {
                warn!(
                    "--request-count {m} ends profiling before --conversation-num {n} is reached ({n} conversations are {turns} requests)"
                );
                m
            }
            Some(m) if m > turns => {
                warn!(
                    "--request-count {m} is not reached: --conversation-num {n} ends profiling first ({n} conversations are {turns} requests)"
                );
                turns
            }
            Some(m) => m,
        };
        info!(
            "Multi-turn: {n} conversations, {} requests",
            cfg.request_count
        );
    }
    let warmup_requests = match cfg.load.warmup.sessions {
        Some(n) => plan.turns_of_sessions(0, n),
        None => cfg.warmup_request_count,
    };
    let schedule = if cfg.load.fixed_schedule {
        Some(fixed_schedule(cfg, &mut plan)?)
    } else {
        None
    };
    if let Some(target) = cfg.inputs.cache_bust {
        let count = tokenizer.clone();
        plan.cache_bust = Some(CacheBustPlan::new(
            target,
            &plan.benchmark_id,
            &plan.conversation_ids,
            &plan.order,
            &mut plan.requests,
            Arc::new(move |text: &str| count.count(text)),
        ));
    }
    info!(
        "Dataset ready: {} unique entries in {:.1} ms ({:.1} MB of first-turn bodies)",
        plan.requests.len(),
        t_dataset.elapsed().as_secs_f64() * 1e3,
        plan.requests.iter().map(|r| r.body.len()).sum::<usize>() as f64 / 1e6
    );
    Ok(Prepared {
        tokenizer,
        plan,
        schedule,
        warmup_requests,
        questions,
    })
}

/// `--apply-chat-template`: the tokenizer must have a chat template (refused otherwise,
/// rather than counting without one); its wrapping is measured for synthetic prompts.
fn chat_template_overhead(
    cfg: &mut ProfileConfig,
    tokenizer: &Tokenizer,
) -> Result<(), ConfigError> {
    let template = match tokenizer.chat_template() {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Err(ConfigError(format!(
                "--apply-chat-template: the tokenizer '{}' has no chat template (the \
                 `chat_template` of tokenizer_config.json, chat_template.jinja or \
                 chat_template.json beside tokenizer.json); give --tokenizer a model that has \
                 one, or drop the flag",
                tokenizer.name()
            )));
        }
        Err(e) => return Err(ConfigError(format!("--apply-chat-template: {e}"))),
    };
    match template.overheads(tokenizer) {
        Some((fixed, wrap)) => {
            info!(
                "--apply-chat-template: {} adds {fixed} tokens per request and {wrap} per message; \
                 synthetic prompts are shortened by them",
                template.source().display()
            );
            cfg.inputs.chat_template_overhead = Some((fixed, wrap));
        }
        None => warn!(
            "--apply-chat-template: the template's tokens per message could not be measured; \
             synthetic prompts keep their length (ISL is still counted through the template)"
        ),
    }
    Ok(())
}

/// Request bodies and the order they are drawn in.
type Built = (Vec<PreparedConversation>, DatasetSampling);

/// `--accuracy-benchmark`: the benchmark's questions as the dataset, in order.
fn accuracy_conversations(
    cfg: &ProfileConfig,
    tokenizer: &Arc<Tokenizer>,
    body_opts: &BodyOptions,
) -> Result<(Built, Arc<crate::accuracy::Questions>), ProfileError> {
    let opts = cfg.accuracy.as_ref().expect("accuracy mode");
    let env = tokenizer::HubEnv::from_process_env();
    let mut problems = crate::accuracy::load(opts, &env).map_err(ConfigError)?;
    let n = problems.len() as u64;
    info!(
        "Accuracy benchmark {}: {n} questions ({} tasks, {} shots, chain of thought {}), graded by {}",
        opts.benchmark.name(),
        opts.tasks.len(),
        opts.n_shots,
        if opts.cot { "on" } else { "off" },
        opts.grader.name()
    );
    if cfg.load.duration.is_none() && cfg.request_count != n {
        warn!(
            "Accuracy: {} profiling requests for {n} questions: {}; --request-count {n} asks each once",
            cfg.request_count,
            if cfg.request_count < n {
                "only the first ones are graded"
            } else {
                "questions are asked again from the first"
            }
        );
    }
    let chat = cfg.endpoint_type == endpoint::EndpointType::Chat;
    let dataset = crate::accuracy::dataset(&problems, opts, chat, tokenizer);
    // The graders never look at the images: only the request bodies keep them.
    for p in &mut problems {
        p.images = Vec::new();
    }
    let sampling = dataset.sampling;
    let models = ModelPicker::new(cfg.models.clone(), cfg.model_selection, cfg.random_seed);
    let conversations =
        endpoint::prepare_dataset_with_models(cfg.endpoint_type, dataset, body_opts, models)?;
    Ok((
        (conversations, sampling),
        Arc::new(crate::accuracy::Questions::new(problems)),
    ))
}

/// Builds the dataset (prompts, images) and turns it into request bodies.
fn build_conversations(
    cfg: &ProfileConfig,
    tokenizer: &Arc<Tokenizer>,
    body_opts: &BodyOptions,
) -> Result<(Vec<PreparedConversation>, DatasetSampling), ProfileError> {
    let s = &cfg.synthetic;
    if s.image_batch_size > 0 {
        info!(
            "Generating synthetic images: {} per request, {}x{} px (stddev {}x{}), format {:?}",
            s.image_batch_size,
            s.image_width_mean,
            s.image_height_mean,
            s.image_width_stddev,
            s.image_height_stddev,
            s.image_format
        );
    }
    let dataset_bar = ui::DatasetBar::new(cfg.ui);
    let dataset = match &cfg.rankings {
        Some(r) => {
            let seed = cfg.synthetic.seed.unwrap_or(cfg.random_seed);
            let mut d = dataset::rankings::build(r, cfg.synthetic.num_entries, seed, tokenizer);
            if let (Ok(d), Some(s)) = (&mut d, cfg.inputs.sampling) {
                d.sampling = s;
            }
            d
        }
        None => dataset::build(&cfg.synthetic, &cfg.inputs, tokenizer, &dataset_bar),
    };
    dataset_bar.finish();
    let dataset = dataset?;
    let sampling = dataset.sampling;
    let models = ModelPicker::new(cfg.models.clone(), cfg.model_selection, cfg.random_seed);
    let conversations =
        endpoint::prepare_dataset_with_models(cfg.endpoint_type, dataset, body_opts, models)?;
    Ok((conversations, sampling))
}

/// The send offsets of a replayed trace, within `--fixed-schedule-*-offset`.
fn fixed_schedule(cfg: &mut ProfileConfig, plan: &mut SendPlan) -> Result<Arc<[u64]>, ConfigError> {
    if !plan.has_timestamps() {
        return Err(ConfigError(
            "--fixed-schedule: the input file has no timestamp on its entries; add \"timestamp\" (ms) to each, or drop --fixed-schedule".into(),
        ));
    }
    if cfg
        .load
        .schedule_window
        .rebase_epoch(plan.first_timestamp_ms())
    {
        info!(
            "The input file's timestamps are absolute (epoch ms): the schedule starts at the first one, as with --fixed-schedule-auto-offset"
        );
    }
    let offsets = plan
        .fixed_schedule(&cfg.load.schedule_window)
        .map_err(|e| {
            ConfigError(format!(
                "--fixed-schedule-start-offset/--fixed-schedule-end-offset: {e}"
            ))
        })?;
    cfg.request_count = plan.fixed_schedule_sends();
    info!(
        "Fixed schedule: {} conversations ({} requests) over {:.3} s",
        offsets.len(),
        cfg.request_count,
        offsets.last().copied().unwrap_or(0) as f64 / 1e9
    );
    Ok(Arc::from(offsets))
}
