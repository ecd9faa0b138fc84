//! The `coding` prompt corpus: generated source code, shell sessions, JSON bodies, diffs,
//! tracebacks and coding requests, in the spirit of AIPerf's coding content generator (our
//! own templates and vocabulary).
//!
//! The corpus is generated once per process from a fixed seed, so it is the same text in
//! every run, like the bundled Shakespeare; prompts are then cut from it by the same
//! token-exact windowing (`PromptBuilder`), which `--random-seed` makes reproducible.

use std::sync::OnceLock;

use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

/// Blocks in the corpus: about 600 KB of text, far more than a prompt window.
const BLOCKS: usize = 1500;
const SEED: u64 = 0x636f_6469_6e67;

const MODULES: &[&str] = &[
    "auth",
    "billing",
    "cache",
    "catalog",
    "checkout",
    "config",
    "crawler",
    "db",
    "events",
    "export",
    "gateway",
    "index",
    "ingest",
    "inventory",
    "jobs",
    "ledger",
    "mailer",
    "metrics",
    "notify",
    "orders",
    "parser",
    "payments",
    "planner",
    "queue",
    "ranker",
    "render",
    "reports",
    "scheduler",
    "search",
    "session",
    "storage",
    "sync",
    "tenant",
    "tracing",
    "upload",
    "users",
];
const TYPES: &[&str] = &[
    "Account", "Batch", "Cursor", "Document", "Invoice", "Job", "Lease", "Manifest", "Order",
    "Page", "Payload", "Quota", "Record", "Replica", "Report", "Segment", "Snapshot", "Span",
    "Ticket", "Token", "Upload", "Webhook", "Window", "Worker",
];
const VERBS: &[&str] = &[
    "apply",
    "build",
    "cancel",
    "collect",
    "commit",
    "compact",
    "decode",
    "drain",
    "encode",
    "evict",
    "fetch",
    "flush",
    "index",
    "load",
    "merge",
    "normalize",
    "parse",
    "prune",
    "publish",
    "refresh",
    "render",
    "resolve",
    "retry",
    "route",
    "sample",
    "schedule",
    "split",
    "store",
    "submit",
    "sync",
    "validate",
    "verify",
];
const FIELDS: &[&str] = &[
    "attempts",
    "batch_size",
    "created_at",
    "deadline",
    "digest",
    "etag",
    "expires_at",
    "id",
    "limit",
    "offset",
    "owner_id",
    "page_token",
    "priority",
    "region",
    "retries",
    "shard",
    "size_bytes",
    "state",
    "tenant_id",
    "timeout_ms",
    "updated_at",
    "version",
    "weight",
];
const ERRORS: &[&str] = &[
    "connection reset by peer",
    "deadline exceeded",
    "duplicate key value violates unique constraint",
    "index out of range",
    "invalid UTF-8 sequence",
    "lock wait timeout",
    "no such file or directory",
    "permission denied",
    "unexpected end of JSON input",
    "too many open files",
    "value is not a valid integer",
    "certificate has expired",
];
const COMMANDS: &[&str] = &[
    "cargo test --workspace",
    "go test ./...",
    "pytest -q tests/",
    "npm run lint",
    "git status --short",
    "git log --oneline -5",
    "docker compose ps",
    "kubectl get pods -n staging",
    "make build",
    "ls -la src/",
    "grep -rn TODO src/",
    "du -sh target/",
];
const ASKS: &[&str] = &[
    "Can you find out why",
    "Please refactor",
    "Write a unit test for",
    "Explain what happens in",
    "Add retries with backoff to",
    "Make this faster:",
    "Fix the race condition in",
    "Add logging around",
];

struct Gen {
    rng: ChaCha8Rng,
}

impl Gen {
    fn pick(&mut self, list: &[&'static str]) -> &'static str {
        list.choose(&mut self.rng).expect("lists are not empty")
    }

    fn num(&mut self, lo: u32, hi: u32) -> u32 {
        self.rng.random_range(lo..=hi)
    }

    fn snake(&mut self) -> String {
        format!("{}_{}", self.pick(VERBS), self.pick(FIELDS))
    }

    fn python(&mut self) -> String {
        let (m, t, f) = (self.pick(MODULES), self.pick(TYPES), self.snake());
        let (a, b) = (self.pick(FIELDS), self.pick(FIELDS));
        let err = self.pick(ERRORS);
        let n = self.num(2, 64);
        format!(
            "from {m}.models import {t}\nimport logging\n\nlog = logging.getLogger(__name__)\n\n\ndef {f}(item: {t}, {a}: int = {n}) -> dict:\n    \"\"\"Return the {b} of a {t} after checking {a}.\"\"\"\n    if item.{a} > {a}:\n        log.warning(\"{err}: %s\", item.id)\n        raise ValueError(\"{err}\")\n    result = {{\"{a}\": item.{a}, \"{b}\": item.{b}}}\n    for key, value in sorted(result.items()):\n        log.debug(\"%s=%r\", key, value)\n    return result\n"
        )
    }

    fn rust(&mut self) -> String {
        let (t, v, f) = (self.pick(TYPES), self.pick(VERBS), self.pick(FIELDS));
        let g = self.pick(FIELDS);
        let n = self.num(1, 512);
        format!(
            "use std::collections::HashMap;\n\n#[derive(Debug, Clone, PartialEq)]\npub struct {t} {{\n    pub {f}: u64,\n    pub {g}: Option<String>,\n}}\n\nimpl {t} {{\n    pub fn {v}(&mut self, limit: u64) -> Result<u64, String> {{\n        if self.{f} > limit {{\n            return Err(format!(\"{f} {{}} over {{limit}}\", self.{f}));\n        }}\n        self.{f} += {n};\n        Ok(self.{f})\n    }}\n}}\n\nfn index(items: &[{t}]) -> HashMap<u64, usize> {{\n    items.iter().enumerate().map(|(i, x)| (x.{f}, i)).collect()\n}}\n"
        )
    }

    fn go(&mut self) -> String {
        let (t, v, m) = (self.pick(TYPES), self.pick(VERBS), self.pick(MODULES));
        let err = self.pick(ERRORS);
        let n = self.num(1, 30);
        let verb = capitalize(v);
        format!(
            "package {m}\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"time\"\n)\n\nfunc (s *Service) {verb}{t}(ctx context.Context, id string) (*{t}, error) {{\n\tctx, cancel := context.WithTimeout(ctx, {n}*time.Second)\n\tdefer cancel()\n\titem, err := s.store.Get(ctx, id)\n\tif err != nil {{\n\t\treturn nil, fmt.Errorf(\"{v} {t} %s: %w\", id, err)\n\t}}\n\tif item == nil {{\n\t\treturn nil, fmt.Errorf(\"{err}\")\n\t}}\n\treturn item, nil\n}}\n"
        )
    }

    fn typescript(&mut self) -> String {
        let (t, v, a) = (self.pick(TYPES), self.pick(VERBS), self.pick(FIELDS));
        let m = self.pick(MODULES);
        format!(
            "import {{ api }} from \"../{m}/client\";\n\nexport interface {t} {{\n  id: string;\n  {a}: number;\n  tags?: string[];\n}}\n\nexport async function {v}{t}(id: string): Promise<{t} | undefined> {{\n  const res = await api.get<{t}>(`/{m}/${{id}}`);\n  if (res.status !== 200) {{\n    console.error(`{v} failed: ${{res.status}}`);\n    return undefined;\n  }}\n  return {{ ...res.data, {a}: Number(res.data.{a}) }};\n}}\n"
        )
    }

    fn shell(&mut self) -> String {
        let cmd = self.pick(COMMANDS);
        let mut out = format!("$ {cmd}\n");
        for _ in 0..self.num(2, 6) {
            let line = match self.num(0, 3) {
                0 => format!("test {}::{} ... ok", self.pick(MODULES), self.snake()),
                1 => format!(" M src/{}/{}.rs", self.pick(MODULES), self.pick(VERBS)),
                2 => format!(
                    "{}-{:x}   1/1   Running   {}   {}m",
                    self.pick(MODULES),
                    self.num(0x1000, 0xffff),
                    self.num(0, 4),
                    self.num(1, 59)
                ),
                _ => format!("{:>6} {}", self.num(10, 99_999), self.pick(MODULES)),
            };
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    fn json(&mut self) -> String {
        let t = self.pick(TYPES).to_lowercase();
        let (a, b) = (self.pick(FIELDS), self.pick(FIELDS));
        let (x, y) = (self.num(0, 10_000), self.num(0, 99));
        let state = ["pending", "running", "done", "failed"][self.num(0, 3) as usize];
        format!(
            "{{\n  \"object\": \"{t}\",\n  \"id\": \"{t}_{x:05}\",\n  \"{a}\": {x},\n  \"{b}\": {y},\n  \"state\": \"{state}\",\n  \"labels\": [\"{}\", \"{}\"],\n  \"next\": null\n}}\n",
            self.pick(MODULES),
            self.pick(MODULES)
        )
    }

    fn diff(&mut self) -> String {
        let (m, v) = (self.pick(MODULES), self.pick(VERBS));
        let (old, new) = (self.num(1, 50), self.num(51, 500));
        let f = self.pick(FIELDS);
        let line = self.num(10, 400);
        format!(
            "diff --git a/src/{m}/{v}.py b/src/{m}/{v}.py\n--- a/src/{m}/{v}.py\n+++ b/src/{m}/{v}.py\n@@ -{line},6 +{line},7 @@ def {v}(self, {f}):\n-    {f} = min({f}, {old})\n+    {f} = min({f}, {new})\n+    self.log.info(\"{v} %d\", {f})\n     return self.client.{v}({f}={f})\n"
        )
    }

    fn traceback(&mut self) -> String {
        let (m, v) = (self.pick(MODULES), self.pick(VERBS));
        let err = self.pick(ERRORS);
        let (l1, l2) = (self.num(10, 300), self.num(10, 300));
        format!(
            "Traceback (most recent call last):\n  File \"src/{m}/service.py\", line {l1}, in {v}\n    return self._{v}(request)\n  File \"src/{m}/store.py\", line {l2}, in _{v}\n    raise {}Error(\"{err}\")\n{}Error: {err}\n",
            capitalize(m),
            capitalize(m)
        )
    }

    fn sql(&mut self) -> String {
        let m = self.pick(MODULES);
        let (a, b) = (self.pick(FIELDS), self.pick(FIELDS));
        let n = self.num(10, 1000);
        format!(
            "SELECT {a}, COUNT(*) AS n, MAX({b}) AS last_{b}\nFROM {m}\nWHERE {a} IS NOT NULL AND {b} > {n}\nGROUP BY {a}\nORDER BY n DESC\nLIMIT 50;\n"
        )
    }

    fn request(&mut self) -> String {
        let ask = self.pick(ASKS);
        let (t, v, m) = (self.pick(TYPES), self.pick(VERBS), self.pick(MODULES));
        format!(
            "{ask} `{t}::{v}` in the {m} module? It fails when {} is {} and the tests in tests/{m}_test do not cover it.\n",
            self.pick(FIELDS),
            self.num(0, 100)
        )
    }

    fn block(&mut self) -> String {
        match self.num(0, 9) {
            0 => self.python(),
            1 => self.rust(),
            2 => self.go(),
            3 => self.typescript(),
            4 => self.shell(),
            5 => self.json(),
            6 => self.diff(),
            7 => self.traceback(),
            8 => self.sql(),
            _ => self.request(),
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The coding corpus text (generated on first use).
pub fn corpus() -> &'static str {
    static CORPUS: OnceLock<String> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut g = Gen {
            rng: ChaCha8Rng::seed_from_u64(SEED),
        };
        let blocks: Vec<String> = (0..BLOCKS).map(|_| g.block()).collect();
        blocks.join("\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_mixes_code_shell_json_and_diffs() {
        let c = corpus();
        assert!(c.len() > 300_000, "{}", c.len());
        for needle in [
            "def ",
            "pub fn ",
            "func (s *Service)",
            "export async function",
            "$ ",
            "\"object\":",
            "diff --git",
            "Traceback",
            "SELECT ",
        ] {
            assert!(c.contains(needle), "{needle}");
        }
        // Generated once, the same text every time.
        assert!(std::ptr::eq(c, corpus()));
    }
}
