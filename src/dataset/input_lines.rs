//! The lines of an `--input-file`, read once, as they come: each line at most `MAX_LINE`
//! bytes of UTF-8 text. A binary file, `/dev/zero` or `/dev/urandom` is refused at its first
//! bad byte (with its line) instead of being read into memory whole, and a pipe or FIFO
//! (`--input-file <(zcat trace.jsonl.gz)`) is read like a file.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::custom::InputError;

/// The longest line an input file may have. A line is one JSON record, and one with inline
/// images (data URLs) can run to megabytes; past this it is no JSONL file.
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// What a reader of lines tells `for_each_line`.
pub enum Next {
    More,
    Stop,
}

/// Calls `each(line_number, line)` for every line of `file` (1-based, line ends and a
/// leading UTF-8 byte-order mark taken off) until it says `Stop` or fails.
pub fn for_each_line(
    file: &Path,
    mut each: impl FnMut(usize, &str) -> Result<Next, InputError>,
) -> Result<(), InputError> {
    let opened = std::fs::File::open(file)
        .map_err(|e| format!("{}: cannot read the input file: {e}", file.display()))?;
    for_each_line_in(file, opened, &mut each)
}

fn for_each_line_in(
    file: &Path,
    source: impl Read,
    each: &mut impl FnMut(usize, &str) -> Result<Next, InputError>,
) -> Result<(), InputError> {
    let mut reader = BufReader::with_capacity(256 * 1024, source);
    let mut line = Vec::new();
    // Bytes of the file before the current line, for the offset of a bad byte.
    let mut offset = 0u64;
    for number in 1.. {
        line.clear();
        if !read_line(&mut reader, &mut line, file, number, offset)? {
            return Ok(());
        }
        let bom = if number == 1 && line.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        let mut text = &line[bom..];
        while let Some(rest) = text
            .strip_suffix(b"\n")
            .or_else(|| text.strip_suffix(b"\r"))
        {
            text = rest;
        }
        let text = std::str::from_utf8(text)
            .map_err(|e| not_text(file, number, offset + (bom + e.valid_up_to()) as u64))?;
        if let Next::Stop = each(number, text)? {
            return Ok(());
        }
        offset += line.len() as u64;
    }
    Ok(())
}

/// Reads one line (with its `\n`) into `line`; false at the end of the file. Stops at the
/// first NUL byte or past `MAX_LINE`, so a device that never ends a line is refused at once.
fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    file: &Path,
    number: usize,
    offset: u64,
) -> Result<bool, InputError> {
    loop {
        let chunk = reader.fill_buf().map_err(|e| {
            format!(
                "{}:{number}: cannot read the input file: {e}",
                file.display()
            )
        })?;
        if chunk.is_empty() {
            return Ok(!line.is_empty());
        }
        let end = memchr::memchr(b'\n', chunk).map_or(chunk.len(), |i| i + 1);
        if let Some(nul) = memchr::memchr(0, &chunk[..end]) {
            return Err(not_text(file, number, offset + (line.len() + nul) as u64));
        }
        if line.len() + end > MAX_LINE {
            return Err(format!(
                "{}:{number}: the line is longer than {} MiB: an input file is JSONL, one \
                 JSON record per line",
                file.display(),
                MAX_LINE >> 20
            ));
        }
        line.extend_from_slice(&chunk[..end]);
        reader.consume(end);
        if line.last() == Some(&b'\n') {
            return Ok(true);
        }
    }
}

/// A pipe, FIFO or device given as the input file, read once into a regular file, which
/// everything after reads (several times: the schedule check, the loader, each sweep point).
/// Removed when dropped.
#[derive(Debug)]
pub struct ReadOnce {
    pub path: std::path::PathBuf,
}

impl Drop for ReadOnce {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `None` for a regular file or a directory; else the stream's lines copied (each checked
/// as `for_each_line` checks it) into a file of their own under the temporary directory.
pub fn read_once(file: &Path) -> Result<Option<ReadOnce>, InputError> {
    use std::io::Write;
    match std::fs::metadata(file) {
        Ok(m) if m.is_file() || m.is_dir() => return Ok(None),
        Err(_) => return Ok(None),
        Ok(_) => {}
    }
    let dir = std::env::temp_dir().join(format!("aiperf-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("{}: cannot make a copy of the input: {e}", dir.display()))?;
    let name = file
        .file_name()
        .map_or("input".into(), |n| n.to_string_lossy().into_owned());
    let copy = ReadOnce {
        path: dir.join(format!("{name}.jsonl")),
    };
    let cannot = |e: std::io::Error| format!("{}: cannot write: {e}", copy.path.display());
    let mut out = std::io::BufWriter::new(std::fs::File::create(&copy.path).map_err(cannot)?);
    let mut written = Ok(());
    for_each_line(file, |_, line| {
        written = writeln!(out, "{line}");
        Ok(if written.is_ok() {
            Next::More
        } else {
            Next::Stop
        })
    })?;
    written.and_then(|()| out.flush()).map_err(cannot)?;
    drop(out);
    Ok(Some(copy))
}

fn not_text(file: &Path, number: usize, byte: u64) -> InputError {
    format!(
        "{}:{number}: byte {byte} is not UTF-8 text (a binary file?); give a JSONL file of \
         UTF-8 text",
        file.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(bytes: &[u8]) -> Result<Vec<(usize, String)>, InputError> {
        let mut out = Vec::new();
        for_each_line_in(Path::new("f.jsonl"), bytes, &mut |n, l| {
            out.push((n, l.to_string()));
            Ok(Next::More)
        })?;
        Ok(out)
    }

    #[test]
    fn lines_come_numbered_without_their_ends_or_a_byte_order_mark() {
        let got = lines_of(b"\xEF\xBB\xBF{\"a\":1}\r\n\n{\"b\":2}").unwrap();
        let want = [(1, "{\"a\":1}"), (2, ""), (3, "{\"b\":2}")];
        assert_eq!(got, want.map(|(n, l)| (n, l.to_string())));
        assert!(lines_of(b"").unwrap().is_empty());
    }

    #[test]
    fn binary_bytes_are_refused_at_their_line_and_offset() {
        let e = lines_of(b"{}\n{\"x\": \"a\0b\"}\n").unwrap_err();
        assert_eq!(
            e,
            "f.jsonl:2: byte 11 is not UTF-8 text (a binary file?); give a JSONL file of UTF-8 text"
        );
        let e = lines_of(b"ok\nok\n\xff\xfe").unwrap_err();
        assert!(e.starts_with("f.jsonl:3: byte 6 is not UTF-8"), "{e}");
    }

    #[test]
    fn endless_devices_are_refused_without_reading_them_whole() {
        // /dev/zero: the first NUL, never a line end.
        let zeros = std::io::repeat(0);
        let e = for_each_line_in(Path::new("/dev/zero"), zeros, &mut |_, _| Ok(Next::More))
            .unwrap_err();
        assert!(e.starts_with("/dev/zero:1: byte 0 is not UTF-8"), "{e}");
        // A line that never ends, of valid text: refused at the limit.
        let endless = std::io::repeat(b'a');
        let e =
            for_each_line_in(Path::new("big"), endless, &mut |_, _| Ok(Next::More)).unwrap_err();
        assert!(e.contains("longer than 64 MiB"), "{e}");
    }

    #[test]
    fn a_pipe_is_read_once_into_a_file_and_a_file_is_left_alone() {
        assert!(read_once(Path::new(file!())).unwrap().is_none());
        let (mut reader, mut writer) = std::io::pipe().unwrap();
        let fd = {
            use std::os::fd::AsRawFd;
            reader.as_raw_fd()
        };
        std::thread::spawn(move || {
            use std::io::Write;
            writer
                .write_all(b"{\"text\": \"a\"}\n\n{\"text\": \"b\"}")
                .unwrap();
        });
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{fd}"));
        let copy = read_once(&path).unwrap().expect("a pipe is copied");
        let text = std::fs::read_to_string(&copy.path).unwrap();
        assert_eq!(text, "{\"text\": \"a\"}\n\n{\"text\": \"b\"}\n");
        let kept = copy.path.clone();
        drop(copy);
        assert!(!kept.exists());
        let _ = reader.read(&mut [0u8; 1]);
    }

    #[test]
    fn a_reader_may_stop_early() {
        let mut seen = 0;
        for_each_line_in(Path::new("f"), &b"a\nb\nc\n"[..], &mut |_, _| {
            seen += 1;
            Ok(Next::Stop)
        })
        .unwrap();
        assert_eq!(seen, 1);
    }
}
