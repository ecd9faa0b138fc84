//! `--auto-plot`: after the run (the whole sweep), `aiperf plot` over its artifact
//! directory. Nothing happens before the run; a plotting failure warns, or fails the run
//! with `--plot-required`.

use tracing::warn;

use super::{Outcome, ProfileError};
use crate::cli::ProfileArgs;

/// Plots into `<artifact dir>/plots` when `--auto-plot` was given and a run succeeded;
/// hands back the run's result, or a failure to plot when `--plot-required`.
pub fn after_run(
    args: &ProfileArgs,
    result: Result<Outcome, ProfileError>,
) -> Result<Outcome, ProfileError> {
    if args.plot_required && !args.auto_plot {
        warn!("--plot-required has no effect without --auto-plot: nothing is plotted");
    }
    let ran = matches!(result, Ok(Outcome::Success | Outcome::ThresholdExceeded));
    if !args.auto_plot || !ran {
        return result;
    }
    match plot(args) {
        Ok(()) => result,
        Err(e) if args.plot_required => Err(ProfileError::Other(anyhow::anyhow!(
            "--auto-plot with --plot-required: {e}"
        ))),
        Err(e) => {
            warn!("--auto-plot: {e}; no plots drawn");
            result
        }
    }
}

fn plot(args: &ProfileArgs) -> Result<(), String> {
    // For a sweep the first point's flags name the base directory, which holds every point.
    let dir = super::run_files(args)
        .map_err(|e| format!("no artifact directory ({e})"))?
        .artifact_dir;
    let opts = crate::plot::Options {
        paths: vec![dir.clone()],
        output: Some(dir.join("plots")),
        theme: crate::plot::Theme::default(),
        config: None,
    };
    let w = crate::plot::run(&opts, crate::report::write_runs_page)
        .map_err(|e| format!("plotting failed: {e}"))?;
    for line in &w.warnings {
        warn!("plot: {line}");
    }
    println!(
        "Plots: {} ({} charts)",
        w.output.display(),
        w.files.len() / 2
    );
    if let Some(page) = &w.page {
        println!("Runs compared in {}", page.display());
    }
    Ok(())
}
