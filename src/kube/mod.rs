//! `aiperf kube generate`: a ConfigMap with the profile arguments and an Indexed Job whose
//! pods run them as shards (index from `JOB_COMPLETION_INDEX`, count from
//! `AIPERF_SHARD_COUNT`), all starting at one `--start-at`, writing to one volume.
//! Credentials among the profile arguments go into a Secret (emitted, or named with
//! `--secret`), never into the ConfigMap: the ConfigMap holds `$(AIPERF_CREDENTIAL_n)` in
//! their place, and the pods get them as environment variables through `secretKeyRef`.
//! Typed with k8s-openapi, so a misspelt field does not compile.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, EnvFromSource, EnvVar, EnvVarSource,
    ObjectFieldSelector, PersistentVolumeClaimVolumeSource, PodAffinityTerm, PodAntiAffinity,
    PodSpec, PodTemplateSpec, ResourceRequirements, Secret, SecretEnvSource, SecretKeySelector,
    Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::cli::shard::{COUNT_ENV, INDEX_ENV, KubeArgs, KubeCommand, KubeGenerateArgs};
use crate::cli::{Cli, Command};
use crate::config::{ProfileConfig, carries_secret, redacted_arg};
use crate::load::Shard;

/// Where the pods mount the ConfigMap and the artifact volume.
pub const ARGS_DIR: &str = "/etc/aiperf";
pub const ARGS_FILE: &str = "profile.args";
pub const RESULTS_DIR: &str = "/results";
const DEFAULT_IMAGE: &str = "aiperf:latest";
const DEFAULT_JOB_NAME: &str = "aiperf";
const DEFAULT_LEAD_TIME_S: f64 = 120.0;
/// The label every pod of the Job carries (anti-affinity selects on it).
const JOB_LABEL: &str = "app.kubernetes.io/instance";

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
    let Manifests { yaml, warning } = generate(g, SystemTime::now())?;
    if let Some(w) = warning {
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

fn settings(g: &KubeGenerateArgs) -> Result<Settings, String> {
    let mut rest = g.profile_args.clone();
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
        Some(s) => s
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or(format!("--lead-time {s}: give seconds >= 0"))?,
    };
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
    let q = |cpu: u64, mib: u64| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(format!("{cpu}m"))),
            ("memory".to_string(), Quantity(format!("{mib}Mi"))),
        ])
    };
    ResourceRequirements {
        requests: Some(q(cpu_milli, mem_mib)),
        limits: Some(q(cpu_milli * 2, mem_mib * 2)),
        ..Default::default()
    }
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

/// What `kube generate` prints: the YAML, and a warning when credentials were given.
pub struct Manifests {
    pub yaml: String,
    pub warning: Option<String>,
}

/// The Secret (when credentials are given and `--secret` is not), the ConfigMap and the
/// Job as YAML documents.
pub fn generate(g: &KubeGenerateArgs, now: SystemTime) -> Result<Manifests, String> {
    let s = settings(g)?;
    let cfg = check_profile(&s)?;
    let split = split_credentials(&s.profile_args, &cfg.secrets);
    let start_ns = now
        .checked_add(Duration::from_secs_f64(s.lead_time_s))
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    let start_at = jiff::Timestamp::from_nanosecond(start_ns as i128)
        .map_err(|e| format!("--lead-time: {e}"))?
        .to_string();
    let mut lines = split.lines.clone();
    lines.extend(["--start-at".to_string(), start_at]);
    let args_text = lines.join("\n") + "\n";

    let labels = BTreeMap::from([
        (JOB_LABEL.to_string(), s.job_name.clone()),
        ("app.kubernetes.io/name".to_string(), "aiperf".to_string()),
    ]);
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        namespace: s.namespace.clone(),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let config_map_name = format!("{}-args", s.job_name);
    let config_map = ConfigMap {
        metadata: meta(config_map_name.clone()),
        data: Some(BTreeMap::from([(ARGS_FILE.to_string(), args_text)])),
        ..Default::default()
    };
    let secret_name = s
        .secret
        .clone()
        .unwrap_or(format!("{}-credentials", s.job_name));
    let secret = (s.secret.is_none() && !split.credentials.is_empty()).then(|| Secret {
        metadata: meta(secret_name.clone()),
        type_: Some("Opaque".into()),
        string_data: Some(split.credentials.clone()),
        ..Default::default()
    });
    let pod_env = PodEnv::new(&split.credentials, &secret_name, s.secret.as_deref());
    let job = job(
        &s,
        &cfg,
        meta(s.job_name.clone()),
        &labels,
        config_map_name,
        pod_env,
    );
    let mut docs = Vec::new();
    if let Some(secret) = &secret {
        docs.push(to_yaml(secret)?);
    }
    docs.push(to_yaml(&config_map)?);
    docs.push(to_yaml(&job)?);
    let warning = (!split.shown.is_empty()).then(|| {
        let keys = split.shown.join(", ");
        match &s.secret {
            None => format!(
                "credentials are in the Secret {secret_name} of these manifests ({keys}), not in the ConfigMap; keep the YAML private, or create the Secret yourself and give --secret NAME"
            ),
            Some(name) => format!(
                "the pods read credentials from your Secret {name}, which must hold {keys} (each key one argument, as typed here)"
            ),
        }
    });
    Ok(Manifests {
        yaml: docs.join("---\n"),
        warning,
    })
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

fn job(
    s: &Settings,
    cfg: &ProfileConfig,
    metadata: ObjectMeta,
    labels: &BTreeMap<String, String>,
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
    let container = Container {
        name: "aiperf".into(),
        image: Some(s.image.clone()),
        command: Some(vec!["aiperf".into()]),
        args: Some(vec![
            "profile".into(),
            "--args-file".into(),
            format!("{ARGS_DIR}/{ARGS_FILE}"),
            "--output-artifact-dir".into(),
            format!("{RESULTS_DIR}/{}/shard-$({INDEX_ENV})", s.job_name),
        ]),
        env: Some(env),
        env_from: pod_env.from.map(|f| vec![f]),
        resources: Some(resources(cfg, s.shards)),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "args".into(),
                mount_path: ARGS_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            },
            VolumeMount {
                name: "results".into(),
                mount_path: RESULTS_DIR.into(),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    // Load generators on different nodes where the cluster has room (preferred, so that a
    // small cluster still runs them).
    let affinity = Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(BTreeMap::from([(
                                JOB_LABEL.to_string(),
                                s.job_name.clone(),
                            )])),
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
    let pod = PodSpec {
        containers: vec![container],
        // A shard that fails is not rerun: it would start after the others.
        restart_policy: Some("Never".into()),
        affinity: Some(affinity),
        volumes: Some(vec![
            Volume {
                name: "args".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: config_map_name,
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "results".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: s.pvc.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    Job {
        metadata,
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(n),
            parallelism: Some(n),
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
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
