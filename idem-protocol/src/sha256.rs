//! SHA-256 (FIPS 180-4), the digest behind every key and fingerprint idem stores.
//!
//! idem hashes three things: a scope and key into the store's key, a request into its
//! fingerprint, and a client's derived key. All three need SHA-256 and nothing else of a
//! cryptography library, and the `sha2` crate brings six more crates into every service's
//! build (its digest traits, their array and number types, a CPU feature detector). By default
//! this is the standard algorithm written out, held to `sha2` and to the NIST vectors by the
//! tests (`tests/sha256.rs`).
//!
//! The portable code is several times slower than `sha2` on a CPU with SHA extensions
//! (docs/benchmarks.md, *SHA-256*): about a microsecond more for a small JSON request, a few
//! for 1 KiB, 0.4 ms for 64 KiB. A service whose requests are large, or that counts every
//! microsecond of a replay, turns on the feature `sha2` (of `idem`, or of this crate), and the
//! same type then hashes with `sha2`: the same digests, the CPU's extensions, a larger build.
//!
//! ```
//! use idem_protocol::sha256::Sha256;
//!
//! let mut hasher = Sha256::new();
//! hasher.update(b"ab");
//! hasher.update(b"c");
//! assert_eq!(hasher.finalize(), Sha256::digest(b"abc"));
//! assert_eq!(
//!     hex::encode(Sha256::digest(b"abc")),
//!     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
//! );
//! ```

#[cfg(feature = "sha2")]
pub use self::accelerated::Sha256;
#[cfg(not(feature = "sha2"))]
pub use self::portable::Sha256;

/// With the feature `sha2`: the `sha2` crate behind the same methods.
#[cfg(feature = "sha2")]
mod accelerated {
    use sha2::Digest as _;

    /// A SHA-256 computation fed in pieces: [`update`](Self::update) as often as needed, then
    /// [`finalize`](Self::finalize).
    #[derive(Clone, Debug, Default)]
    pub struct Sha256(sha2::Sha256);

    impl Sha256 {
        /// A computation over no bytes yet.
        pub fn new() -> Self {
            Self(sha2::Sha256::new())
        }

        /// The digest of `data`, in one call.
        pub fn digest(data: impl AsRef<[u8]>) -> [u8; 32] {
            sha2::Sha256::digest(data).into()
        }

        /// Feeds `data`.
        pub fn update(&mut self, data: impl AsRef<[u8]>) {
            self.0.update(data);
        }

        /// Feeds `data` and answers the computation, for chained calls.
        #[must_use]
        pub fn chain_update(self, data: impl AsRef<[u8]>) -> Self {
            Self(self.0.chain_update(data))
        }

        /// The digest of everything fed.
        pub fn finalize(self) -> [u8; 32] {
            self.0.finalize().into()
        }
    }
}

/// The algorithm written out: [`sha256::Sha256`](crate::sha256::Sha256) without the feature `sha2`, and
/// public with it too, so that its tests hold it to `sha2` whatever the build's features.
pub mod portable {
    /// The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
    const ROUND_CONSTANTS: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];

    /// The first 32 bits of the fractional parts of the square roots of the first 8 primes.
    const INITIAL_STATE: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];

    const BLOCK: usize = 64;

    /// A SHA-256 computation fed in pieces: [`update`](Self::update) as often as needed, then
    /// [`finalize`](Self::finalize).
    #[derive(Clone, Debug)]
    pub struct Sha256 {
        state: [u32; 8],
        /// Bytes of an unfinished block, waiting for the rest of it.
        pending: [u8; BLOCK],
        pending_len: usize,
        /// Every byte fed so far, which the padding ends with (in bits).
        total_len: u64,
    }

    impl Default for Sha256 {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Sha256 {
        /// A computation over no bytes yet.
        pub fn new() -> Self {
            Self {
                state: INITIAL_STATE,
                pending: [0; BLOCK],
                pending_len: 0,
                total_len: 0,
            }
        }

        /// The digest of `data`, in one call.
        pub fn digest(data: impl AsRef<[u8]>) -> [u8; 32] {
            let mut hasher = Self::new();
            hasher.update(data);
            hasher.finalize()
        }

        /// Feeds `data`.
        pub fn update(&mut self, data: impl AsRef<[u8]>) {
            let mut data = data.as_ref();
            self.total_len = self.total_len.wrapping_add(data.len() as u64);
            if self.pending_len > 0 {
                let take = (BLOCK - self.pending_len).min(data.len());
                self.pending[self.pending_len..self.pending_len + take]
                    .copy_from_slice(&data[..take]);
                self.pending_len += take;
                data = &data[take..];
                if self.pending_len < BLOCK {
                    return;
                }
                let block = self.pending;
                compress(&mut self.state, &block);
                self.pending_len = 0;
            }
            let mut blocks = data.chunks_exact(BLOCK);
            for block in &mut blocks {
                compress(&mut self.state, block.try_into().expect("a whole block"));
            }
            let rest = blocks.remainder();
            self.pending[..rest.len()].copy_from_slice(rest);
            self.pending_len = rest.len();
        }

        /// Feeds `data` and answers the computation, for chained calls.
        #[must_use]
        pub fn chain_update(mut self, data: impl AsRef<[u8]>) -> Self {
            self.update(data);
            self
        }

        /// The digest of everything fed.
        pub fn finalize(mut self) -> [u8; 32] {
            let bits = self.total_len.wrapping_mul(8);
            // The padding: a one bit, zeros to 56 bytes into a block, the length in bits.
            let mut padding = [0u8; BLOCK + 8];
            padding[0] = 0x80;
            let zeros = (BLOCK + 56 - 1 - self.pending_len) % BLOCK;
            let end = 1 + zeros;
            padding[end..end + 8].copy_from_slice(&bits.to_be_bytes());
            let total_len = self.total_len;
            self.update(&padding[..end + 8]);
            debug_assert_eq!(self.pending_len, 0);
            self.total_len = total_len;
            let mut digest = [0u8; 32];
            for (bytes, word) in digest.chunks_exact_mut(4).zip(self.state) {
                bytes.copy_from_slice(&word.to_be_bytes());
            }
            digest
        }
    }

    /// Mixes one 64-byte block into the state. Never inlined, so that a profile tells what
    /// SHA-256 costs from the rest (`bench/instructions.sh` counts it apart); a call per 64 bytes
    /// is nothing beside the block's 64 rounds.
    #[inline(never)]
    fn compress(state: &mut [u32; 8], block: &[u8; BLOCK]) {
        let mut schedule = [0u32; 64];
        for (word, bytes) in schedule.iter_mut().zip(block.chunks_exact(4)) {
            *word = u32::from_be_bytes(bytes.try_into().expect("four bytes"));
        }
        for t in 16..64 {
            let s0 = schedule[t - 15].rotate_right(7)
                ^ schedule[t - 15].rotate_right(18)
                ^ (schedule[t - 15] >> 3);
            let s1 = schedule[t - 2].rotate_right(17)
                ^ schedule[t - 2].rotate_right(19)
                ^ (schedule[t - 2] >> 10);
            schedule[t] = schedule[t - 16]
                .wrapping_add(s0)
                .wrapping_add(schedule[t - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
        for (constant, word) in ROUND_CONSTANTS.iter().zip(schedule) {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let choice = (e & f) ^ (!e & g);
            let t1 = h
                .wrapping_add(s1)
                .wrapping_add(choice)
                .wrapping_add(*constant)
                .wrapping_add(word);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let majority = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(majority);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (word, value) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *word = word.wrapping_add(value);
        }
    }
}
