//! Flags that send a finished run to an experiment tracker: an MLflow tracking server (its
//! REST API) and Weights & Biases (the `wandb` Python package). Parsing only; `config`
//! checks them and `publish` sends.

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct PublishArgs {
    /// After the run, log it to the MLflow tracking server at this URL (http:// or https://):
    /// the configuration as params, every summary statistic as a metric, and the artifact
    /// files. Each run of a sweep or repeated run becomes a child of one parent run.
    #[arg(long, value_name = "URL", help_heading = "Output")]
    pub mlflow_tracking_uri: Option<String>,

    /// MLflow experiment, created when missing (default `aiperf`).
    #[arg(long, value_name = "NAME", help_heading = "Output")]
    pub mlflow_experiment: Option<String>,

    /// MLflow run name (default `aiperf-` and the first 8 characters of the benchmark id).
    #[arg(long, value_name = "NAME", help_heading = "Output")]
    pub mlflow_run_name: Option<String>,

    /// Extra MLflow run tags: `key:value` pairs (comma-separated or repeated) or a JSON object.
    #[arg(long = "mlflow-tag", value_name = "KEY:VALUE", num_args = 1.., help_heading = "Output")]
    pub mlflow_tags: Vec<String>,

    /// Log the run as a child of this existing MLflow run (a root run when it does not exist).
    #[arg(long, value_name = "RUN_ID", help_heading = "Output")]
    pub mlflow_parent_run_id: Option<String>,

    /// Which files of the artifact directory to upload, replacing the default list (`*.json`,
    /// `*.csv`, `*.jsonl`, `*.parquet`, `*_timeslices.*` and `**/` png, jpg, jpeg, svg,
    /// html). Repeat or comma-separate.
    #[arg(long = "mlflow-artifact-glob", value_name = "GLOB", num_args = 1.., help_heading = "Output")]
    pub mlflow_artifact_globs: Vec<String>,

    /// After the run, log it to this Weights & Biases project with the `wandb` Python
    /// package (`pip install wandb`; `python3` must import it): the configuration, the
    /// summary metrics table and the artifact files.
    #[arg(long, value_name = "PROJECT", help_heading = "Output")]
    pub wandb_project: Option<String>,

    /// W&B entity (team or user); default: the API key's default entity.
    #[arg(long, value_name = "ENTITY", help_heading = "Output")]
    pub wandb_entity: Option<String>,

    /// W&B run name (default `aiperf-` and the first 8 characters of the benchmark id).
    #[arg(long, value_name = "NAME", help_heading = "Output")]
    pub wandb_run_name: Option<String>,

    /// Extra W&B run tags (repeat or comma-separate).
    #[arg(long = "wandb-tag", value_name = "TAG", num_args = 1.., help_heading = "Output")]
    pub wandb_tags: Vec<String>,
}
