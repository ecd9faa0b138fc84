//! The compact form of a byte-level BPE `tokenizer.json`, cached on disk so later runs skip
//! the JSON: `$XDG_CACHE_HOME/aiperf/tokenizers/<key>.bin` (`~/.cache/...` without it).
//!
//! The key is the SHA-256 of the format version and the source file's canonical path, size
//! and modification time, so an edited or replaced file gets a new entry; the header repeats
//! that key. Files are written to a temporary name and renamed into place (readers never see
//! half a file), and end with a checksum of everything before it, so a damaged file is
//! detected and rebuilt instead of giving wrong ids.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use super::byte_level::{AddedToken, Spec};
use super::token_index::{TokenIndex, le_u32s, put_le_u32s};

const MAGIC: &[u8; 8] = b"AIPFBPE\0";
/// Bump on any change to the layout or to what a spec means (2: the token index's probe
/// table is stored, so a load does not hash every token again; bump as well when
/// `token_index`'s hash changes).
const VERSION: u32 = 2;

/// Where cache files go: `$XDG_CACHE_HOME/aiperf/tokenizers`, else
/// `$HOME/.cache/aiperf/tokenizers`; None when neither is set.
pub fn default_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if !dir.is_empty() && Path::new(&dir).is_absolute() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".cache"),
    };
    Some(base.join("aiperf").join("tokenizers"))
}

/// Identifies one version of one source file.
#[derive(Debug, Clone, PartialEq)]
pub struct Key([u8; 32]);

impl Key {
    /// From the file's canonical path, size and modification time (one `stat`, no read).
    pub fn of(source: &Path) -> std::io::Result<Key> {
        let path = fs::canonicalize(source)?;
        let meta = fs::metadata(&path)?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let mut h = Sha256::new();
        h.update(VERSION.to_le_bytes());
        h.update(path.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(meta.len().to_le_bytes());
        h.update(mtime.to_le_bytes());
        Ok(Key(h.finalize().into()))
    }

    /// The cache file for this key in `dir`.
    pub fn file_in(&self, dir: &Path) -> PathBuf {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        dir.join(format!("{hex}.bin"))
    }
}

/// Serializes `spec` under `key`.
pub fn encode(key: &Key, spec: &Spec) -> Vec<u8> {
    let (arena, offsets) = spec.tokens.parts();
    let slots = spec.tokens.slots();
    let mut out = Vec::with_capacity(
        arena.len() + (offsets.len() + slots.len()) * 4 + spec.merges.len() * 12 + 4096,
    );
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, VERSION);
    out.extend_from_slice(&key.0);
    put_u32(
        &mut out,
        u32::from(spec.nfc) | (u32::from(spec.ignore_merges) << 1),
    );
    put_bytes(&mut out, arena);
    put_u32(&mut out, offsets.len() as u32);
    put_le_u32s(&mut out, offsets);
    put_u32(&mut out, slots.len() as u32);
    put_le_u32s(&mut out, slots);
    put_u32(&mut out, spec.merges.len() as u32);
    put_le_u32s(&mut out, spec.merges.as_flattened());
    put_u32(&mut out, spec.patterns.len() as u32);
    for p in &spec.patterns {
        put_bytes(&mut out, p.as_bytes());
    }
    put_u32(&mut out, spec.added.len() as u32);
    for t in &spec.added {
        put_u32(&mut out, t.id);
        out.push(u8::from(t.normalized));
        put_bytes(&mut out, t.content.as_bytes());
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Reads back what `encode` wrote for `key`; the error says what was wrong.
pub fn decode(key: &Key, bytes: &[u8]) -> Result<Spec, String> {
    let (body, sum) = bytes
        .split_last_chunk::<8>()
        .ok_or("shorter than its header")?;
    if checksum(body) != u64::from_le_bytes(*sum) {
        return Err("checksum mismatch (damaged or truncated)".into());
    }
    let mut r = Reader { rest: body };
    if r.take(8)? != MAGIC {
        return Err("not a tokenizer cache file".into());
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!("format version {version}, expected {VERSION}"));
    }
    if r.take(32)? != key.0 {
        return Err("made from another tokenizer.json".into());
    }
    let flags = r.u32()?;
    let arena = r.bytes()?.to_vec();
    let offsets = r.u32s(1)?;
    let slots = r.u32s(1)?;
    let flat = r.u32s(3)?;
    let merges = flat.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    let mut patterns = Vec::new();
    for _ in 0..r.u32()? {
        patterns.push(r.string()?);
    }
    let mut added = Vec::new();
    for _ in 0..r.u32()? {
        let id = r.u32()?;
        let normalized = r.take(1)?[0] != 0;
        added.push(AddedToken {
            id,
            content: r.string()?,
            normalized,
        });
    }
    if !r.rest.is_empty() {
        return Err("trailing bytes".into());
    }
    let tokens = TokenIndex::with_slots(arena, offsets, slots).map_err(|e| e.to_string())?;
    Ok(Spec {
        tokens,
        merges,
        patterns,
        nfc: flags & 1 != 0,
        ignore_merges: flags & 2 != 0,
        added,
    })
}

/// Writes `bytes` to `file` atomically: a temporary file in the same directory, renamed.
pub fn write_atomic(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    // Unique per process and call, so concurrent writers never share a temporary file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        file.file_name().and_then(|n| n.to_str()).unwrap_or("cache"),
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    // No fsync: a file cut short by a crash fails its checksum and is rebuilt.
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        fs::rename(&tmp, file)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// A fast 64-bit hash of the whole file, eight bytes at a time: catches damage, not tampering.
fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunks = bytes.chunks_exact(8);
    // Four independent lanes keep the multiplier busy.
    let mut lanes = [K, K.rotate_left(17), K.rotate_left(31), K.rotate_left(47)];
    for (i, chunk) in (&mut chunks).enumerate() {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let lane = &mut lanes[i & 3];
        *lane = (*lane ^ w).wrapping_mul(K).rotate_left(29);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let mut h = (bytes.len() as u64).wrapping_mul(K) ^ u64::from_le_bytes(tail);
    for lane in lanes {
        h = (h.rotate_left(23) ^ lane).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.rest.len() {
            return Err("ends early".into());
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        self.take(usize::try_from(len).map_err(|_| "length too large")?)
    }

    fn string(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "text is not UTF-8".into())
    }

    /// A count of groups, then `count * per` little-endian u32s.
    fn u32s(&mut self, per: usize) -> Result<Vec<u32>, String> {
        let count = self.u32()? as usize;
        let raw = self.take(count.checked_mul(4 * per).ok_or("count too large")?)?;
        Ok(le_u32s(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            tokens: TokenIndex::new(
                (0..=255u8).chain(*b"ab").collect(),
                (0..=256).chain([258]).collect(),
            )
            .unwrap(),
            merges: vec![[97, 98, 256]],
            patterns: vec![r"\S+|\s+".into()],
            nfc: true,
            ignore_merges: false,
            added: vec![AddedToken {
                id: 257,
                content: "<|é|>".into(),
                normalized: true,
            }],
        }
    }

    #[test]
    fn round_trips_and_rejects_any_damage() {
        let key = Key([7; 32]);
        let bytes = encode(&key, &spec());
        let decoded = decode(&key, &bytes).unwrap();
        assert_eq!(decoded, spec());
        assert_eq!(decoded.tokens.slots(), spec().tokens.slots());
        assert_eq!(decoded.tokens.get(b"ab"), Some(256));
        assert!(
            decode(&Key([8; 32]), &bytes)
                .unwrap_err()
                .contains("another")
        );
        for cut in [0, 5, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&key, &bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in [0, 9, 40, bytes.len() / 2, bytes.len() - 3] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(decode(&key, &flipped).is_err(), "flip at {at}");
        }
    }

    #[test]
    fn key_follows_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokenizer.json");
        fs::write(&file, "{}").unwrap();
        let first = Key::of(&file).unwrap();
        assert_eq!(Key::of(&file).unwrap(), first);
        fs::write(&file, "{ }").unwrap();
        assert_ne!(Key::of(&file).unwrap(), first, "size changed");
        let out = dir.path().join("sub/x.bin");
        write_atomic(&out, b"data").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"data");
        assert_eq!(fs::read_dir(dir.path().join("sub")).unwrap().count(), 1);
    }
}
