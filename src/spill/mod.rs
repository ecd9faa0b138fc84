//! Temporary files for what a run would otherwise hold until its end: each request's
//! values for the end-of-run statistics, the sweep-line curves, the report's chart rows.
//!
//! A [`Log`] is an append-only stream of encoded items. Its last few KB stay in memory;
//! once they fill a chunk (whole items only, so no item straddles two chunks) the chunk is
//! written to its [`Spill`], an unnamed temporary file in the system temp dir that the
//! kernel removes when it is closed (or the process ends). A log is read back from its
//! start as often as needed, chunk by chunk. Memory held is a chunk per log and a few
//! bytes per chunk written, however long the run.
//!
//! When the temp dir cannot be written (missing, read-only, full), the chunks stay in
//! memory, as before logs spilled: one warning, and nothing is lost. `sort` sorts more
//! items than memory should hold: sorted runs in a spill, merged as they are read.

pub mod sort;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes a log gathers before they are written out: its memory while it grows.
pub const CHUNK: usize = 16 * 1024;
/// Chunks of a log read many times (a curve, the sweep's requests): fewer, larger reads.
pub const LARGE_CHUNK: usize = 64 * 1024;

/// One temporary file that logs write their chunks to, created at the first write.
#[derive(Debug)]
pub struct Spill {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: Option<File>,
    /// Bytes written.
    end: u64,
    /// Writing failed (or was never possible): chunks stay in memory from now on.
    broken: bool,
}

/// The fallback to memory is announced once per process.
static WARNED: AtomicBool = AtomicBool::new(false);

impl Spill {
    /// A spill whose file is created in the system temp dir when first needed.
    pub fn new() -> Arc<Spill> {
        Arc::new(Spill {
            state: Mutex::new(State {
                file: None,
                end: 0,
                broken: false,
            }),
        })
    }

    /// A spill that keeps every chunk in memory (and warns of nothing).
    #[cfg(test)]
    pub fn in_memory() -> Arc<Spill> {
        let spill = Spill::new();
        spill.lock().broken = true;
        spill
    }

    /// A spill writing to `file` (a test's full disk).
    #[cfg(test)]
    pub fn on(file: File) -> Arc<Spill> {
        let spill = Spill::new();
        spill.lock().file = Some(file);
        spill
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `bytes` to the file: where they start, or `None` when they must stay in
    /// memory (the file could not be created or written).
    fn write(&self, bytes: &[u8]) -> Option<u64> {
        let mut s = self.lock();
        if s.broken {
            return None;
        }
        if s.file.is_none() {
            match tempfile::tempfile() {
                Ok(file) => s.file = Some(file),
                Err(e) => {
                    s.broken = true;
                    warn_once(&e);
                    return None;
                }
            }
        }
        let at = s.end;
        let file = s.file.as_mut().expect("created above");
        let written = file
            .seek(SeekFrom::Start(at))
            .and_then(|_| file.write_all(bytes));
        match written {
            Ok(()) => {
                s.end += bytes.len() as u64;
                Some(at)
            }
            Err(e) => {
                s.broken = true;
                warn_once(&e);
                None
            }
        }
    }

    /// Reads back `buf.len()` bytes written at `at`.
    fn read(&self, at: u64, buf: &mut [u8]) {
        let mut s = self.lock();
        let file = s.file.as_mut().expect("a chunk on disk has a file");
        let read = file
            .seek(SeekFrom::Start(at))
            .and_then(|_| file.read_exact(buf));
        // The bytes were written by this process a moment ago: a failure to read them is
        // the machine failing, not a condition to go on from.
        if let Err(e) = read {
            panic!("cannot read back a temporary file: {e}");
        }
    }

    /// Bytes written to the file so far.
    #[cfg(test)]
    pub fn written(&self) -> u64 {
        self.lock().end
    }
}

fn warn_once(e: &std::io::Error) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "cannot write temporary files in {} ({e}): the run's per-request values stay in memory (set TMPDIR to a writable directory with room)",
            std::env::temp_dir().display()
        );
    }
}

/// A chunk of a log: on disk, or in memory when it could not be written.
#[derive(Debug)]
enum Chunk {
    Disk { at: u64, len: u32 },
    Memory(Box<[u8]>),
}

/// An append-only stream of encoded items whose bytes go to a spill chunk by chunk.
#[derive(Debug)]
pub struct Log {
    spill: Arc<Spill>,
    chunks: Vec<Chunk>,
    /// Whole items not yet written out.
    tail: Vec<u8>,
    /// Bytes gathered before they are written out.
    chunk: usize,
}

impl Log {
    pub fn new(spill: &Arc<Spill>) -> Log {
        Log::with_chunk(spill, CHUNK)
    }

    /// A log written out in chunks of about `chunk` bytes.
    pub fn with_chunk(spill: &Arc<Spill>, chunk: usize) -> Log {
        Log {
            spill: spill.clone(),
            chunks: Vec::new(),
            tail: Vec::new(),
            chunk,
        }
    }

    /// Where the next item's bytes go; call [`Log::end_item`] after each item.
    pub fn tail(&mut self) -> &mut Vec<u8> {
        if self.tail.capacity() == 0 {
            self.tail.reserve_exact(self.chunk + 64);
        }
        &mut self.tail
    }

    /// Ends an item: once a chunk's worth of whole items is gathered, it is written out.
    pub fn end_item(&mut self) {
        if self.tail.len() >= self.chunk {
            self.flush();
        }
    }

    /// Writes out what is gathered and lets the buffer go: nothing more will be appended.
    pub fn close(&mut self) {
        if !self.tail.is_empty() {
            self.flush();
        }
        self.tail = Vec::new();
    }

    fn flush(&mut self) {
        let len = self.tail.len();
        let chunk = match self.spill.write(&self.tail) {
            Some(at) => Chunk::Disk {
                at,
                len: u32::try_from(len).expect("a chunk is smaller than 4 GB"),
            },
            None => Chunk::Memory(self.tail.as_slice().into()),
        };
        self.chunks.push(chunk);
        self.tail.clear();
        // An item far larger than a chunk leaves no large buffer behind.
        if self.tail.capacity() > 4 * self.chunk {
            self.tail = Vec::new();
        }
    }

    /// Whether the next item starts a chunk (nothing gathered since the last was written).
    pub fn at_chunk_start(&self) -> bool {
        self.tail.is_empty()
    }

    /// Reads the items from the start.
    pub fn reader(&self) -> Reader<'_> {
        self.reader_from(0)
    }

    /// Reads the items from the start of chunk `chunk` (in the order they were started).
    pub fn reader_from(&self, chunk: usize) -> Reader<'_> {
        Reader {
            log: self,
            next: chunk,
            buf: Vec::new(),
            at: 0,
        }
    }
}

/// Reads a log's bytes chunk by chunk; each chunk holds whole items.
pub struct Reader<'a> {
    log: &'a Log,
    /// The chunk after the current one (`chunks.len()`: the tail).
    next: usize,
    /// The current chunk.
    buf: Vec<u8>,
    /// Bytes of the current chunk already taken.
    at: usize,
}

impl Reader<'_> {
    /// The current chunk's bytes not yet taken, moving on to the next chunk when they are
    /// used up; `None` at the end of the log.
    #[inline]
    pub fn rest(&mut self) -> Option<&[u8]> {
        if self.at >= self.buf.len() && !self.load_next() {
            return None;
        }
        Some(&self.buf[self.at..])
    }

    /// Takes `n` bytes of the current chunk.
    #[inline]
    pub fn advance(&mut self, n: usize) {
        self.at += n;
    }

    /// Loads the next chunk that holds anything; false after the tail.
    fn load_next(&mut self) -> bool {
        let log = self.log;
        loop {
            self.at = 0;
            self.buf.clear();
            match log.chunks.get(self.next) {
                Some(Chunk::Disk { at, len }) => {
                    self.buf.resize(*len as usize, 0);
                    log.spill.read(*at, &mut self.buf);
                }
                Some(Chunk::Memory(bytes)) => self.buf.extend_from_slice(bytes),
                None if self.next == log.chunks.len() => self.buf.extend_from_slice(&log.tail),
                None => return false,
            }
            self.next += 1;
            if !self.buf.is_empty() {
                return true;
            }
        }
    }
}

/// Appends `n` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut n: u128) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The varint at the start of `bytes` and its length.
pub fn get_varint(bytes: &[u8]) -> (u128, usize) {
    let mut n = 0u128;
    let mut shift = 0;
    for (i, &b) in bytes.iter().enumerate() {
        n |= u128::from(b & 0x7f) << shift;
        if b < 0x80 {
            return (n, i + 1);
        }
        shift += 7;
    }
    panic!("a varint cut short");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items of 1 to 300 bytes, each its length then bytes of its index.
    fn fill(log: &mut Log, count: usize) -> Vec<Vec<u8>> {
        let mut items = Vec::new();
        for i in 0..count {
            let len = 1 + (i * 7919) % 300;
            let item: Vec<u8> = (0..len).map(|k| (i + k) as u8).collect();
            put_varint(log.tail(), len as u128);
            log.tail().extend_from_slice(&item);
            log.end_item();
            items.push(item);
        }
        items
    }

    fn read_all(log: &Log) -> Vec<Vec<u8>> {
        let mut r = log.reader();
        let mut out = Vec::new();
        while let Some(bytes) = r.rest() {
            let (len, used) = get_varint(bytes);
            let item = bytes[used..used + len as usize].to_vec();
            r.advance(used + len as usize);
            out.push(item);
        }
        out
    }

    #[test]
    fn items_come_back_in_order_from_disk_and_tail_twice() {
        let spill = Spill::new();
        let mut log = Log::new(&spill);
        assert!(read_all(&log).is_empty());
        let items = fill(&mut log, 2000);
        assert!(log.chunks.len() > 10, "written out in chunks");
        assert!(spill.written() > 0);
        assert!(matches!(log.chunks[0], Chunk::Disk { .. }));
        assert_eq!(read_all(&log), items);
        assert_eq!(read_all(&log), items, "read again");
        // Two logs on one spill interleave their chunks in the file.
        let mut other = Log::new(&spill);
        let more = fill(&mut other, 500);
        assert_eq!(read_all(&other), more);
        assert_eq!(read_all(&log), items);
    }

    #[test]
    fn without_a_file_the_chunks_stay_in_memory() {
        let spill = Spill::in_memory();
        let mut log = Log::new(&spill);
        let items = fill(&mut log, 2000);
        assert!(matches!(log.chunks[0], Chunk::Memory(_)));
        assert_eq!(spill.written(), 0);
        assert_eq!(read_all(&log), items);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_keeps_what_was_written_and_the_rest_in_memory() {
        // Every write to /dev/full fails with ENOSPC.
        let full = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/full")
            .unwrap();
        let spill = Spill::on(full);
        let mut log = Log::new(&spill);
        let items = fill(&mut log, 2000);
        assert!(log.chunks.iter().all(|c| matches!(c, Chunk::Memory(_))));
        assert_eq!(read_all(&log), items);
    }

    #[test]
    fn varints_round_trip() {
        for n in [0u128, 1, 127, 128, 300, u64::MAX as u128, u128::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            out.push(0xAA);
            assert_eq!(get_varint(&out), (n, out.len() - 1));
        }
    }
}
