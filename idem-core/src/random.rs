//! Random numbers for the runtime: lease tokens, jitter, and the memory store's hash seeds.
//!
//! A token must be unique among every claim of a key, in every process, and nothing more: it
//! fences, it is never a secret. So each thread draws from its own xoshiro256++ generator,
//! seeded once from the operating system, which costs nanoseconds where a system call per
//! claim would cost a fraction of a microsecond; and the crate needs no `rand` (whose ChaCha
//! and its dependencies were a seventh of the build of a service that adds idem).

use std::cell::Cell;

thread_local! {
    static GENERATOR: Cell<[u64; 4]> = Cell::new(seed());
}

/// 64 random bits.
pub(crate) fn u64() -> u64 {
    GENERATOR.with(|cell| {
        let mut state = cell.get();
        let value = next(&mut state);
        cell.set(state);
        value
    })
}

/// 128 random bits.
pub(crate) fn u128() -> u128 {
    (u128::from(u64()) << 64) | u128::from(u64())
}

/// 32 random bytes: store keys, for tests.
#[cfg(test)]
pub(crate) fn bytes32() -> [u8; 32] {
    let mut bytes = [0; 32];
    for chunk in bytes.chunks_exact_mut(8) {
        chunk.copy_from_slice(&u64().to_le_bytes());
    }
    bytes
}

/// A number in `[0, 1)`, evenly spread: for jitter.
pub(crate) fn unit() -> f64 {
    // The top 53 bits, the precision of an `f64`.
    (u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// One step of xoshiro256++ (Blackman and Vigna).
fn next(state: &mut [u64; 4]) -> u64 {
    let result = state[0]
        .wrapping_add(state[3])
        .rotate_left(23)
        .wrapping_add(state[0]);
    let shifted = state[1] << 17;
    state[2] ^= state[0];
    state[3] ^= state[1];
    state[1] ^= state[2];
    state[0] ^= state[3];
    state[2] ^= shifted;
    state[3] = state[3].rotate_left(45);
    result
}

/// A thread's seed, from the operating system. Should it have none to give, the clock, the
/// process and the thread make one: enough for uniqueness, which is all a token needs.
fn seed() -> [u64; 4] {
    let mut bytes = [0u8; 32];
    if getrandom::fill(&mut bytes).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let place = &bytes as *const _ as usize;
        let fallback = [
            now as u64,
            (now >> 64) as u64,
            u64::from(std::process::id()),
            place as u64,
        ];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(fallback) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
    }
    let mut state = [0u64; 4];
    for (word, chunk) in state.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
    }
    // xoshiro's one bad state is all zeros; splitmix the seed so that no input leads there.
    let mut mix = state[0] ^ 0x9e37_79b9_7f4a_7c15;
    for word in &mut state {
        mix = mix.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = mix ^ *word;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        *word = z ^ (z >> 31);
    }
    state
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn tokens_do_not_repeat_within_a_thread_or_across_threads() {
        let mut seen: HashSet<u128> = (0..10_000).map(|_| u128()).collect();
        let others: Vec<u128> = std::thread::spawn(|| (0..10_000).map(|_| u128()).collect())
            .join()
            .unwrap();
        for token in others {
            assert!(seen.insert(token), "a token repeated across threads");
        }
        assert_eq!(seen.len(), 20_000);
    }

    #[test]
    fn units_fall_in_zero_to_one_and_spread_over_it() {
        let draws: Vec<f64> = (0..10_000).map(|_| unit()).collect();
        assert!(draws.iter().all(|draw| (0.0..1.0).contains(draw)));
        // Each tenth of the interval gets its share, give or take a generous margin.
        for tenth in 0..10 {
            let low = f64::from(tenth) / 10.0;
            let count = draws
                .iter()
                .filter(|d| (low..low + 0.1).contains(*d))
                .count();
            assert!(
                (700..1300).contains(&count),
                "tenth {tenth} got {count} of 10,000"
            );
        }
    }
}
