//! aiperf: a benchmark for OpenAI-compatible inference servers, CLI-compatible with
//! NVIDIA AIPerf's `aiperf profile`, with a built-in mock server.

pub mod cli;
pub mod clock;
pub mod config;
pub mod config_limits;
pub mod dataset;
pub mod endpoint;
pub mod export;
pub mod ids;
pub mod load;
pub mod metrics;
pub mod mock;
pub mod overhead;
pub mod profile;
pub mod record;
pub mod timer;
pub mod tokenizer;
pub mod transport;
pub mod ui;
