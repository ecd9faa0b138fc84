//! Compact, lossless storage for the per-request values the statistics need.
//!
//! A long run keeps tens of values per request until its end. Most are whole numbers (ns
//! durations, token counts): those take a LEB128 varint of `n << 1` (1 byte for a token
//! count, 3-5 for a duration in ns); any other f64 takes a marker byte and its 8 raw bytes.
//! Decoding gives back the exact bits that were pushed, so every statistic is unchanged.

/// First byte of a value stored as its raw bits (a whole number's first byte is even).
const RAW: u8 = 1;

/// Appends `v` to `out`.
pub fn encode(out: &mut Vec<u8>, v: f64) {
    let n = v as u64;
    // Whole, non-negative and below 2^63 (so `n << 1` fits); the bit test keeps -0.0 raw.
    if n < 1 << 63 && (n as f64).to_bits() == v.to_bits() {
        let mut rest = n << 1;
        while rest >= 0x80 {
            out.push(rest as u8 | 0x80);
            rest >>= 7;
        }
        out.push(rest as u8);
    } else {
        out.push(RAW);
        out.extend_from_slice(&v.to_bits().to_le_bytes());
    }
}

/// The values encoded in `bytes`, in order.
pub fn decode(bytes: &[u8]) -> Decode<'_> {
    Decode { bytes, at: 0 }
}

/// Iterator over encoded values.
#[derive(Debug, Clone)]
pub struct Decode<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Iterator for Decode<'_> {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let first = *self.bytes.get(self.at)?;
        if first == RAW {
            let raw = &self.bytes[self.at + 1..self.at + 9];
            self.at += 9;
            return Some(f64::from_bits(u64::from_le_bytes(
                raw.try_into().expect("8 bytes"),
            )));
        }
        let mut n = 0u64;
        let mut shift = 0;
        loop {
            let b = self.bytes[self.at];
            self.at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        Some((n >> 1) as f64)
    }
}

/// One metric's values over the run, encoded.
#[derive(Debug, Clone, Default)]
pub struct Column {
    bytes: Vec<u8>,
    len: usize,
}

impl Column {
    pub fn push(&mut self, v: f64) {
        encode(&mut self.bytes, v);
        self.len += 1;
    }

    pub fn extend(&mut self, values: &[f64]) {
        for &v in values {
            self.push(v);
        }
    }

    /// Bytes written so far: a record's values lie between two such positions.
    pub fn position(&self) -> usize {
        self.bytes.len()
    }

    /// The encoded bytes (see [`decode`]).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Every value, decoded.
    pub fn to_vec(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.len);
        out.extend(decode(&self.bytes));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind_of_value_bit_for_bit() {
        let values = [
            0.0,
            -0.0,
            1.0,
            63.0,
            64.0,
            127.0,
            128.0,
            16_383.0,
            40_000_000.0,
            (1u64 << 53) as f64,
            (1u64 << 62) as f64,
            (1u64 << 63) as f64,
            9.2e18,
            1e300,
            0.5,
            -3.0,
            1e9 / 7.0,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let mut c = Column::default();
        c.extend(&values);
        let back = c.to_vec();
        assert_eq!(back.len(), values.len());
        for (a, b) in values.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits(), "{a} came back as {b}");
        }
    }

    #[test]
    fn whole_numbers_take_few_bytes() {
        let mut out = Vec::new();
        encode(&mut out, 16.0);
        assert_eq!(out.len(), 1);
        out.clear();
        // 40 ms in ns.
        encode(&mut out, 40_000_000.0);
        assert_eq!(out.len(), 4);
        out.clear();
        encode(&mut out, 2.5);
        assert_eq!(out.len(), 9);
    }

    proptest::proptest! {
        #[test]
        fn any_bits_round_trip(bits in proptest::collection::vec(proptest::num::u64::ANY, 0..50), whole in proptest::collection::vec(0u64..(1 << 53), 0..50)) {
            let values: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).chain(whole.iter().map(|&n| n as f64)).collect();
            let mut c = Column::default();
            c.extend(&values);
            let back: Vec<u64> = c.to_vec().iter().map(|v| v.to_bits()).collect();
            let want: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
            proptest::prop_assert_eq!(back, want);
        }
    }
}
