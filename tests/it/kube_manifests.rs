//! `aiperf kube generate`: its YAML read back into the typed Kubernetes objects, and the
//! fields a sharded benchmark depends on checked.

use std::process::Command;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

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

/// Splits the output into its two documents and parses each as its typed object.
fn parse(yaml: &str) -> (ConfigMap, Job) {
    let docs: Vec<&str> = yaml.split("\n---\n").collect();
    assert_eq!(docs.len(), 2, "{yaml}");
    let cm: ConfigMap = serde_saphyr::from_str(docs[0]).expect("a ConfigMap");
    let job: Job = serde_saphyr::from_str(docs[1]).expect("a Job");
    (cm, job)
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

/// The Secret, the ConfigMap and the Job of a run given credentials.
fn parse_with_secret(yaml: &str) -> (Secret, ConfigMap, Job) {
    let docs: Vec<&str> = yaml.split("\n---\n").collect();
    assert_eq!(docs.len(), 3, "{yaml}");
    let secret: Secret = serde_saphyr::from_str(docs[0]).expect("a Secret");
    let cm: ConfigMap = serde_saphyr::from_str(docs[1]).expect("a ConfigMap");
    let job: Job = serde_saphyr::from_str(docs[2]).expect("a Job");
    (secret, cm, job)
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
