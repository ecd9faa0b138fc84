//! LiveCodeBench's private test cases: base64 of zlib of a pickled Python `str` holding a JSON
//! list. A pickled `str` uses a handful of opcodes, read here; anything else is refused (no
//! object is ever built from the pickle, so it cannot run code).

use std::io::Read;

use base64::Engine;

/// The JSON text inside `encoded` (base64 → zlib → pickle of a str).
pub fn decode_private_cases(encoded: &str) -> Result<String, String> {
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let mut pickled = Vec::new();
    flate2::read::ZlibDecoder::new(compressed.as_slice())
        .read_to_end(&mut pickled)
        .map_err(|e| format!("not zlib data: {e}"))?;
    pickled_str(&pickled)
}

/// The string of a pickle whose whole content is one `str` (protocols 1 to 5, and 0's
/// `V` opcode for ASCII text).
pub fn pickled_str(data: &[u8]) -> Result<String, String> {
    let mut at = 0;
    let mut value: Option<String> = None;
    let take = |at: &mut usize, n: usize| -> Result<&[u8], String> {
        let end = at
            .checked_add(n)
            .filter(|end| *end <= data.len())
            .ok_or("the pickle ends early")?;
        let bytes = &data[*at..end];
        *at = end;
        Ok(bytes)
    };
    let len = |bytes: &[u8]| -> usize {
        bytes.iter().rev().fold(0usize, |n, b| {
            n.saturating_mul(256).saturating_add(*b as usize)
        })
    };
    loop {
        let op = *take(&mut at, 1)?.first().expect("one byte");
        let text = match op {
            // PROTO n, FRAME size: framing only.
            0x80 => {
                take(&mut at, 1)?;
                continue;
            }
            0x95 => {
                take(&mut at, 8)?;
                continue;
            }
            // MEMOIZE, BINPUT i, LONG_BINPUT i: the memo is never read back.
            0x94 => continue,
            b'q' => {
                take(&mut at, 1)?;
                continue;
            }
            b'r' => {
                take(&mut at, 4)?;
                continue;
            }
            b'.' => break,
            // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8: length then UTF-8.
            0x8c => {
                let n = len(take(&mut at, 1)?);
                take(&mut at, n)?
            }
            b'X' => {
                let n = len(take(&mut at, 4)?);
                take(&mut at, n)?
            }
            0x8d => {
                let n = len(take(&mut at, 8)?);
                take(&mut at, n)?
            }
            other => {
                return Err(format!(
                    "pickle opcode 0x{other:02x} at byte {} is not part of a pickled str",
                    at - 1
                ));
            }
        };
        if value.is_some() {
            return Err("the pickle holds more than one value".into());
        }
        let text = std::str::from_utf8(text).map_err(|e| format!("the str is not UTF-8: {e}"))?;
        value = Some(text.to_string());
    }
    value.ok_or_else(|| "the pickle holds no str".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const CASES: &str = r#"[{"input": "1\n", "output": "2"}]"#;

    #[test]
    fn reads_a_pickled_str_of_each_protocol() {
        // pickle.dumps(CASES, protocol=p) for p = 2, 3 (BINUNICODE + BINPUT) and 4, 5
        // (FRAME, SHORT_BINUNICODE, MEMOIZE).
        let p2 = "800258210000005b7b22696e707574223a2022315c6e222c20226f7574707574223a202232227d5d71002e";
        let p3 = "800358210000005b7b22696e707574223a2022315c6e222c20226f7574707574223a202232227d5d71002e";
        let p4 = "80049525000000000000008c215b7b22696e707574223a2022315c6e222c20226f7574707574223a202232227d5d942e";
        let p5 = "80059525000000000000008c215b7b22696e707574223a2022315c6e222c20226f7574707574223a202232227d5d942e";
        for p in [p2, p3, p4, p5] {
            assert_eq!(pickled_str(&hex(p)).unwrap(), CASES);
        }
        // A str past 255 bytes takes BINUNICODE with a 4-byte length, even at protocol 4.
        let mut long = hex("80049597010000000000005890010000");
        long.extend("é".repeat(200).as_bytes());
        long.extend(hex("942e"));
        assert_eq!(pickled_str(&long).unwrap(), "é".repeat(200));
    }

    #[test]
    fn refuses_anything_else() {
        // An int (BININT1), a global (code), a truncated str, two strs.
        assert!(
            pickled_str(&hex("80044b052e"))
                .unwrap_err()
                .contains("0x4b")
        );
        assert!(pickled_str(b"cos\nsystem\n.").is_err());
        assert!(
            pickled_str(&hex("80048c0561622e"))
                .unwrap_err()
                .contains("ends early")
        );
        assert!(
            pickled_str(&hex("8c01618c01622e"))
                .unwrap_err()
                .contains("more than one")
        );
        assert!(pickled_str(&hex("2e")).unwrap_err().contains("no str"));
    }

    #[test]
    fn decodes_base64_zlib_pickle() {
        use std::io::Write;
        let mut pickle = hex("80049525000000000000008c21");
        pickle.extend(CASES.as_bytes());
        pickle.extend(hex("942e"));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&pickle).unwrap();
        let encoded = base64::engine::general_purpose::STANDARD.encode(z.finish().unwrap());
        assert_eq!(decode_private_cases(&encoded).unwrap(), CASES);
        assert!(decode_private_cases("not base64!").is_err());
    }
}
