//! Our samplers against `rand_distr` as an independent reference. The hot path keeps its own
//! generators (counter-based Philox for the vectorised Thompson draw, xoshiro256++ for the scalar
//! f64 sampler) and its own Marsaglia–Tsang gamma code; `rand_distr::Beta` (Cheng's algorithms
//! BB and BC, a different method from the ratio of gammas) and `rand_distr::Gamma`, driven by
//! ChaCha12 (`StdRng`), are the reference.
//!
//! Each comparison is a two-sample Kolmogorov–Smirnov test of `N` of our draws against `N` of the
//! reference's, at level `LEVEL` (asymptotic critical value), plus the sample mean and variance
//! against the theoretical moments within `SE` standard errors. Seeds are fixed, so every run
//! draws the same numbers: the tests are deterministic.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Beta, Distribution, Gamma};

use crate::rng::Xoshiro256pp;
use crate::sampler::{gamma_ge1, ln_gamma};
use crate::{beta_draws, simd_path, thompson_draws};

/// Draws per sample, ours and the reference's alike.
const N: usize = 50_000;
/// Significance level of each KS test.
const LEVEL: f64 = 1e-4;
/// Moment tolerance, in standard errors.
const SE: f64 = 6.0;

/// Beta shapes from 1e-3 to 1e6, symmetric and skewed both ways. Shapes below 1 take the exact
/// scalar sampler on both paths (the vectorised path hands them to it); the others exercise the
/// f32 Marsaglia–Tsang code of the vectorised path.
const BETA_SHAPES: [(f64, f64); 12] = [
    (1e-3, 1e-3),
    (1e-3, 1.0),
    (1e-3, 1e6),
    (0.5, 0.5),
    (1.0, 1.0),
    (2.0, 5.0),
    (5.0, 2.0),
    (30.0, 0.2),
    (1e3, 1e3),
    (1e6, 1.0),
    (1.0, 1e6),
    (1e6, 1e6),
];

/// Gamma shapes: below 1 (the boosted log-space sampler), at 1, and large.
const GAMMA_SHAPES: [f64; 6] = [1e-3, 0.5, 1.0, 2.5, 1e3, 1e6];

/// The two-sample Kolmogorov–Smirnov statistic sup |F_x - F_y| of the empirical CDFs. Sorts
/// both samples. Ties (within or across samples) are handled by stepping past every copy of a
/// value before comparing, so the statistic is that of the empirical CDFs themselves.
fn ks_statistic(x: &mut [f64], y: &mut [f64]) -> f64 {
    assert!(x.iter().chain(y.iter()).all(|v| !v.is_nan()), "KS input has NaN");
    x.sort_by(f64::total_cmp);
    y.sort_by(f64::total_cmp);
    let (n, m) = (x.len(), y.len());
    let (mut i, mut j, mut d) = (0, 0, 0f64);
    while i < n && j < m {
        let v = x[i].min(y[j]);
        while i < n && x[i] <= v {
            i += 1;
        }
        while j < m && y[j] <= v {
            j += 1;
        }
        d = d.max((i as f64 / n as f64 - j as f64 / m as f64).abs());
    }
    d
}

/// Asymptotic critical value of the two-sample KS statistic at level `level`: the null
/// distribution of sqrt(nm/(n+m))·D tends to Kolmogorov's, whose tail is 2·exp(-2c²) (the next
/// term, -2·exp(-8c²), is below 1e-30 here), so c = sqrt(-ln(level/2)/2). For a reference with
/// atoms (ties) the test is conservative.
fn ks_critical(n: usize, m: usize, level: f64) -> f64 {
    let c = (-0.5 * (level / 2.0).ln()).sqrt();
    c * ((n + m) as f64 / (n as f64 * m as f64)).sqrt()
}

/// Mean, variance and excess kurtosis of Beta(a, b).
fn beta_theory(a: f64, b: f64) -> (f64, f64, f64) {
    let s = a + b;
    let mean = a / s;
    let var = a * b / (s * s * (s + 1.0));
    let kurt = 6.0 * ((a - b) * (a - b) * (s + 1.0) - a * b * (s + 2.0)) / (a * b * (s + 2.0) * (s + 3.0));
    (mean, var, kurt)
}

/// Mean, variance and excess kurtosis of Gamma(k, 1).
fn gamma_theory(k: f64) -> (f64, f64, f64) {
    (k, k, 6.0 / k)
}

/// One comparison: KS against the reference, moments against the theory.
struct Check {
    name: String,
    d: f64,
    critical: f64,
    mean: f64,
    mean_want: f64,
    mean_tol: f64,
    var: f64,
    var_want: f64,
    var_tol: f64,
}

impl Check {
    /// `ours` and `reference` as compared by KS (the same monotone map applied to both), `raw` our
    /// draws for the moments, `theory` (mean, variance, excess kurtosis), `rel` a bound on the
    /// relative error the output format puts on each draw beyond the f64 sampler's (0 for f64
    /// draws; f32's epsilon for f32 draws: half a step for the rounding to f32, as much again for
    /// the f32 arithmetic).
    fn new(name: String, mut ours: Vec<f64>, mut reference: Vec<f64>, raw: &[f64], theory: (f64, f64, f64), rel: f64) -> Self {
        let critical = ks_critical(ours.len(), reference.len(), LEVEL);
        let d = ks_statistic(&mut ours, &mut reference);
        let n = raw.len() as f64;
        let mean = raw.iter().sum::<f64>() / n;
        let var = raw.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
        let (mean_want, var_want, kurt) = theory;
        // SE of the mean sqrt(var/n); SE of the sample variance var·sqrt(2/(n-1) + kurt/n). A
        // per-draw error e with |e| <= rel·|x| moves the mean by at most rel·E|x| and the
        // variance by at most 2·sd·δ + δ², δ = rel·sqrt(E x²) bounding the RMS of e.
        let delta = rel * (var_want + mean_want * mean_want).sqrt();
        let mean_tol = SE * (var_want / n).sqrt() + rel * mean_want.abs();
        let var_tol = SE * var_want * (2.0 / (n - 1.0) + kurt / n).sqrt() + 2.0 * var_want.sqrt() * delta + delta * delta;
        Self { name, d, critical, mean, mean_want, mean_tol, var, var_want, var_tol }
    }

    fn report(&self) -> String {
        format!(
            "{}: KS D={:.5} (critical {:.5}); mean {:.6e} vs {:.6e} (|diff| {:.2e}, tol {:.2e}); var {:.6e} vs {:.6e} (|diff| {:.2e}, tol {:.2e})",
            self.name,
            self.d,
            self.critical,
            self.mean,
            self.mean_want,
            (self.mean - self.mean_want).abs(),
            self.mean_tol,
            self.var,
            self.var_want,
            (self.var - self.var_want).abs(),
            self.var_tol
        )
    }

    fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !at_most(self.d, self.critical) {
            out.push(format!("{}: KS D={:.5} > critical {:.5}", self.name, self.d, self.critical));
        }
        if !at_most((self.mean - self.mean_want).abs(), self.mean_tol) {
            out.push(format!("{}: mean {:.9e} vs {:.9e}, tolerance {:.2e}", self.name, self.mean, self.mean_want, self.mean_tol));
        }
        if !at_most((self.var - self.var_want).abs(), self.var_tol) {
            out.push(format!("{}: variance {:.9e} vs {:.9e}, tolerance {:.2e}", self.name, self.var, self.var_want, self.var_tol));
        }
        out
    }
}

/// `x <= limit`, false when `x` is NaN (so a NaN statistic fails).
fn at_most(x: f64, limit: f64) -> bool {
    x <= limit
}

/// Prints every check and fails with the list of all failed statistics (not just the first).
fn assert_all(checks: &[Check]) {
    for c in checks {
        eprintln!("{}", c.report());
    }
    let failed: Vec<String> = checks.iter().flat_map(Check::failures).collect();
    assert!(failed.is_empty(), "{} failed:\n{}", failed.len(), failed.join("\n"));
}

/// `N` reference Beta(a, b) draws; seeds differ from ours so the streams are unrelated.
fn reference_beta(a: f64, b: f64, seed: u64) -> Vec<f64> {
    let dist = Beta::new(a, b).expect("valid shapes");
    let mut rng = StdRng::seed_from_u64(0xC0FF_EE00 ^ seed);
    let v: Vec<f64> = (0..N).map(|_| dist.sample(&mut rng)).collect();
    assert!(v.iter().all(|x| (0.0..=1.0).contains(x)), "reference Beta({a}, {b}) left [0, 1]");
    v
}

/// f64 draws as KS compares them: values below the smallest normal f64 are one atom there. Both
/// samplers lose resolution in the subnormal range in their own ways (our log-space ratio
/// overflows exp, the reference's exp underflows), which matters only for Beta(1e-3, ·), where
/// a quarter to a half of the mass lies below 1e-300. The map is monotone, so it changes nothing
/// else.
fn on_f64(x: f64) -> f64 {
    x.max(f64::MIN_POSITIVE)
}

/// f32 draws as KS compares them: the vectorised path returns f32, so the reference's f64 draws
/// are rounded to f32 first, and values below the smallest normal f32 are one atom there. What
/// is compared is what an f32 draw can represent: Beta(1e-3, 1e-3) puts about 46% of its mass
/// below 1e-38 and about 49% within half of f32's last step below 1 (rounded to 1.0);
/// Beta(1e6, 1) has a standard deviation of 1e-6, about 17 f32 steps below 1; Beta(1e6, 1e6)
/// one of 3.5e-4, about 6000 steps at 0.5.
fn on_f32(x: f32) -> f64 {
    x.max(f32::MIN_POSITIVE) as f64
}

/// The scalar f64 path (`beta_draws`, i.e. `sampler::beta` on one xoshiro256++ stream).
#[test]
fn scalar_beta_matches_rand_distr() {
    let checks: Vec<Check> = BETA_SHAPES
        .iter()
        .enumerate()
        .map(|(s, &(a, b))| {
            let mut ours = vec![0.0; N];
            beta_draws(a, b, 1000 + s as u64, &mut ours).unwrap();
            assert!(ours.iter().all(|x| (0.0..=1.0).contains(x)), "Beta({a}, {b}) left [0, 1]");
            let reference = reference_beta(a, b, s as u64);
            let name = format!("scalar Beta({a:e}, {b:e})");
            Check::new(
                name,
                ours.iter().map(|&x| on_f64(x)).collect(),
                reference.into_iter().map(on_f64).collect(),
                &ours,
                beta_theory(a, b),
                0.0,
            )
        })
        .collect();
    assert_all(&checks);
}

/// Our vectorised f32 draws of Beta(a, b) against the reference's, compared on f32's grid.
fn vector_check(s: usize, a: f64, b: f64) -> Check {
    let (alpha, beta) = (vec![a; N], vec![b; N]);
    let mut ours = vec![0f32; N];
    thompson_draws(simd_path(), &alpha, &beta, 2000 + s as u64, 5, &mut ours).unwrap();
    assert!(ours.iter().all(|x| (0.0..=1.0).contains(x)), "Beta({a}, {b}) left [0, 1]");
    let reference = reference_beta(a, b, 100 + s as u64);
    let raw: Vec<f64> = ours.iter().map(|&x| x as f64).collect();
    Check::new(
        format!("vector Beta({a:e}, {b:e})"),
        ours.iter().map(|&x| on_f32(x)).collect(),
        reference.into_iter().map(|x| on_f32(x as f32)).collect(),
        &raw,
        beta_theory(a, b),
        f32::EPSILON as f64,
    )
}

/// The shape whose vectorised draws are checked on their own (below).
const VECTOR_NEAR_ONE: (f64, f64) = (1e6, 1.0);

/// The vectorised f32 path, through the draws a Thompson selection makes (`thompson_draws`: one
/// draw per task, task j's from its own Philox counter, so `N` tasks with equal shapes give `N`
/// independent draws), on the SIMD path selection uses.
#[test]
fn vector_beta_matches_rand_distr() {
    let checks: Vec<Check> =
        BETA_SHAPES.iter().enumerate().filter(|&(_, &shape)| shape != VECTOR_NEAR_ONE).map(|(s, &(a, b))| vector_check(s, a, b)).collect();
    assert_all(&checks);
}

/// Beta(1e6, 1) on the vectorised path: a standard deviation of 1e-6 is about 17 steps of f32's
/// grid below 1, so KS sees how each draw is rounded. The reference's draws are rounded to the
/// nearest f32; ours are x / (x + y) formed in f64 from the f32 gammas and rounded to f32 once.
/// Formed in f32, with x near 1e6, x + y would be rounded to a multiple of 1/16 first, and the
/// draw, rounded twice, would land on a grid of about 6.25e-8 against f32's 5.96e-8 below 1,
/// leaving about every 21st f32 value below 1 almost empty (10 times too few draws at
/// 1 - 11·2⁻²⁴): D = 0.0163 here against a critical 0.0141, though each draw would be off by
/// about one f32 step at most and the moments would agree.
#[test]
fn vector_beta_1e6_1_matches_rand_distr() {
    let s = BETA_SHAPES.iter().position(|&shape| shape == VECTOR_NEAR_ONE).expect("listed");
    assert_all(&[vector_check(s, VECTOR_NEAR_ONE.0, VECTOR_NEAR_ONE.1)]);
}

/// The scalar gamma samplers `beta` is built from: `ln_gamma` (any shape; boosted below 1) and
/// `gamma_ge1` (shape >= 1), against `rand_distr::Gamma`.
#[test]
fn scalar_gamma_matches_rand_distr() {
    let mut checks = Vec::new();
    for (s, &k) in GAMMA_SHAPES.iter().enumerate() {
        let dist = Gamma::new(k, 1.0).expect("valid shape");
        let mut rng = StdRng::seed_from_u64(0x6A77_A000 ^ s as u64);
        let reference: Vec<f64> = (0..N).map(|_| on_f64(dist.sample(&mut rng))).collect();
        let mut ours_rng = Xoshiro256pp::from_seed(3000 + s as u64);
        let ours: Vec<f64> = (0..N).map(|_| ln_gamma(k, &mut ours_rng).exp()).collect();
        let name = format!("scalar ln_gamma Gamma({k:e})");
        checks.push(Check::new(name, ours.iter().map(|&x| on_f64(x)).collect(), reference.clone(), &ours, gamma_theory(k), 0.0));
        if k >= 1.0 {
            let ours: Vec<f64> = (0..N).map(|_| gamma_ge1(k, &mut ours_rng)).collect();
            let name = format!("scalar gamma_ge1 Gamma({k:e})");
            checks.push(Check::new(name, ours.clone(), reference, &ours, gamma_theory(k), 0.0));
        }
    }
    assert_all(&checks);
}

#[test]
fn ks_statistic_counts_ties_once() {
    // F_x steps 1/3, 2/3, 1 at 1, 2, 3; F_y steps 1/2, 1 at 2, 3: largest gap 1/3 at x = 1 and 1/6
    // at x = 2.
    let d = ks_statistic(&mut [3.0, 1.0, 2.0], &mut [2.0, 3.0]);
    assert!((d - 1.0 / 3.0).abs() < 1e-15, "{d}");
    // Identical samples with many ties: 0.
    assert_eq!(ks_statistic(&mut [0.0, 0.0, 1.0, 1.0], &mut [1.0, 0.0, 1.0, 0.0]), 0.0);
    // Disjoint samples: 1.
    assert_eq!(ks_statistic(&mut [0.0, 0.1], &mut [0.2, 0.3, 0.4]), 1.0);
    // The textbook value: c(0.05) = 1.358.
    assert!((ks_critical(1, 1, 0.05) / 2f64.sqrt() - 1.3581).abs() < 1e-3);
}

/// The test has power at these sizes: the reference's Beta(2, 5) against its Beta(2, 5.25) (mean
/// off by 0.06 standard deviations) is rejected, and against itself is not.
#[test]
fn ks_test_detects_a_small_shape_error() {
    let mut x = reference_beta(2.0, 5.0, 7);
    let mut same = reference_beta(2.0, 5.0, 8);
    let mut off = reference_beta(2.0, 5.25, 9);
    let critical = ks_critical(N, N, LEVEL);
    let d_same = ks_statistic(&mut x.clone(), &mut same);
    let d_off = ks_statistic(&mut x, &mut off);
    eprintln!("power check: D same {d_same:.5}, D off {d_off:.5}, critical {critical:.5}");
    assert!(d_same <= critical && d_off > critical, "same {d_same}, off {d_off}, critical {critical}");
}
