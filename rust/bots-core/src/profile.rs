//! Diagnostics: where one Thompson step spends its time, stage by stage, on the calling thread.
//!
//! [`thompson_stages`] runs the production kernels over a pool cumulatively (Philox words only;
//! then also the normals; then also the gamma attempts; the whole draw with its retries; the
//! draw offered to a top-B list; the fused update + draw + offer), on one SIMD path and one thread,
//! and reports the best of several passes of each in ns per task of the thread's CPU time. A stage's own cost is the
//! difference between consecutive cumulative figures. The update pass alone is timed too.

use std::time::Instant;

use crate::lanes::BLOCK;
use crate::rng::Xoshiro256pp;
use crate::score::{run_step_chunk, ChunkScore, Worker};
use crate::simd_path::SimdPath;
use crate::thompson::{gamma_stage, normal_stage, philox_key, philox_stage, retry_block, Scratch};
use crate::topk::TopK;
use crate::types::{Evidence, Exclude, Prior, Scoring, CHUNK};
use crate::update_kernel::ChunkUpdate;

/// Cumulative ns per task of each stage of a Thompson step on one thread.
#[derive(Clone, Debug)]
pub struct StageTimes {
    pub simd_path: SimdPath,
    pub tasks: usize,
    /// (name, ns per task up to and including this stage), in pipeline order: `philox`,
    /// `normals`, `gammas`, `draw` (with retries), `select` (draw offered to the top-B list),
    /// `step` (update + select).
    pub cumulative: Vec<(&'static str, f64)>,
    /// ns per task of the update pass alone (interpolation evidence, scalar priors).
    pub update: f64,
}

impl StageTimes {
    /// Each stage's own cost: the differences of the cumulative figures.
    pub fn own(&self) -> Vec<(&'static str, f64)> {
        let mut last = 0.0;
        self.cumulative
            .iter()
            .map(|&(name, t)| {
                let own = t - last;
                last = t;
                (name, own)
            })
            .collect()
    }

    /// One JSON object (no dependency on a JSON crate).
    pub fn to_json(&self) -> String {
        let obj = |v: &[(&str, f64)]| v.iter().map(|(k, t)| format!("\"{k}\": {t:.3}")).collect::<Vec<_>>().join(", ");
        format!(
            "{{\"simd_path\": \"{}\", \"tasks\": {}, \"threads\": 1, \"unit\": \"ns/task\", \"cumulative\": {{{}}}, \"own\": {{{}}}, \"update\": {:.3}}}",
            self.simd_path.name(),
            self.tasks,
            obj(&self.cumulative),
            obj(&self.own()),
            self.update
        )
    }
}

/// The first try's stages over one chunk, up to stage `UPTO` (1: Philox, 2: + normals,
/// 3: + gammas, 4: + retries); a constant, so each variant compiles as production code does.
#[inline(always)]
fn partial_chunk<const UPTO: u8>(a: &[f64], b: &[f64], base: usize, seed: u64, counter: u64, sc: &mut Scratch) {
    let key = philox_key(seed, counter);
    let mut start = 0;
    while start < a.len() {
        let m = BLOCK.min(a.len() - start);
        let (ab, bb) = (&a[start..start + m], &b[start..start + m]);
        philox_stage(sc, base + start, m, counter, key);
        if UPTO >= 2 {
            normal_stage(sc, ab, bb);
        }
        if UPTO >= 3 && !gamma_stage(sc, m) && UPTO >= 4 {
            retry_block(sc, ab, bb, base + start, seed, counter, key);
        }
        start += m;
    }
}

fn philox_on(simd: SimdPath, a: &[f64], b: &[f64], base: usize, seed: u64, counter: u64, sc: &mut Scratch) {
    simd.dispatch(
        #[inline(always)]
        || partial_chunk::<1>(a, b, base, seed, counter, sc),
    )
}

fn normals_on(simd: SimdPath, a: &[f64], b: &[f64], base: usize, seed: u64, counter: u64, sc: &mut Scratch) {
    simd.dispatch(
        #[inline(always)]
        || partial_chunk::<2>(a, b, base, seed, counter, sc),
    )
}

fn gammas_on(simd: SimdPath, a: &[f64], b: &[f64], base: usize, seed: u64, counter: u64, sc: &mut Scratch) {
    simd.dispatch(
        #[inline(always)]
        || partial_chunk::<3>(a, b, base, seed, counter, sc),
    )
}

fn draw_on(simd: SimdPath, a: &[f64], b: &[f64], base: usize, seed: u64, counter: u64, sc: &mut Scratch) {
    simd.dispatch(
        #[inline(always)]
        || partial_chunk::<4>(a, b, base, seed, counter, sc),
    )
}

/// Seconds of CPU time the calling thread has used (so that other processes sharing the cores
/// do not inflate the figures); wall-clock time where the platform offers no thread clock.
fn thread_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            tv_sec: i64,
            tv_nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut t = Timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec (two 64-bit fields on 64-bit Linux) to a
        // valid pointer.
        if cfg!(target_pointer_width = "64") && unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
            return t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9;
        }
    }
    use std::sync::OnceLock;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Best of `reps` timings of `pass` (thread CPU time), in ns per task.
fn best_of(reps: usize, tasks: usize, mut pass: impl FnMut(u64)) -> f64 {
    (0..reps.max(1))
        .map(|r| {
            let t = thread_seconds();
            pass(r as u64 + 1);
            (thread_seconds() - t) * 1e9 / tasks as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Times each stage of a Thompson step (B = 256, target 0.5) over a pool of `tasks` tasks with
/// shapes uniform in [1, 31), on `simd` and the calling thread, best of `reps` passes.
pub fn thompson_stages(simd: SimdPath, tasks: usize, reps: usize) -> StageTimes {
    let tasks = tasks.max(CHUNK);
    let mut r = Xoshiro256pp::from_seed(1);
    let mut a: Vec<f64> = (0..tasks).map(|_| 1.0 + 30.0 * r.open01()).collect();
    let mut b: Vec<f64> = (0..tasks).map(|_| 1.0 + 30.0 * r.open01()).collect();
    let weak: Vec<f32> = (0..tasks).map(|_| (r.next_u64() % 17) as f32 / 16.0).collect();
    let strong: Vec<f32> = weak.iter().map(|&x| (x + 0.25).min(1.0)).collect();
    let mut sc = Scratch::new();
    let seed = 7;
    let mut cumulative = Vec::new();
    type Stage = fn(SimdPath, &[f64], &[f64], usize, u64, u64, &mut Scratch);
    let stages: [(&str, Stage); 4] = [("philox", philox_on), ("normals", normals_on), ("gammas", gammas_on), ("draw", draw_on)];
    for (name, stage) in stages {
        let t = best_of(reps, tasks, |counter| {
            for (c, (ca, cb)) in a.chunks(CHUNK).zip(b.chunks(CHUNK)).enumerate() {
                stage(simd, ca, cb, c * CHUNK, seed, counter, &mut sc);
            }
        });
        cumulative.push((name, t));
    }
    let ev = Evidence::Interpolation { weak: &weak, strong: &strong, mu: 0.4 };
    let rolled: Vec<(usize, f64, f64)> = Vec::new();
    let upd = ChunkUpdate {
        prior_alpha: Prior::Scalar(1.0),
        prior_beta: Prior::Scalar(1.0),
        evidence: ev,
        decay: 0.999,
        lam: 0.001,
        weight: 0.0,
        rolled: &rolled,
    };
    let score = ChunkScore { target: 0.5, scoring: Scoring::Thompson { seed, counter: 0 }, exclude: Exclude::None, first_index: 0 };
    let fused = |a: &mut [f64], b: &mut [f64], u: Option<&ChunkUpdate>, s: Option<&ChunkScore>| {
        let shared = TopK::shared_bound(None);
        let mut worker = Worker::new(256, &shared);
        for (c, (ca, cb)) in a.chunks_mut(CHUNK).zip(b.chunks_mut(CHUNK)).enumerate() {
            run_step_chunk(simd, ca, cb, c * CHUNK, u, s, &mut worker);
        }
        std::hint::black_box(worker.finish(0).ok());
    };
    let select = best_of(reps, tasks, |counter| {
        let s = ChunkScore { scoring: Scoring::Thompson { seed, counter }, ..score };
        fused(&mut a, &mut b, None, Some(&s))
    });
    cumulative.push(("select", select));
    let step = best_of(reps, tasks, |counter| {
        let s = ChunkScore { scoring: Scoring::Thompson { seed, counter }, ..score };
        fused(&mut a, &mut b, Some(&upd), Some(&s))
    });
    cumulative.push(("step", step));
    let update = best_of(reps, tasks, |_| fused(&mut a, &mut b, Some(&upd), None));
    StageTimes { simd_path: simd, tasks, cumulative, update }
}
