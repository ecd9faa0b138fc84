//! Exports: console report, summary JSON and CSV, per-record JSONL.

pub mod jsonl;
