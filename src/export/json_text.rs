//! JSON text of the per-record line's numbers and strings, byte for byte as serde_json
//! writes them, without its generic serializer: the line is written once per request on
//! the collector thread.
//!
//! Short pieces are copied as fixed 32-byte windows and cut back (`push_window`), and
//! numbers' digits are stored straight into the line: a copy of a length known only at
//! run time is a `memcpy` call, and a line made ~120 of them (the `collector_record`
//! bench; `memcpy` was a tenth of the collector thread's CPU).

/// Bytes `push_window` may copy beyond the piece it appends.
pub const WINDOW: usize = 32;

/// Appends `bytes[from..to]` (at most `WINDOW` bytes) by copying the fixed window
/// `bytes[from..from + WINDOW]`, which must lie within `bytes`, and cutting it back.
#[inline]
pub fn push_window(out: &mut Vec<u8>, bytes: &[u8], from: usize, to: usize) {
    debug_assert!(to - from <= WINDOW);
    let at = out.len();
    let window: &[u8; WINDOW] = bytes[from..from + WINDOW]
        .try_into()
        .expect("a whole window");
    out.extend_from_slice(window);
    out.truncate(at + (to - from));
}

/// Whether serde_json escapes `b` in a string: control characters, `"` and `\`.
fn escaped(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// `s` as a JSON string, as serde_json writes it. Ids (UUIDs) need no escaping: they are
/// checked in one pass and copied whole rather than through serde_json's per-byte loop.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    // Without early exit, so the check runs over whole words.
    if s.bytes().fold(false, |any, b| any | escaped(b)) {
        serde_json::to_writer(&mut *out, s).expect("JSON into memory");
        return;
    }
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// A string of the program's own (a unit, a phase, a fixed id) that needs no escaping, as
/// JSON: quoted without serde's per-byte escape check, a tenth of the line's time.
pub fn push_plain(out: &mut Vec<u8>, s: &'static str) {
    debug_assert!(!s.bytes().any(escaped), "{s:?} needs escaping");
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// A whole number, as serde_json writes it. Its digits are stored straight into the line
/// (a fixed block appended, filled, cut back): made in a buffer and copied out, the
/// digits' narrow stores stalled the wide load that copied them.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    let len = digit_count(n);
    let at = out.len();
    out.extend_from_slice(&[0; 20]);
    write_digits(&mut out[at..at + len], n);
    out.truncate(at + len);
}

/// Decimal digits of `n` (1 for 0).
fn digit_count(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Writes the last `dst.len()` decimal digits of `n` into `dst`, with leading zeros when
/// `n` has fewer; two at a time from the last.
fn write_digits(dst: &mut [u8], mut n: u64) {
    let mut end = dst.len();
    while end >= 2 {
        let i = (n % 100) as usize * 2;
        dst[end - 2..end].copy_from_slice(&DIGIT_PAIRS[i..i + 2]);
        n /= 100;
        end -= 2;
    }
    if end == 1 {
        dst[0] = b'0' + (n % 10) as u8;
    }
}

/// A signed whole number, as serde_json writes it.
pub fn push_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    push_u64(out, n.unsigned_abs());
}

/// A metric value in display units: whole-number metrics as integers, others as floats.
pub fn push_value(out: &mut Vec<u8>, value: f64, integer: bool) {
    if integer && value.fract() == 0.0 && value.abs() < 9.0e15 {
        push_i64(out, value as i64);
    } else if !push_whole_micros(out, value) {
        serde_json::to_writer(&mut *out, &value).expect("JSON into memory");
    }
}

/// Writes `value` as serde_json would when it is a whole number of millionths (a time in
/// ms from whole ns, most of a line's floats): that number's digits with the point six
/// places in. False (nothing written) for any other value. With `METRIC_PIECES`, by
/// callgrind over a 3,000-request streamed run: `format_line` 53.1M -> 44.4M instructions;
/// taking n's digits from `itoa` and placing the point after gave 51.8M, hence the digit
/// pairs written here.
///
/// Why it is the same text: `value` is the double nearest `n / 10^6` (checked), so that
/// decimal reads back as `value`; with at most 15 significant digits, every other decimal
/// of as many or fewer digits lies more than half an ulp away, so it is also the shortest
/// one, which is what serde_json prints; and from 1e-5 up to 1e16 serde_json prints it
/// without an exponent, with `.0` when there is no fraction.
pub fn push_whole_micros(out: &mut Vec<u8>, value: f64) -> bool {
    const MICROS: f64 = 1e6;
    if !(1e-5..1e9).contains(&value) {
        return false;
    }
    // Below 1e15, so exact; the nearest whole number when `value` is one.
    let n = (value * MICROS + 0.5) as u64;
    if n as f64 / MICROS != value {
        return false;
    }
    // The whole part, the point and the fraction's six digits less its trailing zeros
    // (one digit stays), stored straight into the line as `push_u64` does.
    let (whole, mut fraction) = (n / 1_000_000, n % 1_000_000);
    let mut fraction_len = 6;
    while fraction_len > 1 && fraction % 10 == 0 {
        fraction /= 10;
        fraction_len -= 1;
    }
    let whole_len = digit_count(whole);
    let at = out.len();
    out.extend_from_slice(&[0; 24]);
    let text = &mut out[at..at + whole_len + 1 + fraction_len];
    write_digits(&mut text[..whole_len], whole);
    text[whole_len] = b'.';
    write_digits(&mut text[whole_len + 1..], fraction);
    out.truncate(at + whole_len + 1 + fraction_len);
    true
}

/// "00", "01", ... "99".
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_text(value: f64) -> String {
        serde_json::to_string(&value).unwrap()
    }

    fn ours(value: f64) -> String {
        let mut out = Vec::new();
        push_value(&mut out, value, false);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn whole_millionths_print_as_serde_prints_them() {
        for value in [
            1e-5,
            0.00001,
            0.000825,
            0.00099,
            0.1,
            0.25,
            1.0,
            3.0,
            3.425783,
            16.5,
            999_999_999.999_999,
            123_456_789.0,
        ] {
            let mut out = Vec::new();
            assert!(push_whole_micros(&mut out, value), "{value}");
            assert_eq!(String::from_utf8(out).unwrap(), serde_text(value));
        }
        // Outside the range, or not whole millionths: left to serde_json.
        for value in [
            0.0,
            9e-6,
            -1.5,
            1e9,
            0.037644066666666,
            1.0000005,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert!(!push_whole_micros(&mut Vec::new(), value), "{value}");
            if value.is_finite() {
                assert_eq!(ours(value), serde_text(value));
            }
        }
    }

    /// A window appends only its piece, after what the line already holds.
    #[test]
    fn a_window_appends_its_piece_only() {
        let bytes: Vec<u8> = (0..80).collect();
        let mut out = b"ab".to_vec();
        push_window(&mut out, &bytes, 5, 9);
        push_window(&mut out, &bytes, 40, 40);
        push_window(&mut out, &bytes, 10, 10 + WINDOW);
        let mut expected = b"ab".to_vec();
        expected.extend_from_slice(&bytes[5..9]);
        expected.extend_from_slice(&bytes[10..10 + WINDOW]);
        assert_eq!(out, expected);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20000))]

        /// Whole numbers of ns in ms, of every size, and any other double: the line's text
        /// is serde_json's.
        #[test]
        fn values_print_as_serde_prints_them(
            ns in proptest::prop_oneof![
                0u64..2_000,
                0u64..2_000_000,
                0u64..10_000_000_000,
                0u64..2_000_000_000_000_000,
            ],
            bits in proptest::prelude::any::<u64>(),
            near in -3i64..3,
        ) {
            let ms = ns as f64 / 1e6;
            proptest::prop_assert_eq!(ours(ms), serde_text(ms));
            // The doubles just beside a whole millionth are not whole millionths.
            let beside = f64::from_bits(ms.to_bits().saturating_add_signed(near));
            proptest::prop_assert_eq!(ours(beside), serde_text(beside));
            let any = f64::from_bits(bits);
            if any.is_finite() {
                proptest::prop_assert_eq!(ours(any), serde_text(any));
            }
        }

        /// Integers of every size, and whole-number metrics, as serde_json writes them.
        #[test]
        fn integers_print_as_serde_prints_them(
            n in proptest::prelude::any::<u64>(),
            i in proptest::prelude::any::<i64>(),
            small in 0u32..100_000,
            digits in 0u32..20,
        ) {
            let text = |f: &dyn Fn(&mut Vec<u8>)| {
                let mut out = b"x".to_vec();
                f(&mut out);
                String::from_utf8(out).unwrap()
            };
            let serde = |s: String| format!("x{s}");
            // Every length of digits, and the numbers around each power of ten.
            let power = 10u64.pow(digits);
            for n in [n, power, power - 1, power + 1, u64::MAX] {
                proptest::prop_assert_eq!(text(&|o| push_u64(o, n)), serde(serde_json::to_string(&n).unwrap()));
            }
            for i in [i, i64::MIN, i64::MAX, -(small as i64)] {
                proptest::prop_assert_eq!(text(&|o| push_i64(o, i)), serde(serde_json::to_string(&i).unwrap()));
            }
            let tokens = f64::from(small);
            proptest::prop_assert_eq!(
                text(&|o| push_value(o, tokens, true)),
                serde(serde_json::to_string(&(tokens as i64)).unwrap())
            );
            proptest::prop_assert_eq!(
                text(&|o| push_value(o, -tokens, true)),
                serde(serde_json::to_string(&(-tokens as i64)).unwrap())
            );
        }

        /// Any string, ids and text with quotes, backslashes and control characters alike.
        #[test]
        fn strings_print_as_serde_prints_them(
            s in proptest::prelude::any::<String>(),
            id in "[0-9a-f-]{0,40}",
            tricky in "[a-z\"\\\\\x00-\x1f\x7fé]{0,20}",
        ) {
            for s in [s, id, tricky] {
                let mut out = Vec::new();
                push_str(&mut out, &s);
                proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&s).unwrap());
            }
        }
    }
}
