//! Tokenizers: a Hugging Face `tokenizer.json` (local, or from the hub through the standard
//! cache) or the builtin offline one (tiktoken's o200k_base, as in AIPerf).
//!
//! The builtin tokenizer is our own compact encoder (`bpe`): it encodes and decodes exactly
//! like tiktoken's o200k_base, builds in ~20 ms and takes ~10 MB resident. It is still
//! built on a background thread when `Tokenizer::builtin()` is called, so image encoding
//! overlaps with it; the first `encode`/`decode` blocks until it is ready.
//!
//! A byte-level BPE `tokenizer.json` (GPT-2, Qwen2/2.5/3, Llama 3, DeepSeek V3) is loaded
//! into our compact encoder too (`byte_level`, same ids as the `tokenizers` crate), from a
//! cached binary form after the first load (`cache`); anything else goes to the crate.

pub mod bpe;
pub mod byte_level;
pub mod cache;
pub mod chat_template;
pub mod hf_json;
pub mod token_index;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};

pub use bpe::Bpe;
pub use byte_level::ByteLevelBpe;
pub use chat_template::{ChatTemplate, ChatTemplateError};

/// Name reported for the embedded tokenizer.
pub const BUILTIN_NAME: &str = "builtin (o200k_base)";

/// A pre-token piece longer than this is merged a slice of this length at a time. Merging
/// holds about 40 bytes per byte of the piece, so one 20 MB "word" in a response (a server
/// repeating a character) took 800 MB; no word of real text comes near 64 KiB. The count of
/// such a piece may then differ from the reference by a token or so per slice.
pub const MAX_MERGE_PIECE: usize = 64 * 1024;

/// Model names that are obviously not hub ids; AIPerf switches them to `builtin` too.
const PLACEHOLDER_MODELS: [&str; 3] = ["mock-model", "test-model", "fake-model"];

/// How long a hub download may take before we give up and use the builtin tokenizer.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A tokenizer shared by the dataset builder and the response collector (`Send + Sync`).
pub struct Tokenizer {
    backend: Backend,
    name: String,
    /// The directory the tokenizer was read from, where its chat template may be too.
    dir: Option<PathBuf>,
    /// How a `tokenizer.json` was loaded, for the log: "compact byte-level BPE, 12 ms" or
    /// "tokenizers crate: <why not compact>".
    how: Option<String>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .finish()
    }
}

enum Backend {
    /// o200k_base, built once per process (see `builtin_bpe`).
    Builtin,
    /// A byte-level BPE `tokenizer.json` in our compact form.
    Compact(Box<ByteLevelBpe>),
    Hf(Box<tokenizers::Tokenizer>),
}

/// Starts building o200k_base on a background thread (once per process).
fn start_builtin_load() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("o200k-load".into())
            .spawn(|| {
                builtin_bpe();
            });
        // If no thread can be spawned the first use builds it instead.
        drop(spawned);
    });
}

/// The process-wide o200k_base encoder; built on first use, and blocks while another
/// thread is building it.
pub fn builtin_bpe() -> &'static Bpe {
    static BUILTIN: OnceLock<Bpe> = OnceLock::new();
    BUILTIN.get_or_init(bpe::o200k_base)
}

impl Tokenizer {
    /// The embedded o200k_base tokenizer (no network, no files).
    pub fn builtin() -> anyhow::Result<Tokenizer> {
        start_builtin_load();
        Ok(Tokenizer {
            backend: Backend::Builtin,
            name: BUILTIN_NAME.to_string(),
            dir: None,
            how: None,
        })
    }

    /// Loads a `tokenizer.json`, or the `tokenizer.json` inside a directory, caching its
    /// compact form in the default cache directory (`cache::default_dir`).
    pub fn from_file(path: &Path) -> anyhow::Result<Tokenizer> {
        Tokenizer::from_file_cached(path, cache::default_dir().as_deref())
    }

    /// `from_file` with the cache in `cache_dir` (None: no cache).
    pub fn from_file_cached(path: &Path, cache_dir: Option<&Path>) -> anyhow::Result<Tokenizer> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        let dir = file.parent().map(Path::to_path_buf);
        Tokenizer::load_json(&file, path.display().to_string(), dir, cache_dir)
    }

    /// Loads `file` into the compact encoder when it is a byte-level BPE we encode exactly,
    /// else with the `tokenizers` crate.
    fn load_json(
        file: &Path,
        name: String,
        dir: Option<PathBuf>,
        cache_dir: Option<&Path>,
    ) -> anyhow::Result<Tokenizer> {
        let started = Instant::now();
        let (backend, how) = match load_compact(file, cache_dir) {
            Ok((bpe, cached)) => {
                let how = format!(
                    "compact byte-level BPE{}, {} ms",
                    if cached { " from cache" } else { "" },
                    started.elapsed().as_millis()
                );
                (Backend::Compact(Box::new(bpe)), how)
            }
            Err(why) => {
                let inner = tokenizers::Tokenizer::from_file(file)
                    .map_err(|e| anyhow!("cannot load tokenizer from {}: {e}", file.display()))?;
                (
                    Backend::Hf(Box::new(inner)),
                    format!("tokenizers crate: {why}"),
                )
            }
        };
        Ok(Tokenizer {
            backend,
            name,
            dir,
            how: Some(how),
        })
    }

    fn from_hf(inner: tokenizers::Tokenizer, name: String, dir: Option<PathBuf>) -> Tokenizer {
        Tokenizer {
            backend: Backend::Hf(Box::new(inner)),
            name,
            dir,
            how: Some("tokenizers crate".into()),
        }
    }

    /// How the tokenizer was loaded (None for the builtin one): "compact byte-level BPE,
    /// 12 ms", "compact byte-level BPE from cache, 3 ms" or "tokenizers crate: <why>".
    pub fn how(&self) -> Option<&str> {
        self.how.as_deref()
    }

    /// True when a `tokenizer.json` was loaded into the compact byte-level encoder.
    pub fn is_compact(&self) -> bool {
        matches!(self.backend, Backend::Compact(_))
    }

    /// What was used: "builtin (o200k_base)", a hub id or a path.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The chat template shipped beside the tokenizer (local directory or cached hub
    /// snapshot), if any; the builtin tokenizer has none.
    pub fn chat_template(&self) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        match &self.dir {
            Some(dir) => ChatTemplate::from_dir(dir),
            None => Ok(None),
        }
    }

    /// True for the embedded o200k_base tokenizer.
    pub fn is_builtin(&self) -> bool {
        matches!(self.backend, Backend::Builtin)
    }

    /// Token ids of `text`, without special tokens (`add_special_tokens=False`).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match &self.backend {
            Backend::Builtin => builtin_bpe().encode_ordinary(text),
            Backend::Compact(bpe) => bpe.encode(text),
            Backend::Hf(t) => match t.encode_fast(text, false) {
                Ok(enc) => enc.get_ids().to_vec(),
                // Only fails for pathological inputs (e.g. truncation errors); count nothing.
                Err(_) => Vec::new(),
            },
        }
    }

    /// Text of `ids`. Special tokens are kept; ids the vocabulary does not know are skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.backend {
            Backend::Builtin => {
                let bytes = builtin_bpe().decode_bytes(ids);
                match String::from_utf8(bytes) {
                    Ok(text) => text,
                    Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                }
            }
            Backend::Compact(bpe) => String::from_utf8_lossy(&bpe.decode_bytes(ids)).into_owned(),
            Backend::Hf(t) => t.decode(ids, false).unwrap_or_default(),
        }
    }

    /// The vocabulary's ids without special and added tokens, ascending (what vLLM's
    /// random dataset draws from).
    pub fn ordinary_ids(&self) -> Vec<u32> {
        match &self.backend {
            Backend::Builtin => (0..builtin_bpe().len() as u32).collect(),
            Backend::Compact(bpe) => bpe.ordinary_ids(),
            Backend::Hf(t) => {
                let added = t.get_added_tokens_decoder();
                (0..t.get_vocab_size(false) as u32)
                    .filter(|id| !added.contains_key(id))
                    .collect()
            }
        }
    }

    /// Number of tokens in `text`; equal to `encode(text).len()`.
    pub fn count(&self, text: &str) -> usize {
        match &self.backend {
            Backend::Builtin => builtin_bpe().count_ordinary(text),
            _ => self.encode(text).len(),
        }
    }
}

/// The tokenizer a run uses, plus a warning to show when we fell back to `builtin`.
pub struct ResolvedTokenizer {
    pub tokenizer: Tokenizer,
    pub warning: Option<String>,
}

/// The Hugging Face hub settings `resolve` depends on, read once from the environment.
#[derive(Debug, Clone)]
pub struct HubEnv {
    /// `HF_HOME` (default `~/.cache/huggingface`); the cache is `<home>/hub`.
    pub home: PathBuf,
    /// `HF_HUB_CACHE`: the cache itself, in place of `<home>/hub`.
    pub hub_cache: Option<PathBuf>,
    /// `HF_TOKEN`, sent with downloads.
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE` is set to a true value: never touch the network.
    pub offline: bool,
    pub download_timeout: Duration,
}

impl HubEnv {
    pub fn from_process_env() -> HubEnv {
        let home = match std::env::var_os("HF_HOME") {
            Some(home) if !home.is_empty() => PathBuf::from(home),
            _ => {
                let user_home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_default();
                user_home.join(".cache").join("huggingface")
            }
        };
        let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
        let offline = std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| is_truthy(&v));
        let hub_cache = std::env::var_os("HF_HUB_CACHE")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from);
        HubEnv {
            home,
            hub_cache,
            token,
            offline,
            download_timeout: DOWNLOAD_TIMEOUT,
        }
    }

    /// The hub cache: `HF_HUB_CACHE`, else `<HF_HOME>/hub`.
    pub fn hub_dir(&self) -> PathBuf {
        self.hub_cache
            .clone()
            .unwrap_or_else(|| self.home.join("hub"))
    }

    /// `tokenizer.json` of `repo_id` at `revision` if the hub cache already holds it.
    /// Layout: `<home>/hub/models--{org}--{name}/{refs/REV, snapshots/<commit>/tokenizer.json}`;
    /// a revision that is itself a commit hash has no ref file.
    pub fn cached_tokenizer(&self, repo_id: &str, revision: &str) -> Option<PathBuf> {
        let repo_dir = self
            .hub_dir()
            .join(format!("models--{}", repo_id.replace('/', "--")));
        let commit = match std::fs::read_to_string(repo_dir.join("refs").join(revision)) {
            Ok(commit) => commit.trim().to_string(),
            Err(_) => revision.to_string(),
        };
        if commit.is_empty() || commit.contains(['/', '\\']) || commit.starts_with('.') {
            return None;
        }
        let file = repo_dir
            .join("snapshots")
            .join(commit)
            .join("tokenizer.json");
        file.is_file().then_some(file)
    }
}

fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// Resolves `--tokenizer SPEC` with `--tokenizer-revision REV`.
pub fn resolve(spec: &str, revision: &str) -> anyhow::Result<ResolvedTokenizer> {
    resolve_with(spec, revision, &HubEnv::from_process_env())
}

/// `resolve` with the hub settings given explicitly. Order: `builtin`; placeholder model names;
/// an existing local path (errors are fatal); a cached hub snapshot; offline fallback;
/// download with a timeout, falling back to `builtin` on any failure.
///
/// The download itself goes through `tokenizers::Tokenizer::from_pretrained`, which reads
/// `HF_HOME` and `HF_ENDPOINT` from the process environment; `env.home` drives the cache lookup.
pub fn resolve_with(spec: &str, revision: &str, env: &HubEnv) -> anyhow::Result<ResolvedTokenizer> {
    let spec = spec.trim();
    let revision = if revision.trim().is_empty() {
        "main"
    } else {
        revision.trim()
    };
    if spec.is_empty() || spec.eq_ignore_ascii_case("builtin") {
        return Ok(ResolvedTokenizer {
            tokenizer: Tokenizer::builtin()?,
            warning: None,
        });
    }
    if PLACEHOLDER_MODELS
        .iter()
        .any(|p| spec.eq_ignore_ascii_case(p))
    {
        return fallback(format!(
            "'{spec}' is a placeholder model name, not a tokenizer; using the builtin \
             o200k_base tokenizer (pass --tokenizer to choose one)"
        ));
    }

    let path = Path::new(spec);
    if path.exists() {
        let tokenizer = Tokenizer::from_file(path)
            .with_context(|| format!("--tokenizer {spec}: cannot use local tokenizer"))?;
        return Ok(ResolvedTokenizer {
            tokenizer,
            warning: None,
        });
    }
    if looks_like_path(spec) {
        anyhow::bail!("--tokenizer {spec}: no such file or directory");
    }

    if let Some(file) = env.cached_tokenizer(spec, revision)
        && let Ok(tokenizer) = Tokenizer::load_json(
            &file,
            spec.to_string(),
            file.parent().map(Into::into),
            cache::default_dir().as_deref(),
        )
    {
        return Ok(ResolvedTokenizer {
            tokenizer,
            warning: None,
        });
    }
    if env.offline {
        return fallback(download_warning(
            spec,
            "HF_HUB_OFFLINE is set and it is not in the local cache",
        ));
    }
    match download(spec, revision, env) {
        Ok(inner) => Ok(ResolvedTokenizer {
            // Only tokenizer.json is downloaded: no chat template.
            tokenizer: Tokenizer::from_hf(inner, spec.to_string(), None),
            warning: None,
        }),
        Err(reason) => fallback(download_warning(spec, &reason)),
    }
}

/// Loads `file` as a compact byte-level BPE: from its cache entry when there is a good one,
/// else from the JSON (then writes the entry). Gives whether the cache was used, or why the
/// file is not one we load (the crate loads it then; it reports malformed files itself).
fn load_compact(file: &Path, cache_dir: Option<&Path>) -> Result<(ByteLevelBpe, bool), String> {
    let cache_file = cache_dir
        .zip(cache::Key::of(file).ok())
        .map(|(dir, key)| (key.file_in(dir), key));
    if let Some((path, key)) = &cache_file
        && let Ok(bytes) = std::fs::read(path)
    {
        let loaded = cache::decode(key, &bytes)
            .and_then(|spec| ByteLevelBpe::new(spec).map_err(|e| e.to_string()));
        match loaded {
            Ok(bpe) => return Ok((bpe, true)),
            Err(why) => tracing::warn!(
                "tokenizer cache {} is unusable ({why}); rebuilding it from {}",
                path.display(),
                file.display()
            ),
        }
    }
    let json = std::fs::read(file).map_err(|e| format!("cannot read it: {e}"))?;
    let spec = hf_json::parse(&json).map_err(|e| e.to_string())?;
    drop(json);
    let bytes = cache_file
        .as_ref()
        .map(|(_, key)| cache::encode(key, &spec));
    let bpe = ByteLevelBpe::new(spec).map_err(|e| e.to_string())?;
    if let (Some((path, _)), Some(bytes)) = (&cache_file, bytes)
        && let Err(e) = cache::write_atomic(path, &bytes)
    {
        tracing::debug!("cannot write tokenizer cache {}: {e}", path.display());
    }
    release_freed_heap();
    Ok((bpe, false))
}

/// Hands the heap the JSON parse freed back to the system. glibc raises its mmap threshold
/// once the 11 MB file buffer is freed, so the parse's later buffers come from the heap and
/// stay resident after they are freed (Qwen2: ~5 MB more than a load from the cache).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_freed_heap() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: malloc_trim only returns free memory at the heap's top and in free pages to
    // the system; it takes the allocator's own locks.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_freed_heap() {}

/// A spec no hub id can take: absolute or relative paths and `.json` files.
fn looks_like_path(spec: &str) -> bool {
    spec.starts_with(['/', '.', '~', '\\'])
        || spec.ends_with(".json")
        || spec.matches('/').count() > 1
}

fn fallback(warning: String) -> anyhow::Result<ResolvedTokenizer> {
    Ok(ResolvedTokenizer {
        tokenizer: Tokenizer::builtin()?,
        warning: Some(warning),
    })
}

fn download_warning(spec: &str, reason: &str) -> String {
    format!(
        "could not download tokenizer '{spec}' ({reason}); using the builtin o200k_base \
         tokenizer: token counts are approximate for this model"
    )
}

/// Downloads (or finds in the `HF_HOME` cache) and loads `repo_id`'s tokenizer.json on a separate
/// thread so a stalled connection cannot hold the run longer than `env.download_timeout`.
fn download(repo_id: &str, revision: &str, env: &HubEnv) -> Result<tokenizers::Tokenizer, String> {
    #[cfg(feature = "hf-download")]
    {
        let (tx, rx) = mpsc::channel();
        let params = tokenizers::FromPretrainedParameters {
            revision: revision.to_string(),
            token: env.token.clone(),
            ..Default::default()
        };
        let id = repo_id.to_string();
        std::thread::Builder::new()
            .name("tokenizer-download".into())
            .spawn(move || {
                let result = tokenizers::Tokenizer::from_pretrained(&id, Some(params))
                    .map_err(|e| one_line(&e.to_string()));
                // The receiver may have timed out and gone; nothing to do then.
                let _ = tx.send(result);
            })
            .map_err(|e| format!("cannot start download thread: {e}"))?;
        match rx.recv_timeout(env.download_timeout) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "timed out after {} s",
                env.download_timeout.as_secs_f64()
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err("download thread stopped without a result".into())
            }
        }
    }
    #[cfg(not(feature = "hf-download"))]
    {
        let _ = (repo_id, revision, env, mpsc::channel::<()>);
        Err("this build cannot download from the Hugging Face hub".into())
    }
}

/// Error chains from ureq/hf-hub can span lines; a warning should not.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn fixture_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2")
    }

    fn hub_env(home: &Path, offline: bool) -> HubEnv {
        HubEnv {
            home: home.to_path_buf(),
            hub_cache: None,
            token: None,
            offline,
            download_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn builtin_encodes_like_o200k() {
        let t = Tokenizer::builtin().unwrap();
        assert_eq!(t.name(), "builtin (o200k_base)");
        assert!(t.is_builtin());
        let ids = t.encode("Hello world");
        // o200k_base ids for "Hello" and " world".
        assert_eq!(ids, vec![13225, 2375]);
        assert_eq!(t.decode(&ids), "Hello world");
        assert_eq!(t.count("Hello world"), 2);
    }

    #[test]
    fn builtin_does_not_add_or_parse_special_tokens() {
        let t = Tokenizer::builtin().unwrap();
        // The special token's text is encoded as ordinary text, never as id 199999.
        let ids = t.encode("<|endoftext|>");
        assert!(!ids.contains(&199999));
        assert!(ids.len() > 1);
        assert_eq!(t.encode(""), Vec::<u32>::new());
    }

    #[test]
    fn builtin_decode_skips_unknown_ids() {
        let t = Tokenizer::builtin().unwrap();
        let mut ids = t.encode("Hello world");
        ids.insert(1, u32::MAX);
        assert_eq!(t.decode(&ids), "Hello world");
    }

    #[test]
    fn gpt2_fixture_gives_known_ids() {
        let t = Tokenizer::from_file(&fixture_dir()).unwrap();
        assert!(!t.is_builtin());
        let text = "Hello world, this is GPT-2!";
        let ids = t.encode(text);
        assert_eq!(ids, vec![15496, 995, 11, 428, 318, 402, 11571, 12, 17, 0]);
        assert_eq!(t.decode(&ids), text);
        assert_eq!(t.count(text), 10);
    }

    #[test]
    fn from_file_accepts_file_or_directory() {
        let dir = Tokenizer::from_file(&fixture_dir()).unwrap();
        let file = Tokenizer::from_file(&fixture_dir().join("tokenizer.json")).unwrap();
        assert_eq!(dir.encode("To be or not"), file.encode("To be or not"));
        assert!(file.name().ends_with("tokenizer.json"));
    }

    #[test]
    fn resolve_builtin_and_placeholders() {
        let home = tempfile::tempdir().unwrap();
        let env = hub_env(home.path(), false);
        let r = resolve_with("builtin", "main", &env).unwrap();
        assert!(r.tokenizer.is_builtin());
        assert!(r.warning.is_none());

        let r = resolve_with("mock-model", "main", &env).unwrap();
        assert!(r.tokenizer.is_builtin());
        let warning = r.warning.unwrap();
        assert!(warning.contains("mock-model"), "{warning}");
    }

    #[test]
    fn resolve_local_path_and_unreadable_path() {
        let home = tempfile::tempdir().unwrap();
        let env = hub_env(home.path(), false);
        let dir = fixture_dir();
        let r = resolve_with(dir.to_str().unwrap(), "main", &env).unwrap();
        assert!(!r.tokenizer.is_builtin());
        assert!(r.warning.is_none());

        // An existing but broken file is a hard error naming the path, no fallback.
        let broken = home.path().join("tokenizer.json");
        std::fs::write(&broken, "{ not json").unwrap();
        let err = resolve_with(broken.to_str().unwrap(), "main", &env)
            .err()
            .expect("broken tokenizer.json must fail");
        assert!(
            format!("{err:#}").contains(broken.to_str().unwrap()),
            "{err:#}"
        );

        // A directory without tokenizer.json is an error too.
        let empty = tempfile::tempdir().unwrap();
        assert!(resolve_with(empty.path().to_str().unwrap(), "main", &env).is_err());

        // A missing path is not mistaken for a hub id.
        let missing = home.path().join("nope/tokenizer.json");
        let err = resolve_with(missing.to_str().unwrap(), "main", &env)
            .err()
            .expect("missing path must fail");
        assert!(format!("{err:#}").contains("no such file"), "{err:#}");
    }

    /// Lays out a hub cache entry the way huggingface_hub and hf-hub write it.
    fn write_snapshot(home: &Path, repo_id: &str, revision: &str, commit: &str) {
        let repo = home
            .join("hub")
            .join(format!("models--{}", repo_id.replace('/', "--")));
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs").join(revision), commit).unwrap();
        let snapshot = repo.join("snapshots").join(commit);
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::copy(
            fixture_dir().join("tokenizer.json"),
            snapshot.join("tokenizer.json"),
        )
        .unwrap();
    }

    #[test]
    fn resolve_uses_cached_snapshot_without_network() {
        let home = tempfile::tempdir().unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        write_snapshot(home.path(), "example-org/tiny-gpt2", "main", commit);
        // Offline: only the cache can satisfy this.
        let env = hub_env(home.path(), true);
        let r = resolve_with("example-org/tiny-gpt2", "main", &env).unwrap();
        assert!(r.warning.is_none(), "{:?}", r.warning);
        assert_eq!(r.tokenizer.name(), "example-org/tiny-gpt2");
        assert_eq!(r.tokenizer.encode("Hello world"), vec![15496, 995]);

        // A commit hash as revision finds the snapshot without a ref file.
        let r = resolve_with("example-org/tiny-gpt2", commit, &env).unwrap();
        assert!(!r.tokenizer.is_builtin());

        // Another revision is not cached: offline falls back with a warning.
        let r = resolve_with("example-org/tiny-gpt2", "v2", &env).unwrap();
        assert!(r.tokenizer.is_builtin());
        let warning = r.warning.unwrap();
        assert!(warning.contains("'example-org/tiny-gpt2'"), "{warning}");
        assert!(warning.contains("HF_HUB_OFFLINE"), "{warning}");
    }

    #[test]
    fn chat_template_is_read_beside_the_tokenizer() {
        let config = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/qwen2-vl/tokenizer_config.json");
        let has_template = |t: &Tokenizer| t.chat_template().unwrap().is_some();
        assert!(!has_template(&Tokenizer::builtin().unwrap()));
        assert!(!has_template(
            &Tokenizer::from_file(&fixture_dir()).unwrap()
        ));

        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            fixture_dir().join("tokenizer.json"),
            dir.path().join("tokenizer.json"),
        )
        .unwrap();
        std::fs::copy(&config, dir.path().join("tokenizer_config.json")).unwrap();
        assert!(has_template(&Tokenizer::from_file(dir.path()).unwrap()));
        let file = dir.path().join("tokenizer.json");
        assert!(has_template(&Tokenizer::from_file(&file).unwrap()));

        // A cached hub snapshot keeps its tokenizer_config.json beside tokenizer.json.
        let home = tempfile::tempdir().unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        write_snapshot(home.path(), "example-org/tiny-vl", "main", commit);
        let snapshot = home
            .path()
            .join("hub/models--example-org--tiny-vl/snapshots")
            .join(commit);
        std::fs::copy(&config, snapshot.join("tokenizer_config.json")).unwrap();
        let r = resolve_with("example-org/tiny-vl", "main", &hub_env(home.path(), true)).unwrap();
        assert!(has_template(&r.tokenizer));
    }

    #[test]
    fn resolve_unknown_hub_id_falls_back_quickly() {
        let home = tempfile::tempdir().unwrap();
        let env = hub_env(home.path(), false);
        let started = Instant::now();
        let r = resolve_with("example-org/no-such-model-xyz", "main", &env).unwrap();
        let elapsed = started.elapsed();
        assert!(r.tokenizer.is_builtin());
        let warning = r.warning.unwrap();
        assert!(
            warning.starts_with("could not download tokenizer 'example-org/no-such-model-xyz' ("),
            "{warning}"
        );
        assert!(warning.contains("using the builtin o200k_base tokenizer"));
        // The timeout is 5 s here; with no network (or a 404) it fails long before.
        assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
    }

    /// Serves one file the way the hub does for hf-hub: ranged GETs answered with
    /// `Content-Range`, `ETag` and `X-Repo-Commit`; anything else is a 404.
    fn serve_hub_file(url_path: String, body: Vec<u8>, commit: &'static str) -> u16 {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap();
                let mut range_start = 0usize;
                let mut range_end = body.len() - 1;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(range) = lower.strip_prefix("range: bytes=") {
                        let (a, b) = range.trim().split_once('-').unwrap();
                        range_start = a.parse().unwrap();
                        if !b.is_empty() {
                            range_end = b.parse::<usize>().unwrap().min(body.len() - 1);
                        }
                    }
                }
                let path = request_line.split_whitespace().nth(1).unwrap_or("");
                let response = if path == url_path {
                    let part = &body[range_start..=range_end];
                    let mut head = format!(
                        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\n\
                         Content-Range: bytes {range_start}-{range_end}/{}\r\n\
                         ETag: \"fixture-etag\"\r\nX-Repo-Commit: {commit}\r\n\
                         Connection: close\r\n\r\n",
                        part.len(),
                        body.len()
                    )
                    .into_bytes();
                    head.extend_from_slice(part);
                    head
                } else {
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_vec()
                };
                let _ = stream.write_all(&response);
            }
        });
        port
    }

    /// Downloads through `resolve` (reading `HF_HOME`/`HF_ENDPOINT` like a real run) from a
    /// local stand-in for the hub, in a child process so no test mutates this process's env.
    #[test]
    fn resolve_downloads_into_the_standard_cache() {
        let commit = "fedcba9876543210fedcba9876543210fedcba98";
        let body = std::fs::read(fixture_dir().join("tokenizer.json")).unwrap();
        let port = serve_hub_file(
            "/example-org/tiny-gpt2/resolve/main/tokenizer.json".into(),
            body.clone(),
            commit,
        );
        let home = tempfile::tempdir().unwrap();
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tokenizer::tests::download_child", "--ignored"])
            .env("AIPERF_TEST_DOWNLOAD_CHILD", "1")
            .env("HF_HOME", home.path())
            .env("HF_ENDPOINT", format!("http://127.0.0.1:{port}"))
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("HF_TOKEN")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&child.stdout);
        assert!(child.status.success(), "{output}");
        assert!(output.contains("1 passed"), "{output}");

        let repo = home.path().join("hub/models--example-org--tiny-gpt2");
        assert_eq!(
            std::fs::read_to_string(repo.join("refs/main")).unwrap(),
            commit
        );
        let cached = repo.join("snapshots").join(commit).join("tokenizer.json");
        assert_eq!(std::fs::read(&cached).unwrap(), body);
        // Later runs find it with no network at all.
        let r = resolve_with("example-org/tiny-gpt2", "main", &hub_env(home.path(), true)).unwrap();
        assert!(r.warning.is_none());
        assert_eq!(r.tokenizer.encode("Hello world"), vec![15496, 995]);
    }

    /// The child half of `resolve_downloads_into_the_standard_cache`.
    #[test]
    #[ignore = "run by resolve_downloads_into_the_standard_cache"]
    fn download_child() {
        if std::env::var_os("AIPERF_TEST_DOWNLOAD_CHILD").is_none() {
            return;
        }
        let r = resolve("example-org/tiny-gpt2", "main").unwrap();
        assert!(r.warning.is_none(), "{:?}", r.warning);
        assert_eq!(r.tokenizer.name(), "example-org/tiny-gpt2");
        assert_eq!(r.tokenizer.encode("Hello world"), vec![15496, 995]);
    }

    #[test]
    fn truthy_values() {
        for v in ["1", "true", "TRUE", "yes", " on "] {
            assert!(is_truthy(v), "{v}");
        }
        for v in ["", "0", "false", "no"] {
            assert!(!is_truthy(v), "{v}");
        }
    }

    /// Rebuilds `tests/fixtures/gpt2/tokenizer.json` from the GPT-2 vocabulary files that
    /// the tiktoken-rs crate ships (`assets/encoder.json`, `assets/vocab.bpe`):
    /// `GPT2_ASSETS=~/.cargo/registry/src/<index>/tiktoken-rs-0.12.1/assets
    ///  cargo test --lib regenerate_gpt2_fixture -- --ignored`
    #[test]
    #[ignore = "regenerates a committed fixture"]
    fn regenerate_gpt2_fixture() {
        use tokenizers::models::bpe::BPE;
        use tokenizers::pre_tokenizers::byte_level::ByteLevel;
        let Some(assets) = std::env::var_os("GPT2_ASSETS").map(PathBuf::from) else {
            eprintln!("set GPT2_ASSETS to tiktoken-rs's assets directory to regenerate");
            return;
        };
        let bpe = BPE::from_file(
            assets.join("encoder.json").to_str().unwrap(),
            assets.join("vocab.bpe").to_str().unwrap(),
        )
        .build()
        .unwrap();
        let byte_level = ByteLevel::new(false, true, true);
        let mut t = tokenizers::Tokenizer::new(bpe);
        t.with_pre_tokenizer(Some(byte_level))
            .with_decoder(Some(byte_level))
            .with_post_processor(Some(byte_level));
        t.add_special_tokens([tokenizers::AddedToken::from("<|endoftext|>", true)])
            .unwrap();
        t.save(fixture_dir().join("tokenizer.json"), false).unwrap();
    }

    #[test]
    fn tokenizer_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Tokenizer>();
    }
}
