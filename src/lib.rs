//! aiperf: a benchmark for OpenAI-compatible inference servers, CLI-compatible with
//! NVIDIA AIPerf's `aiperf profile`, with a built-in mock server.
//!
//! Layers only look down: `cli` (flags) -> `config` (checks them into each stage's
//! options) -> `profile` (the pipeline; `sweep` runs it per point and trial; `publish` logs
//! the finished runs to MLflow and W&B) -> the stages (`dataset`, `endpoint`, `load`,
//! `transport`, `metrics`, `export`) -> the foundations (`clock`, `timer`, `record`,
//! `stats`, `tokenizer`, `ids`). `.ci/module_cycles.py` fails the build on an import cycle.

pub mod api;
mod app;
pub use app::run;

mod analyze;
mod chat;
mod cli;
mod compare;
mod kube;
mod merge;
mod plot;
mod profile;
mod publish;
mod scaffold;
mod speed_bench;
mod sweep;
mod synthesize;
mod trace_tools;

mod accuracy;
mod clock;
mod config;
mod dashboard;
mod dataset;
mod endpoint;
mod export;
mod hash;
mod ids;
mod live_export;
mod load;
mod metrics;
mod mock;
mod overhead;
mod record;
mod report;
mod scrape;
mod spill;
mod stats;
mod timer;
mod tokenizer;
mod transport;
mod ui;
