//! idem's portable SHA-256 against the NIST vectors and against the `sha2` crate, and the
//! `Sha256` of the build (portable, or `sha2` with the feature) against both.

use idem_protocol::sha256::{Sha256, portable};
use proptest::prelude::*;
use sha2::Digest as _;

fn hex(data: impl AsRef<[u8]>) -> String {
    let digest = portable::Sha256::digest(&data);
    assert_eq!(
        Sha256::digest(&data),
        digest,
        "the build's Sha256 and the portable one"
    );
    hex::encode(digest)
}

/// FIPS 180-4's examples and the NIST byte-oriented vectors.
#[test]
fn digests_the_nist_vectors() {
    assert_eq!(
        hex(""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        hex("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
    assert_eq!(
        hex(
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno\
             ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
        ),
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
    );
    assert_eq!(
        hex(vec![b'a'; 1_000_000]),
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
    );
}

/// Every padding length: a message of 0 to 200 bytes, so the length falls at each place of
/// the last block and the padding takes one block or two.
#[test]
fn pads_every_length_as_sha2_does() {
    let data: Vec<u8> = (0..200u8).map(|i| i.wrapping_mul(31)).collect();
    for len in 0..data.len() {
        assert_eq!(
            portable::Sha256::digest(&data[..len]),
            <[u8; 32]>::from(sha2::Sha256::digest(&data[..len])),
            "{len} bytes"
        );
    }
}

proptest! {
    /// Fed in any pieces, the digest is `sha2`'s of the whole.
    #[test]
    fn agrees_with_sha2_in_any_pieces(
        data in proptest::collection::vec(any::<u8>(), 0..600),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut % (data.len() + 1)).collect();
        cuts.sort_unstable();
        let mut hasher = portable::Sha256::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([data.len()]) {
            hasher.update(&data[from..cut]);
            from = cut;
        }
        prop_assert_eq!(hasher.finalize(), <[u8; 32]>::from(sha2::Sha256::digest(&data)));
    }
}
