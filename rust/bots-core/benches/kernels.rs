//! Criterion benches of the core kernels: the Beta sampler (vectorised per backend, and the
//! scalar f64 reference), the update pass, top-B selection, and the fused update + select step.
//! Run with `cargo bench -p bots-core` (or `make bench`, which also runs benches/run.py).

use std::hint::black_box;

use bots_core::{
    aggregate, available_backends, beta_draws, select, set_backend, step, thompson_draws, Evidence, Exclude, Prior, Scoring, SelectArgs,
    UpdateArgs, UpdateParams,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const N: usize = 1_000_000;
const B: usize = 256;

/// SplitMix64: a self-contained source of bench inputs.
struct Inputs(u64);

impl Inputs {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

fn pool(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f32>, Vec<f32>) {
    let mut r = Inputs(1);
    let a = (0..n).map(|_| 1.0 + 30.0 * r.open01()).collect();
    let b = (0..n).map(|_| 1.0 + 30.0 * r.open01()).collect();
    let w: Vec<f32> = (0..n).map(|_| (r.next_u64() % 17) as f32 / 16.0).collect();
    let s = w.iter().map(|&x| (x + 0.25).min(1.0)).collect();
    (a, b, w, s)
}

fn batch_ids(n: usize) -> Vec<i64> {
    (0..B as i64).map(|i| i * (n as i64 / B as i64)).collect()
}

fn sampler_benches(c: &mut Criterion) {
    let (a, b, _, _) = pool(N);
    let mut g = c.benchmark_group("beta_sampler");
    g.throughput(Throughput::Elements(N as u64)).sample_size(10);
    let mut out = vec![0f32; N];
    for backend in available_backends() {
        g.bench_with_input(BenchmarkId::new("thompson_draws_1M", backend.name()), &backend, |bench, &be| {
            let mut counter = 0;
            bench.iter(|| {
                counter += 1;
                thompson_draws(be, &a, &b, 7, counter, &mut out).unwrap();
                black_box(&out);
            })
        });
    }
    let mut scalar = vec![0f64; N / 10];
    g.throughput(Throughput::Elements((N / 10) as u64));
    g.bench_function("scalar_f64_100k", |bench| bench.iter(|| beta_draws(5.0, 7.0, 3, black_box(&mut scalar)).unwrap()));
    g.finish();
}

fn kernel_benches(c: &mut Criterion) {
    let (mut a, mut b, w, s) = pool(N);
    let ids = batch_ids(N);
    let succ = vec![8.0; B];
    let batch = aggregate(N, &ids, &succ, &[16.0]).unwrap();
    let params = UpdateParams { lam: 0.1, rho: 0.1, n_rollouts: 16.0 };
    let mut g = c.benchmark_group("kernels_1M");
    g.throughput(Throughput::Elements(N as u64)).sample_size(10);
    let args = UpdateArgs {
        prior_alpha: Prior::Scalar(1.0),
        prior_beta: Prior::Scalar(1.0),
        batch: &batch,
        evidence: Evidence::Interpolation { weak: &w, strong: &s, mu: 0.4 },
        params,
    };
    g.bench_function("update_interpolation", |bench| bench.iter(|| step(&mut a, &mut b, Some(args), None).unwrap()));
    g.bench_function("select_top256_greedy", |bench| {
        bench.iter(|| black_box(select(&a, &b, B, 0.5, Scoring::Greedy, Exclude::None).unwrap()))
    });
    let mut counter = 0;
    g.bench_function("select_top256_thompson", |bench| {
        bench.iter(|| {
            counter += 1;
            black_box(select(&a, &b, B, 0.5, Scoring::Thompson { seed: 1, counter }, Exclude::None).unwrap())
        })
    });
    g.bench_function("fused_update_select", |bench| {
        bench.iter(|| {
            counter += 1;
            let sel = SelectArgs { k: B, target: 0.5, scoring: Scoring::Thompson { seed: 1, counter }, exclude: Exclude::None, hint: None };
            black_box(step(&mut a, &mut b, Some(args), Some(sel)).unwrap())
        })
    });
    g.finish();
    set_backend(None);
}

criterion_group!(benches, sampler_benches, kernel_benches);
criterion_main!(benches);
