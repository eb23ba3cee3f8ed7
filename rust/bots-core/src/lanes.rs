//! Element-wise building blocks of the vectorised sampler: the Philox4x32-10 counter-based
//! generator and float32 `ln` / `sincos` approximations (Cephes polynomials).
//!
//! Each function works on one element and is `#[inline(always)]`; kernels call them in plain
//! loops over blocks of [`BLOCK`] tasks, which LLVM's loop vectoriser turns into AVX-512, AVX2 or
//! SSE2 code. No fused multiply-adds are used, so every instruction set computes bit-identical
//! results, and a task's draws depend only on (seed, counter, task index).

/// Tasks per vectorised block: large enough for the loop vectoriser, small enough that a
/// block's scratch arrays stay in L1.
pub const BLOCK: usize = 512;

const PHILOX_M0: u32 = 0xD251_1F53;
const PHILOX_M1: u32 = 0xCD9E_8D57;
const PHILOX_W0: u32 = 0x9E37_79B9;
const PHILOX_W1: u32 = 0xBB67_AE85;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// Philox4x32-10 (Salmon et al., SC'11; the generator of Random123, cuRAND and JAX):
/// four independent 32-bit words from a 128-bit counter and a 64-bit key.
#[inline(always)]
pub fn philox4x32(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [c0, c1, c2, c3] = counter;
    let [k0, k1] = key;
    // Written out rather than looped: the caller's loop over tasks must be innermost for LLVM's
    // loop vectoriser to take it.
    macro_rules! round {
        ($c0:ident, $c1:ident, $c2:ident, $c3:ident, $r:expr) => {{
            let (hi0, lo0) = mulhilo(PHILOX_M0, $c0);
            let (hi1, lo1) = mulhilo(PHILOX_M1, $c2);
            let rk0 = k0.wrapping_add(PHILOX_W0.wrapping_mul($r));
            let rk1 = k1.wrapping_add(PHILOX_W1.wrapping_mul($r));
            (hi1 ^ $c1 ^ rk0, lo1, hi0 ^ $c3 ^ rk1, lo0)
        }};
    }
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 0);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 1);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 2);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 3);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 4);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 5);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 6);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 7);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 8);
    let (c0, c1, c2, c3) = round!(c0, c1, c2, c3, 9);
    [c0, c1, c2, c3]
}

/// A uniform on the open interval (0, 1) from 24 random bits.
#[inline(always)]
pub fn open01(bits: u32) -> f32 {
    // Through i32: a signed conversion vectorises on every x86 level, unsigned does not.
    (((bits >> 8) as i32) as f32 + 0.5) * (1.0 / 16_777_216.0)
}

/// Natural log for positive normal floats (Cephes `logf`, about 1 ulp).
#[inline(always)]
#[allow(clippy::excessive_precision)] // Cephes' coefficients as published; each rounds to the same f32
pub fn ln(x: f32) -> f32 {
    const SQRTHF: f32 = 0.707_106_77;
    let bits = x.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 126;
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000); // [0.5, 1)
    let small = m < SQRTHF;
    e -= small as i32;
    m = if small { m + m - 1.0 } else { m - 1.0 };
    let z = m * m;
    let mut y = 7.037_683_6e-2_f32;
    y = y * m - 1.151_461_1e-1;
    y = y * m + 1.167_699_9e-1;
    y = y * m - 1.242_014_1e-1;
    y = y * m + 1.424_932_3e-1;
    y = y * m - 1.666_805_8e-1;
    y = y * m + 2.000_071_4e-1;
    y = y * m - 2.499_999_4e-1;
    y = y * m + 3.333_333_1e-1;
    y = y * m * z;
    let ef = e as f32;
    y += -2.121_944_4e-4 * ef;
    y += -0.5 * z;
    m + y + 0.693_359_4 * ef
}

/// (sin 2πu, cos 2πu) for u in [0, 1): quadrant reduction, then Cephes polynomials on
/// [-π/4, π/4], branch-free.
#[inline(always)]
pub fn sincos_turns(u: f32) -> (f32, f32) {
    let y = u * 4.0;
    // y + 0.5 > 0, so truncation is floor; the integer conversion vectorises.
    let qi = (y + 0.5) as i32;
    let r = (y - qi as f32) * core::f32::consts::FRAC_PI_2;
    let r2 = r * r;
    let s = r + r * r2 * (-1.666_665_5e-1 + r2 * (8.332_161e-3 + r2 * -1.951_529_6e-4));
    let c = 1.0 - 0.5 * r2 + r2 * r2 * (4.166_664_6e-2 + r2 * (-1.388_731_6e-3 + r2 * 2.443_315_7e-5));
    // Quadrant q: sin θ = (s, c, -s, -c)[q], cos θ = (c, -s, -c, s)[q].
    let odd = (qi & 1) != 0;
    let sin_sign = ((qi & 2) as u32) << 30;
    let cos_sign = (((qi + 1) & 2) as u32) << 30;
    let sv = f32::from_bits((if odd { c } else { s }).to_bits() ^ sin_sign);
    let cv = f32::from_bits((if odd { s } else { c }).to_bits() ^ cos_sign);
    (sv, cv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_random123_known_answers() {
        // Known-answer vectors from Random123's kat_vectors (philox4x32_10).
        assert_eq!(philox4x32([0, 0, 0, 0], [0, 0]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        assert_eq!(philox4x32([0xffff_ffff; 4], [0xffff_ffff; 2]), [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]);
        assert_eq!(
            philox4x32([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344], [0xa409_3822, 0x299f_31d0]),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn ln_is_accurate() {
        let mut worst: f64 = 0.0;
        let mut v = 1e-30f32;
        while v < 1e30 {
            for i in 0..16 {
                let x = v * (1.0 + i as f32 * 0.061);
                let exact = (x as f64).ln();
                worst = worst.max((ln(x) as f64 - exact).abs() / exact.abs().max(1.0));
            }
            v *= 1.37;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
    }

    #[test]
    fn sincos_is_accurate() {
        let mut worst: f64 = 0.0;
        for k in 0..65536 {
            let u = (k as f32 + 0.5) / 65536.0;
            let (s, c) = sincos_turns(u);
            let t = std::f64::consts::TAU * u as f64;
            worst = worst.max((s as f64 - t.sin()).abs()).max((c as f64 - t.cos()).abs());
        }
        assert!(worst < 5e-7, "worst absolute error {worst}");
    }

    #[test]
    fn philox_uniforms_are_uniform() {
        let n = 100_000u32;
        let mut sums = [0f64; 4];
        for j in 0..n {
            let w = philox4x32([j, 7, 0, 0], [1, 2]);
            for (s, &x) in sums.iter_mut().zip(&w) {
                let u = open01(x);
                assert!(u > 0.0 && u < 1.0);
                *s += u as f64;
            }
        }
        for s in sums {
            assert!((s / n as f64 - 0.5).abs() < 0.005);
        }
    }
}
