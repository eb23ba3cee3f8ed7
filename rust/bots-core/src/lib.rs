//! Pure Rust core of bots-rft: Bayesian Online Task Selection (BOTS).
//!
//! Each task keeps a Beta(alpha, beta) posterior over its success probability. [`update`] folds a
//! step's rollout results (explicit evidence, a [`Batch`] built by [`aggregate`]) and predictions
//! for the other tasks (implicit [`Evidence`]) into every posterior; [`select`] picks the tasks
//! whose sampled ([`Scoring::Thompson`]) or mean ([`Scoring::Greedy`]) success rate is nearest a
//! target; [`step`] does both in one pass over the pool. The crate has no Python dependency;
//! `bots-py` binds it. Every public function checks its input and returns a [`CoreError`] naming
//! the argument.
//!
//! Determinism contract: task j's Thompson draw in a selection is a function of
//! `(seed, selection counter, j, alpha_j, beta_j)` only (counter-based Philox4x32-10 streams, see
//! [`thompson_draws`]), so results do not depend on the number of threads, the chunking, the
//! instruction set or the other tasks, and a restored selection counter reproduces the same draws.
//!
//! # Layout
//!
//! Modules form layers; a module uses only modules of lower layers (no cycles):
//!
//! 1. `error` ([`CoreError`]); `rng` (scalar xoshiro streams); `lanes` (element-wise Philox,
//!    `ln`, `sincos` that the vectoriser widens); `simd_path` ([`SimdPath`] detection
//!    and [`SimdPath::dispatch`], the one place a kernel is compiled per instruction set).
//! 2. `types`: the vocabulary ([`Prior`], [`Evidence`], [`Batch`], [`UpdateArgs`],
//!    [`SelectArgs`], [`Selection`], ...) and the checks of each input.
//! 3. `sampler`: the exact scalar f64 Beta sampler ([`beta_draws`]).
//! 4. `batch`: [`aggregate`] and [`batch_capability`]; `update_kernel`: the update rule over one
//!    chunk; `thompson`: the vectorised Thompson draw of one chunk ([`thompson_draws`]); `topk`:
//!    the running top-B list with its shared admission bound.
//! 5. `score`: one chunk scored (greedy or Thompson) into a worker's top-B list, and the fused
//!    per-chunk pass, compiled per SIMD path.
//! 6. `step`: the parallel passes over the pool ([`step`], [`select_only`], [`update`], [`select`]).
//!
//! `profile` (diagnostics) times the Thompson draw's stages one by one on the calling thread.

mod batch;
mod error;
mod lanes;
pub mod profile;
mod rng;
mod sampler;
mod score;
mod simd_path;
mod step;
mod thompson;
mod topk;
mod types;
mod update_kernel;

#[cfg(test)]
mod tests;

pub use batch::{aggregate, batch_capability};
pub use error::{CoreError, ErrorKind, Result};
pub use sampler::beta_draws;
pub use simd_path::{available_simd_paths, set_simd_path, simd_path, SimdPath};
pub use step::{select, select_only, select_shard, step, step_shard, update};
pub use thompson::{thompson_draws, thompson_draws_at};
pub use types::{
    check_evidence, Batch, Evidence, Exclude, Prior, Scoring, SelectArgs, Selection, UpdateArgs, UpdateParams, CHUNK, DEFAULT_MIN_GAP,
};
