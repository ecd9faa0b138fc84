//! Random identifiers in UUID v4 form (benchmark ids, request ids, conversation ids).

use rand::Rng;

pub fn uuid4(rng: &mut impl Rng) -> String {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{byte:02x}"));
    }
    s
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
    }
}
