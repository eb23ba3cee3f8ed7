//! Scalar random streams: xoshiro256++ seeded through SplitMix64 from a `(seed, counter, index)`
//! triple. They key a selection's Philox draws and feed the exact scalar sampler of one task; the
//! key depends on nothing else, so neither does the stream.

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline]
fn mix(x: u64) -> u64 {
    let mut s = x;
    splitmix64(&mut s)
}

/// xoshiro256++ (Blackman & Vigna): 256-bit state, passes BigCrush, ~1 ns per draw.
#[derive(Clone, Debug)]
pub struct Xoshiro256pp {
    s: [u64; 4],
    /// Second Box–Muller normal, kept for the next call.
    spare_normal: Option<f64>,
}

impl Xoshiro256pp {
    pub fn from_seed(seed: u64) -> Self {
        let mut sm = seed;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        Self { s, spare_normal: None }
    }

    /// The stream of `(seed, counter, index)`: keys are mixed so that nearby triples give
    /// unrelated streams.
    pub fn for_key(seed: u64, counter: u64, index: u64) -> Self {
        let k = mix(mix(mix(seed) ^ counter.wrapping_mul(GOLDEN)) ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        Self::from_seed(k)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = (s[0].wrapping_add(s[3])).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform on the open interval (0, 1): safe to take the log of.
    #[inline]
    pub fn open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal by the Box–Muller transform, both outputs used.
    #[inline]
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let u1 = self.open01();
        let u2 = self.open01();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        self.spare_normal = Some(r * s);
        r * c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = {
            let mut r = Xoshiro256pp::for_key(1, 2, 3);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Xoshiro256pp::for_key(1, 2, 3);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Xoshiro256pp::for_key(1, 2, 4);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let d: Vec<u64> = {
            let mut r = Xoshiro256pp::for_key(1, 3, 3);
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn uniform_and_normal_moments() {
        let mut r = Xoshiro256pp::from_seed(7);
        let n = 200_000;
        let (mut su, mut sz, mut szz) = (0.0, 0.0, 0.0);
        for _ in 0..n {
            let u = r.open01();
            assert!(u > 0.0 && u < 1.0);
            su += u;
            let z = r.normal();
            sz += z;
            szz += z * z;
        }
        let n = n as f64;
        assert!((su / n - 0.5).abs() < 0.005);
        assert!((sz / n).abs() < 0.01);
        assert!((szz / n - 1.0).abs() < 0.02);
    }
}
