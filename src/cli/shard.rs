//! Flags for running one plan from several load generators (shards), merging their
//! results, and generating the Kubernetes Job that runs them. Parsing only; `config` checks
//! the shard flags.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// Environment variable a Kubernetes Indexed Job sets to each pod's index.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// Environment variable for the number of shards (set once in a Job template).
pub const COUNT_ENV: &str = "AIPERF_SHARD_COUNT";

#[derive(Debug, Clone, Default, Args)]
pub struct ShardArgs {
    /// This load generator's shard, 0-based (default: $JOB_COMPLETION_INDEX, which a
    /// Kubernetes Indexed Job sets). Needs --shard-count.
    #[arg(long, env = INDEX_ENV, value_name = "I", help_heading = "Sharding")]
    pub shard_index: Option<u64>,

    /// How many load generators share the plan (default: $AIPERF_SHARD_COUNT). Each builds
    /// the same plan from the same seed and sends its part: every N-th arrival of a
    /// --request-rate, --concurrency / N streams, whole conversations (multi-turn, traces)
    /// by a hash of their session id. `aiperf merge` puts the results back together.
    #[arg(long, env = COUNT_ENV, value_name = "N", help_heading = "Sharding")]
    pub shard_count: Option<u64>,

    /// Wait until this time, then start (RFC 3339 such as 2026-12-03T18:00:00Z, or Unix
    /// epoch seconds, fractions allowed). Give all shards the same time so that their
    /// schedules start together.
    #[arg(long, value_name = "TIME", help_heading = "Sharding")]
    pub start_at: Option<String>,
}

/// `aiperf merge`: the shards' results as one run.
#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// The shards' artifact directories (each with profile_export_aiperf.json and
    /// profile_export.jsonl), or one directory holding them as subdirectories.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// Where to write the merged artifacts.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: PathBuf,

    /// Wait until N shard subdirectories of DIR hold their results
    /// (`.aiperf_results_ready.json`), then merge. A shard that ended without results
    /// (`.aiperf_shard_failed.json`, with its reason) ends the wait: exit 1. What the merge
    /// Job of `aiperf kube generate` runs beside the shards.
    #[arg(long, value_name = "N", help_heading = "Waiting for shards")]
    pub wait_for_shards: Option<u64>,

    /// Give up waiting after this many seconds (exit 1, naming the shards without results).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 86400.0,
        requires = "wait_for_shards",
        help_heading = "Waiting for shards"
    )]
    pub wait_timeout: f64,

    /// Markers older than this time (RFC 3339 or Unix seconds) are an earlier run's and do
    /// not count.
    #[arg(
        long,
        value_name = "TIME",
        requires = "wait_for_shards",
        help_heading = "Waiting for shards"
    )]
    pub wait_since: Option<String>,
}

/// `aiperf kube ...`
#[derive(Debug, Clone, Args)]
pub struct KubeArgs {
    #[command(subcommand)]
    pub command: KubeCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum KubeCommand {
    /// Print a ConfigMap, an Indexed Job that runs `aiperf profile` as N shards, and a Job
    /// that merges their results (YAML).
    ///
    /// Every argument that is not one of the flags below is an `aiperf profile` argument;
    /// they go into the ConfigMap. Each pod writes its artifacts to `shard-<index>/` on the
    /// volume of --pvc; the merge Job runs `aiperf merge --wait-for-shards N` on them.
    /// The pods run as a non-root user with a read-only root filesystem, no capabilities
    /// and no service account token.
    ///
    /// Resource requests are sized from the plan: CPU 0.5 core plus 1 core per 500
    /// requests/sec of the shard's rate, or per 128 requests in flight (its concurrency),
    /// whichever is more; memory 256 MiB plus twice the dataset's estimated size
    /// (entries x (4 bytes per prompt token + 2.1 bytes per image pixel)). Limits are twice
    /// the requests.
    Generate(KubeGenerateArgs),
}

#[derive(Debug, Clone, Args)]
pub struct KubeGenerateArgs {
    /// Pods (shards) that run in parallel.
    #[arg(long, value_name = "N")]
    pub shards: Option<u64>,

    /// PersistentVolumeClaim the artifacts are written to (ReadWriteMany, so that every
    /// pod can mount it).
    #[arg(long, value_name = "NAME")]
    pub pvc: Option<String>,

    /// Container image with the aiperf binary on its PATH, built from the project's
    /// Containerfile (default aiperf:<this version>). It needs a tag or a digest;
    /// `latest` is warned about.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Namespace of the ConfigMap and the Job.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// Name of the Job (default aiperf; the ConfigMap is `<name>-args`).
    #[arg(long, value_name = "NAME")]
    pub job_name: Option<String>,

    /// A Secret you created for the pods' credentials. Without it, credentials among the
    /// profile arguments (--api-key, secret headers such as Authorization or Cookie,
    /// user:password@ in a URL) go into a Secret emitted with the manifests; with it, none
    /// is emitted: the pods read each credential from this Secret (keys AIPERF_CREDENTIAL_1,
    /// 2, ..., listed on stderr) and get its other keys as environment variables (HF_TOKEN).
    #[arg(long, value_name = "NAME")]
    pub secret: Option<String>,

    /// Seconds from now to the shared --start-at: time for the pods to be scheduled, pull
    /// the image and build their dataset (default 120).
    #[arg(long, value_name = "SECONDS")]
    pub lead_time: Option<f64>,

    /// Leave out the merge Job (a second Job, `<name>-merge`, that waits for every
    /// shard's results on the PVC and merges them into `/results/<name>-merged/`).
    #[arg(long)]
    pub no_merge: bool,

    /// Seconds the merge Job waits for the shards' results before it fails naming the
    /// missing ones (default: the lead time, plus --benchmark-duration and its grace
    /// period and 15 minutes, or plus 24 hours when the run's length is not known).
    #[arg(long, value_name = "SECONDS")]
    pub merge_timeout: Option<f64>,

    /// The `aiperf profile` arguments (the flags above may come anywhere among them).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROFILE_ARGS"
    )]
    pub profile_args: Vec<String>,
}

/// `aiperf profile --args-file FILE`: the file's lines (one argument each; blank lines and
/// lines starting with `#` skipped) in place of the flag. How a Kubernetes ConfigMap hands
/// a pod its arguments. A line that is only `$(NAME)` is the environment variable NAME:
/// how a credential reaches the pod from a Secret without being in the ConfigMap.
pub fn expand_args_file(argv: Vec<String>) -> Result<Vec<String>, String> {
    let Some(at) = argv
        .iter()
        .position(|a| a == "--args-file" || a.starts_with("--args-file="))
    else {
        return Ok(argv);
    };
    let (path, used) = match argv[at].strip_prefix("--args-file=") {
        Some(p) => (p.to_string(), 1),
        None => match argv.get(at + 1) {
            Some(p) => (p.clone(), 2),
            None => return Err("--args-file needs a file path".into()),
        },
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("--args-file {path}: cannot read it: {e}"))?;
    let mut out = argv[..at].to_vec();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let var = line
            .strip_prefix("$(")
            .and_then(|l| l.strip_suffix(')'))
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match var {
            None => out.push(line.to_string()),
            Some(name) => out.push(std::env::var(name).map_err(|_| {
                format!(
                    "--args-file {path}:{}: $({name}) names an environment variable that is not set; set it (in Kubernetes, from the Secret the manifests name)",
                    i + 1
                )
            })?),
        }
    }
    out.extend(argv[at + used..].iter().cloned());
    Ok(out)
}
