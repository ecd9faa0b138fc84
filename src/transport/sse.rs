//! A small incremental Server-Sent Events framer for the hot path.
//!
//! Bytes go in as they arrive from the socket, complete events come out. Each event carries
//! the arrival time of the frame that held its first byte, so a chunk's timestamp is when it
//! started arriving, not when it was parsed. Handles the three line ends the SSE spec allows
//! (`\n`, `\r\n` and a bare `\r`, even with `\r\n` split between frames), `:` comment
//! (keep-alive) lines, `event:` names and multi-line `data:`.

use bytes::BytesMut;

/// One complete SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` name, if one was given (e.g. `error`).
    pub event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub data: &'a [u8],
    /// Arrival time (caller's clock) of the first byte of this event.
    pub arrival_ns: u64,
}

#[derive(Debug, Default)]
pub struct SseFramer {
    /// Bytes of an incomplete line.
    partial: BytesMut,
    data: Vec<u8>,
    event: String,
    /// Arrival time of the first byte of the event being assembled.
    event_start_ns: Option<u64>,
    has_data: bool,
    /// The last line ended with `\r`: a `\n` right after it belongs to that line end.
    after_cr: bool,
}

impl SseFramer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one body frame that arrived at `arrival_ns`; calls `on_event` for each event it
    /// completes.
    pub fn feed(&mut self, chunk: &[u8], arrival_ns: u64, mut on_event: impl FnMut(SseEvent<'_>)) {
        let mut rest = chunk;
        while !rest.is_empty() {
            if std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
                rest = &rest[1..];
                continue;
            }
            // The common event, `data: <payload>` and a blank line whole in this frame with
            // nothing pending, goes out in place instead of through the line buffers.
            if self.partial.is_empty()
                && !self.has_data
                && self.event.is_empty()
                && let Some((data, used)) = whole_data_event(rest)
            {
                on_event(SseEvent {
                    event: None,
                    data,
                    arrival_ns: self.event_start_ns.take().unwrap_or(arrival_ns),
                });
                rest = &rest[used..];
                continue;
            }
            // Any byte starts (or continues) an event; stamp the first one.
            if self.event_start_ns.is_none() {
                self.event_start_ns = Some(arrival_ns);
            }
            match memchr::memchr2(b'\r', b'\n', rest) {
                Some(end) => {
                    self.after_cr = rest[end] == b'\r';
                    let (head, tail) = rest.split_at(end);
                    rest = &tail[1..];
                    if self.partial.is_empty() {
                        self.line(head, &mut on_event);
                    } else {
                        self.partial.extend_from_slice(head);
                        let line = std::mem::take(&mut self.partial);
                        self.owned_line(line, &mut on_event);
                    }
                }
                None => {
                    self.partial.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
    }

    /// Ends the stream: an event left without its closing blank line is still delivered
    /// (servers that close the connection right after the last `data:` line). True when
    /// the stream stopped inside a line (no line end after its last bytes): that event may
    /// be cut short.
    pub fn finish(&mut self, mut on_event: impl FnMut(SseEvent<'_>)) -> bool {
        let cut = !self.partial.is_empty();
        if cut {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut on_event);
        }
        self.dispatch(&mut on_event);
        cut
    }

    /// A line gathered over several frames. A long `data:` line that starts its event
    /// becomes the event's data in place: a multi-megabyte event is not copied once more.
    fn owned_line(&mut self, line: BytesMut, on_event: &mut impl FnMut(SseEvent<'_>)) {
        if !self.has_data && line.len() > LARGE_LINE && line.starts_with(b"data:") {
            let prefix = if line.get(5) == Some(&b' ') { 6 } else { 5 };
            let mut data = Vec::from(line);
            data.drain(..prefix);
            self.data = data;
            self.has_data = true;
            return;
        }
        self.line(&line, on_event);
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(SseEvent<'_>)) {
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        if line[0] == b':' {
            // Comment / keep-alive. If nothing else belongs to this event yet, it is not
            // the start of a content event.
            if !self.has_data && self.event.is_empty() {
                self.event_start_ns = None;
            }
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.push_str(&String::from_utf8_lossy(value));
            }
            _ => {} // id:, retry: and unknown fields do not matter here
        }
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(SseEvent<'_>)) {
        let start = self.event_start_ns.take();
        if self.has_data {
            on_event(SseEvent {
                event: (!self.event.is_empty()).then_some(self.event.as_str()),
                data: &self.data,
                arrival_ns: start.unwrap_or(0),
            });
        }
        if self.data.capacity() > LARGE_LINE {
            // A large event's buffer goes with it; the usual small ones reuse theirs.
            self.data = Vec::new();
        } else {
            self.data.clear();
        }
        self.event.clear();
        self.has_data = false;
    }
}

/// Lines longer than this are handed over rather than copied (`SseFramer::owned_line`).
const LARGE_LINE: usize = 64 * 1024;

/// `data:<payload>\n\n` at the start of `bytes`: the payload (one leading space dropped, as
/// for any field) and the bytes the event takes.
fn whole_data_event(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let value = bytes.strip_prefix(b"data:")?;
    let end = memchr::memchr2(b'\r', b'\n', value)?;
    if value[end] != b'\n' || value.get(end + 1) != Some(&b'\n') {
        return None;
    }
    let line = &value[..end];
    Some((
        line.strip_prefix(b" ").unwrap_or(line),
        b"data:".len() + end + 2,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(frames: &[(&[u8], u64)]) -> Vec<(Option<String>, String, u64)> {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        for (bytes, t) in frames {
            f.feed(bytes, *t, |e| {
                out.push((
                    e.event.map(str::to_string),
                    String::from_utf8_lossy(e.data).into_owned(),
                    e.arrival_ns,
                ))
            });
        }
        f.finish(|e| {
            out.push((
                e.event.map(str::to_string),
                String::from_utf8_lossy(e.data).into_owned(),
                e.arrival_ns,
            ))
        });
        out
    }

    #[test]
    fn a_large_event_over_many_frames_comes_out_whole() {
        let payload = "x".repeat(300 * 1024);
        let text = format!("data: {payload}\n\ndata: small\n\n");
        let frames: Vec<(&[u8], u64)> = text
            .as_bytes()
            .chunks(7000)
            .enumerate()
            .map(|(i, c)| (c, i as u64 + 1))
            .collect();
        let out = collect(&frames);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].1.len(), out[0].2), (payload.len(), 1));
        assert!(out[0].1.bytes().all(|b| b == b'x'));
        assert_eq!(out[1].1, "small");
        // The same with `data:` and no space, and a second data line joined to the first.
        let text = format!("data:{payload}\ndata: tail\n\n");
        let frames: Vec<(&[u8], u64)> = text.as_bytes().chunks(5000).map(|c| (c, 9)).collect();
        let out = collect(&frames);
        assert_eq!(out[0].1, format!("{payload}\ntail"));
    }

    #[test]
    fn events_split_across_frames_keep_first_byte_time() {
        let out = collect(&[
            (b"data: {\"a\"", 10),
            (b":1}\n\nda", 20),
            (b"ta: x\n\n", 30),
        ]);
        assert_eq!(
            out,
            vec![(None, "{\"a\":1}".into(), 10), (None, "x".into(), 20)]
        );
    }

    #[test]
    fn crlf_comments_event_names_and_multiline_data() {
        let out = collect(&[(
            b": keep-alive\r\n\r\nevent: error\r\ndata: line1\r\ndata:line2\r\n\r\ndata: [DONE]\r\n\r\n",
            5,
        )]);
        assert_eq!(
            out,
            vec![
                (Some("error".into()), "line1\nline2".into(), 5),
                (None, "[DONE]".into(), 5)
            ]
        );
    }

    #[test]
    fn bare_cr_line_ends_and_crlf_split_between_frames() {
        let out = collect(&[
            (b"data: a\r\rdata: b\r", 1),
            (b"\n\r", 2),
            (b"\n: c\rdata: [DONE]\r\r", 3),
        ]);
        assert_eq!(
            out,
            vec![
                (None, "a".into(), 1),
                (None, "b".into(), 1),
                (None, "[DONE]".into(), 3)
            ]
        );
    }

    #[test]
    fn comment_before_event_does_not_stamp_it() {
        let out = collect(&[(b": ping\n\n", 1), (b": ping\n", 2), (b"data: a\n\n", 3)]);
        assert_eq!(out, vec![(None, "a".into(), 3)]);
    }

    #[test]
    fn unterminated_last_event_is_delivered_at_finish() {
        let out = collect(&[(b"data: a\n\ndata: b", 7)]);
        assert_eq!(out, vec![(None, "a".into(), 7), (None, "b".into(), 7)]);
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let stream = b"data: {\"x\": 1}\n\nevent: e\ndata: 2\n\n: c\ndata: [DONE]\n\n";
        let whole = collect(&[(stream, 0)]);
        let frames: Vec<(&[u8], u64)> = stream.chunks(1).map(|c| (c, 0)).collect();
        assert_eq!(collect(&frames), whole);
        assert_eq!(whole.len(), 3);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// Arbitrary bytes never panic the framer, and however the bytes are cut into frames
        /// the same events come out.
        #[test]
        fn arbitrary_bytes_and_cuts_give_the_same_events(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1024),
            cut_every in 1usize..64,
        ) {
            let whole = collect(&[(&bytes, 0)]);
            let frames: Vec<(&[u8], u64)> = bytes.chunks(cut_every).map(|c| (c, 0)).collect();
            proptest::prop_assert_eq!(collect(&frames), whole);
        }

        /// Streams of SSE lines: whole frames take the in-place path for plain data
        /// events, frames cut byte by byte never do; both give the same events and stamps.
        #[test]
        fn the_in_place_path_gives_what_the_line_path_gives(
            lines in proptest::collection::vec(proptest::sample::select(vec![
                "data: {\"a\": 1}\n", "data:x\n", "data: \n", "data", "", ": keep-alive",
                "event: error", "id: 7", "data: [DONE]\n",
            ]), 0..24),
            ends in proptest::collection::vec(proptest::sample::select(vec!["\n", "\n", "\r\n", "\r"]), 24),
            cut_every in 1usize..120,
        ) {
            let mut stream = Vec::new();
            for (line, end) in lines.iter().zip(&ends) {
                stream.extend_from_slice(line.as_bytes());
                stream.extend_from_slice(end.as_bytes());
            }
            let cut: Vec<(&[u8], u64)> = stream.chunks(cut_every).enumerate().map(|(i, c)| (c, (i * cut_every) as u64)).collect();
            // Each byte stamped as the frame it is cut into, so the stamps must agree too.
            let by_byte: Vec<(&[u8], u64)> = stream.chunks(1).enumerate().map(|(i, c)| (c, (i / cut_every * cut_every) as u64)).collect();
            proptest::prop_assert_eq!(collect(&cut), collect(&by_byte));
        }
    }
}
