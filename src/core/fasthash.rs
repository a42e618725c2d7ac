//! A fast, non-cryptographic hasher for in-process sets and maps whose keys
//! are not attacker-chosen in bulk (the allocator's in-use set: a claim's
//! search looks up each candidate's `(driver, pool, device)`): the std
//! SipHash costs about 10x more per short string, and a search asks a few
//! hundred of them. The FxHash mix (rustc's): multiply-rotate per word.

use std::hash::{BuildHasherDefault, Hasher};

/// The hasher ([`FastMap`], [`FastSet`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A `HashSet` with [`FastHasher`].
pub type FastSet<T> = std::collections::HashSet<T, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that differ only in where a string ends (`str` hashing writes a
    /// terminator) or in one byte past a word hash apart, and a set of them
    /// answers as std's does.
    #[test]
    fn the_fast_set_tells_keys_apart_as_a_std_set_does() {
        let keys: Vec<(String, String, String)> = (0..300)
            .map(|i| (format!("d{}", i % 7), format!("pool{}", i % 3), format!("device-{i:08}")))
            .chain([("ab".into(), "c".into(), "".into()), ("a".into(), "bc".into(), "".into())])
            .collect();
        let fast: FastSet<(&str, &str, &str)> =
            keys.iter().step_by(2).map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
        let std: std::collections::HashSet<(&str, &str, &str)> =
            keys.iter().step_by(2).map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
        for (a, b, c) in &keys {
            let k = (a.as_str(), b.as_str(), c.as_str());
            assert_eq!(fast.contains(&k), std.contains(&k), "{k:?}");
        }
        let mut h1 = FastHasher::default();
        h1.write(b"abcdefgh1");
        let mut h2 = FastHasher::default();
        h2.write(b"abcdefgh2");
        assert_ne!(h1.finish(), h2.finish());
    }
}
