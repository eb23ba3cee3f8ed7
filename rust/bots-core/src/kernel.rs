//! Per-chunk kernels: the posterior update of one chunk and the scoring of its tasks for
//! selection, compiled once per instruction set and chosen at run time.
//!
//! The code is written once (`#[inline(always)]` generics over 16-lane arrays) and instantiated
//! inside `#[target_feature]` wrappers, so each backend is the same algorithm vectorised for its
//! registers. No fused multiply-adds are used, so every backend gives bit-identical results.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::lanes::{ln, open01, philox4x32, sincos_turns, BLOCK};
use crate::rng::Xoshiro256pp;
use crate::sampler;
use std::sync::atomic::AtomicU64;

use crate::select::{Exclude, Scoring, Selection, TopK};
use crate::update::{Evidence, Prior};

/// Instruction sets a kernel can be compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Portable,
    Avx2,
    Avx512,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Portable => "portable",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
        }
    }

    pub fn from_name(name: &str) -> Option<Backend> {
        match name {
            "portable" => Some(Backend::Portable),
            "avx2" => Some(Backend::Avx2),
            "avx512" => Some(Backend::Avx512),
            _ => None,
        }
    }

    pub fn is_available(self) -> bool {
        match self {
            Backend::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => {
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512dq")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// Every backend this CPU can run, fastest last.
pub fn available_backends() -> Vec<Backend> {
    [Backend::Portable, Backend::Avx2, Backend::Avx512].into_iter().filter(|b| b.is_available()).collect()
}

static FORCED: AtomicU8 = AtomicU8::new(0);

/// Forces a backend (tests, benchmarks); `None` returns to automatic choice. An unavailable
/// backend is refused.
pub fn set_backend(backend: Option<Backend>) -> bool {
    let code = match backend {
        None => 0,
        Some(b) if !b.is_available() => return false,
        Some(Backend::Portable) => 1,
        Some(Backend::Avx2) => 2,
        Some(Backend::Avx512) => 3,
    };
    FORCED.store(code, Ordering::Relaxed);
    true
}

/// The backend kernels run with now.
pub fn backend() -> Backend {
    match FORCED.load(Ordering::Relaxed) {
        1 => Backend::Portable,
        2 => Backend::Avx2,
        3 => Backend::Avx512,
        _ => *available_backends().last().unwrap_or(&Backend::Portable),
    }
}

/// Values the update reads per task, monomorphised so the inner loop has no branches on kind.
pub trait PerTask: Copy + Send + Sync {
    fn at(&self, k: usize) -> f64;
}

#[derive(Clone, Copy)]
pub struct Scalar(pub f64);
impl PerTask for Scalar {
    #[inline(always)]
    fn at(&self, _: usize) -> f64 {
        self.0
    }
}

#[derive(Clone, Copy)]
pub struct Slice<'a>(pub &'a [f64]);
impl PerTask for Slice<'_> {
    #[inline(always)]
    fn at(&self, k: usize) -> f64 {
        self.0[k]
    }
}

/// No prediction for any task.
#[derive(Clone, Copy)]
pub struct NoPrediction;
impl PerTask for NoPrediction {
    #[inline(always)]
    fn at(&self, _: usize) -> f64 {
        f64::NAN
    }
}

/// The interpolation estimator evaluated in place.
#[derive(Clone, Copy)]
pub struct Interp<'a> {
    pub weak: &'a [f32],
    pub strong: &'a [f32],
    pub mu: f64,
}
impl PerTask for Interp<'_> {
    #[inline(always)]
    fn at(&self, k: usize) -> f64 {
        (self.mu * self.strong[k] as f64 + (1.0 - self.mu) * self.weak[k] as f64).clamp(0.0, 1.0)
    }
}

/// The update of one chunk, rolled-out tasks excluded (they are written afterwards).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // one monomorphised kernel per (prior, prior, evidence) kind
fn update_chunk<A: PerTask, B: PerTask, E: PerTask>(
    a: &mut [f64],
    b: &mut [f64],
    base: usize,
    pa: A,
    pb: B,
    ev: E,
    decay: f64,
    lam: f64,
    weight: f64,
) {
    for i in 0..a.len() {
        let k = base + i;
        let p = ev.at(k);
        let has = !p.is_nan();
        // Adding exactly 0.0 leaves the value bit-identical, so the no-prediction case needs
        // no branch.
        let add_a = if has { weight * p } else { 0.0 };
        let add_b = if has { weight * (1.0 - p) } else { 0.0 };
        a[i] = decay * a[i] + lam * pa.at(k) + add_a;
        b[i] = decay * b[i] + lam * pb.at(k) + add_b;
    }
}

/// Parameters of a chunk's update.
#[derive(Clone, Copy)]
pub struct ChunkUpdate<'a> {
    pub prior_alpha: Prior<'a>,
    pub prior_beta: Prior<'a>,
    pub evidence: Evidence<'a>,
    pub decay: f64,
    pub lam: f64,
    pub weight: f64,
    /// New (alpha, beta) of the rolled-out tasks, sorted by task id.
    pub rolled: &'a [(usize, f64, f64)],
}

#[inline(always)]
fn update_dispatch(a: &mut [f64], b: &mut [f64], base: usize, u: &ChunkUpdate) {
    macro_rules! go {
        ($pa:expr, $pb:expr) => {
            match u.evidence {
                Evidence::None => update_chunk(a, b, base, $pa, $pb, NoPrediction, u.decay, u.lam, u.weight),
                Evidence::Predicted(p) => update_chunk(a, b, base, $pa, $pb, Slice(p), u.decay, u.lam, u.weight),
                Evidence::Interpolation { weak, strong, mu } => {
                    update_chunk(a, b, base, $pa, $pb, Interp { weak, strong, mu }, u.decay, u.lam, u.weight)
                }
            }
        };
    }
    match (u.prior_alpha, u.prior_beta) {
        (Prior::Scalar(x), Prior::Scalar(y)) => go!(Scalar(x), Scalar(y)),
        (Prior::Scalar(x), Prior::PerTask(y)) => go!(Scalar(x), Slice(y)),
        (Prior::PerTask(x), Prior::Scalar(y)) => go!(Slice(x), Scalar(y)),
        (Prior::PerTask(x), Prior::PerTask(y)) => go!(Slice(x), Slice(y)),
    }
    let lo = u.rolled.partition_point(|r| r.0 < base);
    let hi = u.rolled.partition_point(|r| r.0 < base + a.len());
    for &(k, na, nb) in &u.rolled[lo..hi] {
        a[k - base] = na;
        b[k - base] = nb;
    }
}

/// Mixes (seed, counter, index) into one 64-bit key.
#[inline]
pub fn stream_key(seed: u64, counter: u64, index: u64) -> u64 {
    let mut r = Xoshiro256pp::for_key(seed, counter, index);
    r.next_u64()
}

/// Parameters of a chunk's scoring.
#[derive(Clone, Copy)]
pub struct ChunkScore<'a> {
    pub target: f64,
    pub scoring: Scoring,
    pub exclude: Exclude<'a>,
}

#[inline(always)]
fn excluded(exclude: &Exclude, index: usize) -> bool {
    match exclude {
        Exclude::None => false,
        Exclude::Mask(m) => m[index],
        Exclude::Ids(ids) => ids.binary_search(&index).is_ok(),
    }
}

/// Where Thompson draws go: a whole block at once, or one at a time.
trait DrawSink {
    fn one(&mut self, offset: usize, p: f32);
    #[inline(always)]
    fn block(&mut self, start: usize, p: &[f32]) {
        for (i, &v) in p.iter().enumerate() {
            self.one(start + i, v);
        }
    }
}

/// Offers draws to a top-B list; most blocks have no task within the bound and are skipped by
/// one vectorised scan.
struct Offer<'a, 'b, 't> {
    top: &'a mut TopK<'t>,
    target: f32,
    base: usize,
    exclude: &'a Exclude<'b>,
}

impl DrawSink for Offer<'_, '_, '_> {
    #[inline(always)]
    fn one(&mut self, offset: usize, p: f32) {
        let d = (p - self.target).abs() as f64;
        if d <= self.top.bound() && !excluded(self.exclude, self.base + offset) {
            self.top.push(d, self.base + offset);
        }
    }

    #[inline(always)]
    fn block(&mut self, start: usize, p: &[f32]) {
        // The bound only falls, so one f32 threshold is safe (rounded up) for the whole block.
        let bound = self.top.bound();
        let limit = if bound.is_finite() { next_up_f32(bound as f32) } else { f32::INFINITY };
        let mut d = [0f32; BLOCK];
        let mut hits = 0u32;
        for (di, &v) in d.iter_mut().zip(p) {
            *di = (v - self.target).abs();
            hits += (*di <= limit) as u32;
        }
        if hits > 0 {
            // Few tasks of a block come near the bound: find them 64 at a time, then visit only
            // those (early in a pass, when the bound is still loose, whole blocks qualify).
            for (g, group) in d[..p.len()].chunks(64).enumerate() {
                let mut group_hits = 0u32;
                for &di in group {
                    group_hits += (di <= limit) as u32;
                }
                if group_hits == 0 {
                    continue;
                }
                for (i, &di) in group.iter().enumerate() {
                    if di <= limit {
                        let at = g * 64 + i;
                        self.one(start + at, p[at]);
                    }
                }
            }
        }
    }
}

#[inline(always)]
fn next_up_f32(x: f32) -> f32 {
    if x >= 0.0 {
        f32::from_bits(x.to_bits() + 1)
    } else {
        x
    }
}

/// Writes draws to a buffer.
struct Store<'a>(&'a mut [f32]);

impl DrawSink for Store<'_> {
    #[inline(always)]
    fn one(&mut self, offset: usize, p: f32) {
        self.0[offset] = p;
    }

    #[inline(always)]
    fn block(&mut self, start: usize, p: &[f32]) {
        self.0[start..start + p.len()].copy_from_slice(p);
    }
}

/// The (seed, counter) key of every draw in one selection.
#[inline]
fn philox_key(seed: u64, counter: u64) -> [u32; 2] {
    let k = stream_key(seed, counter, u64::MAX);
    [k as u32, (k >> 32) as u32]
}

/// One attempt at a Beta(a, b) draw from four uniform words: Box–Muller normals, one per gamma,
/// and a Marsaglia–Tsang attempt for each (f32, shapes >= 1). Returns the draw and whether both
/// gammas were accepted; branch-free, so loops over it vectorise.
/// (The first try of every task, in `thompson_chunk`, computes exactly this in separate staged loops,
/// which run faster over whole blocks; this form serves the few compacted retries.)
#[inline(always)]
fn beta_attempt(sa: f32, sb: f32, w: [u32; 4]) -> (f32, bool) {
    let r = (-2.0 * ln(open01(w[0]))).sqrt();
    let (sn, cs) = sincos_turns(open01(w[1]));
    let (xv, okx) = sampler::gamma_attempt(sa, r * cs, open01(w[2]));
    let (yv, oky) = sampler::gamma_attempt(sb, r * sn, open01(w[3]));
    (xv / (xv + yv), okx & oky)
}

/// Philox counter of task `j`'s `attempt`-th try in selection `counter`. Pools up to 2^48 tasks.
#[inline(always)]
fn task_counter(j: u64, counter: u64, attempt: u32) -> [u32; 4] {
    [j as u32, counter as u32, (counter >> 32) as u32, (j >> 32) as u32 | (attempt << 16)]
}

/// Tries after which a task falls back to the scalar sampler (each try succeeds with probability
/// above 0.9, so this never happens in practice; it only bounds the loop).
const MAX_ATTEMPTS: u32 = 64;

/// The sampler's working memory for one block, allocated once per worker thread and reused for
/// every chunk it processes (zeroing it per chunk would cost more than the update pass).
pub struct Scratch {
    x: [f32; BLOCK],
    ok: [bool; BLOCK],
    words: [[u32; BLOCK]; 4],
    shape_a: [f32; BLOCK],
    shape_b: [f32; BLOCK],
    z1: [f32; BLOCK],
    z2: [f32; BLOCK],
    gx: [f32; BLOCK],
    // Compacted retries.
    pending: [u16; BLOCK],
    ra: [f32; BLOCK],
    rb: [f32; BLOCK],
    rw: [[u32; 4]; BLOCK],
    rp: [f32; BLOCK],
    rok: [bool; BLOCK],
}

impl Scratch {
    pub fn new() -> Box<Self> {
        Box::new(Self {
            x: [0.0; BLOCK],
            ok: [false; BLOCK],
            words: [[0; BLOCK]; 4],
            shape_a: [0.0; BLOCK],
            shape_b: [0.0; BLOCK],
            z1: [0.0; BLOCK],
            z2: [0.0; BLOCK],
            gx: [0.0; BLOCK],
            pending: [0; BLOCK],
            ra: [0.0; BLOCK],
            rb: [0.0; BLOCK],
            rw: [[0; 4]; BLOCK],
            rp: [0.0; BLOCK],
            rok: [false; BLOCK],
        })
    }
}

/// What one worker thread carries through a pass: its top-B candidates and its scratch memory.
pub struct Worker<'a> {
    pub top: TopK<'a>,
    scratch: Box<Scratch>,
}

impl<'a> Worker<'a> {
    pub fn new(k: usize, shared: &'a AtomicU64) -> Self {
        Self { top: TopK::new(k, shared), scratch: Scratch::new() }
    }

    pub fn merge(self, other: Worker<'a>) -> Worker<'a> {
        Worker { top: self.top.merge(other.top), scratch: self.scratch }
    }

    pub fn into_selection(self) -> Selection {
        self.top.into_selection()
    }
}

/// Thompson draws for tasks `base..base + a.len()`, handed to `sink` in task order.
///
/// Task j's k-th try uses the four words of Philox4x32-10 at counter (j, counter, k) under a key
/// derived from the seed; a block of tasks is tried at once (vectorised), and the tasks whose
/// pair of gamma attempts was rejected (a few percent) are tried again, compacted, with the next
/// k, until accepted. Accepted tries are exact draws, and redrawing the pair as a unit keeps them
/// so. Tasks with a shape below 1 take the exact scalar f64 sampler on a stream keyed by
/// (seed, counter, j). So a task's draw depends on nothing but (seed, counter, j, alpha_j, beta_j).
#[inline(always)]
fn thompson_chunk(a: &[f64], b: &[f64], base: usize, seed: u64, counter: u64, sc: &mut Scratch, sink: &mut impl DrawSink) {
    let key = philox_key(seed, counter);
    let n = a.len();
    let mut start = 0;
    while start < n {
        let m = BLOCK.min(n - start);
        let (ab, bb) = (&a[start..start + m], &b[start..start + m]);
        // Integer stage apart from the float stage: each loop then vectorises at its own width.
        for i in 0..m {
            let w = philox4x32(task_counter((base + start + i) as u64, counter, 0), key);
            sc.words[0][i] = w[0];
            sc.words[1][i] = w[1];
            sc.words[2][i] = w[2];
            sc.words[3][i] = w[3];
        }
        for i in 0..m {
            sc.shape_a[i] = ab[i] as f32;
            sc.shape_b[i] = bb[i] as f32;
        }
        // Short loops, one stage each: LLVM interleaves them and the core overlaps their long
        // polynomial chains, which one large loop body does not allow.
        for i in 0..m {
            let r = (-2.0 * ln(open01(sc.words[0][i]))).sqrt();
            let (sn, cs) = sincos_turns(open01(sc.words[1][i]));
            sc.z1[i] = r * cs;
            sc.z2[i] = r * sn;
        }
        for i in 0..m {
            let (xv, okx) = sampler::gamma_attempt(sc.shape_a[i], sc.z1[i], open01(sc.words[2][i]));
            sc.gx[i] = xv;
            sc.ok[i] = okx;
        }
        let mut all_ok = true;
        for i in 0..m {
            let (sa, sb) = (sc.shape_a[i], sc.shape_b[i]);
            let (yv, oky) = sampler::gamma_attempt(sb, sc.z2[i], open01(sc.words[3][i]));
            // Shapes below 1 (f32 compare is exact at 1.0) take the exact scalar path.
            let fine = sc.ok[i] & oky & (sa >= 1.0) & (sb >= 1.0);
            sc.x[i] = sc.gx[i] / (sc.gx[i] + yv);
            sc.ok[i] = fine;
            all_ok &= fine;
        }
        if !all_ok {
            retry_block(sc, m, ab, bb, base + start, seed, counter, key);
        }
        sink.block(start, &sc.x[..m]);
        start += m;
    }
}

/// Redraws the tasks of a block whose first try was rejected (or whose shapes are below 1).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn retry_block(sc: &mut Scratch, m: usize, ab: &[f64], bb: &[f64], first: usize, seed: u64, counter: u64, key: [u32; 2]) {
    let mut np = 0;
    for i in 0..m {
        if sc.ok[i] {
            continue;
        }
        if ab[i] < 1.0 || bb[i] < 1.0 {
            sc.x[i] = exact_redraw(ab[i], bb[i], seed, counter, (first + i) as u64);
        } else {
            sc.pending[np] = i as u16;
            np += 1;
        }
    }
    let mut attempt = 1;
    while np > 0 && attempt < MAX_ATTEMPTS {
        for t in 0..np {
            let i = sc.pending[t] as usize;
            sc.ra[t] = sc.shape_a[i];
            sc.rb[t] = sc.shape_b[i];
            sc.rw[t] = philox4x32(task_counter((first + i) as u64, counter, attempt), key);
        }
        for t in 0..np {
            let (p, accepted) = beta_attempt(sc.ra[t], sc.rb[t], sc.rw[t]);
            sc.rp[t] = p;
            sc.rok[t] = accepted;
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
}

/// A fresh exact Beta draw for task `j` (scalar, f64), from its own stream.
#[cold]
fn exact_redraw(a: f64, b: f64, seed: u64, counter: u64, j: u64) -> f32 {
    let mut rng = Xoshiro256pp::for_key(seed ^ 0x5DEE_CE66_D1CE_4E5B, counter, j);
    sampler::beta(a, b, &mut rng) as f32
}

/// Scores one chunk's tasks and offers them to `top`.
#[inline(always)]
fn score_chunk(a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    match s.scoring {
        Scoring::Greedy => {
            let top = &mut w.top;
            let mut start = 0;
            while start < a.len() {
                let m = BLOCK.min(a.len() - start);
                let (ab, bb) = (&a[start..start + m], &b[start..start + m]);
                // One vectorised scan finds whether any task of the block beats the bound.
                let bound = top.bound();
                let mut d = [0f64; BLOCK];
                let mut hits = 0u32;
                for i in 0..m {
                    d[i] = (ab[i] / (ab[i] + bb[i]) - s.target).abs();
                    hits += (d[i] <= bound) as u32;
                }
                if hits > 0 {
                    for (i, &di) in d[..m].iter().enumerate() {
                        if di <= top.bound() && !excluded(&s.exclude, base + start + i) {
                            top.push(di, base + start + i);
                        }
                    }
                }
                start += m;
            }
        }
        Scoring::Thompson { seed, counter } => {
            let Worker { top, scratch } = w;
            let mut sink = Offer { top, target: s.target as f32, base, exclude: &s.exclude };
            thompson_chunk(a, b, base, seed, counter, scratch, &mut sink);
        }
    }
}

#[inline(always)]
fn draws_generic(a: &[f64], b: &[f64], seed: u64, counter: u64, chunk: u64, sc: &mut Scratch, out: &mut [f32]) {
    thompson_chunk(a, b, chunk as usize * crate::CHUNK, seed, counter, sc, &mut Store(out));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,popcnt")]
unsafe fn draws_avx512(a: &[f64], b: &[f64], seed: u64, counter: u64, chunk: u64, sc: &mut Scratch, out: &mut [f32]) {
    draws_generic(a, b, seed, counter, chunk, sc, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,popcnt")]
unsafe fn draws_avx2(a: &[f64], b: &[f64], seed: u64, counter: u64, chunk: u64, sc: &mut Scratch, out: &mut [f32]) {
    draws_generic(a, b, seed, counter, chunk, sc, out)
}

/// The Thompson draws a selection with `(seed, counter)` would make, for every task (exposed for
/// distribution tests and diagnostics; selection itself never stores them).
pub fn thompson_draws(backend: Backend, alpha: &[f64], beta: &[f64], seed: u64, counter: u64, out: &mut [f32]) {
    use rayon::prelude::*;
    out.par_chunks_mut(crate::CHUNK).enumerate().for_each_init(Scratch::new, |sc, (c, o)| {
        let lo = c * crate::CHUNK;
        let (a, b) = (&alpha[lo..lo + o.len()], &beta[lo..lo + o.len()]);
        match backend {
            // SAFETY: a backend is only ever chosen after its features were detected at run time.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 if backend.is_available() => unsafe { draws_avx512(a, b, seed, counter, c as u64, sc, o) },
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 if backend.is_available() => unsafe { draws_avx2(a, b, seed, counter, c as u64, sc, o) },
            _ => draws_generic(a, b, seed, counter, c as u64, sc, o),
        }
    });
}

/// One chunk: optional update, then optional scoring.
#[inline(always)]
fn chunk_generic(a: &mut [f64], b: &mut [f64], base: usize, u: Option<&ChunkUpdate>, s: Option<&ChunkScore>, w: &mut Worker<'_>) {
    if let Some(u) = u {
        update_dispatch(a, b, base, u);
    }
    if let Some(s) = s {
        score_chunk(a, b, base, s, w);
    }
}

#[inline(always)]
fn score_generic(a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    score_chunk(a, b, base, s, w);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,popcnt")]
unsafe fn chunk_avx512(a: &mut [f64], b: &mut [f64], base: usize, u: Option<&ChunkUpdate>, s: Option<&ChunkScore>, w: &mut Worker<'_>) {
    chunk_generic(a, b, base, u, s, w)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,popcnt")]
unsafe fn chunk_avx2(a: &mut [f64], b: &mut [f64], base: usize, u: Option<&ChunkUpdate>, s: Option<&ChunkScore>, w: &mut Worker<'_>) {
    chunk_generic(a, b, base, u, s, w)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,popcnt")]
unsafe fn score_avx512(a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    score_generic(a, b, base, s, w)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,popcnt")]
unsafe fn score_avx2(a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    score_generic(a, b, base, s, w)
}

/// Runs one chunk (update and/or scoring) on `backend`.
pub fn run_chunk(backend: Backend, a: &mut [f64], b: &mut [f64], base: usize, u: Option<&ChunkUpdate>, s: Option<&ChunkScore>, w: &mut Worker<'_>) {
    match backend {
        // SAFETY: a backend is only ever chosen after its features were detected at run time.
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 => unsafe { chunk_avx512(a, b, base, u, s, w) },
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => unsafe { chunk_avx2(a, b, base, u, s, w) },
        _ => chunk_generic(a, b, base, u, s, w),
    }
}

/// Scores one chunk of a read-only posterior on `backend`.
pub fn run_score(backend: Backend, a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    match backend {
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 => unsafe { score_avx512(a, b, base, s, w) },
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => unsafe { score_avx2(a, b, base, s, w) },
        _ => score_generic(a, b, base, s, w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut r = Xoshiro256pp::from_seed(3);
        let a = (0..n).map(|i| if i % 97 == 0 { 0.4 } else { 1.0 + 30.0 * r.open01() }).collect();
        let b = (0..n).map(|_| 1.0 + 30.0 * r.open01()).collect();
        (a, b)
    }

    #[test]
    fn every_backend_draws_the_same_bits() {
        let n = 3 * crate::CHUNK + 5;
        let (a, b) = pool(n);
        let mut reference = vec![0f32; n];
        thompson_draws(Backend::Portable, &a, &b, 9, 4, &mut reference);
        for backend in available_backends() {
            let mut out = vec![0f32; n];
            thompson_draws(backend, &a, &b, 9, 4, &mut out);
            assert!(out.iter().zip(&reference).all(|(x, y)| x.to_bits() == y.to_bits()), "{backend:?} differs");
        }
        assert!(reference.iter().all(|p| (0.0..=1.0).contains(p)));
    }

    #[test]
    fn vector_draws_have_beta_moments() {
        for &(sa, sb) in &[(1.0, 1.0), (2.5, 40.0), (40.0, 2.5), (5000.0, 5000.0), (0.3, 0.5), (1.0, 0.5)] {
            let n = 200_000;
            let (a, b) = (vec![sa; n], vec![sb; n]);
            for backend in available_backends() {
                let mut out = vec![0f32; n];
                thompson_draws(backend, &a, &b, 1, 0, &mut out);
                let m = out.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
                let v = out.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (n - 1) as f64;
                let em = sa / (sa + sb);
                let ev = sa * sb / ((sa + sb) * (sa + sb) * (sa + sb + 1.0));
                assert!((m - em).abs() < 6.0 * (ev / n as f64).sqrt() + 1e-7, "{backend:?} mean {sa},{sb}: {m} vs {em}");
                assert!((v - ev).abs() < 0.05 * ev, "{backend:?} var {sa},{sb}: {v} vs {ev}");
            }
        }
    }

    #[test]
    fn selection_is_identical_on_every_backend() {
        let n = 5 * crate::CHUNK + 11;
        let (a, b) = pool(n);
        let args = crate::SelectArgs { k: 300, target: 0.5, scoring: Scoring::Thompson { seed: 5, counter: 2 }, exclude: Exclude::None, hint: None };
        let mut results = Vec::new();
        for backend in available_backends() {
            let score = ChunkScore { target: args.target, scoring: args.scoring, exclude: args.exclude };
            let shared = TopK::shared_bound(None);
            let mut worker = Worker::new(args.k, &shared);
            for (c, (ca, cb)) in a.chunks(crate::CHUNK).zip(b.chunks(crate::CHUNK)).enumerate() {
                run_score(backend, ca, cb, c * crate::CHUNK, &score, &mut worker);
            }
            results.push(worker.into_selection().ids);
        }
        assert!(results.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(results[0], crate::select(&a, &b, 300, 0.5, args.scoring, Exclude::None).unwrap());
    }
}
