//! `aiperf kube generate`: its YAML read back into the typed Kubernetes objects, and the
//! fields a sharded benchmark depends on checked.

use std::process::Command;

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;

use crate::common;

use common::{BIN, RecordingServer};

fn generate(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["kube", "generate"])
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("AIPERF_SHARD_COUNT")
        .output()
        .expect("run aiperf")
}

/// The documents of the output, each parsed as its typed object, in order.
#[derive(Default)]
struct Plan {
    kinds: Vec<String>,
    secrets: Vec<Secret>,
    config_maps: Vec<ConfigMap>,
    jobs: Vec<Job>,
    policies: Vec<NetworkPolicy>,
}

fn plan(yaml: &str) -> Plan {
    let mut plan = Plan::default();
    for doc in yaml.split("\n---\n") {
        let kind = doc
            .lines()
            .find_map(|l| l.strip_prefix("kind: "))
            .unwrap_or_else(|| panic!("no kind: {doc}"))
            .to_string();
        match kind.as_str() {
            "Secret" => plan
                .secrets
                .push(serde_saphyr::from_str(doc).expect("a Secret")),
            "ConfigMap" => plan
                .config_maps
                .push(serde_saphyr::from_str(doc).expect("a ConfigMap")),
            "Job" => plan.jobs.push(serde_saphyr::from_str(doc).expect("a Job")),
            "NetworkPolicy" => plan
                .policies
                .push(serde_saphyr::from_str(doc).expect("a NetworkPolicy")),
            other => panic!("unexpected {other}: {yaml}"),
        }
        plan.kinds.push(kind);
    }
    plan
}

/// The ConfigMap and the shards' Job of a plan without credentials (checking the order
/// of the documents: the merge Job and the two NetworkPolicies follow).
fn parse(yaml: &str) -> (ConfigMap, Job) {
    let p = plan(yaml);
    assert_eq!(
        p.kinds,
        ["ConfigMap", "Job", "Job", "NetworkPolicy", "NetworkPolicy"],
        "{yaml}"
    );
    (p.config_maps[0].clone(), p.jobs[0].clone())
}

fn pod_of(job: &Job) -> &PodSpec {
    job.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn pod_labels(job: &Job) -> BTreeMap<String, String> {
    let template = &job.spec.as_ref().unwrap().template;
    template.metadata.as_ref().unwrap().labels.clone().unwrap()
}

#[test]
fn indexed_job_with_args_volume_anti_affinity_and_sized_requests() {
    let out = generate(&[
        "-m",
        "Qwen/Qwen2-VL-2B-Instruct",
        "--url",
        "http://vllm.models:8000",
        "--streaming",
        "--request-rate",
        "2000",
        "--request-count",
        "100000",
        "--shards",
        "4",
        "--pvc",
        "bench-results",
        "--image",
        "registry.local/aiperf:1.0",
        "--namespace",
        "bench",
        "--image-width-mean",
        "512",
        "--image-height-mean",
        "512",
        "--lead-time",
        "90",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "no credential, no warning: {stderr}");
    let yaml = String::from_utf8(out.stdout).unwrap();
    let (cm, job) = parse(&yaml);
    assert_eq!(job.metadata.namespace.as_deref(), Some("bench"));
    assert_eq!(cm.metadata.namespace.as_deref(), Some("bench"));

    let spec = job.spec.as_ref().unwrap();
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!(spec.completions, Some(4));
    assert_eq!(spec.parallelism, Some(4));
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));

    // The profile arguments sit in the ConfigMap, one per line, with the shared start.
    let cm_name = cm.metadata.name.clone().unwrap();
    let args_text = &cm.data.as_ref().unwrap()["profile.args"];
    let lines: Vec<&str> = args_text.lines().collect();
    for want in [
        "--request-rate",
        "2000",
        "--streaming",
        "--random-seed",
        "42",
    ] {
        assert!(lines.contains(&want), "{want}: {args_text}");
    }
    for gone in ["--shards", "--pvc", "--image", "--namespace", "--lead-time"] {
        assert!(!lines.contains(&gone), "{gone}: {args_text}");
    }
    let at = lines.iter().position(|l| *l == "--start-at").unwrap();
    let start: jiff::Timestamp = lines[at + 1].parse().unwrap();
    let lead = start.as_second() - jiff::Timestamp::now().as_second();
    assert!((80..=91).contains(&lead), "start {start} is {lead} s ahead");

    // The container reads them from the ConfigMap volume and writes under its own index.
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("registry.local/aiperf:1.0"));
    let args = c.args.clone().unwrap();
    assert_eq!(
        args[..3],
        ["profile", "--args-file", "/etc/aiperf/profile.args"]
    );
    assert_eq!(args[3], "--output-artifact-dir");
    assert!(
        args[4].ends_with("/shard-$(JOB_COMPLETION_INDEX)"),
        "{}",
        args[4]
    );
    let env = c.env.clone().unwrap();
    let count = env.iter().find(|e| e.name == "AIPERF_SHARD_COUNT").unwrap();
    assert_eq!(count.value.as_deref(), Some("4"));
    let index = env
        .iter()
        .find(|e| e.name == "JOB_COMPLETION_INDEX")
        .unwrap();
    let field = &index
        .value_from
        .as_ref()
        .unwrap()
        .field_ref
        .as_ref()
        .unwrap();
    assert!(field.field_path.contains("job-completion-index"));

    let mounts = c.volume_mounts.clone().unwrap();
    let volumes = pod.volumes.clone().unwrap();
    let mount = |name: &str| {
        mounts
            .iter()
            .find(|m| m.name == name)
            .unwrap()
            .mount_path
            .clone()
    };
    let args_path = std::path::Path::new(&args[2]);
    assert_eq!(args_path.parent().unwrap().to_str().unwrap(), mount("args"));
    assert!(args[4].starts_with(&mount("results")));
    let results = volumes.iter().find(|v| v.name == "results").unwrap();
    assert_eq!(
        results.persistent_volume_claim.as_ref().unwrap().claim_name,
        "bench-results"
    );
    let args_volume = volumes.iter().find(|v| v.name == "args").unwrap();
    assert_eq!(args_volume.config_map.as_ref().unwrap().name, cm_name);

    // Load generators spread over nodes: anti-affinity on the Job's own pod label.
    let anti = pod
        .affinity
        .as_ref()
        .unwrap()
        .pod_anti_affinity
        .as_ref()
        .unwrap();
    let term = &anti
        .preferred_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()[0]
        .pod_affinity_term;
    assert_eq!(term.topology_key, "kubernetes.io/hostname");
    let selector = term
        .label_selector
        .as_ref()
        .unwrap()
        .match_labels
        .clone()
        .unwrap();
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    for (k, v) in &selector {
        assert_eq!(pod_labels.get(k), Some(v));
    }

    // Sized from the plan: 500 req/s per shard is 1 core more than the 0.5 base; 100
    // entries of a 512x512 image about 2 x 55 MB more than the 256 MiB base.
    let res = c.resources.as_ref().unwrap();
    let requests = res.requests.as_ref().unwrap();
    assert_eq!(requests["cpu"].0, "1500m");
    let mem: u64 = requests["memory"].0.trim_end_matches("Mi").parse().unwrap();
    assert!((256 + 100..256 + 120).contains(&mem), "{mem} Mi");
    assert_eq!(res.limits.as_ref().unwrap()["cpu"].0, "3000m");
}

#[test]
fn bad_generate_arguments_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["-m", "x", "--pvc", "p"], "--shards"),
        (&["-m", "x", "--shards", "2"], "--pvc"),
        (
            &[
                "-m",
                "x",
                "--shards",
                "2",
                "--pvc",
                "p",
                "--shard-index",
                "0",
            ],
            "--shard-index is set for each pod",
        ),
        (
            &[
                "-m",
                "x",
                "--shards",
                "4",
                "--pvc",
                "p",
                "--concurrency",
                "2",
            ],
            "--concurrency 2 is less than --shard-count 4",
        ),
    ];
    for (args, want) in cases {
        let out = generate(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

/// The Secret, the ConfigMap and the shards' Job of a run given credentials.
fn parse_with_secret(yaml: &str) -> (Secret, ConfigMap, Job) {
    let p = plan(yaml);
    assert_eq!(p.kinds[..3], ["Secret", "ConfigMap", "Job"], "{yaml}");
    (
        p.secrets[0].clone(),
        p.config_maps[0].clone(),
        p.jobs[0].clone(),
    )
}

/// The pod's environment variables that come from a Secret: (name, secret, key).
fn secret_env(job: &Job) -> Vec<(String, String, String)> {
    let c = &job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    c.env
        .iter()
        .flatten()
        .filter_map(|e| {
            let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
            Some((e.name.clone(), r.name.clone(), r.key.clone()))
        })
        .collect()
}

/// Credentials (API key, secret headers in any spelling, URL user:password) never reach
/// the ConfigMap or the Job: they go into a Secret, the ConfigMap holds a `$(NAME)` line
/// in their place, and the pods get them through secretKeyRef. A pod started the way the
/// Job starts it sends them.
#[test]
fn credentials_go_into_a_secret_and_reach_the_pods_from_it() {
    let server = RecordingServer::start(true);
    let url = format!("http://me:pw-F@{}", server.addr);
    let json_header = r#"{"X-Api-Key":"\u0078key-B"}"#;
    let out = generate(&[
        "-m",
        "m",
        "--tokenizer",
        "builtin",
        "--url",
        &url,
        "--api-key",
        "sk-KEY-A",
        "-H",
        "Cookie: cookie-C",
        "-H",
        json_header,
        "--request-count",
        "2",
        "--isl",
        "8",
        "--no-server-metrics",
        "--shards",
        "1",
        "--pvc",
        "p",
        "--lead-time",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let yaml = String::from_utf8(out.stdout).unwrap();
    let (secret, cm, job) = parse_with_secret(&yaml);
    let secrets = ["pw-F", "sk-KEY-A", "cookie-C", "key-B", "u0078"];
    let cm_yaml = serde_saphyr::to_string(&cm).unwrap();
    let job_yaml = serde_saphyr::to_string(&job).unwrap();
    for s in secrets {
        assert!(!cm_yaml.contains(s), "{s} in the ConfigMap:\n{cm_yaml}");
        assert!(!job_yaml.contains(s), "{s} in the Job:\n{job_yaml}");
        assert!(!stderr.contains(s), "{s} on stderr: {stderr}");
    }
    // One warning line, naming the Secret.
    let name = secret.metadata.name.clone().unwrap();
    assert_eq!(name, "aiperf-credentials");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("warning: credentials are in the Secret aiperf-credentials"));

    // Each credential line of the ConfigMap is a variable the pod reads from the Secret.
    let data = secret.string_data.clone().unwrap();
    let args = &cm.data.as_ref().unwrap()["profile.args"];
    let refs: Vec<&str> = args
        .lines()
        .filter_map(|l| l.strip_prefix("$(")?.strip_suffix(')'))
        .collect();
    assert_eq!(refs.len(), 4, "{args}");
    let env = secret_env(&job);
    for r in &refs {
        assert!(
            env.contains(&(r.to_string(), name.clone(), r.to_string())),
            "{r}: {env:?}"
        );
        assert!(data.contains_key(*r), "{r}: {data:?}");
    }
    let values: Vec<&String> = data.values().collect();
    for s in ["pw-F", "sk-KEY-A", "cookie-C", "u0078key-B"] {
        assert!(values.iter().any(|v| v.contains(s)), "{s}: {data:?}");
    }

    // The pod: its arguments from the ConfigMap, its variables from the Secret.
    let tmp = tempfile::tempdir().unwrap();
    let args_file = tmp.path().join("profile.args");
    std::fs::write(&args_file, args).unwrap();
    let pod = |with_env: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["profile", "--args-file", args_file.to_str().unwrap()])
            .arg("--output-artifact-dir")
            .arg(tmp.path().join("shard-0"))
            .env("HF_HUB_OFFLINE", "1")
            .env("JOB_COMPLETION_INDEX", "0")
            .env("AIPERF_SHARD_COUNT", "1");
        for (k, v) in &data {
            if with_env {
                cmd.env(k, v);
            } else {
                cmd.env_remove(k);
            }
        }
        cmd.output().unwrap()
    };
    // Without the Secret's variables: bad input naming the line.
    let out = pod(false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("$(AIPERF_CREDENTIAL_1) names an environment variable that is not set"),
        "{err}"
    );
    let out = pod(true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // (The shard's clock-offset probe is a GET.)
    let heads: Vec<String> = server
        .heads()
        .into_iter()
        .filter(|h| h.starts_with("POST"))
        .collect();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for head in heads {
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("authorization: bearer sk-key-a"), "{head}");
        assert!(lower.contains("cookie: cookie-c"), "{head}");
        assert!(lower.contains("x-api-key: xkey-b"), "{head}");
    }
}

/// With --secret, no Secret is emitted: the pods read the credentials from the one named,
/// and get its other keys (HF_TOKEN) as variables; stderr says which keys it must hold.
#[test]
fn a_secret_of_ones_own_is_referenced_not_emitted() {
    let out = generate(&[
        "-m",
        "m",
        "--api-key",
        "sk-KEY-A",
        "--shards",
        "1",
        "--pvc",
        "p",
        "--secret",
        "bench-creds",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(
        !yaml.contains("sk-KEY-A") && !stderr.contains("sk-KEY-A"),
        "{yaml}"
    );
    let (cm, job) = parse(&yaml);
    assert!(cm.data.unwrap()["profile.args"].contains("--api-key\n$(AIPERF_CREDENTIAL_1)\n"));
    assert_eq!(
        secret_env(&job),
        [(
            "AIPERF_CREDENTIAL_1".to_string(),
            "bench-creds".to_string(),
            "AIPERF_CREDENTIAL_1".to_string()
        )]
    );
    let c = &job.spec.unwrap().template.spec.unwrap().containers[0];
    let from = c.env_from.clone().unwrap();
    assert_eq!(from[0].secret_ref.as_ref().unwrap().name, "bench-creds");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("your Secret bench-creds")
            && stderr.contains("AIPERF_CREDENTIAL_1 = '***'"),
        "{stderr}"
    );
}

/// Both Jobs' pods: the image's non-root user, a read-only root with /tmp an emptyDir,
/// no escalation, no capabilities, the runtime's seccomp profile, no service account
/// token; kept a week after they finish. The merge Job waits for every shard on the same
/// volume; NetworkPolicies refuse connections to every pod and from the merge's.
#[test]
fn pods_are_hardened_and_a_merge_job_waits_for_the_shards() {
    let out = generate(&[
        "-m",
        "m",
        "--tokenizer",
        "builtin",
        "--concurrency",
        "8",
        "--benchmark-duration",
        "60",
        "--shards",
        "2",
        "--pvc",
        "results",
        "--job-name",
        "night",
        "--lead-time",
        "30",
        "--image",
        "reg.example/aiperf:1.2",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let p = plan(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(
        p.kinds,
        ["ConfigMap", "Job", "Job", "NetworkPolicy", "NetworkPolicy"]
    );
    let containerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Containerfile")).unwrap();
    let image_user = containerfile
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .unwrap();
    let (uid, gid) = image_user.split_once(':').unwrap();
    let uid: i64 = uid.parse().unwrap();
    assert_eq!(gid.parse::<i64>().unwrap(), uid);
    assert!(uid >= 10_000, "a high UID, clear of the node's users");

    for job in &p.jobs {
        let name = job.metadata.name.as_deref().unwrap();
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(spec.backoff_limit, Some(0), "{name}");
        assert_eq!(
            spec.ttl_seconds_after_finished,
            Some(7 * 24 * 3600),
            "{name}"
        );
        let pod = pod_of(job);
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.automount_service_account_token, Some(false), "{name}");
        let psc = pod.security_context.as_ref().unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.run_as_user, Some(uid), "the Containerfile's USER");
        assert_eq!(psc.fs_group, Some(uid));
        assert_eq!(
            psc.seccomp_profile.as_ref().unwrap().type_,
            "RuntimeDefault"
        );
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("reg.example/aiperf:1.2"));
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(c.command.as_deref(), Some(&["aiperf".to_string()][..]));
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.run_as_user, Some(uid));
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}");
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(
            sc.capabilities.as_ref().unwrap().drop.as_deref(),
            Some(&["ALL".to_string()][..])
        );
        assert!(sc.privileged.is_none());
        // Writable: the PVC and an emptyDir at /tmp, which HOME points to.
        let mounts = c.volume_mounts.as_ref().unwrap();
        let volumes = pod.volumes.as_ref().unwrap();
        let tmp = mounts.iter().find(|m| m.mount_path == "/tmp").unwrap();
        let tmp_volume = volumes.iter().find(|v| v.name == tmp.name).unwrap();
        assert!(tmp_volume.empty_dir.is_some(), "{name}");
        let results = mounts.iter().find(|m| m.mount_path == "/results").unwrap();
        let results_volume = volumes.iter().find(|v| v.name == results.name).unwrap();
        assert_eq!(
            results_volume
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "results"
        );
        let env = c.env.as_ref().unwrap();
        let home = env.iter().find(|e| e.name == "HOME").unwrap();
        assert_eq!(home.value.as_deref(), Some("/tmp"));
        let res = c.resources.as_ref().unwrap();
        assert!(res.requests.is_some() && res.limits.is_some(), "{name}");
        // Reasons for the checkov checks it fails on purpose: no namespace given, a tag
        // and not a digest; no credentials, so no check about them.
        let skips = job.metadata.annotations.clone().unwrap_or_default();
        let skipped: Vec<&str> = skips
            .values()
            .map(|v| v.split_once('=').unwrap().0)
            .collect();
        assert_eq!(skipped, ["CKV_K8S_21", "CKV_K8S_43"], "{name}: {skips:?}");
    }

    // The merge: one pod, waiting for 2 shards under the shards' directory, for the lead
    // time + 60 s + the 30 s grace period + 15 min, then merging beside them.
    let shards = &p.jobs[0];
    let merge = &p.jobs[1];
    assert_eq!(merge.metadata.name.as_deref(), Some("night-merge"));
    let shard_args = pod_of(shards).containers[0].args.clone().unwrap();
    assert_eq!(
        shard_args[4],
        "/results/night/shard-$(JOB_COMPLETION_INDEX)"
    );
    let args = pod_of(merge).containers[0].args.clone().unwrap();
    let value = |flag: &str| {
        let at = args.iter().position(|a| a == flag).unwrap();
        args[at + 1].clone()
    };
    assert_eq!(args[..2], ["merge", "/results/night"]);
    assert_eq!(value("--output"), "/results/night-merged");
    assert_eq!(value("--wait-for-shards"), "2");
    assert_eq!(value("--wait-timeout"), "1020");
    let since: jiff::Timestamp = value("--wait-since").parse().unwrap();
    let age = jiff::Timestamp::now().as_second() - since.as_second();
    assert!(
        (0..=5).contains(&age),
        "--wait-since is generation time: {since}"
    );
    let merge_spec = merge.spec.as_ref().unwrap();
    assert!(merge_spec.completions.is_none() && merge_spec.completion_mode.is_none());
    assert_eq!(merge_spec.active_deadline_seconds, Some(1020 + 3600));
    assert!(pod_of(merge).affinity.is_none());

    // No connections in to any pod of the plan; none out of the merge's.
    let selects = |policy: &NetworkPolicy, job: &Job| {
        let spec = policy.spec.as_ref().unwrap();
        let wanted = spec
            .pod_selector
            .as_ref()
            .unwrap()
            .match_labels
            .clone()
            .unwrap();
        let labels = pod_labels(job);
        wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
    };
    let types = |policy: &NetworkPolicy| {
        let spec = policy.spec.as_ref().unwrap();
        assert!(
            spec.ingress.is_none() && spec.egress.is_none(),
            "no allow rules"
        );
        spec.policy_types.clone().unwrap()
    };
    let ingress = p.policies.iter().find(|n| types(n) == ["Ingress"]).unwrap();
    assert!(selects(ingress, shards) && selects(ingress, merge));
    let egress = p.policies.iter().find(|n| types(n) == ["Egress"]).unwrap();
    assert!(selects(egress, merge) && !selects(egress, shards));
    // The shards' anti-affinity selects the shards only.
    let anti = pod_of(shards)
        .affinity
        .as_ref()
        .unwrap()
        .pod_anti_affinity
        .as_ref()
        .unwrap()
        .preferred_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()[0]
        .pod_affinity_term
        .label_selector
        .clone()
        .unwrap()
        .match_labels
        .unwrap();
    let merge_labels = pod_labels(merge);
    assert!(anti.iter().any(|(k, v)| merge_labels.get(k) != Some(v)));

    // --no-merge: the shards alone.
    let out = generate(&[
        "-m",
        "m",
        "--shards",
        "1",
        "--pvc",
        "p",
        "--no-merge",
        "--image",
        "a/b:1",
    ]);
    assert!(out.status.success());
    assert_eq!(
        plan(&String::from_utf8(out.stdout).unwrap()).kinds,
        ["ConfigMap", "Job", "NetworkPolicy"]
    );
}

/// An image needs a tag or a digest; `latest` is warned about; the default is this
/// version's tag, which the README's build command gives.
#[test]
fn images_without_a_tag_are_refused_and_latest_is_warned_about() {
    let with_image = |image: Option<&str>| {
        let mut args = vec!["-m", "m", "--shards", "1", "--pvc", "p"];
        if let Some(i) = image {
            args.extend(["--image", i]);
        }
        generate(&args)
    };
    for untagged in ["aiperf", "registry.local:5000/team/aiperf"] {
        let out = with_image(Some(untagged));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{untagged}: {err}");
        assert!(err.contains("give a tag or a digest"), "{err}");
    }
    let out = with_image(Some("registry.local:5000/aiperf:latest"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.starts_with("warning: --image registry.local:5000/aiperf:latest: the tag latest"),
        "{err}"
    );
    let digest = format!("reg/aiperf@sha256:{}", "ab".repeat(32));
    let out = with_image(Some(&digest));
    assert!(out.status.success() && out.stderr.is_empty());
    let job = &plan(&String::from_utf8(out.stdout).unwrap()).jobs[0];
    let skips = job.metadata.annotations.clone().unwrap();
    assert!(
        !skips.values().any(|v| v.starts_with("CKV_K8S_43")),
        "a digest passes the digest check: {skips:?}"
    );
    let out = with_image(None);
    assert!(out.status.success() && out.stderr.is_empty());
    let job = &plan(&String::from_utf8(out.stdout).unwrap()).jobs[0];
    let image = pod_of(job).containers[0].image.clone().unwrap();
    assert_eq!(image, format!("aiperf:{}", env!("CARGO_PKG_VERSION")));
}

/// The README's cluster walk-through: its `kube generate` command runs as written (the
/// tokenizer offline aside), and the names it tells the reader to look for are the ones
/// in the manifests.
#[test]
fn the_readme_cluster_walk_through_matches_the_manifests() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme.find("\nOn a cluster").expect("the cluster section")..];
    let block = &section[section.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];
    // The command's lines: from `aiperf kube generate` through the first not ending in `\`.
    let mut command = String::new();
    for line in block
        .lines()
        .skip_while(|l| !l.starts_with("aiperf kube generate"))
    {
        let continued = line.trim_end().ends_with('\\');
        command.push_str(line.split(" > ").next().unwrap().trim_end_matches('\\'));
        command.push(' ');
        if !continued {
            break;
        }
    }
    let words: Vec<&str> = command.split_whitespace().skip(3).collect();
    assert!(words.contains(&"--image"), "{command}");
    let mut args = words.clone();
    args.extend(["--tokenizer", "builtin"]);
    let out = generate(&args);
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = plan(&String::from_utf8(out.stdout).unwrap());
    let merge = p.jobs[1].metadata.name.clone().unwrap();
    let merged_dir = {
        let args = pod_of(&p.jobs[1]).containers[0].args.clone().unwrap();
        args[args.iter().position(|a| a == "--output").unwrap() + 1].clone()
    };
    for name in [format!("job/{merge}"), merged_dir] {
        assert!(block.contains(&name), "the README names {name}: {block}");
    }
    // The image it builds is the one the command runs.
    let image = pod_of(&p.jobs[0]).containers[0].image.clone().unwrap();
    assert!(
        readme.contains(&format!("build -t {image} ")),
        "the README builds {image}"
    );
}
