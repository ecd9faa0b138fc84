//! `aiperf kube generate`: its YAML read back into the typed Kubernetes objects, and the
//! fields a sharded benchmark depends on checked.

use std::process::Command;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;

mod common;

use common::BIN;

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
