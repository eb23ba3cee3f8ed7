//! Criterion benches of the core kernels: the Beta sampler (vectorised per SIMD path, and the
//! scalar f64 reference), the Beta sampler per draw against `rand_distr::Beta`, the update pass,
//! top-B selection, and the fused update + select step.
//! Run with `cargo bench -p bots-core` (or `make bench`, which also runs benches/run.py).

use std::hint::black_box;

use bots_core::{
    aggregate, available_simd_paths, beta_draws, select, set_simd_path, step, thompson_draws, Evidence, Exclude, Prior, Scoring,
    SelectArgs, UpdateArgs, UpdateParams,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use rand_distr::{Beta, Distribution};

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
    for simd in available_simd_paths() {
        g.bench_with_input(BenchmarkId::new("thompson_draws_1M", simd.name()), &simd, |bench, &be| {
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

/// Draws per iteration of the per-draw benches.
const DRAWS: usize = 16_384;

/// Cost per draw of one Beta(a, b) draw, on one thread, for a few representative shapes:
/// `rand_distr::Beta` (Cheng's BB/BC, on rand's xoshiro256++), our scalar f64 sampler
/// (`beta_draws`: Marsaglia–Tsang on xoshiro256++), and our vectorised Thompson draw (one task per
/// draw, `thompson_draws` on the detected SIMD path, in a one-thread pool). Throughput is in draws,
/// so criterion's time per iteration divided by `DRAWS` is ns per draw.
fn per_draw_benches(c: &mut Criterion) {
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool");
    let simd = bots_core::simd_path();
    let mut g = c.benchmark_group("beta_per_draw");
    g.throughput(Throughput::Elements(DRAWS as u64)).sample_size(20);
    let mut out64 = vec![0f64; DRAWS];
    let mut out32 = vec![0f32; DRAWS];
    for (a, b) in [(0.5, 0.5), (2.0, 5.0), (30.0, 0.2), (1e3, 1e3), (1e6, 1e6)] {
        let shape = format!("{a}_{b}");
        let dist = Beta::new(a, b).expect("valid shapes");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        g.bench_function(BenchmarkId::new("rand_distr", &shape), |bench| {
            bench.iter(|| {
                for x in out64.iter_mut() {
                    *x = dist.sample(&mut rng);
                }
                black_box(&out64);
            })
        });
        let mut seed = 0;
        g.bench_function(BenchmarkId::new("ours_scalar_f64", &shape), |bench| {
            bench.iter(|| {
                seed += 1;
                beta_draws(a, b, seed, &mut out64).unwrap();
                black_box(&out64);
            })
        });
        let (alpha, beta) = (vec![a; DRAWS], vec![b; DRAWS]);
        let mut counter = 0;
        g.bench_function(BenchmarkId::new(format!("ours_vector_{}", simd.name()), &shape), |bench| {
            bench.iter(|| {
                counter += 1;
                one_thread.install(|| thompson_draws(simd, &alpha, &beta, 7, counter, &mut out32).unwrap());
                black_box(&out32);
            })
        });
    }
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
    set_simd_path(None);
}

criterion_group!(benches, sampler_benches, per_draw_benches, kernel_benches);
criterion_main!(benches);
