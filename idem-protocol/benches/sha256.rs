//! idem's portable SHA-256 beside the `sha2` crate (the feature `sha2`) (which uses the CPU's SHA extensions where
//! it has them), on the sizes idem hashes: a store key's input, a small JSON body, a large one.
//!
//! `cargo bench -p idem-protocol --bench sha256`; docs/benchmarks.md, *SHA-256*, has figures.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sha2::Digest as _;

fn digests(c: &mut Criterion) {
    let mut group = c.benchmark_group("sha256");
    for size in [100usize, 1024, 64 * 1024] {
        let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("idem", size), &data, |b, data| {
            b.iter(|| idem_protocol::sha256::portable::Sha256::digest(black_box(data)))
        });
        group.bench_with_input(BenchmarkId::new("sha2", size), &data, |b, data| {
            b.iter(|| sha2::Sha256::digest(black_box(data)))
        });
    }
    group.finish();
}

criterion_group!(benches, digests);
criterion_main!(benches);
