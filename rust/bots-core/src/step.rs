//! The entry points: one parallel pass over the pool that updates every posterior and selects
//! the top B, fused so that each chunk is updated and then scored while it is still in cache;
//! and the update-only and select-only forms of it.

use rayon::prelude::*;

use crate::error::Result;
use crate::score::{run_score_chunk, run_step_chunk, ChunkScore, Worker};
use crate::simd_path;
use crate::topk::TopK;
use crate::types::{
    invalid_task, pool_len, Batch, Evidence, Exclude, Prior, Scoring, SelectArgs, Selection, UpdateArgs, UpdateParams, CHUNK,
};
use crate::update_kernel::ChunkUpdate;

/// Applies `update` (if any) to every task, then selects (if asked) from the updated posterior.
///
/// Every argument is validated before anything is written: on an invalid argument the posterior
/// is unchanged. A selection also checks the posterior it scores (every alpha and beta must be
/// finite and positive, which valid updates of a valid posterior keep): it reports the first
/// invalid task as an error naming `alpha` or `beta`, after this step's update has been applied.
pub fn step(alpha: &mut [f64], beta: &mut [f64], update: Option<UpdateArgs>, select: Option<SelectArgs>) -> Result<Option<Selection>> {
    step_shard(alpha, beta, 0, update, select)
}

/// [`step`] over a shard of a larger pool: `alpha` and `beta` hold tasks
/// `first_index..first_index + alpha.len()` of it. The selection draws every task's random
/// variates (Thompson draw, softmax Gumbel key) with its global index, so it ranks each task
/// exactly as a selection over the whole pool does, and returns global ids with their distances.
/// The global top-B is then the first B of the shards' selections merged by (distance, id).
/// Everything else is slice-local: the update's batch ids, per-task priors and evidence, the
/// exclusions, and the index an error names are positions in `alpha`.
pub fn step_shard(
    alpha: &mut [f64],
    beta: &mut [f64],
    first_index: usize,
    update: Option<UpdateArgs>,
    select: Option<SelectArgs>,
) -> Result<Option<Selection>> {
    let n = pool_len(alpha, beta)?;
    if let Some(u) = &update {
        u.validate(n)?;
    }
    if let Some(s) = &select {
        s.validate(n)?;
    }
    let rolled = update.as_ref().map(|u| u.rolled_values(alpha, beta)).unwrap_or_default();
    let chunk_update = update.as_ref().map(|u| ChunkUpdate {
        prior_alpha: u.prior_alpha,
        prior_beta: u.prior_beta,
        evidence: u.evidence,
        decay: 1.0 - u.params.lam,
        lam: u.params.lam,
        weight: u.params.rho * u.params.n_rollouts,
        rolled: &rolled,
    });
    let chunk_score =
        select.as_ref().filter(|s| s.k > 0).map(|s| ChunkScore { target: s.target, scoring: s.scoring, exclude: s.exclude, first_index });
    if chunk_update.is_none() && chunk_score.is_none() {
        return Ok(select.map(|_| Selection::empty()));
    }
    let k = select.as_ref().map_or(0, |s| s.k);
    let simd = simd_path::simd_path();
    let shared = TopK::shared_bound(select.and_then(|s| s.hint));
    let best = alpha
        .par_chunks_mut(CHUNK)
        .zip(beta.par_chunks_mut(CHUNK))
        .enumerate()
        .fold(
            || Worker::new(k, &shared),
            |mut worker, (c, (a, b))| {
                run_step_chunk(simd, a, b, c * CHUNK, chunk_update.as_ref(), chunk_score.as_ref(), &mut worker);
                worker
            },
        )
        .reduce(|| Worker::new(k, &shared), Worker::merge);
    match select {
        None => Ok(None),
        Some(s) => {
            let chosen = best.finish(first_index).map_err(|j| invalid_task(alpha, beta, j))?;
            if chosen.ids.len() < s.k && s.hint.is_some() {
                // The hint was tighter than the k-th distance: select again, without it, from the
                // posterior this pass has just updated (same draws, so the same result as one pass).
                return select_shard(alpha, beta, first_index, SelectArgs { hint: None, ..s }).map(Some);
            }
            Ok(Some(chosen))
        }
    }
}

/// Selection from a read-only posterior (see [`step`]).
pub fn select_only(alpha: &[f64], beta: &[f64], args: SelectArgs) -> Result<Selection> {
    select_shard(alpha, beta, 0, args)
}

/// [`select_only`] over a shard holding tasks `first_index..first_index + alpha.len()` of a
/// larger pool (see [`step_shard`]).
pub fn select_shard(alpha: &[f64], beta: &[f64], first_index: usize, args: SelectArgs) -> Result<Selection> {
    let n = pool_len(alpha, beta)?;
    args.validate(n)?;
    if args.k == 0 {
        return Ok(Selection::empty());
    }
    let score = ChunkScore { target: args.target, scoring: args.scoring, exclude: args.exclude, first_index };
    let simd = simd_path::simd_path();
    let shared = TopK::shared_bound(args.hint);
    let best = alpha
        .par_chunks(CHUNK)
        .zip(beta.par_chunks(CHUNK))
        .enumerate()
        .fold(
            || Worker::new(args.k, &shared),
            |mut worker, (c, (a, b))| {
                run_score_chunk(simd, a, b, c * CHUNK, &score, &mut worker);
                worker
            },
        )
        .reduce(|| Worker::new(args.k, &shared), Worker::merge);
    let chosen = best.finish(first_index).map_err(|j| invalid_task(alpha, beta, j))?;
    if chosen.ids.len() < args.k && args.hint.is_some() {
        // See `step`: a too-tight hint; the full selection without it.
        return select_shard(alpha, beta, first_index, SelectArgs { hint: None, ..args });
    }
    Ok(chosen)
}

/// Applies one step's update to every task (see [`step`]). On error nothing is modified.
pub fn update(
    alpha: &mut [f64],
    beta: &mut [f64],
    prior_alpha: Prior,
    prior_beta: Prior,
    batch: &Batch,
    evidence: Evidence,
    params: UpdateParams,
) -> Result<()> {
    let args = UpdateArgs { prior_alpha, prior_beta, batch, evidence, params };
    step(alpha, beta, Some(args), None).map(|_| ())
}

/// Returns the `k` selectable tasks whose estimated success rate is nearest `target`, best
/// first, ties to the lower index (see [`select_only`]). Fails if fewer than `k` tasks are
/// selectable.
pub fn select(alpha: &[f64], beta: &[f64], k: usize, target: f64, scoring: Scoring, exclude: Exclude) -> Result<Vec<usize>> {
    select_only(alpha, beta, SelectArgs { k, target, scoring, exclude, hint: None }).map(|s| s.ids)
}
