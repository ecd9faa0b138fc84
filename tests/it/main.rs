//! The integration tests: each module runs the real `aiperf` binary against the mock server
//! or a small server of its own. One binary, so the crate is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

mod accuracy;
mod aggregate_files;
mod aiperf_command_lines;
mod aiperf_flags;
mod audio_video;
mod bad_files;
mod bad_input;
mod cache_bust;
mod client_overhead;
mod compare;
mod control_hooks;
mod conversations;
mod custom_dataset;
mod dashboard;
mod dataset_compat;
mod endpoint_streams;
mod endpoint_types;
mod endpoints;
mod export_records;
mod faults;
mod flag_combinations;
mod gpu_telemetry;
mod ignored_flags;
mod image_sources;
mod image_token_count;
mod input_files;
mod kube_manifests;
mod load_gates;
mod load_knobs;
mod load_modes;
mod mlflow;
mod mock_queueing;
mod mock_server;
mod mooncake_messages;
mod otel;
mod plot;
mod profile;
mod prometheus_endpoint;
mod prompt_corpus;
mod prompt_shaping;
mod public_datasets;
mod report_html;
mod secrets;
mod server_metrics;
mod sharding;
mod summary_compat;
mod sweeps;
mod timeslices;
mod tokenizer_byte_level;
mod transport;
mod url_forms;
mod wandb;
