//! Decodes the builtin tokenizer's vocabulary (`assets/o200k_base.tiktoken`: a base64 token
//! and its rank per line) into the byte arena and offsets that `tokenizer::bpe` indexes, so
//! a run starts without parsing 200,000 lines of base64 (about 40% of the load's time).

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let source = root.join("assets/o200k_base.tiktoken");
    println!("cargo::rerun-if-changed={}", source.display());
    let text =
        std::fs::read_to_string(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    let mut arena = Vec::with_capacity(text.len() * 3 / 8);
    let mut offsets = Vec::with_capacity(text.len() / 8);
    offsets.extend_from_slice(&0u32.to_le_bytes());
    for (rank, line) in text.lines().filter(|l| !l.is_empty()).enumerate() {
        let at = || format!("{}:{}", source.display(), rank + 1);
        let (token, written_rank) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("{}: expected '<base64> <rank>'", at()));
        assert_eq!(
            written_rank.parse::<usize>().ok(),
            Some(rank),
            "{}: ranks must be 0, 1, 2, ... in line order",
            at()
        );
        STANDARD
            .decode_vec(token, &mut arena)
            .unwrap_or_else(|e| panic!("{}: bad base64: {e}", at()));
        let end = u32::try_from(arena.len()).expect("a vocabulary under 4 GiB");
        offsets.extend_from_slice(&end.to_le_bytes());
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("o200k_base.arena"), &arena).expect("OUT_DIR is writable");
    std::fs::write(out.join("o200k_base.offsets"), &offsets).expect("OUT_DIR is writable");
}
