//! The pods of the plan, hardened alike: a non-root user fixed to the image's, a read-only
//! root filesystem (artifacts go to the PVC, temporary files to an `emptyDir` at /tmp), no
//! privilege escalation, every capability dropped, the runtime's seccomp profile, no
//! service account token, no inbound connections (a NetworkPolicy), and none outbound for
//! the merge. `checkov` checks them in CI; the checks a plan fails on purpose carry the
//! reason on the object (`accepted_checks`).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, EmptyDirVolumeSource, EnvFromSource, EnvVar,
    PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::RESULTS_DIR;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The user and group the image runs as (the Containerfile's `USER`), also the group that
/// owns what the pods write to the PVC.
pub const IMAGE_UID: i64 = 65532;
/// Where the pods may write besides the PVC; `HOME` points there (the tokenizer cache).
pub const TMP_DIR: &str = "/tmp";
/// Finished Jobs (and their pods' logs) are kept this long, then removed by the cluster.
pub const KEEP_FINISHED_S: i32 = 7 * 24 * 3600;

/// Why an object of the plan fails a `checkov` check on purpose. Written on the object as
/// a `checkov.io/skipN` annotation (`ID=reason`), which checkov reports as skipped with
/// the reason; CI fails on any other finding.
pub fn accepted_checks(
    namespace_given: bool,
    job: bool,
    image_by_digest: bool,
    secret_env: bool,
) -> BTreeMap<String, String> {
    let mut checks = Vec::new();
    if !namespace_given {
        checks.push(
            "CKV_K8S_21=no namespace in the manifests: kubectl apply -n NS chooses it (or give --namespace)",
        );
    }
    if job && !image_by_digest {
        checks.push(
            "CKV_K8S_43=the image is pulled by the tag given (checked present and warned about when latest); an image@sha256:... digest passes",
        );
    }
    if job && secret_env {
        checks.push(
            "CKV_K8S_35=credentials reach the pods as environment variables from the Secret: --args-file puts $(NAME) lines in place from the environment, so the ConfigMap never holds them",
        );
    }
    checks
        .into_iter()
        .enumerate()
        .map(|(i, c)| (format!("checkov.io/skip{}", i + 1), c.to_string()))
        .collect()
}

/// What differs between the shard and the merge containers.
pub struct ContainerSpec {
    pub image: String,
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub env_from: Option<EnvFromSource>,
    pub resources: ResourceRequirements,
    /// Mounts besides the results volume and /tmp.
    pub mounts: Vec<VolumeMount>,
}

pub fn container(name: &str, spec: ContainerSpec) -> Container {
    let mut env = vec![EnvVar {
        name: "HOME".into(),
        value: Some(TMP_DIR.into()),
        ..Default::default()
    }];
    env.extend(spec.env);
    let mut mounts = spec.mounts;
    mounts.extend([
        VolumeMount {
            name: "results".into(),
            mount_path: RESULTS_DIR.into(),
            ..Default::default()
        },
        VolumeMount {
            name: "tmp".into(),
            mount_path: TMP_DIR.into(),
            ..Default::default()
        },
    ]);
    Container {
        name: name.into(),
        image: Some(spec.image),
        // Every node pulls the same build of a tag that was pushed again.
        image_pull_policy: Some("Always".into()),
        command: Some(vec!["aiperf".into()]),
        args: Some(spec.args),
        env: Some(env),
        env_from: spec.env_from.map(|f| vec![f]),
        resources: Some(spec.resources),
        volume_mounts: Some(mounts),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(IMAGE_UID),
            run_as_group: Some(IMAGE_UID),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        ..Default::default()
    }
}

/// The pod's part of a Job: one hardened container, the results PVC and /tmp, plus
/// `volumes`.
pub struct PodPlan {
    pub labels: BTreeMap<String, String>,
    pub container: Container,
    pub volumes: Vec<Volume>,
    pub affinity: Option<Affinity>,
    pub pvc: String,
}

/// A Job of `completions` pods that are never rerun (a failed shard rerun would start
/// after the others; a failed merge says why in its log).
pub fn job(metadata: ObjectMeta, pod: PodPlan, spec: JobSpec) -> Job {
    let mut volumes = pod.volumes;
    volumes.extend([
        Volume {
            name: "results".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pod.pvc,
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    ]);
    let pod_spec = PodSpec {
        containers: vec![pod.container],
        restart_policy: Some("Never".into()),
        affinity: pod.affinity,
        automount_service_account_token: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(IMAGE_UID),
            run_as_group: Some(IMAGE_UID),
            fs_group: Some(IMAGE_UID),
            // A large results volume is not walked at every pod start.
            fs_group_change_policy: Some("OnRootMismatch".into()),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        }),
        volumes: Some(volumes),
        ..Default::default()
    };
    Job {
        metadata,
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            ttl_seconds_after_finished: Some(KEEP_FINISHED_S),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod.labels),
                    ..Default::default()
                }),
                spec: Some(pod_spec),
            },
            ..spec
        }),
        ..Default::default()
    }
}

/// Requests as given, limits twice that.
pub fn sized(cpu_milli: u64, mem_mib: u64) -> ResourceRequirements {
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

/// A NetworkPolicy that selects the pods with `labels` and allows none of the traffic
/// `denied` names (`Ingress`, `Egress`): the pods serve nothing, and the merge only reads
/// the volume.
pub fn deny(
    metadata: ObjectMeta,
    labels: BTreeMap<String, String>,
    denied: &[&str],
) -> NetworkPolicy {
    NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(labels),
                ..Default::default()
            }),
            policy_types: Some(denied.iter().map(|d| d.to_string()).collect()),
            ..Default::default()
        }),
    }
}
