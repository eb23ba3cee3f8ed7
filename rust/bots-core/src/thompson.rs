//! The Thompson draw: one exact Beta(alpha_j, beta_j) variate per task, vectorised over blocks of
//! tasks, as a function of `(seed, counter, j, alpha_j, beta_j)` only.
//!
//! Task j's k-th try uses the four 32-bit words of Philox4x32-10 at counter (j, counter, k) under
//! a key derived from the seed. One try is a Box–Muller pair of normals (one per gamma) and a
//! Marsaglia–Tsang attempt for each of Gamma(alpha) and Gamma(beta) in f32; the draw is
//! x / (x + y), formed in f64 and rounded to f32 once (see [`ratio`]). A block of tasks takes its
//! first try in stages (below), one short loop each; the tasks whose pair of gamma attempts was
//! rejected (a few percent) are tried again, compacted, with the next k, until accepted. Accepted
//! tries are exact draws, and redrawing the pair as a unit keeps them so. Tasks with a shape
//! below 1 (or beyond f32) take the exact scalar f64 sampler on a stream keyed by
//! (seed, counter, j).

use crate::error::{CoreError, Result};
use crate::lanes::{ln, open01, philox4x32, sincos_turns, BLOCK};
use crate::rng::Xoshiro256pp;
use crate::sampler;
use crate::simd_path::SimdPath;
use crate::types::{check_shapes, invalid_task, pool_len, CHUNK};

/// Where a chunk's draws go: a whole block at once (task offsets relative to the chunk).
pub(crate) trait DrawSink {
    fn block(&mut self, start: usize, draws: &[f32]);
}

/// Writes draws to a buffer.
struct Store<'a>(&'a mut [f32]);

impl DrawSink for Store<'_> {
    #[inline(always)]
    fn block(&mut self, start: usize, draws: &[f32]) {
        self.0[start..start + draws.len()].copy_from_slice(draws);
    }
}

/// The Philox key of every draw in selection `(seed, counter)`.
#[inline]
pub(crate) fn philox_key(seed: u64, counter: u64) -> [u32; 2] {
    let k = Xoshiro256pp::for_key(seed, counter, u64::MAX).next_u64();
    [k as u32, (k >> 32) as u32]
}

/// Philox counter of task `j`'s `attempt`-th try in selection `counter`. Pools up to 2^48 tasks.
#[inline(always)]
pub(crate) fn task_counter(j: u64, counter: u64, attempt: u32) -> [u32; 4] {
    [j as u32, counter as u32, (counter >> 32) as u32, (j >> 32) as u32 | (attempt << 16)]
}

/// The cheap part of a Marsaglia–Tsang attempt in f32 for shape >= 1, given a standard normal
/// `z` and a uniform `u`: the candidate draw d·v³, whether v > 0 (if not, the attempt is
/// rejected), and whether the squeeze u < 1 - 0.0331 z⁴ accepts it (about 92% of attempts).
/// An attempt with v > 0 that the squeeze does not accept is decided by [`gamma_log_test`].
/// Branch-free so that loops over it vectorise.
#[inline(always)]
fn gamma_squeeze(shape: f32, z: f32, u: f32) -> (f32, bool, bool) {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    let v = 1.0 + c * z;
    let v3 = v * v * v;
    let z2 = z * z;
    (d * v3, v > 0.0, u < 1.0 - 0.0331 * z2 * z2)
}

/// The exact acceptance test of a Marsaglia–Tsang attempt, ln u < z²/2 + d(1 - v³ + ln v³),
/// for the attempts the squeeze leaves undecided (same arithmetic as [`gamma_squeeze`] up to v³,
/// so the same bits whether it runs on a whole block or on a compacted few).
#[inline(always)]
fn gamma_log_test(shape: f32, z: f32, u: f32) -> bool {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    let v = 1.0 + c * z;
    let v3 = v * v * v;
    let z2 = z * z;
    // v3 <= 0 lanes are rejected anyway; the max keeps the log defined.
    ln(u) < 0.5 * z2 + d * (1.0 - v3 + ln(v3.max(f32::MIN_POSITIVE)))
}

/// One whole Marsaglia–Tsang attempt: the draw and whether it was accepted. A rejected draw must
/// be replaced by a fresh independent one (accepted draws are exact).
#[inline(always)]
fn gamma_attempt(shape: f32, z: f32, u: f32) -> (f32, bool) {
    let (g, v_positive, squeeze) = gamma_squeeze(shape, z, u);
    (g, v_positive & (squeeze | gamma_log_test(shape, z, u)))
}

/// The draw x / (x + y) from two f32 gammas, rounded to f32 once. The sum and the quotient are
/// formed in f64: the sum of two f32 is exact there unless their exponents differ by more than
/// 29 (and then within 2^-53 of it), so the f64 quotient is within about 2^-52 (relative) of
/// x / (x + y), and rounding it to f32 gives the f32 nearest x / (x + y) unless that lies within
/// 2^-52 of a midpoint between two f32 values (a few draws in a billion, then still within half
/// a step and a hair). In f32 the sum itself would be rounded first: with x near 1e6 it lands on a
/// grid of 1/16, and the draw, rounded twice, on a grid of about 6.25e-8 near 1 that aliases
/// against f32's own of 5.96e-8 (for Beta(1e6, 1), about every 21st f32 value below 1 nearly
/// empty). Conversions, sum and quotient are exact or correctly rounded IEEE operations, so
/// every instruction set gives the same bits.
#[inline(always)]
fn ratio(x: f32, y: f32) -> f32 {
    let (x, y) = (x as f64, y as f64);
    (x / (x + y)) as f32
}

/// One whole try at a Beta(a, b) draw from four uniform words (the compacted retries; the first
/// try of a block computes exactly this, in stages).
#[inline(always)]
fn beta_attempt(sa: f32, sb: f32, w: [u32; 4]) -> (f32, bool) {
    let r = (-2.0 * ln(open01(w[0]))).sqrt();
    let (sn, cs) = sincos_turns(open01(w[1]));
    let (xv, okx) = gamma_attempt(sa, r * cs, open01(w[2]));
    let (yv, oky) = gamma_attempt(sb, r * sn, open01(w[3]));
    (ratio(xv, yv), okx & oky)
}

/// Compacted work (log tests, retries) runs in whole groups of this many lanes, the padding lanes
/// holding harmless inputs: a group is one AVX-512 vector (two AVX2, four SSE2), and a loop that
/// ends on a partial group would run its last few lanes through scalar code, which for a handful
/// of lanes per block cost more than the vector work itself.
const GROUP: usize = 16;

/// Rounds `n` up to whole groups.
#[inline(always)]
fn whole_groups(n: usize) -> usize {
    n.div_ceil(GROUP) * GROUP
}

/// Capacity of the compacted log tests (two per task at most, plus padding).
const TESTS: usize = 2 * BLOCK + GROUP;
/// Capacity of the compacted retries.
const RETRIES: usize = BLOCK + GROUP;

/// Tries after which a task falls back to the scalar sampler (each try succeeds with probability
/// above 0.9, so this never happens in practice; it only bounds the loop).
const MAX_ATTEMPTS: u32 = 64;

/// The Philox "attempt" slot of a task's Gumbel variate in a softmax selection: far from the
/// draw's own attempts (0..MAX_ATTEMPTS), so the two never share random words.
const GUMBEL_ATTEMPT: u32 = 0xFFFF;

/// Task `j`'s Gumbel(0, 1) variate in selection `(seed, counter)` (philox key `key`):
/// −ln(−ln u) with u a 53-bit uniform on the open interval (0, 1), so it lies in [−3.62, 37.43].
#[inline]
pub(crate) fn gumbel(key: [u32; 2], counter: u64, j: u64) -> f64 {
    let w = philox4x32(task_counter(j, counter, GUMBEL_ATTEMPT), key);
    let bits = ((w[0] as u64) << 32 | w[1] as u64) >> 11;
    let u = (bits as f64 + 0.5) * (1.0 / (1u64 << 53) as f64);
    -(-u.ln()).ln()
}

/// The sampler's working memory for one block, allocated once per worker thread and reused for
/// every chunk it processes (zeroing it per chunk would cost more than the update pass).
pub(crate) struct Scratch {
    x: [f32; BLOCK],
    /// Per task of the block: 0 accepted; `NEEDS_LOG_X` / `NEEDS_LOG_Y` while a log test is
    /// pending; `RETRY` when the first try was rejected or is not for the vector path.
    flags: [u8; BLOCK],
    words: [[u32; BLOCK]; 4],
    shape_a: [f32; BLOCK],
    shape_b: [f32; BLOCK],
    z1: [f32; BLOCK],
    z2: [f32; BLOCK],
    gx: [f32; BLOCK],
    // Compacted log tests: the task and the test's inputs.
    test_task: [u16; TESTS],
    test_shape: [f32; TESTS],
    test_z: [f32; TESTS],
    test_word: [u32; TESTS],
    test_pass: [bool; TESTS],
    // Compacted retries.
    pending: [u16; BLOCK],
    ra: [f32; RETRIES],
    rb: [f32; RETRIES],
    /// Task index of each pending retry (contiguous, so the Philox loop vectorises).
    rj: [u64; RETRIES],
    rp: [f32; RETRIES],
    rok: [bool; RETRIES],
}

impl Scratch {
    pub(crate) fn new() -> Box<Self> {
        Box::new(Self {
            x: [0.0; BLOCK],
            flags: [0; BLOCK],
            words: [[0; BLOCK]; 4],
            shape_a: [0.0; BLOCK],
            shape_b: [0.0; BLOCK],
            z1: [0.0; BLOCK],
            z2: [0.0; BLOCK],
            gx: [0.0; BLOCK],
            test_task: [0; TESTS],
            test_shape: [0.0; TESTS],
            test_z: [0.0; TESTS],
            test_word: [0; TESTS],
            test_pass: [false; TESTS],
            pending: [0; BLOCK],
            ra: [0.0; RETRIES],
            rb: [0.0; RETRIES],
            rj: [0; RETRIES],
            rp: [0.0; RETRIES],
            rok: [false; RETRIES],
        })
    }
}

// The stages of a block's first try. Each is one short loop: LLVM vectorises each at its own
// width, and the core overlaps the long polynomial chains of consecutive loops, which one large
// loop body does not allow.

/// Stage 1: the four Philox words of tasks `first..first + m`, first try.
#[inline(always)]
pub(crate) fn philox_stage(sc: &mut Scratch, first: usize, m: usize, counter: u64, key: [u32; 2]) {
    for i in 0..m {
        let w = philox4x32(task_counter((first + i) as u64, counter, 0), key);
        sc.words[0][i] = w[0];
        sc.words[1][i] = w[1];
        sc.words[2][i] = w[2];
        sc.words[3][i] = w[3];
    }
}

/// Stage 2: the shapes in f32 and the Box–Muller pair of normals (words 0 and 1).
#[inline(always)]
pub(crate) fn normal_stage(sc: &mut Scratch, a: &[f64], b: &[f64]) {
    let m = a.len();
    for i in 0..m {
        sc.shape_a[i] = a[i] as f32;
        sc.shape_b[i] = b[i] as f32;
    }
    for i in 0..m {
        let r = (-2.0 * ln(open01(sc.words[0][i]))).sqrt();
        let (sn, cs) = sincos_turns(open01(sc.words[1][i]));
        sc.z1[i] = r * cs;
        sc.z2[i] = r * sn;
    }
}

const NEEDS_LOG_X: u8 = 1;
const NEEDS_LOG_Y: u8 = 2;
const RETRY: u8 = 4;

/// Bit i set for each task `start + i` (i < 64, `start + i < m`) whose flag has any of the bits
/// of `select`: 64 tasks tested with a few word operations instead of 64 unpredictable branches.
#[inline(always)]
fn flagged(flags: &[u8; BLOCK], start: usize, m: usize, select: u8) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let select = u64::from_le_bytes([select; 8]);
    let mut mask = 0u64;
    for k in 0..8 {
        let at = start + 8 * k;
        let w = u64::from_le_bytes(flags[at..at + 8].try_into().expect("8 bytes")) & select;
        // The high bit of each byte: set iff the byte is not 0 (no carry crosses bytes).
        let high = (((w & LOW7) + LOW7) | w) & !LOW7;
        // Gathers the 8 high bits into one byte.
        mask |= ((high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    if m - start < 64 {
        mask &= (1u64 << (m - start)) - 1;
    }
    mask
}

/// Stage 3: both gamma attempts (uniforms from words 2 and 3) and the ratio. The squeeze decides
/// most attempts; the few it leaves undecided take the log test afterwards, compacted, instead
/// of every task paying for four logarithms. Returns whether every task of the block was
/// accepted on the vector path.
#[inline(always)]
pub(crate) fn gamma_stage(sc: &mut Scratch, m: usize) -> bool {
    for i in 0..m {
        let (g, v_positive, squeeze) = gamma_squeeze(sc.shape_a[i], sc.z1[i], open01(sc.words[2][i]));
        sc.gx[i] = g;
        sc.flags[i] = ((!v_positive as u8) * RETRY) | ((!squeeze as u8) * NEEDS_LOG_X);
    }
    let mut any = 0u8;
    for i in 0..m {
        let (sa, sb) = (sc.shape_a[i], sc.shape_b[i]);
        let (gy, v_positive, squeeze) = gamma_squeeze(sb, sc.z2[i], open01(sc.words[3][i]));
        // Shapes below 1 (f32 compare is exact at 1.0) or beyond f32 take the exact scalar path.
        let vector_path = (sa >= 1.0) & (sb >= 1.0) & (sa <= f32::MAX) & (sb <= f32::MAX);
        let rejected = (sc.flags[i] & RETRY != 0) | !v_positive | !vector_path;
        let needs = (sc.flags[i] & NEEDS_LOG_X) | ((!squeeze as u8) * NEEDS_LOG_Y);
        let flag = if rejected { RETRY } else { needs };
        sc.x[i] = ratio(sc.gx[i], gy);
        sc.flags[i] = flag;
        any |= flag;
    }
    if any & (NEEDS_LOG_X | NEEDS_LOG_Y) != 0 {
        log_tests(sc, m) && any & RETRY == 0
    } else {
        any & RETRY == 0
    }
}

/// Runs the pending log tests of a block, compacted; a failed one marks its task for retry.
/// Returns whether every test passed.
#[inline(always)]
fn log_tests(sc: &mut Scratch, m: usize) -> bool {
    // The tests of Gamma(alpha), then those of Gamma(beta), each found by its own bit mask.
    let mut n = 0;
    for start in (0..m).step_by(64) {
        let mut mask = flagged(&sc.flags, start, m, NEEDS_LOG_X);
        while mask != 0 {
            let i = start + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            sc.test_task[n] = i as u16;
            sc.test_shape[n] = sc.shape_a[i];
            sc.test_z[n] = sc.z1[i];
            sc.test_word[n] = sc.words[2][i];
            n += 1;
        }
    }
    for start in (0..m).step_by(64) {
        let mut mask = flagged(&sc.flags, start, m, NEEDS_LOG_Y);
        while mask != 0 {
            let i = start + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            sc.test_task[n] = i as u16;
            sc.test_shape[n] = sc.shape_b[i];
            sc.test_z[n] = sc.z2[i];
            sc.test_word[n] = sc.words[3][i];
            n += 1;
        }
    }
    let padded = whole_groups(n);
    for t in n..padded {
        (sc.test_shape[t], sc.test_z[t], sc.test_word[t]) = (1.0, 0.0, 1 << 31);
    }
    for g in (0..padded).step_by(GROUP) {
        // Fixed-size groups: the loop vectoriser widens a constant trip count exactly.
        let shape: &[f32; GROUP] = sc.test_shape[g..g + GROUP].try_into().expect("a group");
        let z: &[f32; GROUP] = sc.test_z[g..g + GROUP].try_into().expect("a group");
        let word: &[u32; GROUP] = sc.test_word[g..g + GROUP].try_into().expect("a group");
        let pass: &mut [bool; GROUP] = (&mut sc.test_pass[g..g + GROUP]).try_into().expect("a group");
        for t in 0..GROUP {
            pass[t] = gamma_log_test(shape[t], z[t], open01(word[t]));
        }
    }
    // Every pending test is now decided: clear the pending flags (one vector pass), then mark the
    // tasks of the few failed tests (about 1 in 20) for retry.
    for f in &mut sc.flags[..m] {
        *f &= RETRY;
    }
    let mut all = true;
    for g in (0..padded).step_by(GROUP) {
        let pass: &[bool; GROUP] = sc.test_pass[g..g + GROUP].try_into().expect("a group");
        if pass.iter().fold(true, |acc, &p| acc & p) {
            continue;
        }
        for t in g..(g + GROUP).min(n) {
            if !sc.test_pass[t] {
                sc.flags[sc.test_task[t] as usize] = RETRY;
                all = false;
            }
        }
    }
    all
}

/// Thompson draws for tasks `base..base + a.len()`, handed to `sink` block by block in task
/// order. Returns the first task whose shapes are not valid (not finite and > 0), if any: its
/// draw is NaN.
#[inline(always)]
pub(crate) fn thompson_chunk(
    a: &[f64],
    b: &[f64],
    base: usize,
    seed: u64,
    counter: u64,
    sc: &mut Scratch,
    sink: &mut impl DrawSink,
) -> Option<usize> {
    let key = philox_key(seed, counter);
    let n = a.len();
    let mut invalid = None;
    let mut start = 0;
    while start < n {
        let m = BLOCK.min(n - start);
        let (ab, bb) = (&a[start..start + m], &b[start..start + m]);
        philox_stage(sc, base + start, m, counter, key);
        normal_stage(sc, ab, bb);
        if !gamma_stage(sc, m) {
            let bad = retry_block(sc, ab, bb, base + start, seed, counter, key);
            invalid = invalid.or(bad.map(|i| base + start + i));
        }
        sink.block(start, &sc.x[..m]);
        start += m;
    }
    invalid
}

/// Redraws the tasks of a block whose first try was rejected (or whose shapes are below 1).
/// Returns the first offset whose shapes are invalid (drawn as NaN).
#[inline(always)]
pub(crate) fn retry_block(sc: &mut Scratch, ab: &[f64], bb: &[f64], first: usize, seed: u64, counter: u64, key: [u32; 2]) -> Option<usize> {
    let mut invalid = None;
    let mut np = 0;
    let m = ab.len();
    for start in (0..m).step_by(64) {
        let mut mask = flagged(&sc.flags, start, m, RETRY | NEEDS_LOG_X | NEEDS_LOG_Y);
        while mask != 0 {
            let i = start + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if !(crate::types::is_shape(ab[i]) && crate::types::is_shape(bb[i])) {
                sc.x[i] = f32::NAN;
                invalid = invalid.or(Some(i));
            } else if ab[i] < 1.0 || bb[i] < 1.0 || sc.shape_a[i] > f32::MAX || sc.shape_b[i] > f32::MAX {
                sc.x[i] = exact_redraw(ab[i], bb[i], seed, counter, (first + i) as u64);
            } else {
                sc.pending[np] = i as u16;
                np += 1;
            }
        }
    }
    let mut attempt = 1;
    while np > 0 && attempt < MAX_ATTEMPTS {
        for t in 0..np {
            let i = sc.pending[t] as usize;
            sc.ra[t] = sc.shape_a[i];
            sc.rb[t] = sc.shape_b[i];
            sc.rj[t] = (first + i) as u64;
        }
        let padded = whole_groups(np);
        for t in np..padded {
            (sc.ra[t], sc.rb[t], sc.rj[t]) = (1.0, 1.0, 0);
        }
        for g in (0..padded).step_by(GROUP) {
            // Fixed-size groups, as in `log_tests`.
            let j: &[u64; GROUP] = sc.rj[g..g + GROUP].try_into().expect("a group");
            let sa: &[f32; GROUP] = sc.ra[g..g + GROUP].try_into().expect("a group");
            let sb: &[f32; GROUP] = sc.rb[g..g + GROUP].try_into().expect("a group");
            let mut words = [[0u32; GROUP]; 4];
            for t in 0..GROUP {
                let w = philox4x32(task_counter(j[t], counter, attempt), key);
                (words[0][t], words[1][t], words[2][t], words[3][t]) = (w[0], w[1], w[2], w[3]);
            }
            let (mut p, mut accepted) = ([0f32; GROUP], [false; GROUP]);
            for t in 0..GROUP {
                (p[t], accepted[t]) = beta_attempt(sa[t], sb[t], [words[0][t], words[1][t], words[2][t], words[3][t]]);
            }
            sc.rp[g..g + GROUP].copy_from_slice(&p);
            sc.rok[g..g + GROUP].copy_from_slice(&accepted);
        }
        let mut keep = 0;
        for t in 0..np {
            let i = sc.pending[t] as usize;
            if sc.rok[t] {
                sc.x[i] = sc.rp[t];
            } else {
                sc.pending[keep] = i as u16;
                keep += 1;
            }
        }
        np = keep;
        attempt += 1;
    }
    for t in 0..np {
        let i = sc.pending[t] as usize;
        sc.x[i] = exact_redraw(ab[i], bb[i], seed, counter, (first + i) as u64);
    }
    invalid
}

/// A fresh exact Beta draw for task `j` (scalar, f64), from its own stream.
#[cold]
fn exact_redraw(a: f64, b: f64, seed: u64, counter: u64, j: u64) -> f32 {
    let mut rng = Xoshiro256pp::for_key(seed ^ 0x5DEE_CE66_D1CE_4E5B, counter, j);
    sampler::beta(a, b, &mut rng) as f32
}

/// One chunk of draws into `out` (chunk `chunk` of the pool).
#[inline(always)]
fn draws_chunk(a: &[f64], b: &[f64], seed: u64, counter: u64, chunk: usize, sc: &mut Scratch, out: &mut [f32]) -> Option<usize> {
    thompson_chunk(a, b, chunk * CHUNK, seed, counter, sc, &mut Store(out))
}

#[allow(clippy::too_many_arguments)]
fn draws_chunk_on(
    simd: SimdPath,
    a: &[f64],
    b: &[f64],
    seed: u64,
    counter: u64,
    chunk: usize,
    sc: &mut Scratch,
    out: &mut [f32],
) -> Option<usize> {
    simd.dispatch(
        #[inline(always)]
        || draws_chunk(a, b, seed, counter, chunk, sc, out),
    )
}

/// Task `j`'s draw alone (a block of one task: the same bits as in a whole pass).
#[inline(always)]
fn draw_one(a: &[f64], b: &[f64], j: usize, seed: u64, counter: u64, sc: &mut Scratch, out: &mut [f32]) -> Option<usize> {
    thompson_chunk(&a[j..j + 1], &b[j..j + 1], j, seed, counter, sc, &mut Store(out))
}

#[allow(clippy::too_many_arguments)]
fn draw_one_on(
    simd: SimdPath,
    a: &[f64],
    b: &[f64],
    j: usize,
    seed: u64,
    counter: u64,
    sc: &mut Scratch,
    out: &mut [f32],
) -> Option<usize> {
    simd.dispatch(
        #[inline(always)]
        || draw_one(a, b, j, seed, counter, sc, out),
    )
}

/// The Thompson draws selection `(seed, counter)` makes for the tasks `ids` only (a selection's
/// picks, for per-pick diagnostics): `out[i]` is task `ids[i]`'s draw, bit for bit what the whole
/// pass draws for it. Errors name the argument: `beta` or `out` of another length, an id out of
/// range, a shape that is not finite and > 0.
pub fn thompson_draws_at(alpha: &[f64], beta: &[f64], ids: &[usize], seed: u64, counter: u64, out: &mut [f32]) -> Result<()> {
    let n = pool_len(alpha, beta)?;
    if out.len() != ids.len() {
        return Err(CoreError::shape("out", format!("has length {}, ids has {}", out.len(), ids.len())));
    }
    if let Some(&bad) = ids.iter().find(|&&j| j >= n) {
        return Err(CoreError::value("ids", format!("{bad} is out of range [0, {n})")));
    }
    let simd = crate::simd_path::simd_path();
    let mut sc = Scratch::new();
    for (i, &j) in ids.iter().enumerate() {
        if let Some(bad) = draw_one_on(simd, alpha, beta, j, seed, counter, &mut sc, &mut out[i..i + 1]) {
            return Err(invalid_task(alpha, beta, bad));
        }
    }
    Ok(())
}

/// The Thompson draws a selection with `(seed, counter)` makes, for every task, computed on
/// `simd` (every SIMD path gives the same bits). For distribution tests and diagnostics:
/// selection itself never stores them.
///
/// Errors name the argument: `beta` or `out` of another length than `alpha`, a shape that is not
/// finite and > 0.
pub fn thompson_draws(simd: SimdPath, alpha: &[f64], beta: &[f64], seed: u64, counter: u64, out: &mut [f32]) -> Result<()> {
    use rayon::prelude::*;
    let n = pool_len(alpha, beta)?;
    if out.len() != n {
        return Err(CoreError::shape("out", format!("has length {}, alpha has {n}", out.len())));
    }
    check_shapes(alpha, beta)?;
    out.par_chunks_mut(CHUNK).enumerate().for_each_init(Scratch::new, |sc, (c, o)| {
        let lo = c * CHUNK;
        let (a, b) = (&alpha[lo..lo + o.len()], &beta[lo..lo + o.len()]);
        draws_chunk_on(simd, a, b, seed, counter, c, sc, o);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd_path::available_simd_paths;

    fn pool(n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut r = Xoshiro256pp::from_seed(3);
        let a = (0..n).map(|i| if i % 97 == 0 { 0.4 } else { 1.0 + 30.0 * r.open01() }).collect();
        let b = (0..n).map(|_| 1.0 + 30.0 * r.open01()).collect();
        (a, b)
    }

    #[test]
    fn every_simd_path_draws_the_same_bits() {
        let n = 3 * CHUNK + 5;
        let (a, b) = pool(n);
        let mut reference = vec![0f32; n];
        thompson_draws(SimdPath::Portable, &a, &b, 9, 4, &mut reference).unwrap();
        for simd in available_simd_paths() {
            let mut out = vec![0f32; n];
            thompson_draws(simd, &a, &b, 9, 4, &mut out).unwrap();
            assert!(out.iter().zip(&reference).all(|(x, y)| x.to_bits() == y.to_bits()), "{simd:?} differs");
        }
        assert!(reference.iter().all(|p| (0.0..=1.0).contains(p)));
    }

    /// `ratio` returns the f32 nearest to x / (x + y), checked exactly in integers, where the
    /// quotient in f32 (its sum rounded first) often does not: half the pairs are like
    /// Beta(1e6, 1)'s (x near 1e6, y near 1), half spread over x in [1, 2^21), y in [2^-10, 2^12].
    #[test]
    fn the_ratio_is_the_nearest_f32() {
        // Every value is an integer in units of 2^-e: x, y, x + y in units of 2^-33 (below 2^55),
        // the ratio and its neighbours in units of 2^-40 (it is above 2^-13, so its step is at
        // least 2^-36), their products below 2^97.
        let units = |v: f64, e: i32| -> i128 {
            let scaled = v * 2f64.powi(e);
            assert_eq!(scaled, scaled.trunc(), "{v} is not a multiple of 2^-{e}");
            scaled as i128
        };
        let mut r = Xoshiro256pp::from_seed(5);
        let (mut twice_rounded, n) = (0, 1_000_000);
        for k in 0..n {
            let (x, y) = if k % 2 == 0 {
                ((1e6 + 2e3 * (r.open01() - 0.5)) as f32, (2f64.powi(-10) + 4.0 * r.open01()) as f32)
            } else {
                (2f64.powf(21.0 * r.open01()) as f32, 2f64.powf(22.0 * r.open01() - 10.0) as f32)
            };
            let q = ratio(x, y);
            let (below, above) = (f32::from_bits(q.to_bits() - 1), f32::from_bits(q.to_bits() + 1));
            let sum = units(x as f64, 33) + units(y as f64, 33);
            let two_x = units(x as f64, 33) << 41; // 2x in units of 2^-73
            let (qu, bu, au) = (units(q as f64, 40), units(below as f64, 40), units(above as f64, 40));
            // q is nearest iff (below + q) / 2 <= x / (x + y) <= (q + above) / 2.
            assert!((bu + qu) * sum <= two_x && two_x <= (qu + au) * sum, "ratio({x:e}, {y:e}) = {q:e}");
            twice_rounded += (x / (x + y) != q) as usize;
        }
        assert!(twice_rounded > n / 100, "the f32 quotient differs in only {twice_rounded} of {n}");
    }

    #[test]
    fn vector_draws_have_beta_moments() {
        for &(sa, sb) in &[(1.0, 1.0), (2.5, 40.0), (40.0, 2.5), (5000.0, 5000.0), (0.3, 0.5), (1.0, 0.5)] {
            let n = 200_000;
            let (a, b) = (vec![sa; n], vec![sb; n]);
            for simd in available_simd_paths() {
                let mut out = vec![0f32; n];
                thompson_draws(simd, &a, &b, 1, 0, &mut out).unwrap();
                let m = out.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
                let v = out.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (n - 1) as f64;
                let em = sa / (sa + sb);
                let ev = sa * sb / ((sa + sb) * (sa + sb) * (sa + sb + 1.0));
                assert!((m - em).abs() < 6.0 * (ev / n as f64).sqrt() + 1e-7, "{simd:?} mean {sa},{sb}: {m} vs {em}");
                assert!((v - ev).abs() < 0.05 * ev, "{simd:?} var {sa},{sb}: {v} vs {ev}");
            }
        }
    }

    #[test]
    fn thompson_draws_rejects_unequal_lengths() {
        let (a, b) = pool(10);
        let mut out = vec![0f32; 10];
        assert_eq!(thompson_draws(SimdPath::Portable, &a, &b[..9], 1, 0, &mut out).unwrap_err().argument, "beta");
        assert_eq!(thompson_draws(SimdPath::Portable, &a, &b, 1, 0, &mut out[..9]).unwrap_err().argument, "out");
    }

    #[test]
    fn thompson_draws_rejects_shapes_that_are_not_finite_and_positive() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let (mut a, mut b) = pool(2 * CHUNK);
            let mut out = vec![0f32; a.len()];
            a[1500] = bad;
            let err = thompson_draws(SimdPath::Portable, &a, &b, 1, 0, &mut out).unwrap_err();
            assert_eq!((err.argument, err.kind), ("alpha", crate::ErrorKind::Value), "{bad}");
            assert!(err.message.contains("index 1500"), "{}", err.message);
            a[1500] = 2.0;
            b[7] = bad;
            assert_eq!(thompson_draws(SimdPath::Portable, &a, &b, 1, 0, &mut out).unwrap_err().argument, "beta");
        }
    }

    #[test]
    fn shapes_beyond_f32_take_the_exact_path() {
        let (a, b) = (vec![1e39, 3.0, 1e300], vec![2.0, 1e39, 1e300]);
        let mut out = vec![0f32; 3];
        thompson_draws(SimdPath::Portable, &a, &b, 1, 0, &mut out).unwrap();
        assert!(out[0] > 0.999 && out[1] < 0.001 && (out[2] - 0.5).abs() < 1e-3, "{out:?}");
    }
}
