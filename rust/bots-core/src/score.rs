//! Scoring one chunk for selection: each task's distance to the target (of its posterior mean,
//! or of its Thompson draw) offered to the worker's top-B list, plus the fused per-chunk pass
//! (update, then score, while the chunk is in cache), compiled per SIMD path.

use std::sync::atomic::AtomicU64;

use crate::lanes::BLOCK;
use crate::simd_path::SimdPath;
use crate::thompson::{gumbel, philox_key, thompson_chunk, DrawSink, Scratch};
use crate::topk::TopK;
use crate::types::{is_shape, Exclude, Scoring, Selection};
use crate::update_kernel::{update_chunk, ChunkUpdate};

/// Parameters of a chunk's scoring.
#[derive(Clone, Copy)]
pub(crate) struct ChunkScore<'a> {
    pub target: f64,
    pub scoring: Scoring,
    pub exclude: Exclude<'a>,
    /// Index of the slice's first task in the whole pool: random variates are keyed by the
    /// global index `first_index + i`, so a shard draws exactly what the whole pool draws for its
    /// tasks. Everything else (exclusions, top-B entries, invalid tasks) uses slice positions.
    pub first_index: usize,
}

/// What one worker thread carries through a pass: its top-B candidates, its sampler scratch
/// memory, and the first task it found with a posterior that is not a valid Beta (checked during
/// scoring, where it costs nothing, instead of in a separate pass).
pub(crate) struct Worker<'a> {
    top: TopK<'a>,
    scratch: Box<Scratch>,
    invalid: Option<usize>,
}

impl<'a> Worker<'a> {
    pub(crate) fn new(k: usize, shared: &'a AtomicU64) -> Self {
        Self { top: TopK::new(k, shared), scratch: Scratch::new(), invalid: None }
    }

    pub(crate) fn merge(self, other: Worker<'a>) -> Worker<'a> {
        let invalid = match (self.invalid, other.invalid) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        Worker { top: self.top.merge(other.top), scratch: self.scratch, invalid }
    }

    /// The selection (ids shifted by `first_index`), or the first task (slice position) whose
    /// posterior is not finite and > 0.
    pub(crate) fn finish(self, first_index: usize) -> std::result::Result<Selection, usize> {
        match self.invalid {
            Some(j) => Err(j),
            None => Ok(self.top.into_selection(first_index)),
        }
    }

    fn flag_invalid(&mut self, j: Option<usize>) {
        if let Some(j) = j {
            self.invalid = Some(self.invalid.map_or(j, |i| i.min(j)));
        }
    }
}

/// Offers a chunk's Thompson draws to a top-B list; most blocks have no task within the bound
/// and are skipped by one vectorised scan.
struct Offer<'a, 'b, 't> {
    top: &'a mut TopK<'t>,
    target: f32,
    base: usize,
    exclude: &'a Exclude<'b>,
}

impl Offer<'_, '_, '_> {
    #[inline(always)]
    fn one(&mut self, offset: usize, p: f32) {
        let d = (p - self.target).abs() as f64;
        if d <= self.top.bound() && !self.exclude.excludes(self.base + offset) {
            self.top.push(d, self.base + offset);
        }
    }
}

impl DrawSink for Offer<'_, '_, '_> {
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

/// The smallest f32 above `x` (for x >= 0).
#[inline(always)]
fn next_up_f32(x: f32) -> f32 {
    if x >= 0.0 {
        f32::from_bits(x.to_bits() + 1)
    } else {
        x
    }
}

/// Offers tasks `base..base + a.len()` by their posterior mean.
#[inline(always)]
fn score_greedy(a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    let top = &mut w.top;
    let mut start = 0;
    while start < a.len() {
        let m = BLOCK.min(a.len() - start);
        let (ab, bb) = (&a[start..start + m], &b[start..start + m]);
        // One vectorised scan finds whether any task of the block beats the bound (and whether
        // any posterior is invalid).
        let bound = top.bound();
        let mut d = [0f64; BLOCK];
        let mut hits = 0u32;
        let mut valid = true;
        for i in 0..m {
            d[i] = (ab[i] / (ab[i] + bb[i]) - s.target).abs();
            hits += (d[i] <= bound) as u32;
            valid &= is_shape(ab[i]) & is_shape(bb[i]);
        }
        if !valid {
            let bad = (0..m).find(|&i| !(is_shape(ab[i]) && is_shape(bb[i])));
            w.invalid = w.invalid.or(bad.map(|i| base + start + i));
        }
        if hits > 0 {
            for (i, &di) in d[..m].iter().enumerate() {
                if di <= top.bound() && !s.exclude.excludes(base + start + i) {
                    top.push(di, base + start + i);
                }
            }
        }
        start += m;
    }
}

/// Gumbel variates lie below this (see `gumbel`): a softmax key's distance form
/// |θ − target| / tau + (GUMBEL_SHIFT − G) is then positive, as the top-B list requires.
const GUMBEL_SHIFT: f64 = 40.0;
/// An upper bound of any Gumbel variate `gumbel` returns.
const GUMBEL_MAX: f64 = 37.5;

/// Offers tasks by their softmax key (Gumbel-top-k), given each task's θ.
struct SoftmaxOffer<'a, 'b, 't> {
    top: &'a mut TopK<'t>,
    target: f64,
    inv_tau: f64,
    key: [u32; 2],
    counter: u64,
    first_index: usize,
    base: usize,
    exclude: &'a Exclude<'b>,
}

impl SoftmaxOffer<'_, '_, '_> {
    #[inline(always)]
    fn offer(&mut self, offset: usize, theta: f64) {
        let near = (theta - self.target).abs() * self.inv_tau;
        // No Gumbel variate can bring a task closer than this: skip the variate when it is out.
        if near + (GUMBEL_SHIFT - GUMBEL_MAX) > self.top.bound() {
            return;
        }
        let j = self.base + offset;
        let d = near + (GUMBEL_SHIFT - gumbel(self.key, self.counter, (self.first_index + j) as u64));
        if d <= self.top.bound() && !self.exclude.excludes(j) {
            self.top.push(d, j);
        }
    }
}

impl DrawSink for SoftmaxOffer<'_, '_, '_> {
    #[inline(always)]
    fn block(&mut self, start: usize, draws: &[f32]) {
        for (i, &p) in draws.iter().enumerate() {
            self.offer(start + i, p as f64);
        }
    }
}

/// Offers tasks `base..base + a.len()` by their softmax key over θ (Thompson draw or mean).
#[inline(always)]
fn score_softmax(a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    let Scoring::Softmax { tau, thompson, seed, counter } = s.scoring else {
        unreachable!("score_softmax is called for softmax scoring only")
    };
    let key = philox_key(seed, counter);
    let first_index = s.first_index;
    let mut sink =
        SoftmaxOffer { top: &mut w.top, target: s.target, inv_tau: 1.0 / tau, key, counter, first_index, base, exclude: &s.exclude };
    if thompson {
        let bad = thompson_chunk(a, b, first_index + base, seed, counter, &mut w.scratch, &mut sink);
        w.flag_invalid(bad.map(|j| j - first_index));
        return;
    }
    for i in 0..a.len() {
        if !(is_shape(a[i]) && is_shape(b[i])) {
            w.invalid = w.invalid.or(Some(base + i));
            continue;
        }
        sink.offer(i, a[i] / (a[i] + b[i]));
    }
}

/// Scores one chunk's tasks and offers them to the worker's top-B list.
#[inline(always)]
fn score_chunk(a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    match s.scoring {
        Scoring::Greedy => score_greedy(a, b, base, s, w),
        Scoring::Softmax { .. } => score_softmax(a, b, base, s, w),
        Scoring::Thompson { seed, counter } => {
            let mut sink = Offer { top: &mut w.top, target: s.target as f32, base, exclude: &s.exclude };
            // Draws keyed by global index; the invalid task reported back as a slice position.
            let bad = thompson_chunk(a, b, s.first_index + base, seed, counter, &mut w.scratch, &mut sink);
            w.flag_invalid(bad.map(|j| j - s.first_index));
        }
    }
}

/// One chunk of a step: the update (if any), then the scoring (if any).
#[inline(always)]
fn step_chunk(a: &mut [f64], b: &mut [f64], base: usize, u: Option<&ChunkUpdate>, s: Option<&ChunkScore>, w: &mut Worker<'_>) {
    if let Some(u) = u {
        update_chunk(a, b, base, u);
    }
    if let Some(s) = s {
        score_chunk(a, b, base, s, w);
    }
}

/// Runs one chunk of a step (update and/or scoring) on `simd`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_step_chunk(
    simd: SimdPath,
    a: &mut [f64],
    b: &mut [f64],
    base: usize,
    u: Option<&ChunkUpdate>,
    s: Option<&ChunkScore>,
    w: &mut Worker<'_>,
) {
    simd.dispatch(
        #[inline(always)]
        || step_chunk(a, b, base, u, s, w),
    )
}

/// Scores one chunk of a read-only posterior on `simd`.
pub(crate) fn run_score_chunk(simd: SimdPath, a: &[f64], b: &[f64], base: usize, s: &ChunkScore, w: &mut Worker<'_>) {
    simd.dispatch(
        #[inline(always)]
        || score_chunk(a, b, base, s, w),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;
    use crate::simd_path::available_simd_paths;
    use crate::types::CHUNK;

    #[test]
    fn selection_is_identical_on_every_simd_path() {
        let n = 5 * CHUNK + 11;
        let mut r = Xoshiro256pp::from_seed(3);
        let a: Vec<f64> = (0..n).map(|i| if i % 97 == 0 { 0.4 } else { 1.0 + 30.0 * r.open01() }).collect();
        let b: Vec<f64> = (0..n).map(|_| 1.0 + 30.0 * r.open01()).collect();
        let score = ChunkScore { target: 0.5, scoring: Scoring::Thompson { seed: 5, counter: 2 }, exclude: Exclude::None, first_index: 0 };
        let mut results = Vec::new();
        for simd in available_simd_paths() {
            let shared = TopK::shared_bound(None);
            let mut worker = Worker::new(300, &shared);
            for (c, (ca, cb)) in a.chunks(CHUNK).zip(b.chunks(CHUNK)).enumerate() {
                run_score_chunk(simd, ca, cb, c * CHUNK, &score, &mut worker);
            }
            results.push(worker.finish(0).unwrap().ids);
        }
        assert!(results.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(results[0], crate::select(&a, &b, 300, 0.5, score.scoring, Exclude::None).unwrap());
    }
}
