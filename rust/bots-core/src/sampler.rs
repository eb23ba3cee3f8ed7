//! The exact scalar Beta sampler (f64): a ratio of Marsaglia–Tsang gamma draws. It serves the
//! tasks the vectorised Thompson draw leaves to it (shapes below 1) and [`beta_draws`].
//!
//! Shapes below 1 use the boost Gamma(a) = Gamma(a + 1) · U^(1/a), carried in log space so
//! that tiny shapes (whose draws underflow f64) still give a well-defined Beta draw.

use crate::error::{CoreError, Result};
use crate::rng::Xoshiro256pp;
use crate::types::is_shape;

/// Marsaglia & Tsang (2000) for shape >= 1: returns (d, v³) of the accepted attempt; the draw
/// is d·v³. Callers take it as is or in log space.
#[inline]
fn marsaglia_tsang(shape: f64, rng: &mut Xoshiro256pp) -> (f64, f64) {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v3 = v * v * v;
        let u = rng.open01();
        let x2 = x * x;
        // Cheap squeeze first; the log test only for the few draws it does not decide.
        if u < 1.0 - 0.0331 * x2 * x2 || u.ln() < 0.5 * x2 + d * (1.0 - v3 + v3.ln()) {
            return (d, v3);
        }
    }
}

/// log of a Gamma(shape, 1) draw for shape >= 1.
#[inline]
fn ln_gamma_ge1(shape: f64, rng: &mut Xoshiro256pp) -> f64 {
    let (d, v3) = marsaglia_tsang(shape, rng);
    d.ln() + v3.ln()
}

/// Gamma(shape, 1) draw for shape >= 1 (not in log space: cheaper when no boost is needed).
#[inline]
pub(crate) fn gamma_ge1(shape: f64, rng: &mut Xoshiro256pp) -> f64 {
    let (d, v3) = marsaglia_tsang(shape, rng);
    d * v3
}

/// log of a Gamma(shape, 1) draw for any shape > 0.
#[inline]
pub(crate) fn ln_gamma(shape: f64, rng: &mut Xoshiro256pp) -> f64 {
    if shape >= 1.0 {
        ln_gamma_ge1(shape, rng)
    } else {
        let boosted = ln_gamma_ge1(shape + 1.0, rng);
        boosted + rng.open01().ln() / shape
    }
}

/// One Beta(a, b) draw, a, b > 0. Always in [0, 1], never NaN.
#[inline]
pub(crate) fn beta(a: f64, b: f64, rng: &mut Xoshiro256pp) -> f64 {
    if a >= 1.0 && b >= 1.0 {
        let x = gamma_ge1(a, rng);
        let y = gamma_ge1(b, rng);
        x / (x + y)
    } else {
        let lx = ln_gamma(a, rng);
        let ly = ln_gamma(b, rng);
        // x / (x + y) = 1 / (1 + exp(ly - lx)), stable for any magnitudes.
        1.0 / (1.0 + (ly - lx).exp())
    }
}

/// `out.len()` Beta(a, b) draws from one seeded stream (for distribution tests). Errors name `a`
/// or `b` when it is not finite and > 0.
pub fn beta_draws(a: f64, b: f64, seed: u64, out: &mut [f64]) -> Result<()> {
    for (name, shape) in [("a", a), ("b", b)] {
        if !is_shape(shape) {
            return Err(CoreError::value(name, format!("must be finite and > 0, got {shape}")));
        }
    }
    let mut rng = Xoshiro256pp::from_seed(seed);
    for x in out.iter_mut() {
        *x = beta(a, b, &mut rng);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(a: f64, b: f64) -> (f64, f64) {
        let mut v = vec![0.0; 200_000];
        beta_draws(a, b, 11, &mut v).unwrap();
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
        (m, var)
    }

    #[test]
    fn beta_moments_match_theory() {
        for &(a, b) in &[(0.3, 0.5), (0.5, 0.5), (1.0, 1.0), (2.5, 40.0), (40.0, 2.5), (5000.0, 5000.0), (0.3, 5000.0)] {
            let (m, var) = moments(a, b);
            let em = a / (a + b);
            let ev = a * b / ((a + b) * (a + b) * (a + b + 1.0));
            let se = (ev / 200_000.0).sqrt();
            assert!((m - em).abs() < 6.0 * se + 1e-12, "mean a={a} b={b}: {m} vs {em}");
            assert!((var - ev).abs() < 0.05 * ev, "var a={a} b={b}: {var} vs {ev}");
        }
    }

    #[test]
    fn beta_draws_rejects_shapes_that_are_not_finite_and_positive() {
        let mut v = vec![0.0; 4];
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(beta_draws(bad, 1.0, 1, &mut v).unwrap_err().argument, "a", "{bad}");
            assert_eq!(beta_draws(1.0, bad, 1, &mut v).unwrap_err().argument, "b", "{bad}");
        }
    }

    #[test]
    fn tiny_shapes_stay_in_range() {
        let mut v = vec![0.0; 10_000];
        beta_draws(1e-4, 1e-4, 3, &mut v).unwrap();
        assert!(v.iter().all(|x| x.is_finite() && (0.0..=1.0).contains(x)));
        // Mass piles at the ends, half near each.
        let low = v.iter().filter(|&&x| x < 0.5).count() as f64 / v.len() as f64;
        assert!((low - 0.5).abs() < 0.03);
    }
}
