//! `--export-level`, `--profile-export-prefix` and the other export flags, checked and
//! turned into the export stage's options.

use super::{ConfigError, bad};
use crate::cli::output::{ExportLevel, OutputArgs};
use crate::export::{FileNames, Level, Options, prefix_base};

pub fn export_options(a: &OutputArgs) -> Result<Options, ConfigError> {
    let level = match a.export_level {
        ExportLevel::Summary => Level::Summary,
        ExportLevel::Records => Level::Records,
        ExportLevel::Raw => {
            return Err(bad(
                "--export-level raw: the raw request/response file (profile_export_raw.jsonl) is not \
                 written by this tool; use --export-level records (the default) and add \
                 --export-outputs-json for the response texts",
            ));
        }
    };
    let names = match &a.profile_export_prefix {
        None => FileNames::default(),
        Some(prefix) => {
            let base = prefix_base(prefix).ok_or_else(|| {
                bad(format!(
                    "--profile-export-prefix {prefix:?}: no file name is left once the directory \
                     and a known ending (.json, .csv, _console.txt, ...) are dropped; give a name \
                     such as `run1`"
                ))
            })?;
            if base == "outputs" && a.export_outputs_json {
                return Err(bad(
                    "--profile-export-prefix outputs: its JSON file would be outputs.json, which \
                     --export-outputs-json writes; choose another prefix",
                ));
            }
            FileNames::with_base(&base)
        }
    };
    if a.export_http_trace && level == Level::Summary {
        return Err(bad(
            "--export-http-trace adds each request's HTTP stamps to profile_export.jsonl, which \
             --export-level summary does not write; drop one of the two flags",
        ));
    }
    Ok(Options {
        level,
        names,
        outputs_json: a.export_outputs_json,
        http_trace: a.export_http_trace,
        show_trace_timing: a.show_trace_timing,
    })
}
