//! `aiperf kube generate`: a ConfigMap with the profile arguments and an Indexed Job whose
//! pods run them as shards (index from `JOB_COMPLETION_INDEX`, count from
//! `AIPERF_SHARD_COUNT`), all starting at one `--start-at`, writing to one volume.
//! Credentials among the profile arguments go into a Secret (emitted, or named with
//! `--secret`), never into the ConfigMap: the ConfigMap holds `$(AIPERF_CREDENTIAL_n)` in
//! their place, and the pods get them as environment variables through `secretKeyRef`.
//! A second Job merges the shards' results when they are all written (`--no-merge` leaves
//! it out). The pods are hardened alike (`pods`). Typed with k8s-openapi, so a misspelt
//! field does not compile.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, EnvFromSource, EnvVar, EnvVarSource,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, ResourceRequirements, Secret,
    SecretEnvSource, SecretKeySelector, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::cli::shard::{COUNT_ENV, INDEX_ENV, KubeArgs, KubeCommand, KubeGenerateArgs};
use crate::cli::{Cli, Command};
use crate::config::{ProfileConfig, carries_secret, redacted_arg};
use crate::load::Shard;

pub mod pods;
use pods::{ContainerSpec, PodPlan};

/// Where the pods mount the ConfigMap and the artifact volume.
pub const ARGS_DIR: &str = "/etc/aiperf";
pub const ARGS_FILE: &str = "profile.args";
pub const RESULTS_DIR: &str = "/results";
/// The image the README's build command tags: this build's version.
const DEFAULT_IMAGE: &str = concat!("aiperf:", env!("CARGO_PKG_VERSION"));
const DEFAULT_JOB_NAME: &str = "aiperf";
const DEFAULT_LEAD_TIME_S: f64 = 120.0;
/// The labels every pod carries: the plan's name, and which Job (anti-affinity selects
/// the shards by both).
const JOB_LABEL: &str = "app.kubernetes.io/instance";
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// How long the merge waits for the shards beyond the lead time and the run's planned
/// length, or in all when the length is not known (a --request-count run).
const MERGE_SLACK_S: f64 = 900.0;
const MERGE_WAIT_UNKNOWN_S: f64 = 24.0 * 3600.0;
/// The merge holds every record in memory (~4 KB each, measured on 2 x 100k shards).
const MERGE_BYTES_PER_REQUEST: f64 = 4096.0;

/// The environment variables (and Secret keys) that carry credentials: `_1`, `_2`, ...
const CREDENTIAL_ENV: &str = "AIPERF_CREDENTIAL";

/// Profile flags the Job sets per pod; refused among the profile arguments.
const SET_BY_THE_JOB: [&str; 6] = [
    "--shard-index",
    "--shard-count",
    "--start-at",
    "--output-artifact-dir",
    "--artifact-dir",
    "--args-file",
];

pub fn run(args: &KubeArgs) -> Result<(), String> {
    let KubeCommand::Generate(g) = &args.command;
    let Manifests { yaml, warnings } = generate(g, SystemTime::now())?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let mut out = std::io::stdout().lock();
    out.write_all(yaml.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot write the manifests: {e}"))
}

/// Our own flags, wherever they stand among the profile arguments.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    shards: u64,
    pvc: String,
    image: String,
    namespace: Option<String>,
    job_name: String,
    /// `--secret`: the user's Secret, in place of one emitted.
    secret: Option<String>,
    lead_time_s: f64,
    /// Emit the merge Job (not `--no-merge`).
    merge: bool,
    /// `--merge-timeout`: seconds the merge waits for the shards.
    merge_timeout_s: Option<f64>,
    profile_args: Vec<String>,
}

/// Takes `--flag value` or `--flag=value` out of `args`.
fn take_flag(args: &mut Vec<String>, flag: &str) -> Result<Option<String>, String> {
    let Some(at) = args
        .iter()
        .position(|a| a == flag || a.starts_with(&format!("{flag}=")))
    else {
        return Ok(None);
    };
    let arg = args.remove(at);
    match arg.split_once('=') {
        Some((_, v)) => Ok(Some(v.to_string())),
        None if at < args.len() => Ok(Some(args.remove(at))),
        None => Err(format!("{flag} needs a value")),
    }
}

/// Takes a switch out of `args`: whether it was there.
fn take_switch(args: &mut Vec<String>, flag: &str) -> bool {
    let before = args.len();
    args.retain(|a| a != flag);
    args.len() != before
}

/// Seconds >= 0 given to `flag` (bounded as every duration flag is).
fn seconds(flag: &str, text: &str) -> Result<f64, String> {
    let v = text
        .parse::<f64>()
        .map_err(|_| format!("{flag} {text}: give seconds >= 0"))?;
    crate::config::limits::seconds(flag, v, crate::config::limits::Zero::Allowed)
        .map(|d| d.as_secs_f64())
        .map_err(|e| e.to_string())
}

/// An image without a tag or digest is whatever `:latest` is on each node when it pulls.
fn check_image(image: &str) -> Result<Option<String>, String> {
    let name = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        return Ok(None);
    }
    match name.split_once(':') {
        None => Err(format!(
            "--image {image}: give a tag or a digest (e.g. {image}:{}); without one each node pulls whatever :latest is then",
            env!("CARGO_PKG_VERSION")
        )),
        Some((_, "latest")) => Ok(Some(format!(
            "--image {image}: the tag latest can move between the pulls of the pods; a version tag or a digest keeps every shard on one build"
        ))),
        Some(_) => Ok(None),
    }
}

fn settings(g: &KubeGenerateArgs) -> Result<Settings, String> {
    let mut rest = g.profile_args.clone();
    let no_merge = take_switch(&mut rest, "--no-merge") || g.no_merge;
    let mut pick = |flag: &str, given: Option<String>| -> Result<Option<String>, String> {
        let found = take_flag(&mut rest, flag)?;
        Ok(given.or(found))
    };
    let shards = pick("--shards", g.shards.map(|n| n.to_string()))?
        .ok_or("--shards: give the number of load generator pods, e.g. --shards 4")?;
    let shards: u64 = shards.parse().ok().filter(|n| *n >= 1).ok_or(format!(
        "--shards {shards}: give a whole number of 1 or more"
    ))?;
    let pvc = pick("--pvc", g.pvc.clone())?.ok_or(
        "--pvc: give the PersistentVolumeClaim the shards write their artifacts to (ReadWriteMany)",
    )?;
    let image = pick("--image", g.image.clone())?.unwrap_or(DEFAULT_IMAGE.into());
    let namespace = pick("--namespace", g.namespace.clone())?;
    let job_name = pick("--job-name", g.job_name.clone())?.unwrap_or(DEFAULT_JOB_NAME.into());
    let secret = pick("--secret", g.secret.clone())?;
    let lead = pick("--lead-time", g.lead_time.map(|s| s.to_string()))?;
    let lead_time_s = match lead {
        None => DEFAULT_LEAD_TIME_S,
        Some(s) => seconds("--lead-time", &s)?,
    };
    let merge_timeout_s = pick("--merge-timeout", g.merge_timeout.map(|s| s.to_string()))?
        .map(|s| seconds("--merge-timeout", &s))
        .transpose()?;
    if let Some(flag) = rest.iter().find(|a| {
        SET_BY_THE_JOB
            .iter()
            .any(|f| a == f || a.starts_with(&format!("{f}=")))
    }) {
        return Err(format!(
            "{flag} is set for each pod by the Job; drop it from the profile arguments"
        ));
    }
    if rest.iter().any(|a| a.contains('\n')) {
        return Err(
            "a profile argument contains a line break; the ConfigMap holds one argument per line"
                .into(),
        );
    }
    // Every pod must draw the same plan: an explicit seed (42 is the profile default).
    if !rest
        .iter()
        .any(|a| a == "--random-seed" || a.starts_with("--random-seed="))
    {
        rest.extend(["--random-seed".to_string(), "42".to_string()]);
    }
    Ok(Settings {
        shards,
        pvc,
        image,
        namespace,
        job_name,
        secret,
        lead_time_s,
        merge: !no_merge,
        merge_timeout_s,
        profile_args: rest,
    })
}

/// Checks the profile arguments as shard 0 would, so that a bad command line fails here
/// and not in N pods.
fn check_profile(s: &Settings) -> Result<ProfileConfig, String> {
    let argv = ["aiperf", "profile"]
        .into_iter()
        .map(String::from)
        .chain(s.profile_args.iter().cloned());
    let cli = Cli::parse_with_sources(argv).map_err(|e| {
        let text = e.to_string();
        format!("the profile arguments: {}", text.trim_end())
    })?;
    let Command::Profile(mut args) = cli.command else {
        unreachable!("parsed as profile")
    };
    args.shard.shard_index = Some(0);
    args.shard.shard_count = Some(s.shards);
    args.shard.start_at = None;
    ProfileConfig::from_args(&args, false).map_err(|e| e.to_string())
}

/// Requests sized from one shard's part of the plan (the rule `--help` states).
fn resources(cfg: &ProfileConfig, shards: u64) -> ResourceRequirements {
    let shard = Shard {
        index: 0,
        count: shards,
    };
    let rate = cfg.load.rate.map_or(0.0, |(r, _)| r / shards as f64);
    let in_flight = match (cfg.load.rate, cfg.load.concurrency_given) {
        (Some(_), false) => 0,
        _ => shard.share_of(cfg.concurrency),
    };
    let cores = 0.5 + (rate / 500.0).max(in_flight as f64 / 128.0);
    let cpu_milli = ((cores * 1000.0 / 100.0).ceil() * 100.0) as u64;
    let dataset_bytes = match &cfg.inputs.input_file {
        Some((path, _)) => std::fs::metadata(path).map_or(0.0, |m| m.len() as f64),
        None => {
            let s = &cfg.synthetic;
            let pixels = s.image_width_mean * s.image_height_mean * s.image_batch_size as f64;
            s.num_entries as f64 * (4.0 * s.isl_mean + 2.1 * pixels)
        }
    };
    let mem_mib = 256 + (2.0 * dataset_bytes / (1024.0 * 1024.0)).ceil() as u64;
    pods::sized(cpu_milli, mem_mib)
}

/// The requests the whole plan sends, when the command line says (a count, or a rate for
/// a duration).
fn planned_requests(cfg: &ProfileConfig) -> Option<f64> {
    let load = &cfg.load;
    match (load.request_count_given, load.rate, load.duration) {
        (Some(n), _, _) => Some(n as f64),
        (None, Some((rate, _)), Some(d)) => Some(rate * d.as_secs_f64()),
        _ => None,
    }
}

/// The merge reads every record: 256 MiB plus ~4 KB a request (2 GiB when the count is
/// not known), one core.
fn merge_resources(cfg: &ProfileConfig) -> ResourceRequirements {
    let mem_mib = match planned_requests(cfg) {
        Some(n) => 256 + (n * MERGE_BYTES_PER_REQUEST / (1024.0 * 1024.0)).ceil() as u64,
        None => 2048,
    };
    pods::sized(1000, mem_mib)
}

/// How long the merge waits for the shards' results: the lead time, the planned run and
/// its grace period, and 15 minutes for the slowest shard to write its files.
fn merge_wait_s(s: &Settings, cfg: &ProfileConfig) -> f64 {
    if let Some(t) = s.merge_timeout_s {
        return t;
    }
    let load = &cfg.load;
    let run = match load.duration {
        Some(d) => {
            d.as_secs_f64()
                + load.grace.map_or(0.0, |g| g.as_secs_f64())
                + load.warmup_duration.map_or(0.0, |w| w.as_secs_f64())
        }
        None => return s.lead_time_s + MERGE_WAIT_UNKNOWN_S,
    };
    s.lead_time_s + run + MERGE_SLACK_S
}

/// The profile arguments split for the cluster: the ConfigMap's lines, with
/// `$(AIPERF_CREDENTIAL_n)` in place of each argument that shows a credential, and those
/// arguments by key.
struct SplitArgs {
    lines: Vec<String>,
    credentials: BTreeMap<String, String>,
    /// Each credential's key and its argument as the exports show it (`Authorization: ***`).
    shown: Vec<String>,
}

fn split_credentials(args: &[String], secrets: &[String]) -> SplitArgs {
    let mut split = SplitArgs {
        lines: Vec::with_capacity(args.len()),
        credentials: BTreeMap::new(),
        shown: Vec::new(),
    };
    for arg in args {
        if !carries_secret(arg, secrets) {
            split.lines.push(arg.clone());
            continue;
        }
        let key = format!("{CREDENTIAL_ENV}_{}", split.credentials.len() + 1);
        split.lines.push(format!("$({key})"));
        split
            .shown
            .push(format!("{key} = {}", redacted_arg(arg, secrets)));
        split.credentials.insert(key, arg.clone());
    }
    split
}

/// What `kube generate` prints: the YAML, and warnings (credentials given, a moving tag).
pub struct Manifests {
    pub yaml: String,
    pub warnings: Vec<String>,
}

/// The Secret (when credentials are given and `--secret` is not), the ConfigMap, the
/// shards' Job and the merge Job as YAML documents.
pub fn generate(g: &KubeGenerateArgs, now: SystemTime) -> Result<Manifests, String> {
    let s = settings(g)?;
    let mut warnings: Vec<String> = check_image(&s.image)?.into_iter().collect();
    let cfg = check_profile(&s)?;
    let split = split_credentials(&s.profile_args, &cfg.secrets);
    let start_at = rfc3339(now, s.lead_time_s).map_err(|e| format!("--lead-time: {e}"))?;
    let mut lines = split.lines.clone();
    lines.extend(["--start-at".to_string(), start_at]);
    let args_text = lines.join("\n") + "\n";

    let labels = |component: &str| {
        BTreeMap::from([
            (JOB_LABEL.to_string(), s.job_name.clone()),
            ("app.kubernetes.io/name".to_string(), "aiperf".to_string()),
            (COMPONENT_LABEL.to_string(), component.to_string()),
        ])
    };
    let by_digest = s.image.contains('@');
    let secret_env = !split.credentials.is_empty();
    // `job`: a Job's pods; the annotations say why it fails the checks it fails.
    let meta = |name: String, component: &str, job: bool| ObjectMeta {
        name: Some(name),
        namespace: s.namespace.clone(),
        labels: Some(labels(component)),
        annotations: Some(pods::accepted_checks(
            s.namespace.is_some(),
            job,
            by_digest,
            job && component == "shard" && secret_env,
        ))
        .filter(|a| !a.is_empty()),
        ..Default::default()
    };
    let config_map_name = format!("{}-args", s.job_name);
    let config_map = ConfigMap {
        metadata: meta(config_map_name.clone(), "shard", false),
        data: Some(BTreeMap::from([(ARGS_FILE.to_string(), args_text)])),
        ..Default::default()
    };
    let secret_name = s
        .secret
        .clone()
        .unwrap_or(format!("{}-credentials", s.job_name));
    let secret = (s.secret.is_none() && !split.credentials.is_empty()).then(|| Secret {
        metadata: meta(secret_name.clone(), "shard", false),
        type_: Some("Opaque".into()),
        string_data: Some(split.credentials.clone()),
        ..Default::default()
    });
    let pod_env = PodEnv::new(&split.credentials, &secret_name, s.secret.as_deref());
    let shards = shard_job(
        &s,
        &cfg,
        meta(s.job_name.clone(), "shard", true),
        labels("shard"),
        config_map_name,
        pod_env,
    );
    let mut docs = Vec::new();
    if let Some(secret) = &secret {
        docs.push(to_yaml(secret)?);
    }
    docs.push(to_yaml(&config_map)?);
    docs.push(to_yaml(&shards)?);
    if s.merge {
        let since = rfc3339(now, 0.0)?;
        let merge = merge_job(
            &s,
            &cfg,
            meta(merge_job_name(&s.job_name), "merge", true),
            labels("merge"),
            &since,
        );
        docs.push(to_yaml(&merge)?);
        let no_egress = pods::deny(
            meta(format!("{}-merge-no-egress", s.job_name), "merge", false),
            labels("merge"),
            &["Egress"],
        );
        docs.push(to_yaml(&no_egress)?);
    }
    let mut plan_pods = labels("shard");
    plan_pods.remove(COMPONENT_LABEL);
    let no_ingress = pods::deny(
        meta(format!("{}-no-ingress", s.job_name), "shard", false),
        plan_pods,
        &["Ingress"],
    );
    docs.push(to_yaml(&no_ingress)?);
    if !split.shown.is_empty() {
        let keys = split.shown.join(", ");
        warnings.push(match &s.secret {
            None => format!(
                "credentials are in the Secret {secret_name} of these manifests ({keys}), not in the ConfigMap; keep the YAML private, or create the Secret yourself and give --secret NAME"
            ),
            Some(name) => format!(
                "the pods read credentials from your Secret {name}, which must hold {keys} (each key one argument, as typed here)"
            ),
        });
    }
    Ok(Manifests {
        yaml: docs.join("---\n"),
        warnings,
    })
}

/// `now` plus `ahead_s` seconds in RFC 3339.
fn rfc3339(now: SystemTime, ahead_s: f64) -> Result<String, String> {
    let ns = now
        .checked_add(Duration::from_secs_f64(ahead_s))
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    jiff::Timestamp::from_nanosecond(ns)
        .map(|t| t.to_string())
        .map_err(|e| e.to_string())
}

/// Where on the PVC the shards write (one `shard-<index>` each), and the merge its result.
pub fn shards_dir(job_name: &str) -> String {
    format!("{RESULTS_DIR}/{job_name}")
}

pub fn merged_dir(job_name: &str) -> String {
    format!("{RESULTS_DIR}/{job_name}-merged")
}

pub fn merge_job_name(job_name: &str) -> String {
    format!("{job_name}-merge")
}

fn to_yaml<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_saphyr::to_string(v).map_err(|e| e.to_string())
}

/// The pods' credential variables: one `secretKeyRef` each, and the whole `--secret` as
/// `envFrom` when given.
struct PodEnv {
    credentials: Vec<EnvVar>,
    from: Option<EnvFromSource>,
}

impl PodEnv {
    fn new(
        credentials: &BTreeMap<String, String>,
        secret_name: &str,
        user_secret: Option<&str>,
    ) -> PodEnv {
        let credentials = credentials
            .keys()
            .map(|key| EnvVar {
                name: key.clone(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: secret_name.to_string(),
                        key: key.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        let from = user_secret.map(|name| EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: name.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        });
        PodEnv { credentials, from }
    }
}

fn shard_job(
    s: &Settings,
    cfg: &ProfileConfig,
    metadata: ObjectMeta,
    labels: BTreeMap<String, String>,
    config_map_name: String,
    pod_env: PodEnv,
) -> Job {
    let n = s.shards as i32;
    let mut env = vec![
        // The Job controller sets this too; declared here so that `$(...)` in the
        // arguments can use it.
        EnvVar {
            name: INDEX_ENV.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                        .into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        EnvVar {
            name: COUNT_ENV.into(),
            value: Some(s.shards.to_string()),
            ..Default::default()
        },
    ];
    env.extend(pod_env.credentials);
    let container = pods::container(
        "aiperf",
        ContainerSpec {
            image: s.image.clone(),
            args: vec![
                "profile".into(),
                "--args-file".into(),
                format!("{ARGS_DIR}/{ARGS_FILE}"),
                "--output-artifact-dir".into(),
                format!("{}/shard-$({INDEX_ENV})", shards_dir(&s.job_name)),
            ],
            env,
            env_from: pod_env.from,
            resources: resources(cfg, s.shards),
            mounts: vec![VolumeMount {
                name: "args".into(),
                mount_path: ARGS_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }],
        },
    );
    // Load generators on different nodes where the cluster has room (preferred, so that a
    // small cluster still runs them).
    let affinity = Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(labels.clone()),
                            ..Default::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..Default::default()
                    },
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = PodPlan {
        labels,
        container,
        volumes: vec![Volume {
            name: "args".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map_name,
                ..Default::default()
            }),
            ..Default::default()
        }],
        affinity: Some(affinity),
        pvc: s.pvc.clone(),
    };
    pods::job(
        metadata,
        pod,
        JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(n),
            parallelism: Some(n),
            ..Default::default()
        },
    )
}

/// One pod that waits for every shard's results on the PVC, then merges them; a shard
/// that failed, or the wait running out, fails it with the reason in its log.
fn merge_job(
    s: &Settings,
    cfg: &ProfileConfig,
    metadata: ObjectMeta,
    labels: BTreeMap<String, String>,
    since: &str,
) -> Job {
    let wait_s = merge_wait_s(s, cfg);
    let container = pods::container(
        "merge",
        ContainerSpec {
            image: s.image.clone(),
            args: vec![
                "merge".into(),
                shards_dir(&s.job_name),
                "--output".into(),
                merged_dir(&s.job_name),
                "--wait-for-shards".into(),
                s.shards.to_string(),
                "--wait-since".into(),
                since.to_string(),
                "--wait-timeout".into(),
                format!("{wait_s:.0}"),
            ],
            env: Vec::new(),
            env_from: None,
            resources: merge_resources(cfg),
            mounts: Vec::new(),
        },
    );
    let pod = PodPlan {
        labels,
        container,
        volumes: Vec::new(),
        affinity: None,
        pvc: s.pvc.clone(),
    };
    pods::job(
        metadata,
        pod,
        JobSpec {
            // The wait's own deadline plus an hour to merge; a hung pod ends.
            active_deadline_seconds: Some((wait_s + 3600.0) as i64),
            ..Default::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_flags_come_out_of_the_profile_arguments() {
        let mut args: Vec<String> = ["-m", "x", "--shards=3", "--pvc", "data", "--streaming"]
            .map(String::from)
            .to_vec();
        assert_eq!(take_flag(&mut args, "--shards").unwrap(), Some("3".into()));
        assert_eq!(take_flag(&mut args, "--pvc").unwrap(), Some("data".into()));
        assert_eq!(take_flag(&mut args, "--image").unwrap(), None);
        assert_eq!(args, ["-m", "x", "--streaming"]);
        let mut bad = vec!["--pvc".to_string()];
        assert!(take_flag(&mut bad, "--pvc").is_err());
    }
}
