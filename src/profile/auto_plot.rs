//! `--auto-plot`: after the run (the whole sweep), `aiperf plot` over its artifact
//! directory. Nothing happens before the run, and a plotting failure only warns.

use tracing::warn;

use super::{Outcome, ProfileError};
use crate::cli::ProfileArgs;

/// Plots into `<artifact dir>/plots` when `--auto-plot` was given and a run succeeded;
/// hands back the run's result unchanged.
pub fn after_run(
    args: &ProfileArgs,
    result: Result<Outcome, ProfileError>,
) -> Result<Outcome, ProfileError> {
    let ran = matches!(result, Ok(Outcome::Success | Outcome::ThresholdExceeded));
    if !args.auto_plot || !ran {
        return result;
    }
    // For a sweep the first point's flags name the base directory, which holds every point.
    let dir = match super::run_files(args) {
        Ok(files) => files.artifact_dir,
        Err(e) => {
            warn!("--auto-plot: no artifact directory ({e}); no plots drawn");
            return result;
        }
    };
    let opts = crate::plot::Options {
        paths: vec![dir.clone()],
        output: Some(dir.join("plots")),
        theme: crate::plot::Theme::default(),
        config: None,
    };
    match crate::plot::run(&opts) {
        Ok(w) => {
            for line in &w.warnings {
                warn!("plot: {line}");
            }
            println!(
                "Plots: {} ({} charts)",
                w.output.display(),
                w.files.len() / 2
            );
        }
        Err(e) => warn!("--auto-plot: plotting failed: {e}"),
    }
    result
}
