//! Tests of the public entry points (each module's own unit tests live beside its code).

mod oracle;
mod properties;
mod select;
mod shards;
mod update;

use crate::rng::Xoshiro256pp;

/// A pool with small integer counts: many exact ties in the posterior mean.
fn pool_with_ties(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = Xoshiro256pp::from_seed(seed);
    let a = (0..n).map(|_| 1.0 + (r.next_u64() % 6) as f64).collect();
    let b = (0..n).map(|_| 1.0 + (r.next_u64() % 6) as f64).collect();
    (a, b)
}

/// A pool with shapes uniform in [1, 21).
fn pool_uniform(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = Xoshiro256pp::from_seed(seed);
    let a = (0..n).map(|_| 1.0 + 20.0 * r.open01()).collect();
    let b = (0..n).map(|_| 1.0 + 20.0 * r.open01()).collect();
    (a, b)
}
