//! The benchmarks' shared parts: the payments-like handler ([`payment`]) and the idem servers
//! that run it ([`server`]). `bench/run.sh` measures them over HTTP with wrk (the binary
//! `idem-bench`), `bench/instructions.sh` in process under callgrind (the binary
//! `idem-instructions`); docs/benchmarks.md says how to run both and what each figure means.

pub mod payment;
pub mod server;
