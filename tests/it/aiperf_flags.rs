//! AIPerf 0.13's `profile` flags (tests/fixtures/aiperf_profile_flags.txt) against our
//! parser: per help section, how many are accepted; every flag that is not accepted fails
//! with exit 2 and says it is not supported, never silently ignored.
//!
//! `cargo test --test it aiperf_flags -- --nocapture` prints the table.

use crate::common;

use aiperf::api::Cli;
use clap::error::ErrorKind;

struct Section {
    name: String,
    /// Each flag: its names (first name, then aliases).
    flags: Vec<Vec<String>>,
}

fn fixture() -> Vec<Section> {
    let text = include_str!("../fixtures/aiperf_profile_flags.txt");
    let mut sections: Vec<Section> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push(Section {
                name: name.to_string(),
                flags: Vec::new(),
            });
            continue;
        }
        let names = line.split_whitespace().map(str::to_string).collect();
        sections
            .last_mut()
            .expect("a section first")
            .flags
            .push(names);
    }
    sections
}

/// True when our parser knows `name` (a missing or bad value still means it knows it).
fn accepted(name: &str) -> bool {
    match Cli::parse_with_sources(["aiperf", "profile", "-m", "m", name]) {
        Ok(_) => true,
        Err(e) => e.kind() != ErrorKind::UnknownArgument,
    }
}

/// A flag counts as accepted when every one of its names is.
fn flag_accepted(names: &[String]) -> bool {
    names.iter().all(|n| accepted(n))
}

#[test]
fn accepted_flags_per_section() {
    let sections = fixture();
    assert_eq!(sections.len(), 32, "AIPerf's profile help has 32 sections");
    let mut total = (0, 0);
    println!("{:<32} accepted/total", "section");
    for s in &sections {
        let ok = s.flags.iter().filter(|f| flag_accepted(f)).count();
        total = (total.0 + ok, total.1 + s.flags.len());
        println!("{:<32} {ok}/{}", s.name, s.flags.len());
    }
    println!("{:<32} {}/{}", "total", total.0, total.1);
    assert_eq!(total.1, 259);
    // Sections this build takes whole.
    for whole in [
        "Accuracy",
        "Endpoint",
        "Tokenizer",
        "Synthesis",
        "Goodput",
        "Output Sequence Length (OSL)",
        "Audio Input",
        "Cache Bust",
        "Conversation Input",
        "Load Generator",
        "Warmup",
        "Image Input",
        "Video Input",
        "Output",
        "Request Cancellation",
        "Network Latency",
        "Multi-Run",
        "Scenario",
        "Input",
        "UI",
        "Service",
        "Workers",
        "ZMQ Communication",
    ] {
        let s = sections.iter().find(|s| s.name == whole).unwrap();
        let missing: Vec<_> = s.flags.iter().filter(|f| !flag_accepted(f)).collect();
        assert!(missing.is_empty(), "{whole}: not accepted {missing:?}");
    }
}

#[test]
fn every_alias_of_an_accepted_flag_is_accepted() {
    for s in fixture() {
        for names in &s.flags {
            let known: Vec<_> = names.iter().filter(|n| accepted(n)).collect();
            assert!(
                known.is_empty() || known.len() == names.len(),
                "{}: only {known:?} of {names:?} accepted",
                s.name
            );
        }
    }
}

#[test]
fn every_flag_is_accepted_and_an_unknown_one_exits_2_saying_it_is_not_supported() {
    let missing: Vec<String> = fixture()
        .into_iter()
        .flat_map(|s| s.flags)
        .filter(|f| !flag_accepted(f))
        .map(|f| f[0].clone())
        .collect();
    assert!(missing.is_empty(), "not accepted: {missing:?}");
    // A flag AIPerf may add later still fails loudly, never silently.
    for flag in ["--search-sla-cube", "--not-an-aiperf-flag"] {
        let out = common::run_profile(&["-m", "m", flag, "1"]);
        let stderr = common::stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "{flag} is not supported by this build of aiperf; `aiperf profile --help`"
            )),
            "{flag}: {stderr}"
        );
    }
}
