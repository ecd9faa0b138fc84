//! A hand-written read of the plain payloads nearly every chunk is: the `ParsedEvent` that
//! serde's typed read and `from_wire` would give, with the texts borrowed (serde cannot
//! borrow an `Option<Cow<str>>`, so it allocated each one) and without serde's moves of the
//! large intermediate structs.
//! Anything it does not take in plainly (an escape or a control character in a string, a
//! non-null `error`, a field of another type, a repeated field, a number that is not a
//! plain `u64` where one is read, invalid JSON, deep nesting) makes it return `None` and
//! serde reads the payload as before: it only ever answers where serde's typed read
//! would succeed with the same values. Why not serde alone: by callgrind, serde's typed read
//! took 6.1k instructions per chunk and a first version of this scan (memchr for strings,
//! the serde structs as its result) 4.25k; in a loop over a 213-byte chat chunk that version
//! took 250 ns and this one 135 ns. Borrowing the texts through a serde visitor instead
//! gave no measurable gain in the whole-process A/B.

use std::borrow::Cow;

use super::ParsedEvent;
use crate::record::Usage;

/// Nesting this deep inside a skipped value is left to serde.
const MAX_DEPTH: u32 = 64;

/// Bytes that end a plain run inside a string: the quote, the backslash (an escape,
/// left to serde) and the control characters JSON forbids there.
const STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Where the run of plain string bytes starting at `at` ends: the index of the first
/// `STRING_STOP` byte, or `b.len()`. Eight bytes per step with word arithmetic; memchr2
/// was slower on these strings (keys and ids of 2-40 bytes, shorter than its setup) and
/// needed a second pass for control characters.
pub(super) fn plain_run_end(b: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte, `x - 1` borrows into the high bit only where x is 0 (and `x - 0x20`
    // only where x < 0x20) unless a lower byte borrowed first: the lowest flag is exact.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    while let Some(word) = b.get(at..at + 8) {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let control = w.wrapping_sub(ONES * 0x20) & !w;
        let quote = zero(w ^ (ONES * u64::from(b'"')));
        let backslash = zero(w ^ (ONES * u64::from(b'\\')));
        let found = (control | quote | backslash) & HIGH;
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < b.len() && !STRING_STOP[usize::from(b[at])] {
        at += 1;
    }
    at
}

struct Scan<'a> {
    text: &'a str,
    at: usize,
}

/// A message (`delta` or `message`) as `from_wire` reads it: its content, and its
/// `reasoning_content` or else its `reasoning`. Borrowed texts only, so the values
/// moved around while scanning stay a few words (the serde structs made the moves
/// memcpy calls: a fifth of the scan's time).
#[derive(Clone, Copy)]
struct Message<'a> {
    content: Option<&'a str>,
    reasoning: Option<&'a str>,
}

/// A choice as `from_wire` reads it: `delta` when there is one, else `message`; its
/// own `text`.
#[derive(Clone, Copy)]
struct Choice<'a> {
    message: Option<Message<'a>>,
    text: Option<&'a str>,
}

/// What a stream's payloads repeat. The lead: the start of a payload the scan took, up
/// to the comma before the first top-level field it reads (`choices`, `usage`, `text`,
/// `error`). A chat chunk's `id`, `object`, `created` and `model` come first and are the
/// same in every chunk of a stream: about half of its bytes, only skipped. The scan is a
/// function of the bytes it has passed (no look-ahead past that comma), so a payload
/// that starts with these bytes is at the same point of the scan in the same state,
/// nothing read yet, and the scan goes on from there. By callgrind over the mock's
/// chunks (a new lead every 16): 2,496 -> 1,674 instructions a chunk.
///
/// The hole: most chunks of a stream differ from the one before only in their one
/// text (`"delta":{"content":"..."}`). A text is read as a value and never looked at,
/// and a plain string ends at the first quote, backslash or control byte, so a payload
/// made of the same bytes around another plain string reads as that payload did, with
/// the other text: a prefix compare, a run scan and a suffix compare instead of the
/// scan. By callgrind over a 3,000-request streamed profile of the mock: ~280
/// instructions a chunk that matches, where the scan after the lead took ~2,000.
#[derive(Debug, Default)]
pub struct StreamLead {
    /// The payload the lead and the hole were taken from.
    bytes: Vec<u8>,
    /// Where the lead ends in `bytes` (0: no lead).
    lead_end: usize,
    hole: Option<Hole>,
}

/// Where the one text of `StreamLead::bytes` lies (between its quotes), which field it
/// filled, and the payload's usage (the rest of what it read).
#[derive(Debug, Clone, Copy)]
struct Hole {
    start: usize,
    end: usize,
    reasoning: bool,
    usage: Option<Usage>,
}

impl Hole {
    /// The hole of `event`, read from `data`: its only text, borrowed from `data`.
    fn of(data: &[u8], event: &ParsedEvent<'_>) -> Option<Hole> {
        let (text, reasoning) = match (&event.text, &event.reasoning) {
            (Some(Cow::Borrowed(t)), None) => (*t, false),
            (None, Some(Cow::Borrowed(r))) => (*r, true),
            _ => return None,
        };
        // The scan's texts are slices of `data`.
        let start = (text.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
        let end = start + text.len();
        if end > data.len() {
            return None;
        }
        debug_assert!(data.get(start.wrapping_sub(1)) == Some(&b'"'));
        debug_assert!(data.get(end) == Some(&b'"'));
        Some(Hole {
            start,
            end,
            reasoning,
            usage: event.usage.as_deref().copied(),
        })
    }

    /// `data` read through the hole of `bytes`, when it is `bytes` with another plain
    /// string in the hole.
    fn fill<'a>(&self, bytes: &[u8], data: &'a [u8]) -> Option<ParsedEvent<'a>> {
        let (before, after) = (&bytes[..self.start], &bytes[self.end..]);
        if !data.starts_with(before) {
            return None;
        }
        // `after` starts with the closing quote: the new text's run ends exactly there
        // or the payload is not the same around it.
        let end = plain_run_end(data, before.len());
        if &data[end..] != after {
            return None;
        }
        let text = Cow::Borrowed(std::str::from_utf8(&data[before.len()..end]).ok()?);
        let (text, reasoning) = if self.reasoning {
            (None, Some(text))
        } else {
            (Some(text), None)
        };
        Some(ParsedEvent {
            text,
            reasoning,
            usage: self.usage.map(Box::new),
            ..ParsedEvent::default()
        })
    }
}

#[cfg(test)]
impl StreamLead {
    pub(super) fn lead_bytes(&self) -> &[u8] {
        &self.bytes[..self.lead_end]
    }

    pub(super) fn has_hole(&self) -> bool {
        self.hole.is_some()
    }
}

/// The payload as serde's typed read and `from_wire` would give it, or `None` (see the
/// module).
pub(super) fn scan(data: &[u8]) -> Option<ParsedEvent<'_>> {
    whole(data).map(|(event, _)| event)
}

/// `scan` of a stream's next payload: through the hole of the earlier payload `lead`
/// keeps, else after its lead, else whole (leaving its own lead).
pub(super) fn scan_after<'a>(data: &'a [u8], lead: &mut StreamLead) -> Option<ParsedEvent<'a>> {
    if let Some(hole) = &lead.hole
        && let Some(event) = hole.fill(&lead.bytes, data)
    {
        return Some(event);
    }
    if lead.lead_end > 0
        && let Some(rest) = data.strip_prefix(&lead.bytes[..lead.lead_end])
    {
        // The lead is valid UTF-8 ending in an ASCII comma: the rest is checked alone.
        let (event, _) = read_all(rest, Scan::event_fields)?;
        // The payload has the same lead: it keeps it, and gives the hole if it has one.
        if data.len() <= KEEP_MAX
            && let Some(hole) = Hole::of(data, &event)
        {
            lead.bytes.clear();
            lead.bytes.extend_from_slice(data);
            lead.hole = Some(hole);
        }
        return Some(event);
    }
    let (event, lead_end) = whole(data)?;
    lead.bytes.clear();
    if data.len() <= KEEP_MAX {
        lead.bytes.extend_from_slice(data);
        lead.hole = Hole::of(data, &event);
    } else {
        // A payload this large is kept for its lead only: a copy of it would be one
        // more of the event's size in memory, for a hole that no like payload fills.
        lead.bytes.extend_from_slice(&data[..lead_end]);
        lead.hole = None;
    }
    lead.lead_end = lead_end;
    Some(event)
}

/// The largest payload `StreamLead` keeps whole (for its hole).
const KEEP_MAX: usize = 64 * 1024;

/// The payload scanned from its first byte, and where its lead ends.
fn whole(data: &[u8]) -> Option<(ParsedEvent<'_>, usize)> {
    read_all(data, Scan::event)
}

/// What `read` takes from `bytes` when they are UTF-8 and nothing but whitespace
/// follows it.
fn read_all<'a, T>(bytes: &'a [u8], read: impl FnOnce(&mut Scan<'a>) -> Option<T>) -> Option<T> {
    let mut s = Scan {
        text: std::str::from_utf8(bytes).ok()?,
        at: 0,
    };
    let taken = read(&mut s)?;
    s.ws();
    (s.at == bytes.len()).then_some(taken)
}

/// Reads a field into `slot`; a field seen twice is left to serde, which refuses it.
fn once<T>(slot: &mut Option<T>, read: impl FnOnce() -> Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(read()?);
    Some(())
}

impl<'a> Scan<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// The next byte after whitespace is `c`: taken.
    fn eat(&mut self, c: u8) -> bool {
        // Compact JSON has no whitespace: look for `c` first.
        if self.peek() == Some(c) {
            self.at += 1;
            return true;
        }
        self.ws();
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// Where a string without escapes or control characters lies (between its quotes).
    fn string_span(&mut self) -> Option<(usize, usize)> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        let b = self.bytes();
        let end = plain_run_end(b, start);
        if b.get(end) != Some(&b'"') {
            return None;
        }
        self.at = end + 1;
        Some((start, end))
    }

    /// A string without escapes or control characters, as `&str`.
    fn string(&mut self) -> Option<&'a str> {
        let (start, end) = self.string_span()?;
        // Both ends are ASCII quotes of valid UTF-8: char boundaries.
        self.text.get(start..end)
    }

    /// `null` (taken) or not.
    fn null(&mut self) -> bool {
        self.ws();
        if self.bytes()[self.at..].starts_with(b"null") {
            self.at += 4;
            true
        } else {
            false
        }
    }

    /// `null` or a string.
    fn opt_text(&mut self) -> Option<Option<&'a str>> {
        self.nullable(Self::string)
    }

    /// `null` or a plain non-negative integer that fits a `u64`.
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        let start = self.at;
        let digits = self.bytes()[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 || (digits > 1 && self.bytes()[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.bytes().get(start + digits) {
            return None;
        }
        let mut n = 0u64;
        for &b in &self.bytes()[start..start + digits] {
            n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        }
        self.at = start + digits;
        Some(Some(n))
    }

    /// An object's fields: `field` is called with each key, positioned at its value, and
    /// reads the value (or refuses the payload).
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if !self.eat(b':') {
                return None;
            }
            field(self, key)?;
            if self.eat(b'}') {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    /// Skips any JSON value (strings as `string` takes them).
    fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            // Skipped: no `&str` (its char-boundary checks) needed.
            b'"' => self.string_span().map(drop),
            b'{' => self.object(|s, _| s.skip(depth + 1)),
            b'[' => {
                self.at += 1;
                if self.eat(b']') {
                    return Some(());
                }
                loop {
                    self.skip(depth + 1)?;
                    if self.eat(b']') {
                        return Some(());
                    }
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => self.number(),
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        if self.bytes()[self.at..].starts_with(w) {
            self.at += w.len();
            Some(())
        } else {
            None
        }
    }

    /// A number by JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let b = self.bytes();
        let mut i = self.at;
        let digits = |i: &mut usize| {
            let n = b[*i..].iter().take_while(|c| c.is_ascii_digit()).count();
            *i += n;
            n
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        let int_start = i;
        let n = digits(&mut i);
        if n == 0 || (n > 1 && b[int_start] == b'0') {
            return None;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return None;
            }
        }
        self.at = i;
        Some(())
    }

    /// `null` (taken, as `None`) or what `read` reads.
    fn nullable<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.null() {
            return Some(None);
        }
        read(self).map(Some)
    }

    /// The payload, and where its lead ends (`StreamLead`; 0: it has none).
    fn event(&mut self) -> Option<(ParsedEvent<'a>, usize)> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some((ParsedEvent::default(), 0));
        }
        self.event_fields()
    }

    /// The top-level object's fields from a key on, none read before it (after the
    /// `{`, or after a lead's comma), and where the lead ends: after the last comma
    /// passed with nothing read yet.
    fn event_fields(&mut self) -> Option<(ParsedEvent<'a>, usize)> {
        let (mut choices, mut usage, mut text, mut error) = (None, None, None, None);
        let mut lead_end = 0;
        loop {
            let key = self.string()?;
            if !self.eat(b':') {
                return None;
            }
            match key {
                "choices" => once(&mut choices, || self.choices()),
                "usage" => once(&mut usage, || self.nullable(Self::usage)),
                "text" => once(&mut text, || self.opt_text()),
                // A non-null error takes serde's read (its `Value`).
                "error" => once(&mut error, || self.null().then_some(())),
                _ => self.skip(1),
            }?;
            if self.eat(b'}') {
                break;
            }
            if !self.eat(b',') {
                return None;
            }
            if choices.is_none() && usage.is_none() && text.is_none() && error.is_none() {
                lead_end = self.at;
            }
        }
        let choice = choices.flatten();
        let message = choice.and_then(|c| c.message);
        let text = message
            .and_then(|m| m.content)
            .or(choice.and_then(|c| c.text))
            .or(text.flatten());
        let event = ParsedEvent {
            text: text.map(Cow::Borrowed),
            reasoning: message.and_then(|m| m.reasoning).map(Cow::Borrowed),
            usage: usage.flatten().map(Box::new),
            ..ParsedEvent::default()
        };
        Some((event, lead_end))
    }

    /// `choices`: every element a choice object, the first kept.
    fn choices(&mut self) -> Option<Option<Choice<'a>>> {
        if !self.eat(b'[') {
            return None;
        }
        let mut first = None;
        if self.eat(b']') {
            return Some(None);
        }
        loop {
            let choice = self.choice()?;
            first.get_or_insert(choice);
            if self.eat(b']') {
                return Some(first);
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    fn choice(&mut self) -> Option<Choice<'a>> {
        let (mut delta, mut message, mut text) = (None, None, None);
        self.object(|s, key| match key {
            "delta" => once(&mut delta, || s.nullable(Self::message)),
            "message" => once(&mut message, || s.nullable(Self::message)),
            "text" => once(&mut text, || s.opt_text()),
            _ => s.skip(2),
        })?;
        Some(Choice {
            message: delta.flatten().or(message.flatten()),
            text: text.flatten(),
        })
    }

    fn message(&mut self) -> Option<Message<'a>> {
        let (mut content, mut reasoning_content, mut reasoning) = (None, None, None);
        self.object(|s, key| match key {
            "content" => once(&mut content, || s.opt_text()),
            "reasoning_content" => once(&mut reasoning_content, || s.opt_text()),
            "reasoning" => once(&mut reasoning, || s.opt_text()),
            _ => s.skip(3),
        })?;
        Some(Message {
            content: content.flatten(),
            reasoning: reasoning_content.flatten().or(reasoning.flatten()),
        })
    }

    fn usage(&mut self) -> Option<Usage> {
        let (mut prompt, mut completion, mut total, mut details) = (None, None, None, None);
        self.object(|s, key| match key {
            "prompt_tokens" => once(&mut prompt, || s.opt_u64()),
            "completion_tokens" => once(&mut completion, || s.opt_u64()),
            "total_tokens" => once(&mut total, || s.opt_u64()),
            "completion_tokens_details" => once(&mut details, || s.nullable(Self::details)),
            _ => s.skip(2),
        })?;
        let [prompt, completion, total] = [prompt, completion, total].map(Option::flatten);
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: total,
            reasoning_tokens: details.flatten().flatten(),
        })
    }

    /// `completion_tokens_details`: its `reasoning_tokens`.
    fn details(&mut self) -> Option<Option<u64>> {
        let mut reasoning = None;
        self.object(|s, key| match key {
            "reasoning_tokens" => once(&mut reasoning, || s.opt_u64()),
            _ => s.skip(3),
        })?;
        Some(reasoning.flatten())
    }
}
