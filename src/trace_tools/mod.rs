//! Tools for mooncake trace files: `aiperf analyze-trace` (length distributions and
//! theoretical prefix-cache hit rates) and `aiperf validate mooncake-trace` (every bad line
//! listed). Both read the file as `aiperf profile --input-file` does (`dataset::custom`),
//! so a file `validate` passes loads, and their messages are the loader's.

pub mod analyze;

use std::path::Path;

use crate::cli::trace_tools::{AnalyzeTraceArgs, ValidateArgs, ValidateTarget};
use crate::dataset::custom::{Blocks, TraceCheck, check_mooncake_file};

/// `aiperf analyze-trace`: the report on stdout, and as JSON to `--output-file`. Err (exit
/// 2) when the file cannot be read or has a bad line.
pub fn analyze_trace(args: &AnalyzeTraceArgs) -> Result<(), String> {
    let input = args.input();
    let blocks = Blocks {
        size: args.block_size as usize,
        flag: "--block-size",
    };
    let check = check_mooncake_file(input, blocks)?;
    warn_unknown(&check);
    if let Some(first) = check.problems.first() {
        let more = match check.problems.len() - 1 {
            0 => String::new(),
            n => format!(
                " (and {n} more problem(s); `aiperf validate mooncake-trace --input {}` lists them)",
                input.display()
            ),
        };
        return Err(format!("{first}{more}"));
    }
    let analysis = analyze::analyze(&check.rows, args.block_size);
    let without_length = check
        .rows
        .iter()
        .filter(|r| r.input_length.is_none())
        .count();
    if without_length > 0 {
        eprintln!(
            "warning: {without_length} row(s) have no input_length (text_input, messages or payload); their input length counts as 0"
        );
    }
    print!("{}", analyze::render(&analysis));
    if let Some(out) = &args.output_file {
        write_json(out, &analysis)?;
        println!("Analysis report saved to {}", out.display());
    }
    Ok(())
}

fn write_json(path: &Path, analysis: &analyze::Analysis) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("--output-file: cannot create {}: {e}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(analysis).expect("the analysis serializes");
    std::fs::write(path, json)
        .map_err(|e| format!("--output-file: cannot write {}: {e}", path.display()))
}

/// Fields the loader ignores are named once, as `aiperf profile` names them.
fn warn_unknown(check: &TraceCheck) {
    if let Some(at) = &check.first_unknown {
        eprintln!(
            "warning: ignoring unknown field(s) of the input file: {} (first at {at})",
            check.unknown_fields.join(", ")
        );
    }
}

/// What `aiperf validate` found.
pub enum Validated {
    /// Every row loads.
    Passed,
    /// Bad rows, listed on stdout.
    Failed,
}

/// `aiperf validate mooncake-trace --input FILE`: each bad line on stdout with its
/// `file:line`, then a summary; a file that cannot be read fails too. Err (exit 2) for a
/// bad command line.
pub fn validate(args: &ValidateArgs) -> Result<Validated, String> {
    let (target, input) = args.resolve()?;
    match target {
        ValidateTarget::MooncakeTrace => {}
    }
    if !input.is_file() {
        println!("Validation failed: {} is not a file.", input.display());
        return Ok(Validated::Failed);
    }
    let blocks = Blocks {
        size: args.isl_block_size as usize,
        flag: "--isl-block-size",
    };
    let check = match check_mooncake_file(&input, blocks) {
        Ok(check) => check,
        Err(e) => {
            println!("Validation failed: {e}");
            return Ok(Validated::Failed);
        }
    };
    warn_unknown(&check);
    if check.problems.is_empty() {
        println!(
            "Validation passed: {} rows are Mooncake-compatible.",
            check.rows.len()
        );
        return Ok(Validated::Passed);
    }
    println!("Validation failed with {} error(s):", check.problems.len());
    for problem in &check.problems {
        println!("  {problem}");
    }
    let bad = check.lines - check.rows.len();
    if bad > 0 {
        println!(
            "{bad} of {} rows are bad; `aiperf profile --input-file` would refuse the file at the first.",
            check.lines
        );
    }
    Ok(Validated::Failed)
}
