//! Byte-level BPE `tokenizer.json` files load into the compact encoder and give the same ids
//! as the `tokenizers` crate. Each family's tokenizer is trained here with the crate's
//! `BpeTrainer` (its own pre-tokenizer regex, normalizer and special tokens) on a
//! multilingual corpus, saved, then loaded both ways.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use aiperf::api::Tokenizer;
use proptest::prelude::*;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::models::{ModelWrapper, TrainerWrapper};
use tokenizers::normalizers::{Lowercase, NFC, NormalizerWrapper};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior};

const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// DeepSeek V3 splits digits and CJK runs out before its main regex.
const DEEPSEEK_PATTERNS: [&str; 3] = [
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!-/:-~‘-‟　-。《》「」【】]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];

/// Training text: many scripts, emoji (with joiners and skin tones), code, numbers, runs
/// of spaces, tabs and newlines, contractions, combining marks.
fn corpus() -> String {
    let paragraphs = [
        "The quick brown fox jumps over the lazy dog. It's 12:45 and we've got 1,234,567 items; they'll ship on 2024-03-15.",
        "Don't panic!  I'M SURE YOU'RE RIGHT.   Tabs\there\tand\tthere.\n\nNew paragraph,\r\nwith CRLF.\n",
        "fn main() {\n    let xs: Vec<u64> = (0..100).map(|i| i * i).collect();\n    println!(\"{:?}\", xs);\n}\n",
        "def train(model, data, lr=3e-4):\n\tfor epoch in range(10):\n\t\tloss = model(data)  # forward\n\t\tloss.backward()\n",
        "日本語のテキストです。東京は大きな都市で、たくさんの人が住んでいます。カタカナとひらがな。",
        "中文文本：我们今天学习分词器。数字１２３和ＡＢＣ全角字符。北京欢迎你！",
        "한국어 문장입니다. 서울은 대한민국의 수도입니다.",
        "Русский текст: Привет, мир! Как дела? Ёлка и ещё.",
        "Ελληνικά: Γειά σου Κόσμε. العربية: مرحبا بالعالم. עברית: שלום עולם. हिन्दी: नमस्ते दुनिया।",
        "Emoji: 🎉🚀👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✨✨✨ 😀😃😄😁",
        "Accents: naïve café résumé Zürich Ångström façade coöperate; decomposed: cafe\u{301} re\u{301}sume\u{301}",
        "Numbers: 3.14159 2.71828 6.022e23 -42 +7 0x1F 0b1010 ١٢٣٤٥ ⅷ 1st 2nd 3rd 4th 100% $9.99 €5",
        "URLs https://example.com/a/b?c=d&e=f#g and <div class=\"x\">&amp;</div> and a@b.co",
        "Whitespace:    four spaces,        eight spaces, trailing   \n   leading, \u{a0}nbsp\u{3000}ideographic",
        "Mixed: hello世界 test123abc ABCdef camelCaseWord snake_case_word SCREAMING_CASE x86_64 GPT-4o",
    ];
    let mut text = String::new();
    for round in 0..6 {
        for (i, p) in paragraphs.iter().enumerate() {
            text.push_str(p);
            text.push_str(if (i + round) % 3 == 0 { "\n" } else { " " });
        }
    }
    text
}

/// Strings the ids are compared on, beyond the corpus lines.
const SAMPLES: &[&str] = &[
    "",
    " ",
    "\n",
    "   ",
    "\n\n\n",
    " \n \n ",
    "Hello world",
    "<|endoftext|>",
    "a<|endoftext|>b <|im_start|>user\nHi<|im_end|>\n",
    "<|im_start|><|im_start|><|endoftext|>",
    "<|im_start",
    "cafe\u{301} café CAFÉ",
    "unseen words: zyxwvut qqqq ÿþ",
    "\u{feff}BOM \u{200b}zero\u{200d}width \u{0} nul \u{7f} del",
    "e\u{301}\u{301} a\u{308}o\u{308} \u{300}\u{301}x",
    "I'm you're they've she'll he'd it's WE'RE THEY'VE I'M Don'T",
    "1 12 123 1234 12345 123456789",
    "x  y   z    \t\t w\r\n\r\n  v",
    "🎉🎉🎉🎉🎉🎉🎉🎉 👨‍👩‍👧‍👦👨‍👩‍👧‍👦",
    "한국어 日本語 中文 русский",
];

struct Family {
    name: &'static str,
    dir: PathBuf,
}

/// Trains a byte-level BPE with `pre` (and NFC when `nfc`), adds non-vocabulary special
/// tokens and a normalized added token, saves it to `dir/tokenizer.json`.
fn train(dir: &Path, pre: PreTokenizerWrapper, nfc: bool, ignore_merges: bool) {
    let specials = ["<|endoftext|>", "<|pad|>"];
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(1500)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(
            specials
                .iter()
                .map(|s| AddedToken::from(*s, true))
                .collect(),
        )
        .build()
        .into();
    let mut t = tokenizers::Tokenizer::new(ModelWrapper::BPE(BPE::default()));
    if nfc {
        t.with_normalizer(Some(NormalizerWrapper::from(NFC)))
            .unwrap();
    }
    t.with_pre_tokenizer(Some(pre))
        .with_decoder(Some(ByteLevel::new(false, false, false)));
    let text = corpus();
    t.train(&mut trainer, text.lines()).unwrap();
    t.add_special_tokens([
        AddedToken::from("<|im_start|>", true),
        AddedToken::from("<|im_end|>", true),
    ])
    .unwrap();
    // A non-special token matched after normalization.
    t.add_tokens([AddedToken::from("café", false)]).unwrap();
    let file = dir.join("tokenizer.json");
    t.save(&file, true).unwrap();
    if ignore_merges {
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        json["model"]["ignore_merges"] = true.into();
        std::fs::write(&file, serde_json::to_string(&json).unwrap()).unwrap();
    }
}

fn split(pattern: &str) -> PreTokenizerWrapper {
    Split::new(
        SplitPattern::Regex(pattern.into()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .unwrap()
    .into()
}

fn with_byte_level(mut steps: Vec<PreTokenizerWrapper>) -> PreTokenizerWrapper {
    steps.push(ByteLevel::new(false, false, false).into());
    Sequence::new(steps).into()
}

/// The trained families, once per test process (kept in a directory that lives as long).
fn families() -> &'static [Family] {
    static FAMILIES: OnceLock<(tempfile::TempDir, Vec<Family>)> = OnceLock::new();
    &FAMILIES
        .get_or_init(|| {
            let root = tempfile::tempdir().unwrap();
            let make = |name: &'static str, pre, nfc, ignore| {
                let dir = root.path().join(name);
                std::fs::create_dir_all(&dir).unwrap();
                train(&dir, pre, nfc, ignore);
                Family { name, dir }
            };
            let families = vec![
                make(
                    "gpt2",
                    ByteLevel::new(false, true, true).into(),
                    false,
                    false,
                ),
                make(
                    "qwen2",
                    with_byte_level(vec![split(QWEN2_PATTERN)]),
                    true,
                    false,
                ),
                make(
                    "llama3",
                    with_byte_level(vec![split(LLAMA3_PATTERN)]),
                    false,
                    true,
                ),
                make(
                    "deepseek",
                    with_byte_level(DEEPSEEK_PATTERNS.iter().map(|p| split(p)).collect()),
                    false,
                    false,
                ),
            ];
            (root, families)
        })
        .1
}

struct Pair {
    ours: Tokenizer,
    theirs: tokenizers::Tokenizer,
}

fn pairs() -> &'static [(String, Pair)] {
    static PAIRS: OnceLock<Vec<(String, Pair)>> = OnceLock::new();
    PAIRS.get_or_init(|| {
        families()
            .iter()
            .map(|f| {
                let ours = Tokenizer::from_file_cached(&f.dir, None).unwrap();
                assert!(ours.is_compact(), "{}: {:?}", f.name, ours.how());
                let theirs =
                    tokenizers::Tokenizer::from_file(f.dir.join("tokenizer.json")).unwrap();
                (f.name.to_string(), Pair { ours, theirs })
            })
            .collect()
    })
}

fn assert_same(text: &str) {
    for (name, p) in pairs() {
        let theirs = p.theirs.encode(text, false).unwrap().get_ids().to_vec();
        let ours = p.ours.encode(text);
        assert_eq!(ours, theirs, "{name}: ids differ for {text:?}");
        assert_eq!(
            p.ours.decode(&ours),
            p.theirs.decode(&theirs, false).unwrap(),
            "{name}: text differs for {text:?}"
        );
    }
}

#[test]
fn every_family_loads_compact_with_a_real_vocabulary() {
    for (name, p) in pairs() {
        let how = p.ours.how().unwrap();
        assert!(how.starts_with("compact byte-level BPE, "), "{name}: {how}");
        // The training made merges: common words are single tokens.
        let ids = p.ours.encode(" the");
        assert_eq!(ids.len(), 1, "{name}: {ids:?}");
        // Special tokens come out whole, with the crate's ids.
        let special = p.theirs.token_to_id("<|im_start|>").unwrap();
        assert_eq!(p.ours.encode("<|im_start|>"), vec![special], "{name}");
    }
    // The Llama 3 family is saved with `ignore_merges`, as Llama 3's file has it.
    let llama = families().iter().find(|f| f.name == "llama3").unwrap();
    let json = std::fs::read_to_string(llama.dir.join("tokenizer.json")).unwrap();
    assert!(
        json.contains("\"ignore_merges\":true"),
        "ignore_merges not set"
    );
}

#[test]
fn corpus_and_samples_encode_like_the_crate() {
    let text = corpus();
    assert_same(&text);
    for line in text.lines() {
        assert_same(line);
    }
    for sample in SAMPLES {
        assert_same(sample);
    }
    assert_same(&SAMPLES.concat());
    // Long pieces: one letter, one emoji, spaces.
    assert_same(&"a".repeat(700));
    assert_same(&"🎉".repeat(200));
    assert_same(&format!("{}x", " ".repeat(500)));
}

#[test]
fn nfc_normalization_is_honoured() {
    let by_name = |n: &str| &pairs().iter().find(|(name, _)| name == n).unwrap().1;
    // Qwen2 normalizes: decomposed and composed "é" give the same ids.
    let qwen = by_name("qwen2");
    assert_eq!(
        qwen.ours.encode("re\u{301}sume\u{301}"),
        qwen.ours.encode("résumé")
    );
    // The normalized added token matches its decomposed spelling too.
    let cafe = qwen.theirs.token_to_id("café").unwrap();
    assert_eq!(qwen.ours.encode("cafe\u{301}"), vec![cafe]);
    // GPT-2 has no normalizer: the two spellings differ.
    let gpt2 = by_name("gpt2");
    assert_ne!(
        gpt2.ours.encode("re\u{301}sume\u{301}"),
        gpt2.ours.encode("résumé")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_unicode_encodes_like_the_crate(text in any::<String>()) {
        assert_same(&text);
    }

    #[test]
    fn random_textlike_strings_encode_like_the_crate(
        text in "([A-Za-z]{1,12}|[0-9]{1,6}|[ \t\r\n]{1,4}|[.,;:!?'\"()/-]{1,3}|'(s|t|re|ve|m|ll|d|S|T|RE)|[éüñßçøÅ]|e\u{301}|[α-ω]{1,4}|[日本語中文東京]{1,3}|[ぁ-ゖ]{1,3}|🎉|👍🏽|<\\|im_start\\|>|<\\|endoftext\\|>|café){0,60}"
    ) {
        assert_same(&text);
    }
}

/// Writes a copy of the Qwen2-style tokenizer to a fresh directory (its own cache key).
fn qwen_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let qwen = families().iter().find(|f| f.name == "qwen2").unwrap();
    std::fs::copy(
        qwen.dir.join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    dir
}

fn cache_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[test]
fn the_compact_form_is_cached_and_a_damaged_cache_is_rebuilt() {
    let src = qwen_copy();
    let cache = tempfile::tempdir().unwrap();
    let text = corpus();
    let first = Tokenizer::from_file_cached(src.path(), Some(cache.path())).unwrap();
    assert!(
        !first.how().unwrap().contains("from cache"),
        "{:?}",
        first.how()
    );
    let files = cache_files(cache.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "bin"));

    let second = Tokenizer::from_file_cached(src.path(), Some(cache.path())).unwrap();
    assert!(
        second
            .how()
            .unwrap()
            .starts_with("compact byte-level BPE from cache")
    );
    assert_eq!(second.encode(&text), first.encode(&text));

    // A flipped byte, then a truncated file: rebuilt from the JSON, never trusted.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&files[0], &bytes).unwrap();
    let third = Tokenizer::from_file_cached(src.path(), Some(cache.path())).unwrap();
    assert!(!third.how().unwrap().contains("from cache"));
    assert_eq!(third.encode(&text), first.encode(&text));
    let len = std::fs::metadata(&files[0]).unwrap().len() as usize;
    std::fs::write(&files[0], &std::fs::read(&files[0]).unwrap()[..len / 3]).unwrap();
    let fourth = Tokenizer::from_file_cached(src.path(), Some(cache.path())).unwrap();
    assert!(!fourth.how().unwrap().contains("from cache"));
    // The rebuilt entry is good again.
    let fifth = Tokenizer::from_file_cached(src.path(), Some(cache.path())).unwrap();
    assert!(fifth.how().unwrap().contains("from cache"));
    assert_eq!(fifth.encode(&text), first.encode(&text));

    // An unwritable cache directory only costs the cache.
    let blocked = cache.path().join("file-not-dir");
    std::fs::write(&blocked, "x").unwrap();
    let uncached = Tokenizer::from_file_cached(src.path(), Some(&blocked)).unwrap();
    assert!(uncached.is_compact());
}

#[test]
fn an_edited_tokenizer_json_gets_a_new_cache_entry() {
    let src = qwen_copy();
    let cache = tempfile::tempdir().unwrap();
    let file = src.path().join("tokenizer.json");
    let before = Tokenizer::from_file_cached(&file, Some(cache.path())).unwrap();
    let special = before.encode("<|im_end|>");
    assert_eq!(special.len(), 1);
    // Rename a special token: the old text is no longer one token.
    let json = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, json.replace("<|im_end|>", "<|im_stop|>")).unwrap();
    let after = Tokenizer::from_file_cached(&file, Some(cache.path())).unwrap();
    assert!(
        !after.how().unwrap().contains("from cache"),
        "{:?}",
        after.how()
    );
    assert_eq!(after.encode("<|im_stop|>"), special);
    assert!(after.encode("<|im_end|>").len() > 1);
    assert_eq!(cache_files(cache.path()).len(), 2);
}

#[test]
fn other_tokenizers_fall_back_to_the_crate_and_say_why() {
    // A byte-level BPE with a Lowercase normalizer: valid, but not one we reproduce.
    let src = qwen_copy();
    let file = src.path().join("tokenizer.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    json["normalizer"] = serde_json::to_value(NormalizerWrapper::from(Lowercase)).unwrap();
    std::fs::write(&file, json.to_string()).unwrap();
    let t = Tokenizer::from_file_cached(&file, None).unwrap();
    assert!(!t.is_compact());
    assert_eq!(t.how(), Some("tokenizers crate: Lowercase normalizer"));
    let crate_ids = tokenizers::Tokenizer::from_file(&file)
        .unwrap()
        .encode("Hello World", false)
        .unwrap()
        .get_ids()
        .to_vec();
    assert_eq!(t.encode("Hello World"), crate_ids);
    assert_eq!(t.encode("Hello World"), t.encode("hello world"));

    // A WordPiece model.
    let wp_dir = tempfile::tempdir().unwrap();
    let wp = wp_dir.path().join("tokenizer.json");
    let model = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "hello": 1, "world": 2}}
    });
    std::fs::write(&wp, model.to_string()).unwrap();
    let t = Tokenizer::from_file_cached(&wp, None).unwrap();
    assert_eq!(t.how(), Some("tokenizers crate: WordPiece model"));
    assert_eq!(t.encode("hello world"), vec![1, 2]);
}

#[test]
fn the_run_log_says_how_the_tokenizer_was_loaded() {
    let src = qwen_copy();
    let cache = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let run = || {
        std::process::Command::new(common::BIN)
            .args([
                "profile",
                "--model",
                "test-model",
                "--tokenizer",
                src.path().to_str().unwrap(),
                "--endpoint-type",
                "chat",
                "--synthetic-input-tokens-mean",
                "50",
                "--output-tokens-mean",
                "5",
                "--request-count",
                "3",
                "--mock-server",
                "--artifact-dir",
                out_dir.path().to_str().unwrap(),
            ])
            .env("HF_HUB_OFFLINE", "1")
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap()
    };
    let first = run();
    let log = common::stderr_text(&first);
    assert!(first.status.success(), "{log}");
    let expected = format!(
        "Using tokenizer: {} (compact byte-level BPE, ",
        src.path().display()
    );
    assert!(log.contains(&expected), "{log}");
    assert_eq!(
        cache_files(&cache.path().join("aiperf/tokenizers")).len(),
        1
    );

    let second = run();
    let log = common::stderr_text(&second);
    assert!(second.status.success(), "{log}");
    let expected = format!(
        "Using tokenizer: {} (compact byte-level BPE from cache, ",
        src.path().display()
    );
    assert!(log.contains(&expected), "{log}");
    // The prompts were counted with this tokenizer: 50 tokens each.
    let records = common::read_jsonl(&out_dir.path().join("profile_export.jsonl"));
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r["metrics"]["input_sequence_length"]["value"], 50, "{r}");
    }
}
