//! A public dataset's files in the Hugging Face hub cache (`$HF_HOME/hub/datasets--<org>--
//! <name>/snapshots/<commit>/...`, the layout huggingface_hub writes), fetched the first
//! time with the hub client the tokenizer download uses (hf-hub), never again after.

use std::path::PathBuf;

use crate::tokenizer::HubEnv;

/// The files of one dataset repository at one revision that a loader reads, in order:
/// the cached ones first (no network), then, when more rows are wanted and the hub may be
/// reached, the rest as listed by the hub, each downloaded when it is needed.
pub struct Files<'a> {
    env: &'a HubEnv,
    repo: &'a str,
    revision: &'a str,
    wanted: &'a dyn Fn(&str) -> bool,
    /// Already known: (path in the repository, local file).
    known: Vec<(String, Option<PathBuf>)>,
    listed: bool,
}

impl<'a> Files<'a> {
    /// The cached files of `repo` at `revision` that `wanted` accepts.
    pub fn new(
        env: &'a HubEnv,
        repo: &'a str,
        revision: &'a str,
        wanted: &'a dyn Fn(&str) -> bool,
    ) -> Files<'a> {
        let known = cached_files(env, repo, revision, wanted)
            .into_iter()
            .map(|(name, path)| (name, Some(path)))
            .collect();
        Files {
            env,
            repo,
            revision,
            wanted,
            known,
            listed: false,
        }
    }

    /// The cache directory of the repository (for messages).
    pub fn cache_dir(&self) -> PathBuf {
        repo_dir(self.env, self.repo)
    }

    /// The `i`-th file, downloaded if needed; None past the last one. The first call past
    /// the cached files asks the hub for the list (unless `HF_HUB_OFFLINE` is set).
    pub fn get(&mut self, i: usize) -> Result<Option<(String, PathBuf)>, String> {
        if i >= self.known.len() && !self.listed && !self.env.offline {
            self.listed = true;
            for name in list_remote(self.env, self.repo, self.revision)? {
                if (self.wanted)(&name) && !self.known.iter().any(|(k, _)| *k == name) {
                    self.known.push((name, None));
                }
            }
        }
        let Some((name, path)) = self.known.get_mut(i) else {
            return Ok(None);
        };
        if path.is_none() {
            *path = Some(download(self.env, self.repo, self.revision, name)?);
        }
        Ok(Some((name.clone(), path.clone().expect("set above"))))
    }

    /// True when nothing was found in the cache and the hub may not be asked.
    pub fn offline_and_missing(&self) -> bool {
        self.env.offline && self.known.is_empty()
    }
}

/// `<HF_HOME>/hub/datasets--<org>--<name>` (`HF_HUB_CACHE` in place of `<HF_HOME>/hub`).
pub fn repo_dir(env: &HubEnv, repo: &str) -> PathBuf {
    env.hub_dir()
        .join(format!("datasets--{}", repo.replace('/', "--")))
}

/// The cached snapshot of `revision`: the commit its ref names (a revision without a ref
/// file is taken as a commit hash itself).
fn snapshot_dir(env: &HubEnv, repo: &str, revision: &str) -> Option<PathBuf> {
    let dir = repo_dir(env, repo);
    let commit = match std::fs::read_to_string(dir.join("refs").join(revision)) {
        Ok(commit) => commit.trim().to_string(),
        Err(_) => revision.to_string(),
    };
    if commit.is_empty() || commit.contains(['/', '\\']) || commit.starts_with('.') {
        return None;
    }
    let snapshot = dir.join("snapshots").join(commit);
    snapshot.is_dir().then_some(snapshot)
}

/// The files under the cached snapshot that `wanted` accepts (by their path in the
/// repository, `/`-separated), sorted by that path.
fn cached_files(
    env: &HubEnv,
    repo: &str,
    revision: &str,
    wanted: &dyn Fn(&str) -> bool,
) -> Vec<(String, PathBuf)> {
    let Some(root) = snapshot_dir(env, repo, revision) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file()
                && let Ok(rel) = path.strip_prefix(&root)
            {
                let name = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                if wanted(&name) {
                    found.push((name, path));
                }
            }
        }
    }
    found.sort();
    found
}

#[cfg(feature = "hf-download")]
fn api(env: &HubEnv) -> Result<hf_hub::api::sync::Api, String> {
    let mut builder = hf_hub::api::sync::ApiBuilder::from_cache(hf_hub::Cache::new(env.hub_dir()))
        .with_progress(false);
    if let Ok(endpoint) = std::env::var("HF_ENDPOINT")
        && !endpoint.trim().is_empty()
    {
        builder = builder.with_endpoint(endpoint.trim().trim_end_matches('/').to_string());
    }
    if env.token.is_some() {
        builder = builder.with_token(env.token.clone());
    }
    builder
        .build()
        .map_err(|e| format!("cannot set up the Hugging Face hub client: {e}"))
}

#[cfg(feature = "hf-download")]
fn api_repo(
    env: &HubEnv,
    repo: &str,
    revision: &str,
) -> Result<hf_hub::api::sync::ApiRepo, String> {
    Ok(api(env)?.repo(hf_hub::Repo::with_revision(
        repo.to_string(),
        hf_hub::RepoType::Dataset,
        revision.to_string(),
    )))
}

/// The hub's list of the repository's files at `revision`.
#[cfg(feature = "hf-download")]
fn list_remote(env: &HubEnv, repo: &str, revision: &str) -> Result<Vec<String>, String> {
    let info = api_repo(env, repo, revision)?
        .info()
        .map_err(|e| hub_error(repo, revision, "cannot list the files of", &e.to_string()))?;
    Ok(info.siblings.into_iter().map(|s| s.rfilename).collect())
}

/// Downloads one file into the cache, with a progress line.
#[cfg(feature = "hf-download")]
fn download(env: &HubEnv, repo: &str, revision: &str, name: &str) -> Result<PathBuf, String> {
    tracing::info!("Downloading {name} of dataset {repo} (revision {revision})");
    let started = std::time::Instant::now();
    let path = api_repo(env, repo, revision)?
        .download_with_progress(name, DownloadBar::default())
        .map_err(|e| {
            hub_error(
                repo,
                revision,
                &format!("cannot download {name} of"),
                &e.to_string(),
            )
        })?;
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    tracing::info!(
        "Downloaded {name}: {:.1} MB in {:.1} s, cached at {}",
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        path.display()
    );
    Ok(path)
}

#[cfg(not(feature = "hf-download"))]
fn list_remote(_env: &HubEnv, repo: &str, _revision: &str) -> Result<Vec<String>, String> {
    Err(format!(
        "dataset {repo} is not in the Hugging Face cache and this build cannot download (built without the hf-download feature)"
    ))
}

#[cfg(not(feature = "hf-download"))]
fn download(_env: &HubEnv, repo: &str, _revision: &str, _name: &str) -> Result<PathBuf, String> {
    list_remote(_env, repo, _revision).map(|_| PathBuf::new())
}

fn hub_error(repo: &str, revision: &str, what: &str, why: &str) -> String {
    let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "{what} dataset {repo} (revision {revision}) from the Hugging Face hub: {why}; gated \
         datasets need HF_TOKEN and their terms accepted on the dataset's page"
    )
}

/// The download's progress line on stderr (hidden when stderr is not a terminal).
#[cfg(feature = "hf-download")]
#[derive(Default)]
struct DownloadBar(Option<indicatif::ProgressBar>);

#[cfg(feature = "hf-download")]
impl hf_hub::api::Progress for DownloadBar {
    fn init(&mut self, size: usize, filename: &str) {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(size as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        ) {
            bar.set_style(style);
        }
        bar.set_message(format!("Downloading {filename}"));
        self.0 = Some(bar);
    }

    fn update(&mut self, size: usize) {
        if let Some(bar) = &self.0 {
            bar.inc(size as u64);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}
