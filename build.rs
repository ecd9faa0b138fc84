//! Decodes the builtin tokenizer's vocabulary (`assets/o200k_base.tiktoken`: a base64 token
//! and its rank per line) and indexes it with the crate's own `TokenIndex`, writing the byte
//! arena, the offsets and the probe table that `tokenizer::bpe` embeds: a run starts
//! without parsing 200,000 lines of base64 or hashing every token (together about 80% of
//! the load's time).

use std::path::PathBuf;

// Only `from_tiktoken`, `parts`, `slots` and `put_le_u32s` are used here.
#[allow(dead_code)]
#[path = "src/tokenizer/token_index.rs"]
mod token_index;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let source = root.join("assets/o200k_base.tiktoken");
    println!("cargo::rerun-if-changed={}", source.display());
    println!("cargo::rerun-if-changed=src/tokenizer/token_index.rs");
    let text =
        std::fs::read_to_string(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    let index = token_index::TokenIndex::from_tiktoken(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    let (arena, offsets) = index.parts();
    let le = |values: &[u32]| {
        let mut bytes = Vec::new();
        token_index::put_le_u32s(&mut bytes, values);
        bytes
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    for (name, bytes) in [
        ("o200k_base.arena", arena.to_vec()),
        ("o200k_base.offsets", le(offsets)),
        ("o200k_base.slots", le(index.slots())),
    ] {
        std::fs::write(out.join(name), bytes).expect("OUT_DIR is writable");
    }
}
