//! Random identifiers in UUID v4 form (benchmark ids, request ids, conversation ids).

use rand::Rng;

pub fn uuid4(rng: &mut impl Rng) -> String {
    format_uuid(&uuid4_bytes(rng))
}

/// The 16 bytes of a random UUID v4: what [`uuid4`] formats. Kept in this form where many
/// ids wait to be used (16 bytes each instead of a 36-byte string on the heap).
pub fn uuid4_bytes(rng: &mut impl Rng) -> [u8; 16] {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    b
}

/// `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`, lower-case hex.
pub fn format_uuid(b: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Bytes first, one string at the end: pushing 36 chars one by one (a capacity check
    // and a UTF-8 encode each) was most of a request id's cost.
    let mut text = [b'-'; 36];
    let mut at = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1;
        }
        text[at] = HEX[usize::from(byte >> 4)];
        text[at + 1] = HEX[usize::from(byte & 0x0f)];
        at += 2;
    }
    String::from_utf8(text.to_vec()).expect("hex digits and dashes are ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn shape_and_determinism() {
        let mut a = rand::rngs::ChaCha8Rng::seed_from_u64(7);
        let mut b = rand::rngs::ChaCha8Rng::seed_from_u64(7);
        let x = uuid4(&mut a);
        assert_eq!(x, uuid4(&mut b));
        assert_eq!(x.len(), 36);
        assert_eq!(&x[14..15], "4");
        assert!(matches!(&x[19..20], "8" | "9" | "a" | "b"));
        assert_eq!(x.matches('-').count(), 4);
        // The same text the standard formatter gives.
        let b = [
            0x0f, 0xa0, 0x12, 0xff, 0, 1, 0x4b, 0xc3, 0x9d, 0x10, 0xee, 0x7f, 0x80, 2, 3, 4,
        ];
        let want: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let want = format!(
            "{}-{}-{}-{}-{}",
            &want[..8],
            &want[8..12],
            &want[12..16],
            &want[16..20],
            &want[20..]
        );
        assert_eq!(format_uuid(&b), want);
    }
}
