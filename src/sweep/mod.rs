//! `aiperf profile` with list-valued flags (`--concurrency 1,4,16`), `--num-profile-runs N`
//! or `--search-recipe`: one process runs every point and trial through the profile
//! pipeline, then writes the aggregates. The tokenizer is loaded once; each run builds its
//! own dataset and client (connections close between runs, so one point's queue cannot leak
//! into the next).

mod adaptive;
mod argv;
mod bayes;
mod lists;
mod plan;
mod post;
mod recipes;
mod search;
mod variants;

pub use lists::{Lists, Variation, find as find_lists};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tracing::{info, warn};

use self::adaptive::AdaptiveState;
use self::plan::Layout;
use self::search::SearchState;
use crate::cli::{Cli, Command, ProfileArgs};
use crate::config::ConfigError;
use crate::config::multirun::{ConvergenceMode, MultiRunOptions, Search, SweepOrder};
use crate::export::aggregate::{
    self, ConfidenceAggregate, RunMetrics, RunOutcome, SweepAggregate, SweepCell, VariationMeta,
};
use crate::export::sweep_files::{RUN_CONFIG_FILE, SEARCH_HISTORY_FILE, write_json_file};
use crate::metrics::confidence;
use crate::profile::{self, Outcome, ProfileError, Reuse};

/// The run directories a `profile` command wrote, in the order they ran, for what is done
/// after the runs (`publish`).
#[derive(Debug, Default)]
pub struct Ran {
    /// The artifact directory given (a sweep's base, or the one run's directory).
    pub base: PathBuf,
    pub dirs: Vec<PathBuf>,
    /// A sweep or repeated run.
    pub multi: bool,
}

/// Runs `aiperf profile`: a single run as before, or a sweep / repeated run / search.
/// `argv` is the command line as typed; `lists` what [`find_lists`] found in it; `args` the
/// flags parsed from the command line with each list's first value.
/// `ran` gets the directory of each run that started, for what is done after the runs.
pub fn run(
    argv: &[String],
    mut lists: Lists,
    args: &ProfileArgs,
    ran: &mut Ran,
) -> Result<Outcome, ProfileError> {
    let opts = options(&mut lists, args)?;
    if !lists.is_sweep() && !opts.is_multi_run() {
        let dir = profile::run_files(args)?.artifact_dir;
        ran.base = dir.clone();
        ran.dirs.push(dir);
        return profile::run(args, argv);
    }
    let mut sweep = Sweep::new(&lists, args, opts)?;
    sweep.command = crate::config::ProfileConfig::from_args(args, false)
        .map(|cfg| crate::config::redacted_command_line(argv, &cfg.secrets))?;
    ran.base = sweep.base.clone();
    ran.multi = true;
    sweep.run_all(ran)?;
    sweep.finish()
}

/// Each point's first run as the sweep will make it, without running it: its variation
/// and its resolved configuration (`input_config`) with the directory and seed the sweep
/// gives it. A search chooses its points as it runs, so it has none to show.
pub fn preview(lists: &Lists, args: &ProfileArgs) -> Result<Vec<(Variation, Value)>, ProfileError> {
    let mut lists = lists.clone();
    let opts = options(&mut lists, args)?;
    if opts.search.is_some() {
        return Err(ConfigError(
            "a search recipe chooses its points as it runs; there is no list of them to show"
                .into(),
        )
        .into());
    }
    let variations = variations(&lists, &opts).map_err(ConfigError)?;
    let points = lists.is_sweep() || opts.grid.is_some() || !opts.variants.is_empty();
    let multi = points || opts.is_multi_run();
    let base = profile::run_files(args)?.artifact_dir;
    let layout = match points {
        true => Layout::Points {
            trials: opts.runs,
            order: opts.order,
        },
        false => Layout::Repeats,
    };
    let base_seed = plan::base_seed(args.random_seed, &opts);
    let mut out = Vec::new();
    for (p, v) in variations.into_iter().enumerate() {
        let mut a = parse_point(&v.argv)?;
        if multi {
            a.artifact_dir = Some(layout.run_dir(&base, p, &v.dir_name(), 0));
            a.random_seed = plan::run_seed(base_seed, &opts, p, &v.label(), 0);
        }
        let config = profile::run_files(&a)?.input_config;
        out.push((v, config));
    }
    Ok(out)
}

/// The sweep's options; pareto-sweep takes the `--concurrency` list as its own.
fn options(lists: &mut Lists, args: &ProfileArgs) -> Result<MultiRunOptions, ConfigError> {
    let pareto =
        args.multirun.search_recipe == Some(crate::cli::multirun::SearchRecipe::ParetoSweep);
    let taken = recipes::take_concurrency_list(lists, pareto);
    MultiRunOptions::from_args(args, lists.is_sweep(), taken)
}

/// The points: a grid recipe's, the `--variant` scenarios, or the lists'.
fn variations(lists: &Lists, opts: &MultiRunOptions) -> Result<Vec<Variation>, String> {
    match (&opts.grid, opts.variants.is_empty()) {
        (Some(grid), _) => recipes::variations(grid, &lists.first),
        (None, false) => variants::variations(&lists.first, &opts.variants),
        (None, true) => lists.variations(opts.sweep_type),
    }
}

/// Every directory the plan will create (each run's, each point's aggregate, the sweep
/// aggregate; only the base for a search, whose points come as it goes) is checked before
/// the first request: a file in the way would otherwise fail the run after the ones before
/// it were made.
fn check_dirs(
    base: &Path,
    layout: Layout,
    points: &[Point],
    runs: u32,
    order: SweepOrder,
) -> Result<(), ConfigError> {
    let mut dirs = vec![base.to_path_buf()];
    for (p, t) in plan::order(points.len(), runs, order) {
        let name = points[p].variation.dir_name();
        dirs.push(layout.run_dir(base, p, &name, t));
        dirs.push(layout.point_aggregate_dir(base, &name));
    }
    dirs.extend(
        layout
            .sweep_aggregate_dir(base)
            .filter(|_| !points.is_empty()),
    );
    for dir in &dirs {
        if let Some(file) = plan::file_in_the_way(dir) {
            let what = if &file == dir {
                format!("{} is a file where a run directory must go", dir.display())
            } else {
                format!(
                    "{} is a file in the path of the run directory {}",
                    file.display(),
                    dir.display()
                )
            };
            return Err(ConfigError(format!(
                "{what}; move or remove it, or give another --output-artifact-dir"
            )));
        }
    }
    Ok(())
}

/// One point of the sweep: its flags, its runs so far.
struct Point {
    variation: Variation,
    args: ProfileArgs,
    runs: Vec<RunOutcome>,
    /// Per-request values of the convergence metric, per successful run (distribution mode).
    samples: Vec<Vec<f64>>,
    converged: bool,
}

impl Point {
    fn successes(&self) -> Vec<&RunMetrics> {
        self.runs
            .iter()
            .filter_map(|r| r.result.as_ref().ok())
            .collect()
    }
}

struct Sweep {
    first_argv: Vec<String>,
    opts: MultiRunOptions,
    base: PathBuf,
    layout: Layout,
    points: Vec<Point>,
    search: Option<SearchState>,
    /// The adaptive search (`--search-space`, the BO recipes and styles).
    adaptive: Option<AdaptiveState>,
    base_seed: Option<u64>,
    reuse: Reuse,
    /// The last run: (point, trial0), for the pause before the next.
    last: Option<(usize, u32)>,
    /// Set when a run was interrupted: no more runs.
    stopped: Option<Outcome>,
    started: Instant,
    /// Sum of the runs' own wall times (their benchmark and setup), for the overhead line.
    in_runs: Duration,
    model: String,
    /// Write `report.html` in the base directory (`--no-html-report` turns it off).
    html_report: bool,
    /// The command line as typed, secrets redacted (for the report).
    command: String,
}

impl Sweep {
    fn new(
        lists: &Lists,
        args: &ProfileArgs,
        opts: MultiRunOptions,
    ) -> Result<Sweep, ProfileError> {
        let variations = variations(lists, &opts).map_err(ConfigError)?;
        // Every point's flags are checked before anything is sent.
        let mut points = Vec::new();
        for variation in variations {
            let args = parse_point(&variation.argv)?;
            profile::run_files(&args)?;
            points.push(Point {
                variation,
                args,
                runs: Vec::new(),
                samples: Vec::new(),
                converged: false,
            });
        }
        let files = profile::run_files(&points[0].args)?;
        let (search, adaptive) = match opts.search.clone() {
            Some(Search::Adaptive(a)) => {
                check_search_bounds(&lists.first, &a.dims)?;
                (None, Some(AdaptiveState::new(*a)))
            }
            s => (s.map(SearchState::new), None),
        };
        let layout = match &search {
            _ if adaptive.is_some() => Layout::SearchIterations { trials: opts.runs },
            Some(s) if s.is_monotonic() => Layout::SearchIterations { trials: opts.runs },
            Some(_) => Layout::Points {
                trials: opts.runs,
                order: opts.order,
            },
            None if lists.is_sweep() || opts.grid.is_some() || !opts.variants.is_empty() => {
                Layout::Points {
                    trials: opts.runs,
                    order: opts.order,
                }
            }
            None => Layout::Repeats,
        };
        if search.is_some() || adaptive.is_some() {
            // The search creates its points as it goes.
            points.clear();
        }
        check_dirs(&files.artifact_dir, layout, &points, opts.runs, opts.order)?;
        Ok(Sweep {
            first_argv: lists.first.clone(),
            base_seed: plan::base_seed(args.random_seed, &opts),
            opts,
            base: files.artifact_dir,
            layout,
            points,
            search,
            adaptive,
            reuse: Reuse::default(),
            last: None,
            stopped: None,
            started: Instant::now(),
            in_runs: Duration::ZERO,
            model: files.model,
            html_report: !args.output.no_html_report,
            command: String::new(),
        })
    }

    fn run_all(&mut self, ran: &mut Ran) -> Result<(), ProfileError> {
        let total = self.points.len() as u32 * self.opts.runs;
        if self.search.is_none() && self.adaptive.is_none() {
            info!(
                "Sweep: {} point(s) x {} run(s) = {total} runs, written under {}",
                self.points.len(),
                self.opts.runs,
                self.base.display()
            );
            for (p, t) in plan::order(self.points.len(), self.opts.runs, self.opts.order) {
                if self.stopped.is_some() {
                    break;
                }
                if self.points[p].converged {
                    continue;
                }
                self.run_one(p, t, ran)?;
                self.check_convergence(p);
                if self.point_done(p) {
                    self.print_live_table();
                }
            }
            return Ok(());
        }
        while self.stopped.is_none() {
            let Some(proposal) = self.propose() else {
                break;
            };
            let mut argv = self.first_argv.clone();
            for (_, value, flag) in &proposal {
                argv.extend([flag.clone(), lists::python_str(value)]);
            }
            // What the search sets on every point besides what it varies (the goodput
            // search's objectives).
            argv.extend(
                self.search
                    .as_ref()
                    .map(SearchState::point_args)
                    .unwrap_or_default(),
            );
            let index = self.points.len();
            let variation = Variation {
                index,
                values: proposal.into_iter().map(|(p, v, _)| (p, v)).collect(),
                argv,
                name: None,
                dir_by_name: false,
            };
            let args = parse_point(&variation.argv)?;
            self.points.push(Point {
                variation,
                args,
                runs: Vec::new(),
                samples: Vec::new(),
                converged: false,
            });
            info!(
                "Search: trying {}",
                variation_text(&self.points[index].variation)
            );
            for t in 0..self.opts.runs {
                if self.stopped.is_some() || self.points[index].converged {
                    break;
                }
                self.run_one(index, t, ran)?;
                self.check_convergence(index);
            }
            if self.stopped.is_some() {
                break;
            }
            if self.adaptive.is_some() {
                self.tell_adaptive(index)?;
                self.print_live_table();
                continue;
            }
            let c = self.points[index].variation.values[0]
                .1
                .as_u64()
                .expect("a concurrency");
            let search = self.search.as_mut().expect("searching");
            let tried = search.record(c, &self.points[index].successes());
            match &tried.breach {
                None => info!("Search: concurrency {c} meets the criteria"),
                Some(why) => info!("Search: concurrency {c} does not: {why}"),
            }
            self.print_live_table();
        }
        Ok(())
    }

    /// The next point of a search: per dimension (path, value, flag); `None` when done.
    fn propose(&mut self) -> Option<Vec<(&'static str, Value, String)>> {
        if let Some(a) = self.adaptive.as_mut() {
            return a.ask();
        }
        let c = self.search.as_ref().and_then(SearchState::next)?;
        Some(vec![(
            "phases.profiling.concurrency",
            Value::from(c),
            "--concurrency".to_string(),
        )])
    }

    /// Hands point `index`'s runs to the adaptive search and rewrites `search_history.json`
    /// (after every point, as AIPerf, so a cut-short search keeps its trajectory).
    fn tell_adaptive(&mut self, index: usize) -> Result<(), ProfileError> {
        let point = &self.points[index];
        let a = self.adaptive.as_mut().expect("an adaptive search");
        let metric = format!("{} {}", a.cfg.metric, a.cfg.stat);
        let it = a.tell(
            point.variation.values.clone(),
            &point.successes(),
            &point.samples,
        );
        let text = variation_text(&point.variation);
        let objective = it
            .objective
            .map_or("not measured".to_string(), |v| format!("{v:.2}"));
        match it.feasible {
            true => info!("Search: {text}: {metric} {objective}, meets every SLA"),
            false => info!("Search: {text}: {metric} {objective}, infeasible"),
        }
        self.write_history(None)
    }

    fn write_history(&self, reason: Option<&str>) -> Result<(), ProfileError> {
        let Some(a) = &self.adaptive else {
            return Ok(());
        };
        write_json_file(&self.base, SEARCH_HISTORY_FILE, &a.history_json(reason)).map_err(|e| {
            let path = self.base.join(SEARCH_HISTORY_FILE);
            ProfileError::from(anyhow::anyhow!("cannot write {}: {e}", path.display()))
        })
    }

    /// Runs trial `trial0` of point `p`, after the pause the plan asks for.
    fn run_one(&mut self, p: usize, trial0: u32, ran: &mut Ran) -> Result<(), ProfileError> {
        if let Some(prev) = self.last {
            let pause = plan::pause(&self.opts, prev, (p, trial0));
            if !pause.is_zero() {
                info!("Cooling down for {:.1} s", pause.as_secs_f64());
                if let Some(signal) = sleep_unless_interrupted(pause) {
                    self.stopped = Some(signal);
                    return Ok(());
                }
            }
        }
        self.last = Some((p, trial0));
        let point = &self.points[p];
        let dir_name = point.variation.dir_name();
        let dir = self.layout.run_dir(&self.base, p, &dir_name, trial0);
        let label = self.layout.run_label(&dir_name, trial0);
        let var_label = point.variation.label();
        let seed = plan::run_seed(self.base_seed, &self.opts, p, &var_label, trial0);
        let mut args = point.args.clone();
        args.artifact_dir = Some(dir.clone());
        args.random_seed = seed;
        if trial0 > 0 && !self.opts.warmup_after_first {
            drop_warmup(&mut args);
        }
        // Logging starts with a run: the search's own warnings go out with the first run's.
        args.config_overridden
            .extend(std::mem::take(&mut self.opts.warnings));
        let files = profile::run_files(&args)?;
        let run_config = json!({
            "label": label,
            "trial": trial0 + 1,
            "seed": seed,
            "variation": {
                "index": point.variation.index,
                "label": var_label,
                "values": values_json(&point.variation),
            },
            "input_config": files.input_config,
        });
        write_json_file(&dir, RUN_CONFIG_FILE, &run_config).map_err(|e| {
            anyhow::anyhow!("cannot write {}: {e}", dir.join(RUN_CONFIG_FILE).display())
        })?;
        info!(
            "Run {label}{}: {}",
            if var_label == "base" {
                String::new()
            } else {
                format!(" ({var_label})")
            },
            dir.display()
        );
        ran.dirs.push(dir.clone());
        let t0 = Instant::now();
        let outcome = profile::run_reusing(&args, &point.variation.argv, &mut self.reuse);
        self.in_runs += t0.elapsed();
        let result = match outcome {
            Err(ProfileError::Config(e)) => return Err(ProfileError::Config(e)),
            Err(e) => Err(format!("{e:#}")),
            Ok(o @ (Outcome::Interrupted | Outcome::Terminated)) => {
                self.stopped = Some(o);
                Err(o.failure().unwrap_or("interrupted").to_string())
            }
            Ok(o) => match (
                o.failure(),
                aggregate::read_run_metrics(&files.summary_json),
            ) {
                (None, metrics) => metrics,
                (Some(why), _) => Err(why.to_string()),
            },
        };
        if let Err(why) = &result {
            warn!("Run {label} failed: {why}");
        }
        // Per-request values kept for the distribution convergence test or a pooled
        // percentile objective.
        let sample_metric = match (&self.opts.convergence, &self.adaptive) {
            (Some(c), _) if c.mode == ConvergenceMode::Distribution => Some(c.metric.as_str()),
            (_, Some(a)) => a.pooled_metric(),
            _ => None,
        };
        let samples = match (&result, sample_metric, &files.records_jsonl) {
            (Ok(_), Some(metric), Some(jsonl)) => {
                aggregate::read_record_values(jsonl, metric).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        let point = &mut self.points[p];
        if result.is_ok() {
            point.samples.push(samples);
        }
        point.runs.push(RunOutcome { label, result });
        Ok(())
    }

    /// Marks point `p` converged when its runs so far meet the convergence criterion.
    fn check_convergence(&mut self, p: usize) {
        let Some(c) = &self.opts.convergence else {
            return;
        };
        let point = &self.points[p];
        let values: Vec<f64> = point
            .successes()
            .iter()
            .filter_map(|m| m.get(&c.metric)?.stats.get(c.stat).copied())
            .collect();
        if values.len() < confidence::MIN_RUNS {
            return;
        }
        let converged = match c.mode {
            ConvergenceMode::CiWidth | ConvergenceMode::Cv => {
                confidence::has_converged(c.mode, c.threshold, self.opts.confidence_level, &values)
            }
            ConvergenceMode::Distribution => {
                let (latest, earlier) = point.samples.split_last().expect("two runs");
                let earlier: Vec<f64> = earlier.iter().flatten().copied().collect();
                confidence::distributions_match(&earlier, latest, c.threshold)
            }
        };
        if converged {
            info!(
                "{} {} converged after {} runs ({:?}, threshold {})",
                c.metric,
                c.stat,
                values.len(),
                c.mode,
                c.threshold
            );
            self.points[p].converged = true;
        }
    }

    /// True when point `p` has run every trial it will run.
    fn point_done(&self, p: usize) -> bool {
        let point = &self.points[p];
        point.converged || point.runs.len() as u32 >= self.opts.runs
    }

    fn cells(&self) -> Vec<SweepCell> {
        self.points
            .iter()
            .filter(|p| !p.runs.is_empty())
            .map(|p| SweepCell {
                values: p.variation.owned_values(),
                runs: p.runs.clone(),
            })
            .collect()
    }

    fn sweep_aggregate<'c>(&self, cells: &'c [SweepCell]) -> SweepAggregate<'c> {
        SweepAggregate {
            cells,
            sweep_mode: self.opts.order.as_str().to_string(),
            confidence_level: self.opts.confidence_level,
            failed_runs: self.failed_runs(),
        }
    }

    fn failed_runs(&self) -> Vec<(String, String)> {
        self.points
            .iter()
            .flat_map(|p| {
                let dir = p.variation.dir_name();
                p.runs.iter().filter_map(move |r| {
                    let why = r.result.as_ref().err()?;
                    let label = match self.layout {
                        Layout::Points { trials, .. } if trials > 1 => format!("{dir}/{}", r.label),
                        _ => r.label.clone(),
                    };
                    Some((label, why.clone()))
                })
            })
            .collect()
    }

    /// The sweep table, live, when several points have run (and the user wants it).
    fn print_live_table(&self) {
        use std::io::IsTerminal;
        let multi_point = self.points.len() > 1;
        if multi_point && self.opts.sweep_table && std::io::stdout().is_terminal() {
            let cells = self.cells();
            println!("{}", aggregate::sweep_table(&self.sweep_aggregate(&cells)));
        }
    }

    /// Writes the aggregates, prints the summary and returns how the whole ended.
    fn finish(self) -> Result<Outcome, ProfileError> {
        let total: usize = self.points.iter().map(|p| p.runs.len()).sum();
        let succeeded: usize = self.points.iter().map(|p| p.successes().len()).sum();
        let failed = self.failed_runs();
        if !failed.is_empty() {
            let what = if self.layout == Layout::Repeats {
                "Failed runs"
            } else {
                "Some sweep points failed"
            };
            warn!("{what}:");
            for (label, why) in &failed {
                warn!("  {label}: {why}");
            }
        }
        println!("All runs complete: {succeeded}/{total} successful");
        let mut printed = Vec::new();
        let sweep_files = self.write_aggregates(succeeded, &mut printed)?;
        if self.html_report {
            self.write_report(succeeded, printed);
        }
        if let Some(s) = &self.search {
            let dirs: Vec<String> = self
                .points
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let dir = self
                        .layout
                        .run_dir(&self.base, i, &p.variation.dir_name(), 0);
                    dir.strip_prefix(&self.base)
                        .unwrap_or(&dir)
                        .display()
                        .to_string()
                })
                .collect();
            let (name, body) = s.result_file(&dirs);
            let dir = match self.layout {
                Layout::SearchIterations { .. } => self.base.clone(),
                _ => self
                    .layout
                    .sweep_aggregate_dir(&self.base)
                    .expect("a search has points"),
            };
            write_json_file(&dir, name, &body)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.join(name).display()))?;
            println!("{}", s.verdict());
            println!("Search results: {}", dir.join(name).display());
        }
        if let Some(a) = &self.adaptive {
            let reason = match self.stopped {
                Some(_) => "cancelled",
                None => a.convergence_reason.unwrap_or("unknown"),
            };
            info!(
                "Adaptive search ended after {} points (reason={reason})",
                a.iterations.len()
            );
            self.write_history(Some(reason))?;
            println!("{}", a.verdict());
            println!(
                "Search results: {}",
                self.base.join(SEARCH_HISTORY_FILE).display()
            );
        }
        if let Some(dir) = sweep_files {
            println!("Sweep aggregate: {}", dir.display());
        }
        self.derive_recipe_file(succeeded)?;
        let wall = self.started.elapsed();
        info!(
            "{total} runs in {:.1} s; {:.2} s of it between runs",
            wall.as_secs_f64(),
            wall.saturating_sub(self.in_runs).as_secs_f64()
        );
        if let Some(o) = self.stopped {
            return Ok(o);
        }
        Ok(match succeeded {
            0 => Outcome::AllFailed,
            1 if total > 1 => Outcome::TooFewRuns,
            _ => Outcome::Success,
        })
    }

    /// Per-point confidence aggregates and the sweep aggregate (with its console table);
    /// AIPerf writes them only when at least two runs succeeded. Returns the sweep aggregate
    /// directory, when written.
    fn write_aggregates(
        &self,
        succeeded: usize,
        printed: &mut Vec<String>,
    ) -> Result<Option<PathBuf>, ProfileError> {
        if succeeded < 2 {
            if succeeded == 1 {
                warn!("Only one run succeeded: no aggregate is written (it needs two)");
            }
            return Ok(None);
        }
        let io = |dir: &Path, e: std::io::Error| {
            anyhow::anyhow!("cannot write the aggregate in {}: {e}", dir.display())
        };
        let sweeping = self.layout != Layout::Repeats;
        for p in &self.points {
            if p.successes().is_empty() {
                if sweeping {
                    warn!(
                        "Point {} had no successful run: no aggregate for it",
                        p.variation.label()
                    );
                }
                continue;
            }
            let agg = ConfidenceAggregate {
                runs: &p.runs,
                confidence_level: self.opts.confidence_level,
                cooldown_seconds: self.opts.run_cooldown.as_secs_f64(),
                variation: sweeping.then(|| VariationMeta {
                    label: p.variation.label(),
                    values: p.variation.owned_values(),
                    sweep_mode: self.opts.order.as_str().to_string(),
                    model: Some(self.model.clone()),
                }),
            };
            let dir = self
                .layout
                .point_aggregate_dir(&self.base, &p.variation.dir_name());
            aggregate::write_confidence_aggregate(&dir, &agg).map_err(|e| io(&dir, e))?;
            if !sweeping {
                printed.push(aggregate::confidence_console(&agg));
                println!("{}", aggregate::confidence_console(&agg));
                println!("Aggregate: {}", dir.display());
            }
        }
        let Some(dir) = self.layout.sweep_aggregate_dir(&self.base) else {
            return Ok(None);
        };
        let cells = self.cells();
        let agg = self.sweep_aggregate(&cells);
        aggregate::write_sweep_aggregate(&dir, &agg).map_err(|e| io(&dir, e))?;
        printed.push(aggregate::sweep_table(&agg));
        printed.push(aggregate::best_configurations_console(&agg));
        println!("{}", printed[printed.len() - 2]);
        println!("{}", printed[printed.len() - 1]);
        Ok(Some(dir))
    }

    /// A grid recipe's derived file (`prefill_curve.json`, ...) beside the sweep
    /// aggregate, from the points that have a successful run.
    fn derive_recipe_file(&self, succeeded: usize) -> Result<(), ProfileError> {
        let (Some(grid), Some(dir)) =
            (&self.opts.grid, self.layout.sweep_aggregate_dir(&self.base))
        else {
            return Ok(());
        };
        if succeeded == 0 {
            return Ok(());
        }
        let cells: Vec<post::Cell> = self
            .points
            .iter()
            .map(|p| post::Cell {
                values: &p.variation.values,
                runs: p.successes(),
            })
            .filter(|c| !c.runs.is_empty())
            .collect();
        post::write(&dir, grid, &cells)
            .map_err(|e| anyhow::anyhow!("cannot write in {}: {e}", dir.display()))?;
        Ok(())
    }

    /// `report.html` in the base directory: the tables printed above, the multi-run charts
    /// and a link to each run's own report.
    fn write_report(&self, succeeded: usize, tables: Vec<String>) {
        let runs = self
            .points
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                let dir_name = p.variation.dir_name();
                (0..p.runs.len() as u32)
                    .map(move |t| self.layout.run_dir(&self.base, i, &dir_name, t))
            })
            .collect();
        let text = crate::report::SweepText {
            tables,
            model: self.model.clone(),
            command: self.command.clone(),
            runs,
            succeeded,
        };
        crate::report::write_sweep_or_warn(&self.base, &text);
    }
}

/// `concurrency=8, rate=2.5`: a search point for the log.
fn variation_text(v: &Variation) -> String {
    v.values
        .iter()
        .map(|(p, x)| format!("{}={}", lists::leaf(p), lists::python_str(x)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The command line at both ends of the search box is checked before the first request, so
/// a bound the flag does not take fails now, not mid-search.
fn check_search_bounds(
    first: &[String],
    dims: &[crate::config::adaptive::Dim],
) -> Result<(), ProfileError> {
    for end in [0, 1] {
        let mut argv = first.to_vec();
        for d in dims {
            let v = if end == 0 { d.lo } else { d.hi };
            let text = match d.int {
                true => format!("{}", v.round() as i64),
                false => lists::python_str(&Value::from(v)),
            };
            argv.extend([d.flag.clone(), text]);
        }
        let at_end = |e: ConfigError| {
            let which = ["lower", "upper"][end];
            ConfigError(format!("--search-space: at the box's {which} end: {}", e.0))
        };
        profile::run_files(&parse_point(&argv).map_err(at_end)?).map_err(at_end)?;
    }
    Ok(())
}

/// Parses one point's command line (the same flags with one value per list).
fn parse_point(argv: &[String]) -> Result<ProfileArgs, ConfigError> {
    match Cli::parse_with_sources(argv) {
        Ok(Cli {
            command: Command::Profile(args),
        }) => Ok(*args),
        Ok(_) => Err(ConfigError("expected `aiperf profile`".into())),
        Err(e) => Err(ConfigError(
            e.render()
                .to_string()
                .trim()
                .trim_start_matches("error: ")
                .to_string(),
        )),
    }
}

/// Runs after the first of a point skip the warmup (`--profile-run-disable-warmup-after-first`).
fn drop_warmup(args: &mut ProfileArgs) {
    args.warmup_request_count = 0;
    args.warmup_duration = None;
    args.num_warmup_sessions = None;
    args.warmup_grace_period = None;
    args.warmup_concurrency = None;
    args.warmup_request_rate = None;
    args.warmup_arrival_pattern = None;
    args.load.warmup_prefill_concurrency = None;
}

fn values_json(v: &Variation) -> Value {
    Value::Object(v.owned_values().into_iter().collect())
}

/// Sleeps for `pause`; a Ctrl-C (or SIGTERM) cuts it short and is returned.
fn sleep_unless_interrupted(pause: Duration) -> Option<Outcome> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            tokio::time::sleep(pause).await;
            return None;
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => None,
            _ = int.recv() => Some(Outcome::Interrupted),
            _ = term.recv() => Some(Outcome::Terminated),
        }
    })
}
